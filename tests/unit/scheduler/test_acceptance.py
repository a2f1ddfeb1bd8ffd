"""The product's acceptance scenario on 2 nodes x 4 GPUs, each step fed the previous plan."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from lattice.scheduler.core import Plan, Snapshot, apply, schedule
from tests.unit.scheduler.builders import at, job, snap, state


def _step(
    previous: Snapshot, *, add: tuple[str, ...] = (), drop: str = "", minute: int
) -> tuple[Snapshot, Plan]:
    builders = {
        "a": job("a").min(2).max(4).created(at(0)),
        "b": job("b").min(2).max(4).created(at(1)),
        "c": job("c").min(2).max(4).created(at(2)),
        "d": job("d").gang(4).prio(10).created(at(3)),
    }
    jobs = tuple(j for j in previous.jobs if j.name != drop)
    jobs += tuple(builders[name].build() for name in add)
    current = replace(previous, jobs=jobs)
    plan = schedule(current, at(minute))
    return apply(current, plan), plan


def test_acceptance_scenario_two_nodes_four_gpus() -> None:
    s = snap(nodes=(4, 4), resize_interval=timedelta(0))

    s, plan = _step(s, add=("a",), minute=0)
    assert state(plan) == {"a": ("Running", 4)}

    s, plan = _step(s, add=("b",), minute=1)
    assert state(plan) == {"a": ("Running", 4), "b": ("Running", 4)}

    s, plan = _step(s, add=("c",), minute=2)
    assert state(plan) == {"a": ("Running", 4), "b": ("Running", 2), "c": ("Running", 2)}
    assert [e.message for e in plan["TrainingJob/ns/b"].events] == ["Shrunk 4\u21922 to admit ns/c"]
    c_queued = plan["TrainingJob/ns/c"].queued_time
    assert c_queued == at(2)

    s, plan = _step(s, add=("d",), minute=3)
    assert state(plan) == {
        "a": ("Running", 2),
        "b": ("Running", 2),
        "c": ("Waiting", 0),
        "d": ("Running", 4),
    }
    assert [e.message for e in plan["TrainingJob/ns/c"].events] == [
        "Preempted by ns/d (priority 10)"
    ]
    assert [e.message for e in plan["TrainingJob/ns/a"].events] == ["Shrunk 4\u21922 to admit ns/d"]
    assert plan.order[0] == "TrainingJob/ns/d"

    s, plan = _step(s, drop="d", minute=4)
    assert state(plan) == {"a": ("Running", 4), "b": ("Running", 2), "c": ("Running", 2)}
    assert plan["TrainingJob/ns/c"].queued_time == c_queued
    assert plan.capacity_used == plan.capacity_total == 8

    # The end state is a fixed point.
    again = schedule(s, at(4))
    assert again.changed_keys() == ()
    assert again.events == ()
