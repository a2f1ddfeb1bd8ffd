"""The scheduler's status writer: merge patches of the scheduler block, read back until seen.

Contract:
- **One writer per field.** The scheduler is the only writer of the block at
  ``plugin.scheduling_path`` (every ``SchedulingStatus`` field: for TrainingJob these sit flat
  in ``status`` next to the reconciler's ``execStatus``; for the Kubeflow kinds the block is
  ``status.lattice``). So :meth:`Writer.launch` sends a JSON merge patch of the block's fields
  to the status subresource *without* a ``resourceVersion`` precondition: a write never
  conflicts with the reconcilers' writes of their fields (conditions, replica statuses).
- **Bounded and ranked.** Writes run concurrently, at most ``concurrency`` at a time, let in
  highest rank first (:class:`Gate`), so a later pass's urgent write does not queue behind an
  earlier pass's bookkeeping.
- **In order per job.** A job's write launched while its previous one is in flight is chained
  behind it, and dropped if that one failed.
- **Read-your-writes** (:meth:`Writer.current`): a pass must not decide from a version of the
  job older than the scheduler's own last write (it would decide again what it already
  decided: the guard the resourceVersion precondition used to give). While a write is in
  flight, its fields stand in for the block of whatever version the cache holds. Once it
  succeeded, the object it returned stands in until the cache shows that version, or a version
  whose block holds the written fields (as only the scheduler writes them, such a version is
  not older than the write), or ``OVERLAY_TTL`` has passed. A stale spec or condition in the
  cache only delays a decision by one pass: the watch event that brings it triggers the next.
- **Events after the write**: a write's events are recorded once it succeeded. A failure
  (``NotFound``, any ``ApiError``, anything else) skips the job and calls ``on_failure`` (the
  loop then runs another pass ``retry_delay`` later).
- Metrics: ``lattice_scheduler_status_writes_total{result}`` (ok, not_found, conflict, error,
  dropped), ``lattice_scheduler_decisions_total{type}`` and ``lattice_preemptions_total`` for
  written events; a write's ``on_written`` (the loop's queue metrics, :mod:`.outcomes`) runs
  after its events.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import structlog

from lattice.clock import Clock
from lattice.kube import ApiError, Conflict, KubeClient, NotFound, Resource
from lattice.primitives.objects import Obj
from lattice.primitives.paths import get_path
from lattice.runtime.events import EventRecorder, ObjectRef
from lattice.runtime.metrics import Metrics
from lattice.scheduler.core import Preempted, SchedulerEvent
from lattice.scheduler.loop.snapshot import status_patch, with_status

__all__ = ["OVERLAY_TTL", "Gate", "Target", "Writer"]

log = structlog.get_logger(__name__)

#: Seconds a succeeded write's object stands in for a cache that has not shown it yet.
OVERLAY_TTL = 60.0


class Target(NamedTuple):
    """The job a write goes to."""

    kind: str
    #: The plan key, ``kind/namespace/name``.
    key: str
    namespace: str
    name: str
    uid: str
    resource: Resource
    path: tuple[str, ...]


class Gate:
    """A semaphore whose waiters are let in highest rank first (FIFO among equal ranks)."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._seq = itertools.count()
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []

    async def acquire(self, rank: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (-rank, next(self._seq), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # let in, then cancelled before it could run: pass it on
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, fut = heapq.heappop(self._waiting)
            if not fut.done():  # cancelled waiters are skipped
                fut.set_result(None)
                return
        self._free += 1


@dataclass(slots=True)
class _Own:
    """The scheduler's latest write of one job: in flight, then done."""

    fields: Mapping[str, Any]
    path: tuple[str, ...]
    uid: str
    seq: int
    task: asyncio.Task[bool] | None = None
    #: The object the apiserver returned, its resourceVersion, and when (clock.monotonic()).
    patched: Obj | None = None
    written: str | None = None
    done_at: float = 0.0
    #: The last overlay built while in flight: (the cached object, the overlaid one).
    overlay: tuple[Mapping[str, Any], Obj] | None = None

    def shown_by(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj``'s block holds every written field (a null: absent)."""
        block = get_path(obj, self.path)
        return all(block.get(k) == v for k, v in self.fields.items())


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Writer:
    """Writes scheduler blocks (see the module contract)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        metrics: Metrics,
        recorder: EventRecorder,
        concurrency: int,
        on_failure: Callable[[], None],
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._client = client
        self._clock = clock
        self._metrics = metrics
        self._recorder = recorder
        self._gate = Gate(concurrency)
        self._on_failure = on_failure
        self._own: dict[str, _Own] = {}
        self._seq = itertools.count(1)
        self._tasks: set[asyncio.Task[bool]] = set()

    @property
    def writing(self) -> int:
        """How many writes are in flight (started or waiting for the gate)."""
        return len(self._tasks)

    def current(self, key: str, cached: Mapping[str, Any]) -> Mapping[str, Any]:
        """The object a pass reads for job ``key`` whose cached version is ``cached``."""
        own = self._own.get(key)
        if own is None:
            return cached
        if (cached.get("metadata") or {}).get("uid") != own.uid:
            del self._own[key]  # deleted and created again
            return cached
        if own.patched is not None:
            stale = self._clock.monotonic() - own.done_at > OVERLAY_TTL
            if stale or _rv(cached) == own.written or own.shown_by(cached):
                del self._own[key]
                return cached
            return own.patched
        if own.overlay is not None and own.overlay[0] is cached:
            return own.overlay[1]
        obj = with_status(cached, own.path, own.fields, version=f"{_rv(cached)}+w{own.seq}")
        own.overlay = (cached, obj)
        return obj

    def retain(self, keys: Collection[str]) -> None:
        """Forget the done writes of jobs not in ``keys`` (gone from the cache)."""
        for key in [k for k, own in self._own.items() if k not in keys and own.task is None]:
            del self._own[key]

    def launch(
        self,
        target: Target,
        fields: Mapping[str, Any],
        *,
        events: Sequence[SchedulerEvent] = (),
        rank: int = 0,
        on_written: Callable[[], None] | None = None,
    ) -> asyncio.Task[bool]:
        """Start writing ``fields`` to ``target``'s block; from now on :meth:`current` reads the
        job as written. Chained behind the job's write in flight, if any. ``on_written`` runs
        once the write succeeded, after its events."""
        prior = self._own.get(target.key)
        chained = prior.task if prior is not None and prior.task is not None else None
        own = _Own(fields=fields, path=target.path, uid=target.uid, seq=next(self._seq))
        task = asyncio.create_task(
            self._write(target, own, events, chained=chained, rank=rank, on_written=on_written)
        )
        own.task = task
        self._own[target.key] = own
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Cancel the writes in flight and wait for them."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _write(
        self,
        target: Target,
        own: _Own,
        events: Sequence[SchedulerEvent],
        *,
        chained: asyncio.Task[bool] | None,
        rank: int,
        on_written: Callable[[], None] | None = None,
    ) -> bool:
        result: str | None = None  # stays None if cancelled
        try:
            if chained is not None and not await chained:
                result = "dropped"
                return False
            body = status_patch(target.path, own.fields)
            await self._gate.acquire(rank)
            try:
                patched = await self._client.patch(
                    target.resource,
                    target.name,
                    body,
                    namespace=target.namespace,
                    subresource="status",
                )
            except (Conflict, NotFound) as exc:
                result = "conflict" if isinstance(exc, Conflict) else "not_found"
                log.debug("scheduler.write_skipped", job=target.key, reason=type(exc).__name__)
                return False
            except ApiError as exc:
                result = "error"
                log.warning("scheduler.write_failed", job=target.key, error=str(exc))
                return False
            except Exception:
                result = "error"
                log.exception("scheduler.write_crashed", job=target.key)
                return False
            finally:
                self._gate.release()
            if isinstance(patched, dict) and _rv(patched):
                own.patched, own.written = patched, _rv(patched)
                own.done_at = self._clock.monotonic()
            result = "ok"
            self._emit(target, events)
            if on_written is not None:
                on_written()
            return True
        finally:
            own.task = None
            if self._own.get(target.key) is own and own.patched is None:
                del self._own[target.key]  # failed (or answered without a version): the cache
            if result is not None:
                self._metrics.status_writes.labels(result).inc()
            if result not in (None, "ok"):
                self._on_failure()

    def _emit(self, target: Target, events: Sequence[SchedulerEvent]) -> None:
        if not events:
            return
        ref = ObjectRef(
            target.resource.api_version, target.kind, target.namespace, target.name, target.uid
        )
        for event in events:
            self._recorder.record(ref, type=event.type, reason=event.reason, note=event.message)
            self._metrics.decisions.labels(event.reason).inc()
            if isinstance(event, Preempted) and event.beneficiary is not None:
                self._metrics.preemptions.inc()
            log.debug("scheduler.event", job=target.key, reason=event.reason, message=event.message)
