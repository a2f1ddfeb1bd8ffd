"""The effects of admission on each candidate (rule 5), their events and reasons, and wakeups.

Contract (internal to the core, called once per pass after admission and growth):
- :func:`settle` turns each ordered candidate's admission result into its stage, size,
  ``last_resize_time``, service clock, events and reason. The *beneficiary* named by
  ``Shrunk``/``Preempted`` events is the earliest job in order that was newly admitted or
  grew in this pass and holds more units than before (a job of 0-unit pods takes nothing);
  without one, or when the stopped job does not fit even on the empty cluster, the event
  states why capacity was short instead.
- ``reason`` describes the last change when there is one, else the job's current situation;
  it is informational and never part of the persisted state.
- :func:`next_wakeup` returns the earliest instant strictly after ``now`` at which a pass on
  an otherwise unchanged snapshot could decide differently, or ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta

from lattice.primitives.times import format_time
from lattice.scheduler.core.events import Admitted, Grown, Preempted, Shrunk
from lattice.scheduler.core.order import band_upper_bound
from lattice.scheduler.core.requeue import requeue
from lattice.scheduler.core.state import JobState
from lattice.scheduler.core.types import SchedulerConfig, Stage, Strategy
from lattice.scheduler.core.waitreason import preemption_cause

__all__ = ["capacity_used", "next_wakeup", "settle", "waiting_reason"]

# Enum members bound once: looking one up on its class costs more than a global's lookup.
_RUNNING, _WAITING, _COOLDOWN = Stage.RUNNING, Stage.WAITING, Stage.REQUEUE_COOLDOWN


def settle(
    ordered: list[JobState], *, now: datetime, config: SchedulerConfig, capacity: int
) -> None:
    """Rule 5 (and the service clock of rule 8) for every candidate, in scheduling order."""
    beneficiary = next((s for s in ordered if _took_capacity(s)), None)
    for s in ordered:
        if s.admitted:
            _settle_admitted(s, beneficiary=beneficiary, now=now)
            if s.growth_deferred and s.last_resize is not None:
                s.grow_at = s.last_resize + config.resize_interval
                s.reason += f"; may grow at {format_time(s.grow_at)}"
        else:
            _settle_waiting(s, beneficiary=beneficiary, now=now, capacity=capacity, config=config)


def _took_capacity(s: JobState) -> bool:
    """Newly admitted or grown in this pass, holding more units than on input."""
    return s.admitted and s.size > s.held and s.view.units_at(s.size) > s.view.units_at(s.held)


def _settle_admitted(s: JobState, *, beneficiary: JobState | None, now: datetime) -> None:
    v = s.view
    s.stage = _RUNNING
    size = s.size
    s.resize(size, now)
    event: Admitted | Grown | Shrunk | None = None
    if not s.held:
        event = Admitted(size=size, min_size=v.min_size, max_size=v.max_size)
        s.since = now
        if s.updated is None or now > s.updated:
            s.updated = now
    elif size > s.held:
        event = Grown(old=s.held, new=size)
    elif size < s.held:
        if s.held > v.max_size and size == v.max_size:
            event = Shrunk(old=s.held, new=size, to_max=True)
        elif beneficiary is None:
            event = Shrunk(old=s.held, new=size)
        else:
            event = Shrunk(
                old=s.held,
                new=size,
                beneficiary=beneficiary.view.display_name,
                beneficiary_admitted=not beneficiary.held,
            )
    if event is not None:
        s.events.append(event)
        s.reason = event.message
    else:
        s.reason = _running(size, v.min_size, v.max_size)


_REASONS: dict[tuple[int, int, int], str] = {}


def _running(size: int, low: int, high: int) -> str:
    """The reason of a job left running as it was (one string per size, min and max)."""
    found = _REASONS.get((size, low, high))
    if found is None:
        found = f"Running with {size} (min {low}, max {high})"
        if len(_REASONS) < 4096:
            _REASONS[size, low, high] = found
    return found


def _settle_waiting(
    s: JobState,
    *,
    beneficiary: JobState | None,
    now: datetime,
    capacity: int,
    config: SchedulerConfig,
) -> None:
    v = s.view
    if s.held and s.exclude and not s.victim:
        # kube-scheduler refused placed pods and no other node fits: back off as the pending
        # timeout does, rather than being placed on the same nodes again at once.
        lasted = now - (v.pending_since or now)
        requeue(s, now=now, config=config, lasted=lasted, refused_on=v.refused_nodes)
        return
    s.stage = _WAITING
    s.requeue = None
    why = waiting_reason(s, capacity)
    if s.held:
        if beneficiary is None or s.unfittable:
            event = Preempted(old=s.held, detail=why)
        else:
            event = Preempted(
                old=s.held,
                beneficiary=beneficiary.view.display_name,
                beneficiary_priority=beneficiary.view.priority,
                cause=preemption_cause(s, beneficiary),
            )
        s.events.append(event)
        why = event.message
    s.resize(0, now)
    s.reason = why


def waiting_reason(s: JobState, capacity: int) -> str:
    """Why an unadmitted candidate waits (``capacity``: free units of the empty cluster)."""
    need = s.view.units_at(s.view.min_size)
    if s.detail:
        if s.unfittable:
            return f"cannot be placed even on an empty cluster: {s.detail}"
        if s.blocker is not None:
            return f"Waiting at position {s.position} behind {s.blocker.display_name} (StrictFIFO)"
        return f"Waiting at position {s.position}: {s.detail}"
    if s.unfittable:
        reason = f"needs {_units(need)}; the cluster has {capacity}"
        if need <= capacity:
            reason += " but no node placement fits"
        return reason
    if s.blocker is not None:
        return f"Waiting at position {s.position} behind {s.blocker.display_name} (StrictFIFO)"
    reason = f"Waiting at position {s.position}: needs {_units(need)}, {s.free_at_check} free"
    if need <= s.free_at_check:
        reason += " but fragmented across nodes"
    return reason


def _units(n: int) -> str:
    return f"{n} unit" if n == 1 else f"{n} units"


def capacity_used(states: Iterable[JobState]) -> int:
    """Units held by the jobs the plan leaves running."""
    return sum(s.view.units_at(s.size) for s in states if s.admitted)


def next_wakeup(
    states: Iterable[JobState], *, now: datetime, config: SchedulerConfig
) -> datetime | None:
    """Earliest instant after ``now`` at which re-running the pass could change something."""
    las = config.strategy == Strategy.LEAST_ATTAINED_SERVICE
    times: list[datetime] = []
    crossing = math.inf  # the earliest band crossing, in seconds from now
    bounds: dict[int, tuple[float | None]] = {}  # each band's upper bound
    for s in states:
        if s.view.finished:
            continue
        if s.stage == _COOLDOWN and s.cooldown is not None:
            times.append(s.cooldown)
        if s.admitted:
            if s.requeue is not None:
                times.append(s.requeue + config.pending_timeout)
            since = s.view.pending_since
            if s.view.refused_nodes and since is not None and not s.exclude:
                times.append(since + config.refusal_grace)
            if s.grow_at is not None:
                times.append(s.grow_at)
            if s.view.refused_since is not None:
                times.append(s.view.refused_since + config.child_refusal_timeout)
            if las:
                bound = bounds.get(s.band)
                if bound is None:
                    bound = bounds[s.band] = (band_upper_bound(s.band, config),)
                units = s.view.units_at(s.size)
                if bound[0] is not None and units > 0:
                    # When its service reaches the next band at its planned size.
                    crossing = min(crossing, (bound[0] - s.attained) / units)
    if crossing < math.inf:
        # ceil and max are monotone: the earliest crossing's instant is the earliest instant.
        times.append(now + timedelta(microseconds=max(1, math.ceil(crossing * 1_000_000))))
    future = [t for t in times if t > now]
    return min(future) if future else None
