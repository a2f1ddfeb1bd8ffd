"""Lifecycle details matched to upstream (issue 23), end to end: the operator process, kwok nodes,
the real job controller and apiserver validation.

1. MPIJob suspend/resume round trip, as mpi-operator v0.8: the workers go, the launcher batch
   Job is suspended (its pod goes), and the Service, ConfigMap, Secret and launcher Job stay
   (same UIDs); on resume the launcher Job's scheduling fields are re-synced (its template is
   bound to the node of the new placement, which the apiserver accepts only while the Job is
   suspended and not started) and it runs again.
2. Preemption by the scheduler keeps them too, and the job comes back once the capacity is free.
3. An invalid job is not failed: it shows ``Created=False``/``MXJobFailedValidation`` naming
   the field and rule and holds nothing; once its spec is fixed it is judged again and runs.
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import FLAGS, TIMEOUT, Kubeflow, finishing, mpijob
from tests.e2e.test_mxjob import mxjob
from tests.support.apply import apply_and_wait
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

KEPT = (
    ("services", ""),
    ("configmaps", "-config"),
    ("secrets", "-ssh"),
    ("jobs.batch", "-launcher"),
)


def kept_uids(mpi: Kubeflow, name: str) -> dict[str, str]:
    """The UIDs of the children mpi-operator keeps while an MPIJob is suspended."""
    out = {}
    for plural, suffix in KEPT:
        owned = mpi.owned(plural, name)
        child = owned.get(f"{name}{suffix}")
        assert child is not None, (plural, sorted(owned))
        out[f"{plural}/{name}{suffix}"] = child["metadata"]["uid"]
    return out


def launcher_job(mpi: Kubeflow, name: str) -> dict[str, Any]:
    return mpi.owned("jobs.batch", name)[f"{name}-launcher"]


def bound_node(job: dict[str, Any]) -> list[str]:
    """The nodes the launcher Job's pod template is bound to (``matchFields`` on the name)."""
    affinity = (job["spec"]["template"]["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return sorted(
        value
        for term in required.get("nodeSelectorTerms") or []
        for field in term.get("matchFields") or []
        if field.get("key") == "metadata.name"
        for value in field.get("values") or []
    )


def running(mpi: Kubeflow, name: str) -> dict[str, Any]:
    """Wait until the MPIJob is Running with its launcher pod and every worker Running."""
    status = mpi.wait_condition(name, "Running")
    wait_for(
        lambda: mpi.phases(name),
        lambda p: len(p) == 3 and set(p.values()) == {"Running"},
        timeout=TIMEOUT,
        what=f"the launcher and 2 workers of {name} Running",
    )
    return status


def suspended_children(mpi: Kubeflow, name: str) -> None:
    """Wait until no pod of ``name`` is left and its launcher Job is suspended."""
    wait_for(lambda: mpi.pods(name), lambda p: not p, timeout=TIMEOUT, what=f"{name} has no pods")
    job = launcher_job(mpi, name)
    assert job["spec"].get("suspend") is True, job["spec"]


def patch_suspend(cluster: Cluster, namespace: str, name: str, value: bool) -> None:
    body = json.dumps({"spec": {"runPolicy": {"suspend": value}}})
    cluster.kubectl("patch", "mpijob", name, "-n", namespace, "--type=merge", "-p", body)


def long_mpijob(name: str, **kw: Any) -> dict[str, Any]:
    """Two one-GPU workers and a launcher that runs for an hour (kwok)."""
    return mpijob(name, workers=2, gpus=1, launcher_annotations=finishing(0, "1h"), **kw)


# --- 1. suspend / resume -----------------------------------------------------------------------


def test_mpijob_suspend_resume_keeps_its_children(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=2)
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    with explained(op):
        mpi.apply(long_mpijob("rt"))
        running(mpi, "rt")
        uids = kept_uids(mpi, "rt")
        placed = (mpi.status("rt").get("lattice") or {}).get("placement") or {}
        assert bound_node(launcher_job(mpi, "rt")) == [placed["rt-launcher"]]

        patch_suspend(crds_installed, namespace, "rt", True)
        status = mpi.wait_condition("rt", "Suspended")
        conds = {c["type"]: c for c in status["conditions"]}
        assert (conds["Suspended"]["reason"], conds["Suspended"]["message"]) == (
            "MPIJobSuspended",
            "MPIJob suspended",
        )
        assert (conds["Running"]["status"], conds["Running"]["reason"]) == (
            "False",
            "MPIJobSuspended",
        )
        suspended_children(mpi, "rt")
        assert kept_uids(mpi, "rt") == uids
        assert "Failed" not in conds

        patch_suspend(crds_installed, namespace, "rt", False)
        status = mpi.wait_condition("rt", "Suspended", "False")
        running(mpi, "rt")
        conds = mpi.conditions("rt")
        assert conds["Suspended"]["reason"] == "MPIJobResumed"
        assert kept_uids(mpi, "rt") == uids, "the same Service, ConfigMap, Secret, launcher Job"
        job = launcher_job(mpi, "rt")
        assert job["spec"].get("suspend") is False
        placed = (mpi.status("rt").get("lattice") or {}).get("placement") or {}
        assert bound_node(job) == [placed["rt-launcher"]], "re-synced to the new placement"


# --- 2. preemption -----------------------------------------------------------------------------


def test_preempted_mpijob_keeps_its_children_and_comes_back(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=2)
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    with explained(op):
        mpi.apply(long_mpijob("low", annotations={"lattice.breezeml.ai/priority": "1"}))
        running(mpi, "low")
        uids = kept_uids(mpi, "low")

        mpi.apply(long_mpijob("high", annotations={"lattice.breezeml.ai/priority": "10"}))
        status = mpi.wait(
            "low",
            lambda s: any(
                c.get("type") == "Suspended"
                and c.get("status") == "True"
                and c.get("reason") == "Preempted"
                for c in s.get("conditions") or []
            ),
            what="low preempted",
        )
        assert "Failed" not in {c["type"] for c in status["conditions"]}
        suspended_children(mpi, "low")
        assert kept_uids(mpi, "low") == uids
        running(mpi, "high")

        crds_installed.kubectl("delete", "mpijob", "high", "-n", namespace, "--wait=true")
        mpi.wait_condition("low", "Suspended", "False")
        running(mpi, "low")
        assert mpi.conditions("low")["Suspended"]["reason"] == "MPIJobResumed"
        assert kept_uids(mpi, "low") == uids


# --- 3. an invalid job is judged again ---------------------------------------------------------


def test_an_invalid_job_shows_why_and_runs_once_fixed(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    mx = Kubeflow(crds_installed, namespace, "mxjobs", "MXJob")
    with explained(op):
        bad = mxjob("fixme")
        bad["spec"]["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = (
            "main"
        )
        status = apply_and_wait(
            mx.cluster,
            bad,
            namespace=mx.ns,
            until=lambda s: (
                (s.get("lattice") or {}).get("stage") == "Wrong"
                and any(c.get("type") == "Created" for c in s.get("conditions") or [])
            ),
            what="fixme Wrong with its reason",
        )
        conds = {c["type"]: c for c in status["conditions"]}
        created = conds["Created"]
        assert (created["status"], created["reason"]) == ("False", "MXJobFailedValidation")
        assert "spec.mxReplicaSpecs.Worker.template.spec.containers" in created["message"]
        assert 'named "mxnet"' in created["message"]
        assert "Failed" not in conds, "an invalid job is not failed"
        assert status["lattice"].get("reason") == "InvalidSpec"
        assert mx.pods("fixme") == {}
        assert mx.wait_event("fixme", "MXJobFailedValidation")["type"] == "Warning"

        fixed = mxjob("fixme")["spec"]["mxReplicaSpecs"]["Worker"]
        body = json.dumps({"spec": {"mxReplicaSpecs": {"Worker": fixed}}})
        crds_installed.kubectl(
            "patch", "mxjob", "fixme", "-n", namespace, "--type=merge", "-p", body
        )
        status = mx.wait_condition("fixme", "Running")
        assert mx.conditions("fixme")["Created"]["status"] == "True"
        lattice = status.get("lattice") or {}
        assert lattice.get("stage") == "Running"
        assert "reason" not in lattice, lattice
        wait_for(
            lambda: mx.phases("fixme"),
            lambda p: len(p) == 2 and set(p.values()) == {"Running"},
            timeout=TIMEOUT,
            what="the scheduler and worker of fixme Running",
        )
