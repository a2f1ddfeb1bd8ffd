"""The operator's informer metrics, read from a Prometheus registry.

An ``Informer`` runs against the fake apiserver with the operator's own hooks
(``lattice.app._InformerMetrics`` over ``Metrics`` on a fresh ``CollectorRegistry``), and the test
reads the samples back: ``lattice_informer_events_total{informer,type}`` counts the watch events
applied to the cache (not the initial LIST, not bookmarks), and
``lattice_informer_watch_ended_total{informer,reason}`` counts each way a watch ends.
"""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry

from lattice.app import _InformerMetrics
from lattice.kube.client import RestClient
from lattice.kube.resources import CONFIGMAPS
from lattice.primitives.keys import object_key
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from lattice.runtime.metrics import Metrics
from lattice.runtime.projections import keep_raw
from tests.support.fake_apiserver import FakeApiServer, Recorder, RecordingClock, running

NAME = "configmaps:test"


class Samples:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._r = registry

    def events(self, event_type: str) -> float:
        value = self._r.get_sample_value(
            "lattice_informer_events_total", {"informer": NAME, "type": event_type}
        )
        return value or 0.0

    def watch_ended(self, reason: str) -> float:
        value = self._r.get_sample_value(
            "lattice_informer_watch_ended_total", {"informer": NAME, "reason": reason}
        )
        return value or 0.0

    def relists(self, reason: str) -> float:
        value = self._r.get_sample_value(
            "lattice_informer_relists_total", {"informer": NAME, "reason": reason}
        )
        return value or 0.0

    def ended(self) -> dict[str, float]:
        return {r: self.watch_ended(r) for r in ("closed", "410", "error", "forced")}


def setup(
    client: RestClient, clock: RecordingClock
) -> tuple[Informer[Obj], Recorder[Obj], Samples]:
    registry = CollectorRegistry()
    informer = Informer(
        client,
        CONFIGMAPS,
        transform=keep_raw,
        clock=clock,
        name=NAME,
        rng=random.Random(1),
        metrics=_InformerMetrics(Metrics(registry)),
    )
    rec: Recorder[Obj] = Recorder(object_key)
    informer.add_handler(rec)
    return informer, rec, Samples(registry)


async def live(server: FakeApiServer, rec: Recorder[Obj], name: str) -> None:
    """Until an object created now has come through a watch: a watch is open and streaming."""
    server.create(name)
    await rec.wait_until(lambda: f"default/{name}" in rec.last)


async def test_applied_watch_events_are_counted_by_type(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.create("listed")  # arrives in the initial LIST: no watch event
    informer, rec, samples = setup(client, rclock)
    async with running(informer.run):
        await server.wait_watches()
        server.create("a")
        server.create("b")
        server.bookmark()  # moves the RV, applies no object
        server.update("a", data={"x": "y"})
        server.delete("b")
        server.delete("listed")
        await rec.wait_until(lambda: rec.keys("DELETED") == {"default/b", "default/listed"})
    assert samples.events("ADDED") == 2
    assert samples.events("MODIFIED") == 1
    assert samples.events("DELETED") == 2
    assert samples.events("BOOKMARK") == 0
    assert samples.ended() == {"closed": 0, "410": 0, "error": 0, "forced": 0}


async def test_every_way_a_watch_ends_is_counted_by_reason(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informer, rec, samples = setup(client, rclock)
    async with running(informer.run):
        await server.wait_watches()

        # the server ends a watch that delivered something (its timeoutSeconds): "closed"
        await live(server, rec, "a")
        n = len(server.requests)
        server.close_watches()
        await server.wait_request("watch", after=n)  # re-watched at once, no backoff
        assert samples.ended() == {"closed": 1, "410": 0, "error": 0, "forced": 0}

        # an ERROR 410 in the stream: "410", then a relist
        n = len(server.requests)
        server.expire_watches()
        await server.wait_request("watch", after=n)
        assert samples.ended() == {"closed": 1, "410": 1, "error": 0, "forced": 0}
        assert samples.relists("410") == 1

        # a broken connection: "error", then a backoff before re-watching
        await live(server, rec, "b")
        server.drop_watches()
        delay = await rclock.wait_sleeps(1)
        assert samples.ended() == {"closed": 1, "410": 1, "error": 1, "forced": 0}
        n = len(server.requests)
        await rclock.advance(delay)
        await server.wait_request("watch", after=n)

        # force_relist(): "forced"
        await live(server, rec, "c")
        n = len(server.requests)
        informer.force_relist()
        await server.wait_request("watch", after=n)
        assert samples.ended() == {"closed": 1, "410": 1, "error": 1, "forced": 1}
        assert samples.relists("forced") == 1

    assert samples.relists("initial") == 1
    assert samples.events("ADDED") == 3  # a, b, c; the relists' items are not watch events


async def test_the_metric_families_are_exported_before_any_informer_runs() -> None:
    registry = CollectorRegistry()
    Metrics(registry)
    names = {m.name for m in registry.collect()}
    # prometheus_client drops the _total suffix from counter family names
    assert {"lattice_informer_watch_ended", "lattice_informer_events"} <= names
    types = {m.name: m.type for m in registry.collect()}
    assert types["lattice_informer_watch_ended"] == "counter"
    assert types["lattice_informer_events"] == "counter"
