"""One in-memory fake of the API seam (``lattice.kube.KubeClient``) for unit tests and benches.

Contract (what a real apiserver does, for the parts the operator relies on):
- Objects are kept per (plural, namespace, name); every read returns a deep copy, so a caller
  never shares state with the store. ``seed`` puts objects in without a request.
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
  ``page_size`` forces pages when the caller sets no limit.
- ``watch`` streams ADDED/MODIFIED/DELETED events after ``resource_version``, live until
  ``end_watches`` (the server closes every stream) or the caller stops. A version older than
  the last ``compact`` raises ``Gone`` (410), as does an injected fault.
- Faults: ``fail(verb, error, ...)`` makes the next matching request(s) raise ``error`` (409,
  404, 410, 500...), optionally only for one plural, name or the all-namespaces scope.
- ``calls`` records every request as a ``Call``.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lattice.clock import Clock, FakeClock
from lattice.kube import AlreadyExists, ApiError, Conflict, Gone, NotFound, PatchType, WatchEvent
from lattice.kube.resources import Resource
from lattice.primitives.times import format_time
from tests.support.patches import apply_json_patch, apply_merge_patch

__all__ = ["Call", "MemoryClient", "match_fields", "match_labels"]

Obj = dict[str, Any]
Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Call:
    """One request: verb, plural, namespace ("" = none or all), name ("" for collections), and
    a list's or watch's selectors."""

    verb: str
    plural: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    label_selector: str = ""
    field_selector: str = ""


@dataclass(slots=True)
class _Fault:
    verb: str
    error: ApiError
    plural: str | None
    name: str | None
    all_namespaces: bool | None
    times: int | None

    def matches(self, verb: str, res: Resource, name: str, namespace: str | None) -> bool:
        return (
            self.verb in (verb, "*")
            and self.plural in (None, res.plural)
            and self.name in (None, name)
            and self.all_namespaces in (None, res.namespaced and namespace is None)
        )


def match_labels(labels: Mapping[str, str], selector: str | None) -> bool:
    """Whether ``labels`` satisfy an equality-based label selector."""
    for raw in (selector or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for step in path.split("."):
        node = node.get(step) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def match_fields(obj: Mapping[str, Any], selector: str | None) -> bool:
    """Whether ``obj`` satisfies a field selector of dotted paths (``a.b=v``, ``a!=v``)."""
    for raw in (selector or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(obj, path) == value:
                return False
        else:
            path, value = term.replace("==", "=").split("=", 1)
            if _field(obj, path) != value:
                return False
    return True


class MemoryClient:
    """An in-memory apiserver behind the ``KubeClient`` protocol (see the module docstring)."""

    def __init__(self, *, clock: Clock | None = None, page_size: int | None = None) -> None:
        self.clock: Clock = clock or FakeClock()
        self.page_size = page_size
        self.calls: list[Call] = []
        self._objects: dict[Key, Obj] = {}
        self._rv = 0
        self._uid = itertools.count(1)
        self._log: list[tuple[int, str, str, Obj]] = []  # (rv, plural, event type, object)
        self._compacted = 0
        self._changed = asyncio.Condition()
        self._epoch = 0
        self._faults: list[_Fault] = []

    # ------------------------------------------------------------------ test controls

    def fail(
        self,
        verb: str,
        error: ApiError,
        *,
        plural: str | None = None,
        name: str | None = None,
        all_namespaces: bool | None = None,
        times: int | None = 1,
    ) -> None:
        """Make the next ``times`` matching requests (``None``: every one) raise ``error``.

        ``verb`` is list, watch, get, create, patch, replace, delete or ``*``;
        ``all_namespaces=True`` matches only requests across every namespace of a namespaced
        resource (``False``: only the others)."""
        self._faults.append(_Fault(verb, error, plural, name, all_namespaces, times))

    def seed(self, res: Resource, *objs: Obj) -> list[Obj]:
        """Store ``objs`` as they are (uid, namespace and resourceVersion filled in) without a
        request; an open watch sees them at the next write or ``end_watches``."""
        out = []
        for obj in objs:
            namespace = (obj.get("metadata") or {}).get("namespace")
            out.append(self._store(res, "ADDED", self._stamped(res, obj, namespace)))
        return out

    def stored(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj | None:
        """The stored object (a copy), or ``None``."""
        obj = self._objects.get(self._key(res, name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    def names(self, res: Resource, *, namespace: str | None = None) -> list[str]:
        """Names of the stored objects of ``res`` (in ``namespace`` when given), sorted."""
        return sorted(
            n for p, ns, n in self._objects if p == res.plural and namespace in (None, ns)
        )

    def compact(self) -> None:
        """Forget the event history: a watch from an older resourceVersion gets 410 Gone."""
        self._compacted = self._rv
        self._log.clear()

    async def end_watches(self) -> None:
        """Close every open watch stream (the server ended them; clients re-watch)."""
        async with self._changed:
            self._epoch += 1
            self._changed.notify_all()

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
        self._request("list", res, "", namespace, selectors=(label_selector, field_selector))
        items = [
            copy.deepcopy(obj)
            for (plural, ns, _), obj in sorted(self._objects.items())
            if plural == res.plural
            and (namespace is None or not res.namespaced or ns == namespace)
            and match_labels(obj.get("metadata", {}).get("labels") or {}, label_selector)
            and match_fields(obj, field_selector)
        ]
        size = limit or self.page_size
        start = int(continue_token or 0)
        more = ""
        if size:
            if start + size < len(items):
                more = str(start + size)
            items = items[start : start + size]
        return {
            "apiVersion": res.api_version,
            "kind": f"{res.kind}List",
            "metadata": {"resourceVersion": self.resource_version, "continue": more},
            "items": items,
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
        self._request("watch", res, "", namespace, selectors=(label_selector, field_selector))
        since = int(resource_version or 0)
        if since < self._compacted:
            raise Gone(410, "Expired", f"too old resource version: {since} ({self._compacted})")
        if on_open is not None:
            on_open()
        epoch = self._epoch
        while True:
            for rv, plural, etype, obj in list(self._log):
                if rv <= since or plural != res.plural:
                    continue
                since = rv
                meta = obj.get("metadata", {})
                if namespace is not None and res.namespaced and meta.get("namespace") != namespace:
                    continue
                if match_labels(meta.get("labels") or {}, label_selector) and match_fields(
                    obj, field_selector
                ):
                    yield WatchEvent(etype, copy.deepcopy(obj))
            async with self._changed:
                if self._epoch != epoch:
                    return
                if not any(rv > since for rv, *_ in self._log):
                    await self._changed.wait()
            if self._epoch != epoch:
                return

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj:
        self._request("get", res, name, namespace)
        return copy.deepcopy(self._existing(res, name, namespace))

    async def create(self, res: Resource, body: Obj, *, namespace: str | None = None) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._uid):05d}"
        self._request("create", res, str(meta.get("name", "")), namespace)
        if self._key(res, meta["name"], namespace) in self._objects:
            raise AlreadyExists(409, "AlreadyExists", f'{res.plural} "{meta["name"]}" exists')
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
        self._request("patch", res, name, namespace, subresource)
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
        self._request("replace", res, name, namespace, subresource)
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
        self._request("delete", res, name, namespace)
        old = self._existing(res, name, namespace)
        if uid is not None and old["metadata"].get("uid") != uid:
            raise Conflict(409, "Conflict", f"uid precondition failed for {res.plural} {name}")
        del self._objects[self._key(res, name, namespace)]
        self._rv += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = self.resource_version
        await self._publish(res.plural, "DELETED", gone)
        return copy.deepcopy(gone)

    async def close(self) -> None:
        await self.end_watches()

    # ------------------------------------------------------------------ internals

    def _key(self, res: Resource, name: str, namespace: str | None) -> Key:
        return (res.plural, (namespace or "") if res.namespaced else "", name)

    def _request(
        self,
        verb: str,
        res: Resource,
        name: str,
        namespace: str | None,
        sub: str | None = None,
        *,
        selectors: tuple[str | None, str | None] = (None, None),
    ) -> None:
        labels, fields = selectors
        call = Call(verb, res.plural, namespace or "", name, sub or "", labels or "", fields or "")
        self.calls.append(call)
        for fault in self._faults:
            if fault.matches(verb, res, name, namespace):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                raise fault.error

    def _existing(self, res: Resource, name: str, namespace: str | None) -> Obj:
        obj = self._objects.get(self._key(res, name, namespace))
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return obj

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
        self._rv += 1
        obj["metadata"]["resourceVersion"] = self.resource_version
        meta = obj["metadata"]
        self._objects[self._key(res, meta["name"], meta.get("namespace"))] = obj
        self._log.append((self._rv, res.plural, etype, copy.deepcopy(obj)))
        return copy.deepcopy(obj)

    async def _write(self, res: Resource, etype: str, obj: Obj) -> Obj:
        out = self._store(res, etype, obj)
        async with self._changed:
            self._changed.notify_all()
        return out

    async def _publish(self, plural: str, etype: str, obj: Obj) -> None:
        self._log.append((self._rv, plural, etype, copy.deepcopy(obj)))
        async with self._changed:
            self._changed.notify_all()

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
            return copy.deepcopy(old)  # a no-op write keeps the resourceVersion, as the apiserver
        return await self._write(res, "MODIFIED", merged)


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
