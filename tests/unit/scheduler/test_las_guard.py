"""Properties of the LAS starvation guard: the virtual queue time (core rule 2, ``order.py``).

Past band 0 a job is ordered by ``queued_time + K x (its band's lower bound / its units at
full size)``. These tests check that order against an independent reference, that it is
deterministic (input order and the clock do not change it), and that no job starves under a
steady stream of arrivals.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.scheduler.core import JobView, NodeView, SchedulerConfig, Snapshot, Stage, schedule
from lattice.sim.engine import simulate
from lattice.sim.policies import LatticeAllocator, make_nodes
from lattice.sim.speedup import LinearCapped
from lattice.sim.trace import SimJob
from tests.unit.scheduler.builders import T0

SETTINGS = settings(max_examples=100, deadline=None)

# (priority, queued minutes after T0, attained unit-seconds, replica units, min, extra max)
SPECS = st.lists(
    st.tuples(
        st.integers(0, 1),
        st.integers(0, 600),
        st.sampled_from([0.0, 100.0, 3600.0, 20_000.0, 36_000.0, 400_000.0, 5e6]),
        st.integers(0, 3),
        st.integers(1, 3),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=25,
)
CONFIGS = st.builds(
    SchedulerConfig,
    slowdown_limit=st.sampled_from([0.0, 0.5, 1.0, 4.0, 64.0]),
    las_first_band=st.sampled_from([600.0, 3600.0]),
    las_band_multiplier=st.sampled_from([3.0, 10.0]),
    las_bands=st.integers(1, 5),
)


def _views(specs: list[tuple[int, int, float, int, int, int]]) -> list[JobView]:
    return [
        JobView(
            key=f"TrainingJob/ns/j{i}",
            kind="TrainingJob",
            namespace="ns",
            name=f"j{i}",
            creation_time=T0,
            priority=priority,
            min_size=low,
            max_size=low + extra,
            replica_units=units,
            stage=Stage.WAITING,
            submit_time=T0,
            queued_time=T0 + timedelta(minutes=minutes),
            attained_service=service,
        )
        for i, (priority, minutes, service, units, low, extra) in enumerate(specs)
    ]


def _reference_key(v: JobView, config: SchedulerConfig) -> tuple[object, ...]:
    """The order of waiting jobs, computed here from the rule's statement."""
    bounds = [config.las_first_band * config.las_band_multiplier**b for b in range(64)]
    band = 0
    while band < config.las_bands - 1 and v.attained_service >= bounds[band]:
        band += 1
    assert v.queued_time is not None
    queue_time = v.queued_time
    if band > 0:
        full = v.units_at(v.max_size)
        floor = bounds[band - 1] / full if full else 0.0
        queue_time += timedelta(microseconds=math.ceil(config.slowdown_limit * floor * 1e6))
    return (-v.priority, 0 if band == 0 else 1, queue_time, v.name)


@SETTINGS
@given(specs=SPECS, config=CONFIGS, later=st.integers(1, 10**7), seed=st.integers(0, 99))
def test_the_order_is_the_virtual_queue_time_whatever_the_clock_and_input_order(
    specs: list[tuple[int, int, float, int, int, int]],
    config: SchedulerConfig,
    later: int,
    seed: int,
) -> None:
    views = _views(specs)
    expected = [v.key for v in sorted(views, key=lambda v: _reference_key(v, config))]
    now = T0 + timedelta(days=1)
    # No nodes: every job waits, so the plan's order is the order of rule 2 alone.
    plan = schedule(Snapshot(nodes=(), jobs=tuple(views), config=config), now)
    assert list(plan.order) == expected
    assert plan.next_wakeup is None  # a waiting job's place never moves with the clock
    shuffled = list(views)
    random.Random(seed).shuffle(shuffled)
    at = now + timedelta(seconds=later)
    again = schedule(Snapshot(nodes=(), jobs=tuple(shuffled), config=config), at)
    assert list(again.order) == expected


def _job(i: int, *, submit: float, duration: float) -> SimJob:
    # Rigid 4-unit jobs that checkpoint: each may be preempted within the priority.
    return SimJob(
        id=f"j{i}",
        submit=submit,
        duration=duration,
        units=4,
        min_size=4,
        max_size=4,
        priority=0,
        model=LinearCapped(),
        checkpoint=1.0,
    )


@settings(max_examples=12, deadline=None)
@given(
    k=st.sampled_from([0.5, 1.0, 2.0, 4.0]),
    period=st.integers(1500, 3000),
    duration=st.integers(1000, 4000),
)
def test_no_job_starves_under_a_steady_stream(k: float, period: int, duration: int) -> None:
    # One 4-unit node. A long job L (20,000 s) arrives first, then one job every `period`
    # seconds, each `duration` long: up to 2.7x the capacity, of which band 0 (each job's
    # first 900 s) is at most 60 %. L's virtual queue time is at most K x 80,000 / 4 s, and
    # every job queued after it waits behind L past band 0: L finishes long before the stream
    # ends, and every stream job is admitted within band 0's backlog.
    long_job = _job(0, submit=0.0, duration=20_000.0)
    horizon = 4 * (k * 20_000 + 20_000 + duration)
    count = math.ceil(horizon / period)
    stream = [_job(i, submit=float(period * i), duration=float(duration)) for i in range(1, count)]
    config = SchedulerConfig(slowdown_limit=k)
    result = simulate(
        [long_job, *stream],
        LatticeAllocator(make_nodes(4, 4), config),
        policy="las",
        capacity=4,
        restart_cost=0,
    )
    by_id = {j.id: j for j in result.jobs}
    finish = by_id["j0"].finish
    assert finish is not None
    assert finish < period * count
    for j in result.jobs:
        assert j.start is not None
        assert j.start - j.submit <= 2 * period


def test_a_long_job_starves_without_the_guard() -> None:
    # The same stream (3,000 s jobs every 2,000 s) with K so large that the guard never acts:
    # L waits until the stream has ended. (The test above can fail.)
    long_job = _job(0, submit=0.0, duration=20_000.0)
    stream = [_job(i, submit=2000.0 * i, duration=3000.0) for i in range(1, 60)]
    result = simulate(
        [long_job, *stream],
        LatticeAllocator(make_nodes(4, 4), SchedulerConfig(slowdown_limit=1e12)),
        policy="las",
        capacity=4,
        restart_cost=0,
    )
    finish = result.jobs[0].finish
    assert finish is not None
    assert finish > 2000.0 * 60


def test_equal_keys_keep_the_running_job_first() -> None:
    # Two elastic jobs with the same virtual queue time on room for one: the running one stays
    # ahead (incumbency), so it is never stopped for a job that ties with it on the policy.
    now = T0 + timedelta(hours=2)
    config = SchedulerConfig(slowdown_limit=4.0)
    waiting, other = _views([(0, 0, 20_000.0, 1, 2, 0), (0, 0, 20_000.0, 1, 2, 0)])
    running = replace(
        other,
        stage=Stage.RUNNING,
        current_size=2,
        admitted_time=T0 + timedelta(hours=1),
        service_updated_at=now,
        preemptible_within_priority=True,
    )
    nodes = (NodeView("n", 2),)
    plan = schedule(Snapshot(nodes=nodes, jobs=(waiting, running), config=config), now)
    assert plan[running.key].stage == Stage.RUNNING
    assert plan[waiting.key].stage == Stage.WAITING
