"""Every official runtime and example of Trainer v2.0-v2.3, mpi-operator v0.8 and
training-operator v1.7 (MPIJob, MXJob) applies unchanged, and parses into the models.

The upstream files are not in this repository: ``make upstream-manifests`` copies them from local
git mirrors into ``$LATTICE_UPSTREAM_MANIFESTS`` (``tests/upstream/upstream_manifests.py``).
Without that directory the corpus test fails, saying so; files upstream's own CRDs refuse are
listed, with the reason, in ``upstream_manifests.EXCLUDED``, and must be refused by ours too.
Each document of a kind Lattice serves is applied with ``kubectl apply --dry-run=server``
(schema, defaults and CEL rules all run).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from lattice.api import ClusterTrainingRuntime, MPIJob, MXJob, TrainingRuntime, TrainJob
from tests.support.cluster import Cluster, KubectlError
from tests.upstream.upstream_manifests import EXCLUDED

ROOT = Path(os.environ.get("LATTICE_UPSTREAM_MANIFESTS", "/nonexistent"))
FILES = sorted(ROOT.rglob("*.y*ml")) if ROOT.is_dir() else []
MODELS: dict[str, type[BaseModel]] = {
    "TrainJob": TrainJob,
    "TrainingRuntime": TrainingRuntime,
    "ClusterTrainingRuntime": ClusterTrainingRuntime,
    "MPIJob": MPIJob,
    "MXJob": MXJob,
}


def _ours(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(raw text, parsed) of each document of a kind Lattice serves. The raw text is what is
    applied: PyYAML reads YAML 1.1 (``on`` is a boolean), kubectl does not."""
    text = path.read_text(encoding="utf-8")
    out = []
    for part in re.split(r"^---[ \t]*$", text, flags=re.MULTILINE):
        doc = yaml.safe_load(part)
        if isinstance(doc, dict) and doc.get("kind") in MODELS:
            out.append((part, doc))
    return out


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT)) if ROOT in path.parents else path.name


@pytest.mark.parametrize("path", FILES, ids=[_id(p) for p in FILES])
def test_upstream_manifest_applies_unchanged(
    crds_installed: Cluster, namespace: str, path: Path
) -> None:
    if _id(path) in EXCLUDED:
        # Upstream's own CRD refuses this file (the reason is in EXCLUDED): so must ours.
        for raw, doc in _ours(path):
            ns = [] if doc["kind"] == "ClusterTrainingRuntime" else ["-n", namespace]
            with pytest.raises(KubectlError):
                crds_installed.kubectl("apply", *ns, "--dry-run=server", "-f", "-", stdin=raw)
        return
    for raw, doc in _ours(path):
        ns = [] if doc["kind"] == "ClusterTrainingRuntime" else ["-n", namespace]
        out = crds_installed.kubectl(
            "apply", *ns, "--dry-run=server", "-o", "json", "-f", "-", stdin=raw
        )
        # what the apiserver would store (defaults applied) parses into the model
        MODELS[doc["kind"]].model_validate(json.loads(out))


def test_upstream_corpus_covers_every_kind_and_exclusions_exist() -> None:
    assert FILES, f"no upstream manifests under {ROOT}: run `make upstream-manifests`"
    kinds = {doc["kind"] for p in FILES for _, doc in _ours(p)}
    assert set(MODELS) <= kinds
    present = {_id(p) for p in FILES}
    assert set(EXCLUDED) <= present, "an exclusion names a file that is not copied any more"
