"""A tiny fake apiserver for fault injection in the informer's unit tests.

A real kube-apiserver cannot produce a 410 Gone, a dropped watch or a 500 on demand, so the
reflector's failure paths are tested against this aiohttp app on 127.0.0.1 (port 0), through the
REAL ``RestClient`` (``rest_client(server)``). It is deliberately small:

- one resource (any ``Resource``; ConfigMaps by default), namespaced or cluster-scoped paths;
- LIST with ``limit``/``continue`` from a per-list snapshot; ``resourceVersion`` is recorded, and
  any value serves the current state; a ``continue`` token older than the compaction point is 410;
- WATCH from a resourceVersion: replays history newer than it, then streams live events; a
  resourceVersion older than the compaction point gets an ERROR 410 event, as the real server
  sends;
- scripted faults: ``fail_next(verb, status, retry_after=...)``, ``expire_watches()`` (ERROR 410
  to every open watch), ``drop_watches()`` (abort the connection mid-stream), ``close_watches()``
  (end the streams normally, like ``timeoutSeconds``), ``bookmark()``;
- mutations with ``notify=False`` change the state without telling open watches, to simulate what
  a disconnected client misses (then ``compact()`` + ``expire_watches()`` forces a relist);
- every request is recorded; ``wait_request`` / ``wait_watches`` wait on them without timers.

Also here: ``RecordingClock`` (a ``FakeClock`` that records and announces each ``sleep``) and
``Recorder`` (a handler that keeps every notification and lets a test wait for a condition).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from lattice.clock import FakeClock
from lattice.kube.client import RestClient
from lattice.kube.resources import CONFIGMAPS, Resource
from lattice.primitives.objects import Obj

__all__ = [
    "FakeApiServer",
    "Recorder",
    "RecordingClock",
    "SeenRequest",
    "rest_client",
    "running",
]

T = TypeVar("T")
_CLOSE = "close"
_DROP = "drop"


@dataclass(frozen=True)
class SeenRequest:
    verb: str  # "list" or "watch"
    namespace: str | None
    query: dict[str, str]

    @property
    def resource_version(self) -> str | None:
        return self.query.get("resourceVersion")


@dataclass
class _Fault:
    status: int
    retry_after: float | None = None
    skip: int = 0  # requests of the verb to serve normally before this fault fires
    message: str = "injected fault"


@dataclass
class _Watch:
    namespace: str | None
    queue: asyncio.Queue[Obj | str] = field(default_factory=asyncio.Queue)


def _status(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeApiServer:
    """LIST and WATCH of one resource, with scripted faults. ``url`` is set by ``start()``."""

    def __init__(self, resource: Resource = CONFIGMAPS, *, first_rv: int = 100) -> None:
        self.resource = resource
        self.url = ""
        self.rv = first_rv
        self.objects: dict[str, Obj] = {}
        self.requests: list[SeenRequest] = []
        self._history: list[tuple[int, str, Obj]] = []
        self._compacted = 0
        self._faults: dict[str, deque[_Fault]] = {"list": deque(), "watch": deque()}
        self._watches: list[_Watch] = []
        self._snapshots: dict[str, list[Obj]] = {}
        self._tokens = itertools.count(1)
        self._changed = asyncio.Condition()
        app = web.Application()
        base = resource.path()
        ns_base = resource.path(namespace="{namespace}")
        app.router.add_get(base, self._handle)
        if resource.namespaced:
            app.router.add_get(ns_base, self._handle)
        # handler_cancellation: a watch handler learns at once that its client went away
        self._runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=1.0, handler_cancellation=True
        )

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> str:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        self.close_watches()
        await self._runner.cleanup()

    # --- state ---------------------------------------------------------------------------------

    def _key(self, namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if namespace else name

    def _emit(self, etype: str, obj: Obj, *, notify: bool) -> None:
        snapshot = json.loads(json.dumps(obj))
        self._history.append((self.rv, etype, snapshot))
        if notify:
            self._send({"type": etype, "object": snapshot}, obj["metadata"].get("namespace"))

    def _send(self, event: Obj | str, namespace: str | None = None) -> None:
        for watch in self._watches:
            if namespace is None or watch.namespace in (None, namespace):
                watch.queue.put_nowait(event)

    def create(
        self,
        name: str,
        *,
        namespace: str | None = "default",
        labels: dict[str, str] | None = None,
        data: dict[str, str] | None = None,
        notify: bool = True,
    ) -> Obj:
        self.rv += 1
        meta: Obj = {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": str(self.rv)}
        if self.resource.namespaced:
            meta["namespace"] = namespace
        if labels:
            meta["labels"] = dict(labels)
        obj: Obj = {
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": meta,
            "data": dict(data or {}),
        }
        self.objects[self._key(meta.get("namespace"), name)] = obj
        self._emit("ADDED", obj, notify=notify)
        return obj

    def update(
        self,
        name: str,
        *,
        namespace: str | None = "default",
        data: dict[str, str] | None = None,
        notify: bool = True,
    ) -> Obj:
        obj = self.objects[self._key(namespace if self.resource.namespaced else None, name)]
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["data"] = dict(data or {})
        self._emit("MODIFIED", obj, notify=notify)
        return obj

    def delete(self, name: str, *, namespace: str | None = "default", notify: bool = True) -> Obj:
        obj = self.objects.pop(self._key(namespace if self.resource.namespaced else None, name))
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._emit("DELETED", obj, notify=notify)
        return obj

    # --- faults --------------------------------------------------------------------------------

    def fail_next(
        self,
        verb: str,
        status: int,
        *,
        retry_after: float | None = None,
        count: int = 1,
        after: int = 0,
        message: str = "injected fault",
    ) -> None:
        """After ``after`` more good requests of ``verb`` ("list"/"watch"), answer ``status``
        ``count`` times (a LIST page counts as one request)."""
        for i in range(count):
            skip = after if i == 0 else 0
            self._faults[verb].append(_Fault(status, retry_after, skip=skip, message=message))

    def bookmark(self, *, advance: int = 1) -> str:
        """Move the RV on (other writes elsewhere) and send a BOOKMARK at it to every watch."""
        self.rv += advance
        kind = {"apiVersion": self.resource.api_version, "kind": self.resource.kind}
        self._send(
            {"type": "BOOKMARK", "object": {**kind, "metadata": {"resourceVersion": str(self.rv)}}}
        )
        return str(self.rv)

    def compact(self) -> None:
        """Forget history up to now: watches and continue tokens from older RVs get 410."""
        self._compacted = self.rv
        self._history.clear()

    def expire_watches(self, *, namespace: str | None = None) -> None:
        """Send ERROR 410 to every open watch (of ``namespace``), which then ends."""
        self.error_watches(410, "Expired", namespace=namespace)

    def error_watches(self, code: int, reason: str, *, namespace: str | None = None) -> None:
        """Send an ERROR event with status ``code`` to every open watch, then end it."""
        event = {"type": "ERROR", "object": _status(code, reason, f"injected {reason}")}
        for watch in self._watches:
            if namespace is None or watch.namespace == namespace:
                watch.queue.put_nowait(event)
                watch.queue.put_nowait(_CLOSE)

    def drop_watches(self) -> None:
        """Abort every open watch connection mid-stream."""
        self._send(_DROP)

    def close_watches(self) -> None:
        """End every open watch normally (the server's timeoutSeconds elapsed)."""
        self._send(_CLOSE)

    # --- waiting -------------------------------------------------------------------------------

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    def seen(self, verb: str) -> list[SeenRequest]:
        return [r for r in self.requests if r.verb == verb]

    async def wait_request(
        self,
        verb: str,
        *,
        after: int = 0,
        where: Callable[[SeenRequest], bool] = lambda _: True,
        timeout: float = 10.0,
    ) -> SeenRequest:
        """The first request of ``verb`` at index >= ``after`` matching ``where``."""

        def find() -> SeenRequest | None:
            return next((r for r in self.requests[after:] if r.verb == verb and where(r)), None)

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: find() is not None), timeout)
        found = find()
        assert found is not None
        return found

    async def wait_watches(self, n: int = 1, *, timeout: float = 10.0) -> None:
        """Until ``n`` watches are open and streaming."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self._watches) >= n), timeout)

    async def _record(self, seen: SeenRequest) -> None:
        async with self._changed:
            self.requests.append(seen)
            self._changed.notify_all()

    async def _changed_now(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # --- HTTP ----------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info.get("namespace")
        query = dict(request.query)
        verb = "watch" if query.get("watch") in ("true", "1", "True") else "list"
        await self._record(SeenRequest(verb, namespace, query))
        faults = self._faults[verb]
        if faults and faults[0].skip > 0:
            faults[0].skip -= 1
        elif faults:
            fault = faults.popleft()
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
            body = _status(fault.status, "InjectedFault", fault.message)
            return web.json_response(body, status=fault.status, headers=headers)
        if verb == "watch":
            return await self._watch(request, namespace, query)
        return self._list(namespace, query)

    def _visible(self, obj: Obj, namespace: str | None) -> bool:
        return namespace is None or obj["metadata"].get("namespace") == namespace

    def _list(self, namespace: str | None, query: dict[str, str]) -> web.Response:
        token = query.get("continue")
        if token:
            token_rv, snap_id, offset = token.split(":")
            if int(token_rv) < self._compacted or snap_id not in self._snapshots:
                return web.json_response(
                    _status(410, "Expired", "continue token expired"), status=410
                )
            items, list_rv, start = self._snapshots[snap_id], token_rv, int(offset)
        else:
            items = [
                json.loads(json.dumps(o))
                for _, o in sorted(self.objects.items())
                if self._visible(o, namespace)
            ]
            snap_id, list_rv, start = str(next(self._tokens)), str(self.rv), 0
            self._snapshots[snap_id] = items
        limit = int(query.get("limit") or 0) or len(items) or 1
        page = items[start : start + limit]
        meta: Obj = {"resourceVersion": list_rv}
        if start + limit < len(items):
            meta["continue"] = f"{list_rv}:{snap_id}:{start + limit}"
        kind = self.resource.kind + "List"
        return web.json_response(
            {"apiVersion": self.resource.api_version, "kind": kind, "metadata": meta, "items": page}
        )

    async def _watch(
        self, request: web.Request, namespace: str | None, query: dict[str, str]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        rv = query.get("resourceVersion") or ""
        since = int(rv) if rv.isdigit() and rv != "0" else self.rv
        if since < self._compacted:
            line = {
                "type": "ERROR",
                "object": _status(410, "Expired", f"too old resource version: {rv}"),
            }
            await resp.write(json.dumps(line).encode() + b"\n")
            return resp
        watch = _Watch(namespace)
        for ev_rv, etype, obj in self._history:
            if ev_rv > since and self._visible(obj, namespace):
                watch.queue.put_nowait({"type": etype, "object": obj})
        self._watches.append(watch)
        await self._changed_now()
        try:
            while True:
                item = await watch.queue.get()
                if item == _CLOSE:
                    break
                if item == _DROP:
                    if request.transport is not None:
                        request.transport.abort()
                    break
                await resp.write(json.dumps(item).encode() + b"\n")
        except ConnectionResetError:
            pass
        finally:
            self._watches.remove(watch)
            await self._changed_now()
        return resp


async def rest_client(server: FakeApiServer) -> RestClient:
    """The real ``RestClient`` pointed at the fake server (call inside the event loop)."""
    return RestClient(ApiClient(configuration=Configuration(host=server.url)))


@asynccontextmanager
async def running(coro_fn: Callable[[], Any]) -> AsyncIterator[asyncio.Task[Any]]:
    """Run ``coro_fn()`` as a task for the block; cancel and await it afterwards."""
    task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro_fn())
    try:
        yield task
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


class RecordingClock(FakeClock):
    """A ``FakeClock`` that records every ``sleep`` and lets a test wait for the n-th one."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    async def sleep(self, seconds: float) -> None:
        cond = self._condition()
        async with cond:
            self.sleeps.append(seconds)
            cond.notify_all()
        await super().sleep(seconds)

    async def wait_sleeps(self, n: int, *, timeout: float = 10.0) -> float:
        """Until at least ``n`` sleeps started; returns the n-th duration."""
        cond = self._condition()
        async with cond:
            await asyncio.wait_for(cond.wait_for(lambda: len(self.sleeps) >= n), timeout)
        return self.sleeps[n - 1]


class Recorder(Generic[T]):
    """An informer handler that records notifications; ``key`` names the object of a value."""

    def __init__(self, key: Callable[[T], str]) -> None:
        self._key = key
        self.events: list[tuple[str, T | None, T | None]] = []
        self.last: dict[str, tuple[str, T]] = {}
        self._cond: asyncio.Condition | None = None
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    def __call__(self, event_type: str, old: T | None, new: T | None) -> None:
        self.events.append((event_type, old, new))
        value = new if new is not None else old
        assert value is not None
        self.last[self._key(value)] = (event_type, value)
        for pred, fut in list(self._waiters):
            if not fut.done() and pred():
                fut.set_result(None)

    def of_type(self, event_type: str) -> list[tuple[str, T | None, T | None]]:
        return [e for e in self.events if e[0] == event_type]

    def keys(self, event_type: str) -> set[str]:
        out = set()
        for _, old, new in self.of_type(event_type):
            value = new if new is not None else old
            assert value is not None
            out.add(self._key(value))
        return out

    async def wait_until(self, pred: Callable[[], bool], *, timeout: float = 10.0) -> None:
        """Until ``pred()`` holds after some notification (or already holds)."""
        if pred():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (pred, fut)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(fut, timeout)
        finally:
            self._waiters.remove(entry)
