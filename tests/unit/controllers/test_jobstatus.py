"""The reconciler's pure status helpers: status paths, Kubeflow condition updates, times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lattice.controllers.jobstatus import condition_true, get_path, put_condition, with_path
from lattice.frameworks.base import managed_elsewhere
from lattice.primitives.times import parse_opt_time

NOW = datetime(2026, 1, 1, 12, 0, 0, 500_000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "path", "value", "want"),
    [
        pytest.param(
            {"stage": "Running", "execStatus": {"x": 1}},
            ("status",),
            {"stage": "Completed"},
            {"stage": "Completed"},
            id="the whole status is replaced at the root path",
        ),
        pytest.param(
            {"stage": "Running", "execStatus": {"x": 1}},
            ("status", "execStatus"),
            {"y": 2},
            {"stage": "Running", "execStatus": {"y": 2}},
            id="a nested block is replaced and its siblings kept",
        ),
        pytest.param(
            {"conditions": []},
            ("status", "lattice"),
            {"stage": "Waiting"},
            {"conditions": [], "lattice": {"stage": "Waiting"}},
            id="a missing block is created",
        ),
        pytest.param(
            {"lattice": "garbage"},
            ("status", "lattice", "deep"),
            {"a": 1},
            {"lattice": {"deep": {"a": 1}}},
            id="a non-dict step is replaced by a dict",
        ),
    ],
)
def test_with_path(
    status: dict[str, Any], path: tuple[str, ...], value: dict[str, Any], want: dict[str, Any]
) -> None:
    before = repr(status)
    assert with_path(status, path, value) == want
    assert repr(status) == before, "the input is never mutated"


def test_with_path_refuses_paths_outside_status() -> None:
    with pytest.raises(ValueError, match="must start with 'status'"):
        with_path({}, ("spec",), {})


def test_get_path_returns_an_empty_block_for_missing_or_odd_steps() -> None:
    obj = {"status": {"lattice": {"stage": "Running"}, "odd": 3}}
    assert get_path(obj, ("status", "lattice")) == {"stage": "Running"}
    assert get_path(obj, ("status", "missing")) == {}
    assert get_path(obj, ("status", "odd", "x")) == {}


def test_put_condition_appends_and_then_keeps_the_transition_time() -> None:
    block = put_condition({}, type="Created", status=True, reason="R", message="m", now=NOW)
    assert block["conditions"] == [
        {
            "type": "Created",
            "status": "True",
            "reason": "R",
            "message": "m",
            "lastUpdateTime": "2026-01-01T12:00:00Z",
            "lastTransitionTime": "2026-01-01T12:00:00Z",
        }
    ]
    assert condition_true(block, "Created")
    later = NOW.replace(hour=13)
    again = put_condition(block, type="Created", status=True, reason="R", message="x", now=later)
    assert again == block, "same status and reason changes nothing"


def test_succeeded_flips_running_to_false() -> None:
    block = put_condition({}, type="Running", status=True, reason="R", message="m", now=NOW)
    done = put_condition(block, type="Succeeded", status=True, reason="S", message="m", now=NOW)
    assert not condition_true(done, "Running")
    assert condition_true(done, "Succeeded")
    assert [c["type"] for c in done["conditions"]] == ["Running", "Succeeded"]


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param("2026-01-01T12:00:00Z", datetime(2026, 1, 1, 12, tzinfo=UTC), id="utc"),
        pytest.param(None, None, id="absent"),
        pytest.param("yesterday", None, id="garbage is ignored"),
        pytest.param(5, None, id="non-string"),
    ],
)
def test_parse_opt_time(raw: object, want: datetime | None) -> None:
    assert parse_opt_time(raw) == want


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({}, False, id="no managedBy: ours"),
        pytest.param({"runPolicy": {"managedBy": "kubeflow.org/mpi-operator"}}, False, id="mpi"),
        pytest.param(
            {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}, False, id="kubeflow"
        ),
        pytest.param(
            {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}, True, id="multikueue"
        ),
        pytest.param(
            {"managedBy": "trainer.kubeflow.org/trainjob-controller"}, False, id="trainjob ours"
        ),
        pytest.param({"managedBy": "example.com/other"}, True, id="trainjob elsewhere"),
    ],
)
def test_managed_elsewhere(spec: dict[str, Any], want: bool) -> None:
    assert managed_elsewhere({"spec": spec}) is want
