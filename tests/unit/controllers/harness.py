"""An in-memory API for driving the generic reconciler without a control plane.

``World`` holds objects by (plural, namespace, name) and feeds every change straight into real
informer caches (as an instantaneous watch would), so expectations, indexes and handlers behave
as in the process. It answers ``create``/``get``/``patch`` (merge; the ``status`` subresource
honours ``metadata.resourceVersion``)/``delete`` of ``KubeClient``; a delete sets nothing
pending: the object is gone at once, as kwok does it. Events and metrics are recorded for
assertions; every mutating call is logged in ``calls`` in order.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from prometheus_client import CollectorRegistry

from lattice.clock import FakeClock
from lattice.controllers.job import JobReconciler
from lattice.frameworks.base import JobPlugin, OperatorContext
from lattice.kube import AlreadyExists, Conflict, KubeClient, NotFound
from lattice.kube.resources import BATCH_JOBS, CONFIGMAPS, PODS, SECRETS, SERVICES, Resource
from lattice.runtime.events import EventRecorder, ObjectRef
from lattice.runtime.expectations import Expectations
from lattice.runtime.informer import Informer
from lattice.runtime.metrics import Metrics
from lattice.runtime.projections import (
    OWNER_INDEX,
    POD_INDEXES,
    ObjectInfo,
    object_info,
    object_owner_index,
    pod_info,
    raw_owner_index,
    slim_object,
    strip_managed_fields,
)

Obj = dict[str, Any]
NS = "ns"


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


@dataclass
class Event:
    type: str
    reason: str
    note: str
    #: What the event is about (kind/name), for events on objects other than the job.
    about: str = ""


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(
        self, regarding: ObjectRef, *, type: str, reason: str, note: str, action: str = ""
    ) -> None:
        del action
        self.events.append(Event(type, reason, note, f"{regarding.kind}/{regarding.name}"))

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]


@dataclass(frozen=True)
class Context:
    ctx: OperatorContext

    def current(self) -> OperatorContext:
        return self.ctx


@dataclass
class World:
    """The fake API server, its informers and one reconciler for ``plugin``."""

    plugin: JobPlugin[Any]
    ctx: OperatorContext = field(
        default_factory=lambda: OperatorContext(scheduling_unit="nvidia.com/gpu")
    )
    clock: FakeClock = field(default_factory=FakeClock)
    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    conflicts: int = 0
    enqueued: list[str] = field(default_factory=list)
    #: While set, watch events wait in ``held`` until ``release()`` (the watch lags the writes).
    hold_events: bool = False
    held: list[tuple[str, str, Obj]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # World serves the verbs the informers and the reconciler use (no watch: it pushes events
        # into the informers itself), so it stands in for a KubeClient by a cast.
        client = cast(KubeClient, self)
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)
        self.res = self._job_resource()
        self.jobs: Informer[Obj] = Informer(client, self.res, transform=slim_object)
        self.pods = Informer(client, PODS, transform=pod_info, indexes=POD_INDEXES)
        self.services: Informer[ObjectInfo] = Informer(
            client,
            SERVICES,
            transform=object_info,
            indexes={OWNER_INDEX: object_owner_index},
        )
        self.others = {
            res.kind: (
                res,
                Informer(
                    client,
                    res,
                    transform=strip_managed_fields,
                    indexes={OWNER_INDEX: raw_owner_index},
                ),
            )
            for res in (CONFIGMAPS, SECRETS, BATCH_JOBS)
        }
        self.informers: dict[str, Informer[Any]] = {
            self.res.plural: self.jobs,
            "pods": self.pods,
            "services": self.services,
            **{res.plural: inf for res, inf in self.others.values()},
        }
        self.metrics = Metrics(CollectorRegistry())
        self.recorder = Recorder()
        self.reconciler = JobReconciler(
            plugin=self.plugin,
            client=client,
            clock=self.clock,
            jobs=self.jobs,
            pods=self.pods,
            services=self.services,
            context=Context(self.ctx),
            expectations=Expectations(self.clock),
            recorder=cast(EventRecorder, self.recorder),  # records what a test asserts
            metrics=self.metrics,
            others=self.others,
        )
        self.reconciler.watch(self.enqueued.append)

    def _job_resource(self) -> Resource:
        r = self.plugin.resource
        return Resource(r.group, r.version, r.plural, r.kind)

    # --- KubeClient ------------------------------------------------------------------------

    def _notify(self, plural: str, event: str, obj: Obj) -> None:
        if self.hold_events:
            self.held.append((plural, event, copy.deepcopy(obj)))
            return
        informer = self.informers.get(plural)
        if informer is not None:
            informer.on_event(event, copy.deepcopy(obj))

    def release(self) -> None:
        """Deliver the held watch events, in order, and stop holding them."""
        self.hold_events = False
        held, self.held = self.held, []
        for plural, event, obj in held:
            self._notify(plural, event, obj)

    async def create(self, res: Resource, body: Obj, *, namespace: str | None = None) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", namespace or NS)
        key = (res.plural, meta["namespace"], meta["name"])
        if key in self.objects:
            raise AlreadyExists(409, "AlreadyExists", meta["name"])
        meta["uid"] = f"uid-{next(self._uid)}"
        meta["resourceVersion"] = str(next(self._rv))
        meta.setdefault("creationTimestamp", self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.objects[key] = obj
        self.calls.append(("create", res.kind, meta["name"]))
        self._notify(res.plural, "ADDED", obj)
        return copy.deepcopy(obj)

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj:
        try:
            return copy.deepcopy(self.objects[res.plural, namespace or NS, name])
        except KeyError:
            raise NotFound(404, "NotFound", name) from None

    async def patch(
        self,
        res: Resource,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **_: Any,
    ) -> Obj:
        key = (res.plural, namespace or NS, name)
        if key not in self.objects:
            raise NotFound(404, "NotFound", name)
        obj = self.objects[key]
        body = copy.deepcopy(body)
        want_rv = (body.pop("metadata", None) or {}).get("resourceVersion")
        if subresource == "status":
            if self.conflicts:
                self.conflicts -= 1
                raise Conflict(409, "Conflict", "stale")
            if want_rv and want_rv != obj["metadata"]["resourceVersion"]:
                raise Conflict(
                    409, "Conflict", f"{want_rv} != {obj['metadata']['resourceVersion']}"
                )
            obj["status"] = merge(obj.get("status") or {}, body.get("status"))
        else:
            for k, v in body.items():
                obj[k] = merge(obj.get(k), v)
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.calls.append(("patch" + (f"/{subresource}" if subresource else ""), res.kind, name))
        self._notify(res.plural, "MODIFIED", obj)
        return copy.deepcopy(obj)

    async def delete(
        self, res: Resource, name: str, *, namespace: str | None = None, **_: Any
    ) -> Obj:
        key = (res.plural, namespace or NS, name)
        obj = self.objects.pop(key, None)
        if obj is None:
            raise NotFound(404, "NotFound", name)
        self.calls.append(("delete", res.kind, name))
        self._notify(res.plural, "DELETED", obj)
        return obj

    # --- test helpers ----------------------------------------------------------------------

    def apply(self, manifest: Obj, *, size: int | None = None) -> Obj:
        """Create the job (as ``kubectl apply``), optionally already granted ``size``."""
        obj = copy.deepcopy(manifest)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", NS)
        meta.setdefault("creationTimestamp", self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
        meta["uid"] = f"job-{next(self._uid)}"
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[self.res.plural, NS, meta["name"]] = obj
        self._notify(self.res.plural, "ADDED", obj)
        if size is not None:
            self.grant(meta["name"], size)
        return obj

    def job(self, name: str) -> Obj:
        return copy.deepcopy(self.objects[self.res.plural, NS, name])

    def status(self, name: str) -> Obj:
        return dict(self.job(name).get("status") or {})

    def grant(
        self,
        name: str,
        size: int,
        *,
        stage: str | None = None,
        placement: dict[str, str] | None = None,
    ) -> None:
        """The scheduler's decision: ``currentSize`` (and ``stage``: Running with pods, else
        Waiting, unless given; and ``placement`` when given, replacing the stored map) at the
        plugin's scheduling path."""
        obj = self.objects[self.res.plural, NS, name]
        if stage is None:
            stage = "Running" if size else "Waiting"
        block: Obj = {"stage": stage, "currentSize": size}
        if placement is not None:
            block["placement"] = None  # merge patch: drop the old map, then write the new one
            obj["status"] = merge(obj.get("status") or {}, _at(self.plugin, block))
            block["placement"] = placement
        obj["status"] = merge(obj.get("status") or {}, _at(self.plugin, block))
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self._notify(self.res.plural, "MODIFIED", obj)

    def set_node(self, pod: str, node: str) -> None:
        """kube-scheduler binds pod ``pod`` to ``node``."""
        obj = self.objects["pods", NS, pod]
        obj["spec"]["nodeName"] = node
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self._notify("pods", "MODIFIED", obj)

    def edit_spec(self, name: str, fn: Callable[[Obj], None]) -> None:
        obj = self.objects[self.res.plural, NS, name]
        fn(obj["spec"])
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self._notify(self.res.plural, "MODIFIED", obj)

    def names(self, plural: str) -> list[str]:
        return sorted(n for (p, _, n) in self.objects if p == plural)

    def get_obj(self, plural: str, name: str) -> Obj:
        return copy.deepcopy(self.objects[plural, NS, name])

    def set_pod(
        self,
        name: str,
        phase: str,
        *,
        ready: bool | None = None,
        exit_code: int | None = None,
        container: str | None = None,
        reason: str | None = None,
        restarts: int = 0,
        disruption: str | None = None,
    ) -> None:
        """What the kubelet (kwok) reports about pod ``name``."""
        obj = self.objects["pods", NS, name]
        status: Obj = {"phase": phase}
        is_ready = ready if ready is not None else phase == "Running"
        conditions = [{"type": "Ready", "status": "True" if is_ready else "False"}]
        if disruption:
            conditions.append({"type": "DisruptionTarget", "status": "True", "reason": disruption})
        status["conditions"] = conditions
        if reason:
            status["reason"] = reason
        statuses = []
        for c in obj["spec"]["containers"]:
            cname = c["name"]
            if exit_code is not None and (container is None or container == cname):
                state: Obj = {"terminated": {"exitCode": exit_code}}
            elif phase == "Running":
                state = {"running": {}}
            else:
                state = {"waiting": {}}
            statuses.append({"name": cname, "restartCount": restarts, "state": state})
        status["containerStatuses"] = statuses
        obj["status"] = status
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self._notify("pods", "MODIFIED", obj)

    def set_job_status(self, name: str, status: Obj) -> None:
        """What the batch Job controller reports about launcher ``name``."""
        obj = self.objects["jobs", NS, name]
        obj["status"] = status
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self._notify("jobs", "MODIFIED", obj)

    async def reconcile(self, name: str) -> Any:
        """One reconcile of ``name``; fails if it mutated any value it could read from a cache
        (cached values are shared: the reconciler must copy before changing anything)."""
        cached = [
            (key, value, copy.deepcopy(value))
            for informer in self.informers.values()
            for key, value in informer.store.items()
            if isinstance(value, dict)
        ]
        try:
            return await self.reconciler.reconcile(f"{NS}/{name}")
        finally:
            changed = [key for key, value, before in cached if value != before]
            assert not changed, f"the reconcile mutated cached values: {changed}"

    def conditions(self, name: str) -> dict[str, Obj]:
        block: Obj = self.job(name)
        for step in self.plugin.exec_path:
            block = block.get(step) or {}
        return {c["type"]: c for c in block.get("conditions") or []}

    def exec_status(self, name: str) -> Obj:
        block: Obj = self.job(name)
        for step in self.plugin.exec_path:
            block = block.get(step) or {}
        return block

    def sample(self, metric: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(metric, labels)
        return float(value or 0.0)


def _at(plugin: JobPlugin[Any], block: Obj) -> Obj:
    """``block`` nested at the plugin's scheduling path below ``status``."""
    patch: Obj = block
    for step in reversed(plugin.scheduling_path[1:]):
        patch = {step: patch}
    return patch
