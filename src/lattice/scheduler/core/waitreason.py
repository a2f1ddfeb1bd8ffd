"""Why a job is held back: a stable CamelCase code and its sentence, for every decision (pure).

Contract (internal to the core; the loop persists the result as the scheduler block's
``reason`` and ``message``):

- :func:`classify` maps a job's final working state after a pass to ``(code, message)``. Each
  code has one rule, tried in this order:

  ======================== ===============================================================
  code                     rule
  ======================== ===============================================================
  ``None``                 a finished job, a stage the scheduler does not own (passed
                           through: its block's reason is left as it is), or a job left
                           ``Running`` with pods (running clears both fields)
  ``InvalidSpec``          the pass made the job ``Wrong`` (``JobView.problem()``)
  ``RequeueLimitExceeded`` the pass moved a job it owned to stage ``Failed``
  ``PodsPendingTimeout``   stage ``RequeueCooldown`` (requeued, or still cooling down)
  ``Suspended``            a suspended job (stage ``Waiting``, holding nothing)
  ``Preempted``            held pods on input and holds none now (``Waiting``): the pass
                           stopped it; only in that pass, the next computes another code
  ``ExceedsClusterCapacity`` its minimum fits nowhere even on the empty cluster
  ``BlockedByStrictFIFO``  StrictFIFO: behind the head of the queue, which does not fit
  ``Fragmented``           enough free units, not on nodes where its pods fit: with per-pod
                           demands, the free totals after the pass hold its minimum; in the
                           unit model, the free units at its check do
  ``InsufficientCapacity`` fewer free units (or resources) than its minimum needs
  ``Queued``               any other waiting candidate (not tried in the pass)
  ======================== ===============================================================

  The message never names the queue position, so it is the same sentence wherever the job
  sits; it may name free units, which change often (the loop never writes for wording alone).
- :func:`preemption_cause` says why a stopped job lost to its beneficiary, comparing their
  order keys' parts (Kueue's ``kueue_preempted_workloads_total`` reasons, in Lattice's terms).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from lattice.primitives.times import format_time
from lattice.scheduler.core.events import Preempted
from lattice.scheduler.core.types import Stage

if TYPE_CHECKING:
    from lattice.scheduler.core.state import JobState

__all__ = ["PreemptionCause", "WaitReason", "classify", "preemption_cause"]

_OWNED = frozenset({Stage.NEW, Stage.WAITING, Stage.RUNNING, Stage.REQUEUE_COOLDOWN})


class WaitReason(enum.StrEnum):
    """The scheduler block's ``reason``: why the scheduler holds the job back."""

    QUEUED = "Queued"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    FRAGMENTED = "Fragmented"
    BLOCKED_BY_STRICT_FIFO = "BlockedByStrictFIFO"
    EXCEEDS_CLUSTER_CAPACITY = "ExceedsClusterCapacity"
    PREEMPTED = "Preempted"
    SUSPENDED = "Suspended"
    PODS_PENDING_TIMEOUT = "PodsPendingTimeout"
    REQUEUE_LIMIT_EXCEEDED = "RequeueLimitExceeded"
    INVALID_SPEC = "InvalidSpec"


class PreemptionCause(enum.StrEnum):
    """Why a stopped job ranked after the job it made room for (scheduling order, rule 2)."""

    HIGHER_PRIORITY = "HigherPriority"
    LEAST_ATTAINED_SERVICE = "LeastAttainedService"
    EARLIER_IN_QUEUE = "EarlierInQueue"


def preemption_cause(victim: JobState, beneficiary: JobState) -> PreemptionCause:
    """The first order-key criterion on which ``beneficiary`` beats ``victim``."""
    if beneficiary.view.priority > victim.view.priority:
        return PreemptionCause.HIGHER_PRIORITY
    if beneficiary.rank < victim.rank:
        return PreemptionCause.LEAST_ATTAINED_SERVICE
    if beneficiary.rank == victim.rank == 1 and _later(beneficiary, victim):
        return PreemptionCause.LEAST_ATTAINED_SERVICE  # queued later, ahead by less service
    return PreemptionCause.EARLIER_IN_QUEUE


def _later(a: JobState, b: JobState) -> bool:
    """Whether ``a`` was queued after ``b`` (a job never queued counts as queued last)."""
    if a.queued is None:
        return b.queued is not None
    return b.queued is not None and a.queued > b.queued


def _units(n: int) -> str:
    return f"{n} unit" if n == 1 else f"{n} units"


def _need(s: JobState) -> str:
    """``needs N units, M free`` (the units at the job's check in this pass)."""
    return f"needs {_units(s.view.units_at(s.view.min_size))}, {s.free_at_check} free"


def _preempted(s: JobState) -> str:
    event = next((e for e in reversed(s.events) if isinstance(e, Preempted)), None)
    at = format_time(s.last_resize) if s.last_resize is not None else "?"
    if event is None or event.beneficiary is None:
        detail = event.detail if event is not None else "not enough capacity"
        return f"Stopped at {at}: {detail}"
    return (
        f"Preempted by {event.beneficiary} (priority {event.beneficiary_priority}) at {at}; "
        f"{_need(s)}"
    )


def classify(s: JobState) -> tuple[WaitReason | None, str]:
    """``(code, message)`` of ``s`` after its pass (see the module contract's table)."""
    v = s.view
    stage = s.stage
    if stage == Stage.RUNNING and s.size > 0:
        return None, ""
    if v.finished or v.stage not in _OWNED:
        return None, ""
    if stage == Stage.WRONG:
        return WaitReason.INVALID_SPEC, s.reason
    if stage == Stage.FAILED:
        return WaitReason.REQUEUE_LIMIT_EXCEEDED, s.reason
    if stage == Stage.REQUEUE_COOLDOWN:
        return WaitReason.PODS_PENDING_TIMEOUT, s.reason
    if stage != Stage.WAITING:
        return None, ""
    if v.suspended:
        return WaitReason.SUSPENDED, "Suspended: holds nothing until resumed"
    if s.held:
        return WaitReason.PREEMPTED, _preempted(s)
    if s.unfittable:
        return WaitReason.EXCEEDS_CLUSTER_CAPACITY, s.reason
    if s.blocker is not None:
        return (
            WaitReason.BLOCKED_BY_STRICT_FIFO,
            f"behind {s.blocker.display_name}, the head of the queue (StrictFIFO)",
        )
    if s.position is None:
        return WaitReason.QUEUED, "Queued; not tried yet"
    if s.detail:  # per-pod demands: the binding constraint, in the cluster's terms
        need = f"needs {_units(v.units_at(v.min_size))}; {s.detail}"
        if s.fragmented:
            return WaitReason.FRAGMENTED, need
        return WaitReason.INSUFFICIENT_CAPACITY, need
    if v.units_at(v.min_size) <= s.free_at_check:
        return WaitReason.FRAGMENTED, f"{_need(s)}; not on nodes where its pods fit"
    return WaitReason.INSUFFICIENT_CAPACITY, _need(s)
