"""The rules a TrainJob and its runtime must meet to resolve, beyond their schemas.

Contract (pure): ``steps`` identifies each replicatedJob's ancestor step (by the
``trainjob-ancestor-step`` label, else by conventional names); ``runtime_problems`` checks a
runtime alone (its problems make the TrainJob wait: ``not_ready`` words them as
``InvalidMLPolicy`` when all are in ``spec.mlPolicy``, else ``InvalidRuntime``);
``cross_problems`` checks what the TrainJob asks of the runtime (its problems make the TrainJob
invalid). (``numProcPerNode`` is resolved by the torch policy, ``policies.torch``.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from lattice.api.constants import LABEL_TRAINJOB_ANCESTOR
from lattice.api.jobset import FailurePolicy
from lattice.api.runtime import TrainingRuntimeSpec
from lattice.api.trainjob import TrainJob
from lattice.frameworks.base import OperatorContext, Problem
from lattice.frameworks.demands import template_problems
from lattice.frameworks.manifests import template_containers
from lattice.frameworks.trainjob_plans import (
    ANCESTOR_DATASET,
    ANCESTOR_MODEL,
    ANCESTOR_TRAINER,
    INITIALIZERS,
    LAUNCHER,
    NODE,
    RESERVED_TORCH_ENV,
    FailurePolicyPlan,
    FailureRule,
    MPIPlan,
    ReplicatedJobPlan,
    RuntimeNotReady,
    TorchPlan,
)

__all__ = [
    "cross_problems",
    "failure_policy",
    "ignored_fields",
    "not_ready",
    "runtime_problems",
    "steps",
]

_NPROC_WORDS = ("auto", "cpu", "gpu")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def not_ready(where: str, problems: Sequence[Problem]) -> RuntimeNotReady:
    """``InvalidMLPolicy`` when every problem is in ``spec.mlPolicy``, else ``InvalidRuntime``."""
    ml = all(p.field.startswith("spec.mlPolicy") for p in problems)
    text = "; ".join(str(p) for p in problems)
    return RuntimeNotReady(
        "InvalidMLPolicy" if ml else "InvalidRuntime", f"{where} is invalid: {text}"
    )


def steps(spec: TrainingRuntimeSpec) -> dict[str, str]:
    """replicatedJob name -> ancestor step, by label, else by the conventional names."""
    steps: dict[str, str] = {}
    for rjob in spec.template.spec.replicated_jobs:
        labels = (rjob.template.get("metadata") or {}).get("labels") or {}
        if LABEL_TRAINJOB_ANCESTOR in labels:
            steps[rjob.name] = str(labels[LABEL_TRAINJOB_ANCESTOR])
    names = [r.name for r in spec.template.spec.replicated_jobs]
    mpi = spec.ml_policy is not None and spec.ml_policy.mpi is not None
    fallbacks = {
        ANCESTOR_TRAINER: (LAUNCHER, NODE) if mpi else (NODE,),
        ANCESTOR_DATASET: (ANCESTOR_DATASET,),
        ANCESTOR_MODEL: (ANCESTOR_MODEL,),
    }
    for step, candidates in fallbacks.items():
        if step in steps.values():
            continue
        name = next((n for n in candidates if n in names and n not in steps), None)
        if name is not None:
            steps[name] = step
    return steps


def runtime_problems(
    spec: TrainingRuntimeSpec, *, steps: Mapping[str, str], ctx: OperatorContext
) -> list[Problem]:
    problems: list[Problem] = []
    ml = spec.ml_policy
    if ml is not None:
        if ml.torch is not None and ml.mpi is not None:
            why = "only one of mlPolicy.torch and mlPolicy.mpi may be configured"
            problems.append(Problem("spec.mlPolicy", why))
        elastic = ml.torch.elastic_policy if ml.torch else None
        if elastic is not None and ml.num_nodes is not None:
            why = "must not be set when mlPolicy.torch.elasticPolicy is configured"
            problems.append(Problem("spec.mlPolicy.numNodes", why))
        if (
            elastic
            and elastic.min_nodes
            and elastic.max_nodes
            and elastic.min_nodes > elastic.max_nodes
        ):
            why = f"must be at most maxNodes ({elastic.max_nodes}), got {elastic.min_nodes}"
            problems.append(Problem("spec.mlPolicy.torch.elasticPolicy.minNodes", why))
        npp = ml.torch.num_proc_per_node if ml.torch else 1
        if npp not in _NPROC_WORDS and not (isinstance(npp, int) and npp >= 1):
            why = f"must be a positive integer or one of auto, cpu, gpu, got {npp!r}"
            problems.append(Problem("spec.mlPolicy.torch.numProcPerNode", why))
    rjobs = spec.template.spec.replicated_jobs
    base = "spec.template.spec.replicatedJobs"
    names = [r.name for r in rjobs]
    if not rjobs:
        problems.append(Problem(base, "must have at least one replicatedJob"))
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(Problem(base, f"names must be unique, {name!r} repeats"))
    labelled = list(steps.values())
    for step in sorted({s for s in labelled if labelled.count(s) > 1}):
        problems.append(Problem(base, f"more than one replicatedJob is the {step!r} step"))
    if rjobs and ANCESTOR_TRAINER not in steps.values():
        why = f"no replicatedJob is labelled {LABEL_TRAINJOB_ANCESTOR}=trainer or named node"
        problems.append(Problem(base, why))
    if ml is not None and ml.mpi is not None and LAUNCHER not in names:
        problems.append(Problem(base, "an mpi runtime must have a replicatedJob named launcher"))
    for i, rjob in enumerate(rjobs):
        pod = (rjob.template.get("spec") or {}).get("template") or {}
        containers = template_containers(pod)
        field = f"{base}[{i}].template.spec.template.spec"
        if not containers or not all(isinstance(c, Mapping) for c in containers):
            problems.append(Problem(f"{field}.containers", "must define at least one container"))
        else:
            problems += template_problems(pod.get("spec") or {}, field=field)
        policy = (pod.get("spec") or {}).get("restartPolicy")
        if policy not in (None, "OnFailure", "Never"):
            problems.append(
                Problem(f"{field}.restartPolicy", f"must be OnFailure or Never, got {policy!r}")
            )
    policy = spec.template.spec.success_policy
    for target in (policy.target_replicated_jobs or []) if policy else []:
        if target not in names:
            why = f"names {target!r}, which is not a replicatedJob"
            problems.append(Problem("spec.template.spec.successPolicy.targetReplicatedJobs", why))
    return problems


def cross_problems(
    tj: TrainJob,
    *,
    plans: Sequence[ReplicatedJobPlan],
    torch: TorchPlan | None,
    mpi: MPIPlan | None,
    scaled: str | None,
    max_nodes: int,
) -> list[Problem]:
    """What the TrainJob asks of this runtime that it cannot give."""
    problems: list[Problem] = []
    trainer = tj.spec.trainer
    by_name = {p.name: p for p in plans}
    steps = {p.step: p for p in plans if p.step}
    for step, source in ((ANCESTOR_DATASET, "dataset"), (ANCESTOR_MODEL, "model")):
        if getattr(tj.spec.initializer, source, None) is None:
            continue
        plan = steps.get(step)
        names = [c.get("name") for c in template_containers(plan.template)] if plan else []
        if plan is None or step not in names:
            why = f"the runtime has no {step} replicatedJob with a {step} container"
            problems.append(Problem(f"spec.initializer.{source}", why))
    seen: set[str] = set()
    for i, override in enumerate(tj.spec.pod_spec_overrides or ()):
        where = f"spec.podSpecOverrides[{i}]"
        for target in override.target_jobs:
            if target.name in seen:
                problems.append(
                    Problem(f"{where}.targetJobs", f"{target.name!r} is targeted twice")
                )
            seen.add(target.name)
            plan = by_name.get(target.name)
            if plan is None:
                why = f"{target.name!r} is not a replicatedJob of the runtime"
                problems.append(Problem(f"{where}.targetJobs", why))
                continue
            spec = plan.template.get("spec") or {}
            for field, changes in (
                ("initContainers", override.init_containers),
                ("containers", override.containers),
            ):
                have = {c.get("name") for c in spec.get(field) or ()}
                for j, change in enumerate(changes or ()):
                    if change.name not in have:
                        why = f"{change.name!r} is not a container of replicatedJob {target.name!r}"
                        problems.append(Problem(f"{where}.{field}[{j}].name", why))
                    elif change.env and change.name in (NODE, *INITIALIZERS):
                        why = f"must not set env of the reserved {change.name} container"
                        problems.append(Problem(f"{where}.{field}[{j}].env", why))
    npp = trainer.num_proc_per_node if trainer else None
    if torch is not None and trainer is not None:
        if isinstance(npp, str) and npp not in _NPROC_WORDS:
            why = f"must be an integer or one of auto, cpu, gpu, got {npp!r}"
            problems.append(Problem("spec.trainer.numProcPerNode", why))
        reserved = sorted({str(e.get("name")) for e in trainer.env or ()} & set(RESERVED_TORCH_ENV))
        if reserved:
            why = f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]"
            problems.append(Problem("spec.trainer.env", why))
        if torch.elastic and trainer.num_nodes is not None:
            why = "must not be set when the runtime sets mlPolicy.torch.elasticPolicy min/maxNodes"
            problems.append(Problem("spec.trainer.numNodes", why))
    if mpi is not None:
        if npp is not None and not isinstance(npp, int):
            problems.append(
                Problem("spec.trainer.numProcPerNode", "must have an int value for MPI TrainJob")
            )
        nodes = trainer.num_nodes if trainer else None
        if mpi.run_launcher_as_node and (nodes or 1) >= 2 and NODE not in by_name:
            why = "must be 1 when the MPI runtime runs the launcher as a node and has no node job"
            problems.append(Problem("spec.trainer.numNodes", why))
    name = tj.metadata.name or ""
    for plan in plans:
        count = max_nodes if plan.name == scaled else plan.parallelism
        host = f"{name}-{plan.name}-{plan.replicas - 1}-{max(count, 1) - 1}"
        if len(host) > 63 or not _DNS1123.match(host):
            why = f"pod hostname {host!r} is not a DNS label of at most 63 characters"
            problems.append(Problem("metadata.name", why))
    return problems


def failure_policy(policy: FailurePolicy | None) -> FailurePolicyPlan | None:
    """The JobSet ``failurePolicy`` as a plan (None without one)."""
    if policy is None:
        return None
    rules = tuple(
        FailureRule(
            name=r.name,
            action=r.action.value,
            reasons=tuple(r.on_job_failure_reasons or ()),
            patterns=tuple(r.on_job_failure_message_patterns or ()),
            targets=tuple(r.target_replicated_jobs or ()),
        )
        for r in policy.rules or ()
    )
    return FailurePolicyPlan(
        max_restarts=policy.max_restarts or 0,
        restart_strategy=policy.restart_strategy.value,
        rules=rules,
    )


def ignored_fields(spec: TrainingRuntimeSpec) -> tuple[tuple[str, str], ...]:
    """Runtime fields accepted and ignored, with why: a PodGroup policy (Lattice gangs pods)."""
    group = spec.pod_group_policy
    why = (
        "ignored: Lattice's own scheduler admits all of the job's pods or none, so no PodGroup "
        "is created"
    )
    ignored: list[tuple[str, str]] = []
    for name in ("coscheduling", "volcano"):
        if group is not None and getattr(group, name) is not None:
            ignored.append((f"spec.podGroupPolicy.{name}", why))
    return tuple(ignored)
