"""Rules 2 (order), 3 (admission strategies), 4 (growth), 5 (preemption) and 6 (churn)."""

from __future__ import annotations

import pytest

from lattice.scheduler.core import Strategy
from tests.unit.scheduler.builders import Case, at, check, job, snap

ORDER = [
    pytest.param(
        Case(
            snapshot=snap(
                job("x").gang(9).waiting().queued(at(1)),
                job("y").gang(9).prio(5).waiting().queued(at(3)),
                job("z").gang(9).waiting().queued(at(1)).created(at(-1)),
                job("w").gang(9).waiting().queued(at(1)),
                job("v", namespace="aa").gang(9).waiting().queued(at(1)),
            ),
            now=at(4),
            want=dict.fromkeys("xyzwv", ("Waiting", 0)),
            order=["y", "z", "v", "w", "x"],
            fields={"y": {"queue_position": 1}, "x": {"queue_position": 5}},
        ),
        id="priority first, then queued time, creation time, namespace and name",
    ),
]

STRATEGIES = [
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(4).running(4),
                job("b").gang(6).waiting().queued(at(1)),
                job("c").gang(2).waiting().queued(at(2)),
            ),
            want={"a": ("Running", 4), "b": ("Waiting", 0), "c": ("Waiting", 0)},
            reasons={
                "b": "Waiting at position 1: needs 6 units, 4 free",
                "c": "Waiting at position 2 behind ns/b (StrictFIFO)",
            },
        ),
        id="StrictFIFO: a job that does not fit blocks every later job",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(4).running(4),
                job("b").gang(6).waiting().queued(at(1)),
                job("c").gang(2).waiting().queued(at(2)),
                strategy=Strategy.BEST_EFFORT_FIFO,
            ),
            want={"a": ("Running", 4), "b": ("Waiting", 0), "c": ("Running", 2)},
        ),
        id="BestEffortFIFO: a job that does not fit is skipped",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(4).running(4),
                job("b").gang(6).waiting().queued(at(1)),
                job("c").gang(2).waiting().queued(at(2)),
                strategy=Strategy.LEAST_ATTAINED_SERVICE,
            ),
            want={"a": ("Running", 4), "b": ("Waiting", 0), "c": ("Running", 2)},
        ),
        id="LeastAttainedService admits best effort",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(4).running(4),
                job("b").gang(10).waiting().queued(at(1)),
                job("c").gang(2).waiting().queued(at(2)),
            ),
            want={"a": ("Running", 4), "b": ("Waiting", 0), "c": ("Running", 2)},
            reasons={"b": "needs 10 units; the cluster has 8"},
            fields={"a": {"queue_position": None}, "b": {"queue_position": 1}},
        ),
        id="StrictFIFO: a job too big for the empty cluster does not block",
    ),
]

GROWTH = [
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(1).max(6).waiting(),
                job("b").min(1).max(6).waiting().queued(at(1)),
            ),
            want={"a": ("Running", 6), "b": ("Running", 2)},
        ),
        id="spare capacity grows earlier jobs first",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(1).max(8).waiting(),
                job("b").gang(4).waiting().queued(at(1)),
            ),
            want={"a": ("Running", 4), "b": ("Running", 4)},
        ),
        id="every admitted job gets its minimum before anyone grows",
    ),
]

PREEMPTION = [
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(4).running(4),
                job("b").gang(4).running(4).queued(at(1)),
                job("h").gang(4).prio(10).new(),
            ),
            now=at(2),
            want={"a": ("Running", 4), "b": ("Waiting", 0), "h": ("Running", 4)},
            events={"a": [], "b": ["Preempted by ns/h (priority 10)"]},
            fields={"b": {"queued_time": at(1), "last_resize_time": at(2)}},
        ),
        id="higher priority arrival stops lower priority job",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(8).running(8),
                job("c").gang(4).new(),
            ),
            now=at(2),
            want={"a": ("Running", 4), "c": ("Running", 4)},
            events={"a": ["Shrunk 8\u21924 to admit ns/c"]},
        ),
        id="equal priority arrival shrinks an earlier job toward its minimum",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(8).running(8),
                job("c").gang(8).new(),
            ),
            now=at(2),
            want={"a": ("Running", 8), "c": ("Waiting", 0)},
            events={"a": []},
        ),
        id="equal priority arrival never stops an earlier job",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("h").gang(8).prio(10).running(8), job("l").gang(4).new()),
            want={"h": ("Running", 8), "l": ("Waiting", 0)},
            events={"h": []},
        ),
        id="a lower priority arrival never touches a higher priority job",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(2).prio(1).running(2),
                job("b").gang(2).running(2),
                job("c").gang(4).running(4).queued(at(1)),
                job("h").gang(4).prio(10).new(),
            ),
            now=at(2),
            want={
                "a": ("Running", 2),
                "b": ("Running", 2),
                "c": ("Waiting", 0),
                "h": ("Running", 4),
            },
            order=["h", "a", "b", "c"],
        ),
        id="victims are taken from the end of the order",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(4).running(4),
                job("c").gang(4).waiting().queued(at(1)).resized(at(3)),
                job("e").gang(4).new(),
            ),
            now=at(5),
            want={"a": ("Running", 4), "c": ("Running", 4), "e": ("Waiting", 0)},
        ),
        id="a preempted job resumes ahead of later arrivals",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(4).running(4),
                job("b").gang(4).running(4).queued(at(1)),
                nodes=(4,),
            ),
            want={"a": ("Running", 4), "b": ("Waiting", 0)},
            events={"b": ["Stopped: Waiting at position 1: needs 4 units, 0 free"]},
        ),
        id="a job stopped because capacity vanished names no beneficiary",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(4).running(2).resized(at(-10)),
                job("b").min(2).max(4).running(4).queued(at(1)).resized(at(-10)),
                nodes=(4, 2),
            ),
            want={"a": ("Running", 4), "b": ("Running", 2)},
            events={"a": ["Grown 2\u21924"], "b": ["Shrunk 4\u21922 to grow ns/a"]},
        ),
        id="a job shrunk so that an earlier job can grow names it",
    ),
]

CHURN = [
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).running(2).resized(at(0))),
            now=at(0, seconds=30),
            want={"a": ("Running", 2)},
            reasons={"a": "may grow at 2026-01-01T00:01:00Z"},
            wakeup=at(1),
        ),
        id="a running job may not grow before resize_interval",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(4).running(2).resized(at(0))),
            now=at(1),
            want={"a": ("Running", 4)},
            events={"a": ["Grown 2\u21924"]},
            fields={"a": {"last_resize_time": at(1)}},
            wakeup=None,
        ),
        id="after resize_interval it grows",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(8).running(4).resized(at(0)),
                job("b").min(2).max(4).new(),
            ),
            now=at(0, seconds=30),
            want={"a": ("Running", 4), "b": ("Running", 4)},
            events={"a": []},
        ),
        id="a job that may not grow keeps its current size",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(8).running(8).resized(at(0)),
                job("b").gang(4).new(),
            ),
            now=at(0, seconds=30),
            want={"a": ("Running", 4), "b": ("Running", 4)},
            events={"a": ["Shrunk 8\u21924 to admit ns/b"]},
            fields={"a": {"last_resize_time": at(0, seconds=30)}},
        ),
        id="shrinking to admit others is never delayed",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(8).waiting().resized(at(0))),
            now=at(0, seconds=30),
            want={"a": ("Running", 8)},
        ),
        id="a job admitted from zero starts at its max whatever its last resize",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(8).running(4).resized(at(0)), nodes=(4,)),
            now=at(0, seconds=30),
            want={"a": ("Running", 4)},
            wakeup=None,
        ),
        id="no wakeup for a deferred growth when no replica would fit",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("a").min(2).max(8).running(8).max(4)),
            want={"a": ("Running", 4)},
            events={"a": ["Shrunk 8\u21924 to its max size"]},
        ),
        id="a job above its max shrinks to it at once",
    ),
]


@pytest.mark.parametrize("case", ORDER)
def test_rule_2_order(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", STRATEGIES)
def test_rule_3_admission_strategies(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", GROWTH)
def test_rule_4_growth(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", PREEMPTION)
def test_rule_5_preemption(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", CHURN)
def test_rule_6_churn_control(case: Case) -> None:
    check(case)
