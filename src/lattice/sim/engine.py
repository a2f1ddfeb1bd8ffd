"""The event-driven simulation loop: a simulated clock, work conservation, restart costs.

Contract:
- Events are arrivals, completions and allocator wakeups; after any of them that changes the
  set of jobs (or once a wakeup is due) the :class:`Allocator` decides every active job's
  size. Nothing else moves the clock; the loop itself touches only running jobs per event,
  so a run costs O(events x running jobs) plus the allocator's passes.
- Work conservation: a job must do ``SimJob.work`` (= duration x speedup(requested size)) and
  does ``speedup(size)`` per second while it holds ``size > 0`` and is not restarting.
- Restarts: any size change of a job that has already run (a resize, or a resume after a
  preemption) costs ``restart_cost`` seconds during which it holds its units and does no
  work; the first start is free (the trace duration already includes start-up). Each such
  change counts as one resize of the job.
- Utilisation integrates held units over time: overall (from the first submission to the
  last completion) and *while queued* (over the time at least one arrived job holds nothing).
- Preemption (a running job stopped, size to 0) costs a non-elastic (rigid, ``min_size ==
  max_size``) job the work since its last checkpoint: it checkpoints every ``SimJob.checkpoint``
  seconds of run time, and without an interval a stop loses everything it did. The lost time
  times its size is ``JobResult.lost`` (unit-seconds). An elastic job keeps its progress and
  pays only the restart cost when it resumes. ``JobResult.preemptions`` counts the stops.
- A job still unfinished when no event is left (it can never fit) is reported with
  ``finish=None``. Deterministic: the same inputs give the same result.
- ``progress``, if given, is called with (finished, total) after each event that finishes
  jobs; it must not change anything the run reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lattice.sim.trace import SimJob

__all__ = ["Allocator", "JobResult", "SimResult", "simulate"]

_EPS = 1e-6


class Allocator(Protocol):
    """A policy under test: told about arrivals and completions, asked for sizes."""

    def arrive(self, job: SimJob, now: float) -> None: ...

    def finish(self, job: SimJob, now: float) -> None: ...

    def allocate(self, now: float, sizes: Mapping[str, int]) -> tuple[dict[str, int], float | None]:
        """New size of each active job (missing: 0), and the next wakeup (``None``: none).

        ``sizes`` holds the running jobs' current sizes (a job missing from it holds 0); it is
        the loop's own, valid only during the call."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class JobResult:
    """What happened to one job."""

    id: str
    priority: int
    submit: float
    start: float | None
    finish: float | None
    resizes: int
    alone: float
    preemptions: int = 0
    lost: float = 0.0

    @property
    def jct(self) -> float | None:
        return None if self.finish is None else self.finish - self.submit


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    """One policy's run: per-job results, integrals and a timeline ``(t, used, queued)``."""

    policy: str
    capacity: int
    jobs: tuple[JobResult, ...]
    busy_unit_seconds: float
    queued_seconds: float
    queued_busy_unit_seconds: float
    passes: int
    timeline: tuple[tuple[float, int, int], ...]


@dataclass(slots=True, eq=False)
class _Run:
    """One admitted job's progress (``remaining`` and ``ckpt_remaining`` start at its work)."""

    job: SimJob
    size: int = 0
    remaining: float = field(init=False)
    restart_until: float = -math.inf
    first_start: float | None = None
    resizes: int = 0
    stops: int = 0
    lost: float = 0.0
    # Rigid jobs: the work left at the last checkpoint, and the run time since then.
    ckpt_remaining: float = field(init=False)
    run_since_ckpt: float = 0.0
    #: The speedup at ``size`` (kept by :meth:`resize`).
    rate: float = field(init=False)

    def __post_init__(self) -> None:
        self.remaining = self.ckpt_remaining = self.job.work
        self.rate = self.job.model.speedup(self.size)

    def resize(self, size: int) -> None:
        self.size = size
        self.rate = self.job.model.speedup(size)

    def finish_at(self, now: float) -> float:
        rate = self.rate
        if rate <= 0:
            return math.inf
        return max(now, self.restart_until) + self.remaining / rate

    def advance(self, t: float, nxt: float) -> None:
        """Work from ``t`` to ``nxt`` at the current size (none while restarting)."""
        eff = min(nxt - max(t, self.restart_until), nxt - t)
        if eff <= 0:
            return
        rate = self.rate
        self.remaining -= rate * eff
        interval = self.job.checkpoint
        if interval is not None and self.job.rigid:
            self.run_since_ckpt += eff
            done = math.floor(self.run_since_ckpt / interval)
            if done:
                self.ckpt_remaining -= rate * interval * done
                self.run_since_ckpt -= interval * done

    def stop(self) -> None:
        """A preemption: a rigid job falls back to its last checkpoint (the start without
        one); an elastic one keeps its progress (it pays the restart cost when it resumes)."""
        self.stops += 1
        if not self.job.rigid:
            return
        lost = max(0.0, self.ckpt_remaining - self.remaining)
        rate = self.rate
        if rate > 0:
            self.lost += lost / rate * self.size
        self.remaining = self.ckpt_remaining
        self.run_since_ckpt = 0.0

    def result(self, finish: float | None) -> JobResult:
        j = self.job
        return JobResult(
            id=j.id,
            priority=j.priority,
            submit=j.submit,
            start=self.first_start,
            finish=finish,
            resizes=self.resizes,
            alone=j.alone(),
            preemptions=self.stops,
            lost=self.lost,
        )


def simulate(
    jobs: Sequence[SimJob],
    allocator: Allocator,
    *,
    policy: str,
    capacity: int,
    restart_cost: float = 30.0,
    timeline: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Run ``jobs`` (any order) through ``allocator``; see the module docstring."""
    pending = sorted(jobs, key=lambda j: j.submit)
    active: dict[str, _Run] = {}
    running: dict[str, _Run] = {}
    held: dict[str, int] = {}  # each running job's size, as the allocator is told
    results: dict[str, JobResult] = {}
    points: list[tuple[float, int, int]] = []
    t = pending[0].submit if pending else 0.0
    i, passes, used = 0, 0, 0
    wake: float | None = None
    busy = queued_s = queued_busy = 0.0
    while i < len(pending) or active:
        nxt = pending[i].submit if i < len(pending) else math.inf
        for r in running.values():  # finish_at(t), inlined
            if r.rate > 0 and (f := max(t, r.restart_until) + r.remaining / r.rate) < nxt:
                nxt = f
        if wake is not None:
            nxt = min(nxt, max(wake, t))
        if nxt == math.inf:
            break
        dt = nxt - t
        if dt > 0:
            for r in running.values():
                r.advance(t, nxt)
            busy += used * dt
            if len(active) > len(running):
                queued_s += dt
                queued_busy += used * dt
        t = nxt
        dirty = False
        due = t + _EPS  # finish_at(t) <= due, inlined:
        done = [
            k
            for k, r in running.items()
            if r.rate > 0 and max(t, r.restart_until) + r.remaining / r.rate <= due
        ]
        for key in done:
            r = active.pop(key)
            del running[key], held[key]
            used -= r.size
            results[key] = r.result(t)
            allocator.finish(r.job, t)
            dirty = True
        if dirty and progress is not None:
            progress(len(results), len(pending))
        while i < len(pending) and pending[i].submit <= t:
            job = pending[i]
            active[job.id] = _Run(job)
            allocator.arrive(job, t)
            i += 1
            dirty = True
        if not dirty and (wake is None or wake > t + _EPS):
            continue
        sizes, wake = allocator.allocate(t, held)
        passes += 1
        if wake is not None and wake <= t + _EPS:
            wake = t + 1.0  # a wakeup that is already due would spin; retry a second later
        for key in {*running, *sizes}:
            r = active[key]
            new = sizes.get(key, 0)
            if new == r.size:
                continue
            if new and r.first_start is None:
                r.first_start = t
            elif new:
                r.resizes += 1
                r.restart_until = t + restart_cost
            if not new:
                r.stop()
                del running[key], held[key]
            else:
                running[key] = r
                held[key] = new
            used += new - r.size
            r.resize(new)
        if timeline:
            points.append((t, used, len(active) - len(running)))
    for key, r in active.items():
        results[key] = r.result(None)
    return SimResult(
        policy=policy,
        capacity=capacity,
        jobs=tuple(results[j.id] for j in pending),
        busy_unit_seconds=busy,
        queued_seconds=queued_s,
        queued_busy_unit_seconds=queued_busy,
        passes=passes,
        timeline=tuple(points),
    )
