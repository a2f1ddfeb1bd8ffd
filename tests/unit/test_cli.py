"""The ``lattice`` command line: ``--version``, settings errors, and the one duration parser."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest

from lattice import __version__, cli
from lattice.config import SettingsError, add_arguments, load_settings
from lattice.durations import parse_duration, parse_seconds


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"lattice {__version__}"


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("30", 30.0),
        (" 2.5 ", 2.5),
        (45, 45.0),
        (0.25, 0.25),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("250ms", 0.25),
        ("1m0.5s", 60.5),
        ("3d", 259200.0),
        ("0", 0.0),
        ("-1s", -1.0),
    ],
)
def test_durations_are_seconds_or_go_durations(raw: object, seconds: float) -> None:
    assert parse_seconds(raw) == seconds
    assert parse_duration(raw) == timedelta(seconds=seconds)


@pytest.mark.parametrize("raw", ["", "x", "5x", "1h 30m", "1h,30m", "1e3s", "nan", "inf", True])
def test_bad_durations_say_what_is_accepted(raw: object) -> None:
    with pytest.raises(ValueError, match="invalid duration") as exc:
        parse_seconds(raw)
    assert "Go duration" in str(exc.value) or "finite" in str(exc.value)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_settings_errors_name_the_flag_or_variable_the_value_and_the_rule() -> None:
    env = {"LATTICE_WORKERS": "0", "LATTICE_QUEUEING_STRATEGY": "Fifo"}
    with pytest.raises(SettingsError) as exc:
        load_settings(_args("--resize-interval=-5", "--pending-timeout=5x"), env=env)
    problems = exc.value.problems
    assert problems == (
        "--pending-timeout=5x: invalid duration '5x': use seconds (30, 2.5) or a Go duration "
        "(30s, 5m, 1h30m, 250ms)",
        "LATTICE_WORKERS=0: must be greater than or equal to 1",
        "LATTICE_QUEUEING_STRATEGY=Fifo: must be 'StrictFIFO', 'BestEffortFIFO' or "
        "'LeastAttainedService'",
        "--resize-interval=-5: must be greater than or equal to 0",
    )
    assert not any("pydantic" in p or "type=" in p for p in problems)


def test_a_validator_message_keeps_its_words_without_the_prefix() -> None:
    with pytest.raises(SettingsError) as exc:
        load_settings(_args("--enabled-kinds=TrainingJob,PodGroup"), env={})
    (problem,) = exc.value.problems
    assert problem.startswith("--enabled-kinds=TrainingJob,PodGroup: unknown kinds ['PodGroup']")


def test_lattice_run_prints_each_problem_and_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LATTICE_BURST", "-1")
    assert cli.main(["run", "--qps=abc"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "lattice run: invalid settings:",
        "  --qps=abc: must be a valid number, unable to parse string as a number",
        "  LATTICE_BURST=-1: must be greater than or equal to 0",
    ]
