"""The generated CRDs on a real kube-apiserver: they install, examples apply, bad input is refused.

Every case in ``INVALID_MANIFESTS`` is applied with ``kubectl apply`` exactly as a user would, and
the server's message must name the field and the rule.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.invalid_manifests import (
    INVALID_MANIFESTS,
    INVALID_UPDATES,
    InvalidCase,
    InvalidUpdateCase,
)
from tests.support.cluster import REPO, Cluster, KubectlError
from tests.support.wait import wait_for

CRD_DIR = REPO / "deploy" / "crds"
EXAMPLES = sorted((REPO / "examples").rglob("*.yaml"))


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> Cluster:
    """Install the CRDs once and wait until the apiserver serves every one of them."""
    cluster.kubectl("apply", "-k", str(CRD_DIR))
    names = [
        yaml.safe_load(p.read_text())["metadata"]["name"]
        for p in sorted(CRD_DIR.glob("*.yaml"))
        if p.name != "kustomization.yaml"
    ]
    cluster.wait_crds_established(names)
    return cluster


def test_every_generated_crd_installs_with_kubectl_apply(crds: Cluster) -> None:
    served = crds.get_json("crd", "-l", "!nonexistent-label")
    names = {item["metadata"]["name"] for item in served["items"]}
    assert {
        "trainingjobs.breezeml.ai",
        "mpijobs.kubeflow.org",
        "mxjobs.kubeflow.org",
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    } <= names
    # short names and the category resolve through discovery
    for short in ("tj", "mpij", "mxj", "tjob"):
        crds.kubectl("get", short, "-A")
    crds.kubectl("get", "lattice", "-A")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("example", EXAMPLES, ids=[str(p.relative_to(REPO)) for p in EXAMPLES])
def test_example_applies_unchanged(crds: Cluster, namespace: str, example: Path) -> None:
    out = crds.kubectl("apply", "-n", namespace, "-f", str(example))
    for doc in _docs(example):
        kind = doc["kind"]
        name = doc["metadata"]["name"]
        assert f"{name} created" in out or f"{name} configured" in out or f"{name} unchanged" in out
        scope = [] if kind == "ClusterTrainingRuntime" else ["-n", namespace]
        got = crds.get_json(kind.lower(), name, *scope)
        assert got["spec"], f"{kind}/{name} stored with an empty spec"
    for doc in _docs(example):
        if doc["kind"] == "ClusterTrainingRuntime":
            crds.kubectl(
                "delete", "clustertrainingruntime", doc["metadata"]["name"], "--wait=false"
            )


def test_kinds_cover_every_crd() -> None:
    kinds = {doc["kind"] for p in EXAMPLES for doc in _docs(p)}
    assert {
        "TrainingJob",
        "MPIJob",
        "MXJob",
        "TrainJob",
        "ClusterTrainingRuntime",
        "TrainingRuntime",
    } <= kinds


def test_kubectl_get_tj_shows_the_printer_columns(crds: Cluster, namespace: str) -> None:
    crds.apply(REPO / "examples" / "trainingjob" / "simple.yaml", namespace=namespace)
    header = crds.kubectl("get", "tj", "-n", namespace).splitlines()[0].split()
    assert header[:6] == ["NAME", "STAGE", "SIZE", "MIN", "MAX", "PRIORITY"]
    assert header[-1] == "AGE"
    row = crds.kubectl("get", "tj", "-n", namespace, "--no-headers").split()
    assert row[0] == "lattice-simple1"
    assert "2" in row
    assert "4" in row
    wide = crds.kubectl("get", "tj", "-n", namespace, "-o", "wide").splitlines()[0]
    assert "POSITION" in wide


@pytest.mark.parametrize("case", INVALID_MANIFESTS, ids=[c.id for c in INVALID_MANIFESTS])
def test_invalid_manifest_is_rejected_naming_field_and_rule(
    crds: Cluster, namespace: str, case: InvalidCase
) -> None:
    manifest = copy.deepcopy(case.manifest)
    if manifest["kind"] != "ClusterTrainingRuntime":
        manifest.setdefault("metadata", {})["namespace"] = namespace
    with pytest.raises(KubectlError) as err:
        crds.apply(manifest)
    message = err.value.stderr
    for expected in case.expect:
        assert expected in message, f"expected {expected!r} in:\n{message}"


def test_invalid_table_is_large_and_covers_every_kind() -> None:
    assert len(INVALID_MANIFESTS) >= 25
    kinds = {c.manifest["kind"] for c in INVALID_MANIFESTS}
    assert {
        "TrainingJob",
        "MPIJob",
        "MXJob",
        "TrainJob",
        "TrainingRuntime",
        "ClusterTrainingRuntime",
    } <= kinds
    assert len({c.id for c in INVALID_MANIFESTS}) == len(INVALID_MANIFESTS)


def test_owner_reference_cascade_deletes_children(crds: Cluster, namespace: str) -> None:
    """The garbage collector runs: a pod owned by a deleted custom resource goes away."""
    crds.apply(REPO / "examples" / "trainingjob" / "simple.yaml", namespace=namespace)
    owner = crds.get_json("tj", "lattice-simple1", "-n", namespace)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "owned-pod",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "breezeml.ai/v1",
                    "kind": "TrainingJob",
                    "name": "lattice-simple1",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    crds.apply(pod)
    assert crds.exists("pod", "owned-pod", "-n", namespace)
    crds.kubectl("delete", "tj", "lattice-simple1", "-n", namespace, "--wait=false")
    wait_for(
        lambda: not crds.exists("pod", "owned-pod", "-n", namespace),
        timeout=60,
        what="the owned pod to be garbage-collected",
    )


@pytest.mark.parametrize("case", INVALID_UPDATES, ids=[c.id for c in INVALID_UPDATES])
def test_immutable_fields_refuse_updates(
    crds: Cluster, namespace: str, case: InvalidUpdateCase
) -> None:
    first = copy.deepcopy(case.manifest)
    second = copy.deepcopy(case.updated)
    for m in (first, second):
        m.setdefault("metadata", {})["namespace"] = namespace
    crds.apply(first)
    with pytest.raises(KubectlError) as err:
        crds.apply(second)
    for expected in case.expect:
        assert expected in err.value.stderr, f"expected {expected!r} in:\n{err.value.stderr}"
