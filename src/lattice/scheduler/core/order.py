"""The scheduler's total order over candidate jobs, and Least-Attained-Service bands.

Candidates are ordered by, in this order (a total order: the last criterion is unique):

1. priority, higher first;
2. rank, lower first: -1 for a *protected* job (below), then the LAS rank (``LeastAttainedService``
   only, 0 for band 0 and 1 past it; 0 for the FIFO strategies);
3. the queue time, earlier first: ``queued_time`` (persisted to the microsecond), under LAS made
   later by the service of the job's band (its *virtual queue time*, below);
4. incumbency: a running job before one that holds nothing, and running jobs by
   ``admitted_time``, earlier first (a running job without one, persisted by an older version,
   counts as admitted before any other);
5. ``creation_time``, earlier first;
6. namespace, then name, then the plan key (alphabetical).

Criteria 1-3 are the policy; 4-6 only break ties. Because incumbency comes before every
tie-break, a running job is never stopped for an equal-priority job that ties with it on the
policy's keys: only a higher priority, a lower rank or an earlier queue time puts a job ahead
of a running one. Every key is persisted (``admitted_time`` too), so a restarted
operator reaches the same order; jobs first queued in the same pass share ``queued_time`` and
are ordered by creation time, then name.

Protection (preemption within a priority): a running job that is not elastic (``min_size ==
max_size``) and has not opted in (``JobView.preemptible_within_priority``) is *protected* from
the instant after its admission (so a pass re-run at the instant of the admission orders and
packs jobs as the admitting pass did): its rank is -1, ahead of every job of its priority, so
only a higher priority can stop it. Such a
job loses its work when stopped (its pods restart from scratch), so an equal-priority job waits
for it instead. An elastic job keeps its LAS rank and can be shrunk (growth is given in order
after every admitted minimum, so a job later in the order shrinks before any job is stopped) or
stopped: it resumes from where it was at the cost of a restart.

LAS bands (Tiresias-style discretised least-attained-service): band 0 holds jobs with less
than ``las_first_band`` unit-seconds of service; band ``b`` starts at
``las_first_band * las_band_multiplier ** (b - 1)``; the last band (``las_bands - 1``) is open.

Ranks and the starvation guard (``LeastAttainedService``), stated in the job's own service and
wait: within a priority, jobs in band 0 have rank 0 and keep their ``queued_time``; every other
job has rank 1 and is ordered by its *virtual queue time* ``queued_time + K * F`` (criterion
3), where ``K`` is ``slowdown_limit`` and ``F`` is the lower bound of the job's band divided by
its units at ``max_size`` (the service it has had at least, in full-size seconds). A job with
more service therefore yields to a less served one queued up to ``K`` times that service later,
and goes before every job queued after its virtual queue time, however little that job has
had: once a job has waited ``K`` times its band's service it is ahead of every later arrival
past band 0, so it cannot starve unless band 0 alone (each job's first ``las_first_band``
unit-seconds) keeps the cluster full. The virtual queue time is fixed while a job waits and
moves only when a running job enters its next band, so the order of waiting jobs never changes
with the clock and a running job can only lose its place at a band change. ``K = 0`` is first
come first served past band 0; a large ``K`` is plain LAS. The key is derived from persisted
fields only (``queued_time``, ``attained_service``).

All functions are pure.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from lattice.scheduler.core.types import JobView, SchedulerConfig, Stage

__all__ = [
    "EARLIEST",
    "NOT_RUNNING",
    "OrderKey",
    "band_lower_bound",
    "band_upper_bound",
    "full_units",
    "incumbency",
    "is_protected",
    "las_band",
    "las_position",
    "order_key",
]

OrderKey = tuple[int, int, datetime, datetime, datetime, str, str, str]

#: Incumbency keys of a running job without ``admitted_time`` and of a job holding nothing.
EARLIEST = datetime.min.replace(tzinfo=UTC)
NOT_RUNNING = datetime.max.replace(tzinfo=UTC)


def las_band(attained_service: float, config: SchedulerConfig) -> int:
    """The band of a job with ``attained_service`` unit-seconds (0 = least served)."""
    band = 0
    threshold = config.las_first_band
    last = config.las_bands - 1
    while band < last and attained_service >= threshold:
        band += 1
        threshold *= config.las_band_multiplier
    return band


def band_upper_bound(band: int, config: SchedulerConfig) -> float | None:
    """Service at which a job leaves ``band`` (``None`` for the last, open band)."""
    if band >= config.las_bands - 1:
        return None
    return config.las_first_band * config.las_band_multiplier**band


def full_units(job: JobView) -> int:
    """Units ``job`` holds at ``max_size``: the denominator of its service time."""
    return job.units_at(job.max_size)


def band_lower_bound(band: int, config: SchedulerConfig) -> float:
    """Service (unit-seconds) at which a job enters ``band`` (0 for band 0)."""
    if band <= 0:
        return 0.0
    return config.las_first_band * config.las_band_multiplier ** (band - 1)


def las_position(
    *, band: int, queued_time: datetime, units: int, config: SchedulerConfig
) -> tuple[int, datetime]:
    """The LAS rank and queue time (criteria 2 and 3) of a job in ``band`` queued at
    ``queued_time`` with ``units`` at full size: ``(0, queued_time)`` in band 0, else ``(1,
    queued_time + K * F)`` (the virtual queue time, module docstring), rounded up to the
    microsecond and capped at the end of the calendar."""
    if band == 0:
        return 0, queued_time
    floor = band_lower_bound(band, config) / units if units > 0 else 0.0
    offset = math.ceil(config.slowdown_limit * floor * 1_000_000)
    try:
        return 1, queued_time + timedelta(microseconds=offset)
    except OverflowError:
        return 1, NOT_RUNNING  # beyond the calendar: after every job with a date


def is_protected(job: JobView) -> bool:
    """Whether a running ``job`` may only be stopped by a higher priority (module docstring)."""
    return job.min_size == job.max_size and not job.preemptible_within_priority


def incumbency(*, running: bool, admitted_time: datetime | None) -> datetime:
    """Criterion 4 of the order: ``admitted_time`` for a running job, :data:`EARLIEST` when a
    running job has none, :data:`NOT_RUNNING` for a job that holds nothing."""
    if not running:
        return NOT_RUNNING
    return EARLIEST if admitted_time is None else admitted_time


def order_key(
    job: JobView, *, queued_time: datetime, rank: int = 0, admitted: datetime | None = None
) -> OrderKey:
    """Sort key of ``job`` (ascending sort = scheduling order); see the module docstring.

    ``queued_time`` (the queue time of criterion 3: under LAS the virtual queue time of
    :func:`las_position`) is passed explicitly because a pass may (re)queue the job at ``now``;
    ``admitted`` (criterion 4, see :func:`incumbency`) because a pass may admit or stop it; by
    default it is the job's own on input.
    """
    if admitted is None:
        admitted = incumbency(
            running=job.stage == Stage.RUNNING and job.current_size > 0,
            admitted_time=job.admitted_time,
        )
    return (
        -job.priority,
        rank,
        queued_time,
        admitted,
        job.creation_time,
        job.namespace,
        job.name,
        job.key,
    )
