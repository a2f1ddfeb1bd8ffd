"""The memory section: the real operator over 10k jobs / 100k pods, RSS after each step.

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from _support import (
    clock,
    proc_status,
)

from lattice.clock import RealClock
from lattice.kube.client import KubeClient
from lattice.primitives.objects import Obj
from schedload.common import GPU, MANAGED, print_setup
from schedload.fake import WorldClock, caught_up, events_sent, load, status_patches, until
from schedload.world import MemWorld
from tests.support.memory_client import MemoryClient

#: The bench's entry point, which runs each fill path in a child process of its own.
ENTRY = Path(__file__).resolve().parents[1] / "bench_scheduler_load.py"

__all__ = ["child_args", "malloc_trim", "memory_child", "memory_main"]


def malloc_trim() -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    libc.malloc_trim(0)
    return True


async def memory_child(mode: str, a: argparse.Namespace) -> None:
    """Build the operator on the in-memory server, fill it step by step (the server first, in
    steps of its own, then the operator's informers), print one JSON line of RSS."""
    from prometheus_client import CollectorRegistry

    from lattice.app import Operator
    from lattice.config import Settings
    from lattice.runtime.logs import configure_logging

    configure_logging(level="warning", fmt="json")
    world = MemWorld(a.mem_jobs, a.mem_pods, a.mem_gpus, a.mem_namespaces, a.seed)
    server = MemoryClient(clock=WorldClock(world.now))
    steps: list[Obj] = []

    def mark(label: str, started: float, **extra: Any) -> None:
        gc.collect()
        st = proc_status()
        steps.append(
            {
                "step": label,
                "rss": st["VmRSS"],
                "hwm": st["VmHWM"],
                "anon": st["RssAnon"],
                "seconds": clock.monotonic() - started,
                **extra,
            }
        )

    t = clock.monotonic()
    settings = Settings(scheduling_unit=GPU, metrics_addr="127.0.0.1:0", probe_addr="127.0.0.1:0")
    client: KubeClient = server
    op = Operator(settings, client, clock=WorldClock(world.now), registry=CollectorRegistry())
    op.informers.start()
    op.recorder.start()
    await op.informers.wait_synced()
    await op.scheduler.run_once()
    mark("baseline: operator built, informers synced empty, one empty pass", t)

    tj = op.jobs["TrainingJob"]
    phases: list[tuple[str, list[tuple[Any, tuple[str, str], int]]]] = [
        (
            f"+ {world.nodes:,} nodes (node_info) and {world.nodes:,} DaemonSet pods (foreign)",
            [
                (op.nodes, ("nodes", ""), world.nodes),
                (op.foreign_pods, ("pods", f"!{MANAGED}"), world.nodes),
            ],
        ),
        (
            f"+ {world.jobs:,} TrainingJobs (slim_object dicts)",
            [(tj, ("trainingjobs", ""), world.jobs)],
        ),
        (f"+ {world.pods:,} pods (PodInfo)", [(op.pods, ("pods", MANAGED), world.pods)]),
        (
            f"+ {world.pods:,} headless Services (ObjectInfo)",
            [(op.services, ("services", MANAGED), world.pods)],
        ),
    ]
    for label, parts in phases:
        if label.startswith("+ ") and "Services" in label and a.mem_no_services:
            continue
        t = clock.monotonic()
        stored = 0
        for _, key, _ in parts:
            stored += await load(server, world, key, wake=False)
        mark(
            f"  (server: {stored:,} objects stored, its memory not the operator's)",
            t,
            server=stored,
        )
        t = clock.monotonic()
        for informer, _, _ in parts:
            if mode == "list":
                informer.force_relist()
        if mode == "watch":
            await server.notify_watches()
        for informer, _, want in parts:
            await until(caught_up(server, informer, want))
        mark(label, t, objects=sum(w for _, _, w in parts))
    t = clock.monotonic()
    plan = await op.scheduler.run_once()
    pass1 = clock.monotonic() - t
    patches = status_patches(server)
    written = len(patches)
    patch_bytes = sum(
        len(json.dumps({k: v for k, v in b.items() if k != "metadata"}, separators=(",", ":")))
        for b in patches
    )
    stages = collections.Counter(str(d.stage) for d in plan.decisions.values())
    mark(
        "one scheduler pass (SchedulerLoop.run_once)",
        t,
        pass_s=round(pass1, 2),
        written=written,
        patch_bytes=patch_bytes,
        stages=dict(stages),
        capacity=[plan.capacity_used, plan.capacity_total],
    )
    t = clock.monotonic()
    delivered = written  # the server sends each patched job back on the jobs watch
    await until(caught_up(server, tj, world.jobs))
    await RealClock().sleep(0.1)
    t2 = clock.monotonic()
    plan = await op.scheduler.run_once()
    pass2 = clock.monotonic() - t2
    mark(
        f"{delivered:,} patched jobs delivered as MODIFIED, second pass",
        t,
        pass_s=round(pass2, 2),
        written=len(status_patches(server)) - written,
    )
    t = clock.monotonic()
    if malloc_trim():
        mark("after malloc_trim(0) (not done by the operator)", t)
    sizes = {
        "job": len(world.job_json(0)),
        "pod": len(next(world.pod_texts())),
        "service": len(next(world.service_texts())),
        "node": len(world.node_texts().__next__()),
    }
    print(
        json.dumps(
            {
                "mode": mode,
                "steps": steps,
                "json_bytes": sizes,
                "stores": {
                    "jobs": len(tj.store),
                    "pods": len(op.pods.store),
                    "services": len(op.services.store),
                    "nodes": len(op.nodes.store),
                    "foreign": len(op.foreign_pods.store),
                },
                "queued_keys": op.controllers["TrainingJob"].queue.len(),
                "events_sent": events_sent(server),
            }
        )
    )
    await op.recorder.stop(timeout=1.0)
    await op.informers.stop()


def memory_main(a: argparse.Namespace) -> None:
    print_setup(
        "memory section: in-process, no cluster, nothing pinned; each fill path in its own "
        "child process"
    )
    world = MemWorld(a.mem_jobs, a.mem_pods, a.mem_gpus, a.mem_namespaces, a.seed)
    print(
        f"world: {a.mem_jobs:,} TrainingJobs in {a.mem_namespaces} namespaces "
        f"({world.running:,} Running with {a.mem_pods:,} one-GPU workers, "
        f"{a.mem_jobs - world.running:,} Waiting), {world.nodes:,} nodes x {a.mem_gpus} GPUs, "
        f"{world.nodes:,} DaemonSet pods, "
        + ("no Services" if a.mem_no_services else f"{a.mem_pods:,} headless Services")
    )
    results: dict[str, Obj] = {}
    for mode in a.mem_modes.split(","):
        cmd = [sys.executable, str(ENTRY), "--memory-child", mode, *child_args(a)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"[{mode}] child failed rc={proc.returncode}:\n{proc.stderr[-4000:]}")
            continue
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not results:
        return
    first = next(iter(results.values()))
    print(f"JSON bytes per object: {first['json_bytes']}; stores: {first['stores']}")
    for mode, r in results.items():
        print(
            f"\n[{mode}] fill path: "
            + (
                "force_relist() of each informer (LIST, pages of 500; a restart at that size)"
                if mode == "list"
                else "one ADDED watch event per object (the operator up while they appeared)"
            )
        )
        hdr = (
            f"{'step':<82} {'VmRSS MiB':>10} {'delta':>8} {'KiB/obj':>8} {'VmHWM MiB':>10} "
            f"{'operator':>9} {'s':>7}"
        )
        print(hdr)
        print("-" * len(hdr))
        base = prev = r["steps"][0]["rss"]
        skip = ("step", "rss", "hwm", "anon", "seconds", "objects", "server")
        server_mib = 0.0  # what the server's own steps added: the rest is the operator's
        for s in r["steps"]:
            extra = {k: v for k, v in s.items() if k not in skip}
            if s.get("server"):
                server_mib += s["rss"] - prev
            n = s.get("objects") or s.get("server")
            per = f"{(s['rss'] - prev) * 1024 / n:>8.2f}" if n else f"{'':>8}"
            prev = s["rss"]
            print(
                f"{s['step']:<82} {s['rss']:>10,.0f} {s['rss'] - base:>+8,.0f} {per} "
                f"{s['hwm']:>10,.0f} {s['rss'] - server_mib:>9,.0f} {s['seconds']:>7.1f}"
                + (f"  {extra}" if extra else "")
            )
        print(
            f"events sent to the server: {r['events_sent']}; the server's own steps added "
            f"{server_mib:,.0f} MiB (column 'operator': VmRSS without them)"
        )
    print(
        f"\ngoal: operator RSS <= 500 MiB at {a.mem_jobs:,} jobs / {a.mem_pods:,} pods (the "
        "in-memory server shares the process: compare column 'operator')"
    )


def child_args(a: argparse.Namespace) -> list[str]:
    out = [
        "--mem-jobs",
        str(a.mem_jobs),
        "--mem-pods",
        str(a.mem_pods),
        "--mem-gpus",
        str(a.mem_gpus),
        "--mem-namespaces",
        str(a.mem_namespaces),
        "--seed",
        str(a.seed),
    ]
    if a.mem_no_services:
        out.append("--mem-no-services")
    return out
