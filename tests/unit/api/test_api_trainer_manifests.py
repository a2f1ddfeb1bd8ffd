"""Our Trainer v2.0-v2.3 manifests, offline: they pass the generated schemas, round-trip through
the models, cover the official runtime shapes and together set every field of the TrainJob and
runtime APIs; and every pod-template typo of the integration corpus is refused by the schema."""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lattice.api import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from lattice.api.base import K8sModel
from lattice.api.crd import DESCRIPTORS, render_crds
from lattice.api.runtime import TrainingRuntimeSpec
from lattice.api.trainjob import TrainJobSpec
from tests.integration.pod_template_typos import POD_TEMPLATE_TYPOS, TypoCase
from tests.unit.api.offline import apply_defaults, crd_schema, load_yaml, schema_errors

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = sorted((REPO / "tests" / "integration" / "manifests").glob("*.yaml"))


def _load_all(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    return [d for d in (load_yaml(part) for part in re.split(r"^---$", text, flags=re.M)) if d]


DOCS = [(f"{p.name}#{d['metadata']['name']}", d) for p in MANIFESTS for d in _load_all(p)]
MODELS: dict[str, type[K8sModel]] = {
    "TrainJob": TrainJob,
    "TrainingRuntime": TrainingRuntime,
    "ClusterTrainingRuntime": ClusterTrainingRuntime,
}
SCHEMAS = {d.resource.kind: crd_schema(load_yaml(render_crds()[d.file_name])) for d in DESCRIPTORS}
# The official runtime and example shapes (issue 23), and the manifest that has each.
SHAPES = {
    "torch": "lt-torch",
    "DeepSpeed": "lt-deepspeed",
    "MLX": "lt-mlx",
    "JAX": "lt-jax",
    "XGBoost": "lt-xgboost",
    "Flux": "lt-flux",
    "torchtune": "lt-torchtune-small",
    "data-cache": "lt-torch-with-cache",
    "multi-step": "lt-multi-step",
    "runtime-patches": "lt-every-field",
    "volcano": "lt-torch-volcano",
}


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(_leaves(item, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


@pytest.mark.parametrize(("where", "doc"), DOCS, ids=[w for w, _ in DOCS])
def test_manifest_passes_the_generated_schema(where: str, doc: dict[str, Any]) -> None:
    schema = SCHEMAS[doc["kind"]]
    assert schema_errors(apply_defaults(doc, schema), schema) == []


@pytest.mark.parametrize(("where", "doc"), DOCS, ids=[w for w, _ in DOCS])
def test_manifest_round_trips_through_the_model(where: str, doc: dict[str, Any]) -> None:
    model = MODELS[doc["kind"]].model_validate(doc)
    dumped = _leaves(model.to_dict())
    # an empty object written ({}) may come back filled with its schema defaults
    lost = {
        k: v
        for k, v in _leaves(doc).items()
        if dumped.get(k) != v and not (v == {} and any(d.startswith(f"{k}.") for d in dumped))
    }
    assert lost == {}
    assert MODELS[doc["kind"]].model_validate(model.to_dict()) == model


def test_every_official_shape_has_a_manifest() -> None:
    names = {doc["metadata"]["name"] for _, doc in DOCS}
    assert set(SHAPES.values()) <= names


def _unwrap(tp: Any) -> Iterator[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        yield from _unwrap(typing.get_args(tp)[0])
    elif origin in (typing.Union, types.UnionType, list, dict):
        for arg in typing.get_args(tp):
            yield from _unwrap(arg)
    else:
        yield tp


def _field_paths(model: type[BaseModel], prefix: str) -> Iterator[str]:
    """Wire paths of every field, through nested models (embedded Kubernetes types stop)."""
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}"
        nested = [t for t in _unwrap(info.annotation) if isinstance(t, type)]
        models = [t for t in nested if issubclass(t, K8sModel)]
        if models and any(m.model_fields for m in models):
            for sub in models:
                yield from _field_paths(sub, path)
        else:
            yield path


def _set_paths(kinds: set[str]) -> set[str]:
    paths: set[str] = set()
    for _, doc in DOCS:
        if doc["kind"] in kinds:
            for leaf in _leaves(doc["spec"], "spec"):
                parts = re.sub(r"\[\d+\]", "", leaf).split(".")
                paths.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return paths


# Map-valued fields (their keys are data), and the JobSet template's name, namespace and
# finalizers, which are accepted and ignored (the JobSet takes the TrainJob's).
_MAPS = re.compile(r"\.(labels|annotations|nodeSelector)$|^spec\.template\.metadata\.")


@pytest.mark.parametrize(
    ("model", "kinds"),
    [
        (TrainJobSpec, {"TrainJob"}),
        (TrainingRuntimeSpec, {"TrainingRuntime", "ClusterTrainingRuntime"}),
    ],
    ids=["TrainJob", "runtimes"],
)
def test_manifests_set_every_field(model: type[BaseModel], kinds: set[str]) -> None:
    written = _set_paths(kinds)
    fields = set(_field_paths(model, "spec"))
    missing = sorted(p for p in fields if p not in written and not _MAPS.search(p))
    # Mutually exclusive fields (elasticPolicy and numNodes, volcano and coscheduling) are set
    # by different manifests: the coverage is over all of them.
    assert missing == []


@pytest.mark.parametrize("case", POD_TEMPLATE_TYPOS, ids=[c.id for c in POD_TEMPLATE_TYPOS])
def test_pod_template_typo_fails_the_schema(case: TypoCase) -> None:
    schema = SCHEMAS[case.manifest["kind"]]
    assert schema_errors(apply_defaults(case.manifest, schema), schema) != []
