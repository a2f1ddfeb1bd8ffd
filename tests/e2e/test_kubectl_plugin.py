"""``kubectl lattice`` end to end: the installed ``kubectl-lattice`` found by kubectl on PATH.

One GPU node (4 GPUs) and the operator; a TrainingJob ``r`` (4..4, priority 5) runs, and three
jobs wait behind it in priority order (the default LeastAttainedService orders them as StrictFIFO
would, all being in its first band): TrainingJob ``x`` (priority 3), MPIJob ``m`` (priority 1
from the annotation, one 1-GPU worker) and TrainingJob ``w`` (2..2, priority 0). ``kubectl
lattice queue -n <ns>`` prints them in that order with their sizes, stages and decisions;
``kubectl lattice explain trainingjob/w`` says why ``w`` waits and lists the jobs ahead of it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.conftest import LATTICE, OperatorProcess, Pool
from tests.e2e.test_trainingjob_scheduling import GPU, STEP_TIMEOUT, World
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

POSITIONS = {"r": None, "x": 1, "m": 2, "w": 3}  # running jobs have no queue position


def mpijob(name: str, *, priority: int) -> dict[str, Any]:
    def template(container: str, gpus: int) -> dict[str, Any]:
        resources = {"limits": {GPU: str(gpus)}} if gpus else {}
        spec = {"containers": [{"name": container, "image": "mpi:1", "resources": resources}]}
        return {"spec": spec}

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "annotations": {"lattice.breezeml.ai/priority": str(priority)}},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template("launcher", 0)},
                "Worker": {"replicas": 1, "template": template("worker", 1)},
            }
        },
    }


def kubectl_lattice(cluster: Cluster, *args: str) -> str:
    """Run ``kubectl lattice ...`` with the venv's bin directory (and its kubectl-lattice) on
    PATH, exactly as a user who installed the package would."""
    env = dict(cluster.env)
    venv_bin = str(Path(LATTICE).parent)
    env["PATH"] = f"{venv_bin}:{env['PATH']}"
    proc = subprocess.run(
        ["kubectl", "lattice", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"kubectl lattice {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def positions(cluster: Cluster, namespace: str) -> dict[str, tuple[Any, Any, str]]:
    """name -> (stage, queuePosition, lastDecision) of every job in the namespace."""
    out: dict[str, tuple[Any, Any, str]] = {}
    items = cluster.get_json("trainingjobs,mpijobs", "-n", namespace)["items"]
    for job in items:
        status = job.get("status") or {}
        state = status if job["kind"] == "TrainingJob" else status.get("lattice") or {}
        decision = str(state.get("lastDecision") or "")
        out[job["metadata"]["name"]] = (state.get("stage"), state.get("queuePosition"), decision)
    return out


def test_queue_and_explain_through_kubectl(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(f"--scheduling-unit={GPU}", "--resize-interval=0")
    world = World(crds_installed, namespace)
    try:
        world.apply(trainingjob("r", min_size=4, max_size=4, priority=5))
        world.expect({"r": 4}, what="r runs on all four GPUs")
        world.apply(trainingjob("w", min_size=2, max_size=2, priority=0))
        world.apply(trainingjob("x", min_size=1, max_size=1, priority=3))
        world.apply(mpijob("m", priority=1))

        def settled(seen: dict[str, tuple[Any, Any, str]]) -> bool:
            for name, position in POSITIONS.items():
                stage, pos, decision = seen.get(name, (None, None, ""))
                want = "Running" if name == "r" else "Waiting"
                if (stage, pos) != (want, position) or not decision:
                    return False
            return seen["w"][2].startswith("Waiting at position 3")

        wait_for(
            lambda: positions(crds_installed, namespace),
            settled,
            timeout=STEP_TIMEOUT,
            interval=0.5,
            what="r runs; x, m, w wait at positions 1, 2, 3",
        )

        out = kubectl_lattice(crds_installed, "queue", "-n", namespace)
        lines = out.splitlines()
        assert lines[0].split() == [
            "POSITION",
            "KIND",
            "NAMESPACE/NAME",
            "PRIORITY",
            "STAGE",
            "SIZE/MIN/MAX",
            "WAITING",
            "LAST",
            "DECISION",
        ]
        rows = [line.split() for line in lines[1:]]
        assert [r[:6] for r in rows] == [
            ["-", "TrainingJob", f"{namespace}/r", "5", "Running", "4/4/4"],
            ["1", "TrainingJob", f"{namespace}/x", "3", "Waiting", "0/1/1"],
            ["2", "MPIJob", f"{namespace}/m", "1", "Waiting", "0/2/2"],
            ["3", "TrainingJob", f"{namespace}/w", "0", "Waiting", "0/2/2"],
        ]
        assert rows[0][6] == "-", "a running job shows no waiting time"
        assert all(r[6].endswith("s") for r in rows[1:]), "waiting jobs show a Go duration"
        assert "Waiting at position 3" in lines[4]

        text = kubectl_lattice(
            crds_installed, "explain", "trainingjob/w", "-n", namespace, "--same-namespace"
        )
        assert "Stage:         Waiting" in text
        assert "Position:      3" in text
        assert "Why: Waiting at position 3" in text
        ahead = text.split(f"Ahead of it (2, namespace {namespace} only):")[1]
        ahead = ahead.split("Details:")[0]
        assert [f"{namespace}/{n} " in ahead for n in ("r", "x", "m")] == [False, True, True]
        assert text.index("Scheduler:") < text.index("Scheduler events") < text.index("Ahead")
        events = text.split("Scheduler events")[1].split("Ahead of it")[0]
        assert "Queued" in events, "the scheduler's Queued event about w is listed first"

        doc = json.loads(kubectl_lattice(crds_installed, "queue", "-n", namespace, "-o", "json"))
        got = [(i["kind"], i["name"], i["position"], i["stage"]) for i in doc["items"]]
        assert got == [
            ("TrainingJob", "r", None, "Running"),
            ("TrainingJob", "x", 1, "Waiting"),
            ("MPIJob", "m", 2, "Waiting"),
            ("TrainingJob", "w", 3, "Waiting"),
        ]
    except AssertionError:
        print(op.logs())
        raise
