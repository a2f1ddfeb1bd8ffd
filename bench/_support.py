"""What the benches that drive the local control plane share; not a bench itself.

Used by ``bench_throughput``, ``bench_trainingjob_throughput`` and ``bench_scheduler_load`` (run
as ``python bench/<name>.py``: the script's folder is first on ``sys.path``, so
``import _support`` finds this file):

- paths (``REPO``, ``RUN`` = ``$LATTICE_CLUSTER_DIR`` or ``.cluster``), ``kubectl`` with the
  control plane's binaries and kubeconfig, free ports, percentiles, /proc usage of a process;
- CPU pinning with ``taskset``: the control plane's PIDs (``$RUN/*.pid``) on some cores, the
  operator under test on others, the control plane's affinities restored at the end;
- Prometheus text: the operator's ``/metrics`` (``scrape``), the apiserver's
  (``apiserver_metrics``, with the admin client certificate), and their samples
  (``metric_samples``, ``prometheus_client``'s parser);
- the bench's pieces of the cluster: a kwok node pool, its node-selector file, namespaces, the
  ``lattice run`` command, bare pods; a list+watch (``Watcher``, ``PodWatch``);
- the throughput measurement of ``bench_throughput`` and ``bench_trainingjob_throughput``
  (``ceiling``, ``mix_ceiling``, ``workload``, ``report``);
- the repository root on ``sys.path``, so that the benches share ``tests.support`` (builders,
  patches, fakes) with the unit tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import socket
import ssl
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from lattice.clock import RealClock
from lattice.controllers.generated import fill_generated
from lattice.frameworks.base import Children, Demand, JobPlugin, OperatorContext, messages_of
from lattice.kube.client import RestClient
from lattice.kube.errors import ApiError
from lattice.kube.resources import (
    BATCH_JOBS,
    CONFIGMAPS,
    EVENTS,
    NAMESPACES,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
)
from lattice.primitives.objects import Obj

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the benches share tests.support with the unit tests
    sys.path.insert(1, str(REPO))

RUN = Path(os.environ.get("LATTICE_CLUSTER_DIR", REPO / ".cluster"))
POOL_LABEL = "lattice.bench/pool"
JOB_LABEL = "training.kubeflow.org/job-name"
clock = RealClock()
JobFactory = Callable[[str], Obj]
Ready = Callable[[subprocess.Popen[bytes], Path], Awaitable[None]]


# --------------------------------------------------------------------------- small helpers


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def run_text(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True)


def start_process(
    cmd: list[str], log: IO[bytes], env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``cmd`` with stdout and stderr to ``log`` (and ``env``, else this process's)."""
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def is_file(path: str | Path) -> bool:
    return os.path.isfile(path)


def proc_status(pid: int | str = "self") -> dict[str, float]:
    """VmRSS, VmHWM, RssAnon (MiB) and CPU seconds (utime+stime) of a live process."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon"):
            out[key] = int(rest.split()[0]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out["cpu"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


# --------------------------------------------------------------------------- CPU pinning


def control_plane_pids() -> dict[str, int]:
    """The local control plane's live processes, by the stem of their ``$RUN/*.pid`` file."""
    out: dict[str, int] = {}
    for f in sorted(RUN.glob("*.pid")):
        with contextlib.suppress(ValueError, OSError):
            pid = int(f.read_text().strip())
            if Path(f"/proc/{pid}").exists():
                out[f.stem] = pid
    return out


def cpu_affinity(pid: int) -> str | None:
    """The taskset -c list of ``pid``, None when taskset cannot tell."""
    try:
        out = subprocess.run(
            ["taskset", "-p", "-c", str(pid)], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.rsplit(":", 1)[1].strip()


def set_affinity(pid: int, cpus: str) -> bool:
    """All threads of ``pid`` to ``cpus`` (a taskset -c list); whether taskset succeeded."""
    return (
        subprocess.run(
            ["taskset", "-a", "-p", "-c", cpus, str(pid)], capture_output=True, check=False
        ).returncode
        == 0
    )


class Pinning:
    """The control plane on ``control_plane`` cpus, the operator under test on ``operator`` cpus.

    ``pin`` moves every process of ``found`` (``control_plane_pids``, read at construction) to
    ``control_plane`` and records in ``pinned`` those it moved with their affinity before;
    ``restore`` puts them back. ``wrap`` runs a command under ``taskset -c operator``. A side
    given as None is not pinned. As a context manager: ``pin`` on entry, ``restore`` on exit.
    """

    def __init__(self, *, operator: str | None, control_plane: str | None) -> None:
        self.operator = operator
        self.control_plane = control_plane
        self.found = control_plane_pids()
        self.pinned: dict[str, tuple[int, str]] = {}

    def pin(self) -> None:
        if self.control_plane is None:
            return
        for name, pid in self.found.items():
            before = cpu_affinity(pid)
            if before is not None and set_affinity(pid, self.control_plane):
                self.pinned[name] = (pid, before)

    def restore(self) -> None:
        for name, (pid, before) in self.pinned.items():
            if not set_affinity(pid, before):
                print(f"could not restore the affinity of {name} ({pid}) to {before}")
        self.pinned.clear()

    def wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` run on the operator's cpus."""
        return cmd if self.operator is None else ["taskset", "-c", self.operator, *cmd]

    def __enter__(self) -> Pinning:
        self.pin()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()


# --------------------------------------------------------------------------- Prometheus metrics


def scrape(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return str(r.read().decode())


def metric_samples(text: str) -> Iterator[Sample]:
    """Every sample of a Prometheus text exposition."""
    for fam in text_string_to_metric_families(text):
        yield from fam.samples


def apiserver_metrics() -> str:
    """The local kube-apiserver's ``/metrics`` (admin client certificate)."""
    ctx = ssl.create_default_context(cafile=str(RUN / "pki/ca.crt"))
    ctx.load_cert_chain(str(RUN / "pki/admin.crt"), str(RUN / "pki/admin.key"))
    port = os.environ.get("LATTICE_API_PORT", "26443")
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx) as r:
        return str(r.read().decode())


def request_key(labels: dict[str, str]) -> str:
    """``VERB resource/subresource`` of an apiserver request metric."""
    return f"{labels['verb']} {labels.get('resource')}/{labels.get('subresource', '')}"


def apiserver_writes() -> dict[str, float]:
    """``apiserver_request_total`` of write verbs, by verb/resource/subresource."""
    out: dict[str, float] = {}
    for s in metric_samples(apiserver_metrics()):
        if s.name != "apiserver_request_total":
            continue
        if s.labels.get("verb") not in {"POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE"}:
            continue
        key = request_key(s.labels)
        out[key] = out.get(key, 0.0) + s.value
    return out


# --------------------------------------------------------------------------- cluster pieces


def create_node_pool(pool: str, *, nodes: int, gpus: int) -> None:
    """``nodes`` kwok nodes ``<pool>-<i>`` (``gpus`` GPUs, 250 pods each) labelled with the pool."""
    manifests = run_text(
        [
            sys.executable,
            str(REPO / "hack/controlplane/nodes.py"),
            "--count",
            str(nodes),
            "--gpus",
            str(gpus),
            "--pods",
            "250",
            "--prefix",
            pool,
            "--label",
            f"{POOL_LABEL}={pool}",
        ]
    ).stdout
    kubectl("apply", "-f", "-", stdin=manifests)


def delete_node_pool(pool: str) -> None:
    kubectl("delete", "node", "-l", f"{POOL_LABEL}={pool}", "--wait=false")


def write_selector(pool: str) -> Path:
    """The pool's node selector in a file, for ``lattice run --node-selector-path``."""
    path = RUN / f"bench-{pool}.selector"
    path.write_text(f"{POOL_LABEL}={pool}\n")
    return path


def lattice_cmd(
    ns: str,
    selector: Path,
    scheduling_unit: str,
    extra: list[str],
    *,
    metrics_port: int,
    probe_port: int,
) -> list[str]:
    """``lattice run`` on namespace ``ns`` and the pool's nodes (``selector``), with ``$RUN``'s
    kubeconfig, metrics and probes on localhost, then the ``extra`` arguments."""
    return [
        str(REPO / ".venv/bin/lattice"),
        "run",
        "--kubeconfig",
        str(RUN / "kubeconfig"),
        "--namespaces",
        ns,
        "--metrics-addr",
        f"127.0.0.1:{metrics_port}",
        "--probe-addr",
        f"127.0.0.1:{probe_port}",
        "--node-selector-path",
        str(selector),
        "--scheduling-unit",
        scheduling_unit,
        *extra,
    ]


def bare_pod(name: str, pool: str) -> Obj:
    """A one-container pod for the pool's nodes, owned by no operator."""
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {POOL_LABEL: pool},
            "containers": [{"name": "c", "image": "example.com/x:1"}],
        },
    }


@dataclass
class Namespaces:
    """The namespaces ``<prefix>-<pool>`` a bench creates; ``delete`` deletes them all."""

    client: RestClient
    pool: str
    names: list[str] = field(default_factory=list)

    async def new(self, prefix: str) -> str:
        name = f"{prefix}-{self.pool}"
        await self.client.create(NAMESPACES, {"metadata": {"name": name}})
        self.names.append(name)
        return name

    async def delete(self) -> None:
        for name in self.names:
            with contextlib.suppress(ApiError):
                await self.client.delete(NAMESPACES, name)


@dataclass
class Watcher:
    """List+watch of one resource in one namespace; ``on(type, obj)`` per object."""

    client: RestClient
    res: Resource
    ns: str
    on: Callable[[str, Obj], None]

    async def run(self) -> None:
        rv = ""
        while True:
            with contextlib.suppress(ApiError, asyncio.TimeoutError):
                if not rv:
                    token: str | None = None
                    while True:
                        listed = await self.client.list(
                            self.res, namespace=self.ns, limit=500, continue_token=token
                        )
                        for item in listed.get("items") or []:
                            self.on("ADDED", item)
                        token = listed["metadata"].get("continue") or None
                        rv = listed["metadata"]["resourceVersion"]
                        if not token:
                            break
                async for ev in self.client.watch(
                    self.res, namespace=self.ns, resource_version=rv, timeout_seconds=300
                ):
                    rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
                    if ev.type in ("ADDED", "MODIFIED", "DELETED"):
                        self.on(ev.type, ev.object)
                continue
            rv = ""
            await clock.sleep(0.5)


@dataclass
class PodWatch:
    """First-seen time of every pod carrying the job-name label in one namespace."""

    client: RestClient
    ns: str
    seen: dict[str, dict[str, float]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def _on(self, etype: str, pod: Obj) -> None:
        if etype != "ADDED":
            return
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if job:
            self.seen.setdefault(job, {}).setdefault(meta["name"], clock.monotonic())
            self.changed.set()

    async def run(self) -> None:
        await Watcher(self.client, PODS, self.ns, self._on).run()


# --------------------------------------------------------------------------- throughput


async def ceiling(client: RestClient, ns: str, *, n: int, concurrency: int, pool: str) -> float:
    """Pods/s of ``n`` bare pod creates, ``concurrency`` in flight."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await client.create(PODS, bare_pod(f"bare-{i:05d}", pool), namespace=ns)

    start = clock.monotonic()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (clock.monotonic() - start)


#: The resource of each field of a plugin's ``Children``.
MIX_RESOURCES = {
    "pods": PODS,
    "services": SERVICES,
    "config_maps": CONFIGMAPS,
    "secrets": SECRETS,
    "jobs": BATCH_JOBS,
}
#: ``reportingController`` of the operator's event recorder (``lattice.app``).
EVENT_CONTROLLER = "lattice.breezeml.ai/operator"


@dataclass(frozen=True)
class Mix:
    """What ``mix_ceiling`` wrote (totals over ``jobs``) and how long it took.

    ``pods_per_s`` counts each batch Job as the one pod kube-controller-manager creates for it
    (which the timing does not wait for)."""

    jobs: int
    pods: int
    services: int
    batch_jobs: int
    inputs: int
    status_patches: int
    events: int
    seconds: float

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds

    @property
    def pods_per_s(self) -> float:
        return (self.pods + self.batch_jobs) / self.seconds

    def describe(self) -> str:
        """The writes per job, for the bench's line."""
        n = self.jobs
        parts = [f"{self.pods / n:g} pods", f"{self.services / n:g} Services"]
        if self.batch_jobs:
            parts.append(f"{self.batch_jobs / n:g} batch Jobs")
        if self.inputs:
            parts.append(f"{self.inputs / n:g} ConfigMaps/Secrets")
        parts += [f"{self.status_patches / n:g} status PATCHes", f"{self.events / n:g} events"]
        return ", ".join(parts)


def mix_children(
    plugin: JobPlugin[Any], job: Any, size: int, ctx: OperatorContext
) -> list[list[tuple[Resource, Obj]]]:
    """The plugin's children of ``job`` at ``size`` with their resource, in the reconciler's
    rounds (``JobReconciler._active``): first what pods consume (ConfigMaps, Secrets, and the
    Services when there are batch Jobs), then the pods and batch Jobs (and the Services
    otherwise). Secrets get their generated material as the reconciler fills it in. Empty
    rounds are left out. Every child is desired at once: a launcher the reconciler holds back
    until the workers are ready (``observed_children``) goes with them, which only raises the
    ceiling."""
    kids: Children = plugin.children(job, size=size, ctx=ctx)
    early = ("config_maps", "secrets", *(("services",) if kids.jobs else ()))
    late = ("pods", "jobs", *(() if kids.jobs else ("services",)))
    rounds = []
    for fields in (early, late):
        made = [
            (MIX_RESOURCES[f], fill_generated(dict(m)) if f == "secrets" else dict(m))
            for f in fields
            for m in getattr(kids, f)
        ]
        if made:
            rounds.append(made)
    return rounds


def mix_status(
    plugin: JobPlugin[Any], job: Any, meta: Obj, demand: Demand, now: datetime
) -> Iterator[tuple[Sequence[str], Obj]]:
    """The status writes the operator makes for a job it starts at ``demand.max_size``, as
    (path, merge-patch fields), in order: the scheduler admits it (stage, size, times, decision),
    the reconciler marks it Created with its replica counts (no pod observed yet) and start
    time, then Running; each further write is the scheduler's attained-service bookkeeping."""
    from lattice.controllers.jobstatus import put_condition, replica_statuses
    from lattice.primitives.times import format_time
    from lattice.scheduler.core.events import Admitted

    kind, ns, name = plugin.resource.kind, meta["namespace"], meta["name"]
    words, size, t = messages_of(plugin), demand.max_size, format_time(now)
    admitted = Admitted(size=size, min_size=demand.min_size, max_size=demand.max_size)
    yield (
        plugin.scheduling_path,
        {
            "stage": "Running",
            "currentSize": size,
            "submitTime": t,
            "queuedTime": t,
            "requeueCount": 0,
            "attainedService": 0.0,
            "serviceUpdatedTime": t,
            "lastExecTime": t,
            "lastResizeTime": t,
            "lastDecision": admitted.message,
        },
    )
    block = put_condition(
        {},
        type="Created",
        status=True,
        reason=f"{kind}Created",
        message=words.created(ns, name),
        now=now,
    )
    progress = plugin.progress(job, size=size, pods=(), others={})
    yield plugin.exec_path, {**block, "replicaStatuses": replica_statuses(progress), "startTime": t}
    block = put_condition(
        block,
        type="Running",
        status=True,
        reason=f"{kind}Running",
        message=words.running(ns, name),
        now=now,
    )
    yield plugin.exec_path, {"conditions": block["conditions"]}
    for k in itertools.count(1):
        yield plugin.scheduling_path, {"attainedService": float(size * k), "serviceUpdatedTime": t}


def mix_events(
    plugin: JobPlugin[Any],
    meta: Obj,
    demand: Demand,
    children: list[tuple[Resource, Obj]],
    *,
    now: datetime,
    n: int,
) -> list[Obj]:
    """``n`` events about the job, shaped as the operator's recorder posts them
    (``lattice.runtime.events``): the scheduler's Queued and Admitted, then
    ``SuccessfulCreate<Kind>`` per child, from the start again when ``n`` asks for more."""
    from lattice.runtime.events import ObjectRef, event_body
    from lattice.scheduler.core.events import Admitted, Queued, SchedulerEvent

    scheduled: list[SchedulerEvent] = [
        Queued(),
        Admitted(size=demand.max_size, min_size=demand.min_size, max_size=demand.max_size),
    ]
    notes = [(e.type, e.reason, e.message) for e in scheduled]
    for child_res, child in children:
        kind, child_name = child_res.kind, child["metadata"]["name"]
        notes.append(("Normal", f"SuccessfulCreate{kind}", f"Created {kind.lower()}: {child_name}"))
    res = plugin.resource
    regarding = ObjectRef(res.api_version, res.kind, meta["namespace"], meta["name"], meta["uid"])
    stamp = int(now.timestamp() * 1e9)  # names as the recorder's: <name>.<unix nanos, hex>
    out = []
    for i, (type_, reason, note) in enumerate(itertools.islice(itertools.cycle(notes), n)):
        body = event_body(
            regarding,
            type=type_,
            reason=reason,
            note=note,
            action="Reconcile",
            at=now,
            controller=EVENT_CONTROLLER,
            instance="mix-ceiling",
        )
        body["metadata"]["name"] = f"{meta['name']}.{stamp + i:x}"
        out.append(body)
    return out


async def mix_ceiling(
    client: RestClient,
    ns: str,
    *,
    res: Resource,
    make: JobFactory,
    plugin: JobPlugin[Any],
    ctx: OperatorContext,
    jobs: int,
    concurrency: int,
    status_patches: int,
    events: int,
) -> Mix:
    """The operator's write mix for ``jobs`` jobs, from a bare client with no operator logic.

    Per job ``make(name)`` of ``res``, then, once created, its children as ``plugin.children``
    builds them at the job's max size (owned by the created object's uid), one concurrent round
    after the other as the reconciler makes them (``mix_children``), then ``status_patches``
    merge PATCHes of its status subresource, one after the other, each guarded by the
    resourceVersion the previous write returned (``mix_status``), then ``events`` events at
    once (``mix_events``). Every request waits on one semaphore of ``concurrency``; all jobs
    start at once; timed from the first request to the last response.
    """
    from lattice.scheduler.loop.snapshot import status_patch

    gate = asyncio.Semaphore(concurrency)

    async def gated(request: Awaitable[Obj]) -> Obj:
        async with gate:
            return await request

    async def one(i: int) -> Counter[Resource]:
        created = await gated(client.create(res, make(f"mix-{i:05d}"), namespace=ns))
        meta = created["metadata"]
        job = plugin.parse(created, ctx)
        demand = plugin.demand(job, ctx)
        rounds = mix_children(plugin, job, demand.max_size, ctx)
        for made in rounds:
            await asyncio.gather(*(gated(client.create(r, c, namespace=ns)) for r, c in made))
        children = [child for made in rounds for child in made]
        rv, now = meta["resourceVersion"], clock.now()
        steps = itertools.islice(mix_status(plugin, job, meta, demand, now), status_patches)
        for path, fields in steps:
            body = status_patch(path, fields, resource_version=rv)
            patched = await gated(
                client.patch(res, meta["name"], body, namespace=ns, subresource="status")
            )
            rv = patched["metadata"]["resourceVersion"]
        notes = mix_events(plugin, meta, demand, children, now=clock.now(), n=events)
        await asyncio.gather(*(gated(client.create(EVENTS, e, namespace=ns)) for e in notes))
        return Counter(r for r, _ in children)

    start = clock.monotonic()
    made = await asyncio.gather(*(one(i) for i in range(jobs)))
    seconds = clock.monotonic() - start
    total: Counter[Resource] = sum(made, Counter())
    return Mix(
        jobs=jobs,
        pods=total[PODS],
        services=total[SERVICES],
        batch_jobs=total[BATCH_JOBS],
        inputs=total[CONFIGMAPS] + total[SECRETS],
        status_patches=jobs * status_patches,
        events=jobs * events,
        seconds=seconds,
    )


#: Most jobs the mix ceiling makes by default (``--mix-jobs``): enough for a steady rate, few
#: enough to keep the step short.
MIX_JOBS = 300


def add_mix_args(
    ap: argparse.ArgumentParser, *, kind: str, status_patches: int, events: int
) -> None:
    """The mix ceiling's options; the defaults round what Lattice sent per job (RESULTS.md)."""
    ap.add_argument(
        "--mix-jobs",
        type=int,
        default=None,
        help=f"{kind}s of the mix ceiling (default: min(--jobs, {MIX_JOBS}))",
    )
    ap.add_argument(
        "--mix-status-patches",
        type=int,
        default=status_patches,
        help="status PATCHes per mix-ceiling job",
    )
    ap.add_argument("--mix-events", type=int, default=events, help="events per mix-ceiling job")
    ap.add_argument("--no-mix-ceiling", action="store_true")


def operator_context(scheduling_unit: str, selector: Path) -> OperatorContext:
    """The context ``lattice run`` builds from ``--scheduling-unit`` and
    ``--node-selector-path``."""
    from lattice.scheduler.loop.context import read_node_selector

    return OperatorContext(
        scheduling_unit=scheduling_unit, node_selector=read_node_selector(str(selector))
    )


def check_mix_args(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    if a.mix_jobs is not None and a.mix_jobs < 1:
        ap.error("--mix-jobs must be at least 1 (or use --no-mix-ceiling)")


async def measure_mix(
    client: RestClient,
    namespaces: Namespaces,
    a: argparse.Namespace,
    *,
    res: Resource,
    make: JobFactory,
    plugin: JobPlugin[Any],
    ctx: OperatorContext,
) -> Mix | None:
    """``mix_ceiling`` as the options of ``add_mix_args`` ask, in a fresh namespace no operator
    watches, printed; None with ``--no-mix-ceiling``."""
    if a.no_mix_ceiling:
        return None
    mix = await mix_ceiling(
        client,
        await namespaces.new("mix"),
        res=res,
        make=make,
        plugin=plugin,
        ctx=ctx,
        jobs=min(a.jobs, MIX_JOBS) if a.mix_jobs is None else a.mix_jobs,
        concurrency=a.concurrency,
        status_patches=a.mix_status_patches,
        events=a.mix_events,
    )
    print(
        f" mix ceiling: {mix.jobs_per_s:.2f} jobs/s = {mix.pods_per_s:.1f} pods/s "
        f"(same writes per job as lattice: {mix.describe()}; {a.concurrency} in flight; "
        f"{mix.jobs} jobs in {mix.seconds:.1f}s)"
    )
    return mix


async def event_reporters(client: RestClient, ns: str) -> Counter[str]:
    """Events in ``ns`` by ``reportingController``, each counted with its series (repeats)."""
    out: Counter[str] = Counter()
    with contextlib.suppress(ApiError):
        listed = await client.list(EVENTS, namespace=ns)
        for e in listed.get("items") or []:
            series = (e.get("series") or {}).get("count") or 1
            out[e.get("reportingController") or ""] += int(series)
    return out


async def workload(
    client: RestClient,
    *,
    label: str,
    cmd: list[str],
    ns: str,
    res: Resource,
    make: JobFactory,
    pods_per_job: int,
    jobs: int,
    concurrency: int,
    metrics_url: str | None,
    breakdown: Callable[[str], str],
    timeout: float,
    env: dict[str, str] | None = None,
    ready: Ready | None = None,
) -> dict[str, float]:
    """Start operator ``cmd`` (output in ``$RUN/log/bench-<label>.log``), create ``jobs`` objects
    ``make(name)`` of ``res`` in ``ns`` (``concurrency`` in flight) and measure until each has
    ``pods_per_job`` pods (seen by a ``PodWatch``) or ``timeout`` s after the first create.

    The clock starts 5 s after the operator started (time to sync its caches), or, with
    ``ready``, 2 s after ``ready(proc, log path)`` returned. Returns jobs done, create and
    all-pods seconds, jobs/s, pods/s, p50/p99 from a job's create to its last pod, apiserver
    writes per job (all clients; and without DELETEs), the operator's own writes per job and
    409s (its ``rest_client_requests_total`` at ``metrics_url``, printed with ``breakdown``),
    its peak RSS and CPU seconds. Also printed: the apiserver's writes by resource and the
    events in ``ns`` per job by reporting controller (``event_reporters``)."""
    log_path = RUN / "log" / f"bench-{label}.log"
    log = log_path.open("wb")
    proc = start_process(cmd, log, env)
    watch = PodWatch(client, ns)
    watcher = asyncio.create_task(watch.run())
    try:
        if ready is None:
            # give the controller time to sync its caches before the clock starts
            await clock.sleep(5.0)
            if proc.poll() is not None:
                raise SystemExit(f"{label} exited {proc.returncode}; see {log_path}")
        else:
            t_start = clock.monotonic()
            await ready(proc, log_path)
            print(f"  [{label}] ready {clock.monotonic() - t_start:.1f}s after start")
            await clock.sleep(2.0)
        before = apiserver_writes()
        created: dict[str, float] = {}
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            name = f"{label}-{i:05d}"
            async with gate:
                created[name] = clock.monotonic()
                await client.create(res, make(name), namespace=ns)

        t0 = clock.monotonic()
        await asyncio.gather(*(one(i) for i in range(jobs)))
        t_created = clock.monotonic() - t0
        want = pods_per_job
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
        alive = proc.poll() is None
        usage = proc_status(proc.pid) if alive else {}
        rss, cpu = usage.get("VmHWM", float("nan")), usage.get("cpu", float("nan"))
        if not alive:
            print(f"  [{label}] OPERATOR EXITED {proc.returncode}; see {log_path}")
        if len(complete) < jobs:
            print(f"  [{label}] only {len(complete)} of {jobs} jobs got all {want} pods")
        delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        own = conflicts = float("nan")
        if metrics_url:
            with contextlib.suppress(OSError):
                text = scrape(metrics_url)
                own = conflicts = 0.0
                for s in metric_samples(text):
                    if s.name != "rest_client_requests_total":
                        continue
                    if s.labels.get("method") in {"POST", "PUT", "PATCH", "DELETE"}:
                        own += s.value
                    if s.labels.get("code") == "409":
                        conflicts += s.value
                print(f"  [{label}] operator: {breakdown(text)}")
        top = sorted(delta.items(), key=lambda kv: -kv[1])[:14]
        print(
            f"  [{label}] apiserver writes by resource: "
            + ", ".join(f"{k}={v:.0f}" for k, v in top if v)
        )
        reporters = await event_reporters(client, ns)
        print(
            f"  [{label}] events in {ns} by reporting controller (per job): "
            + ", ".join(f"{k or '?'}={v / jobs:.2f}" for k, v in reporters.most_common())
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
            # The operators do not delete while creating; DELETEs in the window are other
            # clients' (the namespace controller emptying earlier runs' namespaces).
            "writes_no_delete_per_job": sum(v for k, v in delta.items() if k[:6] != "DELETE")
            / jobs,
            "own_writes_per_job": own / jobs,
            "conflicts": conflicts,
            "rss_mib": rss,
            "cpu_s": cpu,
        }
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        stop_process(proc)
        log.close()


def operator_breakdown(text: str) -> str:
    """Where the operator's time went: per queue, adds/retries and the mean wait in the queue and
    in reconcile; reconcile results; scheduler passes and their mean duration."""
    sums: dict[tuple[str, str], float] = {}
    for s in metric_samples(text):
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


def report(
    label: str, r: dict[str, float], ceiling_pods: float, mix_jobs: float | None = None
) -> None:
    """One operator's ``workload`` result; its pods/s as a share of the pod ceiling and, given
    ``mix_jobs`` (``mix_ceiling``'s jobs/s), its jobs/s as a share of that."""
    mix = "" if mix_jobs is None else f" = {r['jobs_per_s'] / mix_jobs:.0%} of mix ceiling"
    print(
        f"{label:>12}: {r['jobs_done']:.0f} jobs, all pods in {r['all_pods_s']:.1f}s "
        f"(creates took {r['create_s']:.1f}s), {r['jobs_per_s']:.1f} jobs/s{mix}, "
        f"{r['pods_per_s']:.1f} pods/s = {r['pods_per_s'] / ceiling_pods:.0%} of ceiling, "
        f"p50 {r['p50']:.2f}s p99 {r['p99']:.2f}s, apiserver writes/job {r['writes_per_job']:.1f}"
        f" (operator's own {r['own_writes_per_job']:.1f}), peak RSS {r['rss_mib']:.0f} MiB, "
        f"CPU {r['cpu_s']:.1f}s, operator 409s {r.get('conflicts', float('nan')):.0f}"
    )
