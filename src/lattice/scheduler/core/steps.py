"""The per-job steps of a pass: rules 1, 7 and 8 (preparing a job), and growth (rules 4 and 6).

Contract (internal to the core): each function changes only the :class:`JobState` it is given
(and, for growth, the free-capacity histogram); the rules are stated in
:mod:`lattice.scheduler.core.core`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from lattice.scheduler.core.events import CooldownOver, Queued, Requeued, Suspended, format_time
from lattice.scheduler.core.packing import Histogram
from lattice.scheduler.core.state import JobState
from lattice.scheduler.core.types import SchedulerConfig, Stage

__all__ = ["cooldown_for", "grow", "grow_one", "prepare"]

_OWNED = frozenset({Stage.NEW, Stage.WAITING, Stage.RUNNING, Stage.REQUEUE_COOLDOWN})


def cooldown_for(requeue_count: int, config: SchedulerConfig) -> timedelta:
    """Rule 7 backoff: ``min(cooldown_max, cooldown_base * 2**(requeue_count - 1))``."""
    delay = config.cooldown_base
    for _ in range(max(0, requeue_count - 1)):
        if delay >= config.cooldown_max:
            break
        delay *= 2
    return min(delay, config.cooldown_max)


def prepare(s: JobState, *, now: datetime, config: SchedulerConfig) -> bool:
    """Rules 1, 7 and 8 for one job; return whether it is a candidate."""
    v = s.view
    if v.finished or v.stage not in _OWNED:
        s.size = 0
        s.reason = "Finished" if v.finished else f"Not scheduled in stage {v.stage}"
        return False
    problem = v.problem()
    if problem is not None:
        s.stage, s.size, s.requeue = Stage.WRONG, 0, None
        s.reason = f"Invalid: {problem}"
        return False
    if v.stage == Stage.RUNNING:
        _accrue(s, now)
    if v.suspended:
        s.stage, s.queued, s.requeue, s.cooldown = Stage.WAITING, None, None, None
        s.submit = s.submit or now
        if s.held:
            s.events.append(Suspended(old=s.held))
        s.resize(0, now)
        s.reason = "Suspended"
        return False
    if v.stage == Stage.REQUEUE_COOLDOWN:
        s.requeue = None
        if s.cooldown is not None and s.cooldown > now:
            s.resize(0, now)
            s.reason = f"Cooling down until {format_time(s.cooldown)}"
            return False
        s.stage, s.queued, s.cooldown = Stage.WAITING, now, None
        s.events.append(CooldownOver())
    elif v.stage == Stage.NEW or s.queued is None:
        s.stage, s.queued = Stage.WAITING, now
        s.events.append(Queued())
    s.submit = s.submit or now
    if v.stage != Stage.RUNNING or v.pending_since is None:
        s.requeue = None
        return True
    requeue = v.requeue_time if v.requeue_time is not None else v.pending_since
    if now - requeue < config.pending_timeout:
        s.requeue = requeue
        return True
    s.count = v.requeue_count + 1
    s.stage, s.requeue = Stage.REQUEUE_COOLDOWN, None
    s.cooldown = now + cooldown_for(s.count, config)
    s.events.append(
        Requeued(pending_for=now - requeue, cooldown_until=s.cooldown, requeue_count=s.count)
    )
    s.reason = s.events[-1].message
    s.resize(0, now)
    return False


def _accrue(s: JobState, now: datetime) -> None:
    """Rule 8 for a job that was running on input (time never moves backwards)."""
    if s.updated is None:
        s.updated = now
    elif now > s.updated:
        s.attained += s.view.units_at(s.held) * (now - s.updated).total_seconds()
        s.updated = now


def grow(
    ordered: list[JobState], *, free: Histogram, now: datetime, config: SchedulerConfig
) -> None:
    """Rules 4 and 6: grow admitted jobs toward their target, in order (aged jobs from the
    size their admission gave them)."""
    for s in ordered:
        if s.admitted:
            grow_one(s, free=free, now=now, config=config)


def grow_one(
    s: JobState,
    *,
    free: Histogram,
    now: datetime,
    config: SchedulerConfig,
    up_to: int | None = None,
) -> None:
    """Rules 4 and 6 for one admitted job: from ``s.size`` (its minimum, or what an aged job's
    first growth gave it) toward its target, at most ``up_to``, placing replicas on ``free``."""
    v = s.view
    interval = config.resize_interval
    last = v.last_resize_time
    deferred = False
    if not s.held or not interval or last is None or now - last >= interval:
        target = v.max_size
    else:
        target = max(v.min_size, min(s.held, v.max_size))
        deferred = target < v.max_size
    if up_to is not None:
        target = min(target, up_to)
    size = s.size
    if target > size:
        if v.replica_units > 0:
            size += free.place(v.replica_units, target - size)
        else:
            size = target
    s.size = size
    # Growth held back only by the interval: settle() turns this into a wakeup.
    s.growth_deferred = deferred and size == target and free.fits_one(v.replica_units)
