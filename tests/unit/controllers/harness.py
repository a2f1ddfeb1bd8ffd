"""An in-memory API for driving the generic reconciler without a control plane.

``World`` is a ``MemoryClient`` (the one fake of the API seam: resourceVersions, the status
subresource, preconditions, injected faults), real informer caches in front of it, and one
reconciler whose client is that server. What reaches the informers:

- The reconciler's own writes come back through the server's watch streams: one forwarder per
  cached resource delivers them, as the watch would, some time after the write's response.
  ``reconcile()`` waits, before and after the reconcile, until every forwarder has caught up
  with the server (``settle()``), so a test reads the state a quiet watch would show.
- The test plays the watch for everyone else's writes: the helpers (``apply``, ``grant``,
  ``set_pod``, ``set_node``, ``edit_spec``, ``set_job_status``, ``put``) store the change on the
  server without a request and hand the stored object to the informer at once (the forwarder
  skips those versions).
- ``hold_events`` makes the watch lag: events wait in ``held`` until ``release()`` delivers
  them, in order.

``calls`` lists the mutating requests the server served, in order, as (verb, kind, name), verb
``patch/status`` for a status patch. Events and metrics are recorded for assertions.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from prometheus_client import CollectorRegistry

from lattice.clock import FakeClock, yield_now
from lattice.controllers.job import JobReconciler
from lattice.frameworks.base import JobPlugin, OperatorContext
from lattice.kube import Conflict
from lattice.kube.resources import BATCH_JOBS, CONFIGMAPS, PODS, PVCS, SECRETS, SERVICES, Resource
from lattice.primitives.objects import Obj
from lattice.primitives.times import format_time
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
from tests.support.matching import Call
from tests.support.memory_client import MemoryClient

NS = "ns"
#: How many event-loop turns ``settle`` gives the forwarders before it calls the watch stuck.
SETTLE_TURNS = 1000


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
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    enqueued: list[str] = field(default_factory=list)
    #: While set, watch events wait in ``held`` until ``release()`` (the watch lags the writes).
    hold_events: bool = False
    held: list[tuple[str, str, Obj]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = MemoryClient(clock=self.clock)
        self.client.after("*", self._served)
        self.res = self._job_resource()
        self.jobs: Informer[Obj] = self._informer(self.res, transform=slim_object)
        self.pods = self._informer(PODS, transform=pod_info, indexes=POD_INDEXES)
        self.services: Informer[ObjectInfo] = self._informer(
            SERVICES, transform=object_info, indexes={OWNER_INDEX: object_owner_index}
        )
        self.others = {
            res.kind: (
                res,
                self._informer(
                    res, transform=strip_managed_fields, indexes={OWNER_INDEX: raw_owner_index}
                ),
            )
            for res in (CONFIGMAPS, SECRETS, BATCH_JOBS, PVCS)
        }
        self.informers: dict[str, Informer[Any]] = {
            self.res.plural: self.jobs,
            "pods": self.pods,
            "services": self.services,
            **{res.plural: inf for res, inf in self.others.values()},
        }
        self.resources: dict[str, Resource] = {
            self.res.plural: self.res,
            "pods": PODS,
            "services": SERVICES,
            **{res.plural: res for res, _ in self.others.values()},
        }
        self.metrics = Metrics(CollectorRegistry())
        self.recorder = Recorder()
        self.reconciler = JobReconciler(
            plugin=self.plugin,
            client=self.client,
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
        # The versions the test delivered itself (the forwarders skip them), and how far each
        # forwarder has read its watch.
        self._pushed: set[tuple[str, int]] = set()
        self._seen = dict.fromkeys(self.resources, 0)
        self._forwarders = [
            asyncio.get_running_loop().create_task(self._forward(res), name=f"watch:{plural}")
            for plural, res in self.resources.items()
        ]

    def _informer(self, res: Resource, **kw: Any) -> Informer[Any]:
        return Informer(self.client, res, clock=self.clock, **kw)

    def _job_resource(self) -> Resource:
        r = self.plugin.resource
        return Resource(r.group, r.version, r.plural, r.kind)

    def _served(self, call: Call) -> None:
        if call.verb in ("create", "patch", "replace", "delete"):
            verb = f"{call.verb}/{call.subresource}" if call.subresource else call.verb
            self.calls.append((verb, self.resources[call.plural].kind, call.name))

    # --- the watch ---------------------------------------------------------------------------

    async def _forward(self, res: Resource) -> None:
        """The watch of ``res``: delivers what the test did not deliver itself."""
        async for event in self.client.watch(res, resource_version="0", timeout_seconds=0):
            version = int(event.object["metadata"]["resourceVersion"])
            self._seen[res.plural] = version
            if (res.plural, version) not in self._pushed:
                self._deliver(res.plural, event.type, event.object)

    def _deliver(self, plural: str, event: str, obj: Obj) -> None:
        if self.hold_events:
            self.held.append((plural, event, obj))
            return
        self.informers[plural].on_event(event, obj)

    async def settle(self) -> None:
        """Wait until every forwarder has read the server's last change (delivered, or held)."""
        await self.client.notify_watches()
        for _ in range(SETTLE_TURNS):
            behind = [
                p
                for p, res in self.resources.items()
                if self._seen[p] < int(self.client.latest(res))
            ]
            if not behind:
                return
            await yield_now()
        raise AssertionError(f"the watches of {behind} did not catch up")

    def release(self) -> None:
        """Deliver the held watch events, in order, and stop holding them."""
        self.hold_events = False
        held, self.held = self.held, []
        for plural, event, obj in held:
            self._deliver(plural, event, obj)

    # --- what everyone else writes -----------------------------------------------------------

    def put(self, plural: str, obj: Obj) -> Obj:
        """Someone else stores ``obj`` (created or replaced, no request) and the watch
        delivers it; returns the stored object."""
        res = self.resources[plural]
        meta = obj.get("metadata") or {}
        known = self.client.stored(res, meta["name"], namespace=meta.get("namespace")) is not None
        (stored,) = self.client.seed(res, obj)
        self._pushed.add((plural, int(stored["metadata"]["resourceVersion"])))
        self._deliver(plural, "MODIFIED" if known else "ADDED", copy.deepcopy(stored))
        return copy.deepcopy(stored)

    def inject_conflicts(self, times: int) -> None:
        """The next ``times`` status patches of the job meet a 409 (someone wrote first)."""
        self.client.fail(
            "patch",
            Conflict(409, "Conflict", "stale"),
            plural=self.res.plural,
            subresource="status",
            times=times,
        )

    def apply(self, manifest: Obj, *, size: int | None = None) -> Obj:
        """Create the job (as ``kubectl apply``), optionally already granted ``size``."""
        obj = copy.deepcopy(manifest)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", NS)
        meta.setdefault("creationTimestamp", format_time(self.clock.now()))
        meta.setdefault("generation", 1)
        obj = self.put(self.res.plural, obj)
        if size is not None:
            self.grant(meta["name"], size)
        return obj

    def job(self, name: str) -> Obj:
        return self.get_obj(self.res.plural, name)

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
        obj = self.job(name)
        if stage is None:
            stage = "Running" if size else "Waiting"
        block: Obj = {"stage": stage, "currentSize": size}
        if placement is not None:
            block["placement"] = None  # merge patch: drop the old map, then write the new one
            obj["status"] = merge(obj.get("status") or {}, _at(self.plugin, block))
            block["placement"] = placement
        obj["status"] = merge(obj.get("status") or {}, _at(self.plugin, block))
        self.put(self.res.plural, obj)

    def set_node(self, pod: str, node: str) -> None:
        """kube-scheduler binds pod ``pod`` to ``node``."""
        obj = self.get_obj("pods", pod)
        obj["spec"]["nodeName"] = node
        self.put("pods", obj)

    def edit_spec(self, name: str, fn: Callable[[Obj], None]) -> None:
        """The user changes the job's spec (its generation goes up, as the apiserver's would)."""
        obj = self.job(name)
        fn(obj["spec"])
        obj["metadata"]["generation"] = int(obj["metadata"].get("generation", 1)) + 1
        self.put(self.res.plural, obj)

    def names(self, plural: str) -> list[str]:
        return self.client.names(self.resources[plural])

    def get_obj(self, plural: str, name: str) -> Obj:
        obj = self.client.stored(self.resources[plural], name, namespace=NS)
        assert obj is not None, f"{plural} {NS}/{name} is not on the server"
        return obj

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
        obj = self.get_obj("pods", name)
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
        self.put("pods", obj)

    def set_job_status(self, name: str, status: Obj) -> None:
        """What the batch Job controller reports about launcher ``name``."""
        obj = self.get_obj("jobs", name)
        obj["status"] = status
        self.put("jobs", obj)

    async def reconcile(self, name: str) -> Any:
        """One reconcile of ``name``; fails if it mutated any value it could read from a cache
        (cached values are shared: the reconciler must copy before changing anything). Waits
        for the watches before (what the test wrote) and after (what the reconcile wrote)."""
        await self.settle()
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
            await self.settle()

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
