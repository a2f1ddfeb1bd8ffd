"""Slim projections of pods, nodes, Services and job objects for the informer cache.

A raw Pod dict costs tens of KB of Python heap; these projections keep only
what the reconcilers and the scheduler read, in frozen ``slots`` dataclasses, and share whatever
repeats: strings go through ``sys.intern`` (namespaces, node names, label keys and values,
phases, reasons), and small immutable parts (owner references, request tuples, container states,
timestamps) through bounded intern tables, so the pods of one job share them
(``bench/bench_pod_memory.py`` measures the cost per cached pod; figures in docs/performance.md).

Contract:
- Each transform takes the raw object (a dict from the apiserver) and returns a projection, or
  None to keep the object out of the cache. Projections are values: equal inputs (ignoring
  fields we drop) give equal projections, which the informer uses to skip no-op updates.
- ``PodInfo`` is for our own pods. Labels: only keys under ``KEPT_LABEL_PREFIXES`` are kept
  (``training.kubeflow.org/`` and ``trainer.kubeflow.org/``: job-name, replica-type,
  replica-index, job-role, operator-name; and a TrainJob pod's JobSet ``restart-attempt``), as a
  flat, key-sorted tuple ``(k1, v1, k2, v2, ...)``
  read through ``label()``/``labels``; ``pod_info_keeping(prefixes)`` keeps other prefixes.
- ``ForeignPodUsage`` is for every other pod bound to a node: just the node and the requests the
  scheduler must subtract from that node's capacity. Unbound and terminal pods give None. Watch
  them with ``FOREIGN_POD_FIELD_SELECTOR`` and a label selector that excludes our pods.
- ``NodeInfo`` holds labels, allocatable units of every resource (``cpu`` in millicores, bytes,
  counts, ``pods``), readiness, ``spec.unschedulable`` and taints as ``(key, value, effect)``
  triples; the scheduler decides which taints a pod tolerates.
- ``ObjectInfo`` is a generic metadata projection: identity, resourceVersion, controller owner,
  creation/deletion times and the ``KEPT_LABEL_PREFIXES`` labels. It is how our Services are
  cached (one per pod for TrainingJob: ~0.6 KB each instead of ~11 KB raw); the reconciler
  reads only which Services a job owns, their names, replica index and deletion state.
- ``slim_object`` is for objects whose content the readers parse (the job kinds, training
  runtimes, PriorityClasses): the object itself minus ``metadata.managedFields`` and the
  ``kubectl.kubernetes.io/last-applied-configuration`` annotation, rebuilt with its keys and
  short strings interned, so similar jobs share them (~4.5 KB per job instead of ~23 KB). The
  result is a plain dict, equal to the input minus those two: readers must not mutate it.
- ``keep_raw``/``strip_managed_fields`` cache the raw dict (whole, or without managedFields).
- Index helpers: ``pod_owner_index`` (``OWNER_INDEX``) maps a pod to ``owner_key(kind, ns, name)``
  of its controller ownerReference, or to ``owner_key("", ns, job-name label)`` when it has only
  the label (an orphan to adopt); ``object_owner_index`` maps an ``ObjectInfo`` to its controller
  owner only (a child without one is not ours); ``raw_owner_index`` does the same for raw dicts;
  ``node_index`` (``NODE_INDEX``) maps to the node name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice.api.constants import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from lattice.primitives.binding import bound_node
from lattice.primitives.keys import namespaced_key, owner_key
from lattice.primitives.objects import Obj
from lattice.primitives.requests import ResourceList, pod_requests, resource_list
from lattice.runtime.interning import (
    Interner,
    OwnerRef,
    controller_ref,
    intern_opt,
    shared_time,
)

__all__ = [
    "FOREIGN_POD_FIELD_SELECTOR",
    "KEPT_LABEL_PREFIXES",
    "LAST_APPLIED",
    "NODE_INDEX",
    "OWNER_INDEX",
    "POD_INDEXES",
    "SHARED_STR_MAX",
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
    "object_owner_index",
    "pod_info",
    "pod_info_keeping",
    "pod_owner_index",
    "raw_owner_index",
    "slim_object",
    "strip_managed_fields",
]

KEPT_LABEL_PREFIXES: tuple[str, ...] = (
    "training.kubeflow.org/",
    "trainer.kubeflow.org/",
    "jobset.sigs.k8s.io/restart-attempt",
)
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
    #: The node the pod's required node affinity binds it to (``primitives.binding``), if any.
    bound_node: str | None = None
    #: kube-scheduler's message while ``unschedulable`` (``0/8 nodes are available: ...``).
    unschedulable_message: str = ""

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
    message = ""
    disruption = None
    for cond in status.get("conditions") or ():
        ctype = cond.get("type")
        if ctype == "Ready":
            ready = cond.get("status") == "True"
        elif ctype == "PodScheduled":
            if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                unschedulable = True
                since = _time(cond.get("lastTransitionTime"))
                message = str(cond.get("message") or "")
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
        bound_node=_opt(bound_node(spec)),
        unschedulable_message=message,
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
    #: ``(key, value, effect)`` of each taint.
    taints: tuple[tuple[str, str, str], ...]
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
            (
                _intern(str(t.get("key") or "")),
                _intern(str(t.get("value") or "")),
                _intern(str(t.get("effect") or "")),
            )
            for t in spec.get("taints") or ()
        ),
        resource_version=str(meta.get("resourceVersion", "")),
    )


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """Metadata only: enough to know an object exists, who owns it, and which version we saw.

    ``labels_flat`` holds the labels under ``KEPT_LABEL_PREFIXES`` as for ``PodInfo`` (a Service
    of ours: job-name, replica-type, replica-index, ...); nothing else of the object is kept.
    """

    namespace: str
    name: str
    uid: str
    resource_version: str
    owner: OwnerRef | None
    creation_timestamp: datetime | None
    deletion_timestamp: datetime | None
    labels_flat: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)

    def label(self, key: str) -> str | None:
        return _label(self.labels_flat, key)

    @property
    def replica_index(self) -> int | None:
        value = self.label(LABEL_REPLICA_INDEX)
        return int(value) if value is not None and value.isdigit() else None


def object_info(obj: Obj) -> ObjectInfo:
    """The ``ObjectInfo`` transform (Services of ours; any object whose metadata is enough)."""
    meta = obj.get("metadata") or {}
    return ObjectInfo(
        namespace=_intern(str(meta.get("namespace", ""))),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        owner=_controller_ref(meta),
        creation_timestamp=_time(meta.get("creationTimestamp")),
        deletion_timestamp=_time(meta.get("deletionTimestamp")),
        labels_flat=_labels(meta, KEPT_LABEL_PREFIXES),
    )


def object_owner_index(value: ObjectInfo) -> tuple[str, ...]:
    """``OWNER_INDEX`` for ``ObjectInfo``: the controller owner (no label fallback)."""
    owner = value.owner
    return (owner_key(owner.kind, value.namespace, owner.name),) if owner is not None else ()


#: What ``slim_object`` drops from ``metadata``: written by and for the apiserver and kubectl,
#: read by nobody here, and about half of a job object's size.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: Strings up to this length are interned by ``slim_object`` (keys always): enum values, image
#: names, label values, timestamps repeat across similar jobs; long ones (messages) rarely do.
SHARED_STR_MAX = 64
#: Metadata values unique to one object: copied as they are, never interned.
_UNIQUE_META = frozenset({"name", "uid", "resourceVersion", "generateName", "selfLink"})


def _share(value: Any) -> Any:
    """A deep copy of JSON ``value`` with dict keys and short strings interned."""
    kind = type(value)
    if kind is str:
        return _intern(value) if len(value) <= SHARED_STR_MAX else value
    if kind is dict:
        return {(_intern(k) if type(k) is str else k): _share(v) for k, v in value.items()}
    if kind is list:
        return [_share(v) for v in value]
    return value  # int, float, bool, None: immutable, shared as they are


def slim_object(obj: Obj) -> Obj:
    """A job-like object (jobs, runtimes, PriorityClasses) as readers see it, compact.

    A new dict, equal to ``obj`` except that ``metadata.managedFields`` and the
    ``kubectl.kubernetes.io/last-applied-configuration`` annotation are gone (an annotations
    map that held only it stays, empty). Every container is rebuilt (the cached value shares
    nothing mutable with ``obj``, and holds none of the parsed page's containers), every dict
    key and every string of at most ``SHARED_STR_MAX`` characters is ``sys.intern``-ed except
    the per-object ``_UNIQUE_META`` values, so 10,000 similar jobs share their keys, enum values,
    images and label values. Deterministic: equal inputs give equal outputs.
    """
    out: Obj = {}
    for key, value in obj.items():
        if key == "metadata" and type(value) is dict:
            out["metadata"] = _slim_meta(value)
        else:
            out[_intern(key) if type(key) is str else key] = _share(value)
    return out


def _slim_meta(meta: Obj) -> Obj:
    out: Obj = {}
    for key, value in meta.items():
        if key == "managedFields":
            continue
        if key in _UNIQUE_META and type(value) is str:
            out[_intern(key)] = value
        elif key == "annotations" and type(value) is dict and LAST_APPLIED in value:
            out["annotations"] = _share({k: v for k, v in value.items() if k != LAST_APPLIED})
        else:
            out[_intern(key) if type(key) is str else key] = _share(value)
    return out


def keep_raw(obj: Obj) -> Obj:
    """The identity transform: cache the raw dict."""
    return obj


def strip_managed_fields(obj: Obj) -> Obj:
    """The raw dict without ``metadata.managedFields`` (client-go's TransformStripManagedFields)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj
