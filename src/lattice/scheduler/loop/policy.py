"""The write policy: which jobs' scheduler blocks a pass writes, and when (pure).

Contract (no I/O, no clock: ``now`` is an argument; deterministic in its arguments):

- A job is written (:attr:`Need.WRITE`) when its decision changed persisted state other than
  accounting, or when it finished and its block does not show that yet (``terminal``, see
  :mod:`.terminal`). A job whose only change is the shown ``queuePosition``
  (``snapshot.shown_position``: the first 10 waiting jobs) is :attr:`Need.MOVED`: moves are
  written in rounds at most every ``position_interval`` (10 s, as Kueue refreshed its
  pending-workload positions every few seconds), so a queue that moves on every pass costs one
  write per shown job per round, not per pass. A job whose wait ``reason`` code (the
  decision's ``wait_reason``; none while it runs) differs from the persisted one is written at
  once, wherever it sits in the queue, so no held-back job shows a blank or stale code.
  ``lastDecision`` and ``message`` ride along with other writes only: the wording alone (free
  units, position) never costs a write.
- An accounting-only change (``attainedService``, ``serviceUpdatedTime`` of a running job) is
  never written alone (flushing it every minute cost one write per running job per minute:
  9,110 status patches for 1,000 MPIJobs in the throughput bench), except the first time a
  running job's service clock is set. Service accrues from the persisted pair at the persisted
  size, and every size change is written, so a restarted operator computes the same service.
- A ``requeueTime`` that only starts the pending clock (the persisted one is unset and the new
  one is the job's ``pending_since``, which the pods themselves give a restarted operator) is
  written once it is ``requeue_write_delay`` (60 s) old, or earlier with any other write: pods
  that start within that time cost no write at all (nor one to clear it).
- An unfinished job whose persisted ``priority``, ``minSize`` or ``maxSize`` (what the printer
  columns show) differs from its view's is written: they change only with the spec, so this
  costs one write per spec change (and one per job written before these fields existed).
- :func:`choose_writes` applies this to a whole plan: the jobs to write now, when the loop must
  wake to write what it deferred, and when the last position round was (the first pass counts
  as a round).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from lattice.scheduler.core import ACCOUNTING_FIELDS, Decision, JobView, Plan, Stage
from lattice.scheduler.loop.snapshot import shown_position
from lattice.scheduler.loop.terminal import terminal_pending

__all__ = [
    "Candidate",
    "Need",
    "WriteChoice",
    "WriteTiming",
    "choose_writes",
    "need",
    "requeue_due",
]

_REQUEUE_ONLY = frozenset({"requeue_time"})


class Need(enum.Enum):
    """What a job's status needs after a pass."""

    NOTHING = enum.auto()
    WRITE = enum.auto()  # persisted state changed: write now
    MOVED = enum.auto()  # only the shown queuePosition changed: write with the next round


@dataclass(frozen=True, slots=True)
class WriteTiming:
    """The policy's two delays."""

    requeue_write_delay: timedelta = timedelta(seconds=60)
    position_interval: timedelta = timedelta(seconds=10)


class Candidate(NamedTuple):
    """What the policy reads of one job: its view, persisted block and terminal fields (a named
    tuple: a pass builds one per job)."""

    view: JobView
    block: Mapping[str, Any]
    terminal: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class WriteChoice:
    """The outcome of :func:`choose_writes`."""

    #: Plan keys to write now, in the order given.
    write: tuple[str, ...]
    #: When a deferred write (a requeueTime, a position round) falls due; None: nothing deferred.
    wakeup: datetime | None
    #: When the last position round was (now, if this pass is one).
    positions_written: datetime | None


def requeue_due(view: JobView, decision: Decision, delay: timedelta) -> datetime | None:
    """When a requeueTime that only starts the pending clock must be written, or ``None`` when
    ``decision`` holds no such value."""
    start = decision.requeue_time
    if view.requeue_time is not None or start is None or start != view.pending_since:
        return None
    return start + delay


def need(
    decision: Decision, job: Candidate, *, now: datetime, timing: WriteTiming
) -> tuple[Need, datetime | None]:
    """What ``job`` needs after ``decision``, and when a deferred requeueTime falls due."""
    if job.terminal is not None and terminal_pending(job.block, job.terminal):
        return Need.WRITE, None
    if not job.view.finished and _shown_spec_changed(job):
        return Need.WRITE, None
    code = decision.wait_reason
    if (code is not None or decision.stage == Stage.RUNNING) and job.block.get("reason") != code:
        return Need.WRITE, None  # the code changed (its wording alone never does this)
    deferred: datetime | None = None
    if decision.changed_fields:  # most decisions change nothing: skip the set arithmetic
        state = decision.changed_fields - ACCOUNTING_FIELDS
        due = (
            requeue_due(job.view, decision, timing.requeue_write_delay)
            if state == _REQUEUE_ONLY
            else None
        )
        if due is not None and now < due:
            deferred, state = due, frozenset()
        if state:
            return Need.WRITE, None
        accounting = decision.changed_fields & ACCOUNTING_FIELDS
        if accounting and None in (job.view.service_updated_at, decision.service_updated_at):
            return Need.WRITE, None  # a running job's service clock is persisted once
    if job.block.get("queuePosition") != shown_position(decision):
        return Need.MOVED, deferred
    return Need.NOTHING, deferred


def _shown_spec_changed(job: Candidate) -> bool:
    """Whether the persisted ``priority``/``minSize``/``maxSize`` differ from the view's."""
    block, view = job.block, job.view
    return (block.get("priority"), block.get("minSize"), block.get("maxSize")) != (
        view.priority,
        view.min_size,
        view.max_size,
    )


def choose_writes(
    plan: Plan,
    jobs: Mapping[str, Candidate],
    *,
    now: datetime,
    positions_written: datetime | None,
    timing: WriteTiming,
) -> WriteChoice:
    """The jobs of ``plan`` to write now (see the module contract), in ``jobs`` order."""
    write: list[str] = []
    moved: list[str] = []
    wakeups: list[datetime] = []
    for key, job in jobs.items():
        what, deferred = need(plan[key], job, now=now, timing=timing)
        if deferred is not None:
            wakeups.append(deferred)
        if what is Need.WRITE:
            write.append(key)
        elif what is Need.MOVED:
            moved.append(key)
    round_due = None if positions_written is None else positions_written + timing.position_interval
    if round_due is None or now >= round_due:
        write += moved
        if moved or round_due is None:  # the first pass counts as a round
            positions_written = now
    elif moved:
        wakeups.append(round_due)
    return WriteChoice(
        write=tuple(write), wakeup=min(wakeups, default=None), positions_written=positions_written
    )
