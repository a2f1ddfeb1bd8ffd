"""Kubeflow condition semantics (training-operator status.go) and meta.SetStatusCondition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lattice.api import (
    ConditionStatus,
    JobCondition,
    get_condition,
    is_failed,
    is_finished,
    is_running,
    is_succeeded,
    is_suspended,
    new_reason,
    set_condition,
    set_status_condition,
)
from lattice.api.trainjob import Condition

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
TRUE, FALSE = ConditionStatus.TRUE, ConditionStatus.FALSE


def cond(
    type_: str, status: ConditionStatus = TRUE, reason: str = "", at: datetime = T0
) -> JobCondition:
    return JobCondition(
        type=type_,
        status=status,
        reason=reason or f"Job{type_}",
        message=f"{type_} message",
        last_update_time=at,
        last_transition_time=at,
    )


def summary(conditions: list[JobCondition]) -> list[tuple[str, str, str, datetime | None]]:
    return [(c.type, c.status.value, c.reason or "", c.last_transition_time) for c in conditions]


@pytest.mark.parametrize(
    ("before", "set_", "after"),
    [
        pytest.param(
            [],
            ("Created", TRUE, "JobCreated"),
            [("Created", "True", "JobCreated", T1)],
            id="first-condition-is-appended",
        ),
        pytest.param(
            [cond("Created"), cond("Running")],
            ("Created", TRUE, "JobCreated"),
            [("Created", "True", "JobCreated", T0), ("Running", "True", "JobRunning", T0)],
            id="same-status-and-reason-changes-nothing",
        ),
        pytest.param(
            [cond("Created"), cond("Running")],
            ("Created", TRUE, "OtherReason"),
            [("Running", "True", "JobRunning", T0), ("Created", "True", "OtherReason", T0)],
            id="same-status-keeps-transition-time-and-moves-last",
        ),
        pytest.param(
            [cond("Created"), cond("Suspended")],
            ("Suspended", FALSE, "JobResumed"),
            [("Created", "True", "JobCreated", T0), ("Suspended", "False", "JobResumed", T1)],
            id="status-change-stamps-transition-time",
        ),
        pytest.param(
            [cond("Created"), cond("Running")],
            ("Restarting", TRUE, "JobRestarting"),
            [("Created", "True", "JobCreated", T0), ("Restarting", "True", "JobRestarting", T1)],
            id="restarting-removes-running",
        ),
        pytest.param(
            [cond("Created"), cond("Restarting")],
            ("Running", TRUE, "JobRunning"),
            [("Created", "True", "JobCreated", T0), ("Running", "True", "JobRunning", T1)],
            id="running-removes-restarting",
        ),
        pytest.param(
            [cond("Created"), cond("Running")],
            ("Succeeded", TRUE, "JobSucceeded"),
            [
                ("Created", "True", "JobCreated", T0),
                ("Running", "False", "JobRunning", T0),
                ("Succeeded", "True", "JobSucceeded", T1),
            ],
            id="succeeded-flips-running-to-false",
        ),
        pytest.param(
            [cond("Created"), cond("Running")],
            ("Failed", TRUE, "JobFailed"),
            [
                ("Created", "True", "JobCreated", T0),
                ("Running", "False", "JobRunning", T0),
                ("Failed", "True", "JobFailed", T1),
            ],
            id="failed-flips-running-to-false",
        ),
        pytest.param(
            [cond("Created"), cond("Failed")],
            ("Running", TRUE, "JobRunning"),
            [("Created", "True", "JobCreated", T0), ("Failed", "True", "JobFailed", T0)],
            id="failed-is-sticky",
        ),
        pytest.param(
            [cond("Created"), cond("Failed", FALSE)],
            ("Running", TRUE, "JobRunning"),
            [
                ("Created", "True", "JobCreated", T0),
                ("Failed", "False", "JobFailed", T0),
                ("Running", "True", "JobRunning", T1),
            ],
            id="failed-false-is-not-sticky",
        ),
    ],
)
def test_set_condition(
    before: list[JobCondition],
    set_: tuple[str, ConditionStatus, str],
    after: list[tuple[str, str, str, datetime]],
) -> None:
    snapshot = [c.model_copy(deep=True) for c in before]
    type_, status, reason = set_
    result = set_condition(before, type=type_, status=status, reason=reason, message="m", now=T1)
    assert summary(result) == after
    assert before == snapshot, "the input list must not be mutated"


def test_unchanged_condition_compares_equal_so_callers_can_skip_writes() -> None:
    before = [cond("Created"), cond("Running")]
    same = set_condition(
        before, type="Running", status=TRUE, reason="JobRunning", message="x", now=T1
    )
    assert same == before
    changed = set_condition(
        before, type="Running", status=TRUE, reason="Other", message="x", now=T1
    )
    assert changed != before
    latest = changed[-1]
    assert latest.last_update_time == T1
    assert latest.message == "x"


def test_now_is_normalised_to_utc_seconds() -> None:
    now = datetime(2026, 1, 1, 3, 0, 0, 987654, tzinfo=UTC)
    (created,) = set_condition([], type="Created", status=TRUE, reason="r", message="", now=now)
    assert created.last_transition_time == datetime(2026, 1, 1, 3, tzinfo=UTC)
    assert created.to_dict()["lastTransitionTime"] == "2026-01-01T03:00:00Z"


def test_predicates_and_reason() -> None:
    conditions = [cond("Created"), cond("Running", FALSE), cond("Succeeded"), cond("Suspended")]
    assert is_succeeded(conditions)
    assert is_finished(conditions)
    assert not is_failed(conditions)
    assert not is_running(conditions)
    assert is_suspended(conditions)
    assert get_condition(conditions, "Running") == conditions[1]
    assert get_condition(conditions, "Restarting") is None
    assert is_finished([cond("Failed")])
    assert not is_finished([cond("Failed", FALSE)])
    assert new_reason("MPIJob", "Running") == "MPIJobRunning"


def test_set_status_condition_upserts_in_place_and_keeps_transition_time() -> None:
    first = set_status_condition(
        [], type="Suspended", status=TRUE, reason="Suspended", message="", now=T0
    )
    second = set_status_condition(
        first, type="Complete", status=FALSE, reason="Running", message="", now=T0
    )
    same_status = set_status_condition(
        second, type="Suspended", status=TRUE, reason="StillSuspended", message="m", now=T1
    )
    assert [c.type for c in same_status] == ["Suspended", "Complete"]
    assert same_status[0].last_transition_time == T0
    assert same_status[0].reason == "StillSuspended"
    resumed = set_status_condition(
        same_status,
        type="Suspended",
        status=FALSE,
        reason="Resumed",
        message="",
        now=T1,
        observed_generation=3,
    )
    assert resumed[0].last_transition_time == T1
    assert resumed[0].observed_generation == 3
    assert isinstance(resumed[0], Condition)
    assert first[0].status == TRUE, "the input list must not be mutated"
