"""The work queue: client-go's ``util/workqueue`` (``queue.go``) semantics on one asyncio loop.

Informer handlers call ``add(key)`` (synchronous, never blocks); N worker tasks loop on
``key = await get()`` → reconcile → ``done(key)``. Keys are hashable values (an ``ObjectKey``
tuple), never objects: the reconciler reads the cache.

Invariants (quoted or paraphrased from client-go ``queue.go`` and ``doc.go``):

1. Three structures: ``queue`` (order), ``dirty`` (needs processing), ``processing`` (being
   processed). *"Every element of queue should be in the dirty set and not in the processing
   set."*
2. **Stingy:** *"a single item will not be processed multiple times concurrently, and if an item
   is added multiple times before it can be processed, it will only be processed once."*
3. ``add(key)``: ignored while shutting down. A no-op if ``key`` is already dirty (duplicates
   collapse). Otherwise ``key`` becomes dirty; if it is being processed it is **not** queued, only
   marked dirty.
4. ``get()``: waits until the queue is non-empty or the queue shuts down. It pops the oldest key
   (FIFO among distinct keys), moves it into ``processing`` and out of ``dirty``. With a
   ``priority`` function it pops the queued key of highest priority instead, oldest first among
   equals (see *Priority* below).
5. ``done(key)``: removes ``key`` from ``processing``; *"if it has been marked as dirty again while
   it was being processed, it will be re-added to the queue for re-processing"*, exactly once.
6. ``shutdown()`` drops every later ``add``. Keys already queued are still handed out; once the
   queue is empty ``get()`` raises ``QueueShutDown`` (the worker should exit). A key that was
   dirty while processing is re-queued by its ``done`` and handed out once more (client-go's
   ``TestQueueDrainageUsingShutDownWithDrainWithDirtyItem``).
   ``shutdown_with_drain()`` does the same and then waits until ``processing`` is empty, which
   requires every worker to call ``done``; a later ``shutdown()`` stops that wait.

Priority (an extension, like controller-runtime's ``priorityqueue``; client-go has none): an
optional ``priority(key) -> int`` is asked whenever a key enters the queue order (``add`` of a
key that is not dirty, the re-queue in ``done``, and ``add`` of a key that is already queued).
A queued key keeps the highest priority it was given until a worker takes it; ``add`` of a
queued key with a higher priority moves it up (it keeps its place among keys of that priority
as if added now); a lower one changes nothing. Invariants 1-6 are unchanged: a key is still
queued once and processed by one worker at a time. Without the function every key has
priority 0 and the queue is FIFO. A function that raises is logged and counts as 0.
``get(min_priority=p)`` takes only a key of priority ``p`` or more (the highest queued) and
waits while there is none: a worker reserved for urgent keys, which a backlog of lesser ones
can never occupy. A queued key wakes a waiting plain ``get`` first, and one of these only when
no plain ``get`` waits and the key is the highest queued and reaches its bound.

Concurrency model: everything runs on one event loop; no method is thread-safe. Only ``get`` and
``shutdown_with_drain`` suspend. ``done`` on a key that is not being processed is a bug in the
caller and raises ``ValueError`` (client-go silently re-queues it, which breaks invariant 1).

Metrics: the queue reports client-go's workqueue metrics through ``QueueMetrics``; the default
reports nothing and costs no clock reads. With metrics, ``depth`` is the number of dirty keys
(client-go increments it on every accepted add and decrements it on get), and a background task,
started by the first ``get``, reports unfinished work every ``unfinished_work_period`` seconds.
Hooks run after the state change, so a raising hook reaches the caller but cannot break the
invariants.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypedDict, TypeVar

import structlog

from lattice.clock import Clock

__all__ = ["NoopQueueMetrics", "QueueMetrics", "QueueOptions", "QueueShutDown", "WorkQueue"]

K = TypeVar("K", bound=Hashable)

log = structlog.get_logger(__name__)


class QueueOptions(TypedDict, Generic[K], total=False):
    """The keyword options of ``WorkQueue``, passed through unchanged by its subclasses."""

    name: str
    metrics: QueueMetrics | None
    unfinished_work_period: float
    priority: Callable[[K], int] | None


class QueueShutDown(Exception):
    """Raised by ``WorkQueue.get`` once the queue is shut down and empty: the worker should exit."""


class QueueMetrics(Protocol):
    """Sink for client-go's workqueue metrics; the implementation binds the ``name`` label.

    Method → metric: ``add`` → ``workqueue_adds_total``; ``depth`` → ``workqueue_depth``;
    ``get`` → ``workqueue_queue_duration_seconds``; ``done`` → ``workqueue_work_duration_seconds``;
    ``retry`` → ``workqueue_retries_total``; ``unfinished`` →
    ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds``.
    """

    def add(self) -> None:
        """A key was accepted (it was not already dirty)."""
        ...

    def depth(self, n: int) -> None:
        """The number of keys waiting to be processed (the dirty set) is now ``n``."""
        ...

    def get(self, latency_s: float) -> None:
        """A key was handed to a worker ``latency_s`` seconds after it was added."""
        ...

    def done(self, work_s: float) -> None:
        """A worker finished a key it had held for ``work_s`` seconds."""
        ...

    def retry(self) -> None:
        """``add_after`` (and so ``add_rate_limited``) was called, as client-go counts retries."""
        ...

    def unfinished(self, unfinished_s: float, longest_s: float) -> None:
        """Keys in flight have been processed ``unfinished_s`` in sum, the oldest ``longest_s``."""
        ...


class NoopQueueMetrics:
    """Reports nothing; the default."""

    def add(self) -> None:
        pass

    def depth(self, n: int) -> None:
        pass

    def get(self, latency_s: float) -> None:
        pass

    def done(self, work_s: float) -> None:
        pass

    def retry(self) -> None:
        pass

    def unfinished(self, unfinished_s: float, longest_s: float) -> None:
        pass


class WorkQueue(Generic[K]):
    """A FIFO (or, with ``priority``, a priority queue) of distinct keys with client-go's
    dirty/processing rules (see the module docstring).

    A worker loop::

        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            try:
                await reconcile(key)
            finally:
                queue.done(key)
    """

    def __init__(
        self,
        clock: Clock,
        *,
        name: str = "",
        metrics: QueueMetrics | None = None,
        unfinished_work_period: float = 0.5,
        priority: Callable[[K], int] | None = None,
    ) -> None:
        self.name = name
        self._clock = clock
        self._priority = priority
        # the order in which we work on keys: a heap of (-priority, seq, key), an entry live only
        # while _queued[key] is its (-priority, seq); every key of _queued is in _dirty and not
        # in _processing. Stale entries (a key moved up) are skipped when popped.
        self._order: list[tuple[int, int, K]] = []
        self._queued: dict[K, tuple[int, int]] = {}
        self._order_seq = itertools.count()
        # every key that needs processing, whether queued or (again) while being processed.
        self._dirty: set[K] = set()
        # keys a worker holds; a key here may also be in _dirty, and is queued again on done().
        self._processing: set[K] = set()
        self._shutting_down = False
        self._drain = False
        self._getters: deque[asyncio.Future[None]] = deque()
        # gets with a min_priority: (min_priority, waiter)
        self._picky: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        self._metrics: QueueMetrics = metrics if metrics is not None else NoopQueueMetrics()
        self._timed = metrics is not None
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._unfinished_period = unfinished_work_period
        self._unfinished_task: asyncio.Task[None] | None = None

    # -- the client-go interface ------------------------------------------------------------

    def add(self, key: K) -> None:
        """Mark ``key`` as needing processing (invariant 3). Never blocks."""
        if self._shutting_down:
            return
        if key in self._dirty:
            if self._priority is not None and key in self._queued:
                self._push(key)  # moves it up if its priority rose
                if self._picky:  # ... maybe into reach of a reserved worker
                    self._wake_one_getter()
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._push(key)
            self._wake_one_getter()
        if self._timed:  # after the state change, so a raising hook cannot break the invariants
            self._added_at.setdefault(key, self._clock.monotonic())
            self._metrics.add()
            self._metrics.depth(len(self._dirty))

    async def get(self, *, min_priority: int | None = None) -> K:
        """Wait for the next key and hand it to the caller, who must call ``done(key)`` later.

        With ``min_priority`` only a key of that priority or more is taken (see *Priority*).
        Raises ``QueueShutDown`` once the queue is shut down and has no queued key left (no
        key of ``min_priority`` or more, for such a get). Cancelling a waiting ``get`` takes
        nothing from the queue.
        """
        if self._timed and self._unfinished_task is None and not self._shutting_down:
            self._unfinished_task = asyncio.get_running_loop().create_task(
                self._report_unfinished_work_loop(), name=f"workqueue-unfinished-{self.name}"
            )
        while not self._ready_for(min_priority):
            if self._shutting_down:
                raise QueueShutDown(self.name)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = None if min_priority is None else (min_priority, waiter)
            if entry is None:
                self._getters.append(waiter)
            else:
                self._picky.append(entry)
            try:
                await waiter
            except asyncio.CancelledError:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    if entry is None:
                        self._getters.remove(waiter)
                    else:
                        self._picky.remove(entry)
                # we were woken for a key but cancelled before taking it: pass the wake-up on.
                if self._queued and not waiter.cancelled():
                    self._wake_one_getter()
                raise
        key = self._pop()
        self._processing.add(key)
        self._dirty.discard(key)
        if self._timed:
            now = self._clock.monotonic()
            self._started_at[key] = now
            added = self._added_at.pop(key, None)
            self._metrics.depth(len(self._dirty))
            if added is not None:
                self._metrics.get(now - added)
        return key

    def done(self, key: K) -> None:
        """Finish processing ``key``; re-queue it once if it was added meanwhile (invariant 5)."""
        if key not in self._processing:
            msg = f"done({key!r}) for a key that is not being processed"
            raise ValueError(msg)
        self._processing.remove(key)
        if key in self._dirty:
            self._push(key)
            self._wake_one_getter()
        if not self._processing:
            self._wake_drainers()
        if self._timed:
            started = self._started_at.pop(key, None)
            if started is not None:
                self._metrics.done(self._clock.monotonic() - started)

    def len(self) -> int:
        """Keys queued and not yet handed out; informational only (never gate on it)."""
        return len(self._queued)

    @property
    def shutting_down(self) -> bool:
        """Whether ``shutdown`` or ``shutdown_with_drain`` has been called."""
        return self._shutting_down

    def shutdown(self) -> None:
        """Ignore new adds, release waiting workers once the queue is empty, stop any drain wait."""
        self._drain = False
        self._begin_shutdown()
        self._wake_drainers()

    async def shutdown_with_drain(self) -> None:
        """Like ``shutdown``, then wait until every key being processed is ``done``.

        Workers must call ``done`` for every key they got, or this waits forever; a later
        ``shutdown()`` (a second SIGTERM, say) makes it return at once.
        """
        self._drain = True
        self._begin_shutdown()
        while self._processing and self._drain:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drainers.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._drainers.remove(waiter)

    # -- metrics ----------------------------------------------------------------------------

    def update_unfinished_work(self) -> None:
        """Report how long the keys in flight have been processed (client-go's 500 ms tick)."""
        if not self._timed or self._shutting_down:
            return
        now = self._clock.monotonic()
        ages = [now - started for started in self._started_at.values()]
        self._metrics.unfinished(sum(ages), max(ages, default=0.0))

    async def _report_unfinished_work_loop(self) -> None:
        while not self._shutting_down:
            await self._clock.sleep(self._unfinished_period)
            self.update_unfinished_work()

    # -- internals --------------------------------------------------------------------------

    def _push(self, key: K) -> None:
        """Queue ``key`` at its priority, or move an already queued key up to a higher one."""
        rank = -self._priority_of(key) if self._priority is not None else 0
        current = self._queued.get(key)
        if current is not None and current[0] <= rank:
            return
        entry = (rank, next(self._order_seq))
        self._queued[key] = entry
        heapq.heappush(self._order, (*entry, key))

    def _priority_of(self, key: K) -> int:
        assert self._priority is not None
        try:
            return int(self._priority(key))
        except Exception:  # a bug in the lookup must not break the queue's invariants
            log.warning("workqueue.priority_failed", queue=self.name, key=repr(key), exc_info=True)
            return 0

    def _pop(self) -> K:
        """Take the live entry of highest priority (oldest among equals) off the heap."""
        self._top_priority()  # drops the stale entries above it
        _, _, key = heapq.heappop(self._order)
        del self._queued[key]
        return key

    def _ready_for(self, min_priority: int | None) -> bool:
        """Whether a get with ``min_priority`` can take a key now."""
        if min_priority is None:
            return bool(self._queued)
        top = self._top_priority()
        return top is not None and top >= min_priority

    def _top_priority(self) -> int | None:
        """The priority of the key ``get`` would take next (None: nothing queued); drops the
        stale heap entries above it."""
        while self._order:
            rank, seq, key = self._order[0]
            if self._queued.get(key) == (rank, seq):
                return -rank
            heapq.heappop(self._order)
        return None

    def _begin_shutdown(self) -> None:
        self._shutting_down = True
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        while self._picky:
            _, waiter = self._picky.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._stop_background()

    def _stop_background(self) -> None:
        """Cancel the queue's own tasks; subclasses extend this."""
        if self._unfinished_task is not None:
            self._unfinished_task.cancel()
            self._unfinished_task = None

    def _wake_one_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        if not self._picky:
            return
        top = self._top_priority()
        if top is None:
            return
        for entry in self._picky:
            bound, waiter = entry
            if bound <= top and not waiter.done():
                self._picky.remove(entry)
                waiter.set_result(None)
                return

    def _wake_drainers(self) -> None:
        drainers, self._drainers = self._drainers, []
        for waiter in drainers:
            if not waiter.done():
                waiter.set_result(None)
