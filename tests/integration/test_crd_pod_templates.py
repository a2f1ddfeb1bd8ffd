"""Pod templates are fully typed, and the Trainer v2.0-v2.3 shapes apply, on a real kube-apiserver.

- every case of ``POD_TEMPLATE_TYPOS`` is refused by ``kubectl apply`` with the field named;
- every manifest in ``tests/integration/manifests`` (our own, with the shapes of the official
  runtimes and examples, and one runtime and TrainJob that set every v2.3 field) applies, and
  what the apiserver stores parses into the models and dumps back with every field it had.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from lattice.api import ClusterTrainingRuntime, MXJob, TrainingRuntime, TrainJob
from tests.integration.pod_template_typos import POD_TEMPLATE_TYPOS, TypoCase
from tests.support.cluster import REPO, Cluster, KubectlError

MANIFESTS = sorted((REPO / "tests" / "integration" / "manifests").glob("*.yaml"))
MODELS: dict[str, type[BaseModel]] = {
    "TrainJob": TrainJob,
    "TrainingRuntime": TrainingRuntime,
    "ClusterTrainingRuntime": ClusterTrainingRuntime,
}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(_leaves(item, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


@pytest.mark.parametrize("case", POD_TEMPLATE_TYPOS, ids=[c.id for c in POD_TEMPLATE_TYPOS])
def test_pod_template_typo_is_refused_naming_the_field(
    crds_installed: Cluster, namespace: str, case: TypoCase
) -> None:
    manifest = copy.deepcopy(case.manifest)
    if manifest["kind"] != "ClusterTrainingRuntime":
        manifest["metadata"]["namespace"] = namespace
    with pytest.raises(KubectlError) as err:
        crds_installed.apply(manifest)
    for expected in case.expect:
        assert expected in err.value.stderr, f"expected {expected!r} in:\n{err.value.stderr}"


def test_typo_corpus_covers_every_kind() -> None:
    kinds = {c.manifest["kind"] for c in POD_TEMPLATE_TYPOS}
    assert kinds == {
        "TrainingJob",
        "MPIJob",
        "MXJob",
        "TrainJob",
        "TrainingRuntime",
        "ClusterTrainingRuntime",
    }


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.name for p in MANIFESTS])
def test_trainer_manifest_applies_and_round_trips(
    crds_installed: Cluster, namespace: str, path: Path
) -> None:
    docs = _docs(path)
    crds_installed.apply(path, namespace=namespace)
    try:
        for doc in docs:
            kind, name = doc["kind"], doc["metadata"]["name"]
            scope = [] if kind == "ClusterTrainingRuntime" else ["-n", namespace]
            stored = crds_installed.get_json(f"{kind.lower()}.trainer.kubeflow.org", name, *scope)
            model = MODELS[kind].model_validate(stored)
            dumped = _leaves(model.model_dump(by_alias=True, exclude_none=True, mode="json"))
            written = _leaves(doc["spec"], "spec")
            # an empty object written ({}) may come back filled with its schema defaults
            lost = {
                k: v
                for k, v in written.items()
                if dumped.get(k) != v
                and not (v == {} and any(d.startswith(f"{k}.") for d in dumped))
            }
            assert lost == {}, f"{kind}/{name}: the model dropped or changed {lost}"
    finally:
        for doc in docs:
            if doc["kind"] == "ClusterTrainingRuntime":
                crds_installed.kubectl(
                    "delete", "clustertrainingruntime", doc["metadata"]["name"], "--wait=false"
                )


def test_mxjob_lower_case_replica_keys_apply_and_parse_canonical(
    crds_installed: Cluster, namespace: str
) -> None:
    """training-operator v1.7 accepted ``scheduler:``/``server:``/``worker:``; so do we."""
    pod = {"spec": {"containers": [{"name": "mxnet", "image": "example.com/mxnet:1.9"}]}}
    manifest: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": "lower-case-keys", "namespace": namespace},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "scheduler": {"replicas": 1, "template": pod},
                "server": {"replicas": 1, "template": pod},
                "worker": {"replicas": 2, "template": pod},
            },
        },
    }
    crds_installed.apply(manifest)
    stored = crds_installed.get_json("mxjob", "lower-case-keys", "-n", namespace)
    specs = MXJob.model_validate(stored).spec.mx_replica_specs
    assert list(specs) == ["Scheduler", "Server", "Worker"]
    assert specs["Worker"].replicas == 2
    twice = copy.deepcopy(manifest)
    twice["metadata"]["name"] = "twice"
    twice["spec"]["mxReplicaSpecs"]["Worker"] = {"replicas": 1, "template": pod}
    with pytest.raises(KubectlError) as err:
        crds_installed.apply(twice)
    assert "must not name a replica type twice" in err.value.stderr
