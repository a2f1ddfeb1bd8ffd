"""Rules 1 (candidates and stage transitions), 7 (pending timeout, cooldown) and 8 (service)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lattice.scheduler.core import SchedulerConfig, Stage, cooldown_for
from tests.unit.scheduler.builders import Case, at, check, job, snap

RULE_1 = [
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).new()),
            now=at(5),
            want={"a": ("Running", 4)},
            events={"a": ["Queued", "Admitted with 4 (min 2, max 4)"]},
            fields={"a": {"submit_time": at(5), "queued_time": at(5), "last_resize_time": at(5)}},
        ),
        id="new job is queued at now and admitted",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).new(), nodes=()),
            want={"a": ("Waiting", 0)},
            events={"a": ["Queued"]},
            reasons={"a": "needs 2 units; the cluster has 0"},
            fields={"a": {"queued_time": at(0), "queue_position": 1}},
        ),
        id="new job on a cluster without nodes waits with the cluster size reason",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).queued(at(-60)).cooling(at(10), count=1)),
            now=at(10),
            want={"a": ("Running", 4)},
            events={"a": ["Cooldown over; queued again", "Admitted with 4 (min 2, max 4)"]},
            fields={"a": {"queued_time": at(10), "cooldown_time": None, "requeue_count": 1}},
        ),
        id="cooldown over: queued again with a fresh queued time",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(4).cooling(at(10)),
                job("b").min(2).max(8).waiting().queued(at(1)),
            ),
            now=at(9),
            want={"a": ("RequeueCooldown", 0), "b": ("Running", 8)},
            reasons={"a": "Cooling down until 2026-01-01T00:10:00Z"},
            fields={"a": {"queue_position": None}, "b": {"queue_position": None}},
            wakeup=at(10),
        ),
        id="cooling job holds nothing and is not a candidate until its cooldown ends",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(4).running(4).suspended(),
                job("b").min(2).max(8).waiting().queued(at(1)),
            ),
            now=at(2),
            want={"a": ("Waiting", 0), "b": ("Running", 8)},
            events={"a": ["Suspended: released size 4"], "b": ["Admitted with 8 (min 2, max 8)"]},
            fields={"a": {"queued_time": None, "queue_position": None, "last_resize_time": at(2)}},
        ),
        id="suspended running job releases its capacity in the same pass",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).new().suspended()),
            now=at(2),
            want={"a": ("Waiting", 0)},
            events={"a": []},
            fields={"a": {"queued_time": None, "submit_time": at(2)}},
        ),
        id="new suspended job is submitted but not queued",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).waiting().queued(None)),
            now=at(3),
            want={"a": ("Running", 4)},
            events={"a": ["Queued", "Admitted with 4 (min 2, max 4)"]},
            fields={"a": {"queued_time": at(3), "submit_time": at(0)}},
        ),
        id="unsuspended job is queued again at now",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("done").gang(4).running(4).stage(Stage.COMPLETED),
                job("bad").gang(4).running(4).stage(Stage.WRONG),
                job("fin").gang(4).running(4).finished(),
                job("b").gang(8).waiting().queued(at(1)),
            ),
            want={
                "done": ("Completed", 0),
                "bad": ("Wrong", 0),
                "fin": ("Running", 0),
                "b": ("Running", 8),
            },
            fields={"done": {"queue_position": None, "last_resize_time": None}},
        ),
        id="finished and wrong jobs pass through untouched and hold no capacity",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(4).max(2).new(), job("f").fixed(0, 0).min(1).new()),
            want={"a": ("Wrong", 0), "f": ("Wrong", 0)},
            reasons={"a": "Invalid: max_size 2 < min_size 4", "f": "Invalid: min_size 1 < 2"},
        ),
        id="invalid views become Wrong",
    ),
]

RULE_7 = [
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).running(4).pending(at(1))),
            now=at(3),
            want={"a": ("Running", 4)},
            fields={"a": {"requeue_time": at(1)}},
            wakeup=at(6),
        ),
        id="pending pods start the requeue clock at pending_since",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).running(4).pending(at(2)).requeue_at(at(1))),
            now=at(3),
            want={"a": ("Running", 4)},
            fields={"a": {"requeue_time": at(1)}},
        ),
        id="requeue clock keeps its first value",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).running(4).requeue_at(at(1))),
            now=at(3),
            want={"a": ("Running", 4)},
            fields={"a": {"requeue_time": None}},
            wakeup=None,
        ),
        id="no pending pod clears the requeue clock",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(4).running(4).pending(at(0)),
                job("b").gang(8).waiting().queued(at(1)),
            ),
            now=at(5),
            want={"a": ("RequeueCooldown", 0), "b": ("Running", 8)},
            events={
                "a": ["Requeued: pods pending for 5m0s; cooldown until 2026-01-01T00:06:00Z"],
                "b": ["Admitted with 8 (min 8, max 8)"],
            },
            fields={
                "a": {
                    "requeue_count": 1,
                    "cooldown_time": at(6),
                    "requeue_time": None,
                    "last_resize_time": at(5),
                    "queue_position": None,
                }
            },
            wakeup=at(6),
        ),
        id="pending timeout sends the job to cooldown and frees its capacity in the same pass",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(4).running(4).pending(at(0)),
                job("b").gang(8).waiting().queued(at(1)),
            ),
            now=at(4, seconds=59),
            want={"a": ("Running", 4), "b": ("Waiting", 0)},
            wakeup=at(5),
        ),
        id="just before the pending timeout nothing happens",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(4).running(4).pending(at(0)).requeues(3),
            ),
            now=at(5),
            want={"a": ("RequeueCooldown", 0)},
            events={"a": ["Requeued: pods pending for 5m0s; cooldown until 2026-01-01T00:13:00Z"]},
            fields={"a": {"requeue_count": 4}},
        ),
        id="backoff doubles with each requeue",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(4).running(4).pending(at(0)).requeues(40),
            ),
            now=at(5),
            want={"a": ("RequeueCooldown", 0)},
            fields={"a": {"cooldown_time": at(5, hours=3), "requeue_count": 41}},
        ),
        id="backoff is capped at cooldown_max",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).waiting().pending(at(0)).requeue_at(at(0))),
            now=at(10),
            want={"a": ("Running", 4)},
            fields={"a": {"requeue_time": None, "requeue_count": 0}},
        ),
        id="pending pods of a job that was not running are ignored",
    ),
]

RULE_8 = [
    pytest.param(
        Case(
            snapshot=snap(job("a").fixed(1).units(2).gang(4).running(4).service(100, at(0))),
            now=at(1),
            want={"a": ("Running", 4)},
            fields={"a": {"attained_service": 100 + 7 * 60.0, "service_updated_at": at(1)}},
        ),
        id="running job accrues units in use times elapsed seconds",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").gang(9).waiting().service(50, at(0))),
            now=at(1),
            want={"a": ("Waiting", 0)},
            fields={"a": {"attained_service": 50.0, "service_updated_at": at(0)}},
        ),
        id="waiting job's service clock is left alone",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").gang(4).waiting().service(50, at(0))),
            now=at(1),
            want={"a": ("Running", 4)},
            fields={"a": {"attained_service": 50.0, "service_updated_at": at(1)}},
        ),
        id="admitted job starts its service clock at now",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").gang(4).running(4).service(50, at(2))),
            now=at(1),
            want={"a": ("Running", 4)},
            fields={"a": {"attained_service": 50.0, "service_updated_at": at(2)}},
        ),
        id="service clock never runs backwards",
    ),
]


@pytest.mark.parametrize("case", RULE_1)
def test_rule_1_candidates_and_stages(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", RULE_7)
def test_rule_7_pending_timeout_and_cooldown(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", RULE_8)
def test_rule_8_attained_service(case: Case) -> None:
    check(case)


def test_cooldown_backoff_progression() -> None:
    config = SchedulerConfig()
    got = [cooldown_for(n, config) for n in range(1, 12)]
    minutes = [1, 2, 4, 8, 16, 32, 64, 128, 180, 180, 180]
    assert got == [timedelta(minutes=m) for m in minutes]


def test_a_requeued_job_comes_back_after_its_cooldown() -> None:
    from lattice.scheduler.core import apply, schedule

    s = snap(job("a").min(2).max(4).running(4).pending(at(0)))
    s = apply(s, plan := schedule(s, at(5)))
    assert plan.next_wakeup == at(6)
    quiet = schedule(s, at(5, seconds=30))
    assert quiet["TrainingJob/ns/a"].stage == "RequeueCooldown"
    back = schedule(s, at(6))
    assert (back["TrainingJob/ns/a"].stage, back["TrainingJob/ns/a"].size) == ("Running", 4)
    assert back["TrainingJob/ns/a"].queued_time == at(6)
