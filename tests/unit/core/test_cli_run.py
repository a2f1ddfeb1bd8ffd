"""``lattice run``: what the process sets up before the operator starts."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from lattice import app, cli
from lattice.config import Settings
from lattice.runtime import logs


@pytest.fixture
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_run_raises_the_gc_thresholds_before_the_operator_starts(
    monkeypatch: pytest.MonkeyPatch, thresholds: None
) -> None:
    gc.set_threshold(700, 10, 10)
    seen: list[tuple[tuple[int, ...], Settings]] = []

    async def fake_run(settings: Settings) -> int:
        seen.append((gc.get_threshold(), settings))
        return 0

    monkeypatch.setattr(app, "run", fake_run)
    monkeypatch.setattr(logs, "configure_logging", lambda **_: None)  # leave the tests' logging
    assert cli.main(["run", "--scheduling-unit", "nvidia.com/gpu", "--log-level", "error"]) == 0
    assert [t for t, _ in seen] == [cli.GC_THRESHOLDS]
    assert seen[0][1].scheduling_unit == "nvidia.com/gpu"


def test_invalid_settings_fail_before_anything_is_changed(thresholds: None) -> None:
    gc.set_threshold(700, 10, 10)
    assert cli.main(["run", "--workers", "0"]) == 2
    assert gc.get_threshold() == (700, 10, 10)
