"""Projections: what PodInfo, ForeignPodUsage, NodeInfo and ObjectInfo keep, and the requests."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from lattice.primitives.keys import object_key, owner_key
from lattice.primitives.objects import Obj
from lattice.primitives.quantity import resource_units
from lattice.runtime.projections import (
    NODE_INDEX,
    OWNER_INDEX,
    POD_INDEXES,
    ContainerInfo,
    OwnerRef,
    foreign_pod_usage,
    node_index,
    node_info,
    object_info,
    pod_info,
    pod_info_keeping,
    pod_owner_index,
    strip_managed_fields,
)
from lattice.runtime.store import Store


def container(
    name: str, requests: Obj | None = None, *, limits: Obj | None = None, **kw: Any
) -> Obj:
    resources: Obj = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "img", "resources": resources, **kw}


def make_pod(
    name: str = "job-a-worker-0",
    *,
    namespace: str = "team",
    node: str | None = "node-1",
    phase: str = "Running",
    owner: bool = True,
    conditions: list[Obj] | None = None,
    container_statuses: list[Obj] | None = None,
    reason: str | None = None,
    deletion: str | None = None,
) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": "12345",
        "creationTimestamp": "2026-03-01T10:00:00Z",
        "labels": {
            "training.kubeflow.org/job-name": "job-a",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "0",
            "training.kubeflow.org/operator-name": "lattice",
            "app.kubernetes.io/name": "ignored",
            "pod-template-hash": "ignored",
        },
        "annotations": {"big": "x" * 500},
        "managedFields": [{"manager": "lattice", "operation": "Update", "fieldsV1": {"f:x": {}}}],
    }
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "unrelated", "uid": "u0"},
            {
                "apiVersion": "lattice.dev/v1",
                "kind": "TrainingJob",
                "name": "job-a",
                "uid": "job-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            },
        ]
    if deletion:
        meta["deletionTimestamp"] = deletion
    spec: Obj = {
        "containers": [
            container("main", {"cpu": "3500m", "memory": "16Gi", "nvidia.com/gpu": "8"}),
            container("sidecar-log", {"cpu": "100m", "memory": "64Mi"}),
        ]
    }
    if node:
        spec["nodeName"] = node
    status: Obj = {"phase": phase, "conditions": conditions or []}
    if container_statuses is not None:
        status["containerStatuses"] = container_statuses
    if reason:
        status["reason"] = reason
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def test_pod_info_keeps_identity_owner_labels_and_requests() -> None:
    p = pod_info(make_pod())
    assert (p.namespace, p.name, p.uid, p.resource_version) == (
        "team",
        "job-a-worker-0",
        "uid-job-a-worker-0",
        "12345",
    )
    assert p.key == "team/job-a-worker-0"
    assert p.owner == OwnerRef("lattice.dev/v1", "TrainingJob", "job-a", "job-uid")
    assert p.labels == {
        "training.kubeflow.org/job-name": "job-a",
        "training.kubeflow.org/operator-name": "lattice",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/replica-type": "worker",
    }
    assert (p.job_name, p.replica_type, p.replica_index) == ("job-a", "worker", 0)
    assert p.label("app.kubernetes.io/name") is None
    assert p.requests == (("cpu", 3600), ("memory", 16 * 2**30 + 64 * 2**20), ("nvidia.com/gpu", 8))
    assert p.request("nvidia.com/gpu") == 8
    assert p.request("example.com/fpga") == 0
    assert p.phase == "Running"
    assert p.node_name == "node-1"
    assert p.creation_timestamp == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert p.deletion_timestamp is None
    assert not p.terminal


def test_pod_info_keeping_other_prefixes() -> None:
    transform = pod_info_keeping(("app.kubernetes.io/",))
    assert transform(make_pod()).labels == {"app.kubernetes.io/name": "ignored"}
    assert transform.__name__ != pod_info.__name__


def test_pod_info_without_controller_ref_or_labels() -> None:
    raw = make_pod(owner=False)
    del raw["metadata"]["labels"]
    p = pod_info(raw)
    assert p.owner is None
    assert p.labels == {}
    assert p.replica_index is None
    assert pod_owner_index(p) == ()


def test_container_states_exit_codes_and_restarts() -> None:
    statuses = [
        {
            "name": "main",
            "restartCount": 2,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
        },
        {"name": "sidecar-log", "restartCount": 0, "state": {"running": {"startedAt": "x"}}},
        {
            "name": "retry",
            "restartCount": 5,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 3}},
        },
    ]
    p = pod_info(make_pod(container_statuses=statuses))
    assert p.containers == (
        ContainerInfo("main", 2, "terminated", "OOMKilled", 137, 1),
        ContainerInfo("sidecar-log", 0, "running", None, None, None),
        ContainerInfo("retry", 5, "waiting", "CrashLoopBackOff", None, 3),
    )


@pytest.mark.parametrize(
    ("conditions", "reason", "want"),
    [
        pytest.param([], None, (False, None, None, False), id="plain"),
        pytest.param([], "Evicted", (False, "Evicted", None, False), id="evicted"),
        pytest.param(
            [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}],
            None,
            (False, None, "PreemptionByScheduler", False),
            id="disruption target",
        ),
        pytest.param(
            [{"type": "DisruptionTarget", "status": "False", "reason": "X"}],
            None,
            (False, None, None, False),
            id="disruption target false",
        ),
        pytest.param(
            [{"type": "Ready", "status": "True"}], None, (True, None, None, False), id="ready"
        ),
        pytest.param(
            [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": "2026-03-01T10:00:05Z",
                }
            ],
            None,
            (False, None, None, True),
            id="unschedulable",
        ),
    ],
)
def test_conditions(conditions: list[Obj], reason: str | None, want: tuple[Any, ...]) -> None:
    p = pod_info(make_pod(conditions=conditions, reason=reason, node=None, phase="Pending"))
    assert (p.ready, p.reason, p.disruption, p.unschedulable) == want
    if p.unschedulable:
        assert p.unschedulable_since == datetime(2026, 3, 1, 10, 0, 5, tzinfo=UTC)
    else:
        assert p.unschedulable_since is None
    assert p.unschedulable_message == ""


def test_kube_schedulers_message_is_kept_while_unschedulable() -> None:
    message = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    refused = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    p = pod_info(make_pod(conditions=[{**refused, "message": message}], node=None))
    assert (p.unschedulable, p.unschedulable_message) == (True, message)
    bound = {"type": "PodScheduled", "status": "True", "message": "stale"}
    assert pod_info(make_pod(conditions=[bound])).unschedulable_message == ""


def test_deleting_and_terminal_pods() -> None:
    p = pod_info(make_pod(phase="Failed", deletion="2026-03-01T11:00:00Z"))
    assert p.terminal
    assert p.deletion_timestamp == datetime(2026, 3, 1, 11, tzinfo=UTC)


def test_strings_and_shared_parts_are_interned_across_pods() -> None:
    # parse from JSON so no string object is shared by construction
    a = pod_info(json.loads(json.dumps(make_pod("job-a-worker-0"))))
    b = pod_info(json.loads(json.dumps(make_pod("job-a-worker-1"))))
    assert a.namespace is b.namespace
    assert a.node_name is b.node_name
    assert a.phase is b.phase
    assert a.owner is b.owner
    assert a.requests is b.requests
    assert all(x is y for x, y in zip(a.labels_flat, b.labels_flat, strict=True))
    assert a.creation_timestamp is b.creation_timestamp


def test_projection_equality_ignores_dropped_fields() -> None:
    raw = make_pod()
    changed = copy.deepcopy(raw)
    changed["metadata"]["annotations"]["big"] = "y"
    changed["metadata"]["managedFields"] = []
    assert pod_info(raw) == pod_info(changed)
    changed["metadata"]["resourceVersion"] = "12346"
    assert pod_info(raw) != pod_info(changed)


def test_owner_and_node_indexes_in_a_store() -> None:
    store: Store[Any] = Store()
    for name, fn in POD_INDEXES.items():
        store.add_index(name, fn)
    pods = [make_pod("job-a-worker-0"), make_pod("job-a-worker-1", node="node-2")]
    orphan = make_pod("job-a-worker-2", owner=False, node=None)
    for raw in [*pods, orphan]:
        store.upsert(object_key(raw), pod_info(raw))
    assert store.index_keys(OWNER_INDEX, owner_key("TrainingJob", "team", "job-a")) == [
        "team/job-a-worker-0",
        "team/job-a-worker-1",
    ]
    assert store.index_keys(OWNER_INDEX, owner_key("", "team", "job-a")) == ["team/job-a-worker-2"]
    assert store.index_keys(NODE_INDEX, "node-2") == ["team/job-a-worker-1"]
    assert node_index(pod_info(orphan)) == ()


@pytest.mark.parametrize(
    ("node", "phase", "want_node"),
    [
        pytest.param("node-1", "Running", "node-1", id="running"),
        pytest.param("node-1", "Pending", "node-1", id="bound, not started"),
        pytest.param(None, "Pending", None, id="unbound"),
        pytest.param("node-1", "Succeeded", None, id="succeeded"),
        pytest.param("node-1", "Failed", None, id="failed"),
    ],
)
def test_foreign_pod_usage(node: str | None, phase: str, want_node: str | None) -> None:
    usage = foreign_pod_usage(make_pod(node=node, phase=phase))
    if want_node is None:
        assert usage is None
    else:
        assert usage is not None
        assert usage.node_name == want_node
        assert dict(usage.requests)["nvidia.com/gpu"] == 8


def test_identical_foreign_pods_share_one_value() -> None:
    a = foreign_pod_usage(json.loads(json.dumps(make_pod("x"))))
    b = foreign_pod_usage(json.loads(json.dumps(make_pod("y"))))
    assert a is b


def test_node_info() -> None:
    raw: Obj = {
        "metadata": {"name": "gpu-7", "resourceVersion": "9", "labels": {"pool": "a100"}},
        "spec": {
            "unschedulable": True,
            "taints": [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
            ],
        },
        "status": {
            "allocatable": {
                "cpu": "95500m",
                "memory": "1Ti",
                "pods": "110",
                "nvidia.com/gpu": "8",
                "ephemeral-storage": "100G",
            },
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
        },
    }
    n = node_info(raw)
    assert n.name == "gpu-7"
    assert n.resource_version == "9"
    assert n.labels == {"pool": "a100"}
    assert n.allocatable == {
        "cpu": 95500,
        "memory": 2**40,
        "pods": 110,
        "nvidia.com/gpu": 8,
        "ephemeral-storage": 100 * 10**9,
    }
    assert n.ready
    assert n.unschedulable
    assert n.taints == (
        ("nvidia.com/gpu", "present", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "", "NoExecute"),
    )
    raw["status"]["conditions"][1]["status"] = "Unknown"
    assert not node_info(raw).ready


def test_object_info_and_strip_managed_fields() -> None:
    raw = make_pod()
    info = object_info(raw)
    assert info.key == "team/job-a-worker-0"
    assert info.owner is not None
    assert info.owner.kind == "TrainingJob"
    assert "managedFields" not in strip_managed_fields(raw)["metadata"]
    assert object_info({"metadata": {"name": "n"}}).key == "n"


@pytest.mark.parametrize(
    ("name", "quantity", "want"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", "0.1", 100),
        ("cpu", "1u", 1),  # rounds up
        ("memory", "1Gi", 2**30),
        ("memory", "1G", 10**9),
        ("memory", "129e6", 129_000_000),
        ("nvidia.com/gpu", 8, 8),
        ("pods", "110", 110),
    ],
)
def test_resource_units(name: str, quantity: object, want: int) -> None:
    assert resource_units(name, quantity) == want
