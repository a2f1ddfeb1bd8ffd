"""TrainingJob throughput on the real local control plane, against two bare-client ceilings and
Kubeflow training-operator's PyTorchJob (issue 9).

Needs a running control plane (``make cluster-up``) with Lattice's CRDs applied. It prints
numbers; it is never a test. Steps, all in the same run, on a fresh pool of ``--nodes`` kwok nodes
(32 CPUs, 250 pods each, so capacity is ample) and fresh namespaces, all deleted at the end:

1. **ceiling**: a bare asyncio client creates ``--ceiling-pods`` pods (``--concurrency`` in
   flight): pods/s (``_support.ceiling``, as in ``bench_throughput``).
2. **mix ceiling** (unless ``--no-mix-ceiling``): the same client, in a namespace no operator
   watches, makes Lattice's writes for ``--mix-jobs`` TrainingJobs (default ``min(--jobs, 300)``:
   enough for a steady rate, few enough to keep this step short), all started at once and every
   request under one ``--concurrency`` bound: the job, then its pods and headless Services in one
   round as the real ``TrainingJobPlugin.children`` builds them (owned by the created job), then
   ``--mix-status-patches`` status merge PATCHes, then ``--mix-events`` events
   (``_support.mix_ceiling``; the defaults, 2 and 5, round what Lattice sent per job in
   ``bench/RESULTS.md``: 2.1 and 5.1-5.3). Jobs/s and pods/s from the first request to the last
   response: about the most an operator making these writes could reach here.
3. **lattice**: ``lattice run`` (default workers and QPS, ``--scheduling-unit cpu``,
   ``--namespaces <ns>``, the pool's node selector from a file) and ``--jobs`` TrainingJobs
   (``breezeml.ai/v1``) of fixed size ``minSize = maxSize = --workers``.
4. **peer**: training-operator (``--peer-bin``, default
   ``~/.cache/lattice/bin/training-operator-v1.8.1/training-operator``) with
   ``--enable-scheme=pytorchjob --namespace <its ns>``, default controller threads (1) and QPS
   (controller-runtime's 20/30); ``--jobs`` PyTorchJobs (``kubeflow.org/v1``) of 1 Master +
   ``--workers - 1`` Workers, so both kinds make ``--workers`` pods per job. Only the pytorchjobs
   CRD is installed (from the module cache, ``kubectl apply --server-side``; deleted at the end
   when this bench installed it): Lattice serves MXJob and MPIJob with its own CRDs.

Per operator (``_support.workload``, as in ``bench_throughput``): time from the first create to
all pods seen by a watch, jobs/s and % of the mix ceiling's, pods/s and % of the ceiling,
p50/p99 latency from a job's create to all of its pods, API writes per job (delta of the
apiserver's ``apiserver_request_total``, all clients, and the operator's own
``rest_client_requests_total``), peak RSS and CPU seconds; then the ratio lattice / peer jobs/s.
The clock starts once an operator is ready: Lattice's ``/readyz`` (every informer synced), the
peer's "Starting workers" for ``pytorchjob-controller``.

Running training-operator v1.8 out of cluster (what ``cmd/training-operator.v1/main.go`` and
``pkg/cert`` need before any controller starts; controllers are set up only after the cert
rotator closes ``certsReady``):

- the Secret ``training-operator-webhook-cert`` must exist in ``$MY_POD_NAMESPACE`` (default
  ``kubeflow``): the rotator only GETs and UPDATEs it. The bench creates it, empty, in the peer's
  namespace and sets ``MY_POD_NAMESPACE`` to that namespace.
- ``/tmp/k8s-webhook-server/serving-certs/tls.crt`` must appear (hard-coded ``certDir``; in a pod
  the kubelet mounts the Secret there), else the rotator gives up and the manager exits. The bench
  copies ``tls.crt``/``tls.key`` from the Secret there once the rotator has filled it, and
  removes them (and the directories it created) at the end.
- no ValidatingWebhookConfiguration: the rotator logs "Webhook not found" and still marks the CA
  injected. Without one the apiserver never calls the webhook (which, out of cluster, it could
  not reach), so PyTorchJob creates are not validated by it.
- free ports for ``--metrics-bind-address``, ``--health-probe-bind-address`` and
  ``--webhook-server-port``; ``KUBECONFIG`` in the environment.

Usage: ``python bench/bench_trainingjob_throughput.py [--jobs 200] [--workers 4] [--nodes 100]
[--mix-jobs N | --no-mix-ceiling]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lattice.frameworks.trainingjob import TrainingJobPlugin
from lattice.kube.client import RestClient, connect
from lattice.kube.errors import ApiError
from lattice.kube.resources import CRDS, PODS, SECRETS, Resource

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import (
    POOL_LABEL,
    RUN,
    Mix,
    Namespaces,
    Ready,
    add_mix_args,
    ceiling,
    check_mix_args,
    clock,
    create_node_pool,
    delete_node_pool,
    free_port,
    is_file,
    kubectl,
    lattice_cmd,
    measure_mix,
    metric_samples,
    operator_breakdown,
    operator_context,
    report,
    run_text,
    workload,
    write_selector,
)

PEER_VERSION = "v1.8.1"
TRAININGJOB = Resource("breezeml.ai", "v1", "trainingjobs", "TrainingJob")
PYTORCHJOB = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
PYTORCHJOB_CRD = "pytorchjobs.kubeflow.org"
PEER_CONTROLLER = "pytorchjob-controller"
# training-operator v1.8.1 pkg/cert: certDir and the default --webhook-secret-name
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
WEBHOOK_SECRET = "training-operator-webhook-cert"
RESOURCES = {"limits": {"cpu": "100m", "memory": "64Mi"}}


def go_modcache() -> Path:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = run_text(["go", "env", "GOMODCACHE"]).stdout.strip()
        if out:
            return Path(out)
    return Path.home() / "go/pkg/mod"


def template(container: str, pool: str) -> dict[str, Any]:
    """The pod template of both kinds: one ``container`` on the pool's nodes."""
    return {
        "spec": {
            "nodeSelector": {POOL_LABEL: pool},
            "containers": [
                {
                    "name": container,
                    "image": "example.com/train:1",
                    "command": ["python", "main.py"],
                    "resources": RESOURCES,
                }
            ],
        }
    }


def trainingjob(name: str, workers: int, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "minSize": workers,
            "maxSize": workers,
            "replicaSpecs": {"template": template("trainingjob", pool)},
        },
    }


def pytorchjob(name: str, workers: int, pool: str) -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": template("pytorch", pool)}

    specs = {"Master": replica(1)}
    if workers > 1:
        specs["Worker"] = replica(workers - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": specs},
    }


def queue_breakdown(text: str, queue: str) -> str:
    """controller-runtime's workqueue and reconcile metrics for one controller."""
    sums: dict[tuple[str, str], float] = {}
    for s in metric_samples(text):
        if (s.labels.get("name") or s.labels.get("controller")) != queue:
            continue
        key = (s.name, s.labels.get("result", ""))
        sums[key] = sums.get(key, 0.0) + s.value
    adds = sums.get(("workqueue_adds_total", ""), 0.0)
    if not adds:
        return f"{queue}: no workqueue metrics"
    wait = sums.get(("workqueue_queue_duration_seconds_sum", ""), 0.0)
    work = sums.get(("workqueue_work_duration_seconds_sum", ""), 0.0)
    results = {k[1]: v for k, v in sums.items() if k[0] == "controller_runtime_reconcile_total"}
    return (
        f"{queue}: adds {adds:.0f}, retries {sums.get(('workqueue_retries_total', ''), 0):.0f}, "
        f"mean queue wait {wait / adds:.3f}s, reconcile time {work:.1f}s total, {results}"
    )


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except (OSError, urllib.error.URLError):
        return False


async def until(
    what: str, check: Callable[[], Awaitable[bool]], proc: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = clock.monotonic() + 180.0
    while not await check():
        if proc.poll() is not None:
            raise SystemExit(f"operator exited {proc.returncode} waiting for {what}; see {log}")
        if clock.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}; see {log}")
        await clock.sleep(0.2)


def lattice_ready(probe_port: int) -> Ready:
    async def ready(proc: subprocess.Popen[bytes], log: Path) -> None:
        url = f"http://127.0.0.1:{probe_port}/readyz"

        async def ok() -> bool:
            return await asyncio.to_thread(http_ok, url)

        await until("lattice /readyz", ok, proc, log)

    return ready


def mount_certs(data: dict[str, str], created: list[Path]) -> None:
    """Write the Secret's tls.crt/tls.key into CERT_DIR, as the kubelet's Secret volume would."""
    for d in reversed([CERT_DIR, *CERT_DIR.parents]):
        if not d.exists():
            d.mkdir()
            created.append(d)
    for key in ("tls.crt", "tls.key"):
        path = CERT_DIR / key
        if path.exists():
            print(f"  [peer] overwriting {path}")
        path.write_bytes(base64.b64decode(data[key]))
        path.chmod(0o600)
        created.append(path)


def log_has(log: Path, *words: str) -> bool:
    """Whether one line of ``log`` contains every word."""
    text = log.read_text(errors="replace")
    return any(all(w in line for w in words) for line in text.splitlines())


def peer_ready(client: RestClient, ns: str, created: list[Path]) -> Ready:
    """Play the kubelet's part (mount the rotator's Secret at CERT_DIR), then wait until the
    PyTorchJob controller's workers start (its caches have synced). Every directory and file
    written is appended to ``created``, for the cleanup."""

    async def ready(proc: subprocess.Popen[bytes], log: Path) -> None:
        data: dict[str, str] = {}

        async def filled() -> bool:
            nonlocal data
            secret = await client.get(SECRETS, WEBHOOK_SECRET, namespace=ns)
            data = dict(secret.get("data") or {})
            return "tls.crt" in data and "tls.key" in data

        await until(f"the cert rotator to fill Secret {WEBHOOK_SECRET}", filled, proc, log)
        mount_certs(data, created)

        async def started() -> bool:
            return log_has(log, "Starting workers", PEER_CONTROLLER)

        await until(f"{PEER_CONTROLLER} workers", started, proc, log)

    return ready


async def force_delete_pods(client: RestClient, ns: str, concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(name: str) -> None:
        async with gate:
            with contextlib.suppress(ApiError):
                await client.delete(PODS, name, namespace=ns, grace_period_seconds=0)

    with contextlib.suppress(ApiError):
        listed = await client.list(PODS, namespace=ns)
        await asyncio.gather(*(one(p["metadata"]["name"]) for p in listed.get("items") or []))


def table(results: dict[str, dict[str, float]], ceil: float, mix: Mix | None) -> None:
    jobs = "jobs/s" if mix is None else "jobs/s (% of mix ceiling)"
    print(f"\n| operator | jobs | all pods | {jobs} | pods/s (% of ceiling) | p50 / p99 |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        share = "" if mix is None else f" ({r['jobs_per_s'] / mix.jobs_per_s:.0%})"
        print(
            f"| {name} | {r['jobs_done']:.0f} | {r['all_pods_s']:.1f} s "
            f"| {r['jobs_per_s']:.2f}{share} "
            f"| {r['pods_per_s']:.1f} ({r['pods_per_s'] / ceil:.0%}) "
            f"| {r['p50']:.2f} / {r['p99']:.2f} s |"
        )
    print(
        "\n| operator | apiserver writes/job: all, w/o DELETE (operator's own) "
        "| operator 409s | peak RSS | CPU |"
    )
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['writes_per_job']:.1f}, {r['writes_no_delete_per_job']:.1f} "
            f"({r['own_writes_per_job']:.1f}) "
            f"| {r['conflicts']:.0f} | {r['rss_mib']:.0f} MiB | {r['cpu_s']:.1f} s |"
        )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--workers", type=int, default=4, help="pods per job (minSize = maxSize)")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--ceiling-pods", type=int, default=1000)
    add_mix_args(ap, kind="TrainingJob", status_patches=2, events=5)
    ap.add_argument("--timeout", type=float, default=600.0)
    default_peer = Path.home() / f".cache/lattice/bin/training-operator-{PEER_VERSION}"
    ap.add_argument("--peer-bin", default=str(default_peer / "training-operator"))
    ap.add_argument(
        "--peer-crd",
        default=str(
            go_modcache()
            / f"github.com/kubeflow/training-operator@{PEER_VERSION}"
            / "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"
        ),
    )
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--no-lattice", action="store_true")
    ap.add_argument("--scheduling-unit", default="cpu")
    ap.add_argument("--operator-arg", action="append", default=[])
    a = ap.parse_args()
    check_mix_args(ap, a)

    kubeconfig = str(RUN / "kubeconfig")
    client = await connect(kubeconfig=kubeconfig)
    pool = f"t{uuid.uuid4().hex[:6]}"
    create_node_pool(pool, nodes=a.nodes, gpus=8)
    selector = write_selector(pool)
    namespaces = Namespaces(client, pool)
    written: list[Path] = []
    crd_installed = False
    measure = functools.partial(
        workload,
        client,
        pods_per_job=a.workers,
        jobs=a.jobs,
        concurrency=a.concurrency,
        timeout=a.timeout,
    )

    print(f"nproc={os.cpu_count()} jobs={a.jobs} workers={a.workers} nodes={a.nodes} pool={pool}")
    try:
        ns = await namespaces.new("bare")
        ceil = await ceiling(client, ns, n=a.ceiling_pods, concurrency=a.concurrency, pool=pool)
        print(f"     ceiling: {ceil:.1f} pods/s (bare RestClient, {a.concurrency} in flight)")
        mix = await measure_mix(
            client,
            namespaces,
            a,
            res=TRAININGJOB,
            make=lambda name: trainingjob(name, a.workers, pool),
            plugin=TrainingJobPlugin(),
            ctx=operator_context(a.scheduling_unit, selector),
        )
        mix_jobs = None if mix is None else mix.jobs_per_s
        results: dict[str, dict[str, float]] = {}
        if not a.no_lattice:
            ns = await namespaces.new("tj")
            mport, pport = free_port(), free_port()
            results["lattice"] = await measure(
                label="lattice",
                cmd=lattice_cmd(
                    ns,
                    selector,
                    a.scheduling_unit,
                    a.operator_arg,
                    metrics_port=mport,
                    probe_port=pport,
                ),
                env=dict(os.environ),
                ready=lattice_ready(pport),
                res=TRAININGJOB,
                make=lambda name: trainingjob(name, a.workers, pool),
                ns=ns,
                metrics_url=f"http://127.0.0.1:{mport}/metrics",
                breakdown=operator_breakdown,
            )
            report("lattice", results["lattice"], ceil, mix_jobs)
        peer = Path(a.peer_bin)
        if a.no_peer:
            print("training-operator: skipped (--no-peer)")
        elif not is_file(peer):
            print(f"training-operator: skipped, no binary at {peer} (see bench/RESULTS.md)")
        else:
            try:
                await client.get(CRDS, PYTORCHJOB_CRD)
            except ApiError:
                crd_installed = True
                kubectl("apply", "--server-side", "-f", a.peer_crd)
            for attempt in range(3):  # a wait right after the apply can miss the new CRD
                try:
                    kubectl("wait", "--for=condition=Established", f"crd/{PYTORCHJOB_CRD}")
                    break
                except subprocess.CalledProcessError as exc:
                    print(f"  [peer] CRD wait {attempt + 1}/3 failed: {exc.stderr.strip()}")
                    if attempt == 2:
                        raise
                    await clock.sleep(2)
            ns = await namespaces.new("ptj")
            await client.create(SECRETS, {"metadata": {"name": WEBHOOK_SECRET}}, namespace=ns)
            mport, pport, wport = free_port(), free_port(), free_port()
            peer_cmd = [
                str(peer),
                "--enable-scheme=pytorchjob",
                "--namespace",
                ns,
                "--metrics-bind-address",
                f"127.0.0.1:{mport}",
                "--health-probe-bind-address",
                f"127.0.0.1:{pport}",
                "--webhook-server-port",
                str(wport),
            ]
            env = dict(os.environ, KUBECONFIG=kubeconfig, MY_POD_NAMESPACE=ns, TMPDIR="/tmp")
            results["training-operator"] = await measure(
                label="ptjop",
                cmd=peer_cmd,
                env=env,
                ready=peer_ready(client, ns, written),
                res=PYTORCHJOB,
                make=lambda name: pytorchjob(name, a.workers, pool),
                ns=ns,
                metrics_url=f"http://127.0.0.1:{mport}/metrics",
                breakdown=lambda text: queue_breakdown(text, PEER_CONTROLLER),
            )
            report("training-op", results["training-operator"], ceil, mix_jobs)
        if "lattice" in results and "training-operator" in results:
            ratio = results["lattice"]["jobs_per_s"] / max(
                results["training-operator"]["jobs_per_s"], 1e-9
            )
            print(f"lattice / training-operator jobs/s: {ratio:.2f}x")
        table(results, ceil, mix)
    finally:
        await namespaces.delete()
        # The pool's nodes go next, and kwok confirms no deletion of a pod whose node is gone
        # (nor does a pod GC run here): without this, the namespaces would stay Terminating.
        for name in namespaces.names:
            await force_delete_pods(client, name, a.concurrency)
        if crd_installed:
            kubectl("delete", "crd", PYTORCHJOB_CRD, "--wait=false")
        for path in reversed(written):
            with contextlib.suppress(OSError):
                if path.is_dir():
                    path.rmdir()
                else:
                    path.unlink()
        delete_node_pool(pool)
        selector.unlink(missing_ok=True)
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
