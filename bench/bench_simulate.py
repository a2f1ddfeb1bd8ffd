"""Benchmark of ``lattice simulate`` on the 1,435-job Philly trace (issue 8: < 1 min).

Not a pytest test. Run: ``.venv/bin/python bench/bench_simulate.py [--capacity N] [--policy P]``.

Times, in one process: parsing and mapping the trace (baseline 1), the ``fifo-backfill``
policy alone (baseline 2, no scheduler core), then each requested policy. Prints the wall
seconds, the number of scheduler passes, the ratio to the fifo-backfill run, and whether the
one-minute goal holds for each policy.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lattice.sim import MappingOptions, map_jobs, read_trace, run_policies

TRACE = Path(__file__).resolve().parents[1] / "../shared/data/traces/philly-0e4a51.csv"
GOAL_SECONDS = 60.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--capacity", type=int, default=64)
    p.add_argument(
        "--policy",
        action="append",
        help="default: lattice, lattice:BestEffortFIFO",
    )
    args = p.parse_args()
    started = time.perf_counter()
    jobs = map_jobs(read_trace(args.trace), MappingOptions(), capacity=args.capacity)
    parse = time.perf_counter() - started
    base = run_policies(jobs, ["fifo-backfill"], capacity=args.capacity, timeline=False)[0]
    print(f"{len(jobs)} jobs, capacity {args.capacity}")
    print(f"{'run':<32} {'seconds':>8} {'passes':>7} {'x fifo':>7}  goal<{GOAL_SECONDS:.0f}s")
    print(f"{'parse+map (baseline)':<32} {parse:>8.3f} {'-':>7} {'-':>7}")
    print(f"{'fifo-backfill (baseline)':<32} {base.wall_seconds:>8.3f} {base.metrics.passes:>7}")
    ok = True
    policies = args.policy or ["lattice", "lattice:BestEffortFIFO"]
    for run in run_policies(jobs, policies, capacity=args.capacity, timeline=False):
        ratio = run.wall_seconds / base.wall_seconds
        good = run.wall_seconds < GOAL_SECONDS
        ok &= good
        print(
            f"{run.metrics.policy:<32} {run.wall_seconds:>8.3f} {run.metrics.passes:>7} "
            f"{ratio:>7.1f}  {'ok' if good else 'MISSED'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
