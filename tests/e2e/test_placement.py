"""Issue 20 end to end: the scheduler sees the cluster as kube-scheduler does, and its placement
binds. On kwok nodes of the local control plane, one test per case of the issue:

1. Pools: a job whose workers select ``pool=a`` while pool ``a`` is full stays ``Waiting`` with no
   pod created, and its ``lastDecision`` names the constraint (pool ``b`` has room); once pool
   ``a`` frees up, it runs there.
2. A tolerated taint (``nvidia.com/gpu=present:NoSchedule`` on the GPU nodes): every pod Running,
   the tolerating workers on the tainted nodes.
3. Fragmentation: three 1-GPU workers spread one per 4-GPU node (kube-scheduler's own spreading)
   leave no node for a 4-GPU worker; packed, they leave two. Every pod Running.
4. CPU-only MPIJobs with ``--scheduling-unit nvidia.com/gpu`` on nodes without GPUs run.
5. The upstream MXJob ``dist`` and MPIJob ``pi`` examples, unchanged, side by side at the defaults
   on four 4-GPU nodes: every pod Running (``pi`` then Succeeds).
6. The pending timeout ignores a slow image pull: pods scheduled but held ``Pending`` (kwok stage
   ``lattice-pod-slow-start-by-annotation``, annotation ``kwok.lattice.breezeml.ai/start-after``)
   well past ``--pending-timeout`` are never requeued, and run.

Every test also asserts, from a watch of every pod version, that no pod was ever reported
unschedulable (``PodScheduled=False``, ``Unschedulable``): no pod of an admitted job waits for
room. The tests wait on conditions with deadlines (``tests.support.wait``), never on sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from lattice.primitives.objects import Obj
from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import FLAGS, TIMEOUT, Kubeflow, Watch, finishing, mpijob
from tests.e2e.test_trainingjob_scheduling import GPU, World
from tests.support.apply import apply_and_wait
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

START_AFTER = "kwok.lattice.breezeml.ai/start-after"
GPU_TAINT = f"{GPU}=present:NoSchedule"
#: The launcher of a test MPIJob keeps running (kwok would otherwise complete a Job's pod at once).
LONG_LAUNCHER = finishing(0, "600s")


# --- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def watch(crds_installed: Cluster, namespace: str) -> Iterator[Callable[[str], Watch]]:
    """``watch(plural)``: every version of that resource in the test's namespace, from now."""
    started: list[Watch] = []

    def start(plural: str) -> Watch:
        started.append(Watch(crds_installed, namespace, plural))
        return started[-1]

    yield start
    for w in started:
        w.stop()


def label_nodes(cluster: Cluster, nodes: list[str], **labels: str) -> None:
    pairs = [f"{k}={v}" for k, v in labels.items()]
    cluster.kubectl("label", "node", *nodes, *pairs, "--overwrite")


def taint_nodes(cluster: Cluster, nodes: list[str], taint: str) -> None:
    cluster.kubectl("taint", "node", *nodes, taint, "--overwrite")


def _condition(pod: Obj, type_: str) -> Obj:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def unschedulable(pods: Watch) -> list[str]:
    """Every pod ever reported unschedulable by kube-scheduler, with its message."""
    out = []
    for name in pods.names():
        for version in pods.versions(name):
            cond = _condition(version, "PodScheduled")
            if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                out.append(f"{name}: {cond.get('message', '')}")
                break
    return out


def seen_running(pods: Watch, prefix: str) -> list[str]:
    """The pods named ``prefix...`` that were ever Running (or finished after running)."""
    return [
        name
        for name in pods.names()
        if name.startswith(prefix)
        and any(
            (v.get("status") or {}).get("phase") in ("Running", "Succeeded")
            for v in pods.versions(name)
        )
    ]


def wait_running(kf: Kubeflow, job: str, count: int, *, timeout: float = TIMEOUT) -> None:
    """Wait until ``job`` shows stage Running and exactly ``count`` live pods, all Running."""

    def state() -> tuple[str, dict[str, str]]:
        return str((kf.status(job).get("lattice") or {}).get("stage", "")), kf.phases(job)

    wait_for(
        state,
        lambda s: s[0] == "Running" and len(s[1]) == count and set(s[1].values()) == {"Running"},
        timeout=timeout,
        interval=0.5,
        what=f"{kf.kind} {job}: stage Running with {count} Running pods",
    )


def nodes_of(kf: Kubeflow, job: str) -> dict[str, str]:
    """pod name -> node of ``job``'s live pods."""
    return {n: str((p.get("spec") or {}).get("nodeName", "")) for n, p in kf.pods(job).items()}


def with_worker(manifest: Obj, edit: Callable[[Obj], None]) -> Obj:
    edit(manifest["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"])
    return manifest


# --- 1. pools ---------------------------------------------------------------------------------


def test_a_full_pool_keeps_the_job_waiting_with_no_pod_and_a_reason(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    watch: Callable[[str], Watch],
) -> None:
    pool_a = pool.add(count=2, gpus=4)
    pool_b = pool.add(count=2, gpus=4)
    label_nodes(crds_installed, pool_a, pool="a")
    label_nodes(crds_installed, pool_b, pool="b")
    pods = watch("pods")
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    in_a = {"pool": "a"}
    with explained(op):
        mpi.apply(
            mpijob(
                "fill",
                workers=2,
                gpus=4,
                worker_node_selector=in_a,
                launcher_annotations=LONG_LAUNCHER,
            )
        )
        wait_running(mpi, "fill", 3)
        late = mpijob(
            "late", workers=1, gpus=4, worker_node_selector=in_a, launcher_annotations=LONG_LAUNCHER
        )
        status = apply_and_wait(
            crds_installed,
            late,
            namespace=namespace,
            until=lambda s: "pool=a" in str((s.get("lattice") or {}).get("lastDecision") or ""),
            what="late's lastDecision names the constraint pool=a",
        )
        block = status["lattice"]
        assert (block.get("stage"), block.get("currentSize")) == ("Waiting", 0), block
        assert GPU in block["lastDecision"], block["lastDecision"]
        assert not [n for n in pods.names() if n.startswith("late-")], "no pod of late created"
        assert not mpi.owned("jobs.batch", "late"), "no launcher Job of late created"

        crds_installed.kubectl("delete", "mpijob", "fill", "-n", namespace)
        wait_running(mpi, "late", 2)
        worker_node = nodes_of(mpi, "late")["late-worker-0"]
        assert worker_node in pool_a, f"late-worker-0 on {worker_node}, not in pool a"
        assert unschedulable(pods) == []


# --- 2. a tolerated taint ---------------------------------------------------------------------


def test_pods_that_tolerate_a_gpu_taint_run_on_the_tainted_nodes(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    watch: Callable[[str], Watch],
) -> None:
    gpu_nodes = pool.add(count=2, gpus=4)
    cpu_nodes = pool.add(count=1, gpus=0)
    taint_nodes(crds_installed, gpu_nodes, GPU_TAINT)
    pods = watch("pods")
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    toleration = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
    with explained(op):
        mpi.apply(
            with_worker(
                mpijob("tol", workers=2, gpus=4, launcher_annotations=LONG_LAUNCHER),
                lambda spec: spec.update(tolerations=[toleration]),
            )
        )
        wait_running(mpi, "tol", 3)
        placed = nodes_of(mpi, "tol")
        assert {placed["tol-worker-0"], placed["tol-worker-1"]} == set(gpu_nodes), placed
        launcher = [n for n in placed if n.startswith("tol-launcher")]
        assert [placed[n] for n in launcher] == cpu_nodes, "the launcher tolerates no taint"
        assert unschedulable(pods) == []


# --- 3. fragmentation -------------------------------------------------------------------------


def test_a_job_that_fits_only_a_packed_placement_runs(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    watch: Callable[[str], Watch],
) -> None:
    nodes = pool.add(count=3, gpus=4)
    pods = watch("pods")
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    with explained(op):
        mpi.apply(mpijob("small", workers=3, gpus=1, launcher_annotations=LONG_LAUNCHER))
        wait_running(mpi, "small", 4)
        mpi.apply(mpijob("big", workers=2, gpus=4, launcher_annotations=LONG_LAUNCHER))
        wait_running(mpi, "big", 3)
        wait_running(mpi, "small", 4, timeout=5)  # still there, never moved
        small = nodes_of(mpi, "small")
        workers = {small[f"small-worker-{i}"] for i in range(3)}
        assert len(workers) == 1, f"small's workers are packed on one node: {small}"
        big = nodes_of(mpi, "big")
        assert {big["big-worker-0"], big["big-worker-1"]} == set(nodes) - workers
        assert unschedulable(pods) == []


# --- 4. CPU-only MPIJobs in GPU mode ----------------------------------------------------------


def test_cpu_only_mpijobs_run_in_gpu_mode_on_nodes_without_gpus(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    watch: Callable[[str], Watch],
) -> None:
    pool.add(count=2, gpus=0)
    pods = watch("pods")
    op: OperatorProcess = operator(f"--scheduling-unit={GPU}", "--resize-interval=0")
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    with explained(op):
        for name in ("cpu-a", "cpu-b"):
            mpi.apply(mpijob(name, workers=2, gpus=0, launcher_annotations=LONG_LAUNCHER))
        for name in ("cpu-a", "cpu-b"):
            wait_running(mpi, name, 3)
        assert unschedulable(pods) == []


# --- 5. the upstream examples side by side at the defaults ------------------------------------


def test_upstream_mxjob_dist_and_mpijob_pi_run_side_by_side_at_the_defaults(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    watch: Callable[[str], Watch],
) -> None:
    pool.add(count=4, gpus=4)
    pods = watch("pods")
    op: OperatorProcess = operator()  # every scheduling setting at its default
    mx = Kubeflow(crds_installed, namespace, "mxjobs", "MXJob")
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    with explained(op):
        mx.apply_example("mxjob", "mxjob-dist.yaml")
        wait_running(mx, "mxnet-job", 3)
        before = {n: p["metadata"]["uid"] for n, p in mx.pods("mxnet-job").items()}
        mpi.apply_example("mpijob", "pi.yaml")
        # kwok completes the launcher's Job pod once it runs: pi Succeeds, its workers go.
        mpi.wait_condition("pi", "Succeeded")
        assert sorted(seen_running(pods, "pi-worker-")) == ["pi-worker-0", "pi-worker-1"]
        assert len(seen_running(pods, "pi-launcher-")) == 1
        wait_running(mx, "mxnet-job", 3, timeout=5)
        after = {n: p["metadata"]["uid"] for n, p in mx.pods("mxnet-job").items()}
        assert after == before, "the MXJob kept running, untouched, beside pi"
        assert unschedulable(pods) == []


# --- 6. a slow image pull is not unschedulable ------------------------------------------------


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_the_pending_timeout_ignores_pods_that_are_scheduled_but_not_started(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    watch: Callable[[str], Watch],
) -> None:
    pool.add(count=1, gpus=4)
    pods, jobs = watch("pods"), watch("trainingjobs")
    op: OperatorProcess = operator(
        f"--scheduling-unit={GPU}", "--resize-interval=0", "--pending-timeout=3"
    )
    world = World(crds_installed, namespace)
    slow = {START_AFTER: "15s"}
    with explained(op):
        world.apply(trainingjob("slow", min_size=2, max_size=2, gpus=1, pod_annotations=slow))
        world.expect({"slow": 2}, what="slow runs once its pods have pulled their image")
        for name in ("slow-worker-0", "slow-worker-1"):
            versions = pods.versions(name)
            uids = {v["metadata"]["uid"] for v in versions}
            assert len(uids) == 1, f"{name} was recreated: {uids}"
            last = versions[-1]
            scheduled = _condition(last, "PodScheduled")
            assert scheduled.get("status") == "True", scheduled
            held = _time(last["status"]["startTime"]) - _time(scheduled["lastTransitionTime"])
            assert held.total_seconds() >= 10, f"{name} was held Pending only {held}"
        stages = [str((v.get("status") or {}).get("stage", "")) for v in jobs.versions("slow")]
        assert "RequeueCooldown" not in stages, stages
        assert not (world.jobs()["slow"].get("status") or {}).get("requeueCount")
        assert unschedulable(pods) == []
