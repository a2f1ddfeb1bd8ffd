"""The text ``kubectl lattice`` prints: the queue table and the ``explain`` report.

Contract:
- Tables look like kubectl's: upper-case headers, left-aligned columns three spaces apart, no
  trailing blanks; ``-`` marks a value the object does not have.
- ``queue_table`` columns: POSITION, KIND, NAMESPACE/NAME, PRIORITY, STAGE (``New`` for none
  yet), SIZE/MIN/MAX (``currentSize``/min/max), WAITING (Go-style time since ``waitingSince``,
  else ``queuedTime``, for ``Waiting`` jobs only), LAST DECISION (``lastDecision``).
- ``queue_document``: the same rows as a ``json`` or ``yaml`` document ``{"items": [...]}``,
  one mapping per row with camelCase keys (``position``, ``positionComputed``, ``priority``,
  ``stage``, ``currentSize``, ``minSize``, ``maxSize``, ``queuedTime``, ``waitingSince``,
  ``waitingSeconds`` (since ``waitingSince``, else ``queuedTime``), ``lastDecision``,
  ``reason``, ``message``...; ``null`` where the object has no value).
- ``explain_text``: the scheduler's view first (stage, last decision, reason, position), a
  one-line verdict from that persisted state (:func:`verdict`; a child-creation refusal in
  force comes first, with the apiserver's message), the scheduler's own events
  (reasons in :data:`SCHEDULER_REASONS`), for a ``Waiting`` job with a position the jobs ahead
  of it (the closest ``MAX_AHEAD``), the job's other details, then every other event; each list
  of events is its newest ``limit``, newest last.

Pure: ``now`` is an argument.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from lattice.api import Stage, format_time
from lattice.kubectl.rows import JobRow, text
from lattice.primitives.times import parse_opt_time
from lattice.scheduler.core import REQUEUE_LIMIT_EXCEEDED
from lattice.scheduler.core import events as scheduler_events
from lattice.scheduler.core.events import format_duration

__all__ = [
    "FORMATS",
    "MAX_AHEAD",
    "NONE",
    "QUEUE_HEADER",
    "SCHEDULER_REASONS",
    "explain_text",
    "queue_document",
    "queue_items",
    "queue_table",
    "sort_events",
    "verdict",
]

#: ``-o`` formats of ``queue``.
FORMATS = ("json", "yaml")
#: Event reasons the scheduler itself records (the core's event types).
SCHEDULER_REASONS = frozenset(
    cls.reason
    for cls in (
        scheduler_events.Queued,
        scheduler_events.Admitted,
        scheduler_events.Grown,
        scheduler_events.Shrunk,
        scheduler_events.Preempted,
        scheduler_events.Requeued,
        scheduler_events.CooldownOver,
        scheduler_events.Suspended,
    )
) | {REQUEUE_LIMIT_EXCEEDED}

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
    (
        "cannot be placed even on an empty cluster",
        ". No node could take its pods even with no other Lattice job running: change its"
        " requests, node selectors or tolerations, or add matching nodes.",
    ),
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
            _since(now, r.wait_start) if r.waiting and r.wait_start is not None else NONE,
            r.last_decision or (f"managed by {r.managed_by}" if r.managed_by else NONE),
        )
        for r in rows
    ]
    return "\n".join(_table(QUEUE_HEADER, cells)) + "\n"


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def queue_items(rows: Iterable[JobRow], now: datetime) -> list[dict[str, Any]]:
    """One mapping per row, in the order given (see the module docstring)."""
    items = []
    for r in rows:
        start = r.wait_start if r.waiting else None
        items.append(
            {
                "position": r.position,
                "positionComputed": r.computed,
                "kind": r.kind,
                "namespace": r.namespace,
                "name": r.name,
                "priority": r.priority,
                "stage": r.stage or "New",
                "currentSize": r.size,
                "minSize": r.min_size,
                "maxSize": r.max_size,
                "queuedTime": _when(r.queued_time),
                "waitingSince": _when(r.waiting_since),
                "waitingSeconds": (
                    None if start is None else max(0, int((now - start).total_seconds()))
                ),
                "lastDecision": r.last_decision or None,
                "reason": r.reason or None,
                "message": r.message or None,
                "requeueCount": r.requeue_count,
                "managedBy": r.managed_by or None,
                "invalid": r.invalid or None,
            }
        )
    return items


def queue_document(rows: Iterable[JobRow], *, now: datetime, fmt: str) -> str:
    """The queue as a ``json`` or ``yaml`` document ``{"items": [...]}``."""
    doc = {"items": queue_items(rows, now)}
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(doc, sort_keys=False))
    raise ValueError(f"unknown output format {fmt!r}; known: {', '.join(FORMATS)}")


def verdict(r: JobRow, now: datetime) -> str:
    """Why the job is where it is, in one sentence, from its persisted state only."""
    if r.refused and r.stage == Stage.RUNNING:
        since = f" for {_since(now, r.refused_since)}" if r.refused_since is not None else ""
        return (
            f"It holds size {r.size}, but the apiserver has refused its children{since}: "
            f"{r.refused}. Unless that stops, it is requeued after the operator's "
            "--child-refusal-timeout and releases its capacity."
        )
    if r.managed_by:
        return f"It is managed by {r.managed_by}; Lattice neither schedules nor runs it."
    if r.stage == Stage.WRONG:
        detail = r.message or r.last_decision or r.invalid or "no message"
        why = f"({r.reason or 'Invalid'}): {detail}"
        return f"It is invalid and will not be scheduled until its spec is fixed {why}"
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
        why = "Its pods stayed Pending past the pending timeout"
        if "the apiserver refused its children" in r.last_decision:
            why = f"The apiserver refused its children past the refusal timeout ({r.last_decision})"
        return (
            f"{why}, so it was requeued "
            f"({r.requeue_count} time(s)); it cools down until {until}, then queues again."
        )
    if r.stage == Stage.RUNNING:
        return f"It runs with size {r.size}: {r.last_decision or 'no decision recorded'}"
    if r.stage == Stage.FAILED:
        detail = r.message or r.last_decision or "no message"
        return (
            f"It failed ({r.reason or REQUEUE_LIMIT_EXCEEDED}): {detail}. The scheduler no "
            "longer considers it; find out why kube-scheduler refused its pods, then recreate it."
        )
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


def _events_block(
    title: str, events: Sequence[Mapping[str, Any]], now: datetime, limit: int
) -> list[str]:
    shown = list(events)[-limit:] if limit > 0 else []
    more = f", {len(events) - len(shown)} older not shown" if len(events) > len(shown) else ""
    out = ["", f"{title} ({len(shown)}{more}, newest last):"]
    cells = [_event_cells(e, now) for e in shown]
    return out + (_table(_EVENT_HEADER, cells, indent="  ") if cells else ["  <none>"])


def _field_lines(fields: Sequence[tuple[str, str]], width: int) -> list[str]:
    return [f"{(k + ':').ljust(width)}{v}" for k, v in fields]


def explain_text(
    r: JobRow,
    *,
    ahead: Sequence[JobRow],
    events: Sequence[Mapping[str, Any]],
    now: datetime,
    ahead_scope: str = "all namespaces",
    limit: int = 15,
) -> str:
    """The ``explain`` report (see the module docstring)."""
    queued = NONE
    if r.queued_time is not None:
        queued = format_time(r.queued_time)
        start = r.wait_start
        if r.waiting and start is not None:
            queued += f" (waiting {_since(now, start)})"
    position = _opt(r.position)
    if r.computed:
        position += " (computed by kubectl lattice in the scheduler's order)"
    decision = [
        ("Stage", r.stage or "New"),
        ("Last decision", r.last_decision or NONE),
        ("Reason", r.reason or NONE),
        ("Position", position),
    ]
    job = [
        ("Priority", _opt(r.priority)),
        ("Size/Min/Max", _sizes(r)),
        ("Queued", queued),
        ("Message", r.message or NONE),
    ]
    if r.refused:
        job.append(("Refused", r.refused))
    width = max(len(k) for k, _ in (*decision, *job)) + 2
    out = [f"Job: {r.kind} {r.ref}", "", "Scheduler:"]
    out += _field_lines(decision, width)
    out += ["", f"Why: {verdict(r, now)}"]
    mine = [e for e in events if text(e.get("reason")) in SCHEDULER_REASONS]
    others = [e for e in events if text(e.get("reason")) not in SCHEDULER_REASONS]
    out += _events_block("Scheduler events", mine, now, limit)
    if r.waiting and r.position is not None:
        out += ["", f"Ahead of it ({len(ahead)}, {ahead_scope}):"]
        if len(ahead) > MAX_AHEAD:
            out.append(f"  ({len(ahead) - MAX_AHEAD} further ahead not shown)")
        shown = [
            (_opt(a.position), a.kind, a.ref, _opt(a.priority), a.stage or "New", _sizes(a))
            for a in ahead[-MAX_AHEAD:]
        ]
        out += _table(_AHEAD_HEADER, shown, indent="  ") if shown else ["  <none>"]
    out += ["", "Details:"]
    out += _field_lines(job, width)
    out += _events_block("Other events", others, now, limit)
    return "\n".join(out) + "\n"
