"""Helpers for driving asyncio code under test without real time passing.

``settle`` lets every task that is ready run (a few loop iterations, zero seconds).
``take`` gets a key from a work queue that must already have one, failing instead of hanging.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from lattice.clock import yield_now

__all__ = ["settle", "take"]

T = TypeVar("T")


async def settle(rounds: int = 20) -> None:
    """Yield to the event loop ``rounds`` times so woken tasks run; no time passes."""
    for _ in range(rounds):
        await yield_now()


async def take(awaitable: Awaitable[T], *, what: str = "result") -> T:
    """Await ``awaitable`` if it completes once the loop settles; fail (never hang) otherwise."""
    task = asyncio.ensure_future(awaitable)
    await settle()
    if not task.done():
        task.cancel()
        raise AssertionError(f"expected {what} to be available without waiting")
    return task.result()
