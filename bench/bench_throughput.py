"""MPIJob throughput on the real local control plane, against a bare-client ceiling and a peer.

Needs a running control plane (``make cluster-up``) with the CRDs applied. It prints numbers; it is
never a test. Steps, all in the same run:

1. **ceiling**: a bare asyncio client (``lattice.kube.client.connect``) creates ``--ceiling-pods``
   pods (``--concurrency`` in flight) on the same apiserver: pods/s.
2. **mix ceiling** (unless ``--no-mix-ceiling``): the same client, in a namespace no operator
   watches, makes Lattice's writes for ``--mix-jobs`` MPIJobs (default ``min(--jobs, 300)``),
   all started at once under one ``--concurrency`` bound: the job, then its children as the real
   ``MPIJobPlugin.children`` builds them, in the reconciler's two rounds (ConfigMap, Secret and
   Service; then the worker pods and the launcher Job), then ``--mix-status-patches`` status
   PATCHes and ``--mix-events`` events (``_support.mix_ceiling``). Jobs/s: about the most an
   operator making these writes could reach here; Lattice's jobs/s is also given as a share
   of it.
3. **lattice**: ``lattice run`` (default workers and QPS) on a fresh namespace, ``--nodes`` kwok
   nodes; ``--jobs`` MPIJobs x ``--workers`` workers created by the bench (``--concurrency`` in
   flight). Reported: time from the first create to all pods seen (workers + launcher pod, via a
   watch), jobs/s, pods/s, p50/p99 latency from a job's create to all of its pods, API writes
   per job (delta of kube-apiserver's ``apiserver_request_total`` for POST/PUT/PATCH/DELETE, all
   clients, and the operator's own ``rest_client_requests_total``), operator peak RSS (VmHWM)
   and CPU seconds (utime+stime) from /proc. Ratios against the ceiling.
4. **peer**: kubeflow/mpi-operator built with ``go`` into ``~/.cache/lattice/bin/mpi-operator-<v>``
   (``--peer-bin``; skipped if missing), same workload on another namespace, same numbers.

Usage: ``python bench/bench_throughput.py [--jobs 200] [--workers 4] [--nodes 100]
[--mix-jobs N | --no-mix-ceiling]``
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

from lattice.frameworks.mpijob import MPIJobPlugin
from lattice.kube.client import connect
from lattice.kube.resources import Resource

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import (
    POOL_LABEL,
    RUN,
    Namespaces,
    Pinning,
    add_mix_args,
    ceiling,
    check_mix_args,
    create_node_pool,
    delete_node_pool,
    free_port,
    is_file,
    lattice_cmd,
    measure_mix,
    operator_breakdown,
    operator_context,
    report,
    workload,
    write_selector,
)

PEER_VERSION = "v0.6.0"
MPIJOB = Resource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")
#: The mix ceiling's status PATCHes and events per MPIJob: what Lattice sent at N=1000, rounded
#: down (2.5 and 0.8: its recorder drops the events its queue cannot hold, as client-go's does).
STATUS_PATCHES, EVENTS = 2, 1


def pinning(mode: str) -> Pinning:
    """On >= 2 cores with taskset: the control plane on core 0, the operators on core 1."""
    cores = os.cpu_count() or 1
    active = mode == "on" or (mode == "auto" and cores >= 2 and shutil.which("taskset") is not None)
    return (
        Pinning(operator="1", control_plane="0")
        if active
        else Pinning(operator=None, control_plane=None)
    )


def describe(pins: Pinning) -> str:
    if pins.operator is None:
        return "not pinned"
    return (
        f"control plane ({len(pins.pinned)} processes: etcd, kube-apiserver, controller-manager,"
        " scheduler, kwok) pinned to core 0; operator under test pinned to core 1; the bench"
        " client (creates and the pod watch) unpinned"
    )


def mpijob(name: str, workers: int, pool: str) -> dict[str, Any]:
    def tmpl(cname: str) -> dict[str, Any]:
        return {
            "spec": {
                "nodeSelector": {POOL_LABEL: pool},
                "containers": [
                    {
                        "name": cname,
                        "image": "mpioperator/mpi-pi:openmpi",
                        "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                    }
                ],
            }
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "None"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": tmpl("mpi-launcher")},
                "Worker": {"replicas": workers, "template": tmpl("mpi-worker")},
            },
        },
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--ceiling-pods", type=int, default=1000)
    add_mix_args(ap, kind="MPIJob", status_patches=STATUS_PATCHES, events=EVENTS)
    ap.add_argument("--timeout", type=float, default=600.0)
    default_peer = Path.home() / f".cache/lattice/bin/mpi-operator-{PEER_VERSION}/mpi-operator"
    ap.add_argument("--peer-bin", default=str(default_peer))
    ap.add_argument("--no-peer", action="store_true")
    # The default scheduling unit, ``node``, gives every pod a whole node: 100 nodes then hold 20
    # jobs of 5 pods, and the rest queue until kwok completes launchers. ``cpu`` (the pods ask for
    # 100m) leaves the capacity ample, which is what this bench measures.
    ap.add_argument("--scheduling-unit", default="cpu")
    ap.add_argument(
        "--operator-arg",
        action="append",
        default=[],
        help="extra argument for `lattice run` (repeatable), e.g. --operator-arg=--qps=0",
    )
    ap.add_argument(
        "--pin",
        choices=("auto", "on", "off"),
        default="auto",
        help="auto: pin the control plane to core 0 and the operators to core 1 on >= 2 cores",
    )
    a = ap.parse_args()
    check_mix_args(ap, a)
    pins = pinning(a.pin)
    with pins:
        await run(a, pins)


async def run(a: argparse.Namespace, pins: Pinning) -> None:
    kubeconfig = str(RUN / "kubeconfig")
    client = await connect(kubeconfig=kubeconfig)
    pool = f"b{uuid.uuid4().hex[:6]}"
    create_node_pool(pool, nodes=a.nodes, gpus=8)
    selector = write_selector(pool)
    namespaces = Namespaces(client, pool)
    measure = functools.partial(
        workload,
        client,
        res=MPIJOB,
        make=lambda name: mpijob(name, a.workers, pool),
        pods_per_job=a.workers + 1,  # and the launcher
        jobs=a.jobs,
        concurrency=a.concurrency,
        breakdown=operator_breakdown,
        timeout=a.timeout,
    )
    print(f"nproc={os.cpu_count()} jobs={a.jobs} workers={a.workers} nodes={a.nodes} pool={pool}")
    print(f"setup: {describe(pins)}")
    try:
        ns = await namespaces.new("bare")
        ceil = await ceiling(client, ns, n=a.ceiling_pods, concurrency=a.concurrency, pool=pool)
        print(f"     ceiling: {ceil:.1f} pods/s (bare RestClient, {a.concurrency} in flight)")
        mix = await measure_mix(
            client,
            namespaces,
            a,
            res=MPIJOB,
            make=lambda name: mpijob(name, a.workers, pool),
            plugin=MPIJobPlugin(),
            ctx=operator_context(a.scheduling_unit, selector),
        )
        mix_jobs = None if mix is None else mix.jobs_per_s
        results: dict[str, dict[str, float]] = {}
        ns = await namespaces.new("lattice")
        mport, pport = free_port(), free_port()
        cmd = lattice_cmd(
            ns, selector, a.scheduling_unit, a.operator_arg, metrics_port=mport, probe_port=pport
        )
        results["lattice"] = await measure(
            label="lattice",
            cmd=pins.wrap(cmd),
            ns=ns,
            metrics_url=f"http://127.0.0.1:{mport}/metrics",
        )
        report("lattice", results["lattice"], ceil, mix_jobs)
        peer = Path(a.peer_bin)
        if a.no_peer:
            print("mpi-operator: skipped (--no-peer)")
        elif not is_file(peer):
            print(f"mpi-operator: skipped, no binary at {peer} (see bench/RESULTS.md)")
        else:
            ns = await namespaces.new("mpiop")
            mon = free_port()
            cmd = [
                str(peer),
                "--kubeConfig",
                kubeconfig,
                "--namespace",
                ns,
                "--lock-namespace",
                ns,
                "--monitoring-port",
                str(mon),
            ]
            results["mpi-operator"] = await measure(
                label="mpiop",
                cmd=pins.wrap(cmd),
                ns=ns,
                metrics_url=f"http://127.0.0.1:{mon}/metrics",
            )
            report("mpi-operator", results["mpi-operator"], ceil, mix_jobs)
            ratio = results["lattice"]["jobs_per_s"] / max(
                results["mpi-operator"]["jobs_per_s"], 1e-9
            )
            print(f"lattice / mpi-operator jobs/s: {ratio:.2f}x")
    finally:
        await namespaces.delete()
        delete_node_pool(pool)
        selector.unlink(missing_ok=True)
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
