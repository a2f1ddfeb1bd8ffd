"""Gangs and priority across kinds: MPIJob, TrainingJob and MXJob share one scheduler.

On 2 nodes x 4 GPUs (``--scheduling-unit=nvidia.com/gpu --resize-interval=0``):

1. MPIJob ``mpi`` (4 one-GPU workers, a launcher that asks none; priority 1 from the
   ``lattice.breezeml.ai/priority`` annotation) is admitted as a gang: 5 pods, 4 GPUs.
2. TrainingJob ``tj`` (2..4, priority 5) takes the other 4 GPUs: both run, 8 GPUs used.
3. MXJob ``mx`` (a scheduler and 4 one-GPU workers; priority 10 from a PriorityClass named in
   ``runPolicy.schedulingPolicy.priorityClass``) arrives. In priority order mx (4) and tj's
   minimum (2) fit, mpi's gang (4) does not: mpi is preempted whole (its workers go, its
   launcher Job is suspended; its Service, ConfigMap and Secret are kept, as mpi-operator keeps
   them when suspended), shows ``Suspended=True``/``Preempted`` with its ``suspend`` field
   untouched and is never Failed; tj keeps 4.
4. mx finishes; mpi is admitted again, its launcher Job resumes, and it ends Succeeded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import (
    FLAGS,
    JOB_ROLE,
    RUN_FOR,
    TIMEOUT,
    Kubeflow,
    finishing,
    mpijob,
)
from tests.e2e.test_trainingjob_scheduling import GPU, World
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for


@pytest.fixture
def priority_class(crds_installed: Cluster, pool: Pool) -> Iterator[str]:
    name = f"{pool.pool_id}-urgent"
    crds_installed.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 10,
            "description": "lattice e2e: an urgent MXJob",
        }
    )
    yield name
    crds_installed.kubectl("delete", "priorityclass", name, "--wait=false", check=False)


def urgent_mxjob(name: str, *, priority_class: str, workers: int) -> dict[str, Any]:
    def replica(replicas: int, gpus: int) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "mxnet", "image": "mxjob/mxnet:gpu"}
        if gpus:
            container["resources"] = {"limits": {GPU: str(gpus)}}
        return {
            "replicas": replicas,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {
            "jobMode": "MXTrain",
            "runPolicy": {"schedulingPolicy": {"priorityClass": priority_class}},
            "mxReplicaSpecs": {"Scheduler": replica(1, 0), "Worker": replica(workers, 1)},
        },
    }


def placed(kf: Kubeflow, job: str) -> tuple[str, int, int, int]:
    """(stage, currentSize, live pods, Running pods) of a Kubeflow job."""
    status = kf.status(job)
    block = status.get("lattice") or {}
    phases = kf.phases(job)
    running = sum(1 for p in phases.values() if p == "Running")
    return str(block.get("stage", "")), int(block.get("currentSize") or 0), len(phases), running


def test_gangs_share_capacity_and_priority_preempts_a_whole_mpijob(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    priority_class: str,
) -> None:
    pool.add(count=2, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    mx = Kubeflow(crds_installed, namespace, "mxjobs", "MXJob")
    tjs = World(crds_installed, namespace)
    with explained(op):
        # 1. The MPI gang: launcher + 4 workers, all at once.
        mpi.apply(
            mpijob(
                "mpi",
                workers=4,
                gpus=1,
                launcher_annotations=finishing(0, "600s"),
                annotations={"lattice.breezeml.ai/priority": "1"},
            )
        )
        wait_for(
            lambda: placed(mpi, "mpi"),
            lambda p: p == ("Running", 5, 5, 5),
            timeout=TIMEOUT,
            what="mpi runs its launcher and 4 workers",
        )

        # 2. The elastic TrainingJob takes what is left.
        tjs.apply(trainingjob("tj", min_size=2, max_size=4, priority=5))
        tjs.expect({"tj": 4}, what="tj takes the other 4 GPUs")
        assert placed(mpi, "mpi") == ("Running", 5, 5, 5)

        # 3. The urgent MXJob preempts the whole MPI gang; tj keeps its 4.
        mx.apply(urgent_mxjob("mx", priority_class=priority_class, workers=4))
        wait_for(
            lambda: (placed(mx, "mx"), placed(mpi, "mpi")),
            lambda p: p == (("Running", 5, 5, 5), ("Waiting", 0, 0, 0)),
            timeout=TIMEOUT,
            what="mx runs 5 pods, mpi is preempted whole",
        )
        tjs.expect({"tj": 4}, what="tj keeps 4")
        # As mpi-operator suspends: the launcher Job is suspended, its children are kept.
        wait_for(
            lambda: mpi.owned("jobs.batch", "mpi")["mpi-launcher"]["spec"].get("suspend"),
            lambda suspended: suspended is True,
            timeout=TIMEOUT,
            what="mpi's launcher Job is suspended",
        )
        for plural in ("configmaps", "secrets", "services"):
            assert mpi.owned(plural, "mpi"), f"mpi's {plural} are kept"
        status = mpi.wait(
            "mpi",
            lambda s: any(
                c["type"] == "Suspended" and c["status"] == "True"
                for c in s.get("conditions") or []
            ),
            what="mpi shows Suspended",
        )
        conds = {c["type"]: c for c in status["conditions"]}
        assert conds["Suspended"]["reason"] == "Preempted"
        assert (conds["Running"]["status"], conds["Running"]["reason"]) == (
            "False",
            "MPIJobWaiting",
        )
        assert "Failed" not in conds
        assert not (mpi.get("mpi")["spec"].get("runPolicy") or {}).get("suspend"), "untouched"
        event = mpi.wait_event("mpi", "Preempted")
        assert event["note"] == f"Preempted by {namespace}/mx (priority 10)", event["note"]
        # What kubectl shows (issue 25): never STATE Running, and the scheduler's columns.
        wide = crds_installed.kubectl("get", "mpijob", "mpi", "-n", namespace, "-o", "wide")
        header, row = wide.splitlines()
        shown = dict(zip(header.split(), row.split(), strict=True))
        assert {k: shown[k] for k in ("STATE", "STAGE", "SIZE", "MIN", "MAX", "PRIORITY")} == {
            "STATE": "Suspended",
            "STAGE": "Waiting",
            "SIZE": "0",
            "MIN": "5",
            "MAX": "5",
            "PRIORITY": "1",
        }, shown

        # 4. mx finishes; mpi comes back as a gang, runs a new launcher and succeeds.
        for pod in mx.pods("mx"):
            mx.finish(pod, 0)
        mx.wait_condition("mx", "Succeeded")
        wait_for(
            lambda: placed(mpi, "mpi"),
            lambda p: p == ("Running", 5, 5, 5),
            timeout=TIMEOUT,
            what="mpi is admitted again after mx",
        )
        tjs.expect({"tj": 4}, what="tj still holds 4")
        resumed = mpi.wait_condition("mpi", "Suspended", "False")
        conds = {c["type"]: c for c in resumed["conditions"]}
        assert conds["Suspended"]["reason"] == "MPIJobResumed"
        launcher = [
            name
            for name, pod in mpi.pods("mpi").items()
            if pod["metadata"]["labels"].get(JOB_ROLE) == "launcher"
        ]
        assert len(launcher) == 1, launcher
        crds_installed.kubectl(
            "annotate", "pod", launcher[0], "-n", namespace, f"{RUN_FOR}=0s", "--overwrite"
        )
        status = mpi.wait_condition("mpi", "Succeeded")
        conds = {c["type"]: c for c in status["conditions"]}
        assert "Failed" not in conds
        assert conds["Succeeded"]["reason"] == "MPIJobSucceeded"
        # cleanPodPolicy None (the default): the workers stay; only the launcher's pod ended.
        assert sorted(mpi.owned("pods", "mpi")) == [f"mpi-worker-{i}" for i in range(4)]
