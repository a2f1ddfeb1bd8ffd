"""Slim, immutable projections of pods and nodes for the informer cache.

A raw Pod dict costs ~20 KB of Python heap (performance-anchors §2); these projections keep only
what the reconcilers and the scheduler read, in frozen ``slots`` dataclasses, and share whatever
repeats: strings go through ``sys.intern`` (namespaces, node names, label keys and values,
phases, reasons), and small immutable parts (owner references, request tuples, container states,
timestamps) through bounded intern tables, so the pods of one job share them. Measured with
``bench/bench_pod_memory.py``: about 0.8 KB per cached pod including the store's key and its
namespace/owner/node indexes, against ~23 KB for the raw dict.

Contract:
- Each transform takes the raw object (a dict from the apiserver) and returns a projection, or
  None to keep the object out of the cache. Projections are values: equal inputs (ignoring
  fields we drop) give equal projections, which the informer uses to skip no-op updates.
- ``PodInfo`` is for our own pods. Labels: only keys under ``KEPT_LABEL_PREFIXES`` are kept
  (``training.kubeflow.org/`` and ``trainer.kubeflow.org/``: job-name, replica-type,
  replica-index, job-role, operator-name), as a flat, key-sorted tuple ``(k1, v1, k2, v2, ...)``
  read through ``label()``/``labels``; ``pod_info_keeping(prefixes)`` keeps other prefixes.
- ``ForeignPodUsage`` is for every other pod bound to a node: just the node and the requests the
  scheduler must subtract from that node's capacity. Unbound and terminal pods give None. Watch
  them with ``FOREIGN_POD_FIELD_SELECTOR`` and a label selector that excludes our pods.
- ``NodeInfo`` holds allocatable units (``cpu`` in millicores, bytes, counts), readiness,
  ``spec.unschedulable`` and taints as ``(key, effect)`` pairs; the scheduler decides which taints
  it tolerates.
- ``ObjectInfo`` is a generic metadata projection (Services, ConfigMaps, ...).
- Index helpers: ``pod_owner_index`` (``OWNER_INDEX``) maps a pod to ``owner_key(kind, ns, name)``
  of its controller ownerReference, or to ``owner_key("", ns, job-name label)`` when it has only
  the label (an orphan to adopt); ``node_index`` (``NODE_INDEX``) maps to the node name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice.api.constants import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from lattice.runtime.interning import (
    Interner,
    OwnerRef,
    controller_ref,
    intern_opt,
    shared_time,
)
from lattice.runtime.quantity import ResourceList, pod_requests, resource_list

__all__ = [
    "FOREIGN_POD_FIELD_SELECTOR",
    "KEPT_LABEL_PREFIXES",
    "NODE_INDEX",
    "OWNER_INDEX",
    "POD_INDEXES",
    "ContainerInfo",
    "ForeignPodUsage",
    "NodeInfo",
    "ObjectInfo",
    "OwnerRef",
    "PodInfo",
    "foreign_pod_usage",
    "keep_raw",
    "node_index",
    "node_info",
    "object_info",
    "owner_key",
    "pod_info",
    "pod_info_keeping",
    "pod_owner_index",
    "raw_owner_index",
    "strip_managed_fields",
]

Obj = dict[str, Any]

KEPT_LABEL_PREFIXES: tuple[str, ...] = ("training.kubeflow.org/", "trainer.kubeflow.org/")
FOREIGN_POD_FIELD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
OWNER_INDEX = "owner"
NODE_INDEX = "node"

_intern = sys.intern
_opt = intern_opt
_time = shared_time
_controller_ref = controller_ref
_containers: Interner[ContainerInfo] = Interner()
_container_sets: Interner[tuple[ContainerInfo, ...]] = Interner()
_request_sets: Interner[ResourceList] = Interner()
_usages: Interner[ForeignPodUsage] = Interner()


def owner_key(kind: str, namespace: str, name: str) -> str:
    """The ``owner`` index value of ``kind/namespace/name`` (kind "" = known by label only)."""
    return f"{kind}/{namespace}/{name}"


def _labels(meta: Mapping[str, Any], prefixes: tuple[str, ...]) -> tuple[str, ...]:
    raw = meta.get("labels")
    if not raw:
        return ()
    flat: list[str] = []
    for key in sorted(k for k in raw if k.startswith(prefixes)):
        flat.append(_intern(key))
        flat.append(_intern(str(raw[key])))
    return tuple(flat)  # unique per pod (replica index): not worth a table entry


def _label(flat: tuple[str, ...], key: str) -> str | None:
    for i in range(0, len(flat), 2):
        if flat[i] == key:
            return flat[i + 1]
    return None


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """One container's status: ``state`` is waiting, running, terminated or "" (unknown).

    ``reason``/``exit_code`` come from the current state (a waiting reason such as
    CrashLoopBackOff, or a terminated reason and exit code); ``last_exit_code`` from the previous
    termination, which is where a restarted container's failure shows.
    """

    name: str
    restart_count: int
    state: str
    reason: str | None
    exit_code: int | None
    last_exit_code: int | None


def _container(status: Mapping[str, Any]) -> ContainerInfo:
    state = status.get("state") or {}
    kind = next((k for k in ("terminated", "running", "waiting") if k in state), "")
    detail = state.get(kind) or {}
    code = detail.get("exitCode") if kind == "terminated" else None
    last = ((status.get("lastState") or {}).get("terminated") or {}).get("exitCode")
    return _containers(
        ContainerInfo(
            name=_intern(str(status.get("name", ""))),
            restart_count=int(status.get("restartCount") or 0),
            state=kind,
            reason=_opt(detail.get("reason")),
            exit_code=None if code is None else int(code),
            last_exit_code=None if last is None else int(last),
        )
    )


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the reconcilers and the scheduler read about one of our pods."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    labels_flat: tuple[str, ...]
    owner: OwnerRef | None
    phase: str
    node_name: str | None
    #: ``status.reason``, e.g. Evicted, Preempting, UnexpectedAdmissionError.
    reason: str | None
    #: the reason of a True DisruptionTarget condition, e.g. PreemptionByScheduler.
    disruption: str | None
    ready: bool
    #: PodScheduled is False with reason Unschedulable; since when.
    unschedulable: bool
    unschedulable_since: datetime | None
    requests: ResourceList
    containers: tuple[ContainerInfo, ...]
    creation_timestamp: datetime | None
    deletion_timestamp: datetime | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def label(self, key: str) -> str | None:
        return _label(self.labels_flat, key)

    @property
    def labels(self) -> dict[str, str]:
        flat = self.labels_flat
        return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}

    @property
    def job_name(self) -> str | None:
        return self.label(LABEL_JOB_NAME)

    @property
    def replica_type(self) -> str | None:
        return self.label(LABEL_REPLICA_TYPE)

    @property
    def replica_index(self) -> int | None:
        value = self.label(LABEL_REPLICA_INDEX)
        return int(value) if value is not None and value.isdigit() else None

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def request(self, resource: str) -> int:
        return next((n for r, n in self.requests if r == resource), 0)


def pod_info_keeping(prefixes: tuple[str, ...]) -> Callable[[Obj], PodInfo]:
    """A ``PodInfo`` transform that keeps the labels under ``prefixes``."""

    def transform(obj: Obj) -> PodInfo:
        return _pod_info(obj, prefixes)

    transform.__name__ = "pod_info_" + "_".join(p.strip("/").replace(".", "_") for p in prefixes)
    return transform


def pod_info(obj: Obj) -> PodInfo:
    """The ``PodInfo`` transform, keeping ``KEPT_LABEL_PREFIXES``."""
    return _pod_info(obj, KEPT_LABEL_PREFIXES)


def _pod_info(obj: Obj, prefixes: tuple[str, ...]) -> PodInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = False
    unschedulable = False
    since = None
    disruption = None
    for cond in status.get("conditions") or ():
        ctype = cond.get("type")
        if ctype == "Ready":
            ready = cond.get("status") == "True"
        elif ctype == "PodScheduled":
            if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                unschedulable = True
                since = _time(cond.get("lastTransitionTime"))
        elif ctype == "DisruptionTarget" and cond.get("status") == "True":
            disruption = _opt(cond.get("reason"))
    return PodInfo(
        namespace=_intern(str(meta.get("namespace", ""))),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels_flat=_labels(meta, prefixes),
        owner=_controller_ref(meta),
        phase=_intern(str(status.get("phase") or "Pending")),
        node_name=_opt(spec.get("nodeName")),
        reason=_opt(status.get("reason")),
        disruption=disruption,
        ready=ready,
        unschedulable=unschedulable,
        unschedulable_since=since,
        requests=_request_sets(pod_requests(spec)),
        containers=_container_sets(
            tuple(_container(s) for s in status.get("containerStatuses") or ())
        ),
        creation_timestamp=_time(meta.get("creationTimestamp")),
        deletion_timestamp=_time(meta.get("deletionTimestamp")),
    )


def pod_owner_index(pod: PodInfo) -> tuple[str, ...]:
    """``OWNER_INDEX``: the controller owner, else the job-name label with an empty kind."""
    if pod.owner is not None:
        return (owner_key(pod.owner.kind, pod.namespace, pod.owner.name),)
    job = pod.job_name
    return (owner_key("", pod.namespace, job),) if job else ()


def raw_owner_index(obj: Obj) -> tuple[str, ...]:
    """``OWNER_INDEX`` for raw objects (Services, ConfigMaps): the controller owner."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            ns = str(meta.get("namespace", ""))
            return (owner_key(str(ref.get("kind", "")), ns, str(ref.get("name", ""))),)
    return ()


def node_index(value: PodInfo | ForeignPodUsage) -> tuple[str, ...]:
    """``NODE_INDEX``: the node a pod is bound to."""
    return (value.node_name,) if value.node_name else ()


POD_INDEXES: dict[str, Callable[[PodInfo], tuple[str, ...]]] = {
    OWNER_INDEX: pod_owner_index,
    NODE_INDEX: node_index,
}


@dataclass(frozen=True, slots=True)
class ForeignPodUsage:
    """A pod we do not manage, bound to ``node_name``: the capacity it takes there."""

    node_name: str
    requests: ResourceList


def foreign_pod_usage(obj: Obj) -> ForeignPodUsage | None:
    """None for pods that take no node capacity (unbound, Succeeded or Failed)."""
    node = (obj.get("spec") or {}).get("nodeName")
    phase = (obj.get("status") or {}).get("phase")
    if not node or phase in ("Succeeded", "Failed"):
        return None
    return _usages(
        ForeignPodUsage(
            node_name=_intern(str(node)),
            requests=_request_sets(pod_requests(obj.get("spec") or {})),
        )
    )


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node as the scheduler sees it. ``labels``/``allocatable`` are read-only by contract."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    ready: bool
    unschedulable: bool
    taints: tuple[tuple[str, str], ...]
    resource_version: str


def node_info(obj: Obj) -> NodeInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    return NodeInfo(
        name=_intern(str(meta.get("name", ""))),
        labels={_intern(k): _intern(str(v)) for k, v in (meta.get("labels") or {}).items()},
        allocatable={_intern(k): n for k, n in resource_list(status.get("allocatable")).items()},
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(
            (_intern(str(t.get("key", ""))), _intern(str(t.get("effect", ""))))
            for t in spec.get("taints") or ()
        ),
        resource_version=str(meta.get("resourceVersion", "")),
    )


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """Metadata only: enough to know an object exists, who owns it, and which version we saw."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    owner: OwnerRef | None
    creation_timestamp: datetime | None
    deletion_timestamp: datetime | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def object_info(obj: Obj) -> ObjectInfo:
    meta = obj.get("metadata") or {}
    return ObjectInfo(
        namespace=_intern(str(meta.get("namespace", ""))),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        owner=_controller_ref(meta),
        creation_timestamp=_time(meta.get("creationTimestamp")),
        deletion_timestamp=_time(meta.get("deletionTimestamp")),
    )


def keep_raw(obj: Obj) -> Obj:
    """The identity transform: cache the raw dict."""
    return obj


def strip_managed_fields(obj: Obj) -> Obj:
    """The raw dict without ``metadata.managedFields`` (client-go's TransformStripManagedFields)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj
