"""TrainingJob end to end: the operator process, kwok GPU nodes, ``kubectl apply``.

The issue's acceptance walk (2 nodes x 4 GPUs, ``--resize-interval=0``), with the pod counts
checked after every step:

1. A (2..4, prio 0): A=4.
2. B (2..4): A=4, B=4.
3. C (2..4): A=4, B=2, C=2.
4. D (4..4, prio 10): D=4, A=2, B=2; C is Waiting.
5. Delete D: A=4, B=2, C=2, and C keeps its queuedTime.

The same walk in node mode (8 one-node units); completion freeing capacity for a waiting job;
the pending-timeout requeue and cooldown; and an operator SIGKILLed and restarted during step 4
converging to the same sizes without duplicate pods.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.support.apply import apply_and_wait
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

GPU = "nvidia.com/gpu"
STEP_TIMEOUT = 60.0


class World:
    """What a user sees with kubectl in one namespace."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace

    def apply(self, manifest: dict[str, Any]) -> None:
        self.cluster.apply(manifest, namespace=self.ns)

    def jobs(self) -> dict[str, dict[str, Any]]:
        items = self.cluster.get_json("trainingjobs", "-n", self.ns)["items"]
        return {j["metadata"]["name"]: j for j in items}

    def pods(self) -> dict[str, list[dict[str, Any]]]:
        """Live (not deleting) pods per job name."""
        out: dict[str, list[dict[str, Any]]] = {}
        for pod in self.cluster.get_json("pods", "-n", self.ns)["items"]:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            job = (meta.get("labels") or {}).get("training.kubeflow.org/job-name", "")
            out.setdefault(job, []).append(pod)
        return out

    def sizes(self) -> dict[str, tuple[str, int, int, int]]:
        """name -> (stage, currentSize, live pods, Running pods)."""
        pods = self.pods()
        out = {}
        for name, job in self.jobs().items():
            status = job.get("status") or {}
            mine = pods.get(name, [])
            running = sum(1 for p in mine if (p.get("status") or {}).get("phase") == "Running")
            out[name] = (
                str(status.get("stage", "")),
                int(status.get("currentSize") or 0),
                len(mine),
                running,
            )
        return out

    def expect(self, want: dict[str, int], *, waiting: tuple[str, ...] = (), what: str) -> None:
        """Wait until each job in ``want`` runs exactly that many Running pods."""

        def ok(seen: dict[str, tuple[str, int, int, int]]) -> bool:
            for name, n in want.items():
                stage, size, live, running = seen.get(name, ("", -1, -1, -1))
                if (stage, size, live, running) != ("Running", n, n, n):
                    return False
            for name in waiting:
                stage, size, live, _ = seen.get(name, ("", -1, -1, -1))
                if (stage, size, live) != ("Waiting", 0, 0):
                    return False
            return True

        wait_for(self.sizes, ok, timeout=STEP_TIMEOUT, interval=0.5, what=what)

    def pod_names(self, job: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.pods().get(job, []))


def _walk(world: World, *, restart: OperatorProcess | None = None) -> None:
    world.apply(trainingjob("a", min_size=2, max_size=4))
    world.expect({"a": 4}, what="step 1: A=4")
    world.apply(trainingjob("b", min_size=2, max_size=4))
    world.expect({"a": 4, "b": 4}, what="step 2: A=4, B=4")
    world.apply(trainingjob("c", min_size=2, max_size=4))
    world.expect({"a": 4, "b": 2, "c": 2}, what="step 3: A=4, B=2, C=2")
    c_queued = world.jobs()["c"]["status"]["queuedTime"]

    world.apply(trainingjob("d", min_size=4, max_size=4, priority=10))
    if restart is not None:
        restart.kill()
        restart.start()
    world.expect({"d": 4, "a": 2, "b": 2}, waiting=("c",), what="step 4: D=4, A=2, B=2, C waits")
    for job, n in (("a", 2), ("b", 2), ("d", 4)):
        assert world.pod_names(job) == [f"{job}-worker-{i}" for i in range(n)]
    assert world.pod_names("c") == []

    world.cluster.kubectl("delete", "trainingjob", "d", "-n", world.ns)
    world.expect({"a": 4, "b": 2, "c": 2}, what="step 5: D gone, A=4, B=2, C=2")
    assert world.jobs()["c"]["status"]["queuedTime"] == c_queued, "C lost its queuedTime"


def test_gpu_unit_walk(crds_installed: Cluster, namespace: str, pool: Pool, operator: Any) -> None:
    pool.add(count=2, gpus=4)
    op: OperatorProcess = operator(f"--scheduling-unit={GPU}", "--resize-interval=0")
    world = World(crds_installed, namespace)
    with explained(op):
        _walk(world)


def test_node_unit_walk(crds_installed: Cluster, namespace: str, pool: Pool, operator: Any) -> None:
    pool.add(count=8, gpus=1)
    op: OperatorProcess = operator("--scheduling-unit=node", "--resize-interval=0")
    world = World(crds_installed, namespace)
    with explained(op):
        _walk(world)
        placed = {
            (p.get("spec") or {}).get("nodeName") for pods in world.pods().values() for p in pods
        }
        assert len(placed) == 8, "node mode puts one replica per node"


def test_restart_during_preemption_converges_without_duplicates(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=4)
    op: OperatorProcess = operator(f"--scheduling-unit={GPU}", "--resize-interval=0")
    world = World(crds_installed, namespace)
    with explained(op):
        _walk(world, restart=op)
        events = crds_installed.get_json("events.v1.events.k8s.io", "-n", namespace)["items"]
        created = [e for e in events if e.get("reason") == "SuccessfulCreatePod"]
        names = [e.get("note", "").rsplit(" ", 1)[-1] for e in created]
        for job in ("a", "b", "c", "d"):
            pods = world.pod_names(job)
            assert len(pods) == len(set(pods))
        assert names, "the operator recorded its pod creations"


def test_finished_job_completes_and_frees_capacity(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(f"--scheduling-unit={GPU}", "--resize-interval=0")
    world = World(crds_installed, namespace)
    finish = {"kwok.lattice.breezeml.ai/exit-code": "0", "kwok.lattice.breezeml.ai/run-for": "8s"}
    with explained(op):
        world.apply(trainingjob("short", min_size=4, max_size=4, pod_annotations=finish))
        # `next` is applied once `short` runs, so that it is `next` that waits.
        wait_for(
            lambda: world.sizes().get("short", ("", 0, 0, 0))[1],
            lambda n: n == 4,
            timeout=STEP_TIMEOUT,
            what="short is admitted",
        )
        world.apply(trainingjob("next", min_size=2, max_size=4))
        wait_for(
            lambda: world.sizes().get("next", ("", 0, 0, 0))[0],
            lambda s: s == "Waiting",
            timeout=STEP_TIMEOUT,
            what="next waits behind short",
        )

        def short_done() -> dict[str, Any]:
            return dict(world.jobs()["short"].get("status") or {})

        status = wait_for(
            short_done,
            lambda s: s.get("stage") == "Completed",
            timeout=STEP_TIMEOUT,
            what="short completes",
        )
        conditions = {c["type"]: c for c in status["execStatus"]["conditions"]}
        assert conditions["Succeeded"]["status"] == "True"
        assert conditions["Succeeded"]["reason"] == "TrainingJobSucceeded"
        assert status.get("completionTime")
        assert status["currentSize"] == 0
        world.expect({"next": 4}, what="next takes the freed GPUs")
        wait_for(lambda: world.pod_names("short"), lambda p: p == [], what="cleanPodPolicy All")


def test_a_job_no_node_matches_waits_with_no_pod_and_says_why(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(f"--scheduling-unit={GPU}", "--resize-interval=0")
    world = World(crds_installed, namespace)
    with explained(op):
        waiting = apply_and_wait(
            crds_installed,
            trainingjob("stuck", min_size=1, max_size=2, node_selector={"no-such-node": "x"}),
            namespace=namespace,
            until=lambda s: "no-such-node=x" in str(s.get("lastDecision")),
            timeout=STEP_TIMEOUT,
            what="stuck waits, naming the selector no node matches",
        )
        assert waiting["stage"] == "Waiting"
        assert waiting["currentSize"] == 0
        assert world.pod_names("stuck") == []


def test_pods_kube_scheduler_refuses_requeue_the_job_with_cooldown(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    """A constraint the scheduler does not model (a required pod anti-affinity between the
    job's own pods) makes kube-scheduler refuse a placed pod: with no other node, the job is
    requeued with backoff at once, not after the pending timeout, and queued again later."""
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(
        f"--scheduling-unit={GPU}",
        "--resize-interval=0",
        "--pending-timeout=600",
        "--cooldown-base=2",
    )
    world = World(crds_installed, namespace)
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": "apart"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    with explained(op):
        world.apply(trainingjob("apart", min_size=2, max_size=2, affinity=apart))

        def status() -> dict[str, Any]:
            return dict(world.jobs()["apart"].get("status") or {})

        first = wait_for(
            status,
            lambda s: s.get("stage") == "RequeueCooldown",
            timeout=STEP_TIMEOUT,
            what="apart goes to RequeueCooldown",
        )
        assert first["currentSize"] == 0
        assert first.get("requeueCount", 0) >= 1
        requeued = wait_for(
            lambda: [
                e
                for e in world.cluster.get_json("events.v1.events.k8s.io", "-n", namespace)["items"]
                if (e.get("regarding") or {}).get("name") == "apart"
                and e.get("reason") == "Requeued"
            ],
            timeout=STEP_TIMEOUT,
            what="a Requeued event about apart",
        )
        assert "kube-scheduler refused its pods on" in requeued[0]["note"]
        wait_for(lambda: world.pod_names("apart"), lambda p: p == [], what="pods released")
        back = wait_for(
            status,
            lambda s: (
                s.get("stage") != "RequeueCooldown"
                and s.get("queuedTime") != first.get("queuedTime")
            ),
            timeout=STEP_TIMEOUT,
            what="apart is queued again after its cooldown",
        )
        assert back.get("queuedTime", "") >= first["cooldownTime"]
