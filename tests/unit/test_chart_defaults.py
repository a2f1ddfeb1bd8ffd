"""The Helm chart's defaults are ``lattice run``'s defaults, setting by setting.

Each chart value that becomes a setting is mapped to its ``Settings`` field and parsed as
``load_settings`` parses the environment variable the chart sets; every ``Settings`` field is
either mapped here or named in ``NOT_IN_CHART`` with the reason, so a new setting cannot be
forgotten in the chart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.config import Settings
from lattice.durations import parse_seconds

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "lattice-operator"


def _csv(value: Any) -> tuple[str, ...]:
    parts = value if isinstance(value, list) else str(value).split(",")
    return tuple(p.strip() for p in parts if p.strip())


def _port(value: Any) -> str:
    return f":{value}"


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


#: chart value path -> (Settings field, how the operator reads the value the chart passes).
MAPPED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "monitorNamespace": ("namespaces", _csv),
    "operator.enabledKinds": ("enabled_kinds", _csv),
    "operator.schedulingUnit": ("scheduling_unit", str),
    "operator.queueingStrategy": ("queueing_strategy", str),
    "operator.pendingTimeout": ("pending_timeout", parse_seconds),
    "operator.childRefusalTimeout": ("child_refusal_timeout", parse_seconds),
    "operator.requeueLimit": ("requeue_limit", _opt_int),
    "operator.cooldownBase": ("cooldown_base", parse_seconds),
    "operator.cooldownMax": ("cooldown_max", parse_seconds),
    "operator.resizeInterval": ("resize_interval", parse_seconds),
    "operator.watchFailureTimeout": ("watch_failure_timeout", parse_seconds),
    "operator.slowdownLimit": ("slowdown_limit", float),
    "operator.rendezvous.backend": ("rdzv_backend", str),
    "operator.rendezvous.endpoint": ("rdzv_service_endpoint", str),
    "operator.rendezvous.port": ("rdzv_service_port", str),
    "operator.checkpoint.type": ("checkpoint_type", str),
    "operator.checkpoint.endpoint": ("checkpoint_service_endpoint", str),
    "operator.checkpoint.port": ("checkpoint_service_port", str),
    "operator.logFormat": ("log_format", str),
    "operator.logLevel": ("log_level", str),
    "operator.leaderElection.id": ("leader_election_id", str),
    "operator.leaderElection.leaseDuration": ("lease_duration", parse_seconds),
    "operator.leaderElection.renewDeadline": ("renew_deadline", parse_seconds),
    "operator.leaderElection.retryPeriod": ("retry_period", parse_seconds),
    "operator.shutdownTimeout": ("shutdown_timeout", parse_seconds),
    "operator.workers": ("workers", int),
    "operator.qps": ("qps", float),
    "operator.burst": ("burst", int),
    "service.internalPort": ("metrics_addr", _port),
    "service.probePort": ("probe_addr", _port),
}

#: Settings the chart does not take from a value, and why.
NOT_IN_CHART = {
    "starvation_limit": "deprecated and ignored (replaced by slowdown_limit)",
    "kubeconfig": "in-cluster: the pod's ServiceAccount",
    "context": "in-cluster: no kubeconfig",
    "service_account_dir": "in-cluster: the standard mount",
    "pod_name": "the downward API",
    "pod_namespace": "the downward API",
    "leader_election_namespace": "the release namespace (the pod's own)",
    # A Deployment may run two replicas, so the chart campaigns by default
    # (operator.leaderElection.enabled: true); a process started by hand does not.
    "leader_elect": "operator.leaderElection.enabled, deliberately true in a Deployment",
    "node_selector_path": "operator.jobNodeSelector, written to a mounted file",
}


def _get(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for step in path.split("."):
        node = node[step]
    return node


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    loaded = yaml.safe_load((CHART / "values.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_every_setting_is_mapped_or_excluded_with_a_reason() -> None:
    mapped = {field for field, _ in MAPPED.values()}
    assert not mapped & NOT_IN_CHART.keys()
    assert mapped | NOT_IN_CHART.keys() == set(Settings.model_fields)


@pytest.mark.parametrize("path", sorted(MAPPED))
def test_chart_default_equals_the_binarys(values: dict[str, Any], path: str) -> None:
    field, read = MAPPED[path]
    default = Settings.model_fields[field].default
    assert read(_get(values, path)) == default, f"{path} in values.yaml != --{field} default"


def test_the_schema_knows_every_value_and_rejects_unknown_keys(values: dict[str, Any]) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())

    def walk(node: dict[str, Any], value: dict[str, Any], where: str) -> None:
        if node.get("additionalProperties") is False:
            unknown = set(value) - set(node["properties"])
            assert not unknown, f"{where or 'values'}: {sorted(unknown)} not in the schema"
        for key, sub in value.items():
            spec = (node.get("properties") or {}).get(key)
            if isinstance(sub, dict) and spec and spec.get("type") == "object":
                walk(spec, sub, f"{where}.{key}".lstrip("."))

    assert schema["additionalProperties"] is False
    walk(schema, values, "")
    operator = schema["properties"]["operator"]["properties"]
    assert operator["queueingStrategy"]["enum"] == list(
        Settings.model_fields["queueing_strategy"].annotation.__args__  # type: ignore[union-attr]
    )
    assert operator["logLevel"]["enum"] == list(
        Settings.model_fields["log_level"].annotation.__args__  # type: ignore[union-attr]
    )


INSTALL_DOCS = [
    CHART.parents[2] / "README.md",
    CHART.parents[1] / "README.md",
    CHART / "README.md",
    *sorted((CHART.parents[2] / "docs").glob("*.md")),
]


def test_every_install_doc_uses_one_release_name_and_namespace() -> None:
    """``helm install lattice ... -n lattice-system``: the namespace deploy/ (kustomize) uses."""
    found: list[tuple[str, str, str]] = []
    command = re.compile(
        r"helm (?:install|upgrade --install|uninstall|status)\s+(\S+)(?:\s+\S+)?\s+"
        r"(?:-n|--namespace)[ =](\S+)"
    )
    for doc in INSTALL_DOCS:
        for release, namespace in command.findall(doc.read_text()):
            found.append((doc.name, release, namespace))
    assert len(found) >= 4, found
    assert {(r, n) for _, r, n in found} == {("lattice", "lattice-system")}, found
    kustomize = (CHART.parents[1] / "manager" / "namespace.yaml").read_text()
    assert "name: lattice-system" in kustomize
