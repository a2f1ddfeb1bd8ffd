"""Fixtures for the runtime unit tests: a fake clock, so no test waits for real time."""

from __future__ import annotations

import pytest

from lattice.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
