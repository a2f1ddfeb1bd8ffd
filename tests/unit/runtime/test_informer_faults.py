"""Reflector failure paths (client-go invariants 9-13) against the fake apiserver.

Each test names the rule it checks. Backoff sleeps run on a ``RecordingClock``: the test waits
for the sleep to start, checks its length, and advances fake time; nothing sleeps for real.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from lattice.clock import FakeClock
from lattice.kube.client import RestClient
from lattice.kube.resources import CONFIGMAPS
from lattice.primitives.keys import object_key
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from lattice.runtime.projections import keep_raw
from lattice.runtime.reflector import Backoff
from tests.support.fake_apiserver import (
    FakeApiServer,
    Recorder,
    RecordingClock,
    running,
)


class FakeMetrics:
    def __init__(self) -> None:
        self.relists: list[str] = []
        self.watch_ends: list[str] = []
        self.events: list[str] = []
        self.synced_values: list[bool] = []

    def relisted(self, informer: str, reason: str) -> None:
        self.relists.append(reason)

    def watch_ended(self, informer: str, reason: str) -> None:
        self.watch_ends.append(reason)

    def event_applied(self, informer: str, event_type: str) -> None:
        self.events.append(event_type)

    def synced(self, informer: str, value: bool) -> None:
        self.synced_values.append(value)


def make(client: RestClient, clock: RecordingClock, **kw: Any) -> Informer[Obj]:
    return Informer(client, CONFIGMAPS, transform=keep_raw, clock=clock, rng=random.Random(1), **kw)


def in_first_backoff(delay: float) -> bool:
    return 0.25 < delay <= 0.5


async def test_410_relists_with_a_consistent_read_and_never_rewatches_the_expired_rv(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.create("a")
    metrics = FakeMetrics()
    informer = make(client, rclock, metrics=metrics)
    async with running(informer.run):
        first_watch = await server.wait_request("watch")
        await server.wait_watches()
        expired_rv = first_watch.resource_version
        n = len(server.requests)
        server.create("b", notify=False)  # history moves on while the watch is cut off
        server.compact()
        server.expire_watches()
        relist = await server.wait_request("list", after=n)
        assert relist.resource_version == ""  # RV "" = quorum read, not the expired RV
        rewatch = await server.wait_request("watch", after=n)
    assert rewatch.resource_version == str(server.rv) != expired_rv
    after_expiry = server.seen("watch")[1:]
    assert all(w.resource_version != expired_rv for w in after_expiry)
    assert rclock.sleeps == []  # the first 410 relists at once
    assert metrics.relists == ["initial", "410"]
    assert "410" in metrics.watch_ends


async def test_relist_emits_tombstones_for_vanished_keys_and_diffs_the_rest(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    for name in ("gone", "changed", "same"):
        server.create(name)
    informer = make(client, rclock)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        last_gone = informer.store.get("default/gone")
        before = len(rec.events)
        # what a disconnected client misses
        server.delete("gone", notify=False)
        server.update("changed", data={"v": "2"}, notify=False)
        server.create("new", notify=False)
        server.compact()
        server.expire_watches()
        await rec.wait_until(lambda: len(rec.events) >= before + 3)
        n = len(server.requests)
        await server.wait_request("watch", after=n - 2)
    relisted = rec.events[before:]
    by_key = {object_key(new or old or {}): (t, old, new) for t, old, new in relisted}
    assert set(by_key) == {"default/gone", "default/changed", "default/new"}
    t, old, new = by_key["default/gone"]
    assert (t, old, new) == ("DELETED", last_gone, None)  # the last cached state
    t, old, new = by_key["default/changed"]
    assert t == "MODIFIED"
    assert old is not None
    assert new is not None
    assert new["data"] == {"v": "2"}
    assert by_key["default/new"][0] == "ADDED"
    assert sorted(informer.store.keys()) == ["default/changed", "default/new", "default/same"]


async def test_a_second_410_without_progress_backs_off(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = make(client, rclock)
    async with running(informer.run):
        await server.wait_watches()
        n = len(server.requests)
        server.expire_watches()
        await server.wait_request("watch", after=n)
        await server.wait_watches()
        m = len(server.requests)
        server.expire_watches()  # no event in between
        delay = await rclock.wait_sleeps(1)
        assert in_first_backoff(delay)
        assert len(server.seen("list")) == 2  # waiting, not relisting yet
        await rclock.advance(delay)
        relist = await server.wait_request("list", after=m)
    assert relist.resource_version == ""


async def test_an_expired_continue_token_restarts_the_list_from_scratch(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    for i in range(5):
        server.create(f"cm-{i}")
    informer = make(client, rclock, page_size=2)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    server.fail_next("list", 410, after=1)  # the second page's token has expired
    async with running(informer.run):
        await informer.wait_synced()
    lists = server.seen("list")
    assert lists[0].resource_version == "0"
    assert "continue" in lists[1].query
    assert lists[2].resource_version == ""
    assert "continue" not in lists[2].query
    # the partial first list never reached the store or the handlers
    assert len(rec.of_type("ADDED")) == 5
    assert len(informer.store) == 5


async def test_list_errors_back_off_then_retry(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    metrics = FakeMetrics()
    server.fail_next("list", 500, count=2)
    informer = make(client, rclock, metrics=metrics)
    async with running(informer.run):
        first = await rclock.wait_sleeps(1)
        assert in_first_backoff(first)
        await rclock.advance(first)
        second = await rclock.wait_sleeps(2)
        assert 0.5 < second <= 1.0  # doubled
        assert not informer.has_synced
        await rclock.advance(second)
        await informer.wait_synced()
    assert metrics.relists == ["initial", "error", "error"]
    assert metrics.synced_values == [False, True]


async def test_429_on_watch_honours_retry_after_and_rewatches_at_the_same_rv(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = make(client, rclock)
    async with running(informer.run):
        await server.wait_watches()
        server.create("a")
        rv = str(server.rv)
        await server.wait_watches()
        server.bookmark(advance=0)  # the watch is live and has seen "a"
        server.fail_next("watch", 429, retry_after=7)
        n = len(server.requests)
        server.close_watches()
        delay = await rclock.wait_sleeps(1)
        assert delay == 7.0
        await rclock.advance(7.0)
        watches = [await server.wait_request("watch", after=n + i) for i in (0, 1)]
    assert [w.resource_version for w in watches] == [rv, rv]
    assert len(server.seen("list")) == 1


async def test_a_dropped_connection_backs_off_and_rewatches_from_the_last_rv(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = make(client, rclock)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        server.create("a")
        await rec.wait_until(lambda: "default/a" in rec.last)
        rv = str(server.rv)
        n = len(server.requests)
        server.drop_watches()
        delay = await rclock.wait_sleeps(1)
        assert in_first_backoff(delay)
        await rclock.advance(delay)
        watch = await server.wait_request("watch", after=n)
    assert watch.resource_version == rv
    assert len(server.seen("list")) == 1


async def test_a_500_error_event_relists_from_the_last_rv(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    metrics = FakeMetrics()
    informer = make(client, rclock, metrics=metrics)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        server.create("a")
        await rec.wait_until(lambda: "default/a" in rec.last)
        rv = str(server.rv)
        n = len(server.requests)
        server.error_watches(500, "InternalError")
        delay = await rclock.wait_sleeps(1)
        await rclock.advance(delay)
        relist = await server.wait_request("list", after=n)
    assert relist.resource_version == rv  # not "" (the RV is still valid), not "0"
    assert metrics.relists == ["initial", "error"]


async def test_a_very_short_empty_watch_counts_as_an_error(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = make(client, rclock)
    async with running(informer.run):
        await server.wait_watches()
        n = len(server.requests)
        server.close_watches()  # closed at once, no event: client-go's "very short watch"
        delay = await rclock.wait_sleeps(1)
        assert in_first_backoff(delay)
        await rclock.advance(delay)
        relist = await server.wait_request("list", after=n)
    assert relist.resource_version == str(server.rv)


async def test_force_relist_goes_through_the_410_path(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.create("a")
    server.create("b")
    metrics = FakeMetrics()
    informer = make(client, rclock, metrics=metrics)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        server.delete("a", notify=False)
        n = len(server.requests)
        informer.force_relist()
        relist = await server.wait_request("list", after=n)
        await rec.wait_until(lambda: rec.keys("DELETED") == {"default/a"})
        await server.wait_request("watch", after=n)
    assert relist.resource_version == ""
    assert informer.store.keys() == ["default/b"]
    assert metrics.relists == ["initial", "forced"]
    assert "forced" in metrics.watch_ends
    assert rclock.sleeps == []


async def test_metrics_count_applied_events_including_bookmarks_not_as_objects(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    metrics = FakeMetrics()
    informer = make(client, rclock, metrics=metrics)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        server.create("a")
        server.bookmark()
        server.update("a", data={"x": "y"})
        server.delete("a")
        await rec.wait_until(lambda: rec.last.get("default/a", ("",))[0] == "DELETED")
    assert metrics.events == ["ADDED", "MODIFIED", "DELETED"]
    assert metrics.synced_values == [False, True]


def test_backoff_doubles_to_the_cap_and_resets_after_two_healthy_minutes() -> None:
    clock = FakeClock()
    backoff = Backoff(clock=clock, jitter=0.0)
    got = [backoff.next() for _ in range(7)]
    assert got == pytest.approx([0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0])
    clock._t += 119.0  # not yet two minutes since the last failure
    assert backoff.next() == pytest.approx(5.0)
    clock._t += 121.0
    assert backoff.next() == pytest.approx(0.5)


def test_backoff_jitter_spreads_each_step_over_its_upper_half_never_past_the_cap() -> None:
    backoff = Backoff(clock=FakeClock(), rng=random.Random(3))
    for base in (0.5, 1.0, 2.0, 4.0):
        assert base / 2 < backoff.next() <= base
    delays = [backoff.next() for _ in range(200)]
    assert max(delays) <= 5.0, "capped: recovery after an outage waits at most 5 s"
    assert min(delays) > 2.5
    assert len({round(d, 3) for d in delays}) > 100, "jittered: no lockstep at the cap"


def test_backoff_refuses_a_jitter_that_could_reach_zero() -> None:
    with pytest.raises(ValueError, match="jitter"):
        Backoff(clock=FakeClock(), jitter=1.0)


async def test_a_too_large_resource_version_answer_relists_with_a_consistent_read(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = make(client, rclock)
    async with running(informer.run):
        await server.wait_watches()
        server.create("a")
        server.bookmark(advance=0)
        msg = "Too large resource version: 999, current: 101"
        server.fail_next("list", 504, message=msg)
        n = len(server.requests)
        server.error_watches(500, "InternalError")  # relist from the last RV ...
        await rclock.advance(await rclock.wait_sleeps(1))
        await server.wait_request("list", after=n)
        await rclock.advance(await rclock.wait_sleeps(2))  # ... which is "too large"
        retry = await server.wait_request("list", after=n + 1)
    assert retry.resource_version == ""


def explode_on_boom(obj: Obj) -> Obj | None:
    if obj.get("data", {}).get("boom"):
        raise RuntimeError("projection bug")
    return obj


async def test_a_raising_transform_leaves_the_cache_as_it_was(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.create("a")
    informer = Informer(client, CONFIGMAPS, transform=explode_on_boom, clock=rclock)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run) as task:
        await informer.wait_synced()
        cached = informer.store.get("default/a")
        await server.wait_watches()
        server.update("a", data={"boom": "1"})
        server.create("marker")
        await rec.wait_until(lambda: "default/marker" in rec.last)
        assert informer.store.get("default/a") is cached  # not dropped, not replaced
        n = len(server.requests)
        informer.force_relist()  # the relist sees "a" still exploding: no tombstone
        await server.wait_request("watch", after=n)
        assert informer.store.get("default/a") is cached
        server.update("a", data={})
        await rec.wait_until(lambda: rec.last["default/a"][0] == "MODIFIED")
        assert not task.done()
    assert "default/a" not in rec.keys("DELETED")
