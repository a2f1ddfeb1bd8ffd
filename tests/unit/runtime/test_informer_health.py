"""Watch health for ``/readyz``: how long each list/watch has been failing, and why.

A real apiserver cannot be made to refuse one LIST or drop one watch on demand, so these run on
the fault-injecting fake; the apiserver outage itself is tested on the real control plane
(tests/e2e/test_apiserver_outage.py).
"""

from __future__ import annotations

import random
from typing import Any

from lattice.kube import RestClient
from lattice.kube.resources import CONFIGMAPS
from lattice.runtime.informer import InformerFactory
from tests.support.fake_apiserver import FakeApiServer, RecordingClock, running

Obj = dict[str, object]


def failing_since(reflector: Any) -> float | None:
    """The reflector's failure clock, read through a call so that each assert reads it anew."""
    value = reflector.failing_since
    return None if value is None else float(value)


def keep(obj: Obj) -> Obj:
    return obj


def factory(client: RestClient, clock: RecordingClock) -> InformerFactory:
    return InformerFactory(client, clock=clock, rng=random.Random(1))


async def test_a_failing_list_is_reported_once_past_the_timeout_and_cleared_by_a_list(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.fail_next("list", 403, count=3, message='configmaps is forbidden: User "x"')
    informers = factory(client, rclock)
    informer = informers.informer(CONFIGMAPS, transform=keep)
    informers.start()
    try:
        first = await rclock.wait_sleeps(1)
        (reflector,) = informer.reflectors
        assert failing_since(reflector) == 0.0
        assert "forbidden" in reflector.last_error
        assert informers.failing(longer_than=1.0) == [], "not yet past the timeout"
        await rclock.advance(first)
        await rclock.advance(await rclock.wait_sleeps(2))
        assert rclock.monotonic() > 1.0
        (line,) = informers.failing(longer_than=1.0)
        assert line.startswith("configmaps:keep: failing for ")
        assert line.endswith('configmaps is forbidden: User "x"')
        await rclock.advance(await rclock.wait_sleeps(3))
        await informer.wait_synced()
        assert failing_since(reflector) is None
        assert informers.failing(longer_than=0.0) == []
    finally:
        await informers.stop()


async def test_a_dropped_watch_fails_until_a_new_watch_is_open_even_without_events(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    informers = factory(client, rclock)
    informer = informers.informer(CONFIGMAPS, transform=keep)
    async with running(informer.run):
        await server.wait_watches()
        (reflector,) = informer.reflectors
        assert failing_since(reflector) is None
        n = len(server.requests)
        server.fail_next("watch", 503, count=1)
        server.drop_watches()
        delay = await rclock.wait_sleeps(1)
        assert failing_since(reflector) is not None
        await rclock.advance(delay)
        await server.wait_request("watch", after=n)  # refused with 503: still failing
        await rclock.advance(await rclock.wait_sleeps(2))
        await server.wait_request("watch", after=n + 1)
        await server.wait_watches()
        assert failing_since(reflector) is None, "an open watch is healthy before any event"
        assert informers.failing(longer_than=0.0) == []


async def test_the_capped_backoff_retries_within_five_seconds_however_long_the_outage(
    server: FakeApiServer, client: RestClient, rclock: RecordingClock
) -> None:
    server.fail_next("list", 500, count=40)
    informers = factory(client, rclock)
    informer = informers.informer(CONFIGMAPS, transform=keep)
    async with running(informer.run):
        for i in range(1, 41):
            await rclock.advance(await rclock.wait_sleeps(i))
        await informer.wait_synced()
    assert max(rclock.sleeps) <= 5.0
    assert sum(rclock.sleeps) > 60.0, "a minute-long outage, retried all along"
