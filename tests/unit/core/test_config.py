"""Settings: defaults, then environment (seed names kept), then flags; bad input names the field."""

from __future__ import annotations

import argparse

import pytest

from lattice.config import FIELDS, Settings, SettingsError, add_arguments, load_settings


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(argv)


def test_defaults_match_the_seed_operator() -> None:
    s = load_settings(_parse([]), env={})
    assert s.scheduling_unit == "node"
    assert s.metrics_addr == ":8080"
    assert s.probe_addr == ":8081"
    assert s.pending_timeout == 300.0
    assert s.cooldown_max == 10800.0
    assert s.enabled_kinds == ("TrainingJob", "MPIJob", "MXJob", "TrainJob")
    # Not the seed's StrictFIFO: the strategy and starvation guard tuned with `lattice simulate`
    # (docs/simulate.md); `--queueing-strategy=StrictFIFO` restores the seed's order.
    assert (s.queueing_strategy, s.slowdown_limit) == ("LeastAttainedService", 4.0)
    assert s.starvation_limit is None  # deprecated, ignored


@pytest.mark.parametrize(
    ("env", "field", "want"),
    [
        pytest.param(
            {"RESOURCE_SCHEDULING_UNIT": "nvidia.com/gpu"},
            "scheduling_unit",
            "nvidia.com/gpu",
            id="seed scheduling unit env",
        ),
        pytest.param(
            {"LATTICE_JOB_NODE_SELECTOR_PATH": "/etc/sel"},
            "node_selector_path",
            "/etc/sel",
            id="seed node selector env",
        ),
        pytest.param(
            {"RDZV_BACKEND": "etcd"}, "rdzv_backend", "etcd", id="seed rendezvous backend"
        ),
        pytest.param(
            {"RDZV_SERVICE_PORT": "2379"}, "rdzv_service_port", "2379", id="seed rdzv port"
        ),
        pytest.param({"LATTICE_NAMESPACES": "a, b"}, "namespaces", ("a", "b"), id="namespace list"),
        pytest.param({"LATTICE_PENDING_TIMEOUT": "5m"}, "pending_timeout", 300.0, id="go duration"),
        pytest.param(
            {"LATTICE_RESIZE_INTERVAL": "1m30s"}, "resize_interval", 90.0, id="compound duration"
        ),
        pytest.param({"LATTICE_LEADER_ELECT": "true"}, "leader_elect", True, id="boolean env"),
    ],
)
def test_environment_sets_fields(env: dict[str, str], field: str, want: object) -> None:
    assert getattr(load_settings(_parse([]), env=env), field) == want


def test_flags_win_over_environment() -> None:
    s = load_settings(
        _parse(["--scheduling-unit", "node", "--workers", "8"]),
        env={"RESOURCE_SCHEDULING_UNIT": "nvidia.com/gpu", "LATTICE_WORKERS": "2"},
    )
    assert s.scheduling_unit == "node"
    assert s.workers == 8


def test_bad_values_name_the_field() -> None:
    with pytest.raises(SettingsError, match="--workers=0: must be greater"):
        load_settings(_parse(["--workers", "0"]), env={})
    with pytest.raises(SettingsError, match="--enabled-kinds=TrainingJob,PyTorchJob: unknown"):
        load_settings(_parse(["--enabled-kinds", "TrainingJob,PyTorchJob"]), env={})
    with pytest.raises(SettingsError, match="LATTICE_PENDING_TIMEOUT=5 minutes: invalid duration"):
        load_settings(_parse([]), env={"LATTICE_PENDING_TIMEOUT": "5 minutes"})


def test_every_setting_has_a_flag_and_an_env_name() -> None:
    documented = {d.field for d in FIELDS}
    assert documented == set(Settings.model_fields)
    assert all(d.env for d in FIELDS)


def test_the_removed_starvation_limit_is_accepted_with_a_deprecation_warning() -> None:
    with pytest.warns(FutureWarning, match="--slowdown-limit"):
        s = load_settings(_parse([]), env={"LATTICE_STARVATION_LIMIT": "72h"})
    assert s.starvation_limit == 72 * 3600.0
    assert s.slowdown_limit == 4.0
