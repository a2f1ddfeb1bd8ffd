"""The reconcile harness: N workers draining one rate-limited workqueue.

It follows controller-runtime's contract (``pkg/internal/controller/controller.go``):

| outcome of ``reconcile(key)``   | queue action                             | result label      |
|---------------------------------|------------------------------------------|-------------------|
| raises ``TerminalError``        | ``forget``; no requeue; counted          | ``error``         |
| raises ``Conflict`` (409)       | ``add_rate_limited``, logged quietly      | ``requeue``       |
| raises anything else            | ``add_rate_limited``                     | ``error``         |
| ``Result(requeue_after=s)``     | ``forget``, then ``add_after(key, s)``   | ``requeue_after`` |
| ``Result()``                    | ``forget``                               | ``success``       |

``done(key)`` always runs, so a key is never processed by two workers at once and a key added
while it was processed runs exactly once more. Each reconcile binds ``controller``, ``key`` and a
fresh ``reconcile_id`` into structlog's context variables. Workers start only when the caller says
the caches have synced (``run`` awaits ``ready`` first).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from lattice.clock import Clock
from lattice.kube import Conflict
from lattice.runtime.metrics import Metrics
from lattice.runtime.ratelimit import RateLimitingQueue
from lattice.runtime.workqueue import QueueShutDown

__all__ = ["Controller", "Reconciler", "Result", "TerminalError"]

log = structlog.get_logger(__name__)

#: Reconcile ids: a random prefix per process, then a counter (a uuid4 per reconcile reads
#: os.urandom each time, a measurable cost: docs/performance.md); the ids only correlate log
#: lines.
_ID_PREFIX = uuid.uuid4().hex[:6]
_ID_SEQ = itertools.count(1)


def _reconcile_id() -> str:
    return f"{_ID_PREFIX}{next(_ID_SEQ):06x}"


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks of the queue. ``requeue_after`` is in seconds."""

    requeue_after: float | None = None


class TerminalError(Exception):
    """An error that retrying cannot fix: counted, logged, never requeued."""


class Reconciler(Protocol):
    async def reconcile(self, key: str) -> Result: ...


class Controller:
    """Runs ``reconciler`` over the keys of ``queue`` with ``workers`` concurrent workers, plus
    ``reserved`` more that take only keys of priority ``reserved_from`` or more (see
    ``WorkQueue.get``): however long the backlog of lesser keys, an urgent key finds a worker
    at once."""

    def __init__(
        self,
        *,
        name: str,
        reconciler: Reconciler,
        queue: RateLimitingQueue[str],
        workers: int,
        metrics: Metrics,
        clock: Clock,
        reserved: int = 0,
        reserved_from: int = 0,
    ) -> None:
        self.name = name
        self.queue = queue
        self._reconciler = reconciler
        self._workers = workers
        self._reserved = reserved
        self._reserved_from = reserved_from
        self._metrics = metrics
        self._clock = clock
        self._tasks: list[asyncio.Task[None]] = []
        metrics.init_controller(name, workers + reserved)

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    async def run(self, ready: Callable[[], Awaitable[object]] | None = None) -> None:
        """Wait for ``ready``, then run the workers until the queue shuts down."""
        if ready is not None:
            await ready()
        log.info(
            "controller.starting_workers",
            controller=self.name,
            workers=self._workers,
            reserved=self._reserved,
        )
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
            for i in range(self._workers)
        ]
        self._tasks += [
            asyncio.create_task(self._worker(self._reserved_from), name=f"{self.name}-reserved-{i}")
            for i in range(self._reserved)
        ]
        try:
            await asyncio.gather(*self._tasks)
        finally:
            for task in self._tasks:
                task.cancel()

    async def shutdown(self, *, timeout: float) -> None:
        """Stop taking work; give in-flight reconciles ``timeout`` seconds to finish."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.queue.shutdown_with_drain(), timeout)
        self.queue.shutdown()
        for task in self._tasks:
            task.cancel()

    async def _worker(self, min_priority: int | None = None) -> None:
        while True:
            try:
                key = await self.queue.get(min_priority=min_priority)
            except QueueShutDown:
                return
            try:
                await self._process(key)
            finally:
                self.queue.done(key)

    async def _process(self, key: str) -> None:
        active = self._metrics.active_workers.labels(self.name)
        active.inc()
        start = self._clock.monotonic()
        rid = _reconcile_id()
        try:
            with structlog.contextvars.bound_contextvars(
                controller=self.name, key=key, reconcile_id=rid
            ):
                result_label = await self._reconcile_once(key)
        finally:
            active.dec()
            self._metrics.reconcile_time.labels(self.name).observe(self._clock.monotonic() - start)
        self._metrics.reconcile_total.labels(self.name, result_label).inc()

    async def _reconcile_once(self, key: str) -> str:
        try:
            result = await self._reconciler.reconcile(key)
        except asyncio.CancelledError:
            raise
        except TerminalError as exc:
            self.queue.forget(key)
            self._metrics.reconcile_errors.labels(self.name).inc()
            self._metrics.reconcile_terminal_errors.labels(self.name).inc()
            log.error("reconcile.terminal_error", error=str(exc))
            return "error"
        except Conflict:
            # A stale cache met optimistic concurrency: retry quietly, it is not an error.
            self.queue.add_rate_limited(key)
            log.debug("reconcile.conflict")
            return "requeue"
        except Exception as exc:  # every other failure is retried with backoff
            self.queue.add_rate_limited(key)
            self._metrics.reconcile_errors.labels(self.name).inc()
            log.warning("reconcile.error", error=repr(exc), exc_info=True)
            return "error"
        self.queue.forget(key)
        if result.requeue_after is not None and result.requeue_after >= 0:
            self.queue.add_after(key, result.requeue_after)
            return "requeue_after"
        return "success"
