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

__all__ = [
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


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """Policy knobs. Every duration is a ``timedelta``; service is in unit-seconds.

    ``starvation_limit`` is LAS's aging limit: a job in band 1 or above queued at least this long
    ago is aged (rule 2 of :mod:`lattice.scheduler.core.core`). 0 ages every job once it leaves
    band 0 (LAS then serves band 0 first and everything else first come first served).

    Evidence for the defaults (``lattice simulate``, linear speedup, min = ceil(units/2),
    max = 2 x units, 30 s restarts; ratios to fifo-backfill, avg / p99 JCT; docs/simulate.md).
    Tuned on five virtual clusters of the Philly trace (0e4a51, 103959, 7f04ca, 2869ce,
    ed69ec), each at the capacities where fifo-backfill uses about 60, 75 and 90 %:

    - ``strategy`` LeastAttainedService: on 0e4a51 (64/50/40 GPUs) 0.58/0.49/0.75 avg with
      1.03/1.00/0.97 p99; StrictFIFO 0.77/0.99/1.79 avg, BestEffortFIFO 0.69/0.86/1.59. Under
      saturation the order in which work is served dominates; a FIFO order cannot beat backfill.
    - ``starvation_limit`` 3 days, the aging that bounds LAS's tail. Without aging p99 reaches
      1.43 (0e4a51) and 2.20 (103959). The best fixed limit differs per cluster (it scales with
      the length of its longest jobs): over the 15 runs, 3 days keeps every p99 <= 1.04
      (geometric mean of avg 0.67); 10 days 1.56 on 103959 (0.65); 20 days 2.15 (0.60).
      3 days costs average JCT where jobs run for weeks (7f04ca: 1.05/0.80/0.82 avg vs
      0.85/0.75/0.82 at 10 days).
    - Aged jobs grow first only to the middle of their range (rule 4). With the sublinear
      ``--speedup mix`` on 0e4a51 at 64/40 GPUs, growing them first to their maximum gave
      0.72/1.04 avg with p99 1.43/1.39; the cap gives 0.47/0.66 with p99 0.95/0.93. With linear
      speedup it costs at most 0.04 of p99 on 0e4a51 (without any growth first, aged jobs ran
      at their minimum and p99 was 1.27-1.40 at 64 GPUs).
    - ``resize_interval`` 30 s: JCT was identical from 0 to 1800 s and resizes per job 1.5-2.1
      at every value (30 s guards against flapping the simulator does not model).
    - ``las_first_band``/``las_band_multiplier``/``las_bands`` 1 unit-hour, x10, 4 bands: with
      aging, 2 to 6 bands changed avg JCT by at most 0.01 (without it, 6 bands x4: 0.50 at 40 GPUs
      for 1.31 p99). These two were measured on 0e4a51 with the earlier 10-day limit and
      uncapped growth of aged jobs, not again since.
    - ``cooldown_max`` is Lattice's historical flat cooldown (3 h), used as the backoff cap.
    """

    strategy: Strategy = Strategy.LEAST_ATTAINED_SERVICE
    resize_interval: timedelta = timedelta(seconds=30)
    pending_timeout: timedelta = timedelta(minutes=5)
    cooldown_base: timedelta = timedelta(seconds=60)
    cooldown_max: timedelta = timedelta(hours=3)
    starvation_limit: timedelta = timedelta(days=3)
    las_first_band: float = 3600.0
    las_band_multiplier: float = 10.0
    las_bands: int = 4

    def __post_init__(self) -> None:
        zero = timedelta(0)
        for name in ("resize_interval", "pending_timeout", "starvation_limit"):
            if getattr(self, name) < zero:
                raise ValueError(f"{name} must not be negative")
        if self.cooldown_base <= zero or self.cooldown_max < self.cooldown_base:
            raise ValueError("need 0 < cooldown_base <= cooldown_max")
        if self.las_first_band <= 0 or self.las_band_multiplier <= 1 or self.las_bands < 1:
            raise ValueError("need las_first_band > 0, las_band_multiplier > 1, las_bands >= 1")


@dataclass(frozen=True, slots=True)
class NodeView:
    """Units available to Lattice on one node.

    The loop has already dropped unready, unschedulable and non-matching nodes and subtracted
    the units held by foreign pods; Lattice's own pods are *not* subtracted (the core re-packs
    every Lattice job on each pass). Negative values are treated as 0.
    """

    name: str
    free_units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JobView:
    """What the scheduler needs to know about one job, any kind.

    ``pending_since`` is the earliest time a pod of this job has been Pending, as observed by
    the loop (``None`` if no pod is pending); it is only read while the job is ``Running``.
    ``attained_service`` is in unit-seconds, accrued up to ``service_updated_at``.
    ``admitted_time`` is when the job last went from holding nothing to running (``None`` while it
    holds nothing); it orders incumbents among jobs that tie on the policy's keys.
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
    attained_service: float = 0.0
    service_updated_at: datetime | None = None
    admitted_time: datetime | None = None
    suspended: bool = False
    finished: bool = False

    @property
    def display_name(self) -> str:
        """``namespace/name``, as used in messages."""
        return f"{self.namespace}/{self.name}"

    def units_at(self, size: int) -> int:
        """Units held by this job at ``size`` (0 for size 0)."""
        if size <= 0:
            return 0
        return sum(self.fixed_pods) + (size - len(self.fixed_pods)) * self.replica_units

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
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """Everything one scheduling pass sees. Input order of ``nodes`` and ``jobs`` is irrelevant."""

    nodes: tuple[NodeView, ...]
    jobs: tuple[JobView, ...]
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
