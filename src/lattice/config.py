"""Every operator setting, settled once from defaults, environment and flags (flags win).

``Settings`` is one pydantic model. Each field names its flag and the environment variables that
set it; the seed operator's names (``RESOURCE_SCHEDULING_UNIT``, ``LATTICE_JOB_NODE_SELECTOR_PATH``,
``RDZV_BACKEND``, ``RDZV_SERVICE_ENDPOINT``, ``RDZV_SERVICE_PORT``, ``ADDONS_CHECKPOINT_TYPE``,
``CHECKPOINT_SERVICE_ENDPOINT``, ``CHECKPOINT_SERVICE_PORT``) keep working. ``add_arguments`` adds
the flags to an argparse parser and ``load_settings`` merges the three sources; the configuration
reference in the docs is generated from ``FIELDS``. Durations parse with
:func:`lattice.durations.parse_seconds` (seconds or Go durations). Bad input raises
:class:`SettingsError`, one line per problem naming the flag or environment variable it came
from, the value and the rule (``--resize-interval=-5: must be greater than or equal to 0``).
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lattice.durations import parse_seconds

__all__ = [
    "FIELDS",
    "KINDS",
    "SettingDoc",
    "Settings",
    "SettingsError",
    "add_arguments",
    "load_settings",
]

KINDS: tuple[str, ...] = ("TrainingJob", "MPIJob", "MXJob", "TrainJob")


class Settings(BaseModel):
    """The operator's configuration. Durations are seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- connection and scope
    kubeconfig: str | None = Field(None, description="kubeconfig path; in-cluster config if unset")
    context: str | None = Field(None, description="kubeconfig context")
    service_account_dir: str = Field(
        "/var/run/secrets/kubernetes.io/serviceaccount",
        description="in-cluster token and ca.crt directory (used when no kubeconfig is given)",
    )
    namespaces: tuple[str, ...] = Field((), description="namespaces to watch; empty means all")
    enabled_kinds: tuple[str, ...] = Field(KINDS, description="job kinds to reconcile")
    qps: float = Field(100.0, ge=0, description="client-side API requests per second (0: no limit)")
    burst: int = Field(200, ge=0, description="client-side API burst")
    workers: int = Field(
        4, ge=1, le=256, description="concurrent reconciles per kind (plus one for resizes only)"
    )
    # --- process
    metrics_addr: str = Field(":8080", description="address of /metrics")
    probe_addr: str = Field(":8081", description="address of /healthz and /readyz")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log level")
    log_format: Literal["json", "console"] = Field("json", description="log format")
    leader_elect: bool = Field(False, description="run leader election on a Lease")
    leader_election_id: str = Field("lattice-operator", description="name of the leader Lease")
    leader_election_namespace: str = Field("", description="namespace of the Lease (default: own)")
    lease_duration: float = Field(15.0, gt=0, description="leader lease duration")
    renew_deadline: float = Field(10.0, gt=0, description="leader renew deadline")
    retry_period: float = Field(2.0, gt=0, description="leader election retry period")
    shutdown_timeout: float = Field(20.0, gt=0, description="bound on draining reconciles")
    watch_failure_timeout: float = Field(
        30.0,
        gt=0,
        description="/readyz answers 503 once a list/watch has been failing this long",
    )
    pod_name: str = Field("", description="this pod's name (leader identity, event source)")
    pod_namespace: str = Field("", description="this pod's namespace")
    # --- scheduling (seed names kept)
    scheduling_unit: str = Field(
        "node",
        description=(
            "the unit in which attained service, events and kubectl columns are expressed: "
            "`node` or a resource name such as `nvidia.com/gpu`. Pods are always placed by "
            "their effective requests, whatever the unit. `node`: a TrainingJob worker takes a "
            "whole node (one worker per node, no other Lattice pod beside it) and counts 1; a "
            "worker of any other kind counts 1 and an auxiliary pod (MPI launcher, MXNet "
            "scheduler or server, initializer) 0, each placed by its requests. A resource name: "
            "each pod counts its request of that resource (possibly 0) and no pod takes a whole "
            "node. `node` stays the default: it keeps the seed's TrainingJob semantics and lets "
            "the upstream examples of every kind run unchanged side by side on an ordinary GPU "
            "or CPU cluster, where a GPU unit would count every CPU-only pod as 0"
        ),
    )
    node_selector_path: str | None = Field(
        None,
        description=(
            "file of key=value node-selector lines, merged into every Lattice pod's nodeSelector "
            "(on a key both set, the file wins) and into the scheduler's constraint for it"
        ),
    )
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO", "LeastAttainedService"] = Field(
        "LeastAttainedService", description="scheduler admission strategy"
    )
    resize_interval: float = Field(30.0, ge=0, description="minimum time between growths of a job")
    pending_timeout: float = Field(
        300.0,
        gt=0,
        description=(
            "a running job whose pod kube-scheduler has reported Unschedulable this long is "
            "requeued (image pulls and container creation do not count)"
        ),
    )
    child_refusal_timeout: float = Field(
        60.0,
        gt=0,
        description=(
            "a running job whose children the apiserver has refused this long (403 from "
            "admission or RBAC, a name taken by another object) is requeued and releases its "
            "capacity"
        ),
    )
    requeue_limit: int | None = Field(
        None,
        ge=0,
        description=(
            "how many times a job may be requeued (pods pending past the pending timeout, "
            "children refused); the next time it fails with reason RequeueLimitExceeded, "
            "quoting kube-scheduler's last message, as Kueue's backoffLimitCount. Unset: no limit"
        ),
    )
    cooldown_base: float = Field(60.0, gt=0, description="first requeue cooldown")
    cooldown_max: float = Field(10800.0, gt=0, description="cap of the exponential cooldown")
    slowdown_limit: float = Field(
        4.0,
        ge=0,
        allow_inf_nan=False,
        description=(
            "LAS starvation guard K: past the first band, jobs are ordered by queued time plus K x "
            "their band's service over their units at full size"
        ),
    )
    starvation_limit: float | None = Field(
        None, gt=0, description="deprecated and ignored (the fixed aging limit): use slowdown_limit"
    )
    # --- pod environment (seed names kept)
    rdzv_backend: str = Field("", description="rendezvous backend; `etcd` selects etcd-v2")
    rdzv_service_endpoint: str = Field("", description="rendezvous service host")
    rdzv_service_port: str = Field("", description="rendezvous service port")
    checkpoint_type: str = Field("remote", description="checkpoint addon type")
    checkpoint_service_endpoint: str = Field("", description="checkpoint service host")
    checkpoint_service_port: str = Field("", description="checkpoint service port")

    @field_validator("starvation_limit")
    @classmethod
    def _deprecated_starvation_limit(cls, v: float | None) -> float | None:
        if v is not None:
            warnings.warn(
                "--starvation-limit (LATTICE_STARVATION_LIMIT) is deprecated and ignored: the "
                "fixed aging limit was replaced by --slowdown-limit (LATTICE_SLOWDOWN_LIMIT)",
                FutureWarning,
                stacklevel=2,
            )
        return v

    @field_validator("enabled_kinds")
    @classmethod
    def _known_kinds(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [k for k in v if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown kinds {unknown}; known: {list(KINDS)}")
        return v


@dataclass(frozen=True, slots=True)
class SettingDoc:
    """How one setting is spelled on the command line and in the environment."""

    field: str
    flag: str
    env: tuple[str, ...]


def _doc(field: str, *env: str) -> SettingDoc:
    return SettingDoc(field=field, flag="--" + field.replace("_", "-"), env=env)


FIELDS: tuple[SettingDoc, ...] = (
    _doc("kubeconfig", "KUBECONFIG"),
    _doc("context", "LATTICE_CONTEXT"),
    _doc("namespaces", "LATTICE_NAMESPACES", "MONITOR_NAMESPACE"),
    _doc("enabled_kinds", "LATTICE_ENABLED_KINDS"),
    _doc("qps", "LATTICE_QPS"),
    _doc("burst", "LATTICE_BURST"),
    _doc("workers", "LATTICE_WORKERS"),
    _doc("metrics_addr", "LATTICE_METRICS_ADDR"),
    _doc("probe_addr", "LATTICE_PROBE_ADDR"),
    _doc("log_level", "LOG_LEVEL", "LATTICE_LOG_LEVEL"),
    _doc("log_format", "LOG_FORMAT", "LATTICE_LOG_FORMAT"),
    _doc("leader_elect", "LATTICE_LEADER_ELECT"),
    _doc("leader_election_id", "LATTICE_LEADER_ELECTION_ID"),
    _doc("leader_election_namespace", "LATTICE_LEADER_ELECTION_NAMESPACE"),
    _doc("lease_duration", "LATTICE_LEASE_DURATION"),
    _doc("renew_deadline", "LATTICE_RENEW_DEADLINE"),
    _doc("retry_period", "LATTICE_RETRY_PERIOD"),
    _doc("shutdown_timeout", "LATTICE_SHUTDOWN_TIMEOUT"),
    _doc("watch_failure_timeout", "LATTICE_WATCH_FAILURE_TIMEOUT"),
    _doc("service_account_dir", "LATTICE_SERVICE_ACCOUNT_DIR"),
    _doc("pod_name", "POD_NAME"),
    _doc("pod_namespace", "POD_NAMESPACE"),
    _doc("scheduling_unit", "RESOURCE_SCHEDULING_UNIT"),
    _doc("node_selector_path", "LATTICE_JOB_NODE_SELECTOR_PATH"),
    _doc("queueing_strategy", "LATTICE_QUEUEING_STRATEGY"),
    _doc("resize_interval", "LATTICE_RESIZE_INTERVAL"),
    _doc("pending_timeout", "LATTICE_PENDING_TIMEOUT"),
    _doc("child_refusal_timeout", "LATTICE_CHILD_REFUSAL_TIMEOUT"),
    _doc("requeue_limit", "LATTICE_REQUEUE_LIMIT"),
    _doc("cooldown_base", "LATTICE_COOLDOWN_BASE"),
    _doc("cooldown_max", "LATTICE_COOLDOWN_MAX"),
    _doc("slowdown_limit", "LATTICE_SLOWDOWN_LIMIT"),
    _doc("starvation_limit", "LATTICE_STARVATION_LIMIT"),
    _doc("rdzv_backend", "RDZV_BACKEND"),
    _doc("rdzv_service_endpoint", "RDZV_SERVICE_ENDPOINT"),
    _doc("rdzv_service_port", "RDZV_SERVICE_PORT"),
    _doc("checkpoint_type", "ADDONS_CHECKPOINT_TYPE"),
    _doc("checkpoint_service_endpoint", "CHECKPOINT_SERVICE_ENDPOINT"),
    _doc("checkpoint_service_port", "CHECKPOINT_SERVICE_PORT"),
)

_TUPLES = {"namespaces", "enabled_kinds"}
_BOOLS = {"leader_elect"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting; unset flags stay ``None`` so env and defaults apply."""
    for doc in FIELDS:
        info = Settings.model_fields[doc.field]
        help_text = f"{info.description} (env: {', '.join(doc.env)}; default: {info.default!r})"
        if doc.field in _BOOLS:
            parser.add_argument(
                doc.flag,
                dest=doc.field,
                default=None,
                action=argparse.BooleanOptionalAction,
                help=help_text,
            )
        else:
            parser.add_argument(doc.flag, dest=doc.field, default=None, help=help_text)


def _parse_env(field: str, raw: str) -> Any:
    if field in _TUPLES:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if field in _BOOLS:
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    return raw


_DURATIONS = {
    "lease_duration",
    "renew_deadline",
    "retry_period",
    "shutdown_timeout",
    "watch_failure_timeout",
    "resize_interval",
    "pending_timeout",
    "child_refusal_timeout",
    "cooldown_base",
    "cooldown_max",
    "starvation_limit",
}


class SettingsError(ValueError):
    """Invalid settings: ``problems`` has one line per bad value, naming where it came from."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


def _rule(error: Mapping[str, Any]) -> str:
    """pydantic's message as a rule: ``Input should be ...`` -> ``must be ...``."""
    msg = str(error.get("msg") or "is invalid")
    for prefix, plain in (("Input should be", "must be"), ("Value error, ", "")):
        if msg.startswith(prefix):
            msg = plain + msg[len(prefix) :]
    if msg.startswith("Extra inputs are not permitted"):
        return "is not a setting"
    return msg.strip()


def load_settings(
    args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Defaults, then the environment, then flags; raises :class:`SettingsError` on bad input."""
    environ = os.environ if env is None else env
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    problems: list[str] = []
    for doc in FIELDS:
        for name in doc.env:
            if environ.get(name):
                values[doc.field] = _parse_env(doc.field, environ[name])
                origin[doc.field] = f"{name}={environ[name]}"
                break
        flag_value = getattr(args, doc.field, None) if args is not None else None
        if flag_value is not None:
            values[doc.field] = (
                _parse_env(doc.field, flag_value) if isinstance(flag_value, str) else flag_value
            )
            origin[doc.field] = f"{doc.flag}={flag_value}"
        if doc.field in _DURATIONS and doc.field in values:
            try:
                values[doc.field] = parse_seconds(values[doc.field])
            except ValueError as exc:
                problems.append(f"{origin[doc.field]}: {exc}")
                del values[doc.field]
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            where = origin.get(field, field or "settings")
            problems.append(f"{where}: {_rule(error)}")
    if problems:
        raise SettingsError(problems)
    return settings


def env_names(fields: Sequence[SettingDoc] = FIELDS) -> dict[str, str]:
    """Environment variable → setting name, for documentation."""
    return {name: doc.field for doc in fields for name in doc.env}
