"""Benchmark: WorkQueue add → get → done throughput against a bare ``asyncio.Queue``.

One "op" is one distinct key going through the queue: ``add`` + ``get`` + ``done`` for the
WorkQueue, ``put_nowait`` + ``get`` + ``task_done`` for the baseline. Each worker yields to the
loop once per key (``asyncio.sleep(0)``, standing in for a reconcile's I/O), so N workers really
interleave; the baseline does exactly the same, so the ratio isolates the queue's own cost
(dirty/processing bookkeeping, FIFO, wake-ups).

Scenarios:
  prefilled  all keys are added first, then N workers drain the queue;
  streaming  a producer adds keys in batches of 64, yielding between batches, while N workers
             consume.
The WorkQueue runs on ``RealClock``; "+metrics" passes a counting ``QueueMetrics`` (clock reads
on every add/get/done), to show what the metrics hooks cost.

Usage: ``python bench/bench_workqueue.py [--items N] [--repeat R]``; prints a table, best of R.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial

from lattice.clock import RealClock, yield_now
from lattice.runtime.workqueue import QueueShutDown, WorkQueue

__all__ = ["main"]

BATCH = 64
WORKERS = (1, 8, 64)

Runner = Callable[[], Awaitable[int]]


class CountingMetrics:
    """A cheap QueueMetrics: counts calls, so the cost measured is the queue's, not Prometheus'."""

    def __init__(self) -> None:
        self.calls = 0

    def add(self) -> None:
        self.calls += 1

    def depth(self, n: int) -> None:
        self.calls += 1

    def get(self, latency_s: float) -> None:
        self.calls += 1

    def done(self, work_s: float) -> None:
        self.calls += 1

    def retry(self) -> None:
        self.calls += 1

    def unfinished(self, unfinished_s: float, longest_s: float) -> None:
        self.calls += 1


# -- baseline: asyncio.Queue -------------------------------------------------------------------


async def baseline(items: int, workers: int, *, streaming: bool) -> int:
    queue: asyncio.Queue[int | None] = asyncio.Queue()
    processed = 0

    async def worker() -> None:
        nonlocal processed
        while True:
            key = await queue.get()
            if key is None:
                queue.task_done()
                return
            await yield_now()
            processed += 1
            queue.task_done()

    async def produce() -> None:
        for start in range(0, items, BATCH):
            for key in range(start, min(start + BATCH, items)):
                queue.put_nowait(key)
            if streaming:
                await yield_now()
        for _ in range(workers):
            queue.put_nowait(None)

    if not streaming:
        await produce()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    if streaming:
        await produce()
    await asyncio.gather(*tasks)
    return processed


# -- the WorkQueue -----------------------------------------------------------------------------


async def workqueue(items: int, workers: int, *, streaming: bool, metrics: bool = False) -> int:
    queue = WorkQueue[int](RealClock(), metrics=CountingMetrics() if metrics else None)
    processed = 0

    async def worker() -> None:
        nonlocal processed
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            await yield_now()
            processed += 1
            queue.done(key)

    async def produce() -> None:
        for start in range(0, items, BATCH):
            for key in range(start, min(start + BATCH, items)):
                queue.add(key)
            if streaming:
                await yield_now()
        queue.shutdown()  # queued keys are still handed out; then workers get QueueShutDown

    if not streaming:
        await produce()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    if streaming:
        await produce()
    await asyncio.gather(*tasks)
    return processed


def measure(variants: dict[str, Runner], *, items: int, repeat: int) -> dict[str, float]:
    """Best ops/s per variant over ``repeat`` rounds, each run on a fresh event loop.

    Rounds interleave the variants, so machine noise and drift hit them alike.
    """
    best = dict.fromkeys(variants, 0.0)

    async def timed(run: Runner) -> float:
        start = time.perf_counter()
        done = await run()
        elapsed = time.perf_counter() - start
        if done != items:
            msg = f"processed {done} of {items}"
            raise RuntimeError(msg)
        return elapsed

    for _ in range(repeat):
        for label, run in variants.items():
            best[label] = max(best[label], items / asyncio.run(timed(run)))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000, help="keys per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs per cell; best is kept")
    args = parser.parse_args()
    items, repeat = args.items, args.repeat

    t0 = time.perf_counter()
    header = (
        f"{'scenario':<10} {'workers':>7} {'asyncio.Queue':>14} {'WorkQueue':>12} {'ratio':>6} "
        f"{'+metrics':>12} {'ratio':>6}"
    )
    print(
        f"WorkQueue add/get/done throughput, ops/s (1 op = 1 key); {items} keys, best of {repeat}"
    )
    print(header)
    print("-" * len(header))
    for streaming in (False, True):
        scenario = "streaming" if streaming else "prefilled"
        for workers in WORKERS:
            best = measure(
                {
                    "base": partial(baseline, items, workers, streaming=streaming),
                    "plain": partial(workqueue, items, workers, streaming=streaming),
                    "timed": partial(workqueue, items, workers, streaming=streaming, metrics=True),
                },
                items=items,
                repeat=repeat,
            )
            base, plain, timed = best["base"], best["plain"], best["timed"]
            print(
                f"{scenario:<10} {workers:>7} {base:>14,.0f} {plain:>12,.0f} {plain / base:>6.2f} "
                f"{timed:>12,.0f} {timed / base:>6.2f}"
            )
    print(f"ratio = WorkQueue ops/s / asyncio.Queue ops/s; total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
