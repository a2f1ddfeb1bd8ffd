"""Leader election semantics against an in-memory Lease store with optimistic concurrency.

The real apiserver case (two processes, SIGKILL, takeover time) is in the integration tier; this
fake only exists to drive the state machine with a fake clock.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from lattice.clock import FakeClock
from lattice.kube import Conflict, NotFound, ServerError
from lattice.kube.resources import Resource
from lattice.runtime.leader import LeaderElector
from tests.support.aio import settle


class LeaseStore:
    """Just enough of the API for Leases: get/create/replace with resourceVersion checks."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.rv = 0
        self.down = False

    async def get(
        self, res: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        if self.obj is None:
            raise NotFound(404, "NotFound", name)
        return copy.deepcopy(self.obj)

    async def create(
        self, res: Resource, body: dict[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        if self.obj is not None:
            raise Conflict(409, "AlreadyExists", "exists")
        self.rv += 1
        self.obj = copy.deepcopy(body)
        self.obj["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.obj)

    async def replace(
        self,
        res: Resource,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if self.down:
            raise ServerError(500, "ServerError", "down")
        assert self.obj is not None
        if body["metadata"].get("resourceVersion") != self.obj["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "stale")
        self.rv += 1
        self.obj = copy.deepcopy(body)
        self.obj["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.obj)


def _elector(store: LeaseStore, clock: FakeClock, ident: str) -> LeaderElector:
    return LeaderElector(
        store,
        clock=clock,
        name="lease",
        namespace="ns",
        identity=ident,  # type: ignore[arg-type]
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
    )


async def test_exactly_one_of_two_candidates_leads() -> None:
    store, clock = LeaseStore(), FakeClock()
    a, b = _elector(store, clock, "a"), _elector(store, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await clock.advance(10)
    assert await a.try_acquire_or_renew(), "the holder renews"
    assert not await b.try_acquire_or_renew()
    assert store.obj is not None
    assert store.obj["spec"]["holderIdentity"] == "a"


async def test_standby_takes_over_only_after_the_observed_record_expires() -> None:
    store, clock = LeaseStore(), FakeClock()
    a, b = _elector(store, clock, "a"), _elector(store, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b observes a's record now
    await clock.advance(14)
    assert not await b.try_acquire_or_renew(), "not expired before lease_duration"
    await clock.advance(1.5)
    assert await b.try_acquire_or_renew()
    assert store.obj is not None
    assert store.obj["spec"]["holderIdentity"] == "b"
    assert store.obj["spec"]["leaseTransitions"] == 1


async def test_graceful_end_releases_the_lease_for_an_immediate_takeover() -> None:
    store, clock = LeaseStore(), FakeClock()
    a, b = _elector(store, clock, "a"), _elector(store, clock, "b")
    stop = asyncio.Event()
    ran: list[str] = []

    async def work() -> None:
        ran.append("a")

    assert await a.run(work, stop=stop) is True
    assert ran == ["a"]
    assert store.obj is not None
    assert store.obj["spec"]["holderIdentity"] == ""
    assert await b.try_acquire_or_renew(), "a released lease is free at once"


async def test_losing_the_lease_cancels_the_leaders_work() -> None:
    store, clock = LeaseStore(), FakeClock()
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
    store.down = True  # renewals start failing
    for _ in range(8):
        await clock.advance(2)
    assert await asyncio.wait_for(runner, 1) is False
    assert cancelled.is_set()
    assert not a.is_leader
