"""Same-second arrivals and incumbency (rule 2's tie-breaks): a running job is never stopped for
an equal-priority job that only ties with it on the policy's keys or sorts first by a tie-break.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from lattice.scheduler.core import Stage, Strategy, apply, schedule
from tests.unit.scheduler.builders import T0, at, job, snap, state

STRATEGIES = [Strategy.STRICT_FIFO, Strategy.BEST_EFFORT_FIFO, Strategy.LEAST_ATTAINED_SERVICE]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_running_job_keeps_running_when_a_newcomer_ties_on_every_time_key(
    strategy: Strategy,
) -> None:
    # The CI flake: `short` runs at 4 on a 4-unit node; `next` arrives in the same second, so
    # queuedTime (as an older version persisted it, in whole seconds) and creationTimestamp tie,
    # and "next" sorts before "short" by name.
    s = snap(
        job("short").gang(4).running(4).queued(T0).created(T0),
        job("next").min(2).max(4).waiting().queued(T0).created(T0),
        nodes=(4,),
        strategy=strategy,
    )
    plan = schedule(s, at(seconds=0.5))
    assert state(plan) == {"short": ("Running", 4), "next": ("Waiting", 0)}
    assert plan["TrainingJob/ns/short"].events == ()
    assert plan.order == ("TrainingJob/ns/short", "TrainingJob/ns/next")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_newcomer_in_the_same_second_is_queued_after_the_running_job(
    strategy: Strategy,
) -> None:
    # Both arrive within one second; the scheduler stamps queuedTime to the microsecond, so the
    # job it saw first stays first, whatever the names.
    first = schedule(snap(job("short").gang(4).new().created(T0), nodes=(4,)), at(seconds=0.1))
    s = apply(
        snap(
            job("short").gang(4).new().created(T0),
            job("next").min(2).max(4).new().created(T0),
            nodes=(4,),
            strategy=strategy,
        ),
        first,
    )
    plan = schedule(s, at(seconds=0.7))
    assert plan["TrainingJob/ns/short"].queued_time == at(seconds=0.1)
    assert plan["TrainingJob/ns/next"].queued_time == at(seconds=0.7)
    assert state(plan) == {"short": ("Running", 4), "next": ("Waiting", 0)}


def test_incumbents_that_tie_keep_the_order_in_which_they_were_admitted() -> None:
    # Two elastic jobs queued in the same pass; `b` (later by name) was admitted first because
    # `a` did not fit then. Once both run, `b` stays ahead: growth does not flap between them.
    s = snap(
        job("a").min(2).max(4).waiting().queued(T0).created(T0),
        job("b").min(1).max(4).running(3).queued(T0).created(T0).admitted(at(-5)),
        nodes=(4, 2),
        strategy=Strategy.BEST_EFFORT_FIFO,
        resize_interval=timedelta(0),
    )
    first = schedule(s, at(1))
    assert first.order == ("TrainingJob/ns/b", "TrainingJob/ns/a")
    assert first["TrainingJob/ns/a"].stage == Stage.RUNNING
    assert first["TrainingJob/ns/a"].admitted_time == at(1)
    assert first["TrainingJob/ns/b"].admitted_time == at(-5)
    second = schedule(apply(s, first), at(2))
    assert second.order == first.order
    assert state(second) == state(first)
    assert not [k for k in second.decisions if second.changed(k, include_accounting=False)]


def test_a_stopped_job_loses_its_incumbency() -> None:
    s = snap(
        job("low").gang(4).running(4).queued(T0),
        job("high").gang(4).prio(5).waiting().queued(at(1)),
        nodes=(4,),
    )
    plan = schedule(s, at(2))
    assert state(plan) == {"low": ("Waiting", 0), "high": ("Running", 4)}
    assert plan["TrainingJob/ns/low"].admitted_time is None
    assert plan["TrainingJob/ns/high"].admitted_time == at(2)


def test_an_earlier_queued_time_is_the_policy_not_a_tie() -> None:
    # Under StrictFIFO a job queued earlier (a preempted job keeps its queuedTime) still goes
    # first: incumbency only breaks ties.
    s = snap(
        job("later").gang(4).running(4).queued(at(5)).preemptible(),
        job("earlier").gang(4).waiting().queued(at(1)),
        nodes=(4,),
    )
    assert schedule(s, at(6)).order == ("TrainingJob/ns/earlier", "TrainingJob/ns/later")
