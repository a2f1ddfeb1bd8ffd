"""The generated configuration reference: current, complete, and true to ``load_settings``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from lattice.config import FIELDS, Settings, add_arguments, load_settings
from lattice.docs_config import main, render_configuration

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "configuration.md"


def _rows() -> dict[str, list[str]]:
    """Flag -> the cells of its table row."""
    rows = {}
    for line in render_configuration().splitlines():
        if line.startswith("| `--"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows[cells[0].split("`")[1]] = cells
    return rows


def test_committed_reference_is_current() -> None:
    """Regenerate with `make docs` (python -m lattice.docs_config) when this fails."""
    assert DOC.read_text(encoding="utf-8") == render_configuration()


def test_every_flag_of_lattice_run_and_every_env_var_is_documented() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    flags -= {"--help"}
    text = render_configuration()
    for flag in flags:
        assert f"`{flag}`" in text, flag
    rows = _rows()
    assert list(rows) == [doc.flag for doc in FIELDS]
    for doc in FIELDS:
        for env in doc.env:
            assert f"`{env}`" in rows[doc.flag][1], env


def test_documented_defaults_are_the_loaded_defaults() -> None:
    defaults = load_settings(None, env={})
    rows = _rows()
    assert rows["--qps"][3] == "`100`"
    assert rows["--workers"][3] == "`4`"
    assert rows["--pending-timeout"][3] == "`5m0s`"
    assert rows["--kubeconfig"][3] == "unset"
    assert rows["--leader-elect"][3] == "`false`"
    assert rows["--enabled-kinds"][3] == f"`{','.join(defaults.enabled_kinds)}`"
    assert rows["--queueing-strategy"][3] == f"`{defaults.queueing_strategy}`"
    for doc in FIELDS:
        description = Settings.model_fields[doc.field].description or ""
        assert rows[doc.flag][4] == description.replace("|", "\\|"), doc.flag


def test_documented_syntax_is_what_load_settings_accepts() -> None:
    rows = _rows()
    env = {
        "LATTICE_NAMESPACES": "team-a,team-b",
        "LATTICE_LEADER_ELECT": "yes",
        "LATTICE_PENDING_TIMEOUT": "1h30m",
        "LATTICE_COOLDOWN_BASE": "90",
    }
    settings = load_settings(None, env=env)
    assert settings.namespaces == ("team-a", "team-b")
    assert rows["--namespaces"][2] == "list"
    assert settings.leader_elect is True
    assert rows["--leader-elect"][0] == "`--leader-elect`, `--no-leader-elect`"
    assert settings.pending_timeout == 5400.0
    assert settings.cooldown_base == 90.0
    assert rows["--pending-timeout"][2] == "duration"
    # A flag wins over the environment.
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--workers", "8"])
    assert load_settings(args, env={"LATTICE_WORKERS": "2"}).workers == 8


def test_check_fails_on_a_stale_file_and_passes_after_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "configuration.md"
    assert main(["--output", str(out), "--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--output", str(out)]) == 0
    assert main(["--output", str(out), "--check"]) == 0
