"""The JobSet fields of a TrainJob's runtime that Lattice acts on without a JobSet (JobSet
v0.12, Trainer v2.3): ``coordinator`` (the endpoint on every pod, and its checks),
``replicatedJobs[].groupName`` (the group keys), ``volumeClaimPolicies`` (claims created,
mounted, owned or retained) and ``ttlSecondsAfterFinished`` (the children go, the TrainJob
stays, on the injected clock and across an operator restart), and a Job's ``completions``
(its pods capped; a second wave refused).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from lattice.controllers.job import JobReconciler
from lattice.frameworks.base import InvalidJob, OperatorContext
from lattice.frameworks.trainjob import TrainJobPlugin
from lattice.frameworks.trainjob_jobset import (
    LABEL_COORDINATOR,
    LABEL_GROUP_NAME,
    LABEL_GROUP_REPLICAS,
    LABEL_JOB_GROUP_INDEX,
)
from lattice.frameworks.trainjob_plans import RuntimeNotReady
from lattice.primitives.objects import Obj
from tests.unit.controllers.harness import Context, World

PLUGIN = TrainJobPlugin()
STEP = "trainer.kubeflow.org/trainjob-ancestor-step"


def rjob(name: str, *, step: str | None = None, mounts: tuple[str, ...] = (), **extra: Any) -> Obj:
    container: Obj = {"name": name, "image": "img:1"}
    if mounts:
        container["volumeMounts"] = [{"name": m, "mountPath": f"/{m}"} for m in mounts]
    job_spec: Obj = {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}
    job_spec.update(extra.pop("job_spec", {}))
    meta = {"labels": {STEP: step}} if step else {}
    return {"name": name, "template": {"metadata": meta, "spec": job_spec}, **extra}


def runtime(*jobs: Obj, nodes: int = 2, **template: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt"},
        "spec": {
            "mlPolicy": {"numNodes": nodes, "torch": {"numProcPerNode": "auto"}},
            "template": {
                "spec": {"replicatedJobs": list(jobs or [rjob("node", step="trainer")]), **template}
            },
        },
    }


def trainjob(name: str = "tj", **spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
        "spec": {"runtimeRef": {"name": "rt"}, **spec},
    }


def ctx(rt: Obj) -> OperatorContext:
    return OperatorContext(scheduling_unit="node", runtimes={"ClusterTrainingRuntime//rt": rt})


def pods(rt: Obj, tj: Obj | None = None, *, size: int = 2) -> list[Obj]:
    c = ctx(rt)
    return list(PLUGIN.children(PLUGIN.parse(tj or trainjob(), c), size=size, ctx=c).pods)


# --------------------------------------------------------------------------- coordinator


def test_the_coordinator_endpoint_is_on_every_pod_as_label_and_annotation() -> None:
    rt = runtime(coordinator={"replicatedJob": "node", "jobIndex": 0, "podIndex": 1})
    got = pods(rt)
    assert len(got) == 2
    for pod in got:
        meta = pod["metadata"]
        assert meta["labels"][LABEL_COORDINATOR] == "tj-node-0-1.tj"
        assert meta["annotations"][LABEL_COORDINATOR] == "tj-node-0-1.tj"
    sub = runtime(coordinator={"replicatedJob": "node"}, network={"subdomain": "svc"})
    assert pods(sub)[0]["metadata"]["labels"][LABEL_COORDINATOR] == "tj-node-0-0.svc"
    assert LABEL_COORDINATOR not in pods(runtime())[0]["metadata"]["labels"]


@pytest.mark.parametrize(
    ("coordinator", "field"),
    [
        ({"replicatedJob": "nope"}, "spec.template.spec.coordinator.replicatedJob"),
        ({"replicatedJob": "node", "jobIndex": 1}, "spec.template.spec.coordinator.jobIndex"),
        (
            {"replicatedJob": "side", "podIndex": 3},
            "spec.template.spec.coordinator.podIndex",
        ),
    ],
)
def test_a_coordinator_the_runtime_cannot_have_makes_the_trainjob_wait(
    coordinator: Obj, field: str
) -> None:
    rt = runtime(
        rjob("node", step="trainer"),
        rjob("side", job_spec={"parallelism": 3}),
        coordinator=coordinator,
    )
    with pytest.raises(RuntimeNotReady) as caught:
        PLUGIN.parse(trainjob(), ctx(rt))
    assert caught.value.reason == "InvalidRuntime"
    assert field in caught.value.message


def test_a_coordinator_pod_beyond_the_trainjobs_nodes_makes_it_invalid() -> None:
    rt = runtime(coordinator={"replicatedJob": "node", "podIndex": 2})
    with pytest.raises(InvalidJob) as caught:
        PLUGIN.parse(trainjob(), ctx(rt))
    assert [p.field for p in caught.value.problems] == ["spec.trainer.numNodes"]
    assert "podIndex 2" in str(caught.value)
    job = PLUGIN.parse(trainjob(trainer={"numNodes": 3}), ctx(rt))
    assert job.coordinator == "tj-node-0-2.tj"


def test_a_coordinator_endpoint_too_long_for_a_label_names_the_trainjob_name() -> None:
    rt = runtime(coordinator={"replicatedJob": "node"}, network={"subdomain": "s" * 40})
    with pytest.raises(InvalidJob) as caught:
        PLUGIN.parse(trainjob("t" * 20), ctx(rt))
    assert [p.field for p in caught.value.problems] == ["metadata.name"]
    assert "label value" in str(caught.value)


# --------------------------------------------------------------------------- groups


def test_group_keys_count_the_jobs_of_each_group_in_order() -> None:
    rt = runtime(
        rjob("node", step="trainer"),
        rjob("a", replicas=2, groupName="workers"),
        rjob("b", replicas=3, groupName="workers"),
    )
    got = {p["metadata"]["name"]: p["metadata"] for p in pods(rt, size=7)}
    keys = (LABEL_GROUP_NAME, LABEL_GROUP_REPLICAS, LABEL_JOB_GROUP_INDEX)

    def group(name: str) -> tuple[str, ...]:
        labels = got[name]["labels"]
        assert all(got[name]["annotations"][k] == labels[k] for k in keys)
        return tuple(labels[k] for k in keys)

    assert group("tj-node-0-0") == ("default", "1", "0")
    assert group("tj-a-0-0") == ("workers", "5", "0")
    assert group("tj-a-1-0") == ("workers", "5", "1")
    assert group("tj-b-0-0") == ("workers", "5", "2")
    assert group("tj-b-2-0") == ("workers", "5", "4")


# --------------------------------------------------------------------------- volume claims


def claims_runtime(retain: bool = False) -> Obj:
    policy: Obj = {
        "templates": [
            {
                "metadata": {"name": "cache", "labels": {"team": "a"}},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        ]
    }
    if retain:
        policy["retentionPolicy"] = {"whenDeleted": "Retain"}
    return runtime(
        rjob("init", mounts=("cache",)),
        rjob("node", step="trainer"),
        volumeClaimPolicies=[policy],
    )


def test_claims_are_created_owned_and_mounted_where_a_container_mounts_them() -> None:
    rt = claims_runtime()
    c = ctx(rt)
    job = PLUGIN.parse(trainjob(), c)
    for size in (0, 2):
        (pvc,) = PLUGIN.children(job, size=size, ctx=c).claims
        assert pvc["metadata"]["name"] == "cache-tj"
        assert pvc["metadata"]["labels"]["team"] == "a"
        assert pvc["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "tj"
        assert pvc["metadata"]["ownerReferences"][0]["uid"] == "uid-tj"
        assert pvc["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    by_name = {p["metadata"]["name"]: p["spec"] for p in pods(rt, size=2)}
    volume = {"name": "cache", "persistentVolumeClaim": {"claimName": "cache-tj"}}
    assert volume in by_name["tj-init-0-0"]["volumes"]
    assert "volumes" not in by_name["tj-node-0-0"], "no container of node mounts it"


def test_a_retained_claim_has_no_owner() -> None:
    c = ctx(claims_runtime(retain=True))
    (pvc,) = PLUGIN.children(PLUGIN.parse(trainjob(), c), size=1, ctx=c).claims
    assert "ownerReferences" not in pvc["metadata"]


def test_a_claim_no_container_mounts_makes_the_trainjob_wait() -> None:
    rt = claims_runtime()
    rt["spec"]["template"]["spec"]["replicatedJobs"][0] = rjob("init")
    with pytest.raises(RuntimeNotReady) as caught:
        PLUGIN.parse(trainjob(), ctx(rt))
    assert "volumeClaimPolicies.templates[0].metadata.name" in caught.value.message
    assert "mounted by no container" in caught.value.message


# --------------------------------------------------------------------------- completions


def test_completions_cap_a_jobs_pods_and_the_trainer_job_ignores_them() -> None:
    rt = runtime(
        rjob("node", step="trainer", job_spec={"parallelism": 1, "completions": 1}),
        rjob("side", job_spec={"parallelism": 3, "completions": 2}),
    )
    names = [p["metadata"]["name"] for p in pods(rt, size=4)]
    assert names == ["tj-node-0-0", "tj-node-0-1", "tj-side-0-0", "tj-side-0-1"]


@pytest.mark.parametrize("completions", [4, 0])
def test_completions_beyond_parallelism_make_the_trainjob_wait(completions: int) -> None:
    rt = runtime(
        rjob("node", step="trainer"),
        rjob("side", job_spec={"parallelism": 3, "completions": completions}),
    )
    with pytest.raises(RuntimeNotReady) as caught:
        PLUGIN.parse(trainjob(), ctx(rt))
    assert "spec.template.spec.replicatedJobs[1].template.spec.completions" in str(
        caught.value.message
    )
    assert "between 1 and parallelism (3)" in caught.value.message


# --------------------------------------------------------------------------- reconciler


def world(rt: Obj) -> World:
    w = World(PLUGIN, ctx=OperatorContext(scheduling_unit="node"))
    w.reconciler._context = Context(dataclasses.replace(w.ctx, runtimes=ctx(rt).runtimes))
    return w


async def finish(w: World) -> None:
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    for name in ("tj-node-0-0", "tj-node-0-1"):
        w.set_pod(name, "Succeeded")
    await w.reconcile("tj")
    assert w.conditions("tj")["Complete"]["status"] == "True"


async def test_ttl_deletes_the_children_after_the_finish_and_keeps_the_trainjob() -> None:
    rt = runtime(ttlSecondsAfterFinished=60)
    w = world(rt)
    await finish(w)
    assert (await w.reconcile("tj")).requeue_after == 60
    await w.clock.advance(59)
    assert (await w.reconcile("tj")).requeue_after == 1
    assert w.names("pods") == ["tj-node-0-0", "tj-node-0-1"]

    # An operator restart: a new reconciler over the same cluster keeps the deadline, which
    # counts from the Complete condition's time.
    w.reconciler = JobReconciler(
        plugin=PLUGIN,
        client=w.client,
        clock=w.clock,
        jobs=w.jobs,
        pods=w.pods,
        services=w.services,
        context=w.reconciler._context,
        expectations=w.reconciler._exp,
        recorder=w.reconciler._recorder,
        metrics=w.metrics,
        others=w.others,
    )
    assert (await w.reconcile("tj")).requeue_after == 1
    await w.clock.advance(1)
    assert (await w.reconcile("tj")).requeue_after is None
    assert w.names("pods") == []
    assert w.names("services") == []
    assert "tj-runtime" in w.names("configmaps"), "the TrainJob's own ConfigMaps stay"
    assert w.conditions("tj")["Complete"]["status"] == "True", "the TrainJob stays"
    assert ("delete", "TrainJob", "tj") not in w.calls
    await w.reconcile("tj")
    assert w.names("pods") == [], "nothing comes back"


async def test_without_ttl_finished_pods_stay() -> None:
    w = world(runtime())
    await finish(w)
    assert (await w.reconcile("tj")).requeue_after is None
    await w.clock.advance(3600)
    await w.reconcile("tj")
    assert w.names("pods") == ["tj-node-0-0", "tj-node-0-1"]


async def test_claims_exist_while_waiting_and_the_ttl_deletes_the_owned_ones_only() -> None:
    rt = claims_runtime()
    retained = claims_runtime(retain=True)["spec"]["template"]["spec"]["volumeClaimPolicies"][0]
    retained["templates"][0]["metadata"]["name"] = "keep"
    rt["spec"]["template"]["spec"]["volumeClaimPolicies"].append(retained)
    rt["spec"]["template"]["spec"]["replicatedJobs"][0] = rjob("init", mounts=("cache", "keep"))
    rt["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] = 0
    w = world(rt)
    w.apply(trainjob(), size=0)
    await w.reconcile("tj")
    assert w.names("persistentvolumeclaims") == ["cache-tj", "keep-tj"]
    assert w.names("pods") == []
    await w.reconcile("tj")
    assert sorted(c for c in w.calls if c[1] == "PersistentVolumeClaim") == [
        ("create", "PersistentVolumeClaim", "cache-tj"),
        ("create", "PersistentVolumeClaim", "keep-tj"),
    ], "each claim is created once"
    w.grant("tj", 3)
    await w.reconcile("tj")
    assert "tj-init-0-0" in w.names("pods")
    for name in w.names("pods"):
        w.set_pod(name, "Succeeded")
    await w.reconcile("tj")
    assert w.conditions("tj")["Complete"]["status"] == "True"
    await w.reconcile("tj")
    assert w.names("pods") == []
    assert w.names("persistentvolumeclaims") == ["keep-tj"], "Retain outlives the TTL"
