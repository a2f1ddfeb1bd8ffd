"""Hypothesis properties of placements on a multi-resource cluster with pools and taints."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.scheduler.core import (
    Constraint,
    JobView,
    NodeView,
    PodDemand,
    Requirement,
    SchedulerConfig,
    Snapshot,
    Stage,
    Strategy,
    Taint,
    Toleration,
    apply,
    resources,
    schedule,
)
from tests.unit.scheduler.builders import T0

SETTINGS = settings(max_examples=150, deadline=None)
GPU = "nvidia.com/gpu"
TAINT = Taint(GPU, "present", "NoSchedule")
TOLERATE = (Toleration(key=GPU, operator="Exists"),)
CONSTRAINTS = [
    Constraint(),
    Constraint(tolerations=TOLERATE),
    Constraint(node_selector=(("pool", "a"),), tolerations=TOLERATE),
    Constraint(terms=((Requirement("pool", "In", ("b", "c")),),)),
    Constraint(
        terms=((Requirement("pool", "NotIn", ("a",)),), (Requirement("gen", "Gt", ("2",)),))
    ),
]


@st.composite
def nodes(draw: st.DrawFn) -> tuple[NodeView, ...]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        pool = draw(st.sampled_from(["a", "b", "c"]))
        gpus = draw(st.sampled_from([0, 2, 4, 8]))
        free = resources(
            {GPU: gpus, "cpu": draw(st.sampled_from([4000, 16000])), "memory": 64, "pods": 8}
        )
        taints = (TAINT,) if gpus and draw(st.booleans()) else ()
        labels = (("gen", str(draw(st.integers(1, 4)))), ("pool", pool))
        schedulable = draw(st.integers(0, 9)) > 0
        out.append(
            NodeView(
                f"n{i}", gpus, free=free, labels=labels, taints=taints, schedulable=schedulable
            )
        )
    return tuple(out)


@st.composite
def demands(draw: st.DrawFn, *, exclusive: bool = False) -> PodDemand:
    gpus = draw(st.sampled_from([0, 1, 2, 4]))
    requests = resources(
        {
            GPU: gpus,
            "cpu": draw(st.sampled_from([500, 2000, 6000])),
            "memory": draw(st.sampled_from([1, 8, 32])),
            "pods": 1,
        }
    )
    return PodDemand(
        requests=requests,
        constraint=draw(st.sampled_from(CONSTRAINTS)),
        units=gpus,
        exclusive=exclusive,
    )


@st.composite
def jobs(draw: st.DrawFn, index: int) -> JobView:
    # As the plugins make them: only a TrainingJob's workers in node mode take whole nodes,
    # and such a job has no other pods.
    whole = draw(st.integers(0, 5)) == 0
    fixed = () if whole else tuple(draw(demands()) for _ in range(draw(st.integers(0, 2))))
    replica = draw(demands(exclusive=whole))
    low = draw(st.integers(max(1, len(fixed)), len(fixed) + 3))
    high = draw(st.integers(low, low + 3))
    return JobView(
        key=f"TrainingJob/ns/j{index}",
        kind="TrainingJob",
        namespace="ns",
        name=f"j{index}",
        creation_time=T0 + timedelta(seconds=index),
        priority=draw(st.integers(0, 2)),
        min_size=low,
        max_size=high,
        fixed_pods=tuple(d.units for d in fixed),
        replica_units=replica.units,
        fixed_demands=fixed,
        replica_demand=replica,
        preemptible_within_priority=draw(st.booleans()),
        attained_service=draw(st.sampled_from([0.0, 4000.0, 50_000.0])),
    )


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Snapshot, datetime]:
    """A cluster that has run some jobs for a while (placements from earlier passes), and new
    arrivals, under one of the strategies."""
    strategy = draw(st.sampled_from(list(Strategy)))
    config = SchedulerConfig(strategy=strategy, resize_interval=timedelta(0), slowdown_limit=4.0)
    first = [draw(jobs(i)) for i in range(draw(st.integers(0, 5)))]
    snapshot = Snapshot(nodes=draw(nodes()), jobs=tuple(first), config=config)
    now = T0
    for _ in range(draw(st.integers(0, 2))):
        snapshot = apply(snapshot, schedule(snapshot, now))
        now += timedelta(minutes=draw(st.integers(1, 120)))
    arrivals = [draw(jobs(i)) for i in range(len(first), len(first) + draw(st.integers(0, 4)))]
    return replace(snapshot, jobs=snapshot.jobs + tuple(arrivals)), now


def _usage(snapshot: Snapshot, placements: dict[str, tuple[str, ...]]) -> dict[str, dict[str, int]]:
    views = {v.key: v for v in snapshot.jobs}
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for key, placed in placements.items():
        for i, name in enumerate(placed):
            for resource, q in views[key].pod_demand(i).requests:
                used[name][resource] += q
    return used


@SETTINGS
@given(world=worlds())
def test_no_node_is_over_committed_in_any_resource(world: tuple[Snapshot, datetime]) -> None:
    snapshot, now = world
    plan = schedule(snapshot, now)
    placements = {k: d.placement for k, d in plan.decisions.items() if d.stage == Stage.RUNNING}
    for k, d in plan.decisions.items():
        assert len(d.placement) == (d.size if d.stage == Stage.RUNNING else 0), k
    free = {n.name: dict(n.free_resources()) for n in snapshot.nodes}
    for name, used in _usage(snapshot, placements).items():
        for resource, q in used.items():
            assert q <= free[name].get(resource, 0), (name, resource)


@SETTINGS
@given(world=worlds())
def test_constraints_and_exclusivity_are_always_honoured(world: tuple[Snapshot, datetime]) -> None:
    snapshot, now = world
    plan = schedule(snapshot, now)
    by_name = {n.name: n for n in snapshot.nodes}
    views = {v.key: v for v in snapshot.jobs}
    pods_on: dict[str, list[PodDemand]] = defaultdict(list)
    for key, d in plan.decisions.items():
        for i, name in enumerate(d.placement):
            demand = views[key].pod_demand(i)
            n = by_name[name]
            assert demand.constraint.admits(name=n.name, labels=dict(n.labels), taints=n.taints)
            pods_on[name].append(demand)
    for placed in pods_on.values():
        if any(p.exclusive for p in placed):
            assert len(placed) == 1


@SETTINGS
@given(world=worlds(), seed=st.integers(0, 1000))
def test_shuffled_input_gives_the_same_plan(world: tuple[Snapshot, datetime], seed: int) -> None:
    snapshot, now = world
    rng = random.Random(seed)
    jobs, node_list = list(snapshot.jobs), list(snapshot.nodes)
    rng.shuffle(jobs)
    rng.shuffle(node_list)
    shuffled = replace(snapshot, jobs=tuple(jobs), nodes=tuple(node_list))
    assert dict(schedule(shuffled, now).decisions) == dict(schedule(snapshot, now).decisions)


@SETTINGS
@given(world=worlds())
def test_a_plan_applied_and_rescheduled_is_stable(world: tuple[Snapshot, datetime]) -> None:
    snapshot, now = world
    first = schedule(snapshot, now)
    second = schedule(apply(snapshot, first), now)
    assert second.changed_keys() == ()
    assert second.events == ()
    assert {k: d.placement for k, d in second.decisions.items()} == {
        k: d.placement for k, d in first.decisions.items()
    }
