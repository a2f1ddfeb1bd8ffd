"""WorkQueue: one test per client-go invariant (``util/workqueue/queue_test.go``), fake clock."""

from __future__ import annotations

import asyncio
import random

import pytest

from lattice.clock import FakeClock, yield_now
from lattice.runtime.workqueue import QueueShutDown, WorkQueue
from tests.support.aio import settle, take
from tests.support.queue_metrics import RecordingQueueMetrics


@pytest.fixture
def queue(clock: FakeClock) -> WorkQueue[str]:
    return WorkQueue[str](clock, name="test")


async def test_stingy_a_key_is_never_processed_by_two_workers_at_once(
    queue: WorkQueue[str],
) -> None:
    """A key re-added while a worker holds it is not handed to a second worker until done."""
    queue.add("a")
    held = await take(queue.get())
    queue.add("a")
    second = asyncio.create_task(queue.get())
    await settle()
    assert not second.done(), "a second worker got a key that is still being processed"
    queue.done(held)
    assert await take(second) == "a"
    queue.done("a")
    queue.shutdown()


async def test_stingy_under_concurrent_workers_and_re_adds(clock: FakeClock) -> None:
    """With many workers and keys re-added at random, no key is ever held twice at once,
    and every key added after its last processing started is processed again."""
    rng = random.Random(7)
    queue = WorkQueue[int](clock)
    keys = list(range(8))
    active: set[int] = set()
    overlaps: list[int] = []
    last_add: dict[int, int] = {}
    last_start: dict[int, int] = {}
    tick = 0

    async def worker() -> None:
        nonlocal tick
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            if key in active:
                overlaps.append(key)
            active.add(key)
            tick += 1
            last_start[key] = tick
            for _ in range(rng.randint(0, 3)):
                await yield_now()
            active.discard(key)
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for _ in range(500):
        key = rng.choice(keys)
        tick += 1
        last_add[key] = tick
        queue.add(key)
        if rng.random() < 0.5:
            await yield_now()
    await queue.shutdown_with_drain()
    await asyncio.gather(*workers)
    assert overlaps == []
    assert queue.len() == 0
    assert all(last_start[k] > last_add[k] for k in last_add), "an add was lost"


async def test_duplicates_collapse_into_one_get(queue: WorkQueue[str]) -> None:
    """Adding a key twice before it is taken yields exactly one get."""
    queue.add("a")
    queue.add("a")
    assert queue.len() == 1
    assert await take(queue.get()) == "a"
    queue.done("a")
    nothing = asyncio.create_task(queue.get())
    await settle()
    assert not nothing.done(), "a collapsed duplicate was handed out again"
    nothing.cancel()


async def test_add_while_processing_requeues_exactly_once_on_done(queue: WorkQueue[str]) -> None:
    """Adds during processing only mark the key dirty; done re-queues it once, not per add."""
    queue.add("a")
    key = await take(queue.get())
    queue.add("a")
    queue.add("a")
    assert queue.len() == 0, "a key being processed must not be queued"
    queue.done(key)
    assert queue.len() == 1
    assert await take(queue.get()) == "a"
    queue.done("a")
    assert queue.len() == 0


async def test_fifo_order_of_distinct_keys(queue: WorkQueue[str]) -> None:
    """Distinct keys come out in the order they were first added; a duplicate keeps its place."""
    for key in ("c", "a", "b", "a", "d"):
        queue.add(key)
    got = [await take(queue.get()) for _ in range(4)]
    assert got == ["c", "a", "b", "d"]


async def test_get_blocks_until_a_key_is_added(queue: WorkQueue[str]) -> None:
    """get() on an empty queue waits, and returns as soon as a key arrives."""
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()
    queue.add("a")
    assert await take(getter) == "a"


async def test_get_blocks_until_shutdown_then_signals_it(queue: WorkQueue[str]) -> None:
    """Every waiting get() raises QueueShutDown when the queue shuts down."""
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    assert not any(g.done() for g in getters)
    queue.shutdown()
    await settle()
    for getter in getters:
        with pytest.raises(QueueShutDown):
            getter.result()
    assert queue.shutting_down


async def test_adds_after_shutdown_are_ignored(queue: WorkQueue[str]) -> None:
    """After shutdown, add() is a no-op and get() signals shutdown immediately."""
    queue.shutdown()
    queue.add("late")
    assert queue.len() == 0
    with pytest.raises(QueueShutDown):
        await take(queue.get())


async def test_queued_keys_are_handed_out_before_the_shutdown_signal(
    queue: WorkQueue[str],
) -> None:
    """Keys queued before shutdown are still handed out; the signal comes once none is left."""
    queue.add("a")
    queue.add("b")
    queue.shutdown()
    assert await take(queue.get()) == "a"
    assert await take(queue.get()) == "b"
    with pytest.raises(QueueShutDown):
        await take(queue.get())


async def test_shutdown_with_drain_waits_until_every_processing_key_is_done(
    queue: WorkQueue[str],
) -> None:
    """shutdown_with_drain returns only after done() for every key being processed, and hands
    out no new work meanwhile (client-go TestQueueDrainageUsingShutDownWithDrain)."""
    queue.add("a")
    queue.add("b")
    first = await take(queue.get())
    second = await take(queue.get())
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await settle()
    assert not drain.done()
    queue.add("new")
    with pytest.raises(QueueShutDown):
        await take(queue.get())
    queue.done(first)
    await settle()
    assert not drain.done(), "drain returned while a key was still being processed"
    queue.done(second)
    await take(drain, what="drain to finish")


async def test_shutdown_with_drain_hands_out_a_dirty_key_once_more(queue: WorkQueue[str]) -> None:
    """A key added while processing, before the drain began, gets its one extra pass
    (client-go TestQueueDrainageUsingShutDownWithDrainWithDirtyItem)."""
    queue.add("a")
    held = await take(queue.get())
    queue.add("a")
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await settle()
    with pytest.raises(QueueShutDown):
        await take(queue.get())
    queue.done(held)
    again = await take(queue.get())
    assert again == "a"
    queue.done(again)
    with pytest.raises(QueueShutDown):
        await take(queue.get())
    await take(drain, what="drain to finish")


async def test_shutdown_stops_a_pending_drain(queue: WorkQueue[str]) -> None:
    """shutdown() after shutdown_with_drain() makes the drain return without done()
    (client-go TestForceQueueShutdownUsingShutDown)."""
    queue.add("a")
    await take(queue.get())
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await settle()
    assert not drain.done()
    queue.shutdown()
    await take(drain, what="drain to give up")


async def test_done_for_a_key_not_being_processed_raises(queue: WorkQueue[str]) -> None:
    """done() without a matching get() is a caller bug and must not re-queue anything."""
    queue.add("a")
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("a")
    assert queue.len() == 1


async def test_cancelled_get_passes_its_wake_up_on(queue: WorkQueue[str]) -> None:
    """A getter cancelled after being woken does not swallow the key: another getter gets it."""
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes `first`
    first.cancel()  # ...which is cancelled before it runs
    await settle()
    assert first.cancelled()
    assert await take(second) == "a"


async def test_len_counts_queued_keys_not_processing_ones(queue: WorkQueue[str]) -> None:
    """len() is the number of queued keys; a key handed out no longer counts."""
    queue.add("a")
    queue.add("b")
    assert queue.len() == 2
    await take(queue.get())
    assert queue.len() == 1


async def test_metrics_report_adds_depth_and_latencies(clock: FakeClock) -> None:
    """adds count accepted adds only; depth is the dirty count; queue latency runs add→get and
    work duration get→done, on the injected clock."""
    metrics = RecordingQueueMetrics()
    queue = WorkQueue[str](clock, metrics=metrics, unfinished_work_period=100.0)
    queue.add("a")
    queue.add("a")  # collapsed: not an add
    queue.add("b")
    assert metrics.adds == 2
    assert metrics.depths == [1, 2]
    await clock.advance(3)
    key = await take(queue.get())
    assert metrics.latencies == [3.0]
    assert metrics.depths[-1] == 1
    await clock.advance(2)
    queue.done(key)
    assert metrics.work == [2.0]
    queue.shutdown()


async def test_metrics_report_unfinished_work_periodically(clock: FakeClock) -> None:
    """Every period, the queue reports the summed and the longest age of keys in flight."""
    metrics = RecordingQueueMetrics()
    queue = WorkQueue[str](clock, metrics=metrics, unfinished_work_period=0.5)
    queue.add("a")
    await take(queue.get())
    await clock.advance(1.0)
    queue.add("b")
    await take(queue.get())
    await clock.advance(0.5)
    assert metrics.unfinished_calls[-1] == (1.5 + 0.5, 1.5)
    queue.done("a")
    queue.done("b")
    await clock.advance(0.5)
    assert metrics.unfinished_calls[-1] == (0.0, 0.0)
    queue.shutdown()
    await settle()
    assert clock.sleepers == 0, "the reporting task outlived shutdown"


async def test_a_raising_metrics_hook_leaves_the_queue_consistent(clock: FakeClock) -> None:
    """Hooks run after the state change: if one raises, the key is still queued, not stuck
    in dirty forever."""

    class Exploding(RecordingQueueMetrics):
        def add(self) -> None:
            raise RuntimeError("metrics backend down")

    queue = WorkQueue[str](clock, metrics=Exploding(), unfinished_work_period=100.0)
    with pytest.raises(RuntimeError):
        queue.add("a")
    assert await take(queue.get()) == "a"
    queue.shutdown()


async def test_without_metrics_no_background_task_runs(
    clock: FakeClock, queue: WorkQueue[str]
) -> None:
    """The default (no-op) metrics start no reporting task, so nothing sleeps on the clock."""
    queue.add("a")
    await take(queue.get())
    assert clock.sleepers == 0


# -- priority (controller-runtime's priorityqueue; not in client-go) -------------------------


async def test_priority_hands_out_the_highest_priority_first_and_fifo_among_equals(
    clock: FakeClock,
) -> None:
    prio = {"low1": 0, "high1": 10, "low2": 0, "mid": 5, "high2": 10}
    queue = WorkQueue[str](clock, priority=prio.__getitem__)
    for key in ("low1", "high1", "low2", "mid", "high2"):
        queue.add(key)
    order = []
    for _ in range(5):
        key = await take(queue.get())
        order.append(key)
        queue.done(key)
    assert order == ["high1", "high2", "mid", "low1", "low2"]
    assert queue.len() == 0


async def test_priority_a_queued_key_moves_up_when_its_priority_rises_never_down(
    clock: FakeClock,
) -> None:
    prio = {"a": 0, "b": 0, "c": 0}
    queue = WorkQueue[str](clock, priority=prio.__getitem__)
    for key in ("a", "b", "c"):
        queue.add(key)
    prio["c"] = 7
    queue.add("c")  # already queued: moves up, still queued once
    prio["a"] = -3
    queue.add("a")  # a lower priority changes nothing
    assert queue.len() == 3
    got = [await take(queue.get()) for _ in range(3)]
    assert got == ["c", "a", "b"]
    for key in got:
        queue.done(key)
    waiting = asyncio.create_task(queue.get())
    await settle()
    assert not waiting.done(), "a key moved up was queued twice"
    queue.shutdown()
    with pytest.raises(QueueShutDown):
        await waiting


async def test_priority_is_asked_again_when_a_dirty_key_is_requeued_by_done(
    clock: FakeClock,
) -> None:
    prio = {"a": 0, "b": 1}
    queue = WorkQueue[str](clock, priority=prio.__getitem__)
    queue.add("a")
    held = await take(queue.get())
    queue.add("b")
    queue.add("a")  # dirty while processing: not queued yet
    assert queue.len() == 1
    prio["a"] = 5
    queue.done(held)  # re-queued now, at its current priority: ahead of b
    assert await take(queue.get()) == "a"
    assert await take(queue.get()) == "b"


async def test_priority_that_raises_counts_as_zero_and_keeps_the_invariants(
    clock: FakeClock,
) -> None:
    def prio(key: str) -> int:
        if key == "bad":
            raise KeyError(key)
        return 1

    queue = WorkQueue[str](clock, priority=prio)
    queue.add("bad")
    queue.add("good")
    queue.add("bad")
    assert queue.len() == 2
    assert await take(queue.get()) == "good"
    assert await take(queue.get()) == "bad"


# -- reserved workers: get(min_priority=...) -------------------------------------------------


async def test_a_reserved_get_takes_only_keys_of_its_priority_and_waits_past_lesser_ones(
    clock: FakeClock,
) -> None:
    prio = {"book1": 0, "book2": 0, "grant": 100}
    queue = WorkQueue[str](clock, priority=prio.__getitem__)
    queue.add("book1")
    queue.add("book2")
    reserved = asyncio.create_task(queue.get(min_priority=100))
    await settle()
    assert not reserved.done(), "a reserved worker took bookkeeping"
    assert queue.len() == 2
    queue.add("grant")
    assert await take(reserved) == "grant"
    # plain gets still take everything, in order
    assert [await take(queue.get()), await take(queue.get())] == ["book1", "book2"]


async def test_a_queued_key_wakes_a_plain_get_before_a_reserved_one(clock: FakeClock) -> None:
    prio = {"grant": 100}
    queue = WorkQueue[str](clock, priority=prio.__getitem__)
    reserved = asyncio.create_task(queue.get(min_priority=100))
    await settle()
    plain = asyncio.create_task(queue.get())
    await settle()
    queue.add("grant")
    assert await take(plain) == "grant"
    await settle()
    assert not reserved.done()
    queue.shutdown()
    with pytest.raises(QueueShutDown):
        await reserved


async def test_a_key_raised_into_reach_wakes_a_waiting_reserved_get(clock: FakeClock) -> None:
    prio = {"job": 0}
    queue = WorkQueue[str](clock, priority=prio.__getitem__)
    queue.add("job")
    reserved = asyncio.create_task(queue.get(min_priority=100))
    await settle()
    assert not reserved.done()
    prio["job"] = 100
    queue.add("job")  # already queued: moves up, into the reserved worker's reach
    assert await take(reserved) == "job"
    queue.done("job")
    assert queue.len() == 0


async def test_a_reserved_get_woken_for_a_key_a_plain_get_took_waits_again(
    clock: FakeClock,
) -> None:
    """Both are woken in turn (the plain one for the lesser key); the plain one runs first and
    takes the urgent key; the reserved one must not take the lesser key, nor miss the next."""
    prio = {"book": 0, "grant": 100, "grant2": 100}
    queue = WorkQueue[str](clock, priority=prio.__getitem__)
    plain = asyncio.create_task(queue.get())
    reserved = asyncio.create_task(queue.get(min_priority=100))
    await settle()
    queue.add("book")  # wakes the plain get
    queue.add("grant")  # no plain get waits: wakes the reserved one
    assert await take(plain) == "grant"
    await settle()
    assert not reserved.done(), "the reserved worker took bookkeeping"
    assert queue.len() == 1
    queue.add("grant2")
    assert await take(reserved) == "grant2"


async def test_a_cancelled_reserved_get_takes_nothing(clock: FakeClock) -> None:
    prio = {"grant": 100}
    queue = WorkQueue[str](clock, priority=prio.__getitem__)
    reserved = asyncio.create_task(queue.get(min_priority=100))
    await settle()
    reserved.cancel()
    await settle()
    queue.add("grant")
    assert await take(queue.get()) == "grant"
