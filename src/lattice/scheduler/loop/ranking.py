"""Reconcile-queue ranking of the jobs a pass resized (the resize band).

Contract: :class:`Ranking` remembers, for ``URGENT_FOR`` seconds (``clock.monotonic()``), the
jobs a pass shrank or stopped (with the priority of the highest-priority job that pass admitted
or grew, their own when it grew none) and the jobs it admitted or grew (with the size given).

- :meth:`Ranking.rank` orders status writes: a shrunk job at its beneficiary's priority.
- :meth:`Ranking.priority_of` ranks reconciles: a job's priority as the last pass saw it, and
  for a job in the band ``RESIZE_BAND`` + its rank (a shrunk job one above) until its live pods
  show the resize acted on (a grown job has as many as its size, a shrunk one no more). Until
  then the resize is capacity lying idle, or a grant waiting for it, while every other
  reconcile (a new job's ``Created`` condition, the pod counts of a job that has its pods) is
  bookkeeping. The band ends with the pods, not with the time: the reconciles that follow a
  grant (its pods created, bound, running) must not queue ahead of the next grant. A job a
  pass shrank ranks just above the job it made room for: its pods must go before the
  beneficiary's can bind (measured on the scheduler-heavy bench, see bench/RESULTS.md).

PriorityClass values are 32-bit, so ``RESIZE_BAND`` (2^33) bands never overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lattice.clock import Clock
from lattice.scheduler.core import JobView, Plan

__all__ = ["RESIZE_BAND", "URGENT_FOR", "Ranking", "urgency"]

#: How long a job a pass resized keeps its place in the resize band (and a job it shrank its
#: beneficiary's priority) for reconciles (seconds): long enough for the watch to deliver the
#: write and a worker to take the key, even when the next passes follow at once.
URGENT_FOR = 30.0

#: Added to the reconcile rank of a job a pass resized in the last ``URGENT_FOR`` seconds.
RESIZE_BAND = 1 << 33


def urgency(plan: Plan, views: Mapping[str, JobView]) -> tuple[dict[str, int], set[str]]:
    """The jobs ``plan`` shrinks (or stops), each with the highest priority among the jobs it
    admits or grows (its own when it grows nothing: a job suspended or requeued); and the jobs
    it grows."""
    grown: set[str] = set()
    shrunk: dict[str, int] = {}
    for k, view in views.items():
        size, held = plan[k].size, view.current_size
        if size > held:
            grown.add(k)
        elif size < held:
            shrunk[k] = view.priority
    if grown and shrunk:
        top = max(views[k].priority for k in grown)
        shrunk = dict.fromkeys(shrunk, top)
    return shrunk, grown


class Ranking:
    """The resize band (see the module contract)."""

    def __init__(self, clock: Clock, *, live_pods: Callable[[str, str], int]) -> None:
        self._clock = clock
        #: (kind, "namespace/name") -> how many of the job's pods exist and are not deleting.
        self._live_pods = live_pods
        #: Jobs shrunk: the priority of what they made room for, until when, the size given.
        self._urgent: dict[str, tuple[int, float, int]] = {}
        #: Jobs admitted or grown: the size given, and until when.
        self._grown: dict[str, tuple[int, float]] = {}

    def note(self, plan: Plan, views: Mapping[str, JobView]) -> None:
        """Remember what ``plan`` shrinks and grows; forget expired entries, and a job's shrink
        once a plan grows it again (and the other way round)."""
        clock = self._clock.monotonic()
        until = clock + URGENT_FOR
        shrunk, grown = urgency(plan, views)
        kept = {
            k: v for k, v in self._urgent.items() if v[1] > clock and k not in grown and k in views
        }
        kept.update((k, (priority, until, plan[k].size)) for k, priority in shrunk.items())
        self._urgent = kept
        if grown or self._grown:
            held = {
                k: v
                for k, v in self._grown.items()
                if v[1] > clock and k not in kept and k in views
            }
            held.update((k, (plan[k].size, until)) for k in grown)
            self._grown = held

    def rank(self, plan_key: str, priority: int) -> int:
        """``priority``, raised to a beneficiary's while the job is shrunk (the order of status
        writes: a beneficiary's, then its victims')."""
        urgent = self._urgent.get(plan_key)
        if urgent is not None and urgent[1] > self._clock.monotonic():
            return max(priority, urgent[0])
        return priority

    def is_shrunk(self, plan_key: str) -> bool:
        urgent = self._urgent.get(plan_key)
        return urgent is not None and urgent[1] > self._clock.monotonic()

    def priority_of(self, kind: str, key: str, priority: int) -> int:
        """The reconcile rank of job ``key`` (``namespace/name``) of ``kind`` whose last seen
        priority is ``priority``."""
        plan_key = f"{kind}/{key}"
        if self.is_shrunk(plan_key):
            if self._live_pods(kind, key) > self._urgent[plan_key][2]:
                return RESIZE_BAND + self.rank(plan_key, priority) + 1
            return priority
        size, until = self._grown.get(plan_key, (0, 0.0))
        if until > self._clock.monotonic() and self._live_pods(kind, key) < size:
            return RESIZE_BAND + priority
        return priority
