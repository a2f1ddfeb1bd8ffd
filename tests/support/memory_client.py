"""One in-memory fake of the API seam (``lattice.kube.KubeClient``) for unit tests and benches.

Contract (what a real apiserver does, for the parts the operator relies on):
- Objects are kept per (plural, namespace, name) as compact JSON, which the store and the watch
  history share; every read parses its own copy (as ``RestClient`` parses a response), so a
  caller never shares state with the store; objects must be JSON values. ``seed`` puts objects
  in (or replaces them) without a request (open watches get them once woken by the next write,
  ``notify_watches`` or ``end_watches``); ``stored``, ``items``, ``names`` and ``latest`` read
  the store without one.
- One resourceVersion counter for the whole store (as etcd's revision): every write bumps it and
  stamps the object. ``list`` answers with the current one.
- ``create`` assigns ``uid``, ``resourceVersion``, ``generation: 1`` and ``creationTimestamp``
  (from the injected clock), honours ``generateName``, and raises ``AlreadyExists`` (409).
- Status subresource: a write with ``subresource="status"`` changes ``status`` alone; a write to
  the main resource keeps the stored ``status``. A main write that changes anything outside
  ``metadata``/``status`` bumps ``metadata.generation``.
- ``patch`` takes merge patches (strategic merge and apply are treated as merge patches, which
  is enough for the flat bodies the operator sends) and JSON patches. A body's
  ``metadata.resourceVersion`` is a precondition: stale raises ``Conflict`` (409), as does a
  ``replace`` with a stale one and a ``delete`` whose ``uid`` precondition does not match.
  Unknown objects raise ``NotFound`` (404).
- ``list`` filters by namespace, label selector (``k=v``, ``k!=v``, ``k``, ``!k``, comma-joined)
  and field selector (dotted paths, ``=``/``==``/``!=``), and pages with ``limit``/``continue``.
  ``page_size`` caps every page, whatever the limit (a server may return fewer items than the
  limit), so that callers follow ``continue`` tokens.
- ``watch`` streams ADDED/MODIFIED/DELETED events after ``resource_version``, live until
  ``end_watches`` (the server closes every stream) or the caller stops. A version older than
  the last ``compact`` raises ``Gone`` (410), as does an injected fault.
- Requests (every verb but ``watch``) are served in steps: recorded in ``calls``; counted in
  flight (``inflight``, ``max_inflight``); with ``yields=True``, one yield to the event loop (a
  real request takes a while, so concurrent requests overlap); held while a ``hold`` gate is
  closed (a slow request); ``before`` hooks; injected faults; the work itself; then, on
  success, appended to ``served`` and ``after`` hooks run, before the response returns. A
  ``watch`` is recorded, runs its ``before`` hooks and faults, and is neither held nor counted.
- Faults: ``fail(verb, error, ...)`` makes the next matching request(s) raise ``error`` (409,
  404, 410, 500..., or any exception, such as another seam's typed error), optionally only for
  one plural, name, subresource or the all-namespaces scope. ``hold``, ``before`` and
  ``after`` match the same way, on any subresource.
- ``clone`` is a new server holding the same objects (what a restarted operator lists).
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from lattice.clock import Clock, FakeClock, yield_now
from lattice.kube import AlreadyExists, Conflict, Gone, NotFound, PatchType, WatchEvent
from lattice.kube.resources import Resource
from lattice.primitives.objects import Obj
from lattice.primitives.times import format_time
from tests.support.matching import Call, Hook, Match, Rule, Version, version_of
from tests.support.patches import apply_json_patch, apply_merge_patch

__all__ = ["Call", "Hook", "MemoryClient"]

Key = tuple[str, str, str]
Keys = list[Key]


class MemoryClient:
    """An in-memory apiserver behind the ``KubeClient`` protocol (see the module docstring)."""

    def __init__(
        self, *, clock: Clock | None = None, page_size: int | None = None, yields: bool = False
    ) -> None:
        self.clock: Clock = clock or FakeClock()
        self.page_size = page_size
        self.yields = yields
        self.calls: list[Call] = []
        #: The requests that succeeded, in the order they completed (a held one completes late).
        self.served: list[Call] = []
        self.inflight = 0
        self.max_inflight = 0
        self._objects: dict[Key, Version] = {}
        self._rv = 0
        self._uid = itertools.count(1)
        self._log: dict[str, list[tuple[int, str, Version]]] = {}  # plural -> (rv, type, obj)
        self._sorted_keys: dict[str, Keys] = {}
        self._latest: dict[str, int] = {}
        self._compacted = 0
        self._changed = asyncio.Condition()
        self._epoch = 0
        self._faults: list[Rule] = []
        self._gates: list[Rule] = []
        self._before: list[Rule] = []
        self._after: list[Rule] = []

    # ------------------------------------------------------------------ test controls

    def fail(
        self,
        verb: str,
        error: BaseException,
        *,
        plural: str | None = None,
        name: str | None = None,
        all_namespaces: bool | None = None,
        subresource: str | None = None,
        times: int | None = 1,
    ) -> None:
        """Make the next ``times`` matching requests (``None``: every one) raise ``error``.

        ``verb`` is list, watch, get, create, patch, replace, delete or ``*``;
        ``all_namespaces=True`` matches only requests across every namespace of a namespaced
        resource (``False``: only the others); ``subresource`` matches writes to that
        subresource alone (``""``: only writes to the main resource)."""
        match = Match(verb, plural, name, all_namespaces, subresource)
        self._faults.append(Rule(match, times, error=error))

    def hold(
        self, verb: str, *, plural: str | None = None, name: str | None = None, times: int = 1
    ) -> asyncio.Event:
        """Hold the next ``times`` matching requests, once in flight, until the returned gate is
        set: a request as slow as the test wants, without a timer. A request takes one gate,
        the oldest that matches, so gates set up in a row hold successive requests."""
        gate = asyncio.Event()
        self._gates.append(Rule(Match(verb, plural, name), times, gate=gate))
        return gate

    def before(
        self, verb: str, hook: Hook, *, plural: str | None = None, name: str | None = None
    ) -> None:
        """Call ``hook`` with every matching request once it is through its gates, before its
        faults and its work: what another client does just before the request is served."""
        self._before.append(Rule(Match(verb, plural, name), None, hook=hook))

    def after(
        self, verb: str, hook: Hook, *, plural: str | None = None, name: str | None = None
    ) -> None:
        """Call ``hook`` with every matching request that succeeded, once its write is stored,
        before its response returns."""
        self._after.append(Rule(Match(verb, plural, name), None, hook=hook))

    def seed(self, res: Resource, *objs: Obj) -> list[Obj]:
        """Store ``objs`` as they are (uid, namespace and resourceVersion filled in) without a
        request, replacing any of the same name (a MODIFIED event, else ADDED); an open watch
        sees them once woken (the next write, ``notify_watches`` or ``end_watches``)."""
        out = []
        for obj in objs:
            namespace = (obj.get("metadata") or {}).get("namespace")
            stamped = self._stamped(res, obj, namespace)
            known = self._key(res, stamped["metadata"]["name"], namespace) in self._objects
            out.append(self._store(res, "MODIFIED" if known else "ADDED", stamped))
        return out

    def stored(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj | None:
        """The stored object (a copy), or ``None``."""
        obj = self._objects.get(self._key(res, name, namespace))
        return obj.load() if obj is not None else None

    def items(self, res: Resource, *, namespace: str | None = None) -> list[Obj]:
        """Copies of the stored objects of ``res`` (in ``namespace`` when given), by key."""
        return [
            obj.load()
            for (plural, ns, _), obj in sorted(self._objects.items())
            if plural == res.plural and namespace in (None, ns)
        ]

    def names(self, res: Resource, *, namespace: str | None = None) -> list[str]:
        """Names of the stored objects of ``res`` (in ``namespace`` when given), sorted."""
        return sorted(
            n for p, ns, n in self._objects if p == res.plural and namespace in (None, ns)
        )

    def clone(self) -> MemoryClient:
        """A new server holding copies of the stored objects at the same resourceVersion, with
        no history (a watch from an older version gets 410), calls, faults, gates or hooks:
        what a restarted operator lists."""
        other = MemoryClient(clock=self.clock, page_size=self.page_size, yields=self.yields)
        other._objects = dict(self._objects)  # versions are immutable: share them
        other._rv = other._compacted = self._rv
        other._latest = dict(self._latest)
        other._uid = itertools.count(next(self._uid))
        return other

    def compact(self) -> None:
        """Forget the event history: a watch from an older resourceVersion gets 410 Gone."""
        self._compacted = self._rv
        for log in self._log.values():
            log.clear()

    async def end_watches(self) -> None:
        """Close every open watch stream (the server ended them; clients re-watch)."""
        async with self._changed:
            self._epoch += 1
            self._changed.notify_all()

    async def notify_watches(self) -> None:
        """Wake every open watch stream, so that it delivers what ``seed`` stored."""
        async with self._changed:
            self._changed.notify_all()

    def latest(self, res: Resource) -> str:
        """The resourceVersion of the last change to ``res`` ("0": none): a watch of all of it
        that has delivered this one is caught up."""
        return str(self._latest.get(res.plural, 0))

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    # ------------------------------------------------------------------ KubeClient

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Obj:
        del resource_version  # always the latest: enough for an in-memory store
        selectors = {"label_selector": label_selector or "", "field_selector": field_selector or ""}
        call = Call("list", res.plural, namespace or "", **selectors)
        async with self._serving(call, res, namespace):
            scope = namespace if res.namespaced else None
            objects = self._objects
            found = [
                stored
                for key in self._sorted(res.plural)
                if (stored := objects[key]).matches(scope, label_selector, field_selector)
            ]
            caps = [n for n in (limit, self.page_size) if n]
            size = min(caps) if caps else 0
            start = int(continue_token or 0)
            more = ""
            if size:
                if start + size < len(found):
                    more = str(start + size)
                found = found[start : start + size]
            return {
                "apiVersion": res.api_version,
                "kind": f"{res.kind}List",
                "metadata": {"resourceVersion": self.resource_version, "continue": more},
                "items": [stored.load() for stored in found],
            }

    async def watch(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        label_selector: str | None = None,
        field_selector: str | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[WatchEvent]:
        del timeout_seconds  # streams end on end_watches(), not on a timer
        selectors = {"label_selector": label_selector or "", "field_selector": field_selector or ""}
        call = Call("watch", res.plural, namespace or "", **selectors)
        self.calls.append(call)
        self._admit(call, res, namespace)
        since = int(resource_version or 0)
        if since < self._compacted:
            raise Gone(410, "Expired", f"too old resource version: {since} ({self._compacted})")
        if on_open is not None:
            on_open()
        epoch = self._epoch
        log = self._log.setdefault(res.plural, [])
        while True:
            # The log is in resourceVersion order; compact() empties it in place.
            at = bisect.bisect_right(log, since, key=lambda entry: entry[0])
            scope = namespace if res.namespaced else None
            while at < len(log):
                since, etype, stored = log[at]
                at += 1
                if stored.matches(scope, label_selector, field_selector):
                    yield WatchEvent(etype, stored.load())
            async with self._changed:
                if self._epoch != epoch:
                    return
                if not log or log[-1][0] <= since:
                    await self._changed.wait()
            if self._epoch != epoch:
                return

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj:
        async with self._serving(Call("get", res.plural, namespace or "", name), res, namespace):
            return self._existing(res, name, namespace)

    async def create(self, res: Resource, body: Obj, *, namespace: str | None = None) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._uid):05d}"
        name = str(meta.get("name", ""))
        call = Call("create", res.plural, namespace or "", name, body=copy.deepcopy(obj))
        async with self._serving(call, res, namespace):
            if self._key(res, name, namespace) in self._objects:
                raise AlreadyExists(409, "AlreadyExists", f'{res.plural} "{name}" exists')
            meta.pop("resourceVersion", None)
            meta.pop("uid", None)
            meta["generation"] = 1
            meta["creationTimestamp"] = format_time(self.clock.now())
            return await self._write(res, "ADDED", self._stamped(res, obj, namespace))

    async def patch(
        self,
        res: Resource,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        field_manager: str | None = None,
        force: bool = False,
    ) -> Obj:
        del field_manager, force
        body = copy.deepcopy(body)
        call = Call("patch", res.plural, namespace or "", name, subresource or "", body=body)
        async with self._serving(call, res, namespace):
            old = self._existing(res, name, namespace)
            if patch_type == PatchType.JSON:
                new = apply_json_patch(old, body)
            else:
                want = ((body or {}).get("metadata") or {}).get("resourceVersion")
                self._precondition(old, want)
                new = apply_merge_patch(old, copy.deepcopy(body))
            return await self._update(res, old, new, subresource)

    async def replace(
        self,
        res: Resource,
        name: str,
        body: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        body = copy.deepcopy(body)
        call = Call("replace", res.plural, namespace or "", name, subresource or "", body=body)
        async with self._serving(call, res, namespace):
            old = self._existing(res, name, namespace)
            self._precondition(old, (body.get("metadata") or {}).get("resourceVersion"))
            return await self._update(res, old, copy.deepcopy(body), subresource)

    async def delete(
        self,
        res: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation: str = "Background",
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> Obj:
        del propagation, grace_period_seconds  # no garbage collector: children stay
        async with self._serving(Call("delete", res.plural, namespace or "", name), res, namespace):
            old = self._existing(res, name, namespace)
            if uid is not None and old["metadata"].get("uid") != uid:
                raise Conflict(409, "Conflict", f"uid precondition failed for {res.plural} {name}")
            del self._objects[self._key(res, name, namespace)]
            self._sorted_keys.pop(res.plural, None)
            self._rv += 1
            old["metadata"]["resourceVersion"] = self.resource_version
            self._log.setdefault(res.plural, []).append((self._rv, "DELETED", version_of(old)))
            self._latest[res.plural] = self._rv
            await self.notify_watches()
            return old

    async def close(self) -> None:
        await self.end_watches()

    # ------------------------------------------------------------------ internals

    def _key(self, res: Resource, name: str, namespace: str | None) -> Key:
        return (res.plural, (namespace or "") if res.namespaced else "", name)

    def _sorted(self, plural: str) -> Keys:
        """The keys of ``plural`` in order, kept until one of them is written (a LIST's pages)."""
        keys = self._sorted_keys.get(plural)
        if keys is None:
            keys = sorted(k for k in self._objects if k[0] == plural)
            self._sorted_keys[plural] = keys
        return keys

    def _admit(self, call: Call, res: Resource, namespace: str | None) -> None:
        """Run the ``before`` hooks, then raise the first matching fault."""
        for rule in list(self._before):
            if (
                rule.match(call.verb, res, call.name, namespace, call.subresource)
                and rule.hook is not None
            ):
                rule.hook(call)
        for rule in self._faults:
            if (
                rule.match(call.verb, res, call.name, namespace, call.subresource)
                and rule.error is not None
            ):
                rule.take(self._faults)
                raise rule.error

    @asynccontextmanager
    async def _serving(
        self, call: Call, res: Resource, namespace: str | None
    ) -> AsyncIterator[None]:
        """One request, in the steps of the module docstring, around its work."""
        self.calls.append(call)
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            if self.yields:
                await yield_now()
            gate = next(
                (
                    g
                    for g in self._gates
                    if g.match(call.verb, res, call.name, namespace, call.subresource)
                ),
                None,
            )
            if gate is not None and gate.gate is not None:  # one gate per request, oldest first
                gate.take(self._gates)
                await gate.gate.wait()
            self._admit(call, res, namespace)
            yield
            self.served.append(call)
            for rule in list(self._after):
                if (
                    rule.match(call.verb, res, call.name, namespace, call.subresource)
                    and rule.hook is not None
                ):
                    rule.hook(call)
        finally:
            self.inflight -= 1

    def _existing(self, res: Resource, name: str, namespace: str | None) -> Obj:
        """A copy of the stored object, or ``NotFound``."""
        obj = self._objects.get(self._key(res, name, namespace))
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return obj.load()

    @staticmethod
    def _precondition(old: Obj, want: object) -> None:
        have = old["metadata"].get("resourceVersion")
        if want is not None and str(want) != have:
            raise Conflict(409, "Conflict", f"resourceVersion {want} is stale (now {have})")

    def _stamped(self, res: Resource, obj: Obj, namespace: str | None) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        meta.setdefault("uid", f"uid-{next(self._uid)}")
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        return obj

    def _store(self, res: Resource, etype: str, obj: Obj) -> Obj:
        """Stamp ``obj`` (the caller's own copy) with the next resourceVersion, store it and log
        the event; returns ``obj``."""
        self._rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = self.resource_version
        key = self._key(res, meta["name"], meta.get("namespace"))
        if key not in self._objects:
            self._sorted_keys.pop(res.plural, None)
        self._objects[key] = version = version_of(obj)
        self._log.setdefault(res.plural, []).append((self._rv, etype, version))
        self._latest[res.plural] = self._rv
        return obj

    async def _write(self, res: Resource, etype: str, obj: Obj) -> Obj:
        out = self._store(res, etype, obj)
        await self.notify_watches()
        return out

    async def _update(self, res: Resource, old: Obj, new: Obj, subresource: str | None) -> Obj:
        if subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
        else:
            merged = copy.deepcopy(new)
            merged["metadata"] = {**old["metadata"], **(new.get("metadata") or {})}
            if "status" in old:
                merged["status"] = copy.deepcopy(old["status"])
            else:
                merged.pop("status", None)
            if _spec_of(merged) != _spec_of(old):
                merged["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        for fixed in ("uid", "creationTimestamp", "name", "namespace"):
            if fixed in old["metadata"]:
                merged["metadata"][fixed] = old["metadata"][fixed]
        if merged == old:
            return old  # a no-op write keeps the resourceVersion, as the apiserver
        return await self._write(res, "MODIFIED", merged)


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
