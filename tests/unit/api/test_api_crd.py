"""CRD rendering: committed files are current, names and columns are right, ``main`` works."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.api import crd as crd_module
from lattice.api.crd import DESCRIPTORS, main, render_crds, render_manifests, stale_files

REPO = Path(__file__).resolve().parents[3]
CRD_DIR = REPO / "deploy" / "crds"
FILES = [
    "breezeml.ai_trainingjobs.yaml",
    "kubeflow.org_mpijobs.yaml",
    "kubeflow.org_mxjobs.yaml",
    "trainer.kubeflow.org_trainjobs.yaml",
    "trainer.kubeflow.org_trainingruntimes.yaml",
    "trainer.kubeflow.org_clustertrainingruntimes.yaml",
]


def _crd(kind: str) -> dict[str, Any]:
    descriptor = next(d for d in DESCRIPTORS if d.resource.kind == kind)
    return _load(descriptor.file_name)


@functools.cache
def _parsed(name: str) -> str:
    return json.dumps(
        yaml.load(render_crds()[name], Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    )


def _load(name: str) -> dict[str, Any]:
    crd: dict[str, Any] = json.loads(_parsed(name))
    return crd


def test_render_crds_names_the_six_files() -> None:
    assert list(render_crds()) == FILES
    assert list(render_manifests()) == [*FILES, "kustomization.yaml"]


@pytest.mark.parametrize("name", [*FILES, "kustomization.yaml"])
def test_committed_file_is_current(name: str) -> None:
    """Regenerate with `lattice crds` (python -m lattice.api.crd) when this fails."""
    assert (CRD_DIR / name).read_text(encoding="utf-8") == render_manifests()[name]


def test_rendering_is_deterministic() -> None:
    assert crd_module._render() == render_crds()
    assert render_manifests() == render_manifests()


def test_kustomization_lists_every_crd() -> None:
    kustomization = yaml.safe_load(render_manifests()["kustomization.yaml"])
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["resources"] == FILES


@pytest.mark.parametrize(
    ("kind", "crd_name", "scope", "short_names", "status"),
    [
        pytest.param("TrainingJob", "trainingjobs.breezeml.ai", "Namespaced", ["tj"], True),
        pytest.param("MPIJob", "mpijobs.kubeflow.org", "Namespaced", ["mpij"], True),
        pytest.param("MXJob", "mxjobs.kubeflow.org", "Namespaced", ["mxj"], True),
        pytest.param("TrainJob", "trainjobs.trainer.kubeflow.org", "Namespaced", ["tjob"], True),
        pytest.param(
            "TrainingRuntime", "trainingruntimes.trainer.kubeflow.org", "Namespaced", None, False
        ),
        pytest.param(
            "ClusterTrainingRuntime",
            "clustertrainingruntimes.trainer.kubeflow.org",
            "Cluster",
            None,
            False,
        ),
    ],
)
def test_crd_identity(
    kind: str, crd_name: str, scope: str, short_names: list[str] | None, status: bool
) -> None:
    crd = _crd(kind)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == crd_name
    assert crd["spec"]["scope"] == scope
    names = crd["spec"]["names"]
    assert names["kind"] == kind
    assert names["listKind"] == f"{kind}List"
    assert names["singular"] == kind.lower()
    assert names.get("shortNames") == short_names
    assert names["categories"] == ["lattice"]
    (version,) = crd["spec"]["versions"]
    assert version["served"] is True
    assert version["storage"] is True
    assert ("subresources" in version) is status
    assert crd["spec"]["group"] == crd_name.split(".", 1)[1]


def _columns(kind: str) -> list[tuple[str, str, int]]:
    (version,) = _crd(kind)["spec"]["versions"]
    return [
        (c["name"], c["jsonPath"], c.get("priority", 0))
        for c in version.get("additionalPrinterColumns", [])
    ]


def test_trainingjob_printer_columns() -> None:
    assert _columns("TrainingJob") == [
        ("Stage", ".status.stage", 0),
        ("Size", ".status.currentSize", 0),
        ("Min", ".spec.minSize", 0),
        ("Max", ".spec.maxSize", 0),
        ("Priority", ".spec.priority", 0),
        ("Position", ".status.queuePosition", 1),
        ("Age", ".metadata.creationTimestamp", 0),
    ]


@pytest.mark.parametrize("kind", ["MPIJob", "MXJob", "TrainJob"])
def test_kubeflow_printer_columns(kind: str) -> None:
    assert _columns(kind) == [
        ("State", ".status.conditions[-1:].type", 0),
        ("Stage", ".status.lattice.stage", 0),
        ("Size", ".status.lattice.currentSize", 0),
        ("Min", ".status.lattice.minSize", 1),
        ("Max", ".status.lattice.maxSize", 1),
        ("Priority", ".status.lattice.priority", 1),
        ("Position", ".status.lattice.queuePosition", 1),
        ("Age", ".metadata.creationTimestamp", 0),
    ]


def test_main_writes_every_file_and_check_passes(tmp_path: Path) -> None:
    assert main(["--output-dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(render_manifests())
    assert main(["--output-dir", str(tmp_path), "--check"]) == 0
    assert stale_files(tmp_path) == []


def test_check_lists_changed_missing_and_unexpected_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--output-dir", str(tmp_path)])
    capsys.readouterr()
    (tmp_path / FILES[0]).write_text("stale\n", encoding="utf-8")
    (tmp_path / FILES[1]).unlink()
    (tmp_path / "old_kind.yaml").write_text("x: 1\n", encoding="utf-8")
    assert main(["--output-dir", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    for name in (FILES[0], FILES[1], "old_kind.yaml"):
        assert name in err
    assert FILES[2] not in err
    assert (tmp_path / FILES[0]).read_text(encoding="utf-8") == "stale\n"


def test_output_is_an_alias_of_output_dir(tmp_path: Path) -> None:
    assert main(["--output", str(tmp_path / "out")]) == 0
    assert stale_files(tmp_path / "out") == []


def test_check_against_the_committed_directory_passes() -> None:
    assert stale_files(CRD_DIR) == []


@pytest.mark.parametrize("name", FILES)
def test_crd_fits_client_side_apply_and_etcd(name: str) -> None:
    """kubectl's client-side apply stores the object as JSON in an annotation, and the apiserver
    caps all annotations at 256 KiB; etcd caps an object at 1.5 MiB. Keep headroom for both."""
    compact = json.dumps(_load(name), separators=(",", ":"))
    assert len(compact) < 200_000, f"{name}: {len(compact)} bytes as JSON"
