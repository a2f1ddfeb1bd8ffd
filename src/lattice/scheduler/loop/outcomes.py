"""The queue metrics of a pass: what each written decision did, and how many jobs wait or run.

Contract:
- :func:`outcome_of` (pure) reads one decision against the job's view and persisted block and
  says what it counts for, or ``None`` when nothing: an admission (an ``Admitted`` event) waited
  ``now - waitingSince`` (else the persisted ``queuedTime``; a job queued and admitted in the
  same pass waited 0 s), ``resume`` when the block shows the job ran
  before (``lastExecTime``), else ``first``; each ``Preempted`` event naming a beneficiary
  counts its ``cause``; a job that held pods on input and holds none now is evicted with the
  decision's wait reason code (``Preempted``, ``PodsPendingTimeout``, ``Suspended``,
  ``RequeueLimitExceeded``...); ``Grown``/``Shrunk`` events count as ``grow``/``shrink``.
  :func:`record` adds it to the metrics; the loop calls it once the decision's status write
  succeeded (a failed write is decided again, so it counts then).
- :class:`QueueGauges` sets ``lattice_pending_jobs{kind,namespace,status}`` (``waiting``: a
  candidate the plan leaves Waiting; ``cooldown``: RequeueCooldown) and
  ``lattice_admitted_jobs{kind,namespace}`` (Running with pods) from each pass's plan, for
  every (kind, namespace) that has a job the pass scheduled (0 when none is in that state), and
  removes the label sets of pairs that no longer have one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice.primitives.times import parse_opt_time
from lattice.runtime.metrics import Metrics
from lattice.scheduler.core import (
    Admitted,
    Decision,
    Grown,
    JobView,
    Preempted,
    Shrunk,
    Stage,
    WaitReason,
)

__all__ = ["Outcome", "QueueGauges", "outcome_of", "record"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one written decision counts for in the queue metrics."""

    kind: str
    namespace: str
    #: Seconds waited before this admission (None: not an admission, or no wait start known).
    waited: float | None = None
    admission: str = "first"
    preempted: tuple[str, ...] = ()
    evicted: str | None = None
    resizes: tuple[str, ...] = ()


def outcome_of(
    decision: Decision, *, view: JobView, block: Mapping[str, Any], now: datetime
) -> Outcome | None:
    """What ``decision`` counts for (see the module contract), or ``None``."""
    waited: float | None = None
    admission = "first"
    preempted: list[str] = []
    resizes: list[str] = []
    for event in decision.events:
        if isinstance(event, Admitted):
            start = (
                parse_opt_time(block.get("waitingSince"))
                or view.queued_time
                or decision.queued_time  # queued in this very pass
            )
            if start is not None:
                waited = max(0.0, (now - start).total_seconds())
            admission = "resume" if block.get("lastExecTime") else "first"
        elif isinstance(event, Preempted) and event.beneficiary is not None:
            preempted.append(event.cause or "EarlierInQueue")
        elif isinstance(event, Grown):
            resizes.append("grow")
        elif isinstance(event, Shrunk):
            resizes.append("shrink")
    evicted: str | None = None
    held = view.stage == Stage.RUNNING and view.current_size > 0
    if held and decision.size == 0 and decision.wait_reason is not None:
        evicted = str(decision.wait_reason)
    if waited is None and not preempted and evicted is None and not resizes:
        return None
    return Outcome(
        kind=view.kind,
        namespace=view.namespace,
        waited=waited,
        admission=admission,
        preempted=tuple(preempted),
        evicted=evicted,
        resizes=tuple(resizes),
    )


def record(metrics: Metrics, outcome: Outcome) -> None:
    """Add ``outcome`` to ``metrics``."""
    kind, ns = outcome.kind, outcome.namespace
    if outcome.waited is not None:
        metrics.admission_wait.labels(kind, ns, outcome.admission).observe(outcome.waited)
    for reason in outcome.preempted:
        metrics.preempted_jobs.labels(kind, ns, reason).inc()
    if outcome.evicted is not None:
        metrics.evicted_jobs.labels(kind, ns, outcome.evicted).inc()
    for direction in outcome.resizes:
        metrics.resizes.labels(kind, ns, direction).inc()


_PENDING = ("waiting", "cooldown")


class QueueGauges:
    """``lattice_pending_jobs`` and ``lattice_admitted_jobs``, replaced every pass."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._pairs: set[tuple[str, str]] = set()

    def update(self, decisions: Iterable[tuple[JobView, Decision]]) -> None:
        """Set the gauges from the pass's ``(view, decision)`` pairs."""
        counts: dict[tuple[str, str], list[int]] = {}
        for view, d in decisions:
            row = counts.setdefault((view.kind, view.namespace), [0, 0, 0])
            if d.stage == Stage.RUNNING and d.size > 0:
                row[2] += 1
            elif d.stage == Stage.REQUEUE_COOLDOWN:
                row[1] += 1
            elif d.stage == Stage.WAITING and d.wait_reason not in (None, WaitReason.SUSPENDED):
                row[0] += 1
        m = self._metrics
        for (kind, ns), (waiting, cooldown, admitted) in counts.items():
            m.pending_jobs.labels(kind, ns, "waiting").set(waiting)
            m.pending_jobs.labels(kind, ns, "cooldown").set(cooldown)
            m.admitted_jobs.labels(kind, ns).set(admitted)
        for kind, ns in self._pairs - counts.keys():
            for status in _PENDING:
                m.pending_jobs.remove(kind, ns, status)
            m.admitted_jobs.remove(kind, ns)
        self._pairs = set(counts)
