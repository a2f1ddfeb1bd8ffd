"""MPIJob throughput on the real local control plane, against a bare-client ceiling and a peer.

Needs a running control plane (``make cluster-up``) with the CRDs applied. It prints numbers; it is
never a test. Steps, all in the same run:

1. **ceiling**: a bare asyncio client (``lattice.kube.client.connect``) creates ``--ceiling-pods``
   pods (``--concurrency`` in flight) on the same apiserver: pods/s.
2. **lattice**: ``lattice run`` (default workers and QPS) on a fresh namespace, ``--nodes`` kwok
   nodes; ``--jobs`` MPIJobs x ``--workers`` workers created by the bench (``--concurrency`` in
   flight). Reported: time from the first create to all pods seen (workers + launcher pod, via a
   watch), jobs/s, pods/s, p50/p99 latency from a job's create to all of its pods, API writes
   per job (delta of kube-apiserver's ``apiserver_request_total`` for POST/PUT/PATCH/DELETE, all
   clients, and the operator's own ``rest_client_requests_total``), operator peak RSS (VmHWM)
   and CPU seconds (utime+stime) from /proc. Ratios against the ceiling.
3. **peer**: kubeflow/mpi-operator built with ``go`` into ``~/.cache/lattice/bin/mpi-operator-<v>``
   (``--peer-bin``; skipped if missing), same workload on another namespace, same numbers.

Usage: ``python bench/bench_throughput.py [--jobs 200] [--workers 4] [--nodes 100]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import sys
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from lattice.clock import RealClock
from lattice.kube.client import RestClient, connect
from lattice.kube.errors import ApiError
from lattice.kube.resources import NAMESPACES, PODS, Resource

REPO = Path(__file__).resolve().parents[1]
RUN = Path(os.environ.get("LATTICE_CLUSTER_DIR", REPO / ".cluster"))
POOL_LABEL = "lattice.bench/pool"
JOB_LABEL = "training.kubeflow.org/job-name"
PEER_VERSION = "v0.6.0"
clock = RealClock()
MPIJOB = Resource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def kubectl(*args: str, stdin: str | None = None) -> str:
    paths = subprocess.run(
        [str(REPO / "hack/controlplane/build.sh"), "paths"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    env = dict(os.environ, KUBECONFIG=str(RUN / "kubeconfig"))
    env["PATH"] = os.pathsep.join([*paths, env.get("PATH", "")])
    return subprocess.run(
        ["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, check=True
    ).stdout


def apiserver_writes() -> dict[str, float]:
    """``apiserver_request_total`` of write verbs, by verb/resource/subresource."""
    ctx = ssl.create_default_context(cafile=str(RUN / "pki/ca.crt"))
    ctx.load_cert_chain(str(RUN / "pki/admin.crt"), str(RUN / "pki/admin.key"))
    port = os.environ.get("LATTICE_API_PORT", "26443")
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name != "apiserver_request_total":
                continue
            if s.labels.get("verb") not in {"POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE"}:
                continue
            key = f"{s.labels['verb']} {s.labels.get('resource')}/{s.labels.get('subresource', '')}"
            out[key] = out.get(key, 0.0) + s.value
    return out


def proc_usage(pid: int) -> tuple[float, float]:
    """(peak RSS MiB, CPU seconds) of a live process."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            rss = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / ticks


def control_plane_pids() -> list[int]:
    """PIDs of the local control plane's processes (``$RUN/*.pid``) that are alive."""
    pids = []
    for path in sorted(RUN.glob("*.pid")):
        text = path.read_text().strip()
        if text.isdigit() and Path(f"/proc/{text}").exists():
            pids.append(int(text))
    return pids


def set_affinity(pids: list[int], cpus: str) -> None:
    """Pin every thread of ``pids`` to ``cpus`` (a taskset list such as ``0`` or ``0-1``)."""
    for pid in pids:
        argv = ["taskset", "-a", "-p", "-c", cpus, str(pid)]
        subprocess.run(argv, check=True, capture_output=True)


class Pinning:
    """On >= 2 cores with taskset: the control plane on core 0, the operators on core 1."""

    def __init__(self, mode: str) -> None:
        cores = os.cpu_count() or 1
        self.active = mode == "on" or (
            mode == "auto" and cores >= 2 and shutil.which("taskset") is not None
        )
        self._all = f"0-{cores - 1}"
        self._pids = control_plane_pids() if self.active else []

    def __enter__(self) -> Pinning:
        set_affinity(self._pids, "0")
        return self

    def __exit__(self, *exc: object) -> None:
        set_affinity(self._pids, self._all)

    def wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` run on the operators' core."""
        return ["taskset", "-c", "1", *cmd] if self.active else cmd

    def describe(self) -> str:
        if not self.active:
            return "not pinned"
        return (
            f"control plane ({len(self._pids)} processes: etcd, kube-apiserver, controller-manager,"
            " scheduler, kwok) pinned to core 0; operator under test pinned to core 1; the bench"
            " client (creates and the pod watch) unpinned"
        )


def start_process(cmd: list[str], log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.read().decode())


def run_text(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True)


def is_file(path: Path) -> bool:
    return path.is_file()


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


@dataclass
class PodWatch:
    """First-seen time of every pod carrying the job-name label in one namespace."""

    client: RestClient
    ns: str
    seen: dict[str, dict[str, float]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def _add(self, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if job:
            self.seen.setdefault(job, {}).setdefault(meta["name"], clock.monotonic())
            self.changed.set()

    async def run(self) -> None:
        rv = ""
        while True:
            with contextlib.suppress(ApiError, asyncio.TimeoutError):
                if not rv:
                    listed = await self.client.list(PODS, namespace=self.ns)
                    for pod in listed.get("items") or []:
                        self._add(pod)
                    rv = listed["metadata"]["resourceVersion"]
                async for ev in self.client.watch(
                    PODS, namespace=self.ns, resource_version=rv, timeout_seconds=300
                ):
                    rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
                    if ev.type == "ADDED":
                        self._add(ev.object)
                continue
            rv = ""


async def ceiling(client: RestClient, ns: str, *, n: int, concurrency: int, pool: str) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        body = {
            "metadata": {"name": f"bare-{i:05d}"},
            "spec": {
                "nodeSelector": {POOL_LABEL: pool},
                "containers": [{"name": "c", "image": "example.com/x:1"}],
            },
        }
        async with gate:
            await client.create(PODS, body, namespace=ns)

    start = clock.monotonic()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (clock.monotonic() - start)


async def workload(
    client: RestClient,
    *,
    label: str,
    cmd: list[str],
    ns: str,
    jobs: int,
    workers: int,
    concurrency: int,
    pool: str,
    metrics_url: str | None,
    timeout: float,
) -> dict[str, float]:
    log = (RUN / "log" / f"bench-{label}.log").open("wb")
    proc = start_process(cmd, log)
    watch = PodWatch(client, ns)
    watcher = asyncio.create_task(watch.run())
    try:
        # give the controller time to sync its caches before the clock starts
        await clock.sleep(5.0)
        if proc.poll() is not None:
            raise SystemExit(f"{label} exited {proc.returncode}; see {log.name}")
        before = apiserver_writes()
        created: dict[str, float] = {}
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            name = f"{label}-{i:05d}"
            async with gate:
                created[name] = clock.monotonic()
                await client.create(MPIJOB, mpijob(name, workers, pool), namespace=ns)

        t0 = clock.monotonic()
        await asyncio.gather(*(one(i) for i in range(jobs)))
        t_created = clock.monotonic() - t0
        want = workers + 1
        deadline = t0 + timeout
        while sum(1 for p in watch.seen.values() if len(p) >= want) < jobs:
            if clock.monotonic() > deadline or proc.poll() is not None:
                break
            watch.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch.changed.wait(), 1.0)
        complete = {j: max(p.values()) for j, p in watch.seen.items() if len(p) >= want}
        t_all = max(complete.values(), default=clock.monotonic()) - t0
        lat = [complete[j] - created[j] for j in complete if j in created]
        after = apiserver_writes()
        rss, cpu = proc_usage(proc.pid) if proc.poll() is None else (float("nan"),) * 2
        delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        own = conflicts = float("nan")
        if metrics_url:
            with contextlib.suppress(OSError):
                text = scrape(metrics_url)
                own = conflicts = 0.0
                for fam in text_string_to_metric_families(text):
                    for s in fam.samples:
                        if s.name != "rest_client_requests_total":
                            continue
                        if s.labels.get("method") in {"POST", "PUT", "PATCH", "DELETE"}:
                            own += s.value
                        if s.labels.get("code") == "409":
                            conflicts += s.value
                print(f"  [{label}] operator: {operator_breakdown(text)}")
        top = sorted(delta.items(), key=lambda kv: -kv[1])[:8]
        print(
            f"  [{label}] apiserver writes by resource: "
            + ", ".join(f"{k}={v:.0f}" for k, v in top if v)
        )
        return {
            "jobs_done": float(len(complete)),
            "create_s": t_created,
            "all_pods_s": t_all,
            "jobs_per_s": len(complete) / t_all if t_all > 0 else 0.0,
            "pods_per_s": len(complete) * want / t_all if t_all > 0 else 0.0,
            "p50": pct(lat, 0.5),
            "p99": pct(lat, 0.99),
            "writes_per_job": sum(delta.values()) / jobs,
            "own_writes_per_job": own / jobs,
            "conflicts": conflicts,
            "rss_mib": rss,
            "cpu_s": cpu,
        }
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def operator_breakdown(text: str) -> str:
    """Where the operator's time went: per queue, adds/retries and the mean wait in the queue and
    in reconcile; reconcile results; scheduler passes and their mean duration."""
    sums: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name = s.labels.get("name") or s.labels.get("controller") or ""
            tag = s.labels.get("result", "")
            key = (s.name, f"{name}/{tag}" if tag else name)
            sums[key] = sums.get(key, 0.0) + s.value
    parts = []
    for q in ("mpijob", "trainingjob"):
        adds = sums.get(("workqueue_adds_total", q), 0.0)
        if not adds:
            continue
        wait = sums.get(("workqueue_queue_duration_seconds_sum", q), 0.0)
        work = sums.get(("workqueue_work_duration_seconds_sum", q), 0.0)
        results = {
            k[1].split("/", 1)[1]: v
            for k, v in sums.items()
            if k[0] == "controller_runtime_reconcile_total" and k[1].startswith(f"{q}/") and v
        }
        parts.append(
            f"{q}: adds {adds:.0f}, retries {sums.get(('workqueue_retries_total', q), 0):.0f}, "
            f"mean queue wait {wait / adds:.3f}s, reconcile time {work:.1f}s total, {results}"
        )
    n = sums.get(("lattice_scheduler_pass_duration_seconds_count", ""), 0.0)
    t = sums.get(("lattice_scheduler_pass_duration_seconds_sum", ""), 0.0)
    if n:
        parts.append(f"scheduler: {n:.0f} passes, {t:.1f}s total, mean {t / n:.3f}s")
    return "; ".join(parts)


def report(label: str, r: dict[str, float], ceiling_pods: float) -> None:
    print(
        f"{label:>12}: {r['jobs_done']:.0f} jobs, all pods in {r['all_pods_s']:.1f}s "
        f"(creates took {r['create_s']:.1f}s), {r['jobs_per_s']:.1f} jobs/s, "
        f"{r['pods_per_s']:.1f} pods/s = {r['pods_per_s'] / ceiling_pods:.0%} of ceiling, "
        f"p50 {r['p50']:.2f}s p99 {r['p99']:.2f}s, apiserver writes/job {r['writes_per_job']:.1f}"
        f" (operator's own {r['own_writes_per_job']:.1f}), peak RSS {r['rss_mib']:.0f} MiB, "
        f"CPU {r['cpu_s']:.1f}s, operator 409s {r.get('conflicts', float('nan')):.0f}"
    )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--ceiling-pods", type=int, default=1000)
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
    pinning = Pinning(a.pin)
    with pinning:
        await run(a, pinning)


async def run(a: argparse.Namespace, pinning: Pinning) -> None:

    kubeconfig = str(RUN / "kubeconfig")
    client = await connect(kubeconfig=kubeconfig)
    pool = f"b{uuid.uuid4().hex[:6]}"
    nodes = run_text(
        [
            sys.executable,
            str(REPO / "hack/controlplane/nodes.py"),
            "--count",
            str(a.nodes),
            "--gpus",
            "8",
            "--pods",
            "250",
            "--prefix",
            pool,
            "--label",
            f"{POOL_LABEL}={pool}",
        ]
    ).stdout
    kubectl("apply", "-f", "-", stdin=nodes)
    selector = RUN / f"bench-{pool}.selector"
    selector.write_text(f"{POOL_LABEL}={pool}\n")
    namespaces: list[str] = []

    async def new_ns(prefix: str) -> str:
        name = f"{prefix}-{pool}"
        await client.create(NAMESPACES, {"metadata": {"name": name}})
        namespaces.append(name)
        return name

    print(f"nproc={os.cpu_count()} jobs={a.jobs} workers={a.workers} nodes={a.nodes} pool={pool}")
    print(f"setup: {pinning.describe()}")
    try:
        ns = await new_ns("bare")
        ceil = await ceiling(client, ns, n=a.ceiling_pods, concurrency=a.concurrency, pool=pool)
        print(f"     ceiling: {ceil:.1f} pods/s (bare RestClient, {a.concurrency} in flight)")
        results: dict[str, dict[str, float]] = {}
        ns = await new_ns("lattice")
        mport, pport = free_port(), free_port()
        lattice_cmd = [
            str(REPO / ".venv/bin/lattice"),
            "run",
            "--kubeconfig",
            kubeconfig,
            "--namespaces",
            ns,
            "--metrics-addr",
            f"127.0.0.1:{mport}",
            "--probe-addr",
            f"127.0.0.1:{pport}",
            "--node-selector-path",
            str(selector),
            "--scheduling-unit",
            a.scheduling_unit,
            *a.operator_arg,
        ]
        results["lattice"] = await workload(
            client,
            label="lattice",
            cmd=pinning.wrap(lattice_cmd),
            ns=ns,
            jobs=a.jobs,
            workers=a.workers,
            concurrency=a.concurrency,
            pool=pool,
            metrics_url=f"http://127.0.0.1:{mport}/metrics",
            timeout=a.timeout,
        )
        report("lattice", results["lattice"], ceil)
        peer = Path(a.peer_bin)
        if a.no_peer:
            print("mpi-operator: skipped (--no-peer)")
        elif not is_file(peer):
            print(f"mpi-operator: skipped, no binary at {peer} (see bench/RESULTS.md)")
        else:
            ns = await new_ns("mpiop")
            mon = free_port()
            peer_cmd = [
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
            results["mpi-operator"] = await workload(
                client,
                label="mpiop",
                cmd=pinning.wrap(peer_cmd),
                ns=ns,
                jobs=a.jobs,
                workers=a.workers,
                concurrency=a.concurrency,
                pool=pool,
                metrics_url=f"http://127.0.0.1:{mon}/metrics",
                timeout=a.timeout,
            )
            report("mpi-operator", results["mpi-operator"], ceil)
            ratio = results["lattice"]["jobs_per_s"] / max(
                results["mpi-operator"]["jobs_per_s"], 1e-9
            )
            print(f"lattice / mpi-operator jobs/s: {ratio:.2f}x")
    finally:
        for name in namespaces:
            with contextlib.suppress(ApiError):
                await client.delete(NAMESPACES, name)
        kubectl("delete", "node", "-l", f"{POOL_LABEL}={pool}", "--wait=false")
        selector.unlink(missing_ok=True)
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
