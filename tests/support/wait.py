"""Wait on a condition with a deadline, never on a fixed sleep.

Integration and end-to-end tests observe a real control plane, where things happen "soon". They
poll a predicate until it holds or the deadline passes, and on timeout report the last value seen,
so a failure says what the system looked like instead of just "timed out".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["WaitTimeout", "wait_for", "wait_for_async"]

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline."""


def wait_for(
    probe: Callable[[], T],
    until: Callable[[T], bool] = bool,
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Call ``probe`` until ``until(value)`` holds; return that value or raise ``WaitTimeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if until(last):
            return last
        if time.monotonic() >= deadline:
            raise WaitTimeout(
                f"timed out after {timeout:.0f}s waiting for {what}; last value: {last!r}"
            )
        time.sleep(interval)


async def wait_for_async(
    probe: Callable[[], Awaitable[T]],
    until: Callable[[T], bool] = bool,
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Async twin of ``wait_for``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        last = await probe()
        if until(last):
            return last
        if loop.time() >= deadline:
            raise WaitTimeout(
                f"timed out after {timeout:.0f}s waiting for {what}; last value: {last!r}"
            )
        await asyncio.sleep(interval)
