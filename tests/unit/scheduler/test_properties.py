"""Hypothesis properties of ``schedule`` over random snapshots (rule 9 and the invariants)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.scheduler.core import (
    ACCOUNTING_FIELDS,
    JobView,
    NodeView,
    Plan,
    SchedulerConfig,
    Snapshot,
    Stage,
    Strategy,
    apply,
    schedule,
)
from tests.unit.scheduler.builders import T0, ref_fits, ref_repack

SETTINGS = settings(max_examples=200, deadline=None)

nows = st.integers(0, 180).map(lambda m: T0 + timedelta(minutes=m))
STAGES = ["", "Waiting", "Running", "Running", "RequeueCooldown", "Completed", "Wrong"]
KINDS = ["TrainingJob", "MPIJob", "MXJob"]
# One integer draw per optional time (cheaper than one_of): -1 is None, else 10-minute steps
# from T0 - 3h to T0 + 3h, so that ties and both sides of `now` are common.
TIME_CODES = st.integers(-1, 36)
# Most running jobs have no pending pod (otherwise a pending timeout hides every other timer).
PENDING_CODES = st.integers(-36, 36)


def _time(code: int) -> datetime | None:
    return None if code < 0 else T0 + timedelta(minutes=10 * (code - 18))


@st.composite
def jobs(draw: st.DrawFn, index: int, units: int | None = None) -> JobView:
    if units is None:
        fixed = draw(st.sampled_from([(), (), (0,), (0, 1), (2,), (0, 3, 3)]))
        replica_units = draw(st.integers(0, 4))
    else:
        fixed = draw(st.sampled_from([(), (0,), (0, units), (units,)]))
        replica_units = units
    low = draw(st.integers(max(1, len(fixed)), len(fixed) + 3))
    high = draw(st.integers(low, low + 3))
    stage = draw(st.sampled_from(STAGES))
    running = stage == Stage.RUNNING
    namespace = draw(st.sampled_from(["a", "b"]))
    kind = KINDS[index % 3]
    codes = [draw(TIME_CODES) for _ in range(6)] + [draw(PENDING_CODES), draw(TIME_CODES)]
    flags = draw(st.integers(0, 15))
    return JobView(
        key=f"{kind}/{namespace}/j{index}",
        kind=kind,
        namespace=namespace,
        name=f"j{index}",
        creation_time=_time(max(0, codes[0])) or T0,
        priority=draw(st.integers(0, 2)),
        min_size=low,
        max_size=high,
        fixed_pods=fixed,
        replica_units=replica_units,
        stage=stage,
        current_size=draw(st.integers(0, high + 1)) if running else 0,
        submit_time=_time(codes[1]),
        queued_time=_time(codes[2]),
        requeue_time=_time(codes[3]) if running else None,
        cooldown_time=_time(codes[4]),
        requeue_count=draw(st.integers(0, 4)),
        last_resize_time=_time(codes[5]),
        pending_since=_time(codes[6]),
        attained_service=draw(st.sampled_from([0.0, 100.0, 4000.0, 50_000.0, 1e6])),
        service_updated_at=_time(codes[7]),
        suspended=flags == 1,
        finished=flags == 2,
        preemptible_within_priority=flags >= 8,
    )


configs = st.builds(
    SchedulerConfig,
    strategy=st.sampled_from(list(Strategy)),
    resize_interval=st.sampled_from([timedelta(0), timedelta(minutes=1), timedelta(minutes=10)]),
    slowdown_limit=st.sampled_from([0.0, 1.0, 4.0, 50.0]),
)


@st.composite
def snapshots(draw: st.DrawFn, uniform: bool = False) -> Snapshot:
    units = draw(st.integers(1, 3)) if uniform else None
    count = draw(st.integers(0, 10))
    return Snapshot(
        nodes=tuple(
            NodeView(f"n{i}", draw(st.integers(0, 8))) for i in range(draw(st.integers(0, 5)))
        ),
        jobs=tuple(draw(jobs(i, units)) for i in range(count)),
        config=draw(configs),
    )


def owned(view: JobView) -> bool:
    """Jobs the scheduler decides for (not passed through)."""
    return not view.finished and view.stage in ("", "Waiting", "Running", "RequeueCooldown")


@SETTINGS
@given(s=snapshots(), now=nows)
def test_capacity_is_never_overcommitted_per_node_or_in_total(s: Snapshot, now: datetime) -> None:
    plan = schedule(s, now)
    left = ref_repack(s, plan, now)
    assert left is not None, "the plan's sizes do not pack onto the nodes"
    assert plan.capacity_total == sum(max(0, n.free_units) for n in s.nodes)
    assert plan.capacity_used == plan.capacity_total - sum(left)
    assert plan.capacity_used <= plan.capacity_total


@SETTINGS
@given(s=snapshots(), now=nows)
def test_sizes_stay_within_bounds_and_match_the_stage(s: Snapshot, now: datetime) -> None:
    plan = schedule(s, now)
    positions = []
    for view in s.jobs:
        d = plan[view.key]
        assert d.size == 0 or view.min_size <= d.size <= view.max_size
        if owned(view):
            assert (d.stage == Stage.RUNNING) == (d.size > 0)
            assert d.stage in ("Waiting", "Running", "RequeueCooldown", "Wrong")
        else:
            assert (d.stage, d.size) == (view.stage, 0)
        if d.queue_position is not None:
            positions.append(d.queue_position)
        if d.events:
            assert d.changed
    assert sorted(positions) == list(range(1, len(positions) + 1))
    assert plan.next_wakeup is None or plan.next_wakeup > now


def _pods(view: JobView, size: int) -> int:
    """Pods that need units, when every pod needs the same units (uniform snapshots)."""
    if size <= 0:
        return 0
    fixed = sum(1 for u in view.fixed_pods if u > 0)
    return fixed + (size - len(view.fixed_pods)) * (1 if view.replica_units else 0)


@SETTINGS
@given(s=snapshots(uniform=True), now=nows)
def test_higher_priority_never_waits_while_lower_priority_capacity_would_fit_it(
    s: Snapshot, now: datetime
) -> None:
    plan = schedule(s, now)
    views = {v.key: v for v in s.jobs}
    units = next((v.replica_units for v in s.jobs), 1)
    slots = sum(max(0, n.free_units) // units for n in s.nodes)
    held = {k: _pods(views[k], d.size) for k, d in plan.decisions.items()}
    used = sum(held.values())
    for key, d in plan.decisions.items():
        view = views[key]
        if d.stage != Stage.WAITING or d.queue_position is None:
            continue
        lower = sum(n for k, n in held.items() if views[k].priority < view.priority)
        if lower:
            assert _pods(view, view.min_size) > slots - used + lower, (
                f"{key} waits while lower-priority jobs hold {lower} slots that would fit it"
            )


def _protected(v: JobView) -> bool:
    """Running on input, rigid and not opted in to preemption within its priority."""
    return (
        v.stage == Stage.RUNNING
        and v.current_size > 0
        and v.min_size == v.max_size
        and not v.preemptible_within_priority
    )


@SETTINGS
@given(s=snapshots(), now=nows)
def test_a_protected_job_is_stopped_only_for_a_higher_priority(s: Snapshot, now: datetime) -> None:
    plan = schedule(s, now)
    empty = [max(0, n.free_units) for n in s.nodes]
    for v in s.jobs:
        if not owned(v) or not _protected(v) or plan[v.key].stage != Stage.WAITING:
            continue
        if v.suspended or v.problem() is not None:
            continue
        if not ref_fits(list(empty), v, replicas=v.min_size - len(v.fixed_pods)):
            continue  # it no longer fits the cluster at all
        rivals = [
            w
            for w in s.jobs
            if plan[w.key].stage == Stage.RUNNING
            and (w.priority > v.priority or (w.priority == v.priority and _protected(w)))
        ]
        assert rivals, f"{v.key} was stopped for a job of its own or a lower priority"


@SETTINGS
@given(s=snapshots(), now=nows)
def test_strict_fifo_admits_a_prefix_skipping_only_jobs_too_big_for_the_cluster(
    s: Snapshot, now: datetime
) -> None:
    s = replace(s, config=replace(s.config, strategy=Strategy.STRICT_FIFO))
    plan = schedule(s, now)
    views = {v.key: v for v in s.jobs}
    empty = [max(0, n.free_units) for n in s.nodes]
    blocked_by = None
    for key in plan.order:
        v = views[key]
        if _protected(v):
            continue  # rule change: a running rigid job keeps its units, blocked or not
        if not ref_fits(list(empty), v, replicas=v.min_size - len(v.fixed_pods)):
            assert plan[key].stage == Stage.WAITING
            assert "needs " in plan[key].reason
            continue
        if blocked_by is not None:
            assert plan[key].stage == Stage.WAITING, f"{key} admitted behind {blocked_by}"
        elif plan[key].stage == Stage.WAITING:
            blocked_by = key


@SETTINGS
@given(s=snapshots(), now=nows, seed=st.integers(0, 2**32 - 1))
def test_shuffled_input_gives_the_same_plan(s: Snapshot, now: datetime, seed: int) -> None:
    rng = random.Random(seed)
    nodes, jobs_ = list(s.nodes), list(s.jobs)
    rng.shuffle(nodes)
    rng.shuffle(jobs_)
    shuffled = replace(s, nodes=tuple(nodes), jobs=tuple(jobs_))
    a, b = schedule(s, now), schedule(shuffled, now)
    assert a == b
    assert list(a.decisions) == list(b.decisions)


@SETTINGS
@given(s=snapshots(), now=nows)
def test_idempotent_on_its_own_output(s: Snapshot, now: datetime) -> None:
    first = schedule(s, now)
    second = schedule(apply(s, first), now)
    assert second.changed_keys() == ()
    assert second.events == ()
    assert second.order == first.order
    assert second.next_wakeup == first.next_wakeup


@SETTINGS
@given(s=snapshots(), now=nows)
def test_deterministic_across_calls(s: Snapshot, now: datetime) -> None:
    assert schedule(s, now) == schedule(s, now)


def _quiet(plan: Plan) -> bool:
    return all(
        d.changed_fields <= ACCOUNTING_FIELDS and not d.events for d in plan.decisions.values()
    )


@SETTINGS
@given(s=snapshots(), now=nows, fraction=st.floats(0, 1, exclude_max=True))
def test_nothing_changes_before_next_wakeup(s: Snapshot, now: datetime, fraction: float) -> None:
    first = schedule(s, now)
    settled = apply(s, first)
    horizon = first.next_wakeup or now + timedelta(days=1)
    span = (horizon - now) // timedelta(microseconds=1)  # >= 1: next_wakeup is after now
    later = now + timedelta(microseconds=min(span - 1, int(span * fraction)))
    again = schedule(settled, later)
    assert _quiet(again)
    assert again.order == first.order
