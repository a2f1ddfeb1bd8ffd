"""The reconcile harness follows controller-runtime's result contract."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from lattice.clock import FakeClock
from lattice.kube import Conflict
from lattice.runtime.controller import Controller, Result, TerminalError
from lattice.runtime.metrics import Metrics
from lattice.runtime.ratelimit import RateLimitingQueue
from tests.support.aio import settle


class Scripted:
    """A reconciler whose behaviour per call is scripted; records the keys it saw."""

    def __init__(self, script: list[Callable[[], Result]]) -> None:
        self.script = script
        self.calls: list[str] = []

    async def reconcile(self, key: str) -> Result:
        self.calls.append(key)
        step = self.script.pop(0) if self.script else (Result)
        return step()


def _raise(exc: Exception) -> Callable[[], Result]:
    def f() -> Result:
        raise exc

    return f


async def _run(
    script: list[Callable[[], Result]], clock: FakeClock
) -> tuple[Controller, Scripted, Metrics, asyncio.Task[None]]:
    metrics = Metrics(CollectorRegistry())
    queue: RateLimitingQueue[str] = RateLimitingQueue(clock, name="t")
    rec = Scripted(script)
    ctl = Controller(name="t", reconciler=rec, queue=queue, workers=2, metrics=metrics, clock=clock)
    task = asyncio.create_task(ctl.run())
    await settle()
    return ctl, rec, metrics, task


def _count(metrics: Metrics, result: str) -> float:
    v = metrics.registry.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": "t", "result": result}
    )
    return v or 0.0


async def _stop(ctl: Controller, task: asyncio.Task[None]) -> None:
    await ctl.shutdown(timeout=1)
    await asyncio.gather(task, return_exceptions=True)


async def test_success_forgets_and_does_not_requeue() -> None:
    clock = FakeClock()
    ctl, rec, metrics, task = await _run([Result], clock)
    ctl.enqueue("ns/a")
    await settle()
    await clock.advance(100)
    assert rec.calls == ["ns/a"]
    assert _count(metrics, "success") == 1
    assert ctl.queue.num_requeues("ns/a") == 0
    await _stop(ctl, task)


async def test_error_requeues_with_backoff_then_success_forgets() -> None:
    clock = FakeClock()
    ctl, rec, metrics, task = await _run(
        [_raise(RuntimeError("boom")), _raise(RuntimeError("boom")), Result], clock
    )
    ctl.enqueue("ns/a")
    await settle()
    assert rec.calls == ["ns/a"]
    assert ctl.queue.num_requeues("ns/a") == 1
    await clock.advance(0.004)  # first retry waits 5 ms
    assert rec.calls == ["ns/a"]
    await clock.advance(0.002)
    assert rec.calls == ["ns/a", "ns/a"]
    await clock.advance(0.011)  # second retry waits 10 ms
    assert len(rec.calls) == 3
    assert _count(metrics, "error") == 2
    assert _count(metrics, "success") == 1
    assert ctl.queue.num_requeues("ns/a") == 0, "success must forget the failures"
    await _stop(ctl, task)


async def test_terminal_error_is_counted_and_not_requeued() -> None:
    clock = FakeClock()
    ctl, rec, metrics, task = await _run([_raise(TerminalError("bad spec"))], clock)
    ctl.enqueue("ns/a")
    await settle()
    await clock.advance(2000)
    assert rec.calls == ["ns/a"]
    assert (
        metrics.registry.get_sample_value(
            "controller_runtime_terminal_reconcile_errors_total", {"controller": "t"}
        )
        == 1
    )
    await _stop(ctl, task)


async def test_conflict_is_a_quiet_requeue() -> None:
    clock = FakeClock()
    ctl, rec, metrics, task = await _run(
        [_raise(Conflict(409, "Conflict", "stale")), Result], clock
    )
    ctl.enqueue("ns/a")
    await settle()
    await clock.advance(1)
    assert rec.calls == ["ns/a", "ns/a"]
    assert _count(metrics, "requeue") == 1
    assert (
        metrics.registry.get_sample_value(
            "controller_runtime_reconcile_errors_total", {"controller": "t"}
        )
        == 0
    )
    await _stop(ctl, task)


@pytest.mark.parametrize("after", [pytest.param(30.0, id="requeue after 30s")])
async def test_requeue_after_forgets_then_adds_after(after: float) -> None:
    clock = FakeClock()
    ctl, rec, metrics, task = await _run(
        [_raise(RuntimeError("x")), lambda: Result(requeue_after=after)], clock
    )
    ctl.enqueue("ns/a")
    await settle()
    await clock.advance(0.01)
    assert len(rec.calls) == 2
    assert ctl.queue.num_requeues("ns/a") == 0
    await clock.advance(after - 1)
    assert len(rec.calls) == 2
    await clock.advance(1.5)
    assert len(rec.calls) == 3
    assert _count(metrics, "requeue_after") == 1
    await _stop(ctl, task)


class Blocking:
    """A reconciler that holds every key until released; records the keys it started."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = asyncio.Event()

    async def reconcile(self, key: str) -> Result:
        self.started.append(key)
        await self.release.wait()
        return Result()


async def test_a_reserved_worker_takes_an_urgent_key_while_bookkeeping_holds_every_other() -> None:
    clock = FakeClock()
    metrics = Metrics(CollectorRegistry())
    prio = {"book1": 0, "book2": 0, "book3": 0, "grant": 100}
    queue: RateLimitingQueue[str] = RateLimitingQueue(clock, name="t", priority=prio.__getitem__)
    rec = Blocking()
    ctl = Controller(
        name="t",
        reconciler=rec,
        queue=queue,
        workers=2,
        metrics=metrics,
        clock=clock,
        reserved=1,
        reserved_from=100,
    )
    task = asyncio.create_task(ctl.run())
    for key in ("book1", "book2", "book3"):
        ctl.enqueue(key)
    await settle()
    assert rec.started == ["book1", "book2"]  # the reserved worker left book3 alone
    ctl.enqueue("grant")
    await settle()
    assert rec.started == ["book1", "book2", "grant"]
    assert (
        metrics.registry.get_sample_value(
            "controller_runtime_max_concurrent_reconciles", {"controller": "t"}
        )
        == 3
    )
    rec.release.set()
    await settle()
    assert rec.started == ["book1", "book2", "grant", "book3"]
    await _stop(ctl, task)
