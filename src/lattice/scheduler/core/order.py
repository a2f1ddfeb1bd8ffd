"""The scheduler's total order over candidate jobs, and Least-Attained-Service bands.

Candidates are ordered by, in this order (a total order: the last criterion is unique):

1. priority, higher first;
2. LAS rank, lower first (``LeastAttainedService`` only; 0 for the FIFO strategies);
3. ``queued_time``, earlier first (persisted to the microsecond);
4. incumbency: a running job before one that holds nothing, and running jobs by
   ``admitted_time``, earlier first (a running job without one, persisted by an older version,
   counts as admitted before any other);
5. ``creation_time``, earlier first;
6. namespace, then name, then the plan key (alphabetical).

Criteria 1-3 are the policy; 4-6 only break ties. Because incumbency comes before every
tie-break, a running job is never stopped for an equal-priority job that ties with it on the
policy's keys: only a higher priority, a lower LAS rank or an earlier ``queued_time`` puts a
job ahead of a running one. Every key is persisted (``admitted_time`` too), so a restarted
operator reaches the same order; jobs first queued in the same pass share ``queued_time`` and
are ordered by creation time, then name.

LAS bands (Tiresias-style discretised least-attained-service): band 0 holds jobs with less
than ``las_first_band`` unit-seconds of service; band ``b`` starts at
``las_first_band * las_band_multiplier ** (b - 1)``; the last band (``las_bands - 1``) is open.

Aging: a job in band 1 or above whose ``queued_time`` is at least ``starvation_limit`` ago is
*aged*, waiting or running. Within a priority the LAS rank is 0 for band 0, 1 for every aged
job, and ``band + 1`` for the others: aged jobs come after the least served ones (band 0, which
finish fast) and before every younger job, first come first served among themselves. Age
counts from ``queued_time``, which a preemption keeps, so a job stays aged until it finishes (or
is suspended or requeued after a cooldown, which queue it afresh): its wait is bounded by the
limit plus the aged jobs queued before it, instead of growing with every newer job LAS prefers.
The state is derived from persisted fields only (``queued_time`` and ``attained_service``).

All functions are pure and take ``now`` explicitly.
"""

from __future__ import annotations

from datetime import UTC, datetime

from lattice.scheduler.core.types import JobView, SchedulerConfig, Stage

__all__ = [
    "EARLIEST",
    "NOT_RUNNING",
    "OrderKey",
    "aged_growth_cap",
    "band_upper_bound",
    "incumbency",
    "is_aged",
    "las_band",
    "las_rank",
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


def is_aged(*, band: int, queued_time: datetime, now: datetime, config: SchedulerConfig) -> bool:
    """Whether a job in ``band`` queued at ``queued_time`` is aged at ``now``."""
    return band > 0 and now - queued_time >= config.starvation_limit


def aged_growth_cap(job: JobView) -> int:
    """The size up to which an aged job grows before later jobs are admitted: the middle of its
    range, ``(min_size + max_size) // 2``."""
    return (job.min_size + job.max_size) // 2


def las_rank(band: int, *, aged: bool) -> int:
    """The LAS rank: 0 for band 0, 1 for an aged job, ``band + 1`` for a younger one."""
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
