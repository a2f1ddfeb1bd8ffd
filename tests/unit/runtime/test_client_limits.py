"""The kube client's own rate limiter: its wait is observed (client-go's
``rest_client_rate_limiter_duration_seconds``), and ``with_own_limit`` gives a second client on
the same connections a bucket of its own (what ``lattice run`` gives the event recorder)."""

from __future__ import annotations

import asyncio

from kubernetes_asyncio.client import ApiClient, Configuration

from lattice.clock import FakeClock
from lattice.kube import RestClient
from lattice.kube.resources import CONFIGMAPS
from tests.support.aio import settle
from tests.support.fake_apiserver import FakeApiServer


class Seen:
    def __init__(self) -> None:
        self.waits: list[tuple[str, float]] = []
        self.requests = 0

    def observe(self, *, verb: str, resource: str, code: int, seconds: float) -> None:
        del verb, resource, code, seconds
        self.requests += 1

    def throttled(self, *, verb: str, seconds: float) -> None:
        self.waits.append((verb, seconds))


async def test_the_limiter_wait_is_observed_and_an_own_limit_is_not_shared(
    server: FakeApiServer, clock: FakeClock
) -> None:
    seen = Seen()
    api = ApiClient(configuration=Configuration(host=server.url))
    client = RestClient(api, qps=1.0, burst=2, clock=clock, observer=seen)
    events = client.with_own_limit()
    try:
        for _ in range(2):  # the burst: no wait
            await client.list(CONFIGMAPS, namespace="ns")
        assert seen.waits == [("LIST", 0.0), ("LIST", 0.0)]
        third = asyncio.create_task(client.list(CONFIGMAPS, namespace="ns"))
        await settle()
        assert not third.done()  # the bucket is empty: it waits a second for a token
        assert clock.sleepers == 1
        # The other client's bucket is full: its requests go at once, on the same connections.
        for _ in range(2):
            await events.list(CONFIGMAPS, namespace="ns")
        assert not third.done()
        assert seen.requests == 4
        await clock.advance(1.0)
        await third
        assert seen.waits[-1] == ("LIST", 1.0)
        assert seen.waits[2:4] == [("LIST", 0.0), ("LIST", 0.0)]
        assert seen.requests == 5
    finally:
        await client.close()


async def test_without_qps_nothing_waits_or_is_observed(server: FakeApiServer) -> None:
    seen = Seen()
    client = RestClient(ApiClient(configuration=Configuration(host=server.url)), observer=seen)
    try:
        other = client.with_own_limit()
        await client.list(CONFIGMAPS, namespace="ns")
        await other.list(CONFIGMAPS, namespace="ns")
        assert seen.waits == []
        assert seen.requests == 2
    finally:
        await client.close()


def test_the_operator_exports_the_limiter_wait_by_verb() -> None:
    from prometheus_client import CollectorRegistry

    from lattice.runtime.metrics import Metrics

    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.throttled(verb="PATCH", seconds=0.3)
    metrics.throttled(verb="PATCH", seconds=0.0)
    name = "rest_client_rate_limiter_duration_seconds"
    assert registry.get_sample_value(f"{name}_count", {"verb": "PATCH"}) == 2
    assert registry.get_sample_value(f"{name}_sum", {"verb": "PATCH"}) == 0.3
