"""``lattice simulate``: argument parsing, the summary table, ``--json`` and ``--png`` output.

Contract: :func:`add_arguments` registers the flags on a parser; :func:`main` runs the
experiment described by the parsed namespace, prints the trace's load on the capacity
(:func:`~lattice.sim.metrics.offered_load`, also in ``--json``) and the table, with
``--lower-bound`` the average JCT no schedule can beat (:func:`~lattice.sim.bound.lower_bound`,
``--bound-slot``, ``--bound-keep``; ``lower_bound`` in ``--json``), and returns an exit status
(0 ok, 2 bad input, or the bound's solver missing or failing). File I/O here is limited to
reading the trace and the speedup CSVs and writing the requested JSON/PNG files.

- Checked before the run, so a long run never ends in an error: ``--json``/``--png`` must be
  writable (the file is opened for appending, and removed again if it did not exist), and the
  trace must hold at least one job (after ``--limit``).
- Durations (``--resize-interval``, ``--starvation-limit``, ``--restart-cost``) are seconds or
  Go durations (:func:`lattice.durations.parse_seconds`).
- The cluster is ``--capacity`` units, or ``--nodes`` x ``--gpus-per-node`` (homogeneous), or
  the pools of ``--pool`` (repeatable) and ``--pools FILE`` (JSON), not both kinds
  (:mod:`lattice.sim.cluster`). ``--pool-affinity F`` pins a seeded share of the jobs without
  a selector to one pool each. ``--json`` records the pools as it read them.
- Progress goes to stderr as ``lattice simulate: <policy>: F/N jobs finished (P%), <elapsed>``,
  at most once every ``PROGRESS_INTERVAL`` seconds and never during the first interval, so
  short runs print nothing (:class:`Progress`, on an injected monotonic clock).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from lattice.durations import parse_seconds
from lattice.primitives.quantity import resource_units
from lattice.scheduler.core import SchedulerConfig, Strategy
from lattice.scheduler.core.events import format_duration
from lattice.sim.bound import DEFAULT_KEEP, DEFAULT_SLOT, Bound, lower_bound
from lattice.sim.cluster import (
    ClusterModel,
    Pool,
    assign_pools,
    homogeneous,
    parse_pool,
    pools_from_json,
)
from lattice.sim.figure import render_png
from lattice.sim.metrics import format_table, offered_load
from lattice.sim.runner import ALL_POLICIES, PolicyRun, run_policies
from lattice.sim.speedup import load_fits
from lattice.sim.trace import MappingOptions, map_jobs, parse_priority_mix, read_trace

__all__ = ["PROGRESS_INTERVAL", "Progress", "add_arguments", "check_writable", "main"]

_DEFAULT_SPEEDUP_DIR = "../shared/data/traces/speedup"
#: Seconds between two progress lines (and before the first).
PROGRESS_INTERVAL = 5.0


def _duration(raw: str) -> float:
    try:
        seconds = parse_seconds(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} must not be negative")
    return seconds


class Progress:
    """Throttled progress lines on ``stream`` (see the module docstring)."""

    def __init__(
        self,
        *,
        stream: TextIO,
        monotonic: Callable[[], float],
        interval: float = PROGRESS_INTERVAL,
    ) -> None:
        self._stream = stream
        self._monotonic = monotonic
        self._interval = interval
        self._start = monotonic()
        self._next = self._start + interval

    def __call__(self, policy: str, finished: int, total: int) -> None:
        now = self._monotonic()
        if now < self._next:
            return
        self._next = now + self._interval
        share = 100 * finished // total if total else 100
        elapsed = format_duration(timedelta(seconds=int(now - self._start)))
        self._stream.write(
            f"lattice simulate: {policy}: {finished}/{total} jobs finished ({share}%), {elapsed}\n"
        )
        self._stream.flush()


def _go_duration(seconds: float) -> str:
    return format_duration(timedelta(seconds=seconds))


def _describe_bound(bound: Bound, runs: Sequence[PolicyRun]) -> str:
    """The ``--lower-bound`` line: the bound, against ``fifo-backfill`` when it ran."""
    base = next((r.metrics for r in runs if r.metrics.policy == "fifo-backfill"), None)
    ratio = f" ({bound.avg_jct / base.avg_jct:.2f}x fifo-backfill's)" if base else ""
    return (
        f"lower bound: no schedule's average JCT is below {bound.avg_jct / 3600:.2f}h{ratio}; "
        f"every job alone at its fastest size from arrival: {bound.no_queueing / 3600:.2f}h "
        f"({bound.jobs_in_program} of {bound.jobs} jobs in the program, {bound.slots} slots of "
        f"{_go_duration(bound.slot)})"
    )


def _pool_arg(raw: str) -> Pool:
    try:
        return parse_pool(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _quantity(resource: str) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = resource_units(resource, raw)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{raw!r} must not be negative")
        return value

    return parse


def _cluster(args: argparse.Namespace) -> ClusterModel:
    """The cluster the flags describe (see the module docstring)."""
    shape: dict[str, Any] = {
        "unit_resource": args.unit_resource,
        "cpu_per_unit": args.cpu_per_unit,
        "memory_per_unit": args.memory_per_unit,
    }
    pools = list(args.pool or ())
    if args.pools is not None:
        source = str(args.pools)
        try:
            doc = json.loads(args.pools.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"--pools {source}: not JSON: {exc}") from None
        pools.extend(pools_from_json(doc, source=f"--pools {source}"))
    if not pools:
        capacity = args.capacity or (args.nodes or 8) * args.gpus_per_node
        if args.capacity is None and args.nodes is None:
            capacity = 64
        return homogeneous(capacity, args.gpus_per_node, **shape)
    if args.capacity is not None or args.nodes is not None:
        raise ValueError("--pool/--pools describe the cluster: drop --capacity and --nodes")
    cluster = ClusterModel(pools=tuple(pools), **shape)
    if cluster.capacity <= 0:
        raise ValueError(f"the pools have no {args.unit_resource} (--unit-resource)")
    if not any(cluster.holds_a_replica(p) for p in cluster.pools if cluster.units_of(p.capacity)):
        wants = ", ".join(f"{name}={qty}" for name, qty in cluster.requests())
        raise ValueError(
            f"no pool's node holds one replica ({wants}; --cpu-per-unit, --memory-per-unit)"
        )
    return cluster


def _describe(pools: tuple[Pool, ...]) -> list[dict[str, Any]]:
    return [
        {
            "name": p.name,
            "count": p.count,
            "resources": dict(p.capacity),
            "labels": dict(p.node_labels()),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in p.taints],
        }
        for p in pools
    ]


def check_writable(path: Path) -> None:
    """Raise ``OSError`` naming ``path`` unless it can be written (created if missing)."""
    existed = path.exists()
    try:
        with path.open("ab"):
            pass
    except OSError as exc:
        raise OSError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not existed:
        path.unlink()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``lattice simulate`` flags on ``p``."""
    p.add_argument("--trace", required=True, type=Path, help="Philly-condensed or generic CSV")
    p.add_argument(
        "--cluster", help="only this virtual cluster's rows (a trace with a 'cluster' column)"
    )
    cap = p.add_mutually_exclusive_group()
    cap.add_argument("--capacity", type=int, help="total units (default 64)")
    cap.add_argument("--nodes", type=int, help="number of nodes (with --gpus-per-node)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="units per node (default 8)")
    p.add_argument("--unit", default="gpu", help="unit name, for display only (default gpu)")
    p.add_argument(
        "--pool",
        action="append",
        type=_pool_arg,
        help='a pool of nodes, repeatable: "NAME COUNT RES=QTY... [label:K=V] '
        '[taint:K[=V]:EFFECT]", e.g. "a 4 nvidia.com/gpu=8 cpu=64 memory=512Gi"',
    )
    p.add_argument("--pools", type=Path, help="pools from a JSON file (a list of pools)")
    p.add_argument(
        "--pool-affinity",
        type=float,
        default=0.0,
        help="share of the jobs without a selector pinned to one pool (pool=NAME), seeded (0)",
    )
    p.add_argument(
        "--unit-resource",
        default="nvidia.com/gpu",
        help="the resource trace units count (default nvidia.com/gpu; cpu: whole cores)",
    )
    p.add_argument(
        "--cpu-per-unit", type=_quantity("cpu"), default="4", help="cpu per unit of a job (4)"
    )
    p.add_argument(
        "--memory-per-unit",
        type=_quantity("memory"),
        default="32Gi",
        help="memory per unit of a job (32Gi)",
    )
    p.add_argument(
        "--policy",
        action="append",
        help=f"policy to run; repeatable (default all): {', '.join(ALL_POLICIES)}",
    )
    p.add_argument("--strategy", choices=[s.value for s in Strategy], help="for `lattice`")
    p.add_argument(
        "--resize-interval", type=_duration, help="seconds or 30s, 5m... (default: the core's)"
    )
    p.add_argument(
        "--slowdown-limit", type=float, help="LAS starvation guard K (default: the core's)"
    )
    p.add_argument("--starvation-limit", type=_duration, help=argparse.SUPPRESS)
    p.add_argument("--rigid-fraction", type=float, default=0.0, help="share of rigid jobs (0)")
    p.add_argument(
        "--checkpoint",
        type=_duration,
        help="checkpoint interval of each job, seconds or 1h (none)",
    )
    p.add_argument(
        "--restart-cost", type=_duration, default=30.0, help="seconds or 30s... per resize (30)"
    )
    p.add_argument("--min-fraction", type=float, default=0.5, help="min = ceil(units x F)")
    p.add_argument("--max-factor", type=float, default=2.0, help="max = round(units x F)")
    p.add_argument("--priority-mix", default="0:1", help='e.g. "0:0.8,10:0.2" (default 0:1)')
    p.add_argument("--compress", type=float, default=1.0, help="divide submit times by this")
    p.add_argument("--seed", type=int, default=0, help="seed of the priority draw")
    p.add_argument("--limit", type=int, help="only the first N jobs")
    p.add_argument(
        "--speedup",
        default="linear",
        help="linear[:CAP] | amdahl:P | allreduce:APP | mix (fitted apps, drawn per job)",
    )
    p.add_argument("--speedup-dir", type=Path, default=Path(_DEFAULT_SPEEDUP_DIR))
    p.add_argument("--json", type=Path, help="write metrics (and per-job results) here")
    p.add_argument("--png", type=Path, help="write a figure (JCT CDF, utilisation, queue)")
    p.add_argument(
        "--lower-bound",
        action="store_true",
        help="also solve for the average JCT no schedule can beat (needs the sim extra)",
    )
    p.add_argument(
        "--bound-slot",
        type=_duration,
        default=DEFAULT_SLOT,
        help=f"its time slot (default {_go_duration(DEFAULT_SLOT)})",
    )
    p.add_argument(
        "--bound-keep",
        type=_duration,
        default=DEFAULT_KEEP,
        help=f"jobs alone this long are in it (default {_go_duration(DEFAULT_KEEP)})",
    )


def _config(args: argparse.Namespace) -> SchedulerConfig:
    config = SchedulerConfig()
    changes: dict[str, Any] = {}
    if args.strategy:
        changes["strategy"] = Strategy(args.strategy)
    if args.resize_interval is not None:
        changes["resize_interval"] = timedelta(seconds=args.resize_interval)
    if args.starvation_limit is not None:
        raise ValueError("--starvation-limit was removed: the guard is --slowdown-limit")
    if args.slowdown_limit is not None:
        changes["slowdown_limit"] = args.slowdown_limit
    return SchedulerConfig(**{**_fields(config), **changes}) if changes else config


def _fields(config: SchedulerConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in SchedulerConfig.__dataclass_fields__}


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def main(args: argparse.Namespace, *, progress: Progress | None = None) -> int:
    """Run ``lattice simulate`` for parsed ``args``."""
    try:
        for out in (args.json, args.png):
            if out is not None:
                check_writable(out)
        cluster = _cluster(args)
        capacity = cluster.capacity
        fits = load_fits(args.speedup_dir)
        options = MappingOptions(
            min_fraction=args.min_fraction,
            max_factor=args.max_factor,
            priority_mix=parse_priority_mix(args.priority_mix),
            compress=args.compress,
            seed=args.seed,
            speedup=args.speedup,
            limit=args.limit,
            rigid_fraction=args.rigid_fraction,
            checkpoint=args.checkpoint,
        )
        if args.trace.is_file() and args.trace.stat().st_size == 0:
            raise ValueError(f"{args.trace}: the trace is empty")
        trace = read_trace(args.trace, cluster=args.cluster)
        if not trace:
            raise ValueError(f"{args.trace}: the trace has no jobs (a header and no rows)")
        jobs = map_jobs(trace, options, capacity=capacity, fits=fits)
        jobs = assign_pools(jobs, cluster, fraction=args.pool_affinity, seed=args.seed)
        if not jobs:
            raise ValueError(f"{args.trace}: no jobs left to simulate (--limit {args.limit})")
        config = _config(args)
        runs = run_policies(
            jobs,
            args.policy or ["all"],
            capacity=capacity,
            units_per_node=args.gpus_per_node,
            restart_cost=args.restart_cost,
            config=config,
            timeline=args.png is not None,
            progress=progress,
            cluster=cluster,
        )
    except (OSError, ValueError, KeyError) as exc:
        print(f"lattice simulate: {exc}", file=sys.stderr)
        return 2
    print(f"{len(jobs)} jobs, capacity {capacity} {args.unit}s, speedup {args.speedup}")
    load = offered_load(jobs, capacity)
    print(load.describe(capacity, args.unit))
    print(format_table([r.metrics for r in runs]))
    bound = None
    if args.lower_bound:
        try:
            bound = lower_bound(jobs, capacity, slot=args.bound_slot, keep=args.bound_keep)
        except (RuntimeError, ValueError) as exc:
            print(f"lattice simulate: --lower-bound: {exc}", file=sys.stderr)
            return 2
        print(_describe_bound(bound, runs))
    if args.json:
        doc = {
            "trace": str(args.trace),
            "capacity": capacity,
            "jobs": len(jobs),
            "restart_cost": args.restart_cost,
            "speedup": args.speedup,
            "resize_interval": config.resize_interval.total_seconds(),
            "unit_resource": cluster.unit_resource,
            "pools": _describe(cluster.pools),
            "load": asdict(load),
            "lower_bound": None if bound is None else asdict(bound),
            "policies": [
                {
                    **{k: _clean(v) for k, v in r.metrics.to_dict().items()},
                    "wall_seconds": r.wall_seconds,
                    "per_job": (
                        [
                            {
                                "id": j.id,
                                "submit": j.submit,
                                "start": j.start,
                                "finish": j.finish,
                                "resizes": j.resizes,
                                "priority": j.priority,
                                "preemptions": j.preemptions,
                                "lost_unit_seconds": j.lost,
                            }
                            for j in r.result.jobs
                        ]
                        if r.result is not None
                        else None
                    ),
                }
                for r in runs
            ],
        }
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    if args.png:
        args.png.write_bytes(render_png(runs, unit=args.unit))
        print(f"wrote {args.png}")
    return 0
