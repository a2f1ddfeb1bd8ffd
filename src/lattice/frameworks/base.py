"""The per-kind plugin protocol: everything that differs between TrainingJob, MPIJob, MXJob and
TrainJob, behind one small, pure interface.

Contract:
- A plugin is pure: dicts and models in, values out. No I/O, no clock (``now`` is an argument
  where needed), no randomness. The generic reconciler (``lattice.controllers``) and the
  scheduler loop (``lattice.scheduler.loop``) do every read and write.
- ``parse`` turns the cached raw object into the kind's typed model, raising :class:`InvalidJob`
  with field-named :class:`Problem` values for what the schema could not reject (the job then
  goes to stage ``Wrong`` with a Failed condition, and never reaches the scheduler).
- ``demand`` is what the scheduler needs: priority, min/max size, the units of fixed pods and of
  one elastic replica, and whether the job is suspended. Sizes count every pod of the job.
- ``children(job, size)`` is the complete desired set of child objects for ``size`` (0 means none
  of the sized pods). Names are pure functions of (job, replica type, index); every child carries
  a controller ownerReference to the job and the ``lattice.breezeml.ai/managed`` label.
- ``progress(job, size, pods)`` applies the kind's status rules to the observed pods and says
  whether the job is running, succeeded or failed, and which failed pods to recreate.
- Where the kind keeps the scheduler's state and the Kubeflow execution status in ``status`` is
  given by ``scheduling_path`` and ``exec_path`` (paths of keys from the object root).
- A plugin whose ``run_policy`` has a ``backoff_limit`` leaves no Failed pod unanswered while the
  job runs: each one is either named in ``recreate`` or ends the job (``failed``). The reconciler
  relies on it to count every failure once (see ``lattice.controllers.failure``).

Optional capabilities (looked up with ``isinstance``; a plugin without them gets the defaults):

- :class:`ObservesChildren` (``observed_children``): adjust the desired children to what is
  observed, e.g. hold a launcher until the workers are ready, or list only the Running workers in a
  hostfile script. ``children`` itself stays a function of (job, size).
- ``messages`` (a :class:`Messages`, ``lattice.frameworks.messages``): the kind's wording of
  conditions and events. The default is TrainingJob's; Kubeflow kinds override what upstream
  words differently.
- :class:`StagesChildren` (``staged_children``): children outside the gang (TrainJob
  initializers) and the order in which pods may exist (TrainJob ``dependsOn``), finished staged
  ones kept at every size.
- :class:`PinsInputs`: the job reads another object (a TrainJob's runtime); what it read when it
  started is pinned in an owned ConfigMap and parsed from there ever after.
- :class:`RendersStatus`: the kind's status is not Kubeflow's ``JobStatus``; the reconciler keeps
  its Kubeflow working block and the plugin translates it from and to the stored status.
- :class:`CountsJobs` (``counted_by``): upstream metric families that also count the kind's jobs.
- :class:`ReadsRuntimes` (``names_runtime``): a runtime event re-enqueues the jobs naming it.
- :class:`IgnoresFields` (``ignored_fields``): fields accepted and ignored, each announced by a
  Warning Event ``IgnoredField`` once per generation.

The capability protocols live in ``lattice.frameworks.capabilities`` and the wording in
``lattice.frameworks.messages``; this module re-exports both, so a plugin imports one place. The ML
policies every kind composes (torch, MPI, MXNet) are in ``lattice.frameworks.policies``.

``parse`` may also raise :class:`JobNotReady` (an input the job needs does not exist yet): the
job then waits, unstarted, with a condition saying why, and the scheduler skips it; it is never
failed for it (level-triggered: the next parse may succeed).

Pods are read through :class:`PodView`, a structural protocol that the informer cache's slim
``PodInfo`` satisfies, so this layer never imports the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from lattice.api.constants import Resource
from lattice.frameworks.capabilities import (
    CountsJobs,
    IgnoresFields,
    ObservesChildren,
    PinsInputs,
    ReadsRuntimes,
    RendersStatus,
    StagesChildren,
)
from lattice.frameworks.messages import Messages, messages_of
from lattice.primitives.objects import Obj
from lattice.scheduler.core.model import PodDemand

__all__ = [
    "MANAGED_LABEL",
    "NODE_UNIT",
    "OUR_MANAGERS",
    "Children",
    "ContainerView",
    "CountsJobs",
    "Demand",
    "IgnoresFields",
    "InvalidJob",
    "JobNotReady",
    "JobPlugin",
    "Messages",
    "ObservesChildren",
    "OperatorContext",
    "PinsInputs",
    "PodView",
    "Problem",
    "Progress",
    "ReadsRuntimes",
    "RendersStatus",
    "ReplicaCounts",
    "RunPolicyView",
    "StagesChildren",
    "managed_elsewhere",
    "messages_of",
]

M = TypeVar("M")

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
    """What the scheduler needs from one job (see ``lattice.scheduler.core.types.JobView``).

    ``fixed_pods``/``replica_units`` are units in the scheduling unit (service, events,
    columns); ``fixed_demands`` (one per fixed pod, same order) and ``replica_demand`` are what
    each pod requests and where it may run. ``fixed_names`` names the child that runs each
    fixed pod (a pod, or the batch Job whose pod it is) and replica ``i`` (0-based) is named
    ``f"{replica_prefix}{i}"``: the loop persists the placement by these names, and the
    reconciler binds the child of that name to its node.
    """

    priority: int = 0
    min_size: int = 1
    max_size: int = 1
    fixed_pods: tuple[int, ...] = ()
    replica_units: int = 1
    suspended: bool = False
    preemptible_within_priority: bool = False
    fixed_demands: tuple[PodDemand, ...] = ()
    replica_demand: PodDemand | None = None
    fixed_names: tuple[str, ...] = ()
    replica_prefix: str = ""

    @classmethod
    def of_pods(
        cls,
        *,
        priority: int,
        min_size: int,
        max_size: int,
        fixed: Sequence[PodDemand] = (),
        fixed_names: Sequence[str] = (),
        replica: PodDemand | None,
        replica_prefix: str,
        suspended: bool,
    ) -> Demand:
        """The demand of these pods: the units follow from each pod's demand (a job without an
        elastic replica, ``replica=None``, has ``replica_units`` 0)."""
        return cls(
            priority=priority,
            min_size=min_size,
            max_size=max_size,
            fixed_pods=tuple(p.units for p in fixed),
            replica_units=replica.units if replica is not None else 0,
            suspended=suspended,
            fixed_demands=tuple(fixed),
            replica_demand=replica,
            fixed_names=tuple(fixed_names),
            replica_prefix=replica_prefix,
        )


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
    #: What ``ttl_seconds_after_finished`` deletes: None, the job itself (Kubeflow
    #: ``runPolicy``); else the job's pods and Services and its owned children of these kinds
    #: (JobSet's TTL: the JobSet and what it owns go, the TrainJob stays).
    ttl_children: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Children:
    """The desired child objects of a job, as complete manifests.

    The reconciler creates what is missing and deletes owned objects no longer desired. Pods,
    Services, Secrets, claims and batch Jobs are never updated once created (a Secret holding
    generated material is create-only); a ConfigMap whose ``data`` differs is updated in place
    (the MPI hostfile follows the running workers). ``claims`` are PersistentVolumeClaims; one
    without an ownerReference (a retained claim) counts as existing whenever the cache holds an
    object of its name, and is never deleted.
    """

    pods: tuple[Obj, ...] = ()
    services: tuple[Obj, ...] = ()
    config_maps: tuple[Obj, ...] = ()
    secrets: tuple[Obj, ...] = ()
    jobs: tuple[Obj, ...] = ()
    claims: tuple[Obj, ...] = ()


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


class JobPlugin(Protocol[M]):
    """One job kind. Implementations are stateless; the registry holds one instance per kind."""

    @property
    def resource(self) -> Resource:
        """Group, version, kind and plural of the job's custom resource."""
        ...

    @property
    def scheduling_path(self) -> tuple[str, ...]:
        """Path of the scheduler's state block: ``("status",)`` or ``("status", "lattice")``."""
        ...

    @property
    def exec_path(self) -> tuple[str, ...]:
        """Path of the Kubeflow execution status, e.g. ``("status", "execStatus")``."""
        ...

    def parse(self, obj: Mapping[str, Any], ctx: OperatorContext) -> M:
        """The typed job, or :class:`InvalidJob` naming each field and rule broken."""
        ...

    def demand(self, job: M, ctx: OperatorContext) -> Demand:
        """Priority, size range and units the scheduler works with."""
        ...

    def run_policy(self, job: M) -> RunPolicyView:
        """Clean-up, TTL, deadline and retry policy of the job."""
        ...

    def children(self, job: M, *, size: int, ctx: OperatorContext) -> Children:
        """Every child object the job should have at ``size``."""
        ...

    @property
    def preempted_condition(self) -> str:
        """How a started job that the scheduler stopped shows it: ``"Running"`` (Running=False,
        reason ``<Kind>Waiting``) or ``"Suspended"`` (Suspended=True, reason ``Preempted``, as
        Kubeflow kinds show an external stop; the user's ``suspend`` field is never touched)."""
        ...

    def progress(
        self,
        job: M,
        *,
        size: int,
        pods: Sequence[PodView],
        others: Mapping[str, Mapping[str, Any]],
    ) -> Progress:
        """The kind's status rules over the observed, non-deleted pods of the job.

        ``others`` holds the job's other observed children (batch Jobs, ConfigMaps, Secrets) as
        raw objects keyed ``"<Kind>/<name>"``, e.g. ``"Job/pi-launcher"``.
        """
        ...
