"""Metrics of a simulated run, the no-queueing bound, and the summary table.

Contract (all times in seconds, over finished jobs; ``unfinished`` counts the others):
- ``avg/p50/p95/p99_jct``: job completion time (finish - submit); percentiles are
  nearest-rank. ``makespan``: last finish - first submit.
- ``utilisation``: held units / capacity, integrated from the first submission to the
  makespan's end (restart time counts as held). ``queued_utilisation``: the same over only the
  time during which at least one arrived job held nothing (``None`` if that never happened).
- ``avg_queue_delay`` / ``p95_queue_delay``: first start - submit.
- ``resizes_per_job``: restarts (resizes and resumes, each costing the restart time) per job.
- ``top_class_slowdown``: for the highest priority in the trace, mean of JCT / JCT alone
  (alone = at max size from submission, no restarts).
- ``preemptions``: running jobs stopped (size to 0), in total; ``lost_unit_hours``: the work
  rigid jobs lost to those stops (run time since their last checkpoint x their size).
- :func:`no_queueing` is the lower bound on average JCT: every job alone at its max size.
- :func:`offered_load`: what the trace asks of ``capacity`` over the no-queueing span (first
  submission to the last no-queueing finish): the work run at every job's min, requested and
  max size, in unit-seconds over capacity x span, and the share of that span during which the
  no-queueing schedule holds more than ``capacity`` (how far that bound is from reachable).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from lattice.sim.engine import JobResult, SimResult
from lattice.sim.trace import SimJob

__all__ = ["Load", "Metrics", "format_table", "measure", "no_queueing", "offered_load"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics:
    """Summary of one policy's run."""

    policy: str
    jobs: int
    unfinished: int
    avg_jct: float
    p50_jct: float
    p95_jct: float
    p99_jct: float
    makespan: float
    utilisation: float | None
    queued_utilisation: float | None
    avg_queue_delay: float
    p95_queue_delay: float
    resizes_per_job: float
    top_class_slowdown: float
    passes: int
    preemptions: int = 0
    lost_unit_hours: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pct(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _summarise(
    policy: str,
    jobs: Sequence[JobResult],
    *,
    utilisation: float | None,
    queued_utilisation: float | None,
    passes: int,
) -> Metrics:
    done = [j for j in jobs if j.finish is not None]
    jcts = sorted(j.finish - j.submit for j in done if j.finish is not None)
    delays = sorted(j.start - j.submit for j in jobs if j.start is not None)
    top = max((j.priority for j in jobs), default=0)
    slow = [
        (j.finish - j.submit) / j.alone
        for j in done
        if j.priority == top and j.finish is not None and j.alone > 0
    ]
    first = min((j.submit for j in jobs), default=0.0)
    last = max((j.finish for j in done if j.finish is not None), default=first)
    return Metrics(
        policy=policy,
        jobs=len(jobs),
        unfinished=len(jobs) - len(done),
        avg_jct=_mean(jcts),
        p50_jct=_pct(jcts, 0.50),
        p95_jct=_pct(jcts, 0.95),
        p99_jct=_pct(jcts, 0.99),
        makespan=last - first,
        utilisation=utilisation,
        queued_utilisation=queued_utilisation,
        avg_queue_delay=_mean(delays),
        p95_queue_delay=_pct(delays, 0.95),
        resizes_per_job=_mean([float(j.resizes) for j in jobs]),
        top_class_slowdown=_mean(slow),
        passes=passes,
        preemptions=sum(j.preemptions for j in jobs),
        lost_unit_hours=sum(j.lost for j in jobs) / 3600,
    )


def measure(result: SimResult) -> Metrics:
    """The :class:`Metrics` of one simulated run."""
    first = min((j.submit for j in result.jobs), default=0.0)
    last = max((j.finish for j in result.jobs if j.finish is not None), default=first)
    span = (last - first) * result.capacity
    queued = result.queued_seconds * result.capacity
    return _summarise(
        result.policy,
        result.jobs,
        utilisation=result.busy_unit_seconds / span if span > 0 else None,
        queued_utilisation=result.queued_busy_unit_seconds / queued if queued > 0 else None,
        passes=result.passes,
    )


def no_queueing(jobs: Sequence[SimJob]) -> Metrics:
    """The no-queueing limit: each job starts on arrival, alone, at its max size."""
    results = [
        JobResult(
            id=j.id,
            priority=j.priority,
            submit=j.submit,
            start=j.submit,
            finish=j.submit + j.alone(),
            resizes=0,
            alone=j.alone(),
        )
        for j in jobs
    ]
    return _summarise("no-queueing", results, utilisation=None, queued_utilisation=None, passes=0)


def _h(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds / 3600:.2f}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


@dataclass(frozen=True, slots=True, kw_only=True)
class Load:
    """What a trace asks of a capacity (:func:`offered_load`)."""

    at_min: float
    at_request: float
    at_max: float
    over_capacity: float

    def describe(self, capacity: int, unit: str) -> str:
        return (
            f"load {self.at_min:.2f} at min size, {self.at_request:.2f} at request, "
            f"{self.at_max:.2f} at max; every job at max from arrival needs more than "
            f"{capacity} {unit}s {100 * self.over_capacity:.0f}% of the time"
        )


def offered_load(jobs: Sequence[SimJob], capacity: int) -> Load:
    """The load of ``jobs`` on ``capacity`` units (module docstring)."""
    if not jobs or capacity <= 0:
        return Load(at_min=0.0, at_request=0.0, at_max=0.0, over_capacity=0.0)
    start = min(j.submit for j in jobs)
    span = max(j.submit + j.alone() for j in jobs) - start
    if span <= 0:
        return Load(at_min=0.0, at_request=0.0, at_max=0.0, over_capacity=0.0)

    def load(size: Callable[[SimJob], int]) -> float:
        held = sum(size(j) * j.work / j.model.speedup(size(j)) for j in jobs)
        return held / (capacity * span)

    steps = sorted(
        [(j.submit, j.max_size) for j in jobs] + [(j.submit + j.alone(), -j.max_size) for j in jobs]
    )
    held, at, over = 0, start, 0.0
    for t, change in steps:
        if held > capacity:
            over += t - at
        held, at = held + change, t
    return Load(
        at_min=load(lambda j: j.min_size),
        at_request=load(lambda j: j.units),
        at_max=load(lambda j: j.max_size),
        over_capacity=over / span,
    )


def format_table(rows: Sequence[Metrics], *, baseline: str = "fifo-backfill") -> str:
    """A fixed-width summary table; JCT and delays in hours, ratios against ``baseline``."""
    base = next((m for m in rows if m.policy == baseline), None)
    head = (
        f"{'policy':<30} {'avgJCT':>7} {'x':>5} {'p50':>7} {'p95':>7} {'p99':>7} {'x':>5} "
        f"{'mkspan':>8} {'util':>6} {'utilQ':>6} {'delay':>6} {'rsz/j':>6} {'top':>5} "
        f"{'stops':>6} {'lost':>7}"
    )
    lines = [head, "-" * len(head)]
    for m in rows:
        ra = f"{m.avg_jct / base.avg_jct:.2f}" if base and base.avg_jct else "-"
        r99 = f"{m.p99_jct / base.p99_jct:.2f}" if base and base.p99_jct else "-"
        lines.append(
            f"{m.policy:<30} {_h(m.avg_jct):>7} {ra:>5} {_h(m.p50_jct):>7} {_h(m.p95_jct):>7} "
            f"{_h(m.p99_jct):>7} {r99:>5} {_h(m.makespan):>8} {_p(m.utilisation):>6} "
            f"{_p(m.queued_utilisation):>6} {_h(m.avg_queue_delay):>6} "
            f"{m.resizes_per_job:>6.2f} {m.top_class_slowdown:>5.2f} "
            f"{m.preemptions:>6} {m.lost_unit_hours:>7.1f}"
        )
    lines.append(
        "(hours; x = ratio to the baseline; utilQ = utilisation while jobs are queued; "
        "stops = running jobs preempted; lost = unit-hours of work lost to them)"
    )
    return "\n".join(lines)
