"""Rule 7's requeue of a running job whose children the apiserver refuses (issue 26, item 2):
after ``child_refusal_timeout`` it releases its capacity to a waiting job, its event and reason
quote the refusal, and the pass wakes up when the timeout ends."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from lattice.scheduler.core import JobView, apply, schedule
from lattice.scheduler.core.events import Requeued
from tests.unit.scheduler.builders import at, job, snap

REFUSED = "Pod a-worker-0: no PriorityClass with name gold was found"


def _refused(since_minutes: float) -> JobView:
    view = job("a").gang(4).running(4).build()
    return replace(view, refused_since=at(since_minutes), refused_message=REFUSED)


def test_a_refusal_younger_than_the_timeout_keeps_the_job_and_sets_a_wakeup() -> None:
    s = snap(_refused(0), job("b").gang(4).waiting(), nodes=(4,))
    plan = schedule(s, at(0, seconds=30))
    assert plan["TrainingJob/ns/a"].stage == "Running"
    assert plan["TrainingJob/ns/b"].stage == "Waiting"
    assert plan.next_wakeup == at(1)


def test_a_refusal_past_the_timeout_requeues_and_admits_the_waiting_job() -> None:
    s = snap(_refused(0), job("b").gang(4).waiting(), nodes=(4,))
    plan = schedule(s, at(1))
    a, b = plan["TrainingJob/ns/a"], plan["TrainingJob/ns/b"]
    assert (a.stage, a.size, a.requeue_count) == ("RequeueCooldown", 0, 1)
    assert (b.stage, b.size) == ("Running", 4)
    event = next(e for _, e in plan.events if isinstance(e, Requeued))
    assert event.refused_by == REFUSED
    assert "the apiserver refused its children for 1m" in event.message
    assert REFUSED in a.reason
    again = schedule(apply(s, plan), at(1))
    assert not again.events, "idempotent"


def test_the_timeout_is_configurable() -> None:
    s = snap(_refused(0), nodes=(4,), child_refusal_timeout=timedelta(seconds=5))
    assert schedule(s, at(0, seconds=5))["TrainingJob/ns/a"].stage == "RequeueCooldown"


def test_a_refusal_is_ignored_unless_the_job_runs_with_pods() -> None:
    waiting = replace(job("a").gang(4).waiting().build(), refused_since=at(0), refused_message="x")
    plan = schedule(snap(waiting, nodes=(4,)), at(5))
    assert (plan["TrainingJob/ns/a"].stage, plan["TrainingJob/ns/a"].size) == ("Running", 4)
