"""Kubernetes Events through events.k8s.io/v1, sent by a background task.

Contract:
- ``record`` never blocks and never raises: it puts the event on a bounded queue and returns.
  When the queue is full the event is dropped and counted (``lattice_events_dropped_total``).
- Reconcilers call ``record`` only after their status write succeeded, so an event always
  describes persisted state.
- A repeat of the same (object uid, type, reason, note) within ``dedupe_window`` seconds updates
  the first event's ``series`` (count, lastObservedTime) instead of creating a new object, the
  way client-go's event broadcaster aggregates.
- Notes are truncated to 1024 bytes of UTF-8 (the apiserver's limit counts bytes, not characters)
  without splitting a character; ``reportingInstance`` to 128 bytes likewise.
- Events are named like client-go's: ``<regarding name>.<unix nanoseconds in hex>`` (unique per
  recorder; a name taken by someone else is retried). An event about a cluster-scoped object
  (``regarding.namespace == ""``) goes to the ``default`` namespace, as client-go does.
- If the event a repeat would update is gone (deleted, or expired by the apiserver's event TTL),
  the repeat creates a new event instead of being dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from lattice.clock import Clock
from lattice.kube import AlreadyExists, ApiError, KubeClient, NotFound
from lattice.kube.resources import EVENTS
from lattice.primitives.times import format_micro_time

__all__ = ["EventRecorder", "ObjectRef", "event_body", "format_micro_time"]

log = structlog.get_logger(__name__)
_MAX_NOTE = 1024  # bytes: NoteLengthLimit, checked with Go's len() on the UTF-8 string
_MAX_INSTANCE = 128  # bytes: ReportingInstanceLengthLimit
_MAX_NAME = 253
_NAME_ATTEMPTS = 3
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _truncate_utf8(text: str, limit: int) -> str:
    """At most ``limit`` bytes of UTF-8, never ending in half a character."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore")


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an event is about."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def as_dict(self) -> dict[str, str]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }


def event_body(
    regarding: ObjectRef,
    *,
    type: str,
    reason: str,
    note: str,
    action: str,
    at: datetime,
    controller: str,
    instance: str,
) -> dict[str, Any]:
    """The ``events.k8s.io/v1`` Event the recorder posts, without its name."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"namespace": regarding.namespace},
        "eventTime": format_micro_time(at),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "note": note,
        "type": type,
        "regarding": regarding.as_dict(),
    }


@dataclass(frozen=True, slots=True)
class _Pending:
    regarding: ObjectRef
    type: str
    reason: str
    note: str
    action: str
    at: datetime
    mono: float  # when recorded: the dedupe window is about occurrences, not send times


class EventRecorder:
    """Fire-and-forget event posting for one controller identity."""

    def __init__(
        self,
        client: KubeClient,
        *,
        clock: Clock,
        controller: str,
        instance: str,
        capacity: int = 4096,
        dedupe_window: float = 600.0,
        on_drop: Any = None,
    ) -> None:
        self._client = client
        self._clock = clock
        self._controller = controller
        self._instance = _truncate_utf8(instance or "lattice-operator", _MAX_INSTANCE)
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=capacity)
        self._window = dedupe_window
        self._recent: OrderedDict[tuple[str, str, str, str], tuple[str, str, int, float]] = (
            OrderedDict()
        )
        self._on_drop = on_drop
        self._task: asyncio.Task[None] | None = None
        self._last_ns = 0

    def record(
        self, regarding: ObjectRef, *, type: str, reason: str, note: str, action: str = "Reconcile"
    ) -> None:
        """Queue an event (``type`` is Normal or Warning). Never blocks."""
        note = _truncate_utf8(note, _MAX_NOTE)
        item = _Pending(
            regarding, type, reason, note, action, self._clock.now(), self._clock.monotonic()
        )
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self._dropped()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-sender")

    async def stop(self, *, timeout: float = 5.0) -> None:
        """Flush what is queued (within ``timeout``), then stop the sender. Events still queued
        or in flight when the timeout ends are counted as dropped."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), timeout)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        while not self._queue.empty():
            self._queue.get_nowait()
            self._queue.task_done()
            self._dropped()

    async def flush(self) -> None:
        """Wait until every queued event has been handled (tests)."""
        await self._queue.join()

    def _dropped(self) -> None:
        if self._on_drop is not None:
            self._on_drop()

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._send(item)
            except asyncio.CancelledError:
                self._dropped()  # stopped while sending: not known to have arrived
                raise
            except ApiError as exc:
                self._dropped()
                log.debug("event.send_failed", reason=item.reason, error=str(exc))
            except Exception:  # the sender must survive anything
                self._dropped()
                log.exception("event.send_crashed", reason=item.reason)
            finally:
                self._queue.task_done()

    async def _send(self, item: _Pending) -> None:
        key = (item.regarding.uid, item.type, item.reason, item.note)
        mono = item.mono
        prior = self._recent.get(key)
        if prior is not None and mono - prior[3] < self._window:
            name, namespace, count, first = prior
            try:
                await self._client.patch(
                    EVENTS,
                    name,
                    {
                        "series": {
                            "count": count + 1,
                            "lastObservedTime": format_micro_time(item.at),
                        }
                    },
                    namespace=namespace,
                )
            except NotFound:
                del self._recent[key]  # deleted or expired: start a new event below
            else:
                self._recent[key] = (name, namespace, count + 1, first)
                self._recent.move_to_end(key)
                return
        namespace = item.regarding.namespace or "default"
        created = await self._create(item, namespace)
        meta = created.get("metadata", {})
        self._recent[key] = (str(meta.get("name", "")), namespace, 1, mono)
        while len(self._recent) > 4096:
            self._recent.popitem(last=False)

    def _event_name(self, item: _Pending) -> str:
        """client-go's ``<name>.<unix nanos in hex>``, strictly increasing per recorder."""
        at = item.at if item.at.tzinfo is not None else item.at.replace(tzinfo=UTC)
        ns = max((at - _EPOCH) // timedelta(microseconds=1) * 1000, self._last_ns + 1)
        self._last_ns = ns
        suffix = f".{ns:x}"
        base = item.regarding.name[: _MAX_NAME - len(suffix)].rstrip(".-")
        return base + suffix

    async def _create(self, item: _Pending, namespace: str) -> dict[str, Any]:
        body = event_body(
            item.regarding,
            type=item.type,
            reason=item.reason,
            note=item.note,
            action=item.action,
            at=item.at,
            controller=self._controller,
            instance=self._instance,
        )
        body["metadata"]["namespace"] = namespace
        for attempt in range(_NAME_ATTEMPTS):
            body["metadata"]["name"] = self._event_name(item)
            try:
                return await self._client.create(EVENTS, body, namespace=namespace)
            except AlreadyExists:
                if attempt == _NAME_ATTEMPTS - 1:
                    raise
                self._last_ns += 1_000_000  # another recorder took the name: move on 1 ms
        raise AssertionError("unreachable")
