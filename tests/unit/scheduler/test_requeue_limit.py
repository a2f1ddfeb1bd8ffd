"""Rule 7's requeue limit: the limit-th requeue cools down, the next one fails the job, quoting
kube-scheduler's last message; the ``Requeued`` event quotes it too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lattice.scheduler.core import (
    REQUEUE_LIMIT_EXCEEDED,
    Requeued,
    SchedulerConfig,
    Stage,
    apply,
    schedule,
)
from tests.unit.scheduler.builders import JobBuilder, at, job, snap

KEY = "TrainingJob/ns/a"
MESSAGE = "0/2 nodes are available: 2 Insufficient example.com/widget."


def _pending(requeues: int) -> JobBuilder:
    return (
        job("a")
        .min(2)
        .max(4)
        .running(4)
        .pending(at(0))
        .requeues(requeues)
        ._set(pending_message=MESSAGE)
    )


def test_the_limit_th_requeue_cools_down_and_quotes_kube_scheduler() -> None:
    plan = schedule(snap(_pending(1), requeue_limit=2), at(5))
    d = plan[KEY]
    assert (d.stage, d.size, d.requeue_count) == (Stage.REQUEUE_COOLDOWN, 0, 2)
    (event,) = d.events
    assert isinstance(event, Requeued)
    assert event.scheduler_message == MESSAGE
    assert event.message == (
        "Requeued: pods pending for 5m0s; cooldown until 2026-01-01T00:07:00Z; "
        f"last message from kube-scheduler: {MESSAGE}"
    )


def test_the_next_requeue_fails_the_job_naming_count_limit_and_message() -> None:
    plan = schedule(
        snap(_pending(2), job("b").gang(8).waiting().queued(at(1)), requeue_limit=2), at(5)
    )
    d = plan[KEY]
    assert (d.stage, d.size, d.requeue_count) == (Stage.FAILED, 0, 2)
    assert d.cooldown_time is None
    assert d.requeue_time is None
    assert d.placement == ()
    assert d.events == ()  # the reconciler's Failed condition and Warning event tell it
    assert d.reason == (
        "requeued 2 times for pods that could not start (limit 2); pending again for 5m0s; "
        f"last message from kube-scheduler: {MESSAGE}"
    )
    # Its capacity goes to the next job in the same pass.
    assert (plan["TrainingJob/ns/b"].stage, plan["TrainingJob/ns/b"].size) == ("Running", 8)
    assert REQUEUE_LIMIT_EXCEEDED == "RequeueLimitExceeded"


def test_a_failed_job_stays_failed_and_holds_nothing() -> None:
    s = snap(_pending(2), requeue_limit=2)
    s = apply(s, schedule(s, at(5)))
    again = schedule(s, at(30))
    d = again[KEY]
    assert (d.stage, d.size, d.changed, d.events) == (Stage.FAILED, 0, False, ())
    assert again.next_wakeup is None


def test_limit_zero_fails_on_the_first_timeout() -> None:
    d = schedule(snap(_pending(0), requeue_limit=0), at(5))[KEY]
    assert d.stage == Stage.FAILED
    assert d.reason.startswith("requeued 0 times for pods that could not start (limit 0)")


def test_no_limit_requeues_forever() -> None:
    d = schedule(snap(_pending(40)), at(5))[KEY]
    assert (d.stage, d.requeue_count) == (Stage.REQUEUE_COOLDOWN, 41)


def test_children_refused_past_the_limit_quote_the_apiserver() -> None:
    view = (
        job("a")
        .min(2)
        .max(4)
        .running(4)
        .requeues(1)
        ._set(refused_since=at(0), refused_message="pods is forbidden: exceeded quota")
    )
    d = schedule(snap(view, requeue_limit=1), at(5))[KEY]
    assert d.stage == Stage.FAILED
    assert d.reason.endswith("last message from the apiserver: pods is forbidden: exceeded quota")


def test_refused_on_every_node_past_the_limit_fails() -> None:
    view = _pending(3)._set(placement=("node-0", "node-0"), refused_nodes=("node-0", "node-1"))
    plan = schedule(snap(replace(view.build(), min_size=2, max_size=2), requeue_limit=3), at(1))
    d = plan[KEY]
    assert (d.stage, d.size) == (Stage.FAILED, 0)
    assert "(limit 3)" in d.reason
    assert MESSAGE in d.reason


@pytest.mark.parametrize("limit", [-1, -5])
def test_a_negative_limit_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="requeue_limit"):
        SchedulerConfig(requeue_limit=limit)
