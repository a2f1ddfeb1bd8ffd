"""EventRecorder's senders: events about different objects go out at once, an object's own in
order. (The apiserver-facing contract is tested in tests/integration/test_runtime_writes.py.)"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from lattice.clock import RealClock
from lattice.kube import KubeClient
from lattice.kube.resources import Resource
from lattice.runtime.events import EventRecorder, ObjectRef
from tests.support.wait import wait_for_async


class HeldCreates:
    """Event creates that wait for ``release``; counts how many are in flight at once."""

    def __init__(self) -> None:
        self.released = asyncio.Event()
        self.inflight = 0
        self.max_inflight = 0
        self.started: list[str] = []
        self.created: list[str] = []

    async def create(self, res: Resource, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        note = body["note"]
        self.started.append(note)
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            await self.released.wait()
        finally:
            self.inflight -= 1
        self.created.append(note)
        return {"metadata": {"name": body["metadata"]["name"]}}


def ref(name: str) -> ObjectRef:
    return ObjectRef("v1", "ConfigMap", "ns", name, f"uid-{name}")


def recorder(client: HeldCreates, *, senders: int, capacity: int = 4096) -> EventRecorder:
    rec = EventRecorder(
        cast(KubeClient, client),
        clock=RealClock(),
        controller="test",
        instance="test-0",
        capacity=capacity,
        senders=senders,
    )
    rec.start()
    return rec


async def until(pred: Any, what: str) -> None:
    async def probe() -> bool:
        return bool(pred())

    await wait_for_async(probe, timeout=10.0, interval=0, what=what)


async def test_events_about_different_objects_are_sent_at_once() -> None:
    client = HeldCreates()
    rec = recorder(client, senders=8)
    names = [f"cm{i}" for i in range(20)]
    for name in names:
        rec.record(ref(name), type="Normal", reason="R", note=name)
    # Twenty objects over eight senders: at least one per sender whose queue got one, and never
    # more than eight.
    await until(lambda: client.inflight >= 2, "several creates in flight")
    await asyncio.sleep(0)
    assert 2 <= client.max_inflight <= 8
    client.released.set()
    await rec.flush()
    assert sorted(client.created) == sorted(names)
    await rec.stop()


async def test_one_sender_sends_one_at_a_time() -> None:
    client = HeldCreates()
    rec = recorder(client, senders=1)
    for i in range(3):
        rec.record(ref(f"cm{i}"), type="Normal", reason="R", note=f"cm{i}")
    await until(lambda: client.started, "the first create")
    for _ in range(5):
        await asyncio.sleep(0)
    assert client.max_inflight == 1
    client.released.set()
    await rec.flush()
    assert client.created == ["cm0", "cm1", "cm2"]
    await rec.stop()


async def test_an_objects_events_go_out_in_order_one_at_a_time() -> None:
    client = HeldCreates()
    rec = recorder(client, senders=8)
    notes = [f"step {i}" for i in range(6)]
    for note in notes:
        rec.record(ref("one"), type="Normal", reason="R", note=note)
    await until(lambda: client.started, "the first create")
    for _ in range(5):
        await asyncio.sleep(0)
    assert client.max_inflight == 1
    client.released.set()
    await rec.flush()
    assert client.created == notes
    await rec.stop()


async def test_capacity_bounds_the_events_waiting_in_all_senders_together() -> None:
    client = HeldCreates()
    dropped: list[int] = []
    rec = EventRecorder(
        cast(KubeClient, client),
        clock=RealClock(),
        controller="test",
        instance="test-0",
        capacity=3,
        senders=4,
        on_drop=lambda: dropped.append(1),
    )
    rec.start()
    rec.record(ref("one"), type="Normal", reason="R", note="in flight")
    await until(lambda: client.started, "the first create")
    for i in range(5):  # all about the same object: they wait behind the one in flight
        rec.record(ref("one"), type="Normal", reason="R", note=f"queued {i}")
    assert len(dropped) == 2  # the queue holds three
    client.released.set()
    await rec.flush()
    assert client.created == ["in flight", "queued 0", "queued 1", "queued 2"]
    await rec.stop()
    assert len(dropped) == 2
