"""The scheduler's total order over candidate jobs, and Least-Attained-Service bands.

Candidates are ordered by, in this order (a total order: the last criterion is unique):

1. priority, higher first;
2. LAS rank, lower first (``LeastAttainedService`` only; 0 for the FIFO strategies);
3. ``queued_time``, earlier first;
4. ``creation_time``, earlier first;
5. namespace, then name, then the plan key (alphabetical).

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

from datetime import datetime

from lattice.scheduler.core.types import JobView, SchedulerConfig

__all__ = [
    "OrderKey",
    "aged_growth_cap",
    "band_upper_bound",
    "is_aged",
    "las_band",
    "las_rank",
    "order_key",
]

OrderKey = tuple[int, int, datetime, datetime, str, str, str]


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


def order_key(job: JobView, *, queued_time: datetime, rank: int = 0) -> OrderKey:
    """Sort key of ``job`` (ascending sort = scheduling order); see the module docstring.

    ``queued_time`` is passed explicitly because a pass may (re)queue the job at ``now``.
    """
    return (
        -job.priority,
        rank,
        queued_time,
        job.creation_time,
        job.namespace,
        job.name,
        job.key,
    )
