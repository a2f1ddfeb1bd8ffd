"""DelayingQueue.add_after on a fake clock: one test per invariant of ``delaying_queue.go``."""

from __future__ import annotations

import asyncio

import pytest

from lattice.clock import FakeClock
from lattice.runtime.delaying import MAX_WAIT, DelayingQueue
from lattice.runtime.workqueue import QueueShutDown
from tests.support.aio import settle, take


class RecordingClock(FakeClock):
    """A FakeClock that remembers every duration passed to sleep()."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await super().sleep(seconds)


@pytest.fixture
def queue(clock: FakeClock) -> DelayingQueue[str]:
    return DelayingQueue[str](clock, name="test")


async def test_add_after_with_nonpositive_delay_adds_at_once(queue: DelayingQueue[str]) -> None:
    """delay <= 0 is a plain add: the key is queued before any time passes."""
    queue.add_after("zero", 0)
    queue.add_after("negative", -5)
    assert queue.len() == 2
    assert queue.len_waiting() == 0


async def test_key_becomes_available_only_when_its_delay_has_passed(
    clock: FakeClock, queue: DelayingQueue[str]
) -> None:
    """A delayed key is not queued before ready_at and is queued as soon as fake time reaches it."""
    queue.add_after("a", 5)
    getter = asyncio.create_task(queue.get())
    await clock.advance(4.999)
    assert not getter.done()
    assert queue.len_waiting() == 1
    await clock.advance(0.001)
    assert await take(getter) == "a"
    assert queue.len_waiting() == 0


async def test_repeated_add_after_moves_a_waiting_key_earlier(
    clock: FakeClock, queue: DelayingQueue[str]
) -> None:
    """A second add_after with an earlier ready time wins, and the key fires once."""
    queue.add_after("a", 10)
    queue.add_after("a", 3)
    await clock.advance(3)
    assert queue.len() == 1
    assert await take(queue.get()) == "a"
    queue.done("a")
    await clock.advance(20)
    assert queue.len() == 0, "the superseded later entry fired as well"


async def test_repeated_add_after_never_moves_a_waiting_key_later(
    clock: FakeClock, queue: DelayingQueue[str]
) -> None:
    """A second add_after with a later ready time is ignored: the key keeps its earlier time."""
    queue.add_after("a", 3)
    queue.add_after("a", 10)
    await clock.advance(3)
    assert queue.len() == 1
    assert await take(queue.get()) == "a"
    queue.done("a")
    await clock.advance(20)
    assert queue.len() == 0


async def test_an_earlier_arrival_wakes_the_waiter_early(
    clock: FakeClock, queue: DelayingQueue[str]
) -> None:
    """The waiter sleeping for a far key is replaced when a nearer key arrives."""
    queue.add_after("far", 100)
    await clock.advance(1)
    queue.add_after("near", 0.5)
    await clock.advance(0.5)
    assert queue.len() == 1
    assert await take(queue.get()) == "near"
    await clock.advance(98.5)
    assert await take(queue.get()) == "far"


async def test_waiting_keys_fire_in_ready_order(
    clock: FakeClock, queue: DelayingQueue[str]
) -> None:
    """Keys that become ready together are queued in ready_at order, not add_after order."""
    queue.add_after("c", 3)
    queue.add_after("a", 1)
    queue.add_after("b", 2)
    await clock.advance(3)
    assert [await take(queue.get()) for _ in range(3)] == ["a", "b", "c"]


async def test_waiter_never_sleeps_longer_than_the_heartbeat() -> None:
    """Every sleep is capped at MAX_WAIT (client-go's 10 s heartbeat), so the heap is re-checked
    against the clock at least that often even for a key due in an hour."""
    clock = RecordingClock()
    queue = DelayingQueue[str](clock)
    queue.add_after("a", 3600)
    await settle()
    assert clock.slept == [MAX_WAIT]
    await clock.advance(3600)
    assert max(clock.slept) <= MAX_WAIT
    assert len(clock.slept) >= 3600 / MAX_WAIT
    assert await take(queue.get()) == "a"
    await settle()
    assert clock.sleepers == 0, "the waiter must stop once nothing waits"


async def test_a_fired_key_that_is_being_processed_is_only_marked_dirty(
    clock: FakeClock, queue: DelayingQueue[str]
) -> None:
    """When a delayed key fires while a worker holds it, the work-queue rules apply: it is
    re-queued once by done(), not handed to a second worker."""
    queue.add("a")
    held = await take(queue.get())
    queue.add_after("a", 1)
    await clock.advance(1)
    assert queue.len() == 0
    queue.done(held)
    assert await take(queue.get()) == "a"


async def test_shutdown_drops_waiting_keys_and_stops_the_waiter(
    clock: FakeClock, queue: DelayingQueue[str]
) -> None:
    """After shutdown nothing fires, add_after is ignored, and no task sleeps on the clock."""
    queue.add_after("a", 1)
    await settle()
    assert clock.sleepers == 1
    queue.shutdown()
    await settle()
    assert clock.sleepers == 0
    queue.add_after("b", 1)
    queue.add_after("c", 0)
    await clock.advance(5)
    assert queue.len() == 0
    assert queue.len_waiting() == 0
    with pytest.raises(QueueShutDown):
        await take(queue.get())


async def test_many_moves_earlier_keep_one_live_entry_per_key(
    clock: FakeClock, queue: DelayingQueue[str]
) -> None:
    """Moving a key earlier many times leaves one waiting key that fires once."""
    for delay in range(1000, 0, -1):
        queue.add_after("a", float(delay))
    assert queue.len_waiting() == 1
    await clock.advance(1000)
    assert queue.len() == 1
