"""The Services cache (``ObjectInfo``) and the job objects' transform (``slim_object``).

Services: the reconciler reads which ones a job owns (owner index, controller ownerReference
UID), their names, replica index and deletion state; nothing else is kept. Jobs (and runtimes,
PriorityClasses): the whole object minus ``metadata.managedFields`` and the last-applied
annotation, rebuilt with shared keys and short strings, equal to the rest of the input.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lattice.primitives.keys import object_key, owner_key
from lattice.primitives.objects import Obj
from lattice.runtime.projections import (
    LAST_APPLIED,
    OWNER_INDEX,
    SHARED_STR_MAX,
    ObjectInfo,
    OwnerRef,
    object_info,
    object_owner_index,
    slim_object,
)
from lattice.runtime.store import Store


def service(
    name: str = "train-worker-3",
    *,
    owner_uid: str | None = "job-uid",
    controller: bool = True,
    deletion: str | None = None,
) -> Obj:
    """A headless Service of ours as the apiserver stores it."""
    meta: Obj = {
        "name": name,
        "namespace": "team",
        "uid": f"uid-{name}",
        "resourceVersion": "4000003",
        "creationTimestamp": "2026-11-22T10:00:03Z",
        "labels": {
            "lattice.breezeml.ai/managed": "true",
            "training.kubeflow.org/job-name": "train",
            "training.kubeflow.org/operator-name": "lattice",
            "training.kubeflow.org/replica-index": name.rsplit("-", 1)[1],
            "training.kubeflow.org/replica-type": "worker",
        },
        "managedFields": [
            {
                "manager": "lattice-operator",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-11-22T10:00:03Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:clusterIP": {}, "f:ports": {}}},
            }
        ],
    }
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "breezeml.ai/v1",
                "kind": "TrainingJob",
                "name": "train",
                "uid": owner_uid,
                "controller": controller,
                "blockOwnerDeletion": True,
            }
        ]
    if deletion:
        meta["deletionTimestamp"] = deletion
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "clusterIPs": ["None"],
            "selector": {"training.kubeflow.org/job-name": "train"},
            "ports": [{"name": "trainingjob-port", "port": 23456, "protocol": "TCP"}],
            "type": "ClusterIP",
            "sessionAffinity": "None",
        },
        "status": {"loadBalancer": {}},
    }


# --- Services: ObjectInfo ------------------------------------------------------------------------


def test_object_info_keeps_what_the_reconciler_reads_of_a_service() -> None:
    info = object_info(service())
    assert (info.namespace, info.name, info.key) == (
        "team",
        "train-worker-3",
        "team/train-worker-3",
    )
    assert (info.uid, info.resource_version) == ("uid-train-worker-3", "4000003")
    assert info.owner == OwnerRef("breezeml.ai/v1", "TrainingJob", "train", "job-uid")
    assert info.replica_index == 3
    assert info.label("training.kubeflow.org/job-name") == "train"
    assert info.label("lattice.breezeml.ai/managed") is None, "only the Kubeflow prefixes"
    assert info.creation_timestamp == datetime(2026, 11, 22, 10, 0, 3, tzinfo=UTC)
    assert info.deletion_timestamp is None
    deleting = object_info(service(deletion="2026-11-22T11:00:00Z"))
    assert deleting.deletion_timestamp == datetime(2026, 11, 22, 11, 0, tzinfo=UTC)
    assert object_info(service(owner_uid=None)).owner is None
    assert object_info(service(controller=False)).owner is None, "only the controller ref"


def test_object_info_equality_ignores_what_it_does_not_keep() -> None:
    raw = service()
    changed = copy.deepcopy(raw)
    changed["spec"]["ports"][0]["port"] = 1
    changed["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}
    changed["metadata"]["managedFields"] = []
    changed["metadata"]["labels"]["other"] = "x"
    assert object_info(raw) == object_info(changed)
    assert hash(object_info(raw)) == hash(object_info(changed))
    edits: tuple[Callable[[Obj], None], ...] = (
        lambda m: m.update(resourceVersion="4000004"),
        lambda m: m.update(deletionTimestamp="2026-11-22T11:00:00Z"),
        lambda m: m["labels"].update({"training.kubeflow.org/replica-index": "4"}),
        lambda m: m["ownerReferences"][0].update(uid="other-uid"),
    )
    for edit in edits:
        other = copy.deepcopy(raw)
        edit(other["metadata"])
        assert object_info(other) != object_info(raw)


def test_object_owner_index_finds_a_jobs_services_by_controller_owner() -> None:
    store: Store[ObjectInfo] = Store()
    store.add_index(OWNER_INDEX, object_owner_index)
    raws = [
        service("train-worker-0"),
        service("train-worker-1", owner_uid="old-uid"),  # same name, re-created job
        service("train-worker-2", owner_uid=None),  # not adopted by label
        service("train-worker-3", controller=False),
    ]
    for raw in raws:
        store.upsert(object_key(raw), object_info(raw))
    assert store.index_keys(OWNER_INDEX, owner_key("TrainingJob", "team", "train")) == [
        "team/train-worker-0",
        "team/train-worker-1",
    ]
    assert store.index_keys(OWNER_INDEX, owner_key("", "team", "train")) == []
    assert object_owner_index(object_info(raws[2])) == ()


# --- jobs: slim_object ------------------------------------------------------------------------


def job(name: str = "train-00001", *, extra_annotations: Obj | None = None) -> Obj:
    """A TrainingJob as ``kubectl apply`` and the operator leave it in the apiserver."""
    user: Obj = {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": "team", "labels": {"team": "team"}},
        "spec": {
            "minSize": 4,
            "maxSize": 8,
            "priority": 100,
            "replicaSpecs": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "trainingjob",
                                "image": "example.com/train:1",
                                "args": ["--epochs=90", f"--name={name}"],
                                "resources": {"limits": {"nvidia.com/gpu": 1}},
                            }
                        ]
                    }
                }
            },
        },
    }
    obj = copy.deepcopy(user)
    meta = obj["metadata"]
    meta.update(
        uid=f"uid-{name}",
        resourceVersion="7001",
        generation=1,
        creationTimestamp="2026-11-22T10:00:00Z",
        annotations={LAST_APPLIED: json.dumps(user) + "\n", **(extra_annotations or {})},
        managedFields=[
            {"manager": "kubectl-client-side-apply", "operation": "Update", "fieldsV1": {}},
            {"manager": "lattice", "operation": "Update", "subresource": "status"},
        ],
    )
    obj["status"] = {
        "stage": "Running",
        "currentSize": 4,
        "attainedService": 1234.5,
        "queuePosition": None,
        "message": f"TrainingJob team/{name} is running. " + "x" * SHARED_STR_MAX,
        "execStatus": {
            "conditions": [
                {"type": "Created", "status": "True", "reason": "TrainingJobCreated"},
                {"type": "Running", "status": "True", "reason": "TrainingJobRunning"},
            ],
        },
    }
    return obj


def without_dropped(obj: Obj) -> Obj:
    want = copy.deepcopy(obj)
    want["metadata"].pop("managedFields")
    want["metadata"]["annotations"].pop(LAST_APPLIED)
    return want


def containers(value: Any) -> list[Any]:
    """Every dict and list inside ``value``, itself included."""
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in containers(v))]
    return []


def test_slim_object_drops_managed_fields_and_last_applied_and_keeps_the_rest() -> None:
    raw = job(extra_annotations={"team.example.com/owner": "alice"})
    before = copy.deepcopy(raw)
    slim = slim_object(raw)
    assert slim == without_dropped(raw)
    assert slim["metadata"]["annotations"] == {"team.example.com/owner": "alice"}
    assert raw == before, "the input is not changed"
    assert list(slim) == list(raw), "same keys, same order"
    assert list(slim["metadata"]) == [k for k in raw["metadata"] if k != "managedFields"]
    # the cached value shares no container with the event payload it came from
    assert not {id(c) for c in containers(slim)} & {id(c) for c in containers(raw)}


def test_slim_object_keeps_an_emptied_annotations_map_and_objects_without_either() -> None:
    slim = slim_object(job())
    assert slim["metadata"]["annotations"] == {}
    assert "managedFields" not in slim["metadata"]
    plain = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 1000,
             "metadata": {"name": "high"}, "globalDefault": False}  # fmt: skip
    assert slim_object(plain) == plain
    assert slim_object({}) == {}


def test_slim_object_is_deterministic_and_idempotent() -> None:
    raw = job()
    assert slim_object(raw) == slim_object(copy.deepcopy(raw))
    assert slim_object(slim_object(raw)) == slim_object(raw)
    changed = copy.deepcopy(raw)
    changed["status"]["currentSize"] = 5
    assert slim_object(changed) != slim_object(raw)
    noise = copy.deepcopy(raw)
    noise["metadata"]["managedFields"].append({"manager": "kubectl-edit"})
    assert slim_object(noise) == slim_object(raw), "a managedFields-only change is a no-op"


def test_slim_object_shares_keys_and_short_strings_between_similar_jobs() -> None:
    # parsed from JSON text, as the client does, so nothing is shared by construction
    a = slim_object(json.loads(json.dumps(job("train-00001"))))
    b = slim_object(json.loads(json.dumps(job("train-00002"))))
    ca, cb = (
        a["spec"]["replicaSpecs"]["template"]["spec"]["containers"][0],
        b["spec"]["replicaSpecs"]["template"]["spec"]["containers"][0],
    )
    assert ca["image"] is cb["image"]
    assert ca["args"][0] is cb["args"][0]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["status"]["stage"] is b["status"]["stage"]
    conditions = (a["status"]["execStatus"]["conditions"], b["status"]["execStatus"]["conditions"])
    for x, y in zip(*conditions, strict=True):
        assert all(k1 is k2 and x[k1] is y[k2] for k1, k2 in zip(x, y, strict=True))
    assert all(k1 is k2 for k1, k2 in zip(a["spec"], b["spec"], strict=True))
    # equal values whatever is shared: numbers, None and long strings are kept as they are
    assert a["status"]["attainedService"] == 1234.5
    assert a["status"]["queuePosition"] is None
    assert a["status"]["message"].startswith("TrainingJob team/train-00001 is running.")
