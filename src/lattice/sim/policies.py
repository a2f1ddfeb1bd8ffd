"""The policies under comparison, as :class:`lattice.sim.engine.Allocator` implementations.

Contract:
- :class:`LatticeAllocator` drives the operator's own pure core: each pass builds a
  :class:`~lattice.scheduler.core.Snapshot` of the active jobs (one ``TrainingJob`` each, unit
  replicas whose :class:`~lattice.scheduler.core.PodDemand` is ``demand(job)``: requests and
  constraint; by default the homogeneous cluster's, :mod:`lattice.sim.cluster`) on ``nodes``
  (resource vectors, labels, taints), calls :func:`~lattice.scheduler.core.schedule`, plays
  the plan back with :func:`~lattice.scheduler.core.apply_decision` (which carries each
  decision's ``placement`` into the job's next view, so placed pods stay put across passes)
  and returns the ``Running`` sizes and ``plan.next_wakeup``. Each snapshot after the first
  names its :class:`~lattice.scheduler.core.JobChanges` against the one before. A job with a
  checkpoint interval opts in to preemption within its priority (``preemptible_within_priority``);
  ``preempt_rigid=True`` opts every job in (``lattice-preempt-rigid``). Only decisions that
  change more than the service accounting are played back (as the operator's loop throttles
  accounting writes; service accrues from the last written ``service_updated_at`` all the
  same), and the running sizes are kept as they change. Pods always start in the simulator,
  so the pending timeout and its cooldown never trigger; every other knob of
  :class:`~lattice.scheduler.core.SchedulerConfig` applies as in the operator.
- The baselines count units per pool (:class:`PoolUnits`; one pool of ``capacity`` when given
  an ``int``): a job takes units from the pools it may use (its selector and tolerations
  admit the pool's nodes), in pool order; node fragmentation is not modelled.
- :class:`FifoAllocator`: no elasticity, no preemption; jobs at their requested size in
  arrival order. ``backfill=True`` starts any job whose gang fits (``fifo-backfill``, the
  baseline); ``backfill=False`` stops at the first that does not (``fifo-strict``).
- :class:`GreedyAllocator` (``lattice-original``): the seed operator's ``DispatchWorkers``
  rule, re-run on every pass: in (priority desc, queued asc) order each job gets ``max`` if it
  fits, else the remainder if that is at least ``min``, else it and every later job pause.
  Its flat 3 h cooldown only follows a stuck-pending requeue, which the simulator never has.
- Times are simulator seconds; ``epoch`` maps them onto the aware datetimes the core needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from lattice.scheduler.core import (
    JobChanges,
    JobView,
    NodeView,
    PodDemand,
    SchedulerConfig,
    Snapshot,
    Stage,
    apply_decision,
    schedule,
)
from lattice.sim.cluster import ClusterModel, homogeneous
from lattice.sim.trace import SimJob

__all__ = [
    "EPOCH",
    "FifoAllocator",
    "GreedyAllocator",
    "LatticeAllocator",
    "PoolUnits",
    "make_nodes",
]

EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
_DEFAULT = ClusterModel(pools=())


def make_nodes(capacity: int, units_per_node: int) -> tuple[NodeView, ...]:
    """``capacity`` units as nodes of ``units_per_node`` (the last one may be smaller), with
    the homogeneous cluster's resource vectors (:func:`lattice.sim.cluster.homogeneous`)."""
    return homogeneous(capacity, units_per_node).nodes()


class PoolUnits:
    """Free units per pool, for the baselines (see the module contract). Mutable."""

    def __init__(self, pools: Sequence[tuple[int, Callable[[SimJob], bool]]]) -> None:
        self._total = [units for units, _ in pools]
        self._admits = [admits for _, admits in pools]
        self._free = list(self._total)
        self._usable: dict[str, tuple[int, ...]] = {}

    @staticmethod
    def of(capacity: int | PoolUnits) -> PoolUnits:
        """``capacity`` itself, or one pool of that many units every job may use."""
        if isinstance(capacity, PoolUnits):
            return capacity
        return PoolUnits([(capacity, lambda job: True)])

    def reset(self) -> None:
        self._free = list(self._total)

    def _pools(self, job: SimJob) -> tuple[int, ...]:
        usable = self._usable.get(job.id)
        if usable is None:
            usable = tuple(i for i, admits in enumerate(self._admits) if admits(job))
            self._usable[job.id] = usable
        return usable

    def room(self, job: SimJob) -> int:
        """Free units ``job`` may take."""
        return sum(self._free[i] for i in self._pools(job))

    def take(self, job: SimJob, units: int) -> tuple[tuple[int, int], ...]:
        """Take ``units`` (at most :meth:`room`) for ``job``, in pool order; what was taken."""
        taken: list[tuple[int, int]] = []
        for i in self._pools(job):
            got = min(units, self._free[i])
            if got:
                self._free[i] -= got
                taken.append((i, got))
                units -= got
        return tuple(taken)

    def give(self, taken: tuple[tuple[int, int], ...]) -> None:
        for i, units in taken:
            self._free[i] += units

    def forget(self, job: SimJob) -> None:
        self._usable.pop(job.id, None)


class FifoAllocator:
    """``fifo-backfill`` / ``fifo-strict``: rigid gangs in arrival order, never preempted."""

    def __init__(self, capacity: int | PoolUnits, *, backfill: bool) -> None:
        self._pools = PoolUnits.of(capacity)
        self._backfill = backfill
        self._jobs: dict[str, SimJob] = {}
        self._held: dict[str, tuple[tuple[int, int], ...]] = {}

    def arrive(self, job: SimJob, now: float) -> None:
        self._jobs[job.id] = job

    def finish(self, job: SimJob, now: float) -> None:
        del self._jobs[job.id]
        self._pools.give(self._held.pop(job.id, ()))
        self._pools.forget(job)

    def allocate(self, now: float, sizes: Mapping[str, int]) -> tuple[dict[str, int], float | None]:
        out = {k: v for k, v in sizes.items() if v}
        pools = self._pools
        for key, job in self._jobs.items():  # insertion order = arrival order
            if key in out:
                continue
            if job.units <= pools.room(job):
                out[key] = job.units
                self._held[key] = pools.take(job, job.units)
            elif not self._backfill:
                break
        return out, None


class GreedyAllocator:
    """``lattice-original``: the seed's greedy max-first dispatch with strict order."""

    def __init__(self, capacity: int | PoolUnits) -> None:
        self._pools = PoolUnits.of(capacity)
        self._jobs: dict[str, tuple[int, int, SimJob]] = {}
        self._seq = 0

    def arrive(self, job: SimJob, now: float) -> None:
        self._jobs[job.id] = (-job.priority, self._seq, job)
        self._seq += 1

    def finish(self, job: SimJob, now: float) -> None:
        del self._jobs[job.id]
        self._pools.forget(job)

    def allocate(self, now: float, sizes: Mapping[str, int]) -> tuple[dict[str, int], float | None]:
        out: dict[str, int] = {}
        pools = self._pools
        pools.reset()
        for _, _, job in sorted(self._jobs.values(), key=lambda e: (e[0], e[1])):
            free = pools.room(job)
            if job.max_size <= free:
                size = job.max_size
            elif free >= job.min_size:
                size = free
            else:
                break
            out[job.id] = size
            pools.take(job, size)
        return out, None


class LatticeAllocator:
    """``lattice``: the operator's ``schedule()`` core on a simulated clock."""

    def __init__(
        self,
        nodes: Sequence[NodeView],
        config: SchedulerConfig,
        *,
        epoch: datetime = EPOCH,
        preempt_rigid: bool = False,
        demand: Callable[[SimJob], PodDemand] = _DEFAULT.demand,
    ) -> None:
        self._nodes = tuple(nodes)
        self._demand = demand
        self._config = config
        self._epoch = epoch
        self._preempt_rigid = preempt_rigid
        self._views: dict[str, JobView] = {}
        self._ids: dict[str, str] = {}
        self._running: dict[str, int] = {}
        # The last snapshot's jobs, and the views gone from and added to it since.
        self._base: tuple[JobView, ...] | None = None
        self._gone: list[JobView] = []
        self._added: dict[int, JobView] = {}
        # One object per distinct demand: the core's memos then compare them by identity.
        self._demands: dict[PodDemand, PodDemand] = {}

    def _swap(self, key: str, view: JobView | None) -> None:
        """Set (``None``: drop) the view of ``key``, noting the change for the next snapshot."""
        old = self._views.pop(key, None) if view is None else self._views.get(key)
        if old is view:
            return
        if old is not None:
            if self._added.get(id(old)) is old:
                del self._added[id(old)]
            else:
                self._gone.append(old)
        if view is not None:
            self._views[key] = view
            self._added[id(view)] = view

    def _key(self, job: SimJob) -> str:
        return f"TrainingJob/sim/{job.id}"

    def arrive(self, job: SimJob, now: float) -> None:
        key = self._key(job)
        self._ids[key] = job.id
        demand = self._demand(job)
        view = JobView(
            key=key,
            kind="TrainingJob",
            namespace="sim",
            name=job.id,
            creation_time=self._epoch + timedelta(seconds=job.submit),
            priority=job.priority,
            min_size=job.min_size,
            max_size=job.max_size,
            preemptible_within_priority=self._preempt_rigid or job.checkpoint is not None,
            replica_demand=self._demands.setdefault(demand, demand),
        )
        self._swap(key, view)

    def finish(self, job: SimJob, now: float) -> None:
        key = self._key(job)
        self._swap(key, None)
        del self._ids[key]
        self._running.pop(job.id, None)

    def allocate(self, now: float, sizes: Mapping[str, int]) -> tuple[dict[str, int], float | None]:
        at = self._epoch + timedelta(seconds=now)
        jobs = tuple(self._views.values())
        changes = None
        if self._base is not None:
            changes = JobChanges(
                base=self._base, gone=tuple(self._gone), added=tuple(self._added.values())
            )
        self._base, self._gone, self._added = jobs, [], {}
        snapshot = Snapshot(nodes=self._nodes, jobs=jobs, config=self._config, changes=changes)
        plan = schedule(snapshot, at)
        views, running = self._views, self._running
        # Accounting-only changes are not played back, as the operator's loop throttles them:
        # a job's service accrues from its last written ``service_updated_at`` all the same.
        for key in plan.changed_keys(include_accounting=False):
            view = apply_decision(views[key], plan.decisions[key])
            self._swap(key, view)
            if view.stage == Stage.RUNNING and view.current_size:
                running[self._ids[key]] = view.current_size
            else:
                running.pop(self._ids[key], None)
        wake = plan.next_wakeup
        return dict(running), None if wake is None else (wake - self._epoch).total_seconds()
