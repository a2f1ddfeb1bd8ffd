"""The core's caches only skip work: every plan of a simulation is the same with them off.

With :func:`lattice.scheduler.core.backlog.set_caching` off, each pass sorts its quiet jobs
afresh and tries every one of them in order, as the core did before the backlog; on, the
backlog is carried from pass to pass and runs of quiet jobs that cannot change are skipped.
Every decision (the lazily built ones included), the order and the wakeup of every pass of a
busy simulation must be equal, and so must each job's result. So with and without the
:class:`~lattice.scheduler.core.JobChanges` the simulator gives each snapshot.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from lattice.scheduler.core import (
    JobChanges,
    JobView,
    Plan,
    SchedulerConfig,
    Snapshot,
    schedule,
)
from lattice.scheduler.core.backlog import set_caching
from lattice.sim import MappingOptions, map_jobs, policies, run_policies
from lattice.sim.cluster import ClusterModel, Pool, assign_pools, homogeneous
from lattice.sim.trace import SimJob, TraceJob

_SCHEDULE = schedule


@pytest.fixture(autouse=True)
def _caching_restored() -> Iterator[None]:
    yield
    set_caching(True)


def _trace(seed: int, n: int) -> list[TraceJob]:
    rng = random.Random(seed)
    rows, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / 400)
        rows.append(
            TraceJob(
                id=f"j{i:03d}",
                submit=t,
                duration=rng.lognormvariate(7.5, 1.2),
                units=rng.choice((1, 1, 1, 2, 2, 4, 4, 8, 16)),
                priority=1 if rng.random() < 0.15 else None,
                checkpoint=600.0 if rng.random() < 0.2 else None,
            )
        )
    return rows


def _record(
    jobs: list[SimJob], policy: str, *, capacity: int, cluster: ClusterModel, monkeypatch: Any
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    plans: list[tuple[Any, ...]] = []
    real = _SCHEDULE

    def recording(snapshot: Snapshot, now: datetime) -> Plan:
        plan = real(snapshot, now)
        plans.append(
            (
                now,
                plan.changed_keys(),
                dict(plan.decisions),
                plan.order,
                plan.next_wakeup,
                plan.capacity_used,
            )
        )
        return plan

    monkeypatch.setattr(policies, "schedule", recording)
    (run,) = run_policies(jobs, [policy], capacity=capacity, timeline=False, cluster=cluster)
    assert run.result is not None
    results = [(j.id, j.start, j.finish, j.resizes, j.preemptions, j.lost) for j in run.result.jobs]
    return plans, results


@pytest.mark.parametrize(
    "policy", ["lattice", "lattice:StrictFIFO", "lattice:BestEffortFIFO", "lattice-preempt-rigid"]
)
def test_plans_equal_with_caches_off(policy: str, monkeypatch: Any) -> None:
    capacity = 16
    mapped = map_jobs(_trace(7, 120), MappingOptions(speedup="amdahl:0.95"), capacity=capacity)
    cluster = homogeneous(capacity, 8)
    if policy == "lattice":  # two pools, some jobs pinned to one: classes by constraint
        gpu = dict(cluster.pools[0].capacity)
        cluster = ClusterModel(
            pools=(
                Pool(name="a", count=1, capacity=cluster.pools[0].capacity),
                Pool(name="b", count=1, capacity=tuple(gpu.items())),
            )
        )
        mapped = assign_pools(mapped, cluster, fraction=0.3, seed=1)
    set_caching(False)
    plain = _record(mapped, policy, capacity=capacity, cluster=cluster, monkeypatch=monkeypatch)
    set_caching(True)
    cached = _record(mapped, policy, capacity=capacity, cluster=cluster, monkeypatch=monkeypatch)
    assert len(cached[0]) == len(plain[0]) > 100
    for got, want in zip(cached[0], plain[0], strict=True):
        assert got == want
    assert cached[1] == plain[1]
    # Not a trivial run: jobs queued behind others, at positions past the first.
    assert any(
        d.queue_position is not None and d.queue_position > 3
        for p in plain[0]
        for d in p[2].values()
    )


@pytest.mark.parametrize("policy", ["lattice", "lattice:StrictFIFO"])
def test_plans_equal_without_the_changes_hint(policy: str, monkeypatch: Any) -> None:
    """The simulator names each snapshot's JobChanges; without them the core compares every
    view instead, and every plan is the same."""
    capacity = 16
    mapped = map_jobs(_trace(11, 120), MappingOptions(speedup="amdahl:0.95"), capacity=capacity)
    cluster = homogeneous(capacity, 8)
    hinted = _record(mapped, policy, capacity=capacity, cluster=cluster, monkeypatch=monkeypatch)
    monkeypatch.setattr(policies, "Snapshot", lambda **kw: Snapshot(**{**kw, "changes": None}))
    set_caching(False)  # start afresh: nothing kept from the hinted run
    set_caching(True)
    plain = _record(mapped, policy, capacity=capacity, cluster=cluster, monkeypatch=monkeypatch)
    assert len(hinted[0]) == len(plain[0]) > 100
    for got, want in zip(hinted[0], plain[0], strict=True):
        assert got == want
    assert hinted[1] == plain[1]


def test_a_duplicate_key_among_the_changes_is_refused() -> None:
    """A view added under the key of a job still in the snapshot is a duplicate key, hint or
    not."""
    now = datetime(2024, 1, 1, tzinfo=UTC)
    nodes = homogeneous(8, 8).nodes()

    def job(name: str, size: int = 1) -> JobView:
        return JobView(
            key=f"TrainingJob/ns/{name}",
            kind="TrainingJob",
            namespace="ns",
            name=name,
            creation_time=now,
            min_size=size,
            max_size=size,
        )

    a, b, config = job("a"), job("b"), SchedulerConfig()
    first = Snapshot(nodes=nodes, jobs=(a, b), config=config)
    schedule(first, now)
    c = job("c")
    second = Snapshot(
        nodes=nodes,
        jobs=(a, b, c),
        config=config,
        changes=JobChanges(base=first.jobs, gone=(), added=(c,)),
    )
    assert schedule(second, now) == schedule(replace(second, changes=None), now)
    again = job("a", 2)
    changes = JobChanges(base=second.jobs, gone=(), added=(again,))
    with pytest.raises(ValueError, match="duplicate job key"):
        schedule(replace(second, jobs=(a, b, c, again), changes=changes), now)
