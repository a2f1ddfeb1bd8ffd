"""A lower bound on the average JCT that any schedule of a trace can reach on a capacity.

Contract (pure but for silencing the solver's banner on stdout; no clock; needs ``highspy``, in
the ``sim`` extra):

:func:`lower_bound` solves a linear program whose optimum is at most the average JCT of every
schedule that respects the capacity, whatever its order, sizes or preemptions. No policy, and
no oracle that knows every job's length, can do better than the bound. It is a relaxation of
the simulator's model:

- **Per job**, ``d`` is its time alone at its fastest size (``max_size`` unless its speedup curve
  falls before it: a measured curve can). Its progress rate is at most ``1/d``, so
  if its mean time of progress (the time at which, on average, its work is done) is ``M``, it
  finishes no earlier than ``M + d/2``; a job is charged ``M + d/2 - submit``.
- **Progress against units.** With ``g`` units a job progresses at ``speedup(g) / work``. Each
  line of the upper concave hull of the points ``(0, 0)`` and ``(g, speedup(g))`` for the sizes
  ``min_size..max_size`` lies above every such point, so in any stretch of time progress is at
  most ``(slope * unit-time + intercept * time) / work`` for every hull line: the program keeps
  the first segment, the last and up to ``lines - 2`` between them. Units held are at most
  ``max_size`` at a time.
- **Capacity.** Time is cut into slots of ``slot`` seconds from the first arrival, up to
  ``horizon`` times the span of the no-queueing schedule, then one last open-ended slot without
  a capacity. In each slot the jobs hold at most ``capacity * slot`` unit-seconds together.
  Progress in a slot is counted at the slot's start (or the job's arrival, if later), which is
  no later than when it happens.
- **Small jobs.** A job alone for less than ``keep`` seconds is left out of the program (it is
  charged ``d``, its time alone, and its units are not counted against the capacity): both
  relax the problem, so the result stays a lower bound, and the program stays small.

The bound reported is the larger of the program's optimum and the no-queueing bound (every job
alone at its fastest size from arrival), which is a lower bound too and can be the larger by up to
half a slot per job, as the program counts progress at the slots' starts.

What the program ignores (placement on nodes and pools, priorities, restarts, lost work,
integral sizes between two hull points) can only make a real schedule slower. Smaller slots, a
smaller ``keep`` and more lines give a bound closer to the best schedule, for a larger program.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lattice.sim.trace import SimJob

__all__ = ["DEFAULT_KEEP", "DEFAULT_SLOT", "Bound", "fastest", "hull_lines", "lower_bound"]

#: Seconds per hour: the program is stated in hours and unit-hours, for its numerics.
_HOUR = 3600.0
#: The defaults of ``slot`` and ``keep`` (seconds).
DEFAULT_SLOT = 3 * _HOUR
DEFAULT_KEEP = 6 * _HOUR


@dataclass(frozen=True, slots=True, kw_only=True)
class Bound:
    """What :func:`lower_bound` found; times in seconds."""

    #: Every schedule's average JCT is at least this: the larger of ``program`` and
    #: ``no_queueing``.
    avg_jct: float
    #: The program's optimum, as an average JCT.
    program: float
    #: The average JCT of every job alone at its fastest size from arrival (the bound without
    #: the capacity).
    no_queueing: float
    #: Jobs in the program, out of all of them.
    jobs_in_program: int
    jobs: int
    slots: int
    slot: float
    keep: float


def hull_lines(job: SimJob, *, lines: int) -> list[tuple[float, float]]:
    """``(slope, intercept)`` of at most ``lines`` segments of the upper concave hull of
    ``(0, 0)`` and ``(g, speedup(g))``, ``g`` in ``min_size..max_size``: the first and the last,
    and evenly spaced ones between them."""
    points = [(0.0, 0.0)] + [
        (float(g), job.model.speedup(g)) for g in range(job.min_size, job.max_size + 1)
    ]
    hull: list[tuple[float, float]] = []
    for p in points:
        while len(hull) >= 2 and _turns_up(hull[-2], hull[-1], p):
            hull.pop()
        hull.append(p)
    segments = [
        ((y2 - y1) / (x2 - x1), y1 - (y2 - y1) / (x2 - x1) * x1)
        for (x1, y1), (x2, y2) in itertools.pairwise(hull)
    ]
    if len(segments) <= lines:
        return segments
    picks = {round(i * (len(segments) - 1) / (lines - 1)) for i in range(lines)}
    return [segments[i] for i in sorted(picks)]


def fastest(job: SimJob) -> float:
    """``job``'s time alone at its fastest size in ``min_size..max_size``."""
    top = max(job.model.speedup(g) for g in range(job.min_size, job.max_size + 1))
    return job.work / top


def _turns_up(a: tuple[float, float], b: tuple[float, float], c: tuple[float, float]) -> bool:
    """Whether ``b`` lies on or below the chord from ``a`` to ``c`` (not on the upper hull)."""
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]) >= 0


def lower_bound(
    jobs: Sequence[SimJob],
    capacity: int,
    *,
    slot: float = DEFAULT_SLOT,
    keep: float = DEFAULT_KEEP,
    horizon: float = 1.5,
    lines: int = 5,
) -> Bound:
    """The lower bound of the module contract. Raises ``ValueError`` on an empty trace, a
    capacity below 1 or a slot of no length, and ``RuntimeError`` if the solver does not find
    the optimum (the message names its status)."""
    if not jobs:
        raise ValueError("no jobs to bound")
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1, not {capacity}")
    if slot <= 0 or horizon <= 0 or lines < 2:
        raise ValueError("slot and horizon must be positive and lines at least 2")
    alone = [fastest(j) for j in jobs]
    start = min(j.submit for j in jobs)
    span = max(j.submit + d for j, d in zip(jobs, alone, strict=True)) - start
    count = max(1, math.ceil(span * horizon / slot))
    kept = [(j, d) for j, d in zip(jobs, alone, strict=True) if d >= keep]
    outside = sum(d for d in alone if d < keep)
    cost = _solve(kept, capacity, start=start, slot=slot, count=count, lines=lines) if kept else 0.0
    program = (cost * _HOUR + sum(d / 2 for _, d in kept) + outside) / len(jobs)
    no_queueing = sum(alone) / len(jobs)
    return Bound(
        avg_jct=max(program, no_queueing),
        program=program,
        no_queueing=no_queueing,
        jobs_in_program=len(kept),
        jobs=len(jobs),
        slots=count,
        slot=slot,
        keep=keep,
    )


def _solve(
    kept: Sequence[tuple[SimJob, float]],
    capacity: int,
    *,
    start: float,
    slot: float,
    count: int,
    lines: int,
) -> float:
    """The program's optimum: the least sum over ``kept`` of ``M - submit``, in hours."""
    try:
        import highspy  # optional: the sim extra
        import numpy as np
    except ImportError as exc:
        raise RuntimeError(
            "the lower bound needs highspy: pip install 'lattice-operator[sim]'"
        ) from exc
    h = slot / _HOUR
    cols = _Columns()
    # Rows: 0..count-1 the slots' capacity, then one completion row per job, then the hull rows.
    row = count + len(kept)
    hull_lower: list[float] = []
    for index, (job, _) in enumerate(kept):
        arrival = (job.submit - start) / _HOUR
        work = job.work / _HOUR
        hull = hull_lines(job, lines=lines)
        for k in range(min(int(arrival // h), count), count + 1):
            begin = max(k * h, arrival)
            done = [(count + index, 1.0)]
            if k == count:  # the open-ended last slot: no capacity, no rate
                cols.add(begin - arrival, 1.0, done)
                continue
            length = (k + 1) * h - begin
            if length <= 0:
                continue
            held = [(k, 1.0)]
            for slope, intercept in hull:
                # progress * work <= slope * unit-hours + intercept * hours
                done.append((row, -work))
                held.append((row, slope))
                hull_lower.append(-intercept * length)
                row += 1
            cols.add(begin - arrival, 1.0, done)
            cols.add(0.0, job.max_size * length, held)
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(cols.cost), row
    lp.col_cost_ = np.array(cols.cost)
    lp.col_lower_ = np.zeros(len(cols.cost))
    lp.col_upper_ = np.array(cols.upper)
    lp.row_lower_ = np.concatenate([np.full(count, -inf), np.ones(len(kept)), np.array(hull_lower)])
    lp.row_upper_ = np.concatenate(
        [np.full(count, capacity * h), np.ones(len(kept)), np.full(len(hull_lower), inf)]
    )
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.array(cols.start)
    lp.a_matrix_.index_ = np.array(cols.index)
    lp.a_matrix_.value_ = np.array(cols.value)
    solver: Any = _quiet(highspy.Highs)
    solver.setOptionValue("output_flag", False)
    solver.passModel(lp)
    solver.run()
    status = solver.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"the lower bound's program ended {solver.modelStatusToString(status)}")
    return float(solver.getInfo().objective_function_value)


def _quiet(make: Any) -> Any:
    """``make()`` with file descriptor 1 pointed at /dev/null: HiGHS prints its banner to the
    process's stdout when a solver is created, before any option can turn it off."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        return make()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


class _Columns:
    """The program's columns, column-wise: cost, upper bound and (row, value) entries."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.start: list[int] = [0]
        self.index: list[int] = []
        self.value: list[float] = []

    def add(self, cost: float, upper: float, entries: list[tuple[int, float]]) -> None:
        self.cost.append(cost)
        self.upper.append(upper)
        for r, v in entries:
            self.index.append(r)
            self.value.append(v)
        self.start.append(len(self.index))
