"""A hostile corpus of our own: absurd, contradictory and malformed manifests of every kind.

Pure data, no tests: ``tests/e2e/test_hostile_corpus.py`` applies every case against one
operator and asserts its outcome (issue 26). Each case is a valid manifest with one hostile
change and the outcome a user must see:

- ``rejected``: ``kubectl apply`` fails and the apiserver's message contains every ``says``;
- ``failed``: the job is accepted, then settles failed (``Failed`` condition or stage ``Wrong``)
  with a reason whose message contains every ``says``;
- ``waiting``: the job is accepted and waits, holding no pod, with a reason containing every
  ``says``.

A job that ends anywhere else (running with no pods, ``Wrong`` without a reason, no stage at
all) is a failure of the test (:mod:`tests.support.settled` is the check). Names are per case;
the test adds nothing but the namespace. The GPU jobs ask for at most what the test's pool
holds unless the case is about sizes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CASES", "FAILED", "REJECTED", "RUNTIME", "WAITING", "Hostile", "base", "set_path"]

REJECTED, FAILED, WAITING = "rejected", "failed", "waiting"
GPU = "nvidia.com/gpu"
PRIORITY = "lattice.breezeml.ai/priority"
#: The namespaced TrainingRuntime every TrainJob case refers to (the test creates it first).
RUNTIME = "hostile-torch"


@dataclass(frozen=True)
class Hostile:
    id: str
    manifest: dict[str, Any]
    outcome: str
    says: tuple[str, ...]


def _container(name: str, *, gpus: int = 0) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox:1.36", "command": ["sh", "-c", "true"]}
    if gpus:
        c["resources"] = {"limits": {GPU: gpus}, "requests": {GPU: gpus}}
    return c


def _template(name: str, *, gpus: int = 0) -> dict[str, Any]:
    return {"spec": {"containers": [_container(name, gpus=gpus)]}}


#: kwok completes a batch Job's pod at once unless the project's stage says otherwise: keep the
#: MPI launcher (a batch Job) running for the length of a test.
_KEEP_RUNNING = {
    "kwok.lattice.breezeml.ai/exit-code": "0",
    "kwok.lattice.breezeml.ai/run-for": "1h",
}


def _trainingjob() -> dict[str, Any]:
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "spec": {
            "minSize": 1,
            "maxSize": 2,
            "replicaSpecs": {"template": _template("trainingjob", gpus=1)},
        },
    }


def _mpijob() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        **_template("launcher"),
                        "metadata": {"annotations": _KEEP_RUNNING},
                    },
                },
                "Worker": {"replicas": 2, "template": _template("worker", gpus=1)},
            },
        },
    }


def _mxjob() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "Scheduler": {"replicas": 1, "template": _template("mxnet")},
                "Server": {"replicas": 1, "template": _template("mxnet")},
                "Worker": {"replicas": 1, "template": _template("mxnet", gpus=1)},
            },
        },
    }


def _trainjob() -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "spec": {
            "runtimeRef": {"name": RUNTIME, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 1, "resourcesPerNode": {"limits": {GPU: 1}}},
        },
    }


def _runtime(kind: str = "TrainingRuntime") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {"template": _template("node")},
                            },
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
    "TrainingRuntime": _runtime,
    "ClusterTrainingRuntime": lambda: _runtime("ClusterTrainingRuntime"),
}
_SHORT = {
    "TrainingJob": "tj",
    "MPIJob": "mpi",
    "MXJob": "mx",
    "TrainJob": "tjob",
    "TrainingRuntime": "tr",
    "ClusterTrainingRuntime": "ctr",
}


def base(kind: str, name: str) -> dict[str, Any]:
    """A fresh valid manifest of ``kind`` named ``name``."""
    manifest = _BASES[kind]()
    manifest["metadata"] = {"name": name}
    return manifest


def set_path(manifest: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path (``[i]`` indexes a list); ``...`` deletes."""
    parts = path.replace("[", ".[").split(".")
    node: Any = manifest
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
    last = parts[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    elif value is ...:
        del node[last]
    else:
        node[last] = value


def _case(
    case_id: str,
    kind: str,
    changes: dict[str, Any],
    outcome: str,
    *says: str,
    name: str = "",
) -> Hostile:
    manifest = base(kind, name or f"h-{_SHORT[kind]}-{case_id}")
    for path, value in changes.items():
        set_path(manifest, path, copy.deepcopy(value))
    return Hostile(id=f"{_SHORT[kind]}-{case_id}", manifest=manifest, outcome=outcome, says=says)


_TJ_C = "spec.replicaSpecs.template.spec.containers"
_MPI_W = "spec.mpiReplicaSpecs.Worker"
_MPI_L = "spec.mpiReplicaSpecs.Launcher"
_MX = "spec.mxReplicaSpecs"
_TR = "spec.template.spec.replicatedJobs"


def _each(kind: str) -> list[Hostile]:
    """Cases every job kind gets: metadata and priority annotations."""
    short = _SHORT[kind]
    if kind == "TrainingJob":  # spec.priority, not the annotation, is its priority
        priorities: list[Hostile] = []
    else:
        priorities = [
            _case(
                "prio-2-40",
                kind,
                {"metadata.annotations": {PRIORITY: str(2**40)}},
                FAILED,
                PRIORITY,
            ),
            _case(
                "prio-neg-2-40",
                kind,
                {"metadata.annotations": {PRIORITY: str(-(2**40))}},
                FAILED,
                PRIORITY,
            ),
            _case(
                "prio-text", kind, {"metadata.annotations": {PRIORITY: "high"}}, FAILED, PRIORITY
            ),
        ]
    return [
        *priorities,
        _case(
            "bad-label",
            kind,
            {"metadata.labels": {"team": "a b!"}},
            REJECTED,
            "metadata.labels",
        ),
        _case(
            "bad-annotation-key",
            kind,
            {"metadata.annotations": {"not a key": "x"}},
            REJECTED,
            "metadata.annotations",
        ),
        _case(
            "huge-annotation",
            kind,
            {"metadata.annotations": {"big": "x" * 300_000}},
            REJECTED,
            "metadata.annotations",
        ),
        _case(
            "bad-label-key",
            kind,
            {"metadata.labels": {"-bad/key-": "x"}},
            REJECTED,
            "metadata.labels",
        ),
        _case("huge-name", kind, {}, REJECTED, "metadata.name", name=f"h-{short}-" + "n" * 250),
        _case("unknown-field", kind, {"spec.fooBar": 1}, REJECTED, "spec.fooBar"),
        _case("spec-is-a-list", kind, {"spec": [1, 2]}, REJECTED, "spec"),
    ]


CASES: list[Hostile] = [
    # ------------------------------------------------------------------ TrainingJob
    *_each("TrainingJob"),
    _case(
        "min-gt-max",
        "TrainingJob",
        {"spec.minSize": 5, "spec.maxSize": 2},
        REJECTED,
        "spec.minSize",
    ),
    _case("min-zero", "TrainingJob", {"spec.minSize": 0}, REJECTED, "spec.minSize"),
    _case("min-negative", "TrainingJob", {"spec.minSize": -7}, REJECTED, "spec.minSize"),
    _case("max-huge", "TrainingJob", {"spec.maxSize": 10**9}, REJECTED, "spec.maxSize"),
    _case("max-2-63", "TrainingJob", {"spec.maxSize": 2**63 - 1}, REJECTED, "spec.maxSize"),
    _case("min-float", "TrainingJob", {"spec.minSize": 1.5}, REJECTED, "spec.minSize"),
    _case("prio-spec-2-40", "TrainingJob", {"spec.priority": 2**40}, REJECTED, "spec.priority"),
    _case("prio-spec-neg", "TrainingJob", {"spec.priority": -(2**40)}, REJECTED, "spec.priority"),
    _case("no-containers", "TrainingJob", {_TJ_C: []}, REJECTED, _TJ_C),
    _case(
        "no-replica-specs", "TrainingJob", {"spec.replicaSpecs": ...}, REJECTED, "spec.replicaSpecs"
    ),
    _case("container-unnamed", "TrainingJob", {f"{_TJ_C}[0].name": ...}, REJECTED, "name"),
    _case(
        "container-wrong-name",
        "TrainingJob",
        {f"{_TJ_C}[0].name": "main"},
        FAILED,
        f"{_TJ_C}[0].name",
    ),
    _case(
        "restart-sometimes",
        "TrainingJob",
        {"spec.replicaSpecs.restartPolicy": "Sometimes"},
        REJECTED,
        "spec.replicaSpecs.restartPolicy",
    ),
    _case(
        "clean-sometimes",
        "TrainingJob",
        {"spec.runPolicy.cleanPodPolicy": "Sometimes"},
        REJECTED,
        "spec.runPolicy.cleanPodPolicy",
    ),
    _case("framework-jax", "TrainingJob", {"spec.framework": "jax"}, REJECTED, "spec.framework"),
    _case(
        "deadline-negative",
        "TrainingJob",
        {"spec.runPolicy.activeDeadlineSeconds": -1},
        REJECTED,
        "spec.runPolicy.activeDeadlineSeconds",
    ),
    _case(
        "backoff-negative",
        "TrainingJob",
        {"spec.runPolicy.backoffLimit": -3},
        REJECTED,
        "spec.runPolicy.backoffLimit",
    ),
    _case(
        "ttl-negative",
        "TrainingJob",
        {"spec.runPolicy.ttlSecondsAfterFinished": -1},
        REJECTED,
        "spec.runPolicy.ttlSecondsAfterFinished",
    ),
    _case(
        "replicas-negative",
        "TrainingJob",
        {"spec.replicaSpecs.replicas": -1},
        REJECTED,
        "spec.replicaSpecs.replicas",
    ),
    _case(
        "gpu-negative",
        "TrainingJob",
        {f"{_TJ_C}[0].resources": {"limits": {GPU: -1}, "requests": {GPU: -1}}},
        FAILED,
        f"{_TJ_C}[0].resources",
    ),
    _case(
        "gpu-2-40",
        "TrainingJob",
        {f"{_TJ_C}[0].resources": {"limits": {GPU: 2**40}, "requests": {GPU: 2**40}}},
        WAITING,
        "Waiting",
    ),
    _case(
        "gpu-fraction",
        "TrainingJob",
        {f"{_TJ_C}[0].resources": {"limits": {GPU: "500m"}, "requests": {GPU: "500m"}}},
        FAILED,
        GPU,
    ),
    _case(
        "gpu-garbage",
        "TrainingJob",
        {f"{_TJ_C}[0].resources": {"limits": {GPU: "lots"}}},
        REJECTED,
        "resources",
    ),
    _case(
        "cpu-negative",
        "TrainingJob",
        {f"{_TJ_C}[0].resources": {"requests": {"cpu": "-2"}}},
        FAILED,
        f"{_TJ_C}[0].resources",
    ),
    _case(
        "memory-exabytes",
        "TrainingJob",
        {f"{_TJ_C}[0].resources": {"requests": {"memory": "900Ei"}}},
        WAITING,
        "Waiting",
    ),
    _case(
        "min-size-huge",
        "TrainingJob",
        {"spec.minSize": 100_000, "spec.maxSize": 100_000},
        WAITING,
        "Waiting",
    ),
    _case(
        "min-size-absurd",
        "TrainingJob",
        {"spec.minSize": 5000, "spec.maxSize": 5000},
        WAITING,
        "Waiting",
    ),
    _case(
        "inject-no-command",
        "TrainingJob",
        {"spec.injectLattice": True, f"{_TJ_C}[0].command": ...},
        FAILED,
        f"{_TJ_C}[0].command",
    ),
    _case(
        "node-selector-nowhere",
        "TrainingJob",
        {"spec.replicaSpecs.template.spec.nodeSelector": {"no.such/label": "x"}},
        WAITING,
        "node",
    ),
    _case(
        "long-name-services", "TrainingJob", {}, FAILED, "metadata.name", name="h-tj-" + "l" * 58
    ),
    # ------------------------------------------------------------------ MPIJob
    *_each("MPIJob"),
    _case("two-launchers", "MPIJob", {f"{_MPI_L}.replicas": 2}, REJECTED, "spec.mpiReplicaSpecs"),
    _case("no-launcher", "MPIJob", {_MPI_L: ...}, REJECTED, "spec.mpiReplicaSpecs"),
    _case(
        "replica-key-server",
        "MPIJob",
        {"spec.mpiReplicaSpecs.Server": {"replicas": 1, "template": _template("s")}},
        REJECTED,
        "spec.mpiReplicaSpecs",
    ),
    _case(
        "replica-key-lowercase",
        "MPIJob",
        {"spec.mpiReplicaSpecs.worker": {"replicas": 1, "template": _template("w")}},
        REJECTED,
        "spec.mpiReplicaSpecs",
    ),
    _case("slots-zero", "MPIJob", {"spec.slotsPerWorker": 0}, REJECTED, "spec.slotsPerWorker"),
    _case("slots-2-40", "MPIJob", {"spec.slotsPerWorker": 2**40}, REJECTED, "spec.slotsPerWorker"),
    _case(
        "impl-foo", "MPIJob", {"spec.mpiImplementation": "Foo"}, REJECTED, "spec.mpiImplementation"
    ),
    _case("workers-negative", "MPIJob", {f"{_MPI_W}.replicas": -1}, REJECTED, "replicas"),
    _case("workers-2-40", "MPIJob", {f"{_MPI_W}.replicas": 2**40}, REJECTED, "replicas"),
    _case("workers-absurd", "MPIJob", {f"{_MPI_W}.replicas": 5000}, WAITING, "Waiting"),
    _case(
        "worker-no-containers",
        "MPIJob",
        {f"{_MPI_W}.template.spec.containers": []},
        REJECTED,
        "containers",
    ),
    _case(
        "restart-always", "MPIJob", {f"{_MPI_W}.restartPolicy": "Always"}, REJECTED, "restartPolicy"
    ),
    _case(
        "restart-sometimes",
        "MPIJob",
        {f"{_MPI_L}.restartPolicy": "Sometimes"},
        REJECTED,
        "restartPolicy",
    ),
    _case(
        "clean-sometimes",
        "MPIJob",
        {"spec.runPolicy.cleanPodPolicy": "Sometimes"},
        REJECTED,
        "spec.runPolicy.cleanPodPolicy",
    ),
    _case(
        "managed-by-other",
        "MPIJob",
        {"spec.runPolicy.managedBy": "someone/else"},
        REJECTED,
        "spec.runPolicy.managedBy",
    ),
    _case(
        "backoff-negative",
        "MPIJob",
        {"spec.runPolicy.backoffLimit": -1},
        REJECTED,
        "spec.runPolicy.backoffLimit",
    ),
    _case(
        "gpu-negative",
        "MPIJob",
        {f"{_MPI_W}.template.spec.containers[0].resources": {"limits": {GPU: -4}}},
        FAILED,
        "resources",
    ),
    _case(
        "gpu-2-40",
        "MPIJob",
        {f"{_MPI_W}.template.spec.containers[0].resources": {"limits": {GPU: 2**40}}},
        WAITING,
        "Waiting",
    ),
    _case("name-not-dns", "MPIJob", {}, REJECTED, "metadata.name", name="9-h-mpi"),
    _case(
        "hostname-too-long",
        "MPIJob",
        {f"{_MPI_W}.replicas": 11},
        REJECTED,
        "metadata.name",
        name="h-mpi-" + "x" * 48,
    ),
    _case(
        "node-selector-nowhere",
        "MPIJob",
        {f"{_MPI_W}.template.spec.nodeSelector": {"no.such/label": "x"}},
        WAITING,
        "node",
    ),
    # ------------------------------------------------------------------ MXJob
    *_each("MXJob"),
    _case("two-schedulers", "MXJob", {f"{_MX}.Scheduler.replicas": 2}, REJECTED, _MX),
    _case(
        "replica-key-chief",
        "MXJob",
        {f"{_MX}.Chief": {"replicas": 1, "template": _template("mxnet")}},
        REJECTED,
        _MX,
    ),
    _case(
        "replica-key-twice",
        "MXJob",
        {f"{_MX}.worker": {"replicas": 1, "template": _template("mxnet")}},
        REJECTED,
        _MX,
    ),
    _case("job-mode-x", "MXJob", {"spec.jobMode": "MXMagic"}, REJECTED, "spec.jobMode"),
    _case(
        "restart-sometimes",
        "MXJob",
        {f"{_MX}.Server.restartPolicy": "Sometimes"},
        REJECTED,
        "restartPolicy",
    ),
    _case(
        "server-no-containers",
        "MXJob",
        {f"{_MX}.Server.template.spec.containers": []},
        REJECTED,
        "containers",
    ),
    _case(
        "no-mxnet-container",
        "MXJob",
        {f"{_MX}.Worker.template.spec.containers[0].name": "main"},
        FAILED,
        "mxnet",
    ),
    _case(
        "no-image",
        "MXJob",
        {f"{_MX}.Worker.template.spec.containers[0].image": ...},
        FAILED,
        "image",
    ),
    _case(
        "all-zero",
        "MXJob",
        {f"{_MX}.Scheduler.replicas": 0, f"{_MX}.Server.replicas": 0, f"{_MX}.Worker.replicas": 0},
        FAILED,
        _MX,
    ),
    _case("workers-absurd", "MXJob", {f"{_MX}.Worker.replicas": 5000}, WAITING, "Waiting"),
    _case("workers-2-40", "MXJob", {f"{_MX}.Worker.replicas": 2**40}, REJECTED, "replicas"),
    _case(
        "gpu-negative",
        "MXJob",
        {f"{_MX}.Worker.template.spec.containers[0].resources": {"limits": {GPU: -1}}},
        FAILED,
        "resources",
    ),
    _case(
        "port-huge",
        "MXJob",
        {
            f"{_MX}.Scheduler.template.spec.containers[0].ports": [
                {"name": "mxjob-port", "containerPort": 700000}
            ]
        },
        FAILED,
        "ports",
    ),
    _case(
        "managed-by-other",
        "MXJob",
        {"spec.runPolicy.managedBy": "someone/else"},
        REJECTED,
        "spec.runPolicy.managedBy",
    ),
    _case("name-not-dns", "MXJob", {}, REJECTED, "metadata.name", name="9-h-mx"),
    _case(
        "deadline-negative",
        "MXJob",
        {"spec.runPolicy.activeDeadlineSeconds": -5},
        REJECTED,
        "spec.runPolicy.activeDeadlineSeconds",
    ),
    # ------------------------------------------------------------------ TrainJob
    *_each("TrainJob"),
    _case(
        "runtime-unknown",
        "TrainJob",
        {"spec.runtimeRef.name": "no-such-runtime"},
        WAITING,
        "no-such-runtime",
    ),
    _case(
        "cluster-runtime-unknown",
        "TrainJob",
        {"spec.runtimeRef": {"name": "no-such-cluster-runtime", "kind": "ClusterTrainingRuntime"}},
        WAITING,
        "no-such-cluster-runtime",
    ),
    _case(
        "runtime-kind-bad",
        "TrainJob",
        {"spec.runtimeRef.kind": "Runtime"},
        REJECTED,
        "spec.runtimeRef.kind",
    ),
    _case(
        "runtime-name-empty",
        "TrainJob",
        {"spec.runtimeRef.name": ""},
        REJECTED,
        "spec.runtimeRef.name",
    ),
    _case("no-runtime-ref", "TrainJob", {"spec.runtimeRef": ...}, REJECTED, "spec.runtimeRef"),
    _case(
        "nodes-zero", "TrainJob", {"spec.trainer.numNodes": 0}, REJECTED, "spec.trainer.numNodes"
    ),
    _case(
        "nodes-2-40",
        "TrainJob",
        {"spec.trainer.numNodes": 2**40},
        REJECTED,
        "spec.trainer.numNodes",
    ),
    _case("nodes-absurd", "TrainJob", {"spec.trainer.numNodes": 5000}, WAITING, "Waiting"),
    _case(
        "gpu-negative",
        "TrainJob",
        {"spec.trainer.resourcesPerNode.limits": {GPU: -2}},
        FAILED,
        "resourcesPerNode",
    ),
    _case(
        "reserved-env",
        "TrainJob",
        {"spec.trainer.env": [{"name": "PET_NNODES", "value": "9"}]},
        FAILED,
        "PET_NNODES",
    ),
    _case(
        "managed-by-other",
        "TrainJob",
        {"spec.managedBy": "someone/else"},
        REJECTED,
        "spec.managedBy",
    ),
    _case("name-not-dns", "TrainJob", {}, REJECTED, "metadata.name", name="9-h-tjob"),
    # ------------------------------------------------------------------ runtimes
    _case(
        "torch-and-mpi",
        "TrainingRuntime",
        {"spec.mlPolicy.mpi": {"numProcPerNode": 1}},
        REJECTED,
        "spec.mlPolicy",
    ),
    _case(
        "elastic-min-gt-max",
        "TrainingRuntime",
        {
            "spec.mlPolicy.numNodes": ...,
            "spec.mlPolicy.torch.elasticPolicy": {"minNodes": 9, "maxNodes": 2},
        },
        REJECTED,
        "minNodes",
    ),
    _case(
        "nodes-negative",
        "TrainingRuntime",
        {"spec.mlPolicy.numNodes": -1},
        REJECTED,
        "spec.mlPolicy.numNodes",
    ),
    _case(
        "dup-replicated-jobs",
        "TrainingRuntime",
        {
            f"{_TR}": [
                {"name": "node", "template": {"spec": {"template": _template("a")}}},
                {"name": "node", "template": {"spec": {"template": _template("b")}}},
            ]
        },
        REJECTED,
        "replicatedJobs",
    ),
    _case(
        "proc-per-node-tpu",
        "TrainingRuntime",
        {"spec.mlPolicy.torch.numProcPerNode": "tpu"},
        REJECTED,
        "numProcPerNode",
    ),
    _case(
        "no-template", "ClusterTrainingRuntime", {"spec.template": ...}, REJECTED, "spec.template"
    ),
    _case(
        "impl-intel",
        "ClusterTrainingRuntime",
        {"spec.mlPolicy.torch": ..., "spec.mlPolicy.mpi": {"mpiImplementation": "Intel"}},
        REJECTED,
        "mpiImplementation",
    ),
    _case(
        "bad-label",
        "ClusterTrainingRuntime",
        {"metadata.labels": {"x": "not ok"}},
        REJECTED,
        "metadata.labels",
    ),
]
