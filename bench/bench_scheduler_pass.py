"""A whole scheduler pass in process (``SchedulerLoop.run_once``), under CPython's default GC
thresholds and under the ones ``lattice run`` sets (``lattice.cli.GC_THRESHOLDS``), and with the
pure core run on the event loop against in its own thread (``SchedulerLoop.decide_in_thread``).

Not a pytest test. Run: ``.venv/bin/python bench/bench_scheduler_pass.py [--jobs N] [--pods N]
[--passes N]``.

It builds the real operator (informers, stores, plugins, the scheduler loop) on the in-memory
API server (``tests.support.memory_client.MemoryClient``, loaded as in ``bench_scheduler_load``'s
memory section). It fills the operator with ``--jobs``
TrainingJobs and ``--pods`` pods, runs two passes to settle, then times ``--passes`` passes.
Each mode runs in a child process of its own, so neither inherits the other's heap. For each
mode it prints pass p50/p95/max, the time the cyclic collector took during the timed passes
(from ``gc.callbacks``), and how long the event loop stalled meanwhile: a ticker task sleeps
1 ms over and over during the passes and records how late each wake-up was (what a response
or a watch event arriving mid-pass waits). Then it prints the ratios of the raised thresholds
to the default, and of the core in its thread to the core on the loop, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from schedload.common import GPU, MANAGED, print_setup
from schedload.fake import WorldClock, caught_up, load, until
from schedload.world import MemWorld

from lattice.cli import GC_THRESHOLDS
from lattice.clock import RealClock
from tests.support.memory_client import MemoryClient

DEFAULT_THRESHOLDS = (700, 10, 10)
#: The ticker's sleep: its wake-ups come this late when the event loop is busy.
TICK = 0.001


async def child(jobs: int, pods: int, passes: int, *, in_thread: bool) -> dict[str, Any]:
    from prometheus_client import CollectorRegistry

    from lattice.app import Operator
    from lattice.config import Settings
    from lattice.runtime.logs import configure_logging

    configure_logging(level="warning", fmt="json")
    world = MemWorld(jobs, pods, 8, 10, 9)
    server = MemoryClient(clock=WorldClock(world.now))
    settings = Settings(scheduling_unit=GPU, metrics_addr="127.0.0.1:0", probe_addr="127.0.0.1:0")
    op = Operator(settings, server, clock=WorldClock(world.now), registry=CollectorRegistry())
    op.informers.start()
    op.recorder.start()
    await op.informers.wait_synced()
    tj = op.jobs["TrainingJob"]
    parts: list[tuple[Any, tuple[str, str], int]] = [
        (op.nodes, ("nodes", ""), world.nodes),
        (op.foreign_pods, ("pods", f"!{MANAGED}"), world.nodes),
        (tj, ("trainingjobs", ""), world.jobs),
        (op.pods, ("pods", MANAGED), world.pods),
    ]
    for informer, key, want in parts:
        await load(server, world, key)
        await until(caught_up(server, informer, want))
    await op.scheduler.run_once()
    await until(caught_up(server, tj, world.jobs))  # the patched jobs, back on the watch
    await op.scheduler.run_once()

    spent: list[float] = []
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            spent.append(time.perf_counter() - started.pop())

    lags: list[float] = []

    async def ticker() -> None:
        while True:
            t = time.perf_counter()
            await RealClock().sleep(TICK)
            lags.append(time.perf_counter() - t - TICK)

    op.scheduler.decide_in_thread = in_thread
    gc.callbacks.append(on_gc)
    ticking = asyncio.create_task(ticker())
    times: list[float] = []
    for _ in range(passes):
        t = time.perf_counter()
        await op.scheduler.run_once()
        times.append(time.perf_counter() - t)
        # A pass with nothing to write never yields: let the ticker wake (and log the stall)
        # before the next pass starts.
        await RealClock().sleep(2 * TICK)
    ticking.cancel()
    gc.callbacks.remove(on_gc)
    lags.sort()
    await op.recorder.stop(timeout=1.0)
    await op.informers.stop()
    times.sort()
    return {
        "jobs": len(tj.store),
        "pods": len(op.pods.store),
        "p50": statistics.median(times),
        "p95": times[min(len(times) - 1, int(0.95 * len(times)))],
        "max": times[-1],
        "gc_s": sum(spent),
        "gc_max": max(spent, default=0.0),
        "collections": len(spent),
        "lag_p50": statistics.median(lags) if lags else 0.0,
        "lag_p99": lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else 0.0,
        "lag_max": lags[-1] if lags else 0.0,
        "ticks": len(lags),
    }


def run_mode(
    thresholds: tuple[int, int, int], a: argparse.Namespace, *, in_thread: bool = True
) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", ",".join(map(str, thresholds))]
    argv += ["--core", "thread" if in_thread else "loop"]
    argv += ["--jobs", str(a.jobs), "--pods", str(a.pods), "--passes", str(a.passes)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--pods", type=int, default=1000)
    p.add_argument("--passes", type=int, default=30)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--core", choices=["thread", "loop"], default="thread", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        gc.set_threshold(*(int(x) for x in a.child.split(",")))
        result = child(a.jobs, a.pods, a.passes, in_thread=a.core == "thread")
        print(json.dumps(asyncio.run(result)))
        return 0
    print_setup(f"{a.jobs} TrainingJobs, {a.pods} pods, {a.passes} timed passes per mode")
    rows = {
        "default GC, core in thread": run_mode(DEFAULT_THRESHOLDS, a),
        "raised GC, core in thread": run_mode(GC_THRESHOLDS, a),
        "raised GC, core on loop": run_mode(GC_THRESHOLDS, a, in_thread=False),
    }
    print(f"raised GC: lattice run's {GC_THRESHOLDS}; default: {DEFAULT_THRESHOLDS}")
    for name, r in rows.items():
        print(
            f"{name:>27}: jobs {r['jobs']}, pods {r['pods']}; pass p50 {r['p50']:.3f} s, "
            f"p95 {r['p95']:.3f} s, max {r['max']:.3f} s; GC {r['collections']} collections, "
            f"{r['gc_s']:.2f} s in total, longest {r['gc_max']:.3f} s; loop stalls "
            f"p50 {r['lag_p50'] * 1e3:.1f} ms, p99 {r['lag_p99'] * 1e3:.1f} ms, "
            f"max {r['lag_max'] * 1e3:.1f} ms over {r['ticks']} ticks"
        )
    base, tuned, on_loop = rows.values()
    print(
        f"ratio raised/default GC: p50 {tuned['p50'] / base['p50']:.2f}x, "
        f"p95 {tuned['p95'] / base['p95']:.2f}x, max {tuned['max'] / base['max']:.2f}x"
    )
    print(
        f"ratio core in thread / on loop: pass p50 {tuned['p50'] / on_loop['p50']:.2f}x; "
        f"loop stalls p99 {tuned['lag_p99'] / on_loop['lag_p99']:.2f}x, "
        f"max {tuned['lag_max'] / on_loop['lag_max']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
