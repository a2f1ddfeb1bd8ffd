"""Event messages and the time/duration formats they use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lattice.scheduler.core import (
    Admitted,
    CooldownOver,
    Grown,
    Preempted,
    Queued,
    Requeued,
    SchedulerEvent,
    Shrunk,
    Suspended,
    format_duration,
    format_time,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(timedelta(0), "0s", id="zero"),
        pytest.param(timedelta(seconds=30), "30s", id="seconds"),
        pytest.param(timedelta(minutes=5), "5m0s", id="minutes like Go"),
        pytest.param(timedelta(hours=1), "1h0m0s", id="hours like Go"),
        pytest.param(timedelta(hours=26, seconds=1), "26h0m1s", id="days become hours"),
        pytest.param(timedelta(seconds=1, milliseconds=500), "1.5s", id="fractions"),
        pytest.param(timedelta(seconds=-90), "-1m30s", id="negative"),
    ],
)
def test_format_duration(value: timedelta, text: str) -> None:
    assert format_duration(value) == text


def test_format_time_is_utc_rfc3339_seconds() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert format_time(datetime(2026, 1, 1, 2, 10, 0, 999, tzinfo=plus_two)) == (
        "2026-01-01T00:10:00Z"
    )
    assert format_time(datetime(2026, 1, 1, 0, 10)) == "2026-01-01T00:10:00Z"


@pytest.mark.parametrize(
    ("event", "reason", "kind", "message"),
    [
        pytest.param(Queued(), "Queued", "Normal", "Queued", id="queued"),
        pytest.param(
            Admitted(size=4, min_size=2, max_size=4),
            "Admitted",
            "Normal",
            "Admitted with 4 (min 2, max 4)",
            id="admitted",
        ),
        pytest.param(Grown(old=2, new=4), "Grown", "Normal", "Grown 2\u21924", id="grown"),
        pytest.param(
            Shrunk(old=4, new=2, beneficiary="ns/c"),
            "Shrunk",
            "Normal",
            "Shrunk 4\u21922 to admit ns/c",
            id="shrunk to admit",
        ),
        pytest.param(
            Shrunk(old=4, new=2, beneficiary="ns/a", beneficiary_admitted=False),
            "Shrunk",
            "Normal",
            "Shrunk 4\u21922 to grow ns/a",
            id="shrunk to grow",
        ),
        pytest.param(
            Preempted(old=4, beneficiary="ns/d", beneficiary_priority=10),
            "Preempted",
            "Warning",
            "Preempted by ns/d (priority 10)",
            id="preempted",
        ),
        pytest.param(
            Preempted(old=4, detail="needs 8 units; the cluster has 4"),
            "Preempted",
            "Warning",
            "Stopped: needs 8 units; the cluster has 4",
            id="stopped without beneficiary",
        ),
        pytest.param(
            Requeued(
                pending_for=timedelta(minutes=5),
                cooldown_until=datetime(2026, 1, 1, 0, 10, tzinfo=UTC),
                requeue_count=1,
            ),
            "Requeued",
            "Warning",
            "Requeued: pods pending for 5m0s; cooldown until 2026-01-01T00:10:00Z",
            id="requeued",
        ),
        pytest.param(
            CooldownOver(), "CooldownOver", "Normal", "Cooldown over; queued again", id="cooldown"
        ),
        pytest.param(
            Suspended(old=3), "Suspended", "Normal", "Suspended: released size 3", id="suspended"
        ),
    ],
)
def test_event_messages(event: SchedulerEvent, reason: str, kind: str, message: str) -> None:
    assert (event.reason, event.type, event.message) == (reason, kind, message)
