"""``schedule(snapshot, now) -> Plan``: the pure, deterministic, kind-agnostic scheduler pass.

No I/O, no clock (``now`` is an argument), no randomness; unordered inputs are sorted first,
so shuffling ``snapshot.nodes`` or ``snapshot.jobs`` never changes the plan. The policy:

1. *Candidates* are jobs in ``Waiting`` or ``Running`` that are not finished, not suspended
   and valid. A new job (stage ``""``) becomes ``Waiting`` with ``submit_time`` (if unset) and
   ``queued_time`` = now; a ``Waiting``/``Running`` job without ``queued_time`` is queued at
   now; a ``RequeueCooldown`` job whose ``cooldown_time`` <= now becomes ``Waiting`` with a new
   ``queued_time`` = now. Suspended jobs get size 0, stage ``Waiting``, ``queued_time`` None
   (requeued at a fresh time once unsuspended). Finished jobs and stages the scheduler does not
   own (``Completed``, ``Wrong``, anything else) pass through untouched with size 0. A view that
   cannot be scheduled (``JobView.problem()``, e.g. min > max) becomes ``Wrong`` with size 0.
2. Candidates are ordered by :mod:`lattice.scheduler.core.order`: priority desc, [LAS rank],
   queued_time, incumbency (running jobs by ``admitted_time``, then the rest), creation_time,
   namespace/name: a total order. ``admitted_time`` = now when a job is admitted from 0, None
   when it stops. ``LeastAttainedService`` bands
   grow exponentially with attained service. A job in band 1 or above queued at least
   ``starvation_limit`` ago (running or not) is *aged*: it ranks after band 0 and before every
   younger job, first come first served among the aged, until it leaves the queue.
3. *Admission* walks that order and packs each job's minimum (fixed pods + min replicas) onto
   the nodes' free units (:mod:`lattice.scheduler.core.packing`; per node, all-or-nothing).
   ``StrictFIFO`` stops at the first job whose minimum does not fit; ``BestEffortFIFO`` and
   ``LeastAttainedService`` skip it and go on. A job whose minimum does not fit even on the
   empty cluster never blocks: it is skipped with reason "needs N units; the cluster has M".
   Each candidate left waiting gets a 1-based ``queue_position`` among the waiting candidates,
   in this order; admitted jobs have none (as Kueue shows positions of pending workloads only,
   so a running job's status does not change whenever the queue behind it moves).
4. Each admitted job gets its minimum; spare capacity then grows the admitted jobs toward
   their target size in the same order, replica by replica while a replica fits on a node.
   An aged job grows as soon as it is admitted, before any later job is admitted, up to the
   middle of its range (``(min_size + max_size) // 2``, capped by its target), so younger jobs
   cannot hold it at its minimum (a bounded wait is worth little at half speed); it grows past
   that only in the common growth step, in order. The cap keeps aged jobs from taking their
   least efficient replicas (speedup is sublinear in size) ahead of younger jobs' minimums.
5. A running job that is not admitted gets size 0 and goes back to ``Waiting`` keeping its
   ``queued_time``; victims are therefore always later in the order (lower priority, or equal
   priority and queued later; or, under LAS, of a higher rank). Events name the beneficiary:
   the earliest job in order that was newly admitted or grew (taking units) in this pass.
6. Churn control: a ``Running`` job's target is ``max_size`` only when its last resize is at
   least ``resize_interval`` ago (or it never resized, or the interval is 0); otherwise its
   current size (clamped to [min, max]), so it is not shrunk merely because it may not grow.
   A job admitted from 0 targets ``max_size``. ``last_resize_time`` = now whenever the size
   changes.
7. Pending timeout: for a ``Running`` job with ``pending_since`` set, ``requeue_time`` =
   ``requeue_time or pending_since``; once now - requeue_time >= ``pending_timeout`` the job
   goes to ``RequeueCooldown`` with size 0, ``requeue_count`` += 1 and ``cooldown_time`` =
   now + min(cooldown_max, cooldown_base * 2**(requeue_count-1)), releasing its capacity in
   this pass. ``requeue_time`` is None whenever no pod is pending or the job is not running.
8. Attained service: a ``Running`` job accrues units_in_use(current_size) * (now -
   service_updated_at) unit-seconds and ``service_updated_at`` = now; a job admitted now gets
   ``service_updated_at`` = now. Service is never reset.
9. Idempotence: ``schedule(apply(s, schedule(s, now)), now)`` changes nothing and emits no
   events; the same inputs always give the same plan.

``Plan.next_wakeup`` is the earliest time after now at which an unchanged snapshot could get
another plan: a cooldown ending, a pending timeout expiring, a deferred growth becoming
allowed (only when a replica would fit), a LAS band change or a job becoming aged.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from lattice.scheduler.core.effects import capacity_used, next_wakeup, settle
from lattice.scheduler.core.events import CooldownOver, Queued, Requeued, Suspended, format_time
from lattice.scheduler.core.order import (
    NOT_RUNNING,
    OrderKey,
    aged_growth_cap,
    incumbency,
    is_aged,
    las_band,
    las_rank,
    order_key,
)
from lattice.scheduler.core.packing import Histogram, Shape, make_shape
from lattice.scheduler.core.plan import Plan
from lattice.scheduler.core.state import JobState, to_decision
from lattice.scheduler.core.types import SchedulerConfig, Snapshot, Stage, Strategy

__all__ = ["cooldown_for", "schedule"]

_NEVER = NOT_RUNNING
_OWNED = frozenset({Stage.NEW, Stage.WAITING, Stage.RUNNING, Stage.REQUEUE_COOLDOWN})


def cooldown_for(requeue_count: int, config: SchedulerConfig) -> timedelta:
    """Rule 7 backoff: ``min(cooldown_max, cooldown_base * 2**(requeue_count - 1))``."""
    delay = config.cooldown_base
    for _ in range(max(0, requeue_count - 1)):
        if delay >= config.cooldown_max:
            break
        delay *= 2
    return min(delay, config.cooldown_max)


def schedule(snapshot: Snapshot, now: datetime) -> Plan:
    """Run one scheduling pass; see the module docstring for the rules."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    config = snapshot.config
    states: dict[str, JobState] = {}
    for view in snapshot.jobs:
        if view.key in states:
            raise ValueError(f"duplicate job key {view.key!r}")
        states[view.key] = JobState(view)
    keys = sorted(states)
    candidates = [s for s in (states[k] for k in keys) if _prepare(s, now=now, config=config)]
    ordered = _order(candidates, now=now, config=config)
    free = Histogram(node.free_units for node in snapshot.nodes)
    total = free.total
    _admit(ordered, free=free, now=now, config=config)
    _grow(ordered, free=free, now=now, config=config)
    settle(ordered, now=now, config=config, capacity=total)
    all_states = [states[k] for k in keys]
    return Plan(
        decisions={k: to_decision(states[k]) for k in keys},
        order=_final_order(ordered),
        next_wakeup=next_wakeup(all_states, now=now, config=config),
        capacity_total=total,
        capacity_used=capacity_used(all_states),
    )


def _prepare(s: JobState, *, now: datetime, config: SchedulerConfig) -> bool:
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


def _order(candidates: list[JobState], *, now: datetime, config: SchedulerConfig) -> list[JobState]:
    """Rule 2: sort candidates, computing LAS bands and aging first."""
    if config.strategy == Strategy.LEAST_ATTAINED_SERVICE:
        for s in candidates:
            s.band = band = las_band(s.attained, config)
            # queued is set for every candidate by _prepare; `or now` only narrows the type.
            s.aged = is_aged(band=band, queued_time=s.queued or now, now=now, config=config)
            s.rank = las_rank(band, aged=s.aged)
    return sorted(
        candidates, key=lambda s: order_key(s.view, queued_time=s.queued or now, rank=s.rank)
    )


def _final_order(ordered: list[JobState]) -> tuple[str, ...]:
    """The order as the next pass will see it: jobs admitted or stopped in this pass take their
    new incumbency (rule 2), so that the order of a plan applied and rescheduled is the same."""

    def key(s: JobState) -> OrderKey:
        running = s.stage == Stage.RUNNING and s.size > 0
        admitted = incumbency(running=running, admitted_time=s.since)
        return order_key(s.view, queued_time=s.queued or _NEVER, rank=s.rank, admitted=admitted)

    if all(bool(s.held) == (s.stage == Stage.RUNNING and s.size > 0) for s in ordered):
        return tuple(s.view.key for s in ordered)
    return tuple(s.view.key for s in sorted(ordered, key=key))


def _admit(
    ordered: list[JobState], *, free: Histogram, now: datetime, config: SchedulerConfig
) -> None:
    """Rule 3: admit minimums in order, per node, under the configured strategy.

    An aged job grows right after its admission (rule 4).
    """
    strict = config.strategy == Strategy.STRICT_FIFO
    empty = free.copy()
    fits_empty: dict[Shape, bool] = {}
    shapes: dict[tuple[tuple[int, ...], int, int], Shape] = {}
    blocker: JobState | None = None
    waiting = 0
    for s in ordered:
        v = s.view
        spec = (v.fixed_pods, v.replica_units, v.min_size)
        shape = shapes.get(spec)
        if shape is None:
            shape = shapes[spec] = make_shape(
                fixed_pods=v.fixed_pods,
                replica_units=v.replica_units,
                replicas=v.min_size - len(v.fixed_pods),
            )
        s.min_shape = shape
        if blocker is None:
            s.free_at_check = free.total
            if free.try_place(shape):
                s.admitted = True
                s.size = v.min_size
                if s.aged:
                    _grow_one(s, free=free, now=now, config=config, up_to=aged_growth_cap(v))
                continue
        waiting += 1
        s.position = waiting
        known = fits_empty.get(shape)
        if known is None:
            known = fits_empty[shape] = empty.fits(shape)
        if not known:
            s.unfittable = True
        elif blocker is not None:
            s.blocker = blocker
        elif strict:
            blocker = s


def _grow(
    ordered: list[JobState], *, free: Histogram, now: datetime, config: SchedulerConfig
) -> None:
    """Rules 4 and 6: grow admitted jobs toward their target, in order (aged jobs from the
    size their admission gave them)."""
    for s in ordered:
        if s.admitted:
            _grow_one(s, free=free, now=now, config=config)


def _grow_one(
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
