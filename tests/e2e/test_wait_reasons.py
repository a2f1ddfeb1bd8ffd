"""Why a job waits never goes blank, for every kind: the operator process on kwok GPU nodes.

2 nodes x 4 GPUs. ``filler`` (TrainingJob, a 6-GPU gang) runs; an MPIJob, an MXJob, a TrainJob
and a TrainingJob, each needing 4 GPUs, wait; two later 1-GPU TrainingJobs are admitted past
them. Then ``urgent`` (priority 10, 8 GPUs) preempts ``filler`` and the small ones. A
``kubectl get -w`` per kind records every version of every job: each version whose scheduler
block says ``Waiting`` carries a ``reason`` code and a ``message``; ``filler`` goes
``Preempted`` (with who) and then names its blocker; meanwhile the waiting jobs' codes are
polled too, and every poll finds one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import FLAGS, TIMEOUT, Kubeflow, Watch, mpijob
from tests.e2e.test_mxjob import mxjob
from tests.e2e.test_trainingjob_scheduling import GPU, World
from tests.e2e.test_trainjob import runtime, trainjob, trainjobs
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

CODES = {
    "Queued",
    "InsufficientCapacity",
    "Fragmented",
    "BlockedByStrictFIFO",
    "ExceedsClusterCapacity",
    "Preempted",
    "Suspended",
}
#: (kubectl plural, where the scheduler block is, job names) per kind.
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "trainingjobs": ("", ("filler", "big", "s1", "s2", "urgent")),
    "mpijobs.kubeflow.org": ("lattice", ("mpi",)),
    "mxjobs.kubeflow.org": ("lattice", ("mx",)),
    "trainjobs.trainer.kubeflow.org": ("lattice", ("tj",)),
}
WAITING = {"big", "mpi", "mx", "tj"}


def _block(obj: dict[str, Any], nested: str) -> dict[str, Any]:
    status = obj.get("status") or {}
    return dict((status.get(nested) or {}) if nested else status)


@pytest.fixture
def watches(crds_installed: Cluster, namespace: str) -> Iterator[dict[str, Watch]]:
    """A ``kubectl get -w`` per kind, from before the first job."""
    made = {plural: Watch(crds_installed, namespace, plural) for plural in KINDS}
    yield made
    for w in made.values():
        w.stop()


def _mxjob_with_gpus(name: str) -> dict[str, Any]:
    job = mxjob(name, workers=2)
    worker = job["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"] = {"limits": {GPU: "2"}}
    return job


def test_every_waiting_job_of_every_kind_always_says_why(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    watches: dict[str, Watch],
) -> None:
    pool.add(count=2, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    world = World(crds_installed, namespace)
    tj = trainjobs(crds_installed, namespace)
    views = {
        plural: Kubeflow(crds_installed, namespace, plural, plural.split(".")[0])
        for plural in KINDS
    }

    def blocks() -> dict[str, dict[str, Any]]:
        out = {}
        for plural, (nested, names) in KINDS.items():
            items = crds_installed.get_json(plural, "-n", namespace)["items"]
            for obj in items:
                if obj["metadata"]["name"] in names:
                    out[obj["metadata"]["name"]] = _block(obj, nested)
        return out

    polls: list[dict[str, dict[str, Any]]] = []

    def polled() -> dict[str, dict[str, Any]]:
        seen = blocks()
        polls.append(seen)
        return seen

    with explained(op):
        world.apply(trainingjob("filler", min_size=6, max_size=6))
        world.expect({"filler": 6}, what="filler runs on 6 of 8 GPUs")

        tj.apply(runtime("plain"))
        views["mpijobs.kubeflow.org"].apply(mpijob("mpi", workers=2, gpus=2))
        views["mxjobs.kubeflow.org"].apply(_mxjob_with_gpus("mx"))
        tj.apply(trainjob("tj", "plain", nodes=4))
        world.apply(trainingjob("big", min_size=4, max_size=4))
        wait_for(
            polled,
            lambda b: all(b.get(n, {}).get("reason") == "InsufficientCapacity" for n in WAITING),
            timeout=TIMEOUT,
            interval=0.5,
            what="every kind's 4-GPU job waits, saying InsufficientCapacity",
        )
        for name in WAITING:
            block = polls[-1][name]
            assert block["stage"] == "Waiting"
            assert block["message"].startswith("needs 4 units"), block["message"]
            assert block["waitingSince"], name

        # Later, smaller jobs are admitted past the waiting ones.
        world.apply(trainingjob("s1", min_size=1, max_size=1))
        world.apply(trainingjob("s2", min_size=1, max_size=1))
        world.expect({"filler": 6, "s1": 1, "s2": 1}, what="the small jobs are admitted")
        for _ in range(5):
            seen = polled()
            assert {seen[n].get("reason") for n in WAITING} == {"InsufficientCapacity"}, seen

        # urgent takes all 8 GPUs: filler and the small jobs are preempted.
        world.apply(trainingjob("urgent", min_size=8, max_size=8, priority=10))
        world.expect({"urgent": 8}, waiting=("filler", "s1", "s2"), what="urgent preempts")
        wait_for(
            polled,
            lambda b: all(
                b.get(n, {}).get("reason") == "InsufficientCapacity"
                for n in ("filler", "s1", "s2", *WAITING)
            ),
            timeout=TIMEOUT,
            interval=0.5,
            what="the preempted jobs name their blocker after the next pass",
        )

    # Every version of every job the scheduler held back said why, and in which words.
    for plural, (nested, names) in KINDS.items():
        for name in names:
            versions = [_block(obj, nested) for obj in watches[plural].versions(name)]
            held = [b for b in versions if b.get("stage") == "Waiting"]
            if name in WAITING or name in ("filler", "s1", "s2"):
                assert held, f"{name} was never seen waiting"
            for b in held:
                assert b.get("reason") in CODES, (name, b)
                assert b.get("message"), (name, b)
                assert b.get("waitingSince"), (name, b)
            running = [b for b in versions if b.get("stage") == "Running"]
            assert all(b.get("reason") is None for b in running), (name, running)
    filler = [
        _block(obj, "")
        for obj in watches["trainingjobs"].versions("filler")
        if _block(obj, "").get("stage") == "Waiting"
    ]
    codes = [b["reason"] for b in filler]
    assert codes[0] == "Preempted", codes
    assert filler[0]["message"].startswith(f"Preempted by {namespace}/urgent (priority 10) at ")
    assert codes[-1] == "InsufficientCapacity", codes
    # Every poll of a waiting job found a code.
    for seen in polls:
        for name in WAITING:
            if name in seen:
                assert seen[name].get("reason") in CODES, (name, seen[name])
