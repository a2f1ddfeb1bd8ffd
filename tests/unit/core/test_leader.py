"""Leader election semantics against the in-memory API seam, with optimistic concurrency.

The real apiserver case (two processes, SIGKILL, takeover time) is in the integration tier; the
in-memory client drives the state machine with a fake clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lattice.clock import FakeClock
from lattice.kube import ServerError
from lattice.kube.resources import LEASES
from lattice.runtime.leader import LeaderElector
from tests.support.aio import settle
from tests.support.memory_client import MemoryClient


def lease(client: MemoryClient) -> dict[str, Any]:
    """The stored Lease (it must exist)."""
    obj = client.stored(LEASES, "lease", namespace="ns")
    assert obj is not None
    return obj


def _elector(store: MemoryClient, clock: FakeClock, ident: str) -> LeaderElector:
    return LeaderElector(
        store,
        clock=clock,
        name="lease",
        namespace="ns",
        identity=ident,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
    )


async def test_exactly_one_of_two_candidates_leads() -> None:
    clock = FakeClock()
    store = MemoryClient(clock=clock)
    a, b = _elector(store, clock, "a"), _elector(store, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await clock.advance(10)
    assert await a.try_acquire_or_renew(), "the holder renews"
    assert not await b.try_acquire_or_renew()
    assert lease(store)["spec"]["holderIdentity"] == "a"


async def test_standby_takes_over_only_after_the_observed_record_expires() -> None:
    clock = FakeClock()
    store = MemoryClient(clock=clock)
    a, b = _elector(store, clock, "a"), _elector(store, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b observes a's record now
    await clock.advance(14)
    assert not await b.try_acquire_or_renew(), "not expired before lease_duration"
    await clock.advance(1.5)
    assert await b.try_acquire_or_renew()
    assert lease(store)["spec"]["holderIdentity"] == "b"
    assert lease(store)["spec"]["leaseTransitions"] == 1


async def test_graceful_end_releases_the_lease_for_an_immediate_takeover() -> None:
    clock = FakeClock()
    store = MemoryClient(clock=clock)
    a, b = _elector(store, clock, "a"), _elector(store, clock, "b")
    stop = asyncio.Event()
    ran: list[str] = []

    async def work() -> None:
        ran.append("a")

    assert await a.run(work, stop=stop) is True
    assert ran == ["a"]
    assert lease(store)["spec"]["holderIdentity"] == ""
    assert await b.try_acquire_or_renew(), "a released lease is free at once"


async def test_losing_the_lease_cancels_the_leaders_work() -> None:
    clock = FakeClock()
    store = MemoryClient(clock=clock)
    a = _elector(store, clock, "a")
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    runner = asyncio.create_task(a.run(work, stop=asyncio.Event()))
    await settle()
    assert a.is_leader
    down = ServerError(500, "InternalError", "down")
    store.fail("replace", down, times=None)  # renewals start failing
    for _ in range(8):
        await clock.advance(2)
    assert await asyncio.wait_for(runner, 1) is False
    assert cancelled.is_set()
    assert not a.is_leader
