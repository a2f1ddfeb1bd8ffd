"""The text ``kubectl lattice`` prints: the queue table and the ``explain`` report.

Contract:
- Tables look like kubectl's: upper-case headers, left-aligned columns three spaces apart, no
  trailing blanks; ``-`` marks a value the object does not have.
- ``queue_table`` columns: POSITION, KIND, NAMESPACE/NAME, PRIORITY, STAGE (``New`` for none
  yet), SIZE/MIN/MAX (``currentSize``/min/max), WAITING (Go-style time since ``queuedTime``, for
  ``Waiting`` jobs only), LAST DECISION (``lastDecision``).
- ``explain_text``: the job's fields, a one-line verdict from its persisted state
  (:func:`verdict`), for a ``Waiting`` job with a position the jobs ahead of it (the closest
  ``MAX_AHEAD``), and its events, newest last.

Pure: ``now`` is an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lattice.api import Stage, format_time
from lattice.kubectl.rows import JobRow, text
from lattice.primitives.times import parse_opt_time
from lattice.scheduler.core.events import format_duration

__all__ = [
    "MAX_AHEAD",
    "NONE",
    "QUEUE_HEADER",
    "explain_text",
    "queue_table",
    "sort_events",
    "verdict",
]

NONE = "-"
#: ``explain`` lists at most this many of the jobs ahead (the closest ones).
MAX_AHEAD = 20
QUEUE_HEADER = (
    "POSITION",
    "KIND",
    "NAMESPACE/NAME",
    "PRIORITY",
    "STAGE",
    "SIZE/MIN/MAX",
    "WAITING",
    "LAST DECISION",
)
_AHEAD_HEADER = ("POSITION", "KIND", "NAMESPACE/NAME", "PRIORITY", "STAGE", "SIZE/MIN/MAX")
_EVENT_HEADER = ("AGE", "TYPE", "REASON", "FROM", "MESSAGE")
_FAR_PAST = datetime.min.replace(tzinfo=UTC)
#: What a waiting job's ``lastDecision`` (the scheduler core's wording) means for its user.
_WAITING_HINTS = (
    ("(StrictFIFO)", ". StrictFIFO admits no job past the first one that does not fit."),
    ("; the cluster has", ". Its minimum exceeds all eligible capacity: it cannot start as is."),
    ("fragmented across nodes", ". The free units are on nodes where its pods do not fit."),
    (" free", ". It starts when running jobs finish, shrink or are preempted."),
    ("Preempted by", ". It keeps its queued time, so it resumes ahead of later jobs."),
    ("Shrunk", ". It keeps its queued time, so it resumes ahead of later jobs."),
)


def _since(now: datetime, then: datetime) -> str:
    return format_duration(timedelta(seconds=max(0, int((now - then).total_seconds()))))


def _opt(value: int | None) -> str:
    return NONE if value is None else str(value)


def _sizes(r: JobRow) -> str:
    return f"{r.size}/{_opt(r.min_size)}/{_opt(r.max_size)}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=False)]
        lines.append((indent + "   ".join([*cells, row[-1]])).rstrip())
    return lines


def queue_table(rows: Iterable[JobRow], now: datetime) -> str:
    """The ``queue`` table of ``rows``, in the order given."""
    cells = [
        (
            _opt(r.position),
            r.kind,
            r.ref,
            _opt(r.priority),
            r.stage or "New",
            _sizes(r),
            _since(now, r.queued_time) if r.waiting and r.queued_time is not None else NONE,
            r.last_decision or (f"managed by {r.managed_by}" if r.managed_by else NONE),
        )
        for r in rows
    ]
    return "\n".join(_table(QUEUE_HEADER, cells)) + "\n"


def verdict(r: JobRow, now: datetime) -> str:
    """Why the job is where it is, in one sentence, from its persisted state only."""
    if r.managed_by:
        return f"It is managed by {r.managed_by}; Lattice neither schedules nor runs it."
    if r.stage == Stage.WRONG:
        detail = r.message or r.last_decision or r.invalid or "no message"
        return f"It is invalid and will not be scheduled ({r.reason or 'Invalid'}): {detail}"
    if r.stage == Stage.INIT:
        return (
            "The scheduler has not decided about it yet: check that the operator runs, watches "
            f"namespace {r.namespace} and has {r.kind} among its --enabled-kinds."
        )
    if r.stage == Stage.WAITING:
        if r.last_decision == "Suspended":
            return "It is suspended; it queues again, with a fresh queued time, when resumed."
        hint = next((h for key, h in _WAITING_HINTS if key in r.last_decision), "")
        if r.last_decision.startswith("Waiting"):
            return r.last_decision + hint
        where = f"at position {r.position}" if r.position is not None else "in the queue"
        return f"Waiting {where}; last decision: {r.last_decision or 'none recorded yet'}{hint}"
    if r.stage == Stage.REQUEUE_COOLDOWN:
        until = "an unrecorded time"
        if r.cooldown_time is not None:
            left = _since(r.cooldown_time, now) if r.cooldown_time > now else "0s"
            until = f"{format_time(r.cooldown_time)} (in {left})"
        return (
            "Its pods stayed Pending past the pending timeout, so it was requeued "
            f"({r.requeue_count} time(s)); it cools down until {until}, then queues again."
        )
    if r.stage == Stage.RUNNING:
        return f"It runs with size {r.size}: {r.last_decision or 'no decision recorded'}"
    if r.stage == Stage.COMPLETED:
        return "It has finished; the scheduler no longer considers it."
    return f"Stage {r.stage}: {r.last_decision or r.message or 'no decision recorded'}"


def _event_time(e: Mapping[str, Any]) -> datetime | None:
    series = e.get("series") or {}
    meta = e.get("metadata") or {}
    for raw in (
        series.get("lastObservedTime"),
        e.get("eventTime"),
        e.get("deprecatedLastTimestamp"),
        meta.get("creationTimestamp"),
    ):
        when = parse_opt_time(raw)
        if when is not None:
            return when
    return None


def sort_events(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Events oldest first (newest last), by their last observation."""
    return sorted(events, key=lambda e: _event_time(e) or _FAR_PAST)


def _event_cells(e: Mapping[str, Any], now: datetime) -> tuple[str, ...]:
    at = _event_time(e)
    count = int((e.get("series") or {}).get("count") or 1)
    age = NONE if at is None else _since(now, at)
    return (
        age if count == 1 else f"{age} (x{count})",
        text(e.get("type")),
        text(e.get("reason")),
        text(e.get("reportingController")),
        text(e.get("note")),
    )


def explain_text(
    r: JobRow,
    *,
    ahead: Sequence[JobRow],
    events: Sequence[Mapping[str, Any]],
    now: datetime,
    ahead_scope: str = "all namespaces",
) -> str:
    """The ``explain`` report (see the module docstring)."""
    queued = NONE
    if r.queued_time is not None:
        queued = format_time(r.queued_time)
        if r.waiting:
            queued += f" (waiting {_since(now, r.queued_time)})"
    fields = [
        ("Job", f"{r.kind} {r.ref}"),
        ("Stage", r.stage or "New"),
        ("Position", _opt(r.position)),
        ("Priority", _opt(r.priority)),
        ("Size/Min/Max", _sizes(r)),
        ("Queued", queued),
        ("Last decision", r.last_decision or NONE),
        ("Reason", r.reason or NONE),
        ("Message", r.message or NONE),
    ]
    width = max(len(k) for k, _ in fields) + 2
    out = [f"{(k + ':').ljust(width)}{v}" for k, v in fields]
    out += ["", f"Why: {verdict(r, now)}"]
    if r.waiting and r.position is not None:
        out += ["", f"Ahead of it ({len(ahead)}, {ahead_scope}):"]
        if len(ahead) > MAX_AHEAD:
            out.append(f"  ({len(ahead) - MAX_AHEAD} further ahead not shown)")
        shown = [
            (_opt(a.position), a.kind, a.ref, _opt(a.priority), a.stage or "New", _sizes(a))
            for a in ahead[-MAX_AHEAD:]
        ]
        out += _table(_AHEAD_HEADER, shown, indent="  ") if shown else ["  <none>"]
    out += ["", f"Events ({len(events)}, newest last):"]
    cells = [_event_cells(e, now) for e in events]
    out += _table(_EVENT_HEADER, cells, indent="  ") if cells else ["  <none>"]
    return "\n".join(out) + "\n"
