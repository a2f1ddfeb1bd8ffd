"""The load section: fill a GPU pool, then open-loop arrivals, watching jobs and pods.

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import random
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from typing import Any

from _support import (
    JOB_LABEL,
    RUN,
    Namespaces,
    Pinning,
    Watcher,
    bare_pod,
    clock,
    create_node_pool,
    delete_node_pool,
    free_port,
    lattice_cmd,
    pct,
    proc_status,
    scrape,
    start_process,
    stop_process,
    write_selector,
)

from lattice.kube.client import KubeClient, connect
from lattice.kube.errors import ApiError, NotFound
from lattice.kube.resources import NAMESPACES, PODS
from lattice.primitives.objects import Obj
from schedload.common import (
    CLASS_LABEL,
    GPU,
    METRICS_TIMEOUT,
    PRIORITIES,
    TRAININGJOBS,
    print_setup,
)
from schedload.report import (
    apiserver_latency,
    cpu_of,
    log_passes,
    parse_metrics,
    report,
    run_profile,
    summarize,
)
from tests.support.builders import trainingjob

__all__ = ["Shape", "World", "load_main", "shape", "write_chain"]


@dataclass(frozen=True)
class Shape:
    cls: str
    priority: int
    min_size: int
    max_size: int


def shape(i: int, *, seed: int, high: float, mid: float) -> Shape:
    """Job ``i`` of the mix: its priority class and elastic range (deterministic in ``seed``)."""
    rng = random.Random(seed * 1_000_003 + i)
    r = rng.random()
    cls = "high" if r < high else "mid" if r < high + mid else "low"
    lo = rng.choice((1, 2))
    return Shape(cls, PRIORITIES[cls], lo, lo * rng.choice((1, 2, 4)))


async def write_chain(client: KubeClient, ns: str, name: str, pool: str) -> None:
    """The writes that must follow one another before a job has pods, from a bare client: the
    job's create (a one-GPU-free TrainingJob in a namespace no operator watches), its admission
    (a merge patch of its status) and a pod's create. Under load this is the floor of the
    create-to-pods latency for any operator (which also waits on watches and its own queues)."""
    body = trainingjob(name, min_size=1, max_size=1, priority=0, gpus=0)
    await client.create(TRAININGJOBS, body, namespace=ns)
    status = {"status": {"stage": "Running", "currentSize": 1}}
    await client.patch(TRAININGJOBS, name, status, namespace=ns, subresource="status")
    await client.create(PODS, bare_pod(f"{name}-worker-0", pool), namespace=ns)


@dataclass
class World:
    """What the bench sees: pods' first-seen times, live pods, jobs' first grant and stage, and
    how long a job the scheduler shrank (or preempted) keeps its extra pods."""

    pod_first: dict[str, float] = field(default_factory=dict)
    pod_bound: dict[str, float] = field(default_factory=dict)  # first seen with a nodeName
    live: dict[str, str] = field(default_factory=dict)  # pod name -> job
    grant: dict[str, tuple[float, int]] = field(default_factory=dict)
    stage: dict[str, str] = field(default_factory=dict)
    cls: dict[str, str] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=dict)
    #: job -> pods not terminating / pods still in the API (terminating included)
    running_pods: dict[str, set[str]] = field(default_factory=dict)
    existing_pods: dict[str, set[str]] = field(default_factory=dict)
    #: job -> (when the bench saw its currentSize drop, the new size), until its pods follow
    shrunk: dict[str, tuple[float, int]] = field(default_factory=dict)
    gone: dict[str, tuple[float, int]] = field(default_factory=dict)
    to_terminating: list[float] = field(default_factory=list)  # shrink -> deletions issued
    to_deleted: list[float] = field(default_factory=list)  # shrink -> pods removed from the API

    def _follow(self, job: str) -> None:
        now = clock.monotonic()
        pending = self.shrunk.get(job)
        if pending is not None and len(self.running_pods.get(job, ())) <= pending[1]:
            self.to_terminating.append(now - pending[0])
            del self.shrunk[job]
            self.gone[job] = pending
        pending = self.gone.get(job)
        if pending is not None and len(self.existing_pods.get(job, ())) <= pending[1]:
            self.to_deleted.append(now - pending[0])
            del self.gone[job]

    def on_pod(self, etype: str, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        name = meta.get("name", "")
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if not job:
            return
        if etype == "DELETED" or meta.get("deletionTimestamp"):
            self.live.pop(name, None)
            self.running_pods.get(job, set()).discard(name)
            if etype == "DELETED":
                self.existing_pods.get(job, set()).discard(name)
                self._follow(job)
                return
        else:
            self.live[name] = job
            self.running_pods.setdefault(job, set()).add(name)
        self.existing_pods.setdefault(job, set()).add(name)
        self._follow(job)
        self.pod_first.setdefault(name, clock.monotonic())
        if (pod.get("spec") or {}).get("nodeName"):
            self.pod_bound.setdefault(name, clock.monotonic())

    def on_job(self, etype: str, job: Obj) -> None:
        meta = job.get("metadata") or {}
        name = meta.get("name", "")
        status = job.get("status") or {}
        if etype == "DELETED":
            return
        self.stage[name] = str(status.get("stage") or "")
        self.cls.setdefault(name, (meta.get("labels") or {}).get(CLASS_LABEL, "?"))
        size = int(status.get("currentSize") or 0)
        if size > 0 and name not in self.grant:
            self.grant[name] = (clock.monotonic(), size)
        if size < self.size.get(name, 0) and name not in self.shrunk:
            self.gone.pop(name, None)
            self.shrunk[name] = (clock.monotonic(), size)
            self._follow(name)
        self.size[name] = size


async def load_main(a: argparse.Namespace) -> None:
    ncpu = os.cpu_count() or 1
    taskset = shutil.which("taskset")
    pin_op = bool(taskset) and ncpu >= 2 and not a.no_pin
    op_cpu = str(ncpu - 1)
    other_cpus = f"0-{ncpu - 2}" if ncpu > 2 else "0"
    pins = Pinning(
        operator=op_cpu if pin_op else None,
        control_plane=other_cpus if pin_op and not a.no_pin_control_plane else None,
    )
    cp, pinned = pins.found, pins.pinned
    kubeconfig = str(RUN / "kubeconfig")
    client = await connect(kubeconfig=kubeconfig, qps=0)
    pool = f"s{uuid.uuid4().hex[:6]}"
    capacity = a.nodes * a.gpus
    selector = write_selector(pool)
    namespaces = Namespaces(client, pool)
    tasks: list[asyncio.Task[Any]] = []
    proc: subprocess.Popen[bytes] | None = None
    log_path = RUN / "log" / f"bench-schedload-{pool}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("wb")

    try:
        if pins.control_plane is not None:
            pins.pin()
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, {int(c) for c in range(ncpu - 1)})
        setup = f"operator pinned: {'taskset -c ' + op_cpu if pin_op else 'no'}" + (
            f"; control plane ({', '.join(f'{k}={v[0]}' for k, v in pinned.items())}) and this "
            f"bench pinned to cpus {other_cpus} (affinity before: "
            f"{sorted({v[1] for v in pinned.values()})}, restored at the end)"
            if pinned
            else "; control plane NOT pinned"
            + (f" (PIDs found: {cp})" if cp else " (no PIDs found in .cluster/)")
        )
        print_setup(setup)
        print(
            f"pool {pool}: {a.nodes} kwok nodes x {a.gpus} GPUs = {capacity} GPUs; fill "
            f"{a.fill_jobs} jobs [{a.fill_min},{a.fill_max}] prio 0; load {a.jobs} jobs at "
            f"{a.rate}/s, high {a.high_frac:.0%} (1000) / mid {a.mid_frac:.0%} (100) / low (0), "
            f"minSize 1|2, maxSize 1x|2x|4x, 1 GPU per pod; seed {a.seed}"
        )
        create_node_pool(pool, nodes=a.nodes, gpus=a.gpus)
        base_ns = await namespaces.new("base")
        idle: list[float] = []
        for i in range(a.baseline_pods):
            t = clock.monotonic()
            await client.create(PODS, bare_pod(f"idle-{i:05d}", pool), namespace=base_ns)
            idle.append(clock.monotonic() - t)
        print(
            f"baseline: single-pod create latency, idle, {len(idle)} sequential: "
            f"p50 {pct(idle, 0.5) * 1000:.1f} ms, p99 {pct(idle, 0.99) * 1000:.1f} ms"
        )
        ns = await namespaces.new("load")
        mport, pport = free_port(), free_port()
        cmd = pins.wrap(
            lattice_cmd(ns, selector, GPU, a.operator_arg, metrics_port=mport, probe_port=pport)
        )
        print(f"operator: {' '.join(cmd)}")
        proc = start_process(cmd, log)
        metrics_url = f"http://127.0.0.1:{mport}/metrics"
        world = World()
        tasks.append(asyncio.create_task(Watcher(client, PODS, ns, world.on_pod).run()))
        tasks.append(asyncio.create_task(Watcher(client, TRAININGJOBS, ns, world.on_job).run()))
        deadline = clock.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"operator exited {proc.returncode}; see {log_path}")
            with contextlib.suppress(OSError):
                if scrape(f"http://127.0.0.1:{pport}/readyz", METRICS_TIMEOUT) is not None:
                    break
            if clock.monotonic() > deadline:
                raise SystemExit("operator not ready after 60 s")
            await clock.sleep(0.5)

        # ---- fill
        gate = asyncio.Semaphore(a.concurrency)
        shapes: dict[str, Shape] = {}

        async def create_job(name: str, sh: Shape, created: dict[str, float] | None) -> None:
            body = trainingjob(
                name,
                min_size=sh.min_size,
                max_size=sh.max_size,
                priority=sh.priority,
                labels={CLASS_LABEL: sh.cls},
            )
            async with gate:
                t = clock.monotonic()
                try:
                    await client.create(TRAININGJOBS, body, namespace=ns)
                except ApiError as exc:
                    print(f"  create {name} failed: {exc}")
                    return
                if created is not None:
                    created[name] = t

        t_fill = clock.monotonic()
        fill = Shape("fill", 0, a.fill_min, a.fill_max)
        for i in range(a.fill_jobs):
            shapes[f"fill-{i:04d}"] = fill
        await asyncio.gather(*(create_job(n, s, None) for n, s in shapes.items()))
        stable_since: float | None = None
        m: dict[str, Any] = {}
        while clock.monotonic() - t_fill < a.fill_timeout:
            await clock.sleep(1.0)
            m = parse_metrics(await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT))
            used, total = m["capacity"].get("used", 0), m["capacity"].get("total", 0)
            full = total == capacity and used == total and len(world.live) >= used
            stable_since = (stable_since or clock.monotonic()) if full else None
            if stable_since is not None and clock.monotonic() - stable_since >= 3:
                break
        used, total = m.get("capacity", {}).get("used", 0), m.get("capacity", {}).get("total", 0)
        print(
            f"fill: {used:.0f}/{total:.0f} GPUs used, {len(world.live)} live pods, "
            f"after {clock.monotonic() - t_fill:.1f}s"
            + ("" if used == total == capacity else "  ** NOT FULL (fill timeout) **")
        )

        # ---- load
        created: dict[str, float] = {}
        probe: list[float] = []
        chain: list[float] = []
        samples: list[tuple[float, dict[str, Any], dict[str, float]]] = []
        stop_sampling = asyncio.Event()

        async def sampler() -> None:
            while not stop_sampling.is_set():
                with contextlib.suppress(OSError):
                    text = await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT)
                    if proc is not None and proc.poll() is None:
                        samples.append(
                            (clock.monotonic(), parse_metrics(text), proc_status(proc.pid))
                        )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop_sampling.wait(), a.sample)

        async def prober() -> None:
            i = 0
            while not stop_sampling.is_set():
                t = clock.monotonic()
                with contextlib.suppress(ApiError):
                    await client.create(PODS, bare_pod(f"probe-{i:05d}", pool), namespace=base_ns)
                    probe.append(clock.monotonic() - t)
                t = clock.monotonic()
                with contextlib.suppress(ApiError):
                    await write_chain(client, base_ns, f"chain-{i:05d}", pool)
                    chain.append(clock.monotonic() - t)
                i += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop_sampling.wait(), a.probe_interval)

        m0 = parse_metrics(await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT))
        u0 = proc_status(proc.pid)
        cp0 = cpu_of({**cp, "bench": os.getpid()})
        api0 = await asyncio.to_thread(apiserver_latency)
        off0 = log_path.stat().st_size
        t0 = clock.monotonic()
        tasks.append(asyncio.create_task(sampler()))
        tasks.append(asyncio.create_task(prober()))
        profile: asyncio.Task[str] | None = None
        if a.profile_seconds > 0:
            profile = asyncio.create_task(
                run_profile(a, proc.pid, log_path.with_suffix(".pyspy.txt"))
            )
        load_shapes = {
            f"job-{i:05d}": shape(i, seed=a.seed, high=a.high_frac, mid=a.mid_frac)
            for i in range(a.jobs)
        }
        shapes.update(load_shapes)
        creates: list[asyncio.Task[None]] = []
        behind = 0.0
        for i, (name, sh) in enumerate(load_shapes.items()):
            delay = t0 + i / a.rate - clock.monotonic()
            if delay > 0:
                await clock.sleep(delay)
            else:
                behind = max(behind, -delay)
            creates.append(asyncio.create_task(create_job(name, sh, created)))
            if proc.poll() is not None:
                break
        await asyncio.gather(*creates)
        t_arrived = clock.monotonic()
        m_arrived = parse_metrics(await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT))
        print(
            f"load: {len(created)} jobs created in {t_arrived - t0:.1f}s "
            f"({len(created) / (t_arrived - t0):.1f}/s; at most {behind:.1f}s behind schedule)"
        )
        high = [n for n in created if load_shapes[n].cls == "high"]
        settle_end = t_arrived + a.settle
        while clock.monotonic() < settle_end and proc.poll() is None:
            done = summarize(world, created, shapes, "high")
            if len(done["all"]) >= len(high):
                break
            await clock.sleep(1.0)
        t1 = clock.monotonic()
        stop_sampling.set()
        m1 = parse_metrics(await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT))
        u1 = proc_status(proc.pid)
        cp1 = cpu_of({**cp, "bench": os.getpid()})
        api1 = await asyncio.to_thread(apiserver_latency)
        off1 = log_path.stat().st_size
        if profile is not None:
            try:
                print(await asyncio.wait_for(profile, a.profile_seconds + 60))
            except TimeoutError:
                print("py-spy: did not finish")

        # ---- report
        report(
            a,
            world=world,
            created=created,
            shapes=shapes,
            idle=idle,
            probe=probe,
            chain=chain,
            m0=m0,
            m_arrived=m_arrived,
            m1=m1,
            u0=u0,
            u1=u1,
            t0=t0,
            t_arrived=t_arrived,
            t1=t1,
            passes_log=log_passes(log_path, off0, off1),
            samples=samples,
            others={k: v - cp0.get(k, 0.0) for k, v in cp1.items()},
            api={
                k: (c - api0.get(k, (0.0, 0.0))[0], t - api0.get(k, (0.0, 0.0))[1])
                for k, (c, t) in api1.items()
            },
        )
        stages: collections.Counter[tuple[str, str]] = collections.Counter()
        token: str | None = None
        while True:
            listed = await client.list(TRAININGJOBS, namespace=ns, limit=500, continue_token=token)
            for job in listed.get("items") or []:
                c = (job["metadata"].get("labels") or {}).get(CLASS_LABEL, "?")
                stages[c, str((job.get("status") or {}).get("stage") or "New")] += 1
            token = listed["metadata"].get("continue") or None
            if not token:
                break
        print("jobs by class and stage at the end (LIST):")
        for c in ("high", "mid", "low", "fill"):
            row = {s: n for (k, s), n in sorted(stages.items()) if k == c}
            print(f"  {c:>5}: {row}")
        print(f"operator log: {log_path}")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if proc is not None:
            stop_process(proc)
        log.close()
        await namespaces.delete()
        t = clock.monotonic()
        for name in namespaces.names:
            while clock.monotonic() - t < a.cleanup_timeout:
                try:
                    await client.get(NAMESPACES, name)
                except NotFound:
                    break
                except ApiError:
                    pass
                await clock.sleep(2.0)
            else:
                # Pods whose node is deleted stay Terminating forever (no podgc here): force them.
                left = await client.list(PODS, namespace=name)
                for pod in left.get("items") or []:
                    with contextlib.suppress(ApiError):
                        await client.delete(
                            PODS, pod["metadata"]["name"], namespace=name, grace_period_seconds=0
                        )
                print(
                    f"namespace {name} still terminating after {a.cleanup_timeout:.0f}s; "
                    f"force-deleted {len(left.get('items') or [])} pods"
                )
        print(f"cleanup: namespaces deleted in {clock.monotonic() - t:.0f}s")
        with contextlib.suppress(subprocess.CalledProcessError):
            delete_node_pool(pool)
        selector.unlink(missing_ok=True)
        pins.restore()
        await client.close()
