"""Shared informers: reflector(s) + indexed store + synchronous event handlers.

An ``Informer[T]`` caches one resource (optionally one label/field selection, one set of
namespaces) as values of type ``T``, the output of its ``transform`` (a slim projection, a
compacted copy such as ``slim_object``, or the raw dict). It follows client-go's
``shared_informer.go``:

- **Store first, then handlers.** Every change is applied to the store before any handler runs,
  so a handler (and the reconciler it wakes) always finds the cache at least as new as the
  notification. Handlers are plain callables ``(event_type, old, new) -> None`` that must not
  block or await: they compute keys and enqueue them. A handler that raises is logged and skipped;
  it never stops the informer.
- **Notifications describe the cache transition**, not the raw event: ``ADDED`` (``old`` None),
  ``MODIFIED`` (both set), ``DELETED`` (``new`` None; ``old`` is the final state from the event
  when there is one, else the last cached value). A transform may return None to drop an
  object: an update that makes it None removes the key and is notified as ``DELETED``. An update
  whose transformed value equals the cached one changes nothing and notifies nobody (with slim
  projections this filters status noise the consumers do not read). A transform that raises is
  logged and the object is left as it was (cached value kept, or still absent): a bug in a
  projection must not look like a deletion.
- **Relists emit tombstones** (invariant 13): a LIST replaces the scope in the store; keys that
  vanished are notified as ``DELETED`` (their final state is unknown: ``old`` is the last cached
  value), new keys as ``ADDED``, changed ones as ``MODIFIED``; unchanged keys are not notified.
  The pages are transformed as they arrive (``begin_list``/``add_page``) and only the values
  are kept until the LIST completes (``commit``): the store and handlers see the whole scope at
  once, as before, but the raw pages are never all in memory together.
- **Identity is the key** ``namespace/name`` (invariant 14); compare UIDs to detect re-creation.
- ``has_synced`` turns true once the first LIST of every scope is in the store and its handlers
  have run (invariant 15: start workers only after that). It never turns false again.
- Scope: all namespaces (one reflector), or a list of namespaces (one reflector each, one store).
- ``add_handler`` on a synced informer first replays the cache as ``ADDED``, like client-go.

``InformerFactory`` shares one informer per (resource, namespaces, selectors, transform name)
among all consumers, and starts and stops them together.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

import structlog

from lattice.clock import Clock, RealClock
from lattice.kube.client import KubeClient
from lattice.kube.resources import Resource
from lattice.primitives.keys import object_key
from lattice.primitives.objects import Obj
from lattice.runtime.reflector import InformerMetrics, NullInformerMetrics, Reflector, Synced
from lattice.runtime.store import IndexFn, Store

__all__ = ["Handler", "Informer", "InformerFactory", "Transform"]

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: ``(event_type, old, new)``; event_type is ADDED, MODIFIED or DELETED.
Handler = Callable[[str, T | None, T | None], None]
#: Raw object -> cached value, or None to leave the object out of the cache.
Transform = Callable[[Obj], T | None]


class _Failed:
    """The transform raised."""


_FAILED = _Failed()


class Informer(Synced, Generic[T]):
    """One resource's cache and its handlers. Run it with ``run()``; read it through ``store``."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        transform: Transform[T],
        clock: Clock | None = None,
        name: str | None = None,
        namespaces: Sequence[str] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexes: Mapping[str, IndexFn[T]] | None = None,
        metrics: InformerMetrics | None = None,
        rng: random.Random | None = None,
        page_size: int = 500,
        min_watch_timeout: int = 300,
    ) -> None:
        if namespaces is not None:
            if not resource.namespaced:
                raise ValueError(f"{resource.plural} is cluster-scoped; namespaces make no sense")
            if not namespaces:
                raise ValueError("namespaces must be None (all) or non-empty")
        self.resource = resource
        self.name = name or resource.plural
        self._transform = transform
        self._metrics = metrics or NullInformerMetrics()
        self._store: Store[T] = Store()
        for index_name, fn in (indexes or {}).items():
            self._store.add_index(index_name, fn)
        self._handlers: tuple[Handler[T], ...] = ()
        self._synced = asyncio.Event()
        self._listed: set[str | None] = set()
        scopes: list[str | None] = [None] if namespaces is None else list(dict.fromkeys(namespaces))
        rng = rng or random.Random()
        self._reflectors = [
            Reflector(
                client,
                resource,
                sink=self,
                clock=clock or RealClock(),
                name=self.name,
                namespace=ns,
                label_selector=label_selector,
                field_selector=field_selector,
                metrics=self._metrics,
                rng=rng,
                page_size=page_size,
                min_watch_timeout=min_watch_timeout,
            )
            for ns in scopes
        ]
        self._metrics.synced(self.name, False)

    # --- reading -------------------------------------------------------------------------------

    @property
    def store(self) -> Store[T]:
        """The cache. Values are shared: treat them as read-only."""
        return self._store

    @property
    def resource_versions(self) -> dict[str | None, str | None]:
        """The last synced RV of each scope (None: all namespaces)."""
        return {r.namespace: r.last_sync_resource_version for r in self._reflectors}

    @property
    def reflectors(self) -> tuple[Reflector, ...]:
        return tuple(self._reflectors)

    # --- handlers ------------------------------------------------------------------------------

    def add_handler(self, handler: Handler[T], *, replay: bool = True) -> Callable[[], None]:
        """Register ``handler``; replay the current cache to it as ADDED. Returns a remover."""
        self._handlers = (*self._handlers, handler)
        if replay:
            for value in self._store.list():
                self._call(handler, "ADDED", None, value)

        def remove() -> None:
            self._handlers = tuple(h for h in self._handlers if h is not handler)

        return remove

    def _call(self, handler: Handler[T], event_type: str, old: T | None, new: T | None) -> None:
        try:
            handler(event_type, old, new)
        except Exception:
            log.exception("informer.handler_failed", informer=self.name, event_type=event_type)

    def _notify(self, event_type: str, old: T | None, new: T | None) -> None:
        for handler in self._handlers:
            self._call(handler, event_type, old, new)

    def _project(self, obj: Obj) -> T | _Failed | None:
        try:
            return self._transform(obj)
        except Exception:
            log.exception("informer.transform_failed", informer=self.name, key=object_key(obj))
            return _FAILED

    # --- ReflectorSink -------------------------------------------------------------------------

    def begin_list(self, *, namespace: str | None) -> _Listing[T]:
        """A reflector starts listing scope ``namespace``: project its pages as they come."""
        return _Listing(self, namespace)

    def _replace(self, fresh: dict[str, T | _Failed], namespace: str | None, rv: str) -> int:
        """A listing of scope ``namespace`` is complete: replace it, then notify the differences.

        ``fresh`` holds the projections in LIST order; ``_FAILED`` where the transform raised,
        which keeps the cached value (or leaves the key absent)."""
        store = self._store
        values: dict[str, T] = {}
        before: dict[str, T] = {}
        for key, projected in fresh.items():
            old = store.get(key)
            if old is not None:
                before[key] = old
            if not isinstance(projected, _Failed):
                values[key] = projected
            elif old is not None:
                values[key] = old  # the transform raised: keep what we had
        fresh.clear()
        vanished = store.replace(values, rv, namespace=namespace)
        for key, value in values.items():
            old = before.get(key)
            if old is None:
                self._notify("ADDED", None, value)
            elif old != value:
                self._notify("MODIFIED", old, value)
        for old in vanished.values():
            self._notify("DELETED", old, None)
        if not self._synced.is_set():
            self._listed.add(namespace)
            if len(self._listed) == len(self._reflectors):
                self._synced.set()
                self._metrics.synced(self.name, True)
                log.info("informer.synced", informer=self.name, items=len(store))
        return len(values)

    def on_event(self, event_type: str, obj: Obj) -> None:
        """Apply one watch event to the store, then notify."""
        key = object_key(obj)
        store = self._store
        self._metrics.event_applied(self.name, event_type)
        if event_type == "DELETED":
            gone = store.delete(key)
            if gone is not None:
                final = self._project(obj)
                if final is None or isinstance(final, _Failed):
                    final = gone
                self._notify("DELETED", final, None)
            return
        value = self._project(obj)
        if isinstance(value, _Failed):
            return
        if value is None:
            dropped = store.delete(key)
            if dropped is not None:
                self._notify("DELETED", dropped, None)
            return
        old = store.get(key)
        if old is not None and old == value:
            return
        store.upsert(key, value)
        self._notify("ADDED" if old is None else "MODIFIED", old, value)

    # --- running -------------------------------------------------------------------------------

    def force_relist(self) -> None:
        """Make every reflector drop its watch and relist with RV "" (as after a 410)."""
        for reflector in self._reflectors:
            reflector.force_relist()

    async def run(self) -> None:
        """List and watch every scope until cancelled."""
        if len(self._reflectors) == 1:
            await self._reflectors[0].run()
            return
        async with asyncio.TaskGroup() as group:
            for reflector in self._reflectors:
                group.create_task(
                    reflector.run(), name=f"reflector:{self.name}:{reflector.namespace}"
                )


class _Listing(Generic[T]):
    """One LIST of one scope in progress: the projections of the pages so far, no raw object.

    Pages are projected as they arrive (the transform runs once per object, as before); the
    store and the handlers see nothing until ``commit``, so a LIST that fails part-way leaves
    the cache as it was.
    """

    __slots__ = ("_fresh", "_informer", "_namespace")

    def __init__(self, informer: Informer[T], namespace: str | None) -> None:
        self._informer = informer
        self._namespace = namespace
        self._fresh: dict[str, T | _Failed] = {}

    def add_page(self, items: list[Obj]) -> None:
        fresh, project = self._fresh, self._informer._project
        for raw in items:
            value = project(raw)
            if value is not None:  # None: the transform leaves it out of the cache
                fresh[object_key(raw)] = value

    def commit(self, resource_version: str) -> int:
        return self._informer._replace(self._fresh, self._namespace, resource_version)


class InformerFactory:
    """One shared informer per (resource, namespaces, selectors, transform name).

    ``informer(...)`` returns the existing informer for the same key (adding any new indexes to
    its store), or creates one; informers created after ``start()`` start at once.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        clock: Clock | None = None,
        metrics: InformerMetrics | None = None,
        rng: random.Random | None = None,
        page_size: int = 500,
        min_watch_timeout: int = 300,
    ) -> None:
        self._client = client
        self._clock = clock or RealClock()
        self._metrics = metrics
        self._rng = rng
        self._page_size = page_size
        self._min_watch_timeout = min_watch_timeout
        self._informers: dict[tuple[Any, ...], Informer[Any]] = {}
        self._transforms: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self._tasks: dict[tuple[Any, ...], asyncio.Task[None]] = {}
        self._started = False

    def informer(
        self,
        resource: Resource,
        *,
        transform: Transform[T],
        transform_name: str | None = None,
        namespaces: Sequence[str] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexes: Mapping[str, IndexFn[T]] | None = None,
    ) -> Informer[T]:
        tname = transform_name or getattr(transform, "__name__", None) or repr(transform)
        scope = None if namespaces is None else tuple(sorted(set(namespaces)))
        key = (resource, scope, label_selector or "", field_selector or "", tname)
        existing = self._informers.get(key)
        if existing is not None:
            if self._transforms[key] is not transform:
                raise ValueError(f"transform name {tname!r} is already bound to another function")
            informer = cast(Informer[T], existing)
            for index_name, fn in (indexes or {}).items():
                if index_name not in informer.store.index_names:
                    informer.store.add_index(index_name, fn)
            return informer
        informer = Informer(
            self._client,
            resource,
            transform=transform,
            clock=self._clock,
            name=f"{resource.plural}:{tname}",
            namespaces=namespaces,
            label_selector=label_selector,
            field_selector=field_selector,
            indexes=indexes,
            metrics=self._metrics,
            rng=self._rng,
            page_size=self._page_size,
            min_watch_timeout=self._min_watch_timeout,
        )
        self._informers[key] = informer
        self._transforms[key] = transform
        if self._started:
            self._start_one(key, informer)
        return informer

    @property
    def informers(self) -> list[Informer[Any]]:
        return list(self._informers.values())

    @property
    def has_synced(self) -> bool:
        return all(i.has_synced for i in self._informers.values())

    def failing(self, *, longer_than: float) -> list[str]:
        """One line per scope whose list/watch has been failing for more than ``longer_than``
        seconds: the informer, the namespace, for how long, and the last error."""
        now = self._clock.monotonic()
        out: list[str] = []
        for informer in self._informers.values():
            for reflector in informer.reflectors:
                since = reflector.failing_since
                if since is not None and now - since > longer_than:
                    scope = f" in {reflector.namespace}" if reflector.namespace else ""
                    out.append(
                        f"{informer.name}{scope}: failing for {now - since:.0f}s: "
                        f"{reflector.last_error}"
                    )
        return out

    def _start_one(self, key: tuple[Any, ...], informer: Informer[Any]) -> None:
        self._tasks[key] = asyncio.get_running_loop().create_task(
            informer.run(), name=f"informer:{informer.name}"
        )

    def start(self) -> None:
        """Start every informer not yet running (call from the event loop)."""
        self._started = True
        for key, informer in self._informers.items():
            if key not in self._tasks:
                self._start_one(key, informer)

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until every informer has synced; False if ``timeout`` (clock seconds) passes."""
        synced: asyncio.Future[Any] = asyncio.gather(
            *(i.wait_synced() for i in self._informers.values())
        )
        if timeout is None:
            await synced
            return True
        timer: asyncio.Future[Any] = asyncio.ensure_future(self._clock.sleep(timeout))
        try:
            await asyncio.wait({synced, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (synced, timer):
                fut.cancel()
            await asyncio.gather(synced, timer, return_exceptions=True)
        return self.has_synced

    async def stop(self) -> None:
        """Cancel every informer and wait for them to finish."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        self._started = False
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                log.error("informer.crashed", error=repr(result))
