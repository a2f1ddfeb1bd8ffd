"""When the scheduler loop runs a pass: informer triggers, coalescing and timers.

Contract:
- **Triggers** (informer handlers, :meth:`Triggers.register`): any add or delete of a job, node
  or one of our pods; an update that changes the object's ``*_signature`` (see
  :mod:`~lattice.scheduler.loop.snapshot`: updates of the scheduler's own fields, node
  heartbeats and pod status noise do not trigger, :mod:`~lattice.scheduler.loop.nodes`); a
  foreign pod appearing, changing (its node or requests: the projection) or going.
- **Coalescing**: :meth:`Triggers.fire` only sets a flag. :meth:`Triggers.wait` returns once the
  flag is set or the earliest timer (``timeout()``, seconds; None: none) fires; a timer set
  meanwhile (:meth:`Triggers.rearm`, e.g. a write failed) is waited for too. The loop clears
  the flag (:meth:`Triggers.take`) right before a pass, so triggers during a pass cause exactly
  one more pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from lattice.clock import Clock
from lattice.frameworks.base import JobPlugin
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from lattice.runtime.projections import ForeignPodUsage, NodeInfo, PodInfo
from lattice.scheduler.loop.nodes import node_signature, pod_signature
from lattice.scheduler.loop.snapshot import job_signature

__all__ = ["Triggers"]


class Triggers:
    """The pass flag, the informer handlers that set it, and the wait for it or a timer."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._dirty = asyncio.Event()
        self._rearm = asyncio.Event()
        self.idle = False

    def fire(self) -> None:
        """Ask for a pass soon. Never blocks; any number of calls before it starts yield one."""
        self._dirty.set()

    @property
    def pending(self) -> bool:
        """Whether a pass has been asked for and not started yet."""
        return self._dirty.is_set()

    def take(self) -> None:
        """A pass starts: later triggers ask for another."""
        self._dirty.clear()

    def rearm(self) -> None:
        """A timer changed while :meth:`wait` may be parked: compute it again."""
        self._rearm.set()

    # --- handlers ------------------------------------------------------------------------------

    def register(
        self,
        *,
        plugins: Mapping[str, JobPlugin[Any]],
        jobs: Mapping[str, Informer[Obj]],
        pods: Informer[PodInfo],
        foreign_pods: Informer[ForeignPodUsage],
        nodes: Informer[NodeInfo],
    ) -> list[Callable[[], None]]:
        """Add the handlers; returns their removers."""
        removers = [
            jobs[kind].add_handler(self._on_job(plugin)) for kind, plugin in plugins.items()
        ]
        removers.append(pods.add_handler(self._on_pod))
        removers.append(foreign_pods.add_handler(self._on_foreign))
        removers.append(nodes.add_handler(self._on_node))
        return removers

    def _on_job(self, plugin: JobPlugin[Any]) -> Callable[[str, Obj | None, Obj | None], None]:
        def handler(event_type: str, old: Obj | None, new: Obj | None) -> None:
            if (
                old is None
                or new is None
                or job_signature(old, plugin) != job_signature(new, plugin)
            ):
                self.fire()

        return handler

    def _on_pod(self, event_type: str, old: PodInfo | None, new: PodInfo | None) -> None:
        if old is None or new is None or pod_signature(old) != pod_signature(new):
            self.fire()

    def _on_foreign(
        self, event_type: str, old: ForeignPodUsage | None, new: ForeignPodUsage | None
    ) -> None:
        if old != new:
            self.fire()

    def _on_node(self, event_type: str, old: NodeInfo | None, new: NodeInfo | None) -> None:
        if old is None or new is None or node_signature(old) != node_signature(new):
            self.fire()

    # --- waiting -------------------------------------------------------------------------------

    async def wait(self, timeout: Callable[[], float | None]) -> None:
        """Until a trigger or the earliest timer (``timeout()`` seconds from now)."""
        while True:
            if self._dirty.is_set():
                return
            seconds = timeout()
            if seconds is not None and seconds <= 0:
                return
            self._rearm.clear()
            rearmed = asyncio.ensure_future(self._rearm.wait())
            waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._dirty.wait()), rearmed}
            timer = None if seconds is None else asyncio.ensure_future(self._clock.sleep(seconds))
            if timer is not None:
                waiters.add(timer)
            self.idle = True
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self.idle = False
                for waiter in waiters:
                    waiter.cancel()
                await asyncio.gather(*waiters, return_exceptions=True)
            fired = timer is not None and timer.done() and not timer.cancelled()
            if fired or self._dirty.is_set():
                return
