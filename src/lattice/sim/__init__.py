"""``lattice simulate``: replay cluster traces through the real scheduler core, offline.

Contract: a pure package (no asyncio, no Kubernetes, no logging framework). The ``lattice``
policy drives the same :func:`lattice.scheduler.core.schedule` the operator runs, on a
simulated clock; the other policies are baselines to measure against. Modules: ``trace``
(readers and job mapping), ``cluster`` (pools of nodes and what jobs' pods request),
``speedup`` (throughput models), ``engine`` (event loop), ``policies``, ``metrics``,
``runner`` (policies side by side), ``figure`` (PNG, with matplotlib from the optional ``sim``
extra, imported only to draw), ``cli``.
"""

from __future__ import annotations

from lattice.sim.engine import JobResult, SimResult, simulate
from lattice.sim.metrics import Metrics, format_table, measure, no_queueing
from lattice.sim.runner import ALL_POLICIES, PolicyRun, run_policies
from lattice.sim.trace import MappingOptions, SimJob, TraceJob, map_jobs, read_trace

__all__ = [
    "ALL_POLICIES",
    "JobResult",
    "MappingOptions",
    "Metrics",
    "PolicyRun",
    "SimJob",
    "SimResult",
    "TraceJob",
    "format_table",
    "map_jobs",
    "measure",
    "no_queueing",
    "read_trace",
    "run_policies",
    "simulate",
]
