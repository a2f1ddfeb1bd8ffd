"""``lattice simulate``'s command-line checks: before the run, durations, and progress."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from lattice.clock import FakeClock
from lattice.sim import cli as sim_cli
from lattice.sim.cli import Progress, add_arguments, main

TRACE = "submit,duration,units\n0,100,2\n10,100,4\n20,50,2\n"


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(TRACE)
    return path


def _no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run must not start")

    monkeypatch.setattr(sim_cli, "run_policies", fail)


def test_an_unwritable_png_fails_before_the_run(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_run(monkeypatch)
    png = tmp_path / "no-such-dir" / "f.png"
    assert main(_args("--trace", str(trace), "--png", str(png))) == 2
    assert f"cannot write {png}" in capsys.readouterr().err


def test_a_writable_output_is_left_as_it_was(trace: Path, tmp_path: Path) -> None:
    png = tmp_path / "f.png"
    sim_cli.check_writable(png)
    assert not png.exists()
    png.write_bytes(b"old")
    sim_cli.check_writable(png)
    assert png.read_bytes() == b"old"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "the trace is empty"),
        ("submit,duration,units\n", "the trace has no jobs"),
    ],
)
def test_an_empty_trace_is_rejected_with_a_clear_message(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    _no_run(monkeypatch)
    path = tmp_path / "empty.csv"
    path.write_text(content)
    assert main(_args("--trace", str(path))) == 2
    assert message in capsys.readouterr().err


def test_limit_zero_leaves_nothing_to_simulate(
    trace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_run(monkeypatch)
    assert main(_args("--trace", str(trace), "--limit", "0")) == 2
    assert "no jobs left to simulate" in capsys.readouterr().err


def test_durations_take_seconds_or_go_durations(capsys: pytest.CaptureFixture[str]) -> None:
    args = _args("--trace", "t", "--resize-interval", "5m", "--starvation-limit", "3d")
    assert (args.resize_interval, args.starvation_limit, args.restart_cost) == (300, 259200, 30)
    assert _args("--trace", "t", "--restart-cost", "1m30s").restart_cost == 90
    with pytest.raises(SystemExit):
        _args("--trace", "t", "--resize-interval", "5 minutes")
    assert "invalid duration '5 minutes'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _args("--trace", "t", "--restart-cost=-1s")
    assert "must not be negative" in capsys.readouterr().err


async def test_progress_is_throttled_and_silent_on_short_runs() -> None:
    clock = FakeClock()
    out = io.StringIO()
    progress = Progress(stream=out, monotonic=clock.monotonic, interval=5.0)
    progress("lattice", 1, 100)
    await clock.advance(4.9)
    progress("lattice", 2, 100)
    assert out.getvalue() == ""  # a run shorter than the interval prints nothing
    await clock.advance(0.2)
    progress("lattice", 30, 100)
    await clock.advance(1.0)
    progress("lattice", 31, 100)
    await clock.advance(5.0)
    progress("fifo-backfill", 99, 100)
    assert out.getvalue().splitlines() == [
        "lattice simulate: lattice: 30/100 jobs finished (30%), 5s",
        "lattice simulate: fifo-backfill: 99/100 jobs finished (99%), 11s",
    ]


def test_a_run_reports_progress_through_the_engine(trace: Path) -> None:
    seen: list[tuple[str, int, int]] = []

    class Record(Progress):
        def __call__(self, policy: str, finished: int, total: int) -> None:
            seen.append((policy, finished, total))

    record = Record(stream=io.StringIO(), monotonic=FakeClock().monotonic)
    assert main(_args("--trace", str(trace), "--policy", "fifo-backfill"), progress=record) == 0
    assert seen[-1] == ("fifo-backfill", 3, 3)
    assert [f for _, f, _ in seen] == sorted(f for _, f, _ in seen)
