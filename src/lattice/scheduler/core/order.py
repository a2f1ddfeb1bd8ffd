"""The scheduler's total order over candidate jobs, and Least-Attained-Service bands.

Candidates are ordered by, in this order (a total order: the last criterion is unique):

1. priority, higher first;
2. LAS band, lower first (``LeastAttainedService`` only; 0 for the FIFO strategies);
3. ``queued_time``, earlier first;
4. ``creation_time``, earlier first;
5. namespace, then name, then the plan key (alphabetical).

LAS bands (Tiresias-style discretised least-attained-service): band 0 holds jobs with less
than ``las_first_band`` unit-seconds of service; band ``b`` starts at
``las_first_band * las_band_multiplier ** (b - 1)``; the last band (``las_bands - 1``) is open.
A *waiting* job that has waited at least ``starvation_limit`` is promoted to band 0 of its
priority. It waits since the later of its ``queued_time`` and the moment it was last stopped
(``last_resize_time``): preempted jobs keep their ``queued_time``, so counting from it alone
would promote every preempted job at once and undo LAS preemption.

All functions are pure and take ``now`` explicitly.
"""

from __future__ import annotations

from datetime import datetime

from lattice.scheduler.core.types import JobView, SchedulerConfig

__all__ = [
    "OrderKey",
    "band_upper_bound",
    "las_band",
    "order_key",
    "starved",
    "waiting_since",
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


def waiting_since(*, queued_time: datetime, last_resize_time: datetime | None) -> datetime:
    """When a job that holds nothing started waiting: its queue entry or its last stop."""
    if last_resize_time is not None and last_resize_time > queued_time:
        return last_resize_time
    return queued_time


def starved(
    *,
    queued_time: datetime,
    last_resize_time: datetime | None,
    now: datetime,
    config: SchedulerConfig,
) -> bool:
    """Whether a waiting job has waited at least ``starvation_limit``."""
    since = waiting_since(queued_time=queued_time, last_resize_time=last_resize_time)
    return now - since >= config.starvation_limit


def order_key(job: JobView, *, queued_time: datetime, band: int = 0) -> OrderKey:
    """Sort key of ``job`` (ascending sort = scheduling order); see the module docstring.

    ``queued_time`` is passed explicitly because a pass may (re)queue the job at ``now``.
    """
    return (
        -job.priority,
        band,
        queued_time,
        job.creation_time,
        job.namespace,
        job.name,
        job.key,
    )
