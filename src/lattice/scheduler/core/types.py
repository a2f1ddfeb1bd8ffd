"""Input values of the scheduler core: configuration, nodes, jobs and the snapshot.

Contract:
- Every value is a frozen ``dataclass(slots=True)``; the core never mutates its inputs.
- Every ``datetime`` is timezone-aware (UTC). Mixing naive and aware values is a caller error.
- Units are abstract non-negative integers (GPUs, or 1 per node in node mode). A job's *size*
  counts all of its pods: ``size > 0`` means the fixed pods plus ``size - len(fixed_pods)``
  elastic replicas of ``replica_units`` each; ``size == 0`` means the job holds nothing.
- Nothing here knows about a job kind: the ``kind`` string is carried for messages only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from lattice.primitives.keys import kind_key as job_key
from lattice.scheduler.core.model import UNIT_RESOURCE, PodDemand, Resources, Taint, resources

__all__ = [
    "JobChanges",
    "JobView",
    "NodeView",
    "SchedulerConfig",
    "Snapshot",
    "Stage",
    "Strategy",
    "job_key",
]


class Strategy(enum.StrEnum):
    """Admission strategy (rule 3 of :mod:`lattice.scheduler.core.core`)."""

    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    LEAST_ATTAINED_SERVICE = "LeastAttainedService"


class Stage(enum.StrEnum):
    """Job stages the scheduler reads or writes. Other strings are passed through untouched."""

    NEW = ""
    WAITING = "Waiting"
    RUNNING = "Running"
    REQUEUE_COOLDOWN = "RequeueCooldown"
    COMPLETED = "Completed"
    WRONG = "Wrong"
    #: Set once by the requeue limit (:mod:`lattice.scheduler.core.requeue`), then passed through.
    FAILED = "Failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """Policy knobs. Every duration is a ``timedelta``; service is in unit-seconds.

    ``refusal_grace``: a node where kube-scheduler refused a placed pod counts as refused
    (the pod is placed again elsewhere) once the job's pods have been Unschedulable this long,
    so that a refusal kube-scheduler is about to retry (a victim's pod just gone) is not acted
    on. ``slowdown_limit`` (``K``) is LAS's starvation guard: past band 0, jobs are ordered by
    ``queued_time`` plus ``K`` times the lower bound of their band over their units at full
    size (:mod:`lattice.scheduler.core.order`). The LAS bands start
    at ``las_first_band`` unit-seconds and grow by ``las_band_multiplier``; ``las_bands`` counts
    them (the last is open). ``cooldown_base`` doubles per requeue up to ``cooldown_max``. The
    evidence for each default is in docs/simulate.md. ``child_refusal_timeout``: a running job
    whose children the apiserver has refused this long (``JobView.refused_since``) is requeued.
    ``requeue_limit``: how many requeues a job may have; the one after fails it (stage
    ``Failed``, as Kueue's ``backoffLimitCount``); ``None``: unlimited.
    """

    strategy: Strategy = Strategy.LEAST_ATTAINED_SERVICE
    resize_interval: timedelta = timedelta(seconds=30)
    pending_timeout: timedelta = timedelta(minutes=5)
    refusal_grace: timedelta = timedelta(seconds=30)
    child_refusal_timeout: timedelta = timedelta(seconds=60)
    cooldown_base: timedelta = timedelta(seconds=60)
    cooldown_max: timedelta = timedelta(hours=3)
    slowdown_limit: float = 4.0
    las_first_band: float = 3600.0
    las_band_multiplier: float = 10.0
    las_bands: int = 4
    requeue_limit: int | None = None

    def __post_init__(self) -> None:
        zero = timedelta(0)
        for name in (
            "resize_interval",
            "pending_timeout",
            "refusal_grace",
            "child_refusal_timeout",
        ):
            if getattr(self, name) < zero:
                raise ValueError(f"{name} must not be negative")
        if self.requeue_limit is not None and self.requeue_limit < 0:
            raise ValueError("requeue_limit must not be negative")
        if not self.slowdown_limit >= 0:
            raise ValueError("slowdown_limit must not be negative")
        if self.cooldown_base <= zero or self.cooldown_max < self.cooldown_base:
            raise ValueError("need 0 < cooldown_base <= cooldown_max")
        if self.las_first_band <= 0 or self.las_band_multiplier <= 1 or self.las_bands < 1:
            raise ValueError("need las_first_band > 0, las_band_multiplier > 1, las_bands >= 1")


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node as the core sees it.

    ``free`` is what Lattice's placed pods may use: allocatable minus the requests of every live
    pod that is not part of a job's placement (foreign pods, and Lattice pods no placement
    covers any more, until they are gone). When ``free`` is empty the node has ``free_units``
    of :data:`~lattice.scheduler.core.model.UNIT_RESOURCE` (the abstract model of the tests and
    the simulator). ``free_units`` is also the node's capacity in the scheduling unit, for the
    plan's capacity figures. A node that is not ``schedulable`` (cordoned, not Ready) keeps the
    pods placed on it but gets no new ones. Negative quantities count as 0.
    """

    name: str
    free_units: int = 0
    free: Resources = ()
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    schedulable: bool = True

    def free_resources(self) -> Resources:
        """``free``, or ``free_units`` of the unit resource when ``free`` is empty."""
        return self.free or resources({UNIT_RESOURCE: self.free_units})


@dataclass(frozen=True, slots=True, kw_only=True)
class JobView:
    """What the scheduler needs to know about one job, any kind.

    ``pending_since`` is the earliest time kube-scheduler reported a pod of this job
    Unschedulable, as observed by the loop (``None`` if none is); it is only read while the job
    is ``Running``. ``pending_message`` is kube-scheduler's message on that pod (its
    ``PodScheduled`` condition), quoted when the job is requeued or fails its requeue limit.
    ``attained_service`` is in unit-seconds, accrued up to ``service_updated_at``.
    ``admitted_time`` is when the job last went from holding nothing to running (``None`` while it
    holds nothing); it orders incumbents among jobs that tie on the policy's keys.
    ``fixed_demands`` (one per fixed pod) and ``replica_demand`` say what each pod requests and
    where it may run (:meth:`pod_demand`); ``fixed_pods`` and ``replica_units`` stay the pods'
    units in the scheduling unit, which only service, events and columns use. ``placement`` is
    the node of each pod the scheduler placed, by pod index (fixed pods first), as persisted
    (``""``: not placed); ``refused_nodes`` are nodes where kube-scheduler refused a placed pod
    of this job (the core moves those pods and avoids those nodes for the job in this pass).
    ``refused_since`` is when the apiserver began refusing to create a child of this job (its
    reconciler's ``ChildCreateRefused`` condition; ``None``: no refusal), ``refused_message``
    the apiserver's words; only read while the job is ``Running``.
    ``preemptible_within_priority``: a running job with ``min_size == max_size`` may be stopped
    for a job of its own priority only when this is set (it checkpoints, so a restart loses
    little); elastic jobs (``min_size < max_size``) always may. Higher priority always may.
    """

    key: str
    kind: str
    namespace: str
    name: str
    creation_time: datetime
    priority: int = 0
    min_size: int = 1
    max_size: int = 1
    fixed_pods: tuple[int, ...] = ()
    replica_units: int = 1
    stage: str = Stage.NEW
    current_size: int = 0
    submit_time: datetime | None = None
    queued_time: datetime | None = None
    requeue_time: datetime | None = None
    cooldown_time: datetime | None = None
    requeue_count: int = 0
    last_resize_time: datetime | None = None
    pending_since: datetime | None = None
    pending_message: str = ""
    attained_service: float = 0.0
    service_updated_at: datetime | None = None
    admitted_time: datetime | None = None
    suspended: bool = False
    finished: bool = False
    preemptible_within_priority: bool = False
    fixed_demands: tuple[PodDemand, ...] = ()
    replica_demand: PodDemand | None = None
    placement: tuple[str, ...] = ()
    refused_nodes: tuple[str, ...] = ()
    refused_since: datetime | None = None
    refused_message: str = ""

    def pod_demand(self, index: int) -> PodDemand:
        """The :class:`PodDemand` of pod ``index`` (fixed pods first, then replicas).

        Without ``fixed_demands``/``replica_demand``, a pod asks for its units of the unit
        resource, anywhere.
        """
        fixed = self.fixed_pods
        if index < len(fixed):
            if self.fixed_demands:
                return self.fixed_demands[index]
            return PodDemand.of_units(fixed[index])
        if self.replica_demand is not None:
            return self.replica_demand
        return PodDemand.of_units(self.replica_units)

    @property
    def display_name(self) -> str:
        """``namespace/name``, as used in messages."""
        return f"{self.namespace}/{self.name}"

    def units_at(self, size: int) -> int:
        """Units held by this job at ``size`` (0 for size 0)."""
        if size <= 0:
            return 0
        fixed = self.fixed_pods
        if not fixed:
            return size * self.replica_units
        return sum(fixed) + (size - len(fixed)) * self.replica_units

    def problem(self) -> str | None:
        """Why this view cannot be scheduled, or ``None`` when it is valid."""
        fixed = self.fixed_pods
        floor = len(fixed) or 1
        if self.min_size < floor:
            return f"min_size {self.min_size} < {floor} (fixed pods count towards the size)"
        if self.max_size < self.min_size:
            return f"max_size {self.max_size} < min_size {self.min_size}"
        if self.replica_units < 0 or (fixed and min(fixed) < 0):
            return "negative units"
        if self.fixed_demands and len(self.fixed_demands) != len(fixed):
            return f"{len(self.fixed_demands)} fixed pod demands for {len(fixed)} fixed pods"
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobChanges:
    """How a snapshot's ``jobs`` differ from ``base``, an earlier snapshot's ``jobs`` tuple: they
    are ``base`` without the views in ``gone`` and with those in ``added`` (by identity, order
    aside). A caller that gives it must make it true; it only lets a pass find what changed
    without comparing every view, and the plan is the same without it."""

    base: tuple[JobView, ...]
    gone: tuple[JobView, ...]
    added: tuple[JobView, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """Everything one scheduling pass sees. Input order of ``nodes`` and ``jobs`` is irrelevant.
    ``changes`` (optional, see :class:`JobChanges`) never changes the plan."""

    nodes: tuple[NodeView, ...]
    jobs: tuple[JobView, ...]
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    changes: JobChanges | None = field(default=None, compare=False, repr=False)
