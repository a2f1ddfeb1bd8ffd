"""The scheduler's total order over candidate jobs, and Least-Attained-Service bands.

Candidates are ordered by, in this order (a total order: the last criterion is unique):

1. priority, higher first;
2. rank, lower first: -1 for a *protected* job (below), then the LAS rank (``LeastAttainedService``
   only; 0 for the FIFO strategies);
3. ``queued_time``, earlier first (persisted to the microsecond);
4. incumbency: a running job before one that holds nothing, and running jobs by
   ``admitted_time``, earlier first (a running job without one, persisted by an older version,
   counts as admitted before any other);
5. ``creation_time``, earlier first;
6. namespace, then name, then the plan key (alphabetical).

Criteria 1-3 are the policy; 4-6 only break ties. Because incumbency comes before every
tie-break, a running job is never stopped for an equal-priority job that ties with it on the
policy's keys: only a higher priority, a lower rank or an earlier ``queued_time`` puts a
job ahead of a running one. Every key is persisted (``admitted_time`` too), so a restarted
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

Starvation guard (promotion), stated in the job's own service and wait: a job's *service time*
``S`` is its attained service divided by the units it holds at ``max_size`` (how long it has
run, in full-size seconds). A waiting job is *promoted* when its time since ``queued_time`` is
at least ``slowdown_limit`` (``K``) times ``S``. A running job admitted at ``a`` is promoted
when ``(a - queued_time) + K * (now - a) >= K * S``: at its admission this is the waiting rule,
and since ``S`` grows no faster than ``now - a`` while it runs, a job promoted when it starts
stays promoted until it stops (no churn), while a job running below its full size can gain the
promotion. Once stopped, the waiting rule applies again: a job that ran ``t`` while promoted
waits about ``(K - 1) t`` before its next promotion, so every job gets at least about ``1 / K``
of the time it spends in the queue, whatever its length. (A running job without
``admitted_time``, persisted by an older version, is judged by the waiting rule.) Only band 1
and above are promoted; within a priority the LAS rank is 0 for band 0, 1 for every promoted
job, and ``band + 1`` for the others: promoted jobs come after the least served ones (band 0,
which finish fast) and before every other job, first come first served among themselves. The
state is derived from persisted fields only (``queued_time``, ``admitted_time`` and
``attained_service``).

All functions are pure and take ``now`` explicitly.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from lattice.scheduler.core.types import JobView, SchedulerConfig, Stage

__all__ = [
    "EARLIEST",
    "NOT_RUNNING",
    "OrderKey",
    "aged_growth_cap",
    "band_upper_bound",
    "full_units",
    "incumbency",
    "is_promoted",
    "is_protected",
    "las_band",
    "las_rank",
    "micros",
    "order_key",
    "promotion_time",
    "service_time",
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


def micros(delta: timedelta) -> int:
    """``delta`` in whole microseconds (exact)."""
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def service_time(attained: float, units: int) -> float:
    """Service in full-size seconds: ``attained`` unit-seconds over ``units`` at full size."""
    return attained / units if units > 0 else 0.0


def is_promoted(
    *,
    band: int,
    queued_time: datetime,
    attained: float,
    units: int,
    now: datetime,
    config: SchedulerConfig,
    admitted: datetime | None = None,
) -> bool:
    """Whether a job in ``band`` is promoted at ``now`` (see the module docstring).

    ``units``: its units at full size; ``admitted``: when it was admitted, for a job that runs
    (``None`` for a waiting job, or a running one without ``admitted_time``).
    """
    if band == 0:
        return False
    k = config.slowdown_limit
    if admitted is None:
        credit = float(micros(now - queued_time))
    else:
        credit = micros(admitted - queued_time) + k * micros(now - admitted)
    return credit >= k * service_time(attained, units) * 1_000_000


def promotion_time(
    *, band: int, queued_time: datetime, attained: float, units: int, config: SchedulerConfig
) -> datetime | None:
    """When a waiting job becomes promoted (``None`` in band 0, or beyond year 9999):
    ``queued_time`` plus ``K`` times its service time, rounded up to the microsecond."""
    if band == 0:
        return None
    bar = math.ceil(config.slowdown_limit * service_time(attained, units) * 1_000_000)
    try:
        return queued_time + timedelta(microseconds=bar)
    except OverflowError:
        return None  # beyond the calendar: never


def is_protected(job: JobView) -> bool:
    """Whether a running ``job`` may only be stopped by a higher priority (module docstring)."""
    return job.min_size == job.max_size and not job.preemptible_within_priority


def aged_growth_cap(job: JobView) -> int:
    """The size up to which an aged job grows before later jobs are admitted: the middle of its
    range, ``(min_size + max_size) // 2``."""
    return (job.min_size + job.max_size) // 2


def las_rank(band: int, *, aged: bool) -> int:
    """The LAS rank: 0 for band 0, 1 for a promoted job, ``band + 1`` for the others."""
    if band == 0:
        return 0
    return 1 if aged else band + 1


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

    ``queued_time`` is passed explicitly because a pass may (re)queue the job at ``now``;
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
