"""The delaying layer: client-go's ``delaying_queue.go`` (``AddAfter``) on the injected clock.

Invariants (from client-go ``delaying_queue.go``):

1. ``add_after(key, delay)`` with ``delay <= 0`` is ``add(key)`` at once.
2. Otherwise ``key`` waits in a heap of ``(ready_at, seq, key)`` on ``clock.monotonic()`` and is
   ``add``-ed when its time comes; the work-queue invariants then apply unchanged (a key that is
   being processed when it fires is only marked dirty).
3. A repeated ``add_after`` for a key already waiting only ever moves it **earlier**: *"update the
   time only if it would cause the item to be queued sooner"*. A waiting key fires once.
4. ``add_after`` while shutting down is ignored; shutting down drops every waiting key.
5. Every ``add_after`` call counts as a retry (``QueueMetrics.retry``), as in client-go.

The waiter: at most one background task, started lazily by the first ``add_after`` that has to
wait (so a ``DelayingQueue`` needs a running loop only then) and ending when nothing waits. It
sleeps on ``clock.sleep`` until the earliest ``ready_at``; an earlier arrival replaces it with a
task that sleeps until the new, earlier time (the "woken early" of client-go's
``waitingForAddCh``). No sleep is longer than ``MAX_WAIT`` (client-go's 10 s heartbeat): the waiter
re-reads the clock and the heap at least that often, so a timer that fires late or a clock that
jumps cannot leave a ready key waiting for more than 10 s. With ``FakeClock``, ``advance`` drives
all of this with no real sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from typing import Unpack

from lattice.clock import Clock
from lattice.runtime.workqueue import K, QueueOptions, WorkQueue

__all__ = ["MAX_WAIT", "DelayingQueue"]

MAX_WAIT = 10.0
"""Longest single sleep of the waiter, in seconds (client-go ``maxWait``)."""


class DelayingQueue(WorkQueue[K]):
    """A ``WorkQueue`` that can also add a key after a delay (see the module docstring)."""

    def __init__(self, clock: Clock, **options: Unpack[QueueOptions[K]]) -> None:
        super().__init__(clock, **options)
        # heap of (ready_at, seq, key); an entry is live iff _waiting[key] == (ready_at, seq).
        # Moving a key earlier pushes a new entry and leaves the old one to be skipped.
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, tuple[float, int]] = {}
        self._seq = itertools.count()
        self._waiter: asyncio.Task[None] | None = None
        self._waiter_deadline = math.inf

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds of the clock have passed (invariants 1-5)."""
        if self._shutting_down:
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._clock.monotonic() + delay
        current = self._waiting.get(key)
        if current is not None and current[0] <= ready_at:
            return
        seq = next(self._seq)
        self._waiting[key] = (ready_at, seq)
        heapq.heappush(self._heap, (ready_at, seq, key))
        if len(self._heap) > 2 * len(self._waiting) + 64:
            self._compact()
        # (a waiter that died, say of a raising metrics hook, is replaced rather than trusted)
        if ready_at < self._waiter_deadline or self._waiter is None or self._waiter.done():
            self._start_waiter(ready_at)

    def len_waiting(self) -> int:
        """Keys waiting for their delay to pass; informational only."""
        return len(self._waiting)

    # -- the waiter -------------------------------------------------------------------------

    def _start_waiter(self, deadline: float) -> None:
        """Replace the waiter by one that wakes at ``deadline`` (earlier than the current one's)."""
        if self._waiter is not None:
            self._waiter.cancel()
        self._waiter_deadline = deadline
        self._waiter = asyncio.get_running_loop().create_task(
            self._wait_loop(deadline), name=f"workqueue-delay-{self.name}"
        )

    async def _wait_loop(self, deadline: float) -> None:
        # Cancellation (an earlier arrival or shutdown) can only land at the sleep, and the
        # replacing code has already updated _waiter, so nothing here may touch it after a cancel.
        while True:
            await self._clock.sleep(min(deadline - self._clock.monotonic(), MAX_WAIT))
            self._fire_ready(self._clock.monotonic())
            earliest = self._earliest()
            if earliest is None or self._shutting_down:
                self._waiter = None
                self._waiter_deadline = math.inf
                return
            deadline = earliest
            self._waiter_deadline = deadline

    def _fire_ready(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            ready_at, seq, key = heapq.heappop(heap)
            if self._waiting.get(key) == (ready_at, seq):
                del self._waiting[key]
                self.add(key)

    def _earliest(self) -> float | None:
        """The earliest live ``ready_at``, dropping stale entries from the top of the heap."""
        heap = self._heap
        while heap:
            ready_at, seq, key = heap[0]
            if self._waiting.get(key) == (ready_at, seq):
                return ready_at
            heapq.heappop(heap)
        return None

    def _compact(self) -> None:
        self._heap = [(at, seq, key) for key, (at, seq) in self._waiting.items()]
        heapq.heapify(self._heap)

    def _stop_background(self) -> None:
        super()._stop_background()
        if self._waiter is not None:
            self._waiter.cancel()
            self._waiter = None
        self._waiter_deadline = math.inf
        self._heap.clear()
        self._waiting.clear()
