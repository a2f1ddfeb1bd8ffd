"""The scheduler loop's pure write policy and terminal fields: which blocks a pass writes, when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lattice.scheduler.core import Decision, JobView, Plan
from lattice.scheduler.core.plan import Deferred
from lattice.scheduler.loop.policy import Candidate, Need, WriteTiming, choose_writes, need
from lattice.scheduler.loop.terminal import terminal_fields, terminal_pending
from tests.unit.scheduler.test_loop_snapshot import FakePlugin

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TIMING = WriteTiming(
    requeue_write_delay=timedelta(seconds=60), position_interval=timedelta(seconds=10)
)


#: The printer columns' fields as the loop wrote them for ``view()``: no write needed for them.
SHOWN: dict[str, Any] = {"priority": 0, "minSize": 1, "maxSize": 1}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def view(name: str = "a", **kw: Any) -> JobView:
    return JobView(key=f"K/ns/{name}", kind="K", namespace="ns", name=name, creation_time=T0, **kw)


def decision(name: str = "a", *, changed: frozenset[str] = frozenset(), **kw: Any) -> Decision:
    fields: dict[str, Any] = {
        "stage": "Running",
        "size": 1,
        "submit_time": None,
        "queued_time": None,
        "requeue_time": None,
        "cooldown_time": None,
        "requeue_count": 0,
        "last_resize_time": None,
        "attained_service": 0.0,
        "service_updated_at": T0,
        "admitted_time": None,
        "queue_position": None,
        "reason": "",
    }
    fields.update(kw)
    return Decision(key=f"K/ns/{name}", changed_fields=changed, **fields)


@pytest.mark.parametrize(
    ("job", "made", "now", "want", "want_deferred"),
    [
        pytest.param(view(), decision(), at(0), Need.NOTHING, None, id="nothing changed"),
        pytest.param(
            view(), decision(changed=frozenset({"size"})), at(0), Need.WRITE, None, id="state"
        ),
        pytest.param(
            view(service_updated_at=T0),
            decision(changed=frozenset({"attained_service", "service_updated_at"})),
            at(0),
            Need.NOTHING,
            None,
            id="accounting alone is never written",
        ),
        pytest.param(
            view(),
            decision(changed=frozenset({"service_updated_at"}), service_updated_at=None),
            at(0),
            Need.WRITE,
            None,
            id="a service clock set or cleared is written once",
        ),
        pytest.param(
            view(pending_since=at(0)),
            decision(changed=frozenset({"requeue_time"}), requeue_time=at(0)),
            at(30),
            Need.NOTHING,
            at(60),
            id="a fresh pending clock waits for its minute",
        ),
        pytest.param(
            view(pending_since=at(0)),
            decision(changed=frozenset({"requeue_time"}), requeue_time=at(0)),
            at(60),
            Need.WRITE,
            None,
            id="a minute-old pending clock is written",
        ),
        pytest.param(
            view(), decision(queue_position=3), at(0), Need.MOVED, None, id="a shown move"
        ),
        pytest.param(
            view(), decision(queue_position=11), at(0), Need.NOTHING, None, id="beyond the head"
        ),
    ],
)
def test_need(job: JobView, made: Decision, now: datetime, want: Need, want_deferred: Any) -> None:
    what, deferred = need(made, Candidate(job, dict(SHOWN)), now=now, timing=TIMING)
    assert (what, deferred) == (want, want_deferred)


def test_a_finished_job_is_written_until_its_block_shows_the_end() -> None:
    terminal = {"stage": "Completed", "currentSize": 0, "completionTime": "t"}
    job = Candidate(view(finished=True), {"stage": "Running", "currentSize": 2}, terminal)
    assert need(decision(), job, now=T0, timing=TIMING) == (Need.WRITE, None)
    shown = Candidate(view(finished=True), dict(terminal), terminal)
    assert need(decision(), shown, now=T0, timing=TIMING) == (Need.NOTHING, None)


@pytest.mark.parametrize(
    ("shown", "want"),
    [
        pytest.param({}, Need.WRITE, id="never written: once"),
        pytest.param({**SHOWN, "priority": 5}, Need.WRITE, id="a new priority"),
        pytest.param({**SHOWN, "maxSize": 4}, Need.WRITE, id="a new max size"),
        pytest.param(dict(SHOWN), Need.NOTHING, id="as the view"),
    ],
)
def test_the_columns_fields_are_written_when_they_differ_from_the_view(
    shown: dict[str, Any], want: Need
) -> None:
    assert need(decision(), Candidate(view(), shown), now=T0, timing=TIMING) == (want, None)
    finished = Candidate(view(finished=True), shown)
    assert need(decision(), finished, now=T0, timing=TIMING) == (Need.NOTHING, None)


def plan_of(*decisions: Decision) -> Plan:
    return Plan(
        decisions={d.key: d for d in decisions},
        deferred_order=Deferred(tuple),
        next_wakeup=None,
        capacity_total=0,
        capacity_used=0,
    )


def test_moves_are_written_in_rounds_and_the_first_pass_is_one() -> None:
    jobs = {f"K/ns/{n}": Candidate(view(n), {**SHOWN, "queuePosition": 2}) for n in ("a", "b")}
    moved = plan_of(decision("a", queue_position=1), decision("b", queue_position=2))
    first = choose_writes(moved, jobs, now=at(0), positions_written=None, timing=TIMING)
    assert (first.write, first.wakeup, first.positions_written) == (("K/ns/a",), None, at(0))
    # Within the interval the move waits, and the loop wakes when the round is due.
    later = choose_writes(moved, jobs, now=at(4), positions_written=at(0), timing=TIMING)
    assert (later.write, later.wakeup, later.positions_written) == ((), at(10), at(0))
    due = choose_writes(moved, jobs, now=at(10), positions_written=at(0), timing=TIMING)
    assert (due.write, due.positions_written) == (("K/ns/a",), at(10))


def test_state_changes_go_first_then_moves_and_a_deferred_clock_sets_the_wakeup() -> None:
    jobs = {
        "K/ns/a": Candidate(view("a"), {**SHOWN, "queuePosition": 2}),
        "K/ns/b": Candidate(view("b"), dict(SHOWN)),
        "K/ns/c": Candidate(view("c", pending_since=at(0)), dict(SHOWN)),
    }
    plan = plan_of(
        decision("a", queue_position=1),
        decision("b", changed=frozenset({"stage"})),
        decision("c", changed=frozenset({"requeue_time"}), requeue_time=at(0)),
    )
    choice = choose_writes(plan, jobs, now=at(1), positions_written=None, timing=TIMING)
    assert choice.write == ("K/ns/b", "K/ns/a")
    assert choice.wakeup == at(60)


def exec_block(*conditions: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"status": {"execStatus": {"conditions": list(conditions), **more}}}


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param({}, None, id="no status"),
        pytest.param(exec_block({"type": "Running", "status": "True"}), None, id="still running"),
        pytest.param(exec_block({"type": "Failed", "status": "False"}), None, id="a False Failed"),
        pytest.param(
            exec_block({"type": "Succeeded", "status": "True"}, completionTime="t1"),
            {"stage": "Completed", "currentSize": 0, "placement": None, "completionTime": "t1"},
            id="succeeded: the exec completion time",
        ),
        pytest.param(
            exec_block({"type": "Failed", "status": "True", "lastTransitionTime": "t2"}),
            {"stage": "Completed", "currentSize": 0, "placement": None, "completionTime": "t2"},
            id="failed: else the condition's time",
        ),
        pytest.param(
            exec_block(
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "KFailedValidation",
                    "message": "invalid K: x",
                }
            ),
            {
                "stage": "Wrong",
                "currentSize": 0,
                "placement": None,
                "reason": "InvalidSpec",
                "message": "invalid K: x",
            },
            id="failed validation: Wrong",
        ),
    ],
)
def test_terminal_fields(obj: dict[str, Any], want: dict[str, Any] | None) -> None:
    assert terminal_fields(obj, FakePlugin()) == want


def test_terminal_pending_treats_null_as_absent() -> None:
    fields = {"stage": "Completed", "currentSize": 0, "completionTime": None}
    assert not terminal_pending({"stage": "Completed", "currentSize": 0}, fields)
    assert terminal_pending({"stage": "Running", "currentSize": 0}, fields)
    # A finished job's placement is removed.
    done = {"stage": "Completed", "currentSize": 0, "placement": None}
    assert terminal_pending({"stage": "Completed", "currentSize": 0, "placement": {"a": "n"}}, done)
