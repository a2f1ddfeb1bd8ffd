"""Manifests the generated CRDs must refuse, and what the apiserver must say about each.

Pure data, no tests: ``tests/integration/test_crds.py`` applies every ``INVALID_MANIFESTS`` case
with ``kubectl apply`` to a real kube-apiserver and checks that the error contains every string in
``expect``; ``tests/unit/api`` checks the table offline (one schema problem at most, CEL messages
that exist in the CRDs). ``INVALID_UPDATES`` holds immutability cases: ``manifest`` is created
first, then ``updated`` must be refused.

Each manifest is a valid one with exactly one thing wrong. ``expect`` holds the field path the
apiserver reports and the rule's message. The apiserver formats errors as:

- schema errors: ``spec.minSize: Invalid value: 0: spec.minSize in body should be greater than or
  equal to 1``; enums: ``...: Unsupported value: "X": supported values: ...``; missing fields:
  ``spec.x: Required value``; wrong types: ``spec.x in body must be of type integer: "..."``;
  the path of an array item is dotted (``replicatedJobs.0.name``);
- CEL rules: ``<path>: Invalid value: "<type>": <message>`` where the path is the node carrying
  the rule plus its ``fieldPath``; map entries print as ``mpiReplicaSpecs[Worker]``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["INVALID_MANIFESTS", "INVALID_UPDATES", "InvalidCase", "InvalidUpdateCase", "valid"]


@dataclass(frozen=True)
class InvalidCase:
    """A manifest that must be refused on create."""

    id: str
    manifest: dict[str, Any]
    expect: tuple[str, ...]


@dataclass(frozen=True)
class InvalidUpdateCase:
    """``manifest`` is accepted; replacing it with ``updated`` must be refused."""

    id: str
    manifest: dict[str, Any]
    updated: dict[str, Any]
    expect: tuple[str, ...]


def _container(name: str = "main", image: str = "busybox:1.36") -> dict[str, Any]:
    return {"name": name, "image": image, "command": ["sh", "-c", "true"]}


def _pod_template(name: str = "main") -> dict[str, Any]:
    return {"spec": {"containers": [_container(name)]}}


def _trainingjob() -> dict[str, Any]:
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": "tj"},
        "spec": {
            "minSize": 1,
            "maxSize": 2,
            "replicaSpecs": {"template": _pod_template("trainingjob")},
        },
    }


def _mpijob() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "mpij"},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _pod_template("launcher")},
                "Worker": {"replicas": 2, "template": _pod_template("worker")},
            },
        },
    }


def _mxjob() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": "mxj"},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "Scheduler": {"replicas": 1, "template": _pod_template("mxnet")},
                "Server": {"replicas": 1, "template": _pod_template("mxnet")},
                "Worker": {"replicas": 1, "template": _pod_template("mxnet")},
            },
        },
    }


def _trainjob() -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tjob"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2},
        },
    }


def _runtime(kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": {"name": "rt"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": _pod_template("node")}},
                        }
                    ]
                }
            },
        },
    }


_BASES: dict[str, Callable[[], dict[str, Any]]] = {
    "TrainingJob": _trainingjob,
    "MPIJob": _mpijob,
    "MXJob": _mxjob,
    "TrainJob": _trainjob,
    "TrainingRuntime": lambda: _runtime("TrainingRuntime"),
    "ClusterTrainingRuntime": lambda: _runtime("ClusterTrainingRuntime"),
}


def valid(kind: str, name: str = "") -> dict[str, Any]:
    """A fresh, valid manifest of ``kind`` (the base every invalid case mutates)."""
    manifest = _BASES[kind]()
    if name:
        manifest["metadata"]["name"] = name
    return manifest


def _set(manifest: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set a dotted path (``spec.a.b``; ``[i]`` indexes or appends to lists); ``...`` deletes."""
    node: Any = manifest
    parts = path.replace("[", ".[").split(".")
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
    last = parts[-1]
    if value is ...:
        del node[last]
    elif last.startswith("["):
        index = int(last[1:-1])
        if index == len(node):
            node.append(value)
        else:
            node[index] = value
    else:
        node[last] = value
    return manifest


def _case(
    case_id: str, kind: str, changes: dict[str, Any], *expect: str, name: str = ""
) -> InvalidCase:
    manifest = valid(kind, name or f"invalid-{case_id}")
    for path, value in changes.items():
        _set(manifest, path, copy.deepcopy(value))
    return InvalidCase(id=case_id, manifest=manifest, expect=expect)


_NO_CONTAINERS = "template.spec.containers must contain at least one container"

INVALID_MANIFESTS: list[InvalidCase] = [
    # ------------------------------------------------------------------ TrainingJob
    _case(
        "tj-min-greater-than-max",
        "TrainingJob",
        {"spec.minSize": 3, "spec.maxSize": 2},
        "spec.minSize",
        "spec.minSize must be less than or equal to spec.maxSize",
    ),
    _case(
        "tj-min-size-only-above-default-max",
        "TrainingJob",
        {"spec.minSize": 2, "spec.maxSize": ...},
        "spec.minSize",
        "spec.minSize must be less than or equal to spec.maxSize",
    ),
    _case(
        "tj-min-size-zero",
        "TrainingJob",
        {"spec.minSize": 0},
        "spec.minSize",
        "spec.minSize in body should be greater than or equal to 1",
    ),
    _case(
        "tj-negative-min-size",
        "TrainingJob",
        {"spec.minSize": -1},
        "spec.minSize",
        "spec.minSize in body should be greater than or equal to 1",
    ),
    _case(
        "tj-priority-too-high",
        "TrainingJob",
        {"spec.priority": 2_000_000_000},
        "spec.priority",
        "spec.priority in body should be less than or equal to 1000000000",
    ),
    _case(
        "tj-priority-too-low",
        "TrainingJob",
        {"spec.priority": -2_000_000},
        "spec.priority",
        "spec.priority in body should be greater than or equal to -1000000",
    ),
    _case(
        "tj-no-containers",
        "TrainingJob",
        {"spec.replicaSpecs.template.spec.containers": []},
        "spec.replicaSpecs.template.spec.containers",
        _NO_CONTAINERS,
    ),
    _case(
        "tj-template-without-spec",
        "TrainingJob",
        {"spec.replicaSpecs.template": {"metadata": {"labels": {"a": "b"}}}},
        "spec.replicaSpecs.template.spec.containers",
        _NO_CONTAINERS,
    ),
    _case(
        "tj-unknown-clean-pod-policy",
        "TrainingJob",
        {"spec.runPolicy": {"cleanPodPolicy": "Sometimes"}},
        "spec.runPolicy.cleanPodPolicy",
        'Unsupported value: "Sometimes"',
    ),
    _case(
        "tj-unknown-restart-policy",
        "TrainingJob",
        {"spec.replicaSpecs.restartPolicy": "Sometimes"},
        "spec.replicaSpecs.restartPolicy",
        'Unsupported value: "Sometimes"',
    ),
    _case(
        "tj-unknown-framework",
        "TrainingJob",
        {"spec.framework": "jax"},
        "spec.framework",
        'Unsupported value: "jax"',
    ),
    _case(
        "tj-min-size-is-a-string",
        "TrainingJob",
        {"spec.minSize": "two"},
        "spec.minSize",
        "spec.minSize in body must be of type integer",
    ),
    _case(
        "tj-missing-replica-specs",
        "TrainingJob",
        {"spec.replicaSpecs": ...},
        "spec.replicaSpecs: Required value",
    ),
    # ------------------------------------------------------------------ MPIJob
    _case(
        "mpi-two-launchers",
        "MPIJob",
        {"spec.mpiReplicaSpecs.Launcher.replicas": 2},
        "spec.mpiReplicaSpecs",
        "spec.mpiReplicaSpecs.Launcher.replicas must be 1",
    ),
    _case(
        "mpi-missing-launcher",
        "MPIJob",
        {"spec.mpiReplicaSpecs.Launcher": ...},
        "spec.mpiReplicaSpecs: Required value",
        "spec.mpiReplicaSpecs must have a Launcher replica spec",
    ),
    _case(
        "mpi-unknown-replica-type",
        "MPIJob",
        {
            "spec.mpiReplicaSpecs.Worker": ...,
            "spec.mpiReplicaSpecs.Server": {"replicas": 1, "template": _pod_template()},
        },
        "spec.mpiReplicaSpecs",
        "spec.mpiReplicaSpecs may only contain the replica types Launcher and Worker",
    ),
    _case(
        "mpi-slots-per-worker-zero",
        "MPIJob",
        {"spec.slotsPerWorker": 0},
        "spec.slotsPerWorker",
        "spec.slotsPerWorker in body should be greater than or equal to 1",
    ),
    _case(
        "mpi-unknown-implementation",
        "MPIJob",
        {"spec.mpiImplementation": "Foo"},
        "spec.mpiImplementation",
        'Unsupported value: "Foo"',
    ),
    _case(
        "mpi-unknown-launcher-creation-policy",
        "MPIJob",
        {"spec.launcherCreationPolicy": "Later"},
        "spec.launcherCreationPolicy",
        'Unsupported value: "Later"',
    ),
    _case(
        "mpi-unknown-clean-pod-policy",
        "MPIJob",
        {"spec.runPolicy": {"cleanPodPolicy": "Sometimes"}},
        "spec.runPolicy.cleanPodPolicy",
        'Unsupported value: "Sometimes"',
    ),
    _case(
        "mpi-negative-workers",
        "MPIJob",
        {"spec.mpiReplicaSpecs.Worker.replicas": -1},
        "spec.mpiReplicaSpecs.Worker.replicas",
        "replicas in body should be greater than or equal to 0",
    ),
    _case(
        "mpi-worker-without-containers",
        "MPIJob",
        {"spec.mpiReplicaSpecs.Worker.template.spec.containers": []},
        "spec.mpiReplicaSpecs[Worker].template.spec.containers",
        _NO_CONTAINERS,
    ),
    _case(
        "mpi-restart-policy-always",
        "MPIJob",
        {"spec.mpiReplicaSpecs.Worker.restartPolicy": "Always"},
        "spec.mpiReplicaSpecs",
        "spec.mpiReplicaSpecs restartPolicy must be Never or OnFailure",
    ),
    _case(
        "mpi-unknown-restart-policy",
        "MPIJob",
        {"spec.mpiReplicaSpecs.Launcher.restartPolicy": "Sometimes"},
        "spec.mpiReplicaSpecs.Launcher.restartPolicy",
        'Unsupported value: "Sometimes"',
    ),
    _case(
        "mpi-wrong-managed-by",
        "MPIJob",
        {"spec.runPolicy": {"managedBy": "kubeflow.org/training-operator"}},
        "spec.runPolicy.managedBy",
        "spec.runPolicy.managedBy must be kubeflow.org/mpi-operator or kueue.x-k8s.io/multikueue",
    ),
    _case(
        "mpi-worker-hostname-too-long",
        "MPIJob",
        {"spec.mpiReplicaSpecs.Worker.replicas": 11},
        "metadata.name",
        "metadata.name is too long: the worker hostname <name>-worker-<index> must be at most 63 "
        "characters",
        name="mpi-" + "x" * 50,  # 54 characters: "-worker-9" fits in 63, "-worker-10" does not
    ),
    _case(
        "mpi-name-not-dns-1035",
        "MPIJob",
        {},
        "metadata.name",
        "metadata.name must be a DNS-1035 label",
        name="1-mpi",
    ),
    # ------------------------------------------------------------------ MXJob
    _case(
        "mx-two-schedulers",
        "MXJob",
        {"spec.mxReplicaSpecs.Scheduler.replicas": 2},
        "spec.mxReplicaSpecs",
        "spec.mxReplicaSpecs.Scheduler.replicas must be at most 1",
    ),
    _case(
        "mx-unknown-replica-type",
        "MXJob",
        {"spec.mxReplicaSpecs.Chief": {"replicas": 1, "template": _pod_template("mxnet")}},
        "spec.mxReplicaSpecs",
        "spec.mxReplicaSpecs may only contain the replica types Scheduler, Server, Worker, "
        "TunerTracker, TunerServer, Tuner",
    ),
    _case(
        "mx-replica-type-twice-in-two-cases",
        "MXJob",
        {"spec.mxReplicaSpecs.worker": {"replicas": 1, "template": _pod_template("mxnet")}},
        "spec.mxReplicaSpecs",
        "spec.mxReplicaSpecs must not name a replica type twice",
    ),
    _case(
        "mx-unknown-job-mode",
        "MXJob",
        {"spec.jobMode": "X"},
        "spec.jobMode",
        'Unsupported value: "X"',
    ),
    _case(
        "mx-unknown-restart-policy",
        "MXJob",
        {"spec.mxReplicaSpecs.Server.restartPolicy": "Sometimes"},
        "spec.mxReplicaSpecs.Server.restartPolicy",
        'Unsupported value: "Sometimes"',
    ),
    _case(
        "mx-server-without-containers",
        "MXJob",
        {"spec.mxReplicaSpecs.Server.template": {"spec": {"containers": []}}},
        "spec.mxReplicaSpecs[Server].template.spec.containers",
        _NO_CONTAINERS,
    ),
    _case(
        "mx-wrong-managed-by",
        "MXJob",
        {"spec.runPolicy": {"managedBy": "kubeflow.org/mpi-operator"}},
        "spec.runPolicy.managedBy",
        "spec.runPolicy.managedBy must be kubeflow.org/training-operator or "
        "kueue.x-k8s.io/multikueue",
    ),
    _case(
        "mx-name-not-dns-1035",
        "MXJob",
        {},
        "metadata.name",
        "metadata.name must be a DNS-1035 label",
        name="9-mxnet",
    ),
    # ------------------------------------------------------------------ TrainJob
    _case(
        "tjob-bad-runtime-kind",
        "TrainJob",
        {"spec.runtimeRef.kind": "Runtime"},
        "spec.runtimeRef.kind",
        'Unsupported value: "Runtime"',
    ),
    _case(
        "tjob-empty-runtime-name",
        "TrainJob",
        {"spec.runtimeRef.name": ""},
        "spec.runtimeRef.name",
        "spec.runtimeRef.name in body should be at least 1 chars long",
    ),
    _case(
        "tjob-missing-runtime-ref",
        "TrainJob",
        {"spec.runtimeRef": ...},
        "spec.runtimeRef: Required value",
    ),
    _case(
        "tjob-num-nodes-zero",
        "TrainJob",
        {"spec.trainer.numNodes": 0},
        "spec.trainer.numNodes",
        "spec.trainer.numNodes in body should be greater than or equal to 1",
    ),
    _case(
        "tjob-num-nodes-is-a-string",
        "TrainJob",
        {"spec.trainer.numNodes": "two"},
        "spec.trainer.numNodes",
        "spec.trainer.numNodes in body must be of type integer",
    ),
    _case(
        "tjob-wrong-managed-by",
        "TrainJob",
        {"spec.managedBy": "kubeflow.org/training-operator"},
        "spec.managedBy",
        "spec.managedBy must be trainer.kubeflow.org/trainjob-controller or "
        "kueue.x-k8s.io/multikueue",
    ),
    _case(
        "tjob-name-not-rfc-1035",
        "TrainJob",
        {},
        "metadata.name",
        "metadata.name must match RFC 1035 DNS label format",
        name="9lives",
    ),
    _case(
        "tjob-name-too-long",
        "TrainJob",
        {},
        "metadata.name",
        "metadata.name must be no more than 63 characters",
        name="t" * 64,
    ),
    # ------------------------------------------------------------------ runtimes
    _case(
        "ctr-torch-and-mpi",
        "ClusterTrainingRuntime",
        {"spec.mlPolicy.mpi": {"numProcPerNode": 1}},
        "spec.mlPolicy",
        "only one of mlPolicy.torch, mpi, jax, xgboost and flux may be configured",
    ),
    _case(
        "ctr-num-nodes-with-elastic-policy",
        "ClusterTrainingRuntime",
        {"spec.mlPolicy.torch.elasticPolicy": {"minNodes": 1, "maxNodes": 4}},
        "spec.mlPolicy.numNodes",
        "mlPolicy.numNodes must not be set when mlPolicy.torch.elasticPolicy is configured",
    ),
    _case(
        "tr-elastic-min-greater-than-max",
        "TrainingRuntime",
        {
            "spec.mlPolicy.numNodes": ...,
            "spec.mlPolicy.torch.elasticPolicy": {"minNodes": 4, "maxNodes": 2},
        },
        "spec.mlPolicy.torch.elasticPolicy.minNodes",
        "mlPolicy.torch.elasticPolicy.minNodes must be less than or equal to maxNodes",
    ),
    _case(
        "tr-elastic-min-nodes-zero",
        "TrainingRuntime",
        {
            "spec.mlPolicy.numNodes": ...,
            "spec.mlPolicy.torch.elasticPolicy": {"minNodes": 0, "maxNodes": 2},
        },
        "spec.mlPolicy.torch.elasticPolicy.minNodes",
        "minNodes in body should be greater than or equal to 1",
    ),
    _case(
        "ctr-duplicate-replicated-job-names",
        "ClusterTrainingRuntime",
        {
            "spec.template.spec.replicatedJobs[1]": {
                "name": "node",
                "template": {"spec": {"template": _pod_template("node")}},
            }
        },
        "spec.template.spec.replicatedJobs[1]",
        "Duplicate value",
    ),
    _case(
        "tr-empty-replicated-job-name",
        "TrainingRuntime",
        {"spec.template.spec.replicatedJobs[0].name": ""},
        "spec.template.spec.replicatedJobs",
        "name in body should be at least 1 chars long",
    ),
    _case(
        "ctr-mpi-implementation-intel",
        "ClusterTrainingRuntime",
        {"spec.mlPolicy.torch": ..., "spec.mlPolicy.mpi": {"mpiImplementation": "Intel"}},
        "spec.mlPolicy.mpi.mpiImplementation",
        'Unsupported value: "Intel"',
    ),
    _case(
        "tr-torch-num-proc-per-node-unknown",
        "TrainingRuntime",
        {"spec.mlPolicy.torch.numProcPerNode": "tpu"},
        "spec.mlPolicy.torch.numProcPerNode",
        "mlPolicy.torch.numProcPerNode must be a positive integer or one of auto, cpu, gpu",
    ),
    _case(
        "ctr-unknown-success-policy-operator",
        "ClusterTrainingRuntime",
        {"spec.template.spec.successPolicy": {"operator": "Some"}},
        "spec.template.spec.successPolicy.operator",
        'Unsupported value: "Some"',
    ),
    _case(
        "tr-missing-template",
        "TrainingRuntime",
        {"spec.template": ...},
        "spec.template: Required value",
    ),
]


def _update(case_id: str, kind: str, changes: dict[str, Any], *expect: str) -> InvalidUpdateCase:
    manifest = valid(kind, f"immutable-{case_id}")
    updated = copy.deepcopy(manifest)
    for path, value in changes.items():
        _set(updated, path, copy.deepcopy(value))
    return InvalidUpdateCase(id=case_id, manifest=manifest, updated=updated, expect=expect)


INVALID_UPDATES: list[InvalidUpdateCase] = [
    _update(
        "tjob-runtime-ref-changed",
        "TrainJob",
        {"spec.runtimeRef.name": "mpi-distributed"},
        "spec.runtimeRef",
        "spec.runtimeRef is immutable",
    ),
    _update(
        "tjob-managed-by-changed",
        "TrainJob",
        {"spec.managedBy": "kueue.x-k8s.io/multikueue"},
        "spec.managedBy",
        "spec.managedBy is immutable",
    ),
    _update(
        "mpi-managed-by-set-later",
        "MPIJob",
        {"spec.runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}},
        "spec.runPolicy.managedBy",
        "spec.runPolicy.managedBy is immutable",
    ),
    _update(
        "mx-managed-by-set-later",
        "MXJob",
        {"spec.runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}},
        "spec.runPolicy.managedBy",
        "spec.runPolicy.managedBy is immutable",
    ),
]
