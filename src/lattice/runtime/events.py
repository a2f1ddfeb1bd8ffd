"""Kubernetes Events through events.k8s.io/v1, sent by a background task.

Contract:
- ``record`` never blocks and never raises: it puts the event on a bounded queue and returns.
  When the queue is full the event is dropped and counted (``lattice_events_dropped_total``).
- Reconcilers call ``record`` only after their status write succeeded, so an event always
  describes persisted state.
- A repeat of the same (object uid, type, reason, note) within ``dedupe_window`` seconds updates
  the first event's ``series`` (count, lastObservedTime) instead of creating a new object, the
  way client-go's event broadcaster aggregates.
- Messages are truncated to 1024 characters, as upstream operators do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from lattice.clock import Clock
from lattice.kube import ApiError, KubeClient
from lattice.kube.resources import EVENTS

__all__ = ["EventRecorder", "ObjectRef", "micro_time"]

log = structlog.get_logger(__name__)
_MAX_NOTE = 1024


def micro_time(t: datetime) -> str:
    """RFC3339 with exactly six fractional digits, the MicroTime layout the apiserver parses."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


@dataclass(frozen=True, slots=True)
class _Pending:
    regarding: ObjectRef
    type: str
    reason: str
    note: str
    action: str
    at: datetime


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
        self._instance = instance or "lattice-operator"
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=capacity)
        self._window = dedupe_window
        self._recent: OrderedDict[tuple[str, str, str, str], tuple[str, str, int, float]] = (
            OrderedDict()
        )
        self._on_drop = on_drop
        self._task: asyncio.Task[None] | None = None

    def record(
        self, regarding: ObjectRef, *, type: str, reason: str, note: str, action: str = "Reconcile"
    ) -> None:
        """Queue an event (``type`` is Normal or Warning). Never blocks."""
        item = _Pending(regarding, type, reason, note[:_MAX_NOTE], action, self._clock.now())
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self._dropped()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-sender")

    async def stop(self, *, timeout: float = 5.0) -> None:
        """Flush what is queued (within ``timeout``), then stop the sender."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), timeout)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

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
        mono = self._clock.monotonic()
        prior = self._recent.get(key)
        if prior is not None and mono - prior[3] < self._window:
            name, namespace, count, _ = prior
            count += 1
            await self._client.patch(
                EVENTS,
                name,
                {"series": {"count": count, "lastObservedTime": micro_time(item.at)}},
                namespace=namespace,
            )
            self._recent[key] = (name, namespace, count, prior[3])
            self._recent.move_to_end(key)
            return
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{item.regarding.name}.",
                "namespace": item.regarding.namespace,
            },
            "eventTime": micro_time(item.at),
            "reportingController": self._controller,
            "reportingInstance": self._instance,
            "action": item.action,
            "reason": item.reason,
            "note": item.note,
            "type": item.type,
            "regarding": item.regarding.as_dict(),
        }
        created = await self._client.create(EVENTS, body, namespace=item.regarding.namespace)
        meta = created.get("metadata", {})
        self._recent[key] = (str(meta.get("name", "")), item.regarding.namespace, 1, mono)
        while len(self._recent) > 4096:
            self._recent.popitem(last=False)
