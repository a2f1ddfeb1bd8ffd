"""Every example parses, round-trips, and agrees with the CRD schema and its defaults."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.api import (
    ClusterTrainingRuntime,
    MPIJob,
    MXJob,
    TrainingJob,
    TrainingRuntime,
    TrainJob,
)
from lattice.api.base import K8sModel
from lattice.api.crd import DESCRIPTORS, render_crds
from tests.unit.api.offline import apply_defaults, crd_schema, load_yaml, schema_errors

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").rglob("*.yaml"))
MODELS: dict[str, type[K8sModel]] = {
    "TrainingJob": TrainingJob,
    "MPIJob": MPIJob,
    "MXJob": MXJob,
    "TrainJob": TrainJob,
    "TrainingRuntime": TrainingRuntime,
    "ClusterTrainingRuntime": ClusterTrainingRuntime,
}
SCHEMAS = {d.resource.kind: crd_schema(load_yaml(render_crds()[d.file_name])) for d in DESCRIPTORS}
# Defaults the operator applies but the schema cannot express (they depend on the map key).
OPERATOR_SIDE = re.compile(r"spec\.mpiReplicaSpecs\.(Launcher|Worker)\.(replicas|restartPolicy)")
POD_TEMPLATE_LEAF = re.compile(r"template\.spec\.(init)?[cC]ontainers\[")

DOCS = [
    (f"{p.relative_to(REPO)}#{i}", doc)
    for p in EXAMPLES
    for i, doc in enumerate(yaml.safe_load_all(p.read_text()))
    if doc
]


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(_leaves(item, f"{path}[{index}]"))
        return out
    return {path: value}


def test_there_is_an_example_of_every_kind_and_the_required_files() -> None:
    assert {doc["kind"] for _, doc in DOCS} == set(MODELS)
    for name in (
        "trainingjob/simple.yaml",
        "mpijob/pi.yaml",
        "mxjob/mxjob-dist.yaml",
        "mxjob/mxjob-byteps.yaml",
        "trainjob/torch-distributed-runtime.yaml",
        "trainjob/mpi-distributed-runtime.yaml",
        "trainjob/trainjob-torch.yaml",
        "trainjob/trainjob-mpi.yaml",
        "trainjob/training-runtime.yaml",
    ):
        assert (REPO / "examples" / name).is_file(), name
    assert all("namespace" not in doc["metadata"] for _, doc in DOCS)


@pytest.mark.parametrize(("where", "doc"), DOCS, ids=[w for w, _ in DOCS])
def test_example_round_trips_without_losing_a_field(where: str, doc: dict[str, Any]) -> None:
    model = MODELS[doc["kind"]].model_validate(doc)
    dumped = model.to_dict()
    original = _leaves(doc)
    assert {k: v for k, v in _leaves(dumped).items() if k in original} == original
    assert MODELS[doc["kind"]].model_validate(dumped) == model
    assert MODELS[doc["kind"]].model_validate(dumped).to_dict() == dumped


@pytest.mark.parametrize(("where", "doc"), DOCS, ids=[w for w, _ in DOCS])
def test_example_passes_the_generated_schema(where: str, doc: dict[str, Any]) -> None:
    schema = SCHEMAS[doc["kind"]]
    assert schema_errors(apply_defaults(doc, schema), schema) == []


@pytest.mark.parametrize(("where", "doc"), DOCS, ids=[w for w, _ in DOCS])
def test_model_defaults_match_schema_defaults(where: str, doc: dict[str, Any]) -> None:
    """What the apiserver stores (schema defaults) is what the model reads, key for key."""
    server = _leaves(apply_defaults(doc, SCHEMAS[doc["kind"]]))
    model = _leaves(MODELS[doc["kind"]].model_validate(doc).to_dict())
    # Kubernetes' own defaults inside a pod template (a port's protocol TCP) are the pod API's:
    # the model keeps templates as written, and pods get the same defaults when created.
    kube_defaults = {k for k in set(server) - set(model) if POD_TEMPLATE_LEAF.search(k)}
    assert all(k.endswith(".protocol") for k in kube_defaults), sorted(kube_defaults)
    server = {k: v for k, v in server.items() if k not in kube_defaults}
    assert {k: v for k, v in model.items() if k in server} == server
    assert all(OPERATOR_SIDE.fullmatch(k) for k in set(model) - set(server)), sorted(
        set(model) - set(server)
    )
