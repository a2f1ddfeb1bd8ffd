"""The chart's values: ``values.schema.json`` rejects typos and bad values, list values work, and
the default render configures ``lattice run`` exactly as its own defaults do.

Offline: only the helm that ``hack/controlplane/build.sh helm`` builds (``make test`` does).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.config import Settings, load_settings
from tests.support.cluster import CONTROLPLANE, REPO

CHART = REPO / "deploy" / "helm" / "lattice-operator"


@pytest.fixture(scope="module")
def helm_exe() -> Path:
    dirs = subprocess.run(
        [str(CONTROLPLANE / "build.sh"), "paths"], capture_output=True, text=True, check=True
    ).stdout.split()
    exe = next((Path(d) / "helm" for d in dirs if (Path(d) / "helm").is_file()), None)
    if exe is None:
        pytest.fail("helm is not built: run `hack/controlplane/build.sh helm`", pytrace=False)
    return exe


def _helm(exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _env(exe: Path, *args: str) -> dict[str, str]:
    proc = _helm(exe, "template", "lattice", str(CHART), "-n", "lattice-system", *args)
    assert proc.returncode == 0, proc.stderr
    (deployment,) = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_lint_passes_with_the_schema(helm_exe: Path) -> None:
    assert (CHART / "values.schema.json").is_file()
    proc = _helm(helm_exe, "lint", "--strict", str(CHART))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_default_render_is_lattice_runs_defaults(helm_exe: Path) -> None:
    settings = load_settings(env=_env(helm_exe))
    downward = {"pod_name", "pod_namespace"}
    got = settings.model_dump(exclude=downward)
    assert got == Settings().model_dump(exclude=downward)


@pytest.mark.parametrize(
    ("args", "where", "rule"),
    [
        (["--set", "operator.workerz=3"], "/operator", "'workerz' not allowed"),
        (["--set", "replicaCont=2"], "", "'replicaCont' not allowed"),
        (["--set", "service.prot=1"], "/service", "'prot' not allowed"),
        (["--set", "operator.queueingStrategy=Fifo"], "/operator/queueingStrategy", "one of"),
        (["--set", "operator.logLevel=verbose"], "/operator/logLevel", "one of"),
        (["--set", "imagePullPolicy=Sometimes"], "/imagePullPolicy", "one of"),
        (["--set", "operator.resizeInterval=5 minutes"], "/operator/resizeInterval", "pattern"),
        (["--set", "operator.workers=0"], "/operator/workers", "minimum"),
        (["--set", "operator.enabledKinds={TrainingJob,PyTorchJob}"], "/operator/enabledKinds", ""),
        (["--set", "monitorNamespace={Team_A}"], "/monitorNamespace", ""),
        (["--set", "service.internalPort=70000"], "/service/internalPort", "maximum"),
    ],
)
def test_bad_values_fail_the_render_naming_the_key(
    helm_exe: Path, args: list[str], where: str, rule: str
) -> None:
    proc = _helm(helm_exe, "template", "x", str(CHART), *args)
    assert proc.returncode != 0
    assert "don't meet the specifications of the schema" in proc.stderr
    assert f"at '{where}'" in proc.stderr
    assert rule in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--set", "monitorNamespace={team-a,team-b}"],
        ["--set", "monitorNamespace=team-a\\,team-b"],
        ["--set-string", "monitorNamespace=team-a\\,team-b"],
    ],
)
def test_namespace_lists_from_the_command_line(helm_exe: Path, args: list[str]) -> None:
    env = _env(helm_exe, *args)
    assert env["MONITOR_NAMESPACE"] == "team-a,team-b"
    assert load_settings(env=env).namespaces == ("team-a", "team-b")


@pytest.mark.parametrize("value", [["team-a", "team-b"], "team-a,team-b", "team-a, team-b"])
def test_namespace_lists_from_a_values_file(helm_exe: Path, tmp_path: Path, value: Any) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"monitorNamespace": value, "operator": {
        "enabledKinds": "MPIJob,TrainJob" if isinstance(value, str) else ["MPIJob", "TrainJob"]
    }}))  # fmt: skip
    settings = load_settings(env=_env(helm_exe, "-f", str(values)))
    assert settings.namespaces == ("team-a", "team-b")
    assert settings.enabled_kinds == ("MPIJob", "TrainJob")


def test_a_bare_comma_list_is_refused_by_helm_itself(helm_exe: Path) -> None:
    """Helm's --set splits ``a,b`` into two assignments before the chart sees anything; the
    chart's README and values.yaml say how to write a list instead."""
    proc = _helm(helm_exe, "template", "x", str(CHART), "--set", "monitorNamespace=a,b")
    assert proc.returncode != 0
    assert 'key "b" has no value' in proc.stderr
    assert "monitorNamespace={a,b}" in (CHART / "README.md").read_text()


def test_the_seed_image_string_and_durations_as_seconds_still_render(helm_exe: Path) -> None:
    env = _env(
        helm_exe,
        "--set", "image=reg.example.com:5000/lattice",
        "--set", "operator.resizeInterval=0",
        "--set", "operator.pendingTimeout=600",
    )  # fmt: skip
    settings = load_settings(env=env)
    assert (settings.resize_interval, settings.pending_timeout) == (0.0, 600.0)
