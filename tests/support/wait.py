"""Wait on a condition with a deadline, never on a fixed sleep.

Integration and end-to-end tests observe a real control plane, where things happen "soon". They
poll a predicate until it holds or the deadline passes, and on timeout report the last value seen,
so a failure says what the system looked like instead of just "timed out". The deadline and the
poll interval are read from a ``Clock`` (``RealClock`` unless one is passed).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from lattice.clock import Clock, RealClock

__all__ = ["WaitTimeout", "wait_for", "wait_for_async"]

T = TypeVar("T")

_REAL = RealClock()


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline."""


def wait_for(
    probe: Callable[[], T],
    until: Callable[[T], bool] = bool,
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "condition",
    clock: Clock = _REAL,
) -> T:
    """Call ``probe`` until ``until(value)`` holds; return that value or raise ``WaitTimeout``."""
    deadline = clock.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if until(last):
            return last
        if clock.monotonic() >= deadline:
            raise WaitTimeout(
                f"timed out after {timeout:.0f}s waiting for {what}; last value: {last!r}"
            )
        time.sleep(interval)  # a synchronous poll: the Clock protocol's sleep is async


async def wait_for_async(
    probe: Callable[[], Awaitable[T]],
    until: Callable[[T], bool] = bool,
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "condition",
    clock: Clock = _REAL,
) -> T:
    """Async twin of ``wait_for``."""
    deadline = clock.monotonic() + timeout
    while True:
        last = await probe()
        if until(last):
            return last
        if clock.monotonic() >= deadline:
            raise WaitTimeout(
                f"timed out after {timeout:.0f}s waiting for {what}; last value: {last!r}"
            )
        await clock.sleep(interval)
