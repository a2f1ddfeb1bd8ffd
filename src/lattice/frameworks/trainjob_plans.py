"""The plans a TrainJob resolves to over its runtime: what each replicatedJob runs, and the ML
policy in effect (torch, MPI), as frozen values the TrainJob plugin builds from.

Contract (pure): a :class:`ResolvedJob` is complete: the TrainJob, its replicatedJobs
(:class:`ReplicatedJobPlan`, templates already merged), the torch or MPI plan, the scaled job and
its node range, success policy, network and labels. ``RuntimeNotReady`` is the waiting outcome of
a resolve. ``upsert`` merges lists of dicts by a key; ``main_container`` finds the container an
ancestor step runs in. The resolution itself is ``lattice.frameworks.trainjob_runtime``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lattice.api.runtime import MLPolicy
from lattice.api.trainjob import TrainJob
from lattice.frameworks.base import JobNotReady
from lattice.primitives.objects import Obj

__all__ = [
    "ANCESTOR_DATASET",
    "ANCESTOR_MODEL",
    "ANCESTOR_TRAINER",
    "DATASET_MOUNT_PATH",
    "DEFAULT_BACKOFF_LIMIT",
    "INITIALIZERS",
    "INITIALIZER_VOLUME",
    "LAUNCHER",
    "MODEL_MOUNT_PATH",
    "NODE",
    "RESERVED_TORCH_ENV",
    "STORAGE_URI",
    "ClaimPlan",
    "FailurePolicyPlan",
    "FailureRule",
    "MPIPlan",
    "ReplicatedJobPlan",
    "ResolvedJob",
    "RuntimeNotReady",
    "TorchPlan",
    "main_container",
    "upsert",
]

ANCESTOR_TRAINER = "trainer"
ANCESTOR_DATASET = "dataset-initializer"
ANCESTOR_MODEL = "model-initializer"
INITIALIZERS = (ANCESTOR_DATASET, ANCESTOR_MODEL)
NODE = "node"
LAUNCHER = "launcher"
DATASET_MOUNT_PATH = "/workspace/dataset"
MODEL_MOUNT_PATH = "/workspace/model"
#: Volume name upstream runtimes share between initializers and trainer (a PVC).
INITIALIZER_VOLUME = "initializer"
#: torchrun variables the torch plugin owns; ``trainer.env`` must not set them (sorted).
RESERVED_TORCH_ENV = (
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_NPROC_PER_NODE",
)
STORAGE_URI = "STORAGE_URI"
DEFAULT_BACKOFF_LIMIT = 6  # batch/v1 Job default


class RuntimeNotReady(JobNotReady):
    """The referenced runtime is missing or unusable: the TrainJob waits (never fails) for it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchPlan:
    """``mlPolicy.torch`` in effect: ``PET_NPROC_PER_NODE`` and the elastic settings."""

    num_proc_per_node: str
    elastic: bool = False
    max_restarts: int | None = None
    #: The runtime's trainer command entries a torchtune command keeps (``output_dir=...``).
    tune_overrides: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MPIPlan:
    """``mlPolicy.mpi`` in effect (``slots`` is numProcPerNode after the TrainJob's override)."""

    slots: int
    implementation: str
    ssh_auth_mount_path: str
    run_launcher_as_node: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureRule:
    """One JobSet ``failurePolicy.rules[]`` entry (empty tuples match anything)."""

    name: str
    action: str
    reasons: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FailurePolicyPlan:
    """The runtime's JobSet ``failurePolicy``."""

    max_restarts: int = 0
    restart_strategy: str = "Recreate"
    rules: tuple[FailureRule, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimPlan:
    """One PVC a JobSet ``volumeClaimPolicies`` template asks for: ``claim`` is its name,
    ``owned`` whether the TrainJob owns it (``whenDeleted: Delete``)."""

    template: str
    claim: str
    owned: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    spec: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicatedJobPlan:
    """One replicatedJob after the merge: ``template`` is the pod template (overrides applied)."""

    name: str
    step: str | None
    replicas: int
    parallelism: int
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    template: Mapping[str, Any]
    backoff_limit: int
    #: ``(replicatedJob, Ready | Complete)`` that must be reached before this job's pods exist
    #: (``dependsOn``; startupPolicy InOrder makes each job depend on the one before it, Ready).
    depends_on: tuple[tuple[str, str], ...] = ()
    #: The JobSet ``groupName`` (default ``default``): the pods' group labels.
    group: str = "default"

    @property
    def initializer(self) -> bool:
        return self.step in INITIALIZERS


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedJob:
    """A TrainJob merged over its runtime: everything the plugin builds children from.

    ``scaled`` names the job whose pod count follows the scheduler's size within
    ``[min_nodes, max_nodes]`` (None for an MPI runtime without ``node``); every other
    non-initializer job is fixed. ``labels``/``annotations`` are the JobSet-level ones.
    """

    trainjob: TrainJob
    runtime_kind: str
    runtime_name: str
    runtime_hash: str
    replicated_jobs: tuple[ReplicatedJobPlan, ...]
    trainer: str
    scaled: str | None
    min_nodes: int
    max_nodes: int
    torch: TorchPlan | None
    mpi: MPIPlan | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    success_operator: str
    success_targets: tuple[str, ...]
    subdomain: str
    dns_hostnames: bool
    publish_not_ready: bool
    #: The runtime's ``mlPolicy`` and the resources per node the policies count (GPUs, CPUs).
    ml_policy: MLPolicy | None = None
    node_resources: Mapping[str, Any] = field(default_factory=dict)
    #: The runtime's JobSet failurePolicy (None: a failed Job fails the TrainJob).
    failure_policy: FailurePolicyPlan | None = None
    #: Fields accepted and ignored here: ``(field path, why)``, reported as Warning events.
    ignored: tuple[tuple[str, str], ...] = ()
    #: The JobSet ``coordinator``'s endpoint (``trainjob_jobset.coordinator_endpoint``).
    coordinator: str | None = None
    #: The JobSet ``ttlSecondsAfterFinished``: the children go that long after the job finished.
    ttl_seconds_after_finished: int | None = None
    #: The JobSet ``volumeClaimPolicies`` templates (``trainjob_jobset.ClaimPlan``).
    claims: tuple[ClaimPlan, ...] = ()

    @property
    def name(self) -> str:
        return self.trainjob.metadata.name or ""

    @property
    def namespace(self) -> str | None:
        return self.trainjob.metadata.namespace

    @property
    def suspend(self) -> bool:
        return self.trainjob.spec.suspend

    def rjob(self, name: str) -> ReplicatedJobPlan:
        return next(r for r in self.replicated_jobs if r.name == name)


def upsert(
    items: Sequence[Mapping[str, Any]] | None, new: Sequence[Mapping[str, Any]], *, key: str
) -> list[Obj]:
    """``items`` with each of ``new`` replacing the entry of the same ``key``, else appended."""
    result = [dict(i) for i in items or ()]
    for entry in new:
        at = next((i for i, e in enumerate(result) if e.get(key) == entry.get(key)), None)
        if at is None:
            result.append(copy.deepcopy(dict(entry)))
        else:
            result[at] = copy.deepcopy(dict(entry))
    return result


def main_container(containers: Sequence[Mapping[str, Any]], step: str | None) -> int | None:
    """Index of the container TrainJob fields target in a job of ``step``: for an initializer the
    one named after it, otherwise ``node``, ``trainer`` or ``launcher``; else 0; None if none."""
    preferred = (step,) if step in INITIALIZERS else (NODE, ANCESTOR_TRAINER, LAUNCHER)
    for name in preferred:
        for i, c in enumerate(containers):
            if c.get("name") == name:
                return i
    return 0 if containers else None
