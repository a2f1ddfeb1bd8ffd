"""Benchmark of ``lattice simulate``: today's simulator against an older commit, in one run.

Not a pytest test. Run: ``.venv/bin/python bench/bench_simulate.py [--trace F] [--cluster ID]
[--capacity N] [--old REV] [--policy P]``.

Times, in one process and the same machine state: parsing and mapping the trace, the
``fifo-backfill`` baseline (no scheduler core), then each requested policy with this
checkout's code (*new*), and the same policy with the code of ``--old`` (default ``fb7522c``,
the commit before the faster pass), extracted with ``git archive`` into a temporary directory
and run in a subprocess with ``PYTHONPATH`` pointing at it (the old reader has no
``--cluster``, so it gets the cluster's rows as a file of their own). Prints wall and CPU
seconds, scheduler passes and the old/new ratios of wall and CPU time. The default case is
the Philly virtual cluster 103959 at 21 GPUs (``fifo-backfill`` at 90 % utilisation), with
the issue's mapping: Amdahl speedup 0.95, sizes 0.5x-2x, 30 s restarts.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from lattice.sim import MappingOptions, map_jobs, read_trace, run_policies

ROOT = Path(__file__).resolve().parents[1]
TRACE = Path("/work/traces/philly.csv")
OLD = "fb7522c"
# Runs one policy with whatever ``lattice`` is on PYTHONPATH; prints JSON.
_CHILD = """
import json, sys, time
from pathlib import Path
from lattice.sim import MappingOptions, map_jobs, read_trace, run_policies
trace, capacity, policy = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
jobs = map_jobs(read_trace(trace), MappingOptions(speedup="amdahl:0.95"), capacity=capacity)
cpu = time.process_time()
run = run_policies(jobs, [policy], capacity=capacity, timeline=False)[0]
print(json.dumps({"wall": run.wall_seconds, "cpu": time.process_time() - cpu,
                  "passes": run.metrics.passes}))
"""


def _cluster_file(trace: Path, cluster: str | None, into: Path) -> Path:
    if cluster is None:
        return trace
    out = into / f"{cluster}.csv"
    with trace.open(newline="") as f, out.open("w", newline="") as g:
        rows = csv.reader(f)
        writer = csv.writer(g)
        header = next(rows)
        writer.writerow(header)
        col = header.index("cluster")
        writer.writerows(r for r in rows if len(r) > col and r[col].strip() == cluster)
    return out


def _old_tree(rev: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src/lattice"],
        check=True,
        capture_output=True,
    ).stdout
    tar_path = into / "old.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into / "old", filter="data")
    return into / "old" / "src"


def _run_old(src: Path, trace: Path, capacity: int, policy: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(trace), str(capacity), policy],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--cluster", default="103959", help="a cluster of a multi-cluster trace")
    p.add_argument("--capacity", type=int, default=21)
    p.add_argument("--old", default=OLD, help="the commit to compare against")
    p.add_argument("--policy", action="append", help="default: lattice")
    args = p.parse_args()
    started = time.perf_counter()
    rows = read_trace(args.trace, cluster=args.cluster)
    jobs = map_jobs(rows, MappingOptions(speedup="amdahl:0.95"), capacity=args.capacity)
    parse = time.perf_counter() - started
    base = run_policies(jobs, ["fifo-backfill"], capacity=args.capacity, timeline=False)[0]
    print(f"{len(jobs)} jobs ({args.cluster or args.trace.name}), capacity {args.capacity}")
    head = f"{'run':<34} {'wall s':>8} {'cpu s':>8} {'passes':>7} {'old/new wall, cpu':>18}"
    print(head)
    print(f"{'parse+map':<34} {parse:>8.3f}")
    print(f"{'fifo-backfill (baseline)':<34} {base.wall_seconds:>8.3f}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        old_src = _old_tree(args.old, work)
        trace = _cluster_file(args.trace, args.cluster, work)
        for policy in args.policy or ["lattice"]:
            cpu = time.process_time()
            run = run_policies(jobs, [policy], capacity=args.capacity, timeline=False)[0]
            new_cpu = time.process_time() - cpu
            old = _run_old(old_src, trace, args.capacity, policy)
            print(
                f"{policy + ' (new)':<34} {run.wall_seconds:>8.3f} {new_cpu:>8.3f} "
                f"{run.metrics.passes:>7}"
            )
            print(
                f"{policy + ' (old ' + args.old + ')':<34} {old['wall']:>8.3f} "
                f"{old['cpu']:>8.3f} {int(old['passes']):>7} "
                f"{old['wall'] / run.wall_seconds:>8.1f}x {old['cpu'] / new_cpu:>8.1f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
