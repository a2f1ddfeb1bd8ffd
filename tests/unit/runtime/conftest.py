"""Fixtures for the runtime unit tests: fake clocks, and a fault-injecting fake apiserver with a
real ``RestClient`` pointed at it (for what a real apiserver cannot produce on demand)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lattice.clock import FakeClock
from lattice.kube import RestClient
from tests.support.fake_apiserver import FakeApiServer, RecordingClock, rest_client


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    srv = FakeApiServer()
    await srv.start()
    yield srv
    await srv.close()


@pytest.fixture
async def client(server: FakeApiServer) -> AsyncIterator[RestClient]:
    c = await rest_client(server)
    yield c
    await c.close()


@pytest.fixture
def rclock() -> RecordingClock:
    return RecordingClock()
