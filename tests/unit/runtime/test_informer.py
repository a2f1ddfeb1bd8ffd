"""Informer semantics against the fake apiserver, through the real RestClient.

Happy paths: the first paginated LIST, the WATCH parameters, store-before-handler ordering,
notification transitions, bookmarks, transforms, handlers, namespaces, selectors, cancellation.
Failure paths are in ``test_informer_faults.py``.
"""

from __future__ import annotations

import asyncio
import gc
import random
from typing import Any

import pytest

from lattice.clock import yield_now
from lattice.kube.client import RestClient
from lattice.primitives.keys import object_key
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from lattice.runtime.projections import keep_raw
from tests.support.fake_apiserver import (
    FakeApiServer,
    Recorder,
    RecordingClock,
    running,
)

CM = "default/cm"


def raw_informer(client: RestClient, clock: RecordingClock, **kw: Any) -> Informer[Obj]:
    from lattice.kube.resources import CONFIGMAPS

    return Informer(client, CONFIGMAPS, transform=keep_raw, clock=clock, **kw)


def rv_of(obj: Obj | None) -> str:
    assert obj is not None
    return str(obj["metadata"]["resourceVersion"])


async def test_first_list_is_rv0_and_paginated(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    for i in range(1201):
        server.create(f"cm-{i:04d}")
    informer = raw_informer(client, rclock)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    assert not informer.has_synced
    async with running(informer.run):
        await informer.wait_synced()
        lists = server.seen("list")
        assert [r.query.get("limit") for r in lists] == ["500", "500", "500"]
        assert lists[0].resource_version == "0"
        assert "continue" not in lists[0].query
        # pages after the first carry the continue token and no resourceVersion
        assert all("resourceVersion" not in r.query and r.query["continue"] for r in lists[1:])
        assert len(informer.store) == 1201
        assert len(rec.of_type("ADDED")) == 1201
        assert informer.resource_versions == {None: str(server.rv)}


async def test_watch_starts_at_the_list_rv_with_bookmarks_and_a_jittered_timeout(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.create("cm")
    list_rv = str(server.rv)
    informer = raw_informer(client, rclock, rng=random.Random(7))
    async with running(informer.run):
        watch = await server.wait_request("watch")
    assert watch.resource_version == list_rv
    assert watch.query["allowWatchBookmarks"] == "true"
    assert 300 <= int(watch.query["timeoutSeconds"]) < 600


@pytest.mark.parametrize("seed", range(5))
async def test_watch_timeout_is_configurable_and_stays_in_range(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock, seed: int
) -> None:
    informer = raw_informer(client, rclock, min_watch_timeout=10, rng=random.Random(seed))
    async with running(informer.run):
        watch = await server.wait_request("watch")
    assert 10 <= int(watch.query["timeoutSeconds"]) < 20


async def test_store_is_updated_before_handlers_run(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = raw_informer(client, rclock)
    seen: list[tuple[str, bool]] = []

    def handler(event_type: str, old: Obj | None, new: Obj | None) -> None:
        value = new if new is not None else old
        assert value is not None
        cached = informer.store.get(object_key(value))
        if event_type == "DELETED":
            seen.append((event_type, cached is None))
        else:
            seen.append((event_type, cached is new))

    informer.add_handler(handler)
    async with running(informer.run):
        await informer.wait_synced()
        await server.wait_watches()
        server.create("cm")
        server.update("cm", data={"k": "v"})
        server.delete("cm")
        rec: Recorder[Obj] = Recorder(object_key)
        informer.add_handler(rec)
        await rec.wait_until(lambda: len(seen) == 3)
    assert seen == [("ADDED", True), ("MODIFIED", True), ("DELETED", True)]


async def test_watch_events_notify_cache_transitions(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = raw_informer(client, rclock)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        created = dict(server.create("cm"))
        created_rv = str(server.rv)
        server.update("cm", data={"k": "v"})
        updated_rv = str(server.rv)
        server.delete("cm")
        deleted_rv = str(server.rv)
        await rec.wait_until(lambda: len(rec.events) == 3)
        assert CM not in informer.store
    (t1, o1, n1), (t2, o2, n2), (t3, o3, n3) = rec.events
    assert (t1, o1, rv_of(n1)) == ("ADDED", None, created_rv)
    assert (t2, rv_of(o2), rv_of(n2)) == ("MODIFIED", created_rv, updated_rv)
    assert n2 is not None
    assert n2["data"] == {"k": "v"}
    # DELETED carries the final state from the event
    assert (t3, rv_of(o3), n3) == ("DELETED", deleted_rv, None)
    assert created["metadata"]["name"] == "cm"


async def test_bookmark_advances_the_rv_and_notifies_nobody(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.create("cm")
    informer = raw_informer(client, rclock)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        before = len(rec.events)
        snapshot = dict(informer.store.items())
        bookmark_rv = server.bookmark(advance=10)
        n = len(server.requests)
        server.close_watches()  # the server's timeout: the next watch shows the RV we kept
        watch = await server.wait_request("watch", after=n)
        assert watch.resource_version == bookmark_rv
        assert informer.resource_versions[None] == bookmark_rv
    assert len(rec.events) == before
    assert dict(informer.store.items()) == snapshot
    assert rclock.sleeps == []  # a normal close re-watches at once


async def test_normal_watch_close_rewatches_from_last_rv_without_relisting(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = raw_informer(client, rclock)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        server.create("cm")
        last = str(server.rv)
        await rec.wait_until(lambda: CM in rec.last)
        n = len(server.requests)
        server.close_watches()
        watch = await server.wait_request("watch", after=n)
    assert watch.resource_version == last
    assert len(server.seen("list")) == 1
    assert rclock.sleeps == []


def drop_marked(obj: Obj) -> Obj | None:
    return None if obj.get("data", {}).get("drop") == "yes" else obj


async def test_transform_returning_none_removes_the_key_as_a_delete(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    from lattice.kube.resources import CONFIGMAPS

    server.create("kept")
    server.create("skipped", data={"drop": "yes"})
    informer = Informer(client, CONFIGMAPS, transform=drop_marked, clock=rclock)
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await informer.wait_synced()
        assert informer.store.keys() == ["default/kept"]
        await server.wait_watches()
        server.update("kept", data={"drop": "yes"})
        await rec.wait_until(lambda: rec.last["default/kept"][0] == "DELETED")
        assert len(informer.store) == 0
        server.update("kept", data={})
        await rec.wait_until(lambda: rec.last["default/kept"][0] == "ADDED")
        server.delete("skipped")  # never cached: nobody hears about it
        server.create("marker")
        await rec.wait_until(lambda: "default/marker" in rec.last)
    assert "default/skipped" not in rec.last


def name_only(obj: Obj) -> str:
    return str(obj["metadata"]["namespace"]) + "/" + str(obj["metadata"]["name"])


async def test_an_update_that_leaves_the_projection_equal_is_not_notified(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    from lattice.kube.resources import CONFIGMAPS

    informer = Informer(client, CONFIGMAPS, transform=name_only, clock=rclock)
    rec: Recorder[str] = Recorder(lambda v: v)
    informer.add_handler(rec)
    async with running(informer.run):
        await server.wait_watches()
        server.create("a")
        server.update("a", data={"x": "1"})  # same projection
        server.create("b")
        await rec.wait_until(lambda: "default/b" in rec.last)
    assert [e[0] for e in rec.events] == ["ADDED", "ADDED"]


async def test_handler_added_after_sync_gets_the_cache_replayed_and_can_be_removed(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.create("a")
    server.create("b")
    informer = raw_informer(client, rclock)
    async with running(informer.run):
        await informer.wait_synced()
        late: Recorder[Obj] = Recorder(object_key)
        remove = informer.add_handler(late)
        assert late.keys("ADDED") == {"default/a", "default/b"}
        quiet: Recorder[Obj] = Recorder(object_key)
        informer.add_handler(quiet, replay=False)
        assert quiet.events == []
        remove()
        await server.wait_watches()
        server.create("c")
        await quiet.wait_until(lambda: "default/c" in quiet.last)
    assert "default/c" not in late.last


async def test_a_failing_handler_does_not_stop_the_informer_or_other_handlers(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = raw_informer(client, rclock)

    def boom(event_type: str, old: Obj | None, new: Obj | None) -> None:
        raise RuntimeError("handler bug")

    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(boom)
    informer.add_handler(rec)
    async with running(informer.run) as task:
        await server.wait_watches()
        server.create("a")
        server.create("b")
        await rec.wait_until(lambda: "default/b" in rec.last)
        assert not task.done()
    assert len(informer.store) == 2


async def test_namespaces_get_one_reflector_each_feeding_one_store(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    for ns in ("a", "b", "c"):
        server.create("x", namespace=ns)
    informer = raw_informer(client, rclock, namespaces=["a", "b"])
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    async with running(informer.run):
        await informer.wait_synced()
        assert sorted(informer.store.keys()) == ["a/x", "b/x"]
        assert sorted(r.namespace or "" for r in server.seen("list")) == ["a", "b"]
        await server.wait_watches(2)
        assert sorted(r.namespace or "" for r in server.seen("watch")) == ["a", "b"]
        # a relist of namespace a must not tombstone namespace b
        server.create("y", namespace="b")
        server.delete("x", namespace="a", notify=False)
        server.expire_watches(namespace="a")
        await rec.wait_until(lambda: rec.keys("DELETED") == {"a/x"})
        await rec.wait_until(lambda: "b/y" in rec.last)
    assert sorted(informer.store.keys()) == ["b/x", "b/y"]
    assert set(informer.resource_versions) == {"a", "b"}


async def test_selectors_go_to_list_and_watch(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer = raw_informer(
        client, rclock, label_selector="app=x,!skip", field_selector="metadata.name!=z"
    )
    async with running(informer.run):
        await server.wait_request("watch")
    for request in server.requests:
        assert request.query["labelSelector"] == "app=x,!skip"
        assert request.query["fieldSelector"] == "metadata.name!=z"


async def test_cancellation_is_clean(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    loop = asyncio.get_running_loop()
    problems: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: problems.append(ctx))
    informer = raw_informer(client, rclock, namespaces=["a", "b"])
    task = loop.create_task(informer.run())
    await informer.wait_synced()
    await server.wait_watches(2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with server._changed:  # the server saw both watch connections go away
        await asyncio.wait_for(server._changed.wait_for(lambda: server.open_watches == 0), 10)
    gc.collect()
    await yield_now()
    leftovers = [
        t for t in asyncio.all_tasks() if t.get_name().startswith(("watch:", "reflector:"))
    ]
    assert leftovers == []
    assert problems == []


async def test_not_synced_until_the_list_succeeds(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.fail_next("list", 500)
    informer = raw_informer(client, rclock)
    async with running(informer.run):
        delay = await rclock.wait_sleeps(1)
        assert not informer.has_synced
        await rclock.advance(delay)
        await informer.wait_synced()
    assert [r.resource_version for r in server.seen("list")] == ["0", "0"]
