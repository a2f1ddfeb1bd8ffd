"""The values a job-kind plugin trades with the reconciler and the scheduler.

Contract: frozen dataclasses and read-only protocols only; no I/O, no clock. ``PodView`` and
``ContainerView`` are structural: the informer cache's slim ``PodInfo`` satisfies them, so this
layer never imports the runtime. ``managed_elsewhere`` reads a raw job's ``managedBy``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

__all__ = [
    "MANAGED_LABEL",
    "NODE_UNIT",
    "OUR_MANAGERS",
    "Children",
    "ContainerView",
    "Demand",
    "InvalidJob",
    "JobNotReady",
    "OperatorContext",
    "PodView",
    "Problem",
    "Progress",
    "ReplicaCounts",
    "RunPolicyView",
    "managed_elsewhere",
]

Obj = dict[str, Any]

#: Every child object Lattice creates carries this label (value "true"); informers select on it.
MANAGED_LABEL = "lattice.breezeml.ai/managed"
#: ``managedBy`` values that mean "this operator": upstream's own controller names (we replace
#: them). Any other value (e.g. ``kueue.x-k8s.io/multikueue``) hands the job to someone else.
OUR_MANAGERS = frozenset(
    {
        "kubeflow.org/training-operator",
        "kubeflow.org/mpi-operator",
        "trainer.kubeflow.org/trainjob-controller",
        "breezeml.ai/lattice",
    }
)
#: ``RESOURCE_SCHEDULING_UNIT`` value meaning "one replica takes one whole node".
NODE_UNIT = "node"


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorContext:
    """Operator-wide settings and cluster facts the plugins read (values, never clients).

    ``priority_classes`` maps PriorityClass names to values; ``default_priority`` is the value of
    the globalDefault PriorityClass (0 when there is none). ``runtimes`` maps
    ``"TrainingRuntime/<ns>/<name>"`` and ``"ClusterTrainingRuntime//<name>"`` to raw objects.
    """

    scheduling_unit: str = NODE_UNIT
    node_selector: tuple[tuple[str, str], ...] = ()
    rdzv_backend: str = ""
    rdzv_service_endpoint: str = ""
    rdzv_service_port: str = ""
    checkpoint_type: str = "remote"
    checkpoint_service_endpoint: str = ""
    checkpoint_service_port: str = ""
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    default_priority: int = 0
    runtimes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def node_mode(self) -> bool:
        """Whether a replica takes one whole node (``RESOURCE_SCHEDULING_UNIT=node``)."""
        return self.scheduling_unit == NODE_UNIT


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a job is invalid: the field path (``spec.replicaSpecs...``) and the rule."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class InvalidJob(Exception):
    """Raised by ``parse`` for a job the operator cannot run; carries every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


class JobNotReady(Exception):
    """Raised by ``parse`` when an input of the job is missing or unusable for now (a runtime):
    the job waits with condition reason ``reason`` and ``message``; it is never failed for it."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        self.message = message
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class Demand:
    """What the scheduler needs from one job (see ``lattice.scheduler.core.types.JobView``)."""

    priority: int = 0
    min_size: int = 1
    max_size: int = 1
    fixed_pods: tuple[int, ...] = ()
    replica_units: int = 1
    suspended: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPolicyView:
    """The kind's run policy, normalised (Kubeflow ``runPolicy`` semantics).

    ``service_cleanup``: which Services the clean-up of a finished job deletes along with the
    pods (unless ``clean_pod_policy`` is None): ``All`` of them; ``WithPods``, the Service named
    like each deleted pod (training-operator); ``None`` (mpi-operator cleans only the workers
    and keeps its one Service).
    """

    clean_pod_policy: str = "None"  # All | Running | None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    service_cleanup: str = "All"  # All | WithPods | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Children:
    """The desired child objects of a job, as complete manifests.

    The reconciler creates what is missing and deletes owned objects no longer desired. Pods,
    Services, Secrets and batch Jobs are never updated once created (a Secret holding generated
    material is create-only); a ConfigMap whose ``data`` differs is updated in place (the MPI
    hostfile follows the running workers).
    """

    pods: tuple[Obj, ...] = ()
    services: tuple[Obj, ...] = ()
    config_maps: tuple[Obj, ...] = ()
    secrets: tuple[Obj, ...] = ()
    jobs: tuple[Obj, ...] = ()


class ContainerView(Protocol):
    """One container's observed state (``lattice.runtime.projections.ContainerInfo``)."""

    @property
    def name(self) -> str: ...
    @property
    def restart_count(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def last_exit_code(self) -> int | None: ...


class PodView(Protocol):
    """One observed child pod (``lattice.runtime.projections.PodInfo``)."""

    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def disruption(self) -> str | None: ...
    @property
    def ready(self) -> bool: ...
    @property
    def node_name(self) -> str | None: ...
    @property
    def replica_type(self) -> str | None: ...
    @property
    def replica_index(self) -> int | None: ...
    @property
    def containers(self) -> Sequence[ContainerView]: ...
    @property
    def creation_timestamp(self) -> datetime | None: ...
    @property
    def deletion_timestamp(self) -> datetime | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaCounts:
    """Kubeflow ``replicaStatuses[type]``: pods active, succeeded and failed."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """The kind's status rules applied to the observed pods.

    ``running``: every desired pod is running (the Running condition). ``succeeded`` /
    ``failed`` (a message) end the job. ``restarting``: failed pods are being recreated
    (``recreate`` names them; the reconciler deletes them and counts a restart against
    ``backoffLimit``). ``replicas`` feeds ``replicaStatuses``.
    """

    replicas: Mapping[str, ReplicaCounts] = field(default_factory=dict)
    running: bool = False
    succeeded: bool = False
    failed: str | None = None
    failed_reason: str | None = None
    restarting: bool = False
    recreate: tuple[str, ...] = ()


def managed_elsewhere(obj: Mapping[str, Any]) -> bool:
    """Whether ``spec.runPolicy.managedBy`` / ``spec.managedBy`` names another controller.

    Upstream controllers ignore such jobs entirely (no children, no status); so do the
    reconciler and the scheduler.
    """
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return False
    run_policy = spec.get("runPolicy")
    value = run_policy.get("managedBy") if isinstance(run_policy, Mapping) else None
    if value is None:
        value = spec.get("managedBy")
    return isinstance(value, str) and bool(value) and value not in OUR_MANAGERS
