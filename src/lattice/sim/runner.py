"""Run several policies on the same jobs, side by side.

Contract:
- Policy names: ``lattice`` (the core with ``config`` as given, i.e. its default strategy
  unless overridden), ``lattice:<Strategy>`` (the same config with that queueing strategy),
  ``fifo-backfill`` (the baseline), ``fifo-strict``, ``lattice-original`` and
  ``no-queueing``; ``all`` expands to :data:`ALL_POLICIES`. :data:`PREEMPT_RIGID` is the core
  with every rigid job opted in to preemption within its priority.
- :func:`run_policies` returns one :class:`PolicyRun` per name, in the order given, every
  policy seeing the same :class:`~lattice.sim.trace.SimJob` list on the same ``cluster``
  (default: :func:`~lattice.sim.cluster.homogeneous` ``capacity`` on nodes of
  ``units_per_node``; given a cluster, ``capacity`` must be its total units). Pure and
  deterministic; ``wall_seconds`` is the only measured (non-deterministic) value.
  ``progress`` (optional) hears (policy label, finished jobs, total jobs) as each simulation
  advances.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from lattice.scheduler.core import SchedulerConfig, Strategy
from lattice.sim.cluster import ClusterModel, homogeneous
from lattice.sim.engine import Allocator, SimResult, simulate
from lattice.sim.metrics import Metrics, measure, no_queueing
from lattice.sim.policies import FifoAllocator, GreedyAllocator, LatticeAllocator, PoolUnits
from lattice.sim.trace import SimJob

__all__ = ["ALL_POLICIES", "PREEMPT_RIGID", "PolicyRun", "expand_policies", "run_policies"]

#: ``lattice`` with every rigid job opted in to preemption within its priority (the rule before
#: protection): run it next to ``lattice`` to see what protection costs and saves.
PREEMPT_RIGID = "lattice-preempt-rigid"

ALL_POLICIES: tuple[str, ...] = (
    "lattice",
    *(f"lattice:{s.value}" for s in Strategy),
    "fifo-backfill",
    "fifo-strict",
    "lattice-original",
    "no-queueing",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyRun:
    """One policy's metrics, raw result (``None`` for the no-queueing bound) and wall time."""

    metrics: Metrics
    result: SimResult | None
    wall_seconds: float


def expand_policies(names: Sequence[str]) -> list[str]:
    """Expand ``all``, check names, drop duplicates (keeping the first)."""
    out: list[str] = []
    for name in names:
        for n in ALL_POLICIES if name == "all" else (name,):
            if n not in out:
                _check(n)
                out.append(n)
    return out


def _check(name: str) -> None:
    if name.startswith("lattice:"):
        Strategy(name.partition(":")[2])
    elif name not in (*ALL_POLICIES, PREEMPT_RIGID):
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(ALL_POLICIES)})")


def _allocator(name: str, *, cluster: ClusterModel, config: SchedulerConfig) -> Allocator:
    if name == "fifo-backfill":
        return FifoAllocator(PoolUnits(cluster.pool_units()), backfill=True)
    if name == "fifo-strict":
        return FifoAllocator(PoolUnits(cluster.pool_units()), backfill=False)
    if name == "lattice-original":
        return GreedyAllocator(PoolUnits(cluster.pool_units()))
    if name.startswith("lattice:"):
        config = replace(config, strategy=Strategy(name.partition(":")[2]))
    return LatticeAllocator(
        cluster.nodes(), config, preempt_rigid=name == PREEMPT_RIGID, demand=cluster.demand
    )


def run_policies(
    jobs: Sequence[SimJob],
    policies: Sequence[str],
    *,
    capacity: int,
    units_per_node: int = 8,
    restart_cost: float = 30.0,
    config: SchedulerConfig | None = None,
    timeline: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    cluster: ClusterModel | None = None,
) -> list[PolicyRun]:
    """Simulate every policy in ``policies`` on ``jobs`` (see the module docstring)."""
    config = config or SchedulerConfig()
    if cluster is None:
        cluster = homogeneous(capacity, units_per_node)
    elif cluster.capacity != capacity:
        raise ValueError(f"capacity {capacity} is not the cluster's {cluster.capacity} units")
    runs: list[PolicyRun] = []
    for name in expand_policies(policies):
        started = time.perf_counter()
        if name == "no-queueing":
            runs.append(
                PolicyRun(
                    metrics=no_queueing(jobs),
                    result=None,
                    wall_seconds=time.perf_counter() - started,
                )
            )
            continue
        label = name
        if name == "lattice":
            label = f"lattice ({config.strategy.value})"
        allocator = _allocator(name, cluster=cluster, config=config)
        result = simulate(
            jobs,
            allocator,
            policy=label,
            capacity=capacity,
            restart_cost=restart_cost,
            timeline=timeline,
            progress=None if progress is None else partial(progress, label),
        )
        runs.append(
            PolicyRun(
                metrics=measure(result), result=result, wall_seconds=time.perf_counter() - started
            )
        )
    return runs
