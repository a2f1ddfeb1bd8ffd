"""InformerFactory: one shared informer per key, started, synced and stopped together."""

from __future__ import annotations

import asyncio

import pytest

from lattice.kube.client import RestClient
from lattice.kube.resources import CONFIGMAPS, PODS
from lattice.primitives.objects import Obj
from lattice.runtime.informer import InformerFactory
from lattice.runtime.projections import keep_raw, strip_managed_fields
from tests.support.fake_apiserver import FakeApiServer, RecordingClock


def by_label(obj: Obj) -> tuple[str, ...]:
    return tuple((obj["metadata"].get("labels") or {}).values())


async def test_same_key_shares_one_informer(client: RestClient) -> None:
    factory = InformerFactory(client, clock=RecordingClock())
    a = factory.informer(CONFIGMAPS, transform=keep_raw)
    b = factory.informer(CONFIGMAPS, transform=keep_raw, indexes={"label": by_label})
    assert a is b
    assert "label" in a.store.index_names  # a later consumer's index is added
    assert factory.informer(CONFIGMAPS, transform=keep_raw, label_selector="x=y") is not a
    assert factory.informer(CONFIGMAPS, transform=keep_raw, namespaces=["n"]) is not a
    assert factory.informer(CONFIGMAPS, transform=strip_managed_fields) is not a
    assert factory.informer(PODS, transform=keep_raw) is not a
    ns = factory.informer(CONFIGMAPS, transform=keep_raw, namespaces=["b", "a"])
    assert factory.informer(CONFIGMAPS, transform=keep_raw, namespaces=["a", "b"]) is ns
    assert a.name == "configmaps:keep_raw"
    assert len(factory.informers) == 6


async def test_a_transform_name_bound_to_another_function_is_refused(client: RestClient) -> None:
    factory = InformerFactory(client, clock=RecordingClock())
    factory.informer(CONFIGMAPS, transform=lambda o: o, transform_name="mine")
    with pytest.raises(ValueError, match="already bound"):
        factory.informer(CONFIGMAPS, transform=lambda o: o, transform_name="mine")


async def test_start_sync_late_informer_and_stop(server: FakeApiServer, client: RestClient) -> None:
    server.create("a")
    factory = InformerFactory(client, clock=RecordingClock())
    first = factory.informer(CONFIGMAPS, transform=keep_raw)
    factory.start()
    assert await factory.wait_synced()
    late = factory.informer(CONFIGMAPS, transform=keep_raw, label_selector="x")
    await late.wait_synced()  # started at once because the factory runs
    assert factory.has_synced
    assert first.store.keys() == late.store.keys() == ["default/a"]
    await server.wait_watches(2)
    await factory.stop()
    leftovers = [t for t in asyncio.all_tasks() if t.get_name().startswith(("informer:", "watch:"))]
    assert leftovers == []


async def test_wait_synced_times_out_on_the_clock(
    server: FakeApiServer, client: RestClient
) -> None:
    server.fail_next("list", 500, count=1000)
    clock = RecordingClock()
    factory = InformerFactory(client, clock=clock)
    factory.informer(CONFIGMAPS, transform=keep_raw)
    factory.start()
    waiter = asyncio.ensure_future(factory.wait_synced(timeout=5.0))
    await clock.wait_sleeps(2)  # the backoff and the wait's timer
    assert not waiter.done()
    await clock.advance(5.0)
    assert await waiter is False
    await factory.stop()
