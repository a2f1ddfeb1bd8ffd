"""TrainJob's pods: JobSet's layout of a runtime's replicatedJobs (names, completion indexes,
labels), with the ML policy plugins (``lattice.frameworks.trainjob_mlpolicies``) applied to it.

Contract (pure; see ``lattice.frameworks.trainjob`` for the rules in full):
- ``pod_name``: ``<tj>-<rjob>-<job index>-<pod index>``, the pod name and hostname JobSet gives.
- ``pod_slots(job, size, initializers=)``: every desired pod (``Slot``) at ``size``, the scaled
  replicatedJob taking what the fixed ones leave (``pod_counts``); ``full_size`` is the largest.
- ``build_pods``: the pod manifests of slots: the runtime's template with the operator's
  placement, ``JOB_COMPLETION_INDEX``, the JobSet (``restart-attempt``: ``status.restarts``),
  batch and Kubeflow labels and annotations (with JobSet's group keys and, when the runtime
  names one, the coordinator's endpoint: ``trainjob_jobset``), the ``volumeClaimPolicies``
  claims the containers mount, the initializer volume mounted where an initializer writes, and
  the ML policies (``trainjob_mlpolicies.apply_policies``: torch, MPI,
  JAX, XGBoost).
- ``hostfile``: the MPI hostfile (OpenMPI format) over the node pods, the launcher first with
  runLauncherAsNode.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from lattice.api.constants import (
    LABEL_JOB_NAME,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    TRAINJOB,
)
from lattice.frameworks.base import MANAGED_LABEL, OperatorContext
from lattice.frameworks.manifests import pod_manifest
from lattice.frameworks.naming import job_owner
from lattice.frameworks.podspec import with_placement
from lattice.frameworks.policies import mpi
from lattice.frameworks.trainjob_jobset import LABEL_COORDINATOR, add_claim_volumes, group_meta
from lattice.frameworks.trainjob_mlpolicies import apply_policies
from lattice.frameworks.trainjob_plans import (
    ANCESTOR_DATASET,
    ANCESTOR_MODEL,
    DATASET_MOUNT_PATH,
    INITIALIZER_VOLUME,
    LAUNCHER,
    MODEL_MOUNT_PATH,
    NODE,
    ReplicatedJobPlan,
    ResolvedJob,
    main_container,
)
from lattice.frameworks.trainjob_policy import INDEX_REF, LABEL_COMPLETION_INDEX, MASTER_PORT
from lattice.primitives.objects import Obj

__all__ = [
    "INDEX_REF",
    "LABEL_COMPLETION_INDEX",
    "LABEL_JOBSET_NAME",
    "LABEL_REPLICATED_JOB",
    "LABEL_RESTART_ATTEMPT",
    "MASTER_PORT",
    "OPERATOR_NAME",
    "Slot",
    "build_pods",
    "fixed_jobs",
    "full_size",
    "hostfile",
    "owner_of",
    "pod_counts",
    "pod_name",
    "pod_slots",
]

#: ``training.kubeflow.org/operator-name`` of TrainJob pods.
OPERATOR_NAME = "trainjob-controller"
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
_JOBSET = "jobset.sigs.k8s.io/"


@dataclass(frozen=True, slots=True)
class Slot:
    """One desired pod: Job ``job`` of replicatedJob ``rjob``, completion index ``index``."""

    rjob: ReplicatedJobPlan
    job: int
    index: int
    name: str


def pod_name(job: ResolvedJob, rjob: str, job_index: int, index: int) -> str:
    """``<tj>-<rjob>-<job index>-<pod index>``, the pod name and hostname JobSet gives."""
    return f"{job.name}-{rjob}-{job_index}-{index}"


def pod_counts(job: ResolvedJob, size: int) -> dict[str, int]:
    """Pods per Job of every replicatedJob at ``size`` (the scaled job takes what is left)."""
    fixed = sum(r.replicas * r.parallelism for r in fixed_jobs(job))
    return {
        r.name: max(size - fixed, 0) if r.name == job.scaled else r.parallelism
        for r in job.replicated_jobs
    }


def fixed_jobs(job: ResolvedJob) -> list[ReplicatedJobPlan]:
    return [r for r in job.replicated_jobs if not r.initializer and r.name != job.scaled]


def full_size(job: ResolvedJob) -> int:
    return sum(r.replicas * r.parallelism for r in fixed_jobs(job)) + job.max_nodes


def pod_slots(job: ResolvedJob, size: int, *, initializers: bool) -> Iterator[Slot]:
    counts = pod_counts(job, size)
    for r in job.replicated_jobs:
        if r.initializer == initializers:
            for j in range(r.replicas):
                for i in range(counts[r.name]):
                    yield Slot(r, j, i, pod_name(job, r.name, j, i))


def hostfile(job: ResolvedJob, *, size: int | None = None) -> str:
    """The MPI ``hostfile`` at ``size`` (default: the full size): one line per node pod."""
    if job.mpi is None:
        return ""
    counts = pod_counts(job, size or full_size(job))
    hosts = [LAUNCHER] if job.mpi.run_launcher_as_node else []
    names = [
        f"{pod_name(job, r.name, 0, i)}.{job.subdomain}"
        for r in job.replicated_jobs
        if r.name in (*hosts, NODE)
        for i in range(counts[r.name])
    ]
    return mpi.hostfile(names, slots=job.mpi.slots, implementation=job.mpi.implementation)


def owner_of(job: ResolvedJob) -> Obj:
    return job_owner(TRAINJOB, job.trainjob.metadata)


def build_pods(
    job: ResolvedJob, slots: Iterator[Slot], *, owner: Obj, ctx: OperatorContext
) -> tuple[Obj, ...]:
    specs: dict[str, Obj] = {}
    total = sum(r.replicas for r in job.replicated_jobs)
    offsets, seen = {}, 0
    for r in job.replicated_jobs:
        offsets[r.name], seen = seen, seen + r.replicas
    pods: list[Obj] = []
    status = job.trainjob.status
    attempt = str((status.restarts if status else None) or 0)
    for slot in slots:
        r = slot.rjob
        if r.name not in specs:
            specs[r.name] = with_placement(_spec(job, r), ctx)
        job_name = f"{job.name}-{r.name}-{slot.job}"
        key = hashlib.sha1(f"{job.namespace or ''}/{job_name}".encode()).hexdigest()
        jobset = {
            f"{_JOBSET}jobset-name": job.name,
            f"{_JOBSET}replicatedjob-name": r.name,
            LABEL_RESTART_ATTEMPT: attempt,
            f"{_JOBSET}replicatedjob-replicas": str(r.replicas),
            f"{_JOBSET}global-replicas": str(total),
            f"{_JOBSET}job-index": str(slot.job),
            f"{_JOBSET}job-key": key,
            f"{_JOBSET}job-global-index": str(offsets[r.name] + slot.job),
            LABEL_COMPLETION_INDEX: str(slot.index),
            **group_meta(job.replicated_jobs, r, slot.job),
        }
        if job.coordinator is not None:
            jobset[LABEL_COORDINATOR] = job.coordinator
        tmeta = r.template.get("metadata") or {}
        ours = {
            **jobset,
            "batch.kubernetes.io/job-name": job_name,
            LABEL_JOB_NAME: job.name,
            LABEL_OPERATOR_NAME: OPERATOR_NAME,
            LABEL_REPLICA_TYPE: r.name,
            LABEL_REPLICA_INDEX: str(slot.index),
            MANAGED_LABEL: "true",
        }
        base = {"labels": {**job.labels, **r.labels, **(tmeta.get("labels") or {})}}
        pod = pod_manifest(
            name=slot.name,
            namespace=job.namespace,
            template={"metadata": base},
            labels=ours,
            owner=owner,
            spec={**specs[r.name], "hostname": slot.name},
        )
        notes = {**job.annotations, **r.annotations, **(tmeta.get("annotations") or {}), **jobset}
        pod["metadata"]["annotations"] = notes
        pods.append(pod)
    return tuple(pods)


def _spec(job: ResolvedJob, r: ReplicatedJobPlan) -> Obj:
    """The pod spec shared by every pod of ``r``: env, ports, volumes and mounts added."""
    spec: Obj = copy.deepcopy(dict(r.template.get("spec") or {}))
    containers: list[Obj] = spec["containers"]
    at = main_container(containers, r.step)
    main = containers[at] if at is not None else {}
    apply_policies(job, r, spec, main)
    add_claim_volumes(spec, job.claims)
    if any(v.get("name") == INITIALIZER_VOLUME for v in spec.get("volumes") or ()):
        _mount_outputs(job, r, main)
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or ():
            if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in container.get("env") or ()):
                entry = {"name": "JOB_COMPLETION_INDEX", "valueFrom": copy.deepcopy(INDEX_REF)}
                container["env"] = [*(container.get("env") or ()), entry]
    if job.dns_hostnames:
        spec["subdomain"] = job.subdomain
    return spec


def _mount_outputs(job: ResolvedJob, r: ReplicatedJobPlan, main: Obj) -> None:
    """Mount the ``initializer`` volume where an initializer writes (its own output, or both
    outputs in the trainer) unless a mount of the container already covers the path."""
    paths = {ANCESTOR_DATASET: DATASET_MOUNT_PATH, ANCESTOR_MODEL: MODEL_MOUNT_PATH}
    steps = {s.step for s in job.replicated_jobs}
    wanted = [paths[r.step]] if r.step in paths else []
    if r.name == job.trainer:
        wanted = [path for step, path in paths.items() if step in steps]
    for path in wanted:
        mounts = main.get("volumeMounts") or []
        roots = [str(m.get("mountPath", "")).rstrip("/") for m in mounts]
        if not any(path == root or path.startswith(root + "/") for root in roots):
            main["volumeMounts"] = [*mounts, {"name": INITIALIZER_VOLUME, "mountPath": path}]
