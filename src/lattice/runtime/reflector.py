"""The list/watch loop for one resource in one scope (all namespaces, or one namespace).

A ``Reflector`` owns the resourceVersion bookkeeping and the retry policy; what happens to the
objects is its ``ReflectorSink``'s business (the informer: transform, store, handlers). It follows
client-go's ``tools/cache/reflector.go``:

9.  The first LIST asks for ``resourceVersion="0"`` (served from the apiserver's watch cache), in
    pages of ``page_size`` (``limit``/``continue``; pages after the first carry no RV, as the
    apiserver demands). After a 410 the next LIST uses ``""``, a consistent read from etcd
    (``relistResourceVersion``). client-go first retries with the last RV and falls back to
    ``""`` only when that LIST also expires; we go straight to ``""``: one quorum read per 410,
    never a stale snapshot. Relists after other errors use the last RV (not older than it),
    except after a "Too large resource version" answer, which also switches to ``""``.
10. WATCH starts from the last synced RV with bookmarks on and a random ``timeoutSeconds`` in
    ``[min_watch_timeout, 2 * min_watch_timeout)`` (default 300..600 s), so watchers neither hang
    nor reconnect in lockstep. The client adds a read timeout of ``timeoutSeconds + 30``.
11. The RV advances after every event is handed to the sink, BOOKMARK included; a bookmark
    reaches no sink method (it changes no object).
12. A 410 (``Gone``: an ERROR event in the stream, a watch request or an expired ``continue``)
    sends the loop back to LIST. It never re-watches at the RV that expired (the kr8s trap). A
    first 410 relists at once; a second one with no watch event in between goes through the
    backoff, so a server that keeps answering 410 cannot spin us.
    Other failures back off (``Backoff``: 0.5 s doubling to a 5 s cap, each delay drawn from
    the upper half of its step, reset after 2 min without failures), honouring ``Retry-After``
    when it is longer. client-go caps at 30 s with a jitter of 1.0, so a watch could wait up
    to a minute after an outage ended; an operator holds about a dozen watches, so retrying
    every 2.5-5 s costs an apiserver nothing and recovery takes seconds. Then:
    - transport failures (status 0) and 429 re-watch from the last RV, which is still valid
      (client-go's ``isWatchErrorRetriable``);
    - any other error (500, an ERROR event, a malformed stream) relists from the last RV;
    - a watch the server closes normally is re-opened at once from the last RV, unless it lasted
      under a second with no event ("very short watch"), which counts as an error.
13. Tombstones are the sink's job: a LIST is one ``begin_list`` of the scope, then every page
    in order through ``ListSink.add_page``, then ``commit`` with the LIST's RV, which replaces
    the scope as a whole. A LIST that fails part-way is abandoned before ``commit``: nothing of
    it reaches the store. Each raw page is released before the next one is requested, and the
    sink keeps only its projections of a page, so a relist holds one raw page at a time, never
    the whole scope (100,000 raw pods are ~4 GiB of Python heap).

Health: ``failing_since`` is the monotonic time of the first failure (of a LIST, of a WATCH
request, or of an open watch) since the loop last succeeded: a LIST committed, or a WATCH the
apiserver accepted (``on_open``, before any event, so a quiet resource is healthy as soon as its
watch is open). A 410 is the protocol, not a failure. ``last_error`` says what failed. A 401 or
403 is logged as ``reflector.denied`` at error level with the apiserver's message, once per
distinct message, since it needs a person: the credentials or the RBAC are wrong.

``force_relist()`` makes the loop behave as if the watch had expired: it stops the current watch
and relists with ``RV=""``. Tests and operators use it to exercise the relist path on a real
apiserver, which cannot produce a 410 on demand.

``run()`` runs until cancelled; cancellation closes the watch stream and leaves no task behind.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Protocol

import structlog

from lattice.clock import Clock
from lattice.kube.client import KubeClient, WatchEvent
from lattice.kube.errors import ApiError, Forbidden, Gone, TooManyRequests, Unauthorized
from lattice.kube.resources import Resource
from lattice.primitives.objects import Obj

__all__ = [
    "Backoff",
    "InformerMetrics",
    "ListSink",
    "NullInformerMetrics",
    "Reflector",
    "ReflectorSink",
    "Synced",
]

log = structlog.get_logger(__name__)

_OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})
_SHORT_WATCH_S = 1.0
_TOO_LARGE_RV = "too large resource version"


class ListSink(Protocol):
    """One LIST of one scope, delivered page by page."""

    def add_page(self, items: list[Obj]) -> None:
        """The next page's objects. Keep no reference to ``items`` or to any of them."""
        ...

    def commit(self, resource_version: str) -> int:
        """Every page was added: the scope now holds exactly them. Returns the object count."""
        ...


class ReflectorSink(Protocol):
    """Where a reflector delivers what it reads."""

    def begin_list(self, *, namespace: str | None) -> ListSink:
        """A LIST of the scope ``namespace`` (None: all namespaces) starts; dropped uncommitted
        if the LIST fails."""
        ...

    def on_event(self, event_type: str, obj: Obj) -> None:
        """One ADDED, MODIFIED or DELETED watch event."""
        ...


class InformerMetrics(Protocol):
    """Metric hooks, free of any metrics library. ``informer`` is the informer's name.

    Relist reasons: ``initial``, ``410``, ``error``, ``forced``. Watch-end reasons: ``closed``
    (the server ended it), ``410``, ``error``, ``forced``.
    """

    def relisted(self, informer: str, reason: str) -> None: ...

    def watch_ended(self, informer: str, reason: str) -> None: ...

    def event_applied(self, informer: str, event_type: str) -> None: ...

    def synced(self, informer: str, value: bool) -> None: ...


class NullInformerMetrics:
    """Metrics that go nowhere."""

    def relisted(self, informer: str, reason: str) -> None:
        pass

    def watch_ended(self, informer: str, reason: str) -> None:
        pass

    def event_applied(self, informer: str, event_type: str) -> None:
        pass

    def synced(self, informer: str, value: bool) -> None:
        pass


class Backoff:
    """An exponential backoff, capped and jittered, on an injected clock.

    ``next()`` returns ``d * (1 - jitter * U[0,1))`` and doubles ``d`` up to ``cap``: no delay
    ever exceeds ``cap``, and reflectors that failed together spread over ``[cap * (1 - jitter),
    cap]`` instead of retrying in lockstep. If more than ``reset_after`` seconds passed since the
    previous ``next()``, ``d`` restarts at ``initial`` (client-go's backoff manager).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        rng: random.Random | None = None,
        initial: float = 0.5,
        cap: float = 5.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        reset_after: float = 120.0,
    ) -> None:
        if not 0.0 <= jitter < 1.0:
            raise ValueError("jitter must be in [0, 1)")
        self._clock = clock
        self._rng = rng or random.Random()
        self._initial = initial
        self._cap = cap
        self._factor = factor
        self._jitter = jitter
        self._reset_after = reset_after
        self._duration = initial
        self._last: float | None = None

    def next(self) -> float:
        now = self._clock.monotonic()
        if self._last is not None and now - self._last > self._reset_after:
            self._duration = self._initial
        self._last = now
        base = self._duration
        self._duration = min(self._duration * self._factor, self._cap)
        return base * (1.0 - self._jitter * self._rng.random())


class _WatchEnd(Exception):
    """Internal: the watch ended without an API error but must be treated as one."""


class Synced:
    """``has_synced`` and ``wait_synced`` over ``_synced``, set once the first LIST is complete."""

    _synced: asyncio.Event

    @property
    def has_synced(self) -> bool:
        """True once the first complete LIST reached the sink; stays true."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Return once ``has_synced`` is true."""
        await self._synced.wait()


class Reflector(Synced):
    """LIST then WATCH one resource in one scope, forever, feeding a ``ReflectorSink``."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        sink: ReflectorSink,
        clock: Clock,
        name: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metrics: InformerMetrics | None = None,
        rng: random.Random | None = None,
        page_size: int = 500,
        min_watch_timeout: int = 300,
        backoff: Backoff | None = None,
    ) -> None:
        self._client = client
        self._resource = resource
        self._sink = sink
        self._clock = clock
        self.name = name
        self.namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._metrics = metrics or NullInformerMetrics()
        self._rng = rng or random.Random()
        self._page_size = page_size
        self._min_watch_timeout = min_watch_timeout
        self._backoff = backoff or Backoff(clock=clock, rng=self._rng)
        self._rv: str | None = None
        self._rv_unavailable = False
        self._need_list = True
        self._list_reason = "initial"
        self._gone_streak = 0
        self._relist_requested = False
        self._watch_task: asyncio.Task[int] | None = None
        self._synced = asyncio.Event()
        self._failing_since: float | None = None
        self._last_error = ""
        self._denied_logged = ""

    @property
    def last_sync_resource_version(self) -> str | None:
        """The RV of the last LIST or of the last watch event applied (bookmarks included)."""
        return self._rv

    @property
    def failing_since(self) -> float | None:
        """Monotonic time of the first failure since the last success; None while healthy."""
        return self._failing_since

    @property
    def last_error(self) -> str:
        """What failed last (empty before any failure)."""
        return self._last_error

    def _healthy(self) -> None:
        self._failing_since = None
        self._denied_logged = ""

    def _failed(self, exc: BaseException) -> None:
        if self._failing_since is None:
            self._failing_since = self._clock.monotonic()
        self._last_error = exc.message if isinstance(exc, ApiError) else repr(exc)

    def force_relist(self) -> None:
        """Stop the current watch and relist with ``RV=""``, exactly as after a 410."""
        self._relist_requested = True
        if self._watch_task is not None and not self._watch_task.done():
            self._watch_task.cancel()

    def _watch_timeout(self) -> int:
        return int(self._min_watch_timeout * (1.0 + self._rng.random()))

    # --- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            phase = "list"
            try:
                if self._relist_requested:
                    self._relist_requested = False
                    self._mark_relist("forced", unavailable=True)
                if self._need_list:
                    await self._list()
                phase = "watch"
                await self._watch_once()
            except asyncio.CancelledError:
                raise
            except Gone as exc:
                self._gone_streak += 1
                log.info("reflector.expired", informer=self.name, phase=phase, error=str(exc))
                if phase == "watch":
                    self._metrics.watch_ended(self.name, "410")
                self._mark_relist("410", unavailable=True)
                if self._gone_streak > 1:
                    await self._sleep_backoff(exc)
            except ApiError as exc:
                if phase == "list" and _TOO_LARGE_RV in exc.message.lower():
                    self._rv_unavailable = True  # client-go isTooLargeResourceVersionError
                rewatch = phase == "watch" and (exc.status == 0 or isinstance(exc, TooManyRequests))
                self._after_error(phase, exc, relist=not rewatch)
                await self._sleep_backoff(exc)
            except Exception as exc:  # a malformed stream or object: relist after a backoff
                self._after_error(phase, exc, relist=True)
                await self._sleep_backoff(exc)

    def _mark_relist(self, reason: str, *, unavailable: bool) -> None:
        self._need_list = True
        self._list_reason = reason
        if unavailable:
            self._rv_unavailable = True

    def _after_error(self, phase: str, exc: BaseException, *, relist: bool) -> None:
        self._failed(exc)
        if isinstance(exc, Forbidden | Unauthorized):
            if exc.message != self._denied_logged:
                self._denied_logged = exc.message
                log.error(
                    "reflector.denied",
                    informer=self.name,
                    namespace=self.namespace,
                    status=exc.status,
                    message=exc.message,
                )
        else:
            log.warning("reflector.error", informer=self.name, phase=phase, error=repr(exc))
        if phase == "watch":
            self._metrics.watch_ended(self.name, "error")
        if phase == "list":
            self._list_reason = self._list_reason if self._list_reason == "410" else "error"
        elif relist:
            self._mark_relist("error", unavailable=False)

    async def _sleep_backoff(self, exc: BaseException) -> None:
        delay = self._backoff.next()
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after > delay:
            delay = float(retry_after)
        await self._clock.sleep(delay)

    async def _list(self) -> None:
        """LIST every page into one ``ListSink``, one page at a time, then commit the scope."""
        # client-go relistResourceVersion: "" after an expiry, "0" before any sync, else last RV.
        rv = "" if self._rv_unavailable else (self._rv if self._rv is not None else "0")
        self._metrics.relisted(self.name, self._list_reason)
        listing = self._sink.begin_list(namespace=self.namespace)
        list_rv = ""
        token: str | None = None
        while True:
            page = await self._client.list(
                self._resource,
                namespace=self.namespace,
                label_selector=self._label_selector,
                field_selector=self._field_selector,
                resource_version=None if token else rv,
                limit=self._page_size,
                continue_token=token,
            )
            meta = page.get("metadata") or {}
            list_rv = str(meta.get("resourceVersion") or list_rv)
            token = meta.get("continue") or None
            listing.add_page(page.get("items") or [])
            del page, meta  # not held while the next page is awaited
            if not token:
                break
        if not list_rv:
            raise ValueError("LIST answered without metadata.resourceVersion")
        count = listing.commit(list_rv)
        self._rv = list_rv
        self._rv_unavailable = False
        self._need_list = False
        self._healthy()
        if not self._synced.is_set():
            self._synced.set()
        log.debug("reflector.listed", informer=self.name, items=count, rv=list_rv)

    async def _watch_once(self) -> None:
        """One WATCH from the last RV, in a child task so ``force_relist`` can stop it."""
        if self._relist_requested:
            return  # asked while listing: relist again before watching
        task = asyncio.get_running_loop().create_task(
            self._watch(self._rv or ""), name=f"watch:{self.name}"
        )
        self._watch_task = task
        start = self._clock.monotonic()
        try:
            count = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling() > 0:
                raise  # run() itself is being cancelled
            self._metrics.watch_ended(self.name, "forced")
            return  # force_relist(): the loop relists on its next turn
        finally:
            self._watch_task = None
        if count == 0 and self._clock.monotonic() - start < _SHORT_WATCH_S:
            raise _WatchEnd("very short watch: closed within a second without any event")
        self._metrics.watch_ended(self.name, "closed")

    async def _watch(self, rv: str) -> int:
        stream = self._client.watch(
            self._resource,
            namespace=self.namespace,
            resource_version=rv,
            timeout_seconds=self._watch_timeout(),
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            on_open=self._healthy,
        )
        count = 0
        try:
            async for event in stream:
                self._apply(event)
                count += 1
        finally:
            await _aclose(stream)
        return count

    def _apply(self, event: WatchEvent) -> None:
        if event.type in _OBJECT_EVENTS:
            self._sink.on_event(event.type, event.object)
        elif event.type != "BOOKMARK":
            log.warning("reflector.unknown_event", informer=self.name, type=event.type)
            return
        rv = (event.object.get("metadata") or {}).get("resourceVersion")
        if rv:
            self._rv = str(rv)
        self._gone_streak = 0


async def _aclose(stream: AsyncIterator[WatchEvent]) -> None:
    """Close an async generator so its ``finally`` (releasing the connection) runs now."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
