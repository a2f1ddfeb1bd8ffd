"""Time as an injected dependency.

Everything that waits or timestamps takes a ``Clock``: the workqueue, the rate limiter, the
reflector's backoff and the scheduler loop. Production uses ``RealClock``; tests use
``FakeClock`` and move time forward explicitly, so no test sleeps for real. ``yield_now`` lets
other ready tasks run without any time passing, on every clock.

This is the only module that may read the system clock or call ``asyncio.sleep`` (a ruff
``banned-api`` rule enforces it).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FakeClock", "RealClock", "yield_now"]


async def yield_now() -> None:
    """Let every other ready task run once; no time passes on any clock."""
    await asyncio.sleep(0)


class Clock(Protocol):
    """Wall time for timestamps, monotonic time for intervals, and a sleep that honours both."""

    def now(self) -> datetime:
        """Current wall time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds`` of this clock's time."""
        ...


class RealClock:
    """The system clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when a test calls ``advance``.

    ``sleep`` parks the caller on a future that ``advance`` resolves once the fake time reaches
    its deadline, so code under test sees time pass instantly and deterministically.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._wall0 = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._t = 0.0
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._wall0 + timedelta(seconds=self._t)

    def monotonic(self) -> float:
        return self._t

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._t + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many coroutines are parked in ``sleep``."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline has passed, in deadline order."""
        target = self._t + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, fut = heapq.heappop(self._sleepers)
            self._t = max(self._t, deadline)
            if not fut.done():
                fut.set_result(None)
            # let woken coroutines run before waking the next one
            for _ in range(3):
                await asyncio.sleep(0)
        self._t = target
        for _ in range(3):
            await asyncio.sleep(0)
