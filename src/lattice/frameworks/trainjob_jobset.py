"""The JobSet fields of a TrainJob's runtime that act on the pods, done without a JobSet:
``coordinator``, ``replicatedJobs[].groupName`` and ``volumeClaimPolicies`` (JobSet v0.12, the
version Trainer v2.3 builds on; ``ttlSecondsAfterFinished`` is the reconciler's clean-up, see
``TrainJobPlugin.run_policy``).

Contract (pure):
- ``coordinator_endpoint``: ``<tj>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>``, the
  stable address JobSet puts on every Job and pod under ``LABEL_COORDINATOR`` (label and
  annotation). ``coordinator_problems`` splits what is wrong with it into the runtime's
  problems (a replicatedJob it lacks, a jobIndex or a fixed job's podIndex out of range) and the
  TrainJob's (a podIndex beyond the trainer's node count; an endpoint that is no valid label
  value, as JobSet's webhook says, naming ``metadata.name``).
- ``group_meta``: the JobSet group keys of Job ``job_index`` of a replicatedJob: its
  ``groupName`` (default ``default``), the Jobs of its group, and its index among them (the
  replicatedJobs in order), as JobSet's ``groupReplicas`` and ``groupJobIndex``.
- ``claim_plans`` / ``claim_problems``: the ``volumeClaimPolicies`` templates as PVCs named
  ``<template>-<tj>`` (JobSet's ``GeneratePVCName``), owned by the TrainJob unless the policy's
  ``retentionPolicy.whenDeleted`` is ``Retain`` (default ``Delete``, JobSet's webhook default);
  the webhook's rules: template names unique, DNS-1123 subdomains, the PVC name at most 63
  characters, and mounted (by a ``volumeMount`` of that name) by a container or initContainer
  of some replicatedJob. ``add_claim_volumes`` adds the ``persistentVolumeClaim`` volume to a
  pod spec one of whose containers mounts it, unless the spec has a volume of that name
  (JobSet's webhook refuses that runtime; Lattice keeps the pod's own volume);
  ``claim_manifests`` renders the PVCs (template labels plus ``jobset-name``; the
  ``MANAGED_LABEL``), split into owned and retained ones.
- ``pods_per_job``: a Job's pods from its JobSpec, ``parallelism`` capped by ``completions``
  (JobSet's default ``completionMode`` is Indexed: one pod per index, never more pods than
  indexes); ``completions_problems``: a ``completions`` outside 1..parallelism, which would need
  a second wave of pods (the Job controller starts later indexes as earlier ones succeed), is
  the runtime's problem, naming the field. The jobs whose counts Trainer sets are exempt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from lattice.api.jobset import Coordinator, VolumeClaimPolicy
from lattice.frameworks.base import MANAGED_LABEL, Problem
from lattice.frameworks.trainjob_plans import ClaimPlan, ReplicatedJobPlan
from lattice.primitives.objects import Obj

__all__ = [
    "LABEL_COORDINATOR",
    "LABEL_GROUP_NAME",
    "LABEL_GROUP_REPLICAS",
    "LABEL_JOB_GROUP_INDEX",
    "add_claim_volumes",
    "claim_manifests",
    "claim_plans",
    "claim_problems",
    "completions_problems",
    "coordinator_endpoint",
    "coordinator_problems",
    "group_meta",
    "pods_per_job",
]

LABEL_COORDINATOR = "jobset.sigs.k8s.io/coordinator"
LABEL_GROUP_NAME = "jobset.sigs.k8s.io/group-name"
LABEL_GROUP_REPLICAS = "jobset.sigs.k8s.io/group-replicas"
LABEL_JOB_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"
_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
_COORDINATOR = "spec.template.spec.coordinator"
_CLAIMS = "spec.template.spec.volumeClaimPolicies"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_MAX_CLAIM_NAME = 63  # JobSet's maxVolumeClaimLength


# --------------------------------------------------------------------------- coordinator


def coordinator_endpoint(
    coordinator: Coordinator | None, *, name: str, subdomain: str
) -> str | None:
    """The coordinator pod's stable DNS name, or None without a coordinator."""
    if coordinator is None:
        return None
    job, pod = coordinator.job_index or 0, coordinator.pod_index or 0
    return f"{name}-{coordinator.replicated_job}-{job}-{pod}.{subdomain}"


def coordinator_problems(
    coordinator: Coordinator | None,
    *,
    plans: Sequence[ReplicatedJobPlan],
    scaled: str | None,
    min_nodes: int,
    endpoint: str | None,
) -> tuple[list[Problem], list[Problem]]:
    """``(runtime problems, TrainJob problems)`` of the coordinator (module contract)."""
    if coordinator is None:
        return [], []
    plan = next((p for p in plans if p.name == coordinator.replicated_job), None)
    if plan is None:
        why = f"names {coordinator.replicated_job!r}, which is not a replicatedJob"
        return [Problem(f"{_COORDINATOR}.replicatedJob", why)], []
    runtime: list[Problem] = []
    job, pod = coordinator.job_index or 0, coordinator.pod_index or 0
    if job >= plan.replicas:
        why = f"must be below {plan.replicas}, the Jobs of replicatedJob {plan.name!r}; got {job}"
        runtime.append(Problem(f"{_COORDINATOR}.jobIndex", why))
    trainjob: list[Problem] = []
    if plan.name == scaled and pod >= min_nodes:
        why = (
            f"must be more than the runtime's coordinator podIndex {pod}: replicatedJob "
            f"{plan.name!r} has {min_nodes} pod(s) per Job"
        )
        trainjob.append(Problem("spec.trainer.numNodes", why))
    elif plan.name != scaled and pod >= plan.parallelism:
        why = f"must be below {plan.parallelism}, the pods per Job of {plan.name!r}; got {pod}"
        runtime.append(Problem(f"{_COORDINATOR}.podIndex", why))
    if endpoint is not None and (len(endpoint) > 63 or not _LABEL_VALUE.match(endpoint)):
        why = (
            f"leads to the coordinator label value {endpoint!r}, which is not a label value of "
            "at most 63 characters (long TrainJob, replicatedJob or subdomain name?)"
        )
        trainjob.append(Problem("metadata.name", why))
    return runtime, trainjob


# --------------------------------------------------------------------------- groups


def group_meta(
    plans: Sequence[ReplicatedJobPlan], plan: ReplicatedJobPlan, job_index: int
) -> dict[str, str]:
    """The group keys of Job ``job_index`` of ``plan`` (module contract)."""
    replicas = index = 0
    for p in plans:
        if p.group != plan.group:
            continue
        if p.name == plan.name:
            index = replicas + job_index
        replicas += p.replicas
    return {
        LABEL_GROUP_NAME: plan.group,
        LABEL_GROUP_REPLICAS: str(replicas),
        LABEL_JOB_GROUP_INDEX: str(index),
    }


# --------------------------------------------------------------------------- volume claims


def claim_plans(
    policies: Sequence[VolumeClaimPolicy] | None, *, name: str
) -> tuple[ClaimPlan, ...]:
    """The claims of ``policies`` for the TrainJob ``name`` (module contract)."""
    plans: list[ClaimPlan] = []
    for policy in policies or ():
        retention = policy.retention_policy
        owned = retention is None or retention.when_deleted != "Retain"
        for template in policy.templates or ():
            meta = template.get("metadata") or {}
            claim = str(meta.get("name") or "")
            plans.append(
                ClaimPlan(
                    template=claim,
                    claim=f"{claim}-{name}",
                    owned=owned,
                    labels=dict(meta.get("labels") or {}),
                    annotations=dict(meta.get("annotations") or {}),
                    spec=dict(template.get("spec") or {}),
                )
            )
    return tuple(plans)


def _mounts(spec: Mapping[str, Any]) -> set[str]:
    return {
        str(m.get("name"))
        for key in ("initContainers", "containers")
        for c in spec.get(key) or ()
        for m in c.get("volumeMounts") or ()
    }


def claim_problems(
    claims: Sequence[ClaimPlan], *, plans: Sequence[ReplicatedJobPlan]
) -> list[Problem]:
    """JobSet's webhook rules on the claims, over the merged replicatedJobs (module contract)."""
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, claim in enumerate(claims):
        where = f"{_CLAIMS}.templates[{i}].metadata.name"
        if claim.template in seen:
            problems.append(Problem(where, f"{claim.template!r}: names must be unique"))
        seen.add(claim.template)
        if len(claim.template) > 253 or not _DNS1123_SUBDOMAIN.match(claim.template):
            why = f"{claim.template!r} must be a DNS-1123 subdomain"
            problems.append(Problem(where, why))
        if len(claim.claim) > _MAX_CLAIM_NAME:
            why = f"the claim name {claim.claim!r} is longer than {_MAX_CLAIM_NAME} characters"
            problems.append(Problem(where, why))
        if not any(claim.template in _mounts(p.template.get("spec") or {}) for p in plans):
            why = f"{claim.template!r} is mounted by no container of any replicatedJob"
            problems.append(Problem(where, why))
    return problems


def add_claim_volumes(spec: Obj, claims: Sequence[ClaimPlan]) -> None:
    """Add to ``spec`` (a copy the caller owns) the volume of each claim a container mounts."""
    mounted = _mounts(spec)
    have = {v.get("name") for v in spec.get("volumes") or ()}
    for claim in claims:
        if claim.template in mounted and claim.template not in have:
            volume = {"name": claim.template, "persistentVolumeClaim": {"claimName": claim.claim}}
            spec["volumes"] = [*(spec.get("volumes") or ()), volume]


def claim_manifests(
    claims: Sequence[ClaimPlan], *, name: str, namespace: str | None, owner: Obj
) -> tuple[tuple[Obj, ...], tuple[Obj, ...]]:
    """``(owned PVCs, retained PVCs)``: the retained ones carry no ownerReference."""
    owned: list[Obj] = []
    retained: list[Obj] = []
    for claim in claims:
        meta: Obj = {
            "name": claim.claim,
            "labels": {**claim.labels, _JOBSET_NAME: name, MANAGED_LABEL: "true"},
        }
        if namespace:
            meta["namespace"] = namespace
        if claim.annotations:
            meta["annotations"] = dict(claim.annotations)
        if claim.owned:
            meta["ownerReferences"] = [dict(owner)]
        pvc: Obj = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": meta,
            "spec": dict(claim.spec),
        }
        (owned if claim.owned else retained).append(pvc)
    return tuple(owned), tuple(retained)


# --------------------------------------------------------------------------- Job completions


def pods_per_job(job_spec: Mapping[str, Any]) -> int:
    """Pods of one Job of a replicatedJob Lattice sizes from its JobSpec: ``parallelism``
    (default 1), at most ``completions`` (an Indexed Job never runs more pods than indexes)."""
    pods = max(int(job_spec.get("parallelism") or 1), 1)
    completions = job_spec.get("completions")
    if isinstance(completions, int) and completions >= 1:
        pods = min(pods, completions)
    return pods


def completions_problems(replicated_jobs: Sequence[Any], *, exempt: Sequence[str]) -> list[Problem]:
    """A ``completions`` Lattice cannot run (module contract); ``exempt`` names the jobs whose
    counts Trainer sets itself (the trainer's, MPI's launcher and node)."""
    problems: list[Problem] = []
    for i, rjob in enumerate(replicated_jobs):
        spec = rjob.template.get("spec") or {}
        completions = spec.get("completions")
        if rjob.name in exempt or completions is None:
            continue
        parallelism = max(int(spec.get("parallelism") or 1), 1)
        if not isinstance(completions, int) or not 1 <= completions <= parallelism:
            why = (
                f"must be between 1 and parallelism ({parallelism}), got {completions!r}: "
                "Lattice runs each completion index of a Job at once, never a later wave"
            )
            field = f"spec.template.spec.replicatedJobs[{i}].template.spec.completions"
            problems.append(Problem(field, why))
    return problems
