"""The runtime's JobSet fields that act on a TrainJob's children, end to end: the operator
process, the local control plane, kwok nodes (JobSet v0.12, as Trainer v2.3 uses it).

1. ``coordinator`` and ``replicatedJobs[].groupName``: every pod carries the coordinator's
   endpoint (``jobset.sigs.k8s.io/coordinator``, label and annotation) and the group keys; a
   Job's ``completions`` caps its pods; a TrainJob whose nodes do not reach the coordinator's
   podIndex is invalid, naming ``spec.trainer.numNodes``.
2. ``ttlSecondsAfterFinished``: the pods stay after the TrainJob completed, then go once the TTL
   passed; the TrainJob stays, still ``Complete``.
3. ``volumeClaimPolicies``: the claims ``<template>-<tj>`` exist (the Delete one owned by the
   TrainJob, the Retain one by nobody) and the pods mount them; deleting the TrainJob deletes
   the owned claim (garbage collector) and keeps the retained one.
Pods finish through kwok (``kwok.lattice.breezeml.ai/exit-code``).
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import FLAGS, TIMEOUT, controller_of
from tests.e2e.test_trainjob import GROUP, runtime, trainjob, trainjobs, wait_pods
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

JOBSET = "jobset.sigs.k8s.io"
#: Long enough that the pods are surely still there when the test sees Complete.
TTL = 20


def with_jobset(name: str, **fields: Any) -> dict[str, Any]:
    """``runtime(name)`` with JobSet spec ``fields`` added."""
    rt = runtime(name)
    rt["spec"]["template"]["spec"].update(fields)
    return rt


def test_coordinator_and_group_keys_are_on_every_pod(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    rt = with_jobset("coord", coordinator={"replicatedJob": "node", "podIndex": 1})
    aux_pod = {"containers": [{"name": "aux", "image": "busybox"}], "restartPolicy": "Never"}
    aux = {"name": "aux", "groupName": "helpers", "replicas": 2}
    # completions caps a Job's pods (one per completion index): 1 pod per Job, not 3.
    aux["template"] = {"spec": {"parallelism": 3, "completions": 1, "template": {"spec": aux_pod}}}
    rt["spec"]["template"]["spec"]["replicatedJobs"].append(aux)
    with explained(op):
        tj.apply(rt)
        tj.apply(trainjob("co", "coord", nodes=2))
        pods = wait_pods(tj, "co", 4)
        assert sorted(pods) == ["co-aux-0-0", "co-aux-1-0", "co-node-0-0", "co-node-0-1"]
        for name, pod in pods.items():
            meta = pod["metadata"]
            for block in (meta["labels"], meta["annotations"]):
                assert block[f"{JOBSET}/coordinator"] == "co-node-0-1.co", name
        groups = {
            name: tuple(
                pod["metadata"]["labels"][f"{JOBSET}/{key}"]
                for key in ("group-name", "group-replicas", "job-group-index")
            )
            for name, pod in pods.items()
        }
        assert groups == {
            "co-node-0-0": ("default", "1", "0"),
            "co-node-0-1": ("default", "1", "0"),
            "co-aux-0-0": ("helpers", "2", "0"),
            "co-aux-1-0": ("helpers", "2", "1"),
        }

        tj.apply(trainjob("short", "coord", nodes=1))
        status = tj.wait_condition("short", "Created", "False")
        created = {c["type"]: c for c in status["conditions"]}["Created"]
        assert "spec.trainer.numNodes" in created["message"]
        assert "podIndex 1" in created["message"]
        assert tj.pods("short") == {}


def test_ttl_after_finished_deletes_the_pods_and_keeps_the_trainjob(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    with explained(op):
        tj.apply(with_jobset("ttl", ttlSecondsAfterFinished=TTL))
        tj.apply(trainjob("brief", "ttl", nodes=2))
        pods = wait_pods(tj, "brief", 2)
        for name in pods:
            tj.finish(name, 0)
        tj.wait_condition("brief", "Complete")
        assert sorted(tj.pods("brief")) == sorted(pods), "the pods stay until the TTL"
        wait_for(
            lambda: tj.pods("brief"),
            lambda p: p == {},
            timeout=TTL + TIMEOUT,
            what="the pods deleted once the TTL passed",
        )
        conds = tj.conditions("brief")
        assert conds["Complete"]["status"] == "True", "the TrainJob stays, Complete"
        assert "brief-runtime" in tj.owned("configmaps", "brief"), "its ConfigMaps stay"


def test_volume_claim_policies_create_mount_and_retain_claims(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    policies = [
        {"templates": [{"metadata": {"name": "cache"}, "spec": spec}]},
        {
            "templates": [{"metadata": {"name": "keep"}, "spec": spec}],
            "retentionPolicy": {"whenDeleted": "Retain"},
        },
    ]
    rt = with_jobset("claims", volumeClaimPolicies=policies)
    (container,) = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["spec"]["containers"]
    container["volumeMounts"] = [
        {"name": "cache", "mountPath": "/cache"},
        {"name": "keep", "mountPath": "/keep"},
    ]
    with explained(op):
        tj.apply(rt)
        tj.apply(trainjob("vol", "claims"))
        # Nothing binds claims here (no volume controller), so the pod stays Pending.
        (pod,) = wait_for(
            lambda: list(tj.pods("vol").values()),
            lambda p: len(p) == 1,
            timeout=TIMEOUT,
            what="the pod of vol",
        )
        volumes = {v["name"]: v.get("persistentVolumeClaim") for v in pod["spec"]["volumes"]}
        assert volumes["cache"] == {"claimName": "cache-vol"}
        assert volumes["keep"] == {"claimName": "keep-vol"}
        claims = crds_installed.get_json("persistentvolumeclaims", "-n", namespace)["items"]
        by_name = {c["metadata"]["name"]: c for c in claims}
        assert set(by_name) == {"cache-vol", "keep-vol"}
        uid = tj.get("vol")["metadata"]["uid"]
        assert controller_of(by_name["cache-vol"]) == ("TrainJob", "vol", uid)
        assert not by_name["keep-vol"]["metadata"].get("ownerReferences")
        assert by_name["cache-vol"]["metadata"]["labels"][f"{JOBSET}/jobset-name"] == "vol"
        assert by_name["cache-vol"]["spec"]["resources"] == {"requests": {"storage": "1Gi"}}

        crds_installed.kubectl("delete", f"trainjobs.{GROUP}", "vol", "-n", namespace)
        wait_for(
            lambda: {
                c["metadata"]["name"]
                for c in crds_installed.get_json("persistentvolumeclaims", "-n", namespace)["items"]
                if not c["metadata"].get("deletionTimestamp")
            },
            lambda names: names == {"keep-vol"},
            timeout=TIMEOUT,
            what="the owned claim collected with the TrainJob, the retained one kept",
        )
