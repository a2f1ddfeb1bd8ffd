"""The per-job steps of a pass: rules 1, 7 and 8 (preparing a job), and growth (rules 4 and 6).

Contract (internal to the core): each function changes only the :class:`JobState` it is given
(and, for growth, the free-capacity histogram); the rules are stated in
:mod:`lattice.scheduler.core.core`.
"""

from __future__ import annotations

from datetime import datetime

from lattice.primitives.times import format_time
from lattice.scheduler.core.events import CooldownOver, Queued, Suspended
from lattice.scheduler.core.model import PodDemand
from lattice.scheduler.core.placement import Cluster
from lattice.scheduler.core.probe import ReleaseProbe
from lattice.scheduler.core.requeue import cooldown_for, requeue
from lattice.scheduler.core.room import Holders, growth_floor, release_from
from lattice.scheduler.core.state import JobState
from lattice.scheduler.core.types import SchedulerConfig, Stage

__all__ = ["cooldown_for", "grow", "grow_one", "prepare"]

_OWNED = frozenset({Stage.NEW, Stage.WAITING, Stage.RUNNING, Stage.REQUEUE_COOLDOWN})

# Enum members bound once: looking one up on its class costs more than a global's lookup.
_NEW, _WAITING, _RUNNING = Stage.NEW, Stage.WAITING, Stage.RUNNING
_COOLDOWN = Stage.REQUEUE_COOLDOWN


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
    if v.stage == _RUNNING:
        _accrue(s, now)
    if v.suspended:
        s.stage, s.queued, s.requeue, s.cooldown = Stage.WAITING, None, None, None
        s.submit = s.submit or now
        if s.held:
            s.events.append(Suspended(old=s.held))
        s.resize(0, now)
        s.reason = "Suspended"
        return False
    if v.stage == _COOLDOWN:
        s.requeue = None
        if s.cooldown is not None and s.cooldown > now:
            s.resize(0, now)
            s.reason = f"Cooling down until {format_time(s.cooldown)}"
            return False
        s.stage, s.queued, s.cooldown = _WAITING, now, None
        s.events.append(CooldownOver())
    elif v.stage == _NEW or s.queued is None:
        s.stage, s.queued = _WAITING, now
        s.events.append(Queued())
    s.submit = s.submit or now
    refused = v.refused_since if v.stage == _RUNNING and v.current_size > 0 else None
    if refused is not None and now - refused >= config.child_refusal_timeout:
        requeue(s, now=now, config=config, lasted=now - refused, refused_by=v.refused_message)
        return False
    if v.stage != _RUNNING or v.pending_since is None:
        s.requeue = None
        return True
    started = v.requeue_time if v.requeue_time is not None else v.pending_since
    if now - started < config.pending_timeout:
        s.requeue = started
        return True
    requeue(s, now=now, config=config, lasted=now - started)
    return False


def _accrue(s: JobState, now: datetime) -> None:
    """Rule 8 for a job that was running on input (time never moves backwards)."""
    if s.updated is None:
        s.updated = now
    elif now > s.updated:
        s.attained += s.view.units_at(s.held) * (now - s.updated).total_seconds()
        s.updated = now


def grow(
    ordered: list[JobState],
    *,
    free: Cluster,
    now: datetime,
    config: SchedulerConfig,
    holders: Holders | None = None,
) -> None:
    """Rules 4 and 6: grow admitted jobs toward their target, in order."""
    if holders is not None:
        holders.no_room = {}  # the walk's memo was for its order: this walk starts again
        holders.no_fit = {}
    for s in ordered:
        if s.admitted:
            grow_one(s, free=free, now=now, config=config, holders=holders)


def grow_one(
    s: JobState,
    *,
    free: Cluster,
    now: datetime,
    config: SchedulerConfig,
    holders: Holders | None = None,
) -> None:
    """Rules 4 and 6 for one admitted job: from the pods it holds past its minimum (kept where
    they run, up to the first one without a node) toward its target, placing new replicas one
    by one; a replica that finds no room takes the growth of jobs later in order
    (``holders``), latest first."""
    v = s.view
    interval = config.resize_interval
    last = v.last_resize_time
    deferred = False
    if not s.held or not interval or last is None or now - last >= interval:
        target = v.max_size
    else:
        target = max(v.min_size, min(s.held, v.max_size))
        deferred = True
    placed = s.placed
    size = v.min_size
    if size < len(placed) and all(placed[size:]):
        size = len(placed)  # every pod placed: the loop below, at once
    while size < len(placed) and placed[size]:
        size += 1
    if size < len(placed):
        release_from(s, free, size)
        if holders is not None:
            holders.gen += 1
    if size > target:
        release_from(s, free, target)
        size = target
        if holders is not None:
            holders.gen += 1
    while size < target:
        d = v.pod_demand(size)
        node = _place(d, s.exclude, free=free, holders=holders) or _take_growth(
            s, d, free=free, holders=holders
        )
        if node is None:
            break
        placed.append(node)
        size += 1
    s.size = size
    # Growth held back only by the interval: settle() turns this into a wakeup.
    s.growth_deferred = (
        deferred
        and size == target < v.max_size
        and _would_fit(s, v.pod_demand(size), free=free, holders=holders)
    )


def _place(
    d: PodDemand, exclude: frozenset[int], *, free: Cluster, holders: Holders | None
) -> str | None:
    """``free.place(d, exclude)``, skipped when it failed since the last release (a release
    bumps ``holders.gen``; between two, pods are only placed, or released and put back)."""
    if holders is None:
        return free.place(d, exclude)
    memo = (d, exclude)
    if holders.no_fit.get(memo) == holders.gen:
        return None
    node = free.place(d, exclude)
    if node is None:
        holders.no_fit[memo] = holders.gen
    return node


def _would_fit(s: JobState, d: PodDemand, *, free: Cluster, holders: Holders | None) -> bool:
    """Whether ``d`` fits now, or would by taking growth of later jobs; nothing changes."""
    node = _place(d, s.exclude, free=free, holders=holders)
    if node is not None:
        free.release(node, d)
        return True
    released: list[tuple[JobState, int, str]] = []
    node = _take_growth(s, d, free=free, holders=holders, released=released)
    if node is not None:
        free.release(node, d)
    _put_back(released, free)
    return node is not None


def _take_growth(
    s: JobState,
    d: PodDemand,
    *,
    free: Cluster,
    holders: Holders | None,
    released: list[tuple[JobState, int, str]] | None = None,
) -> str | None:
    """Release growth of jobs later in order than ``s``, one pod at a time, latest job and
    highest index first, until ``d`` fits; its node, or ``None`` (nothing stays released
    then). When ``released`` is given, what was released is recorded there and left to the
    caller."""
    key = s.key
    if key is None:
        return None
    keep = released is not None
    released = [] if released is None else released
    if holders is None:
        return None
    memo = (d, s.exclude)
    if not keep and holders.no_room.get(memo) == holders.gen:
        return None
    probe = ReleaseProbe(free, (d,), s.exclude)
    usable = probe.usable
    later = [
        h
        for h in holders.growth_after(key)
        if h is not s and any(map(usable, h.placed[growth_floor(h) :]))
    ]
    for h in later:
        placed = h.placed
        probe.add(
            (placed[i], h.view.pod_demand(i))
            for i in range(growth_floor(h), len(placed))
            if placed[i]
        )
    if not probe.enough():
        holders.no_room[memo] = holders.gen
        return None
    for h in later:
        if h is s:
            continue
        floor = growth_floor(h)
        while len(h.placed) > floor:
            i = len(h.placed) - 1
            node = release_from(h, free, i)[0]
            released.append((h, i, node))
            # Nothing fitted before this release: only its node can hold ``d`` now.
            if node and free.place_on(node, d, s.exclude):
                if not keep:
                    holders.gen += 1
                return node
    if not keep:
        _put_back(released, free)
        holders.no_room[memo] = holders.gen
    return None


def _put_back(released: list[tuple[JobState, int, str]], free: Cluster) -> None:
    """Reserve released growth again, in the reverse order of its release."""
    for h, i, node in reversed(released):
        if node:
            free.reserve(node, h.view.pod_demand(i))
        h.placed.append(node)
