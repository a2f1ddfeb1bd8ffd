"""TrainJob runtime resolution: a TrainJob merged over its (Cluster)TrainingRuntime, pure.

Contract (facts from Kubeflow Trainer v2.0.0 and JobSet v0.8; the plugin is ``trainjob``):

- ``resolve(obj, ctx)`` looks the runtime up in ``ctx.runtimes`` under ``runtime_key`` and merges;
  ``resolve_with(obj, runtime, ctx)`` merges over a runtime object the caller holds (a recorded
  snapshot). Either returns a :class:`ResolvedJob` or raises:
  :class:`~lattice.frameworks.base.InvalidJob` when the TrainJob can never run as written
  (schema, ``runtimeRef.apiGroup``, the priority annotation, reserved ``PET_*`` env, numProcPerNode,
  overrides or patches naming what the runtime lacks, initializers the runtime lacks, pod hostnames
  over 63 characters); or :class:`RuntimeNotReady` (``reason``, ``message``) when the runtime is
  missing (``<Kind>NotFound``), exists only as the other kind (``RuntimeKindMismatch``), or is
  invalid (``InvalidMLPolicy`` / ``InvalidRuntime``). That outcome is *waiting*, never failure:
  resolving again once the runtime appears or is fixed succeeds (level-triggered).
- **ReplicatedJobs** are identified by ``trainer.kubeflow.org/trainjob-ancestor-step``
  (trainer | dataset-initializer | model-initializer), else by name (``node`` - for mpi
  ``launcher`` first - ``dataset-initializer``, ``model-initializer``); MPI roles go by name
  (``launcher``, ``node``). The trainer, the scaled and the initializer jobs run one Job each.
- **Pod counts.** ``numNodes`` = ``trainer.numNodes``, else ``mlPolicy.numNodes``, else 1. Torch and
  plain: the trainer job has numNodes pods, or ``[minNodes, maxNodes]`` with
  ``torch.elasticPolicy`` (one of them alone copies to the other). MPI: the launcher 1, ``node``
  ``max(numNodes-1, 1)`` with runLauncherAsNode, else numNodes. Other jobs: their parallelism.
- **Merge.** podSpecOverrides first (serviceAccountName replaced, nodeSelector merged, tolerations
  replaced, volumes/containers/initContainers/schedulingGates merged by name, container env by
  name, volumeMounts by mountPath); then the v2.1 podTemplateOverrides and the v2.2+
  runtimePatches, in list order, as strategic merge patches (``trainjob_patch``; a runtime
  patch's template metadata joins the JobSet-level labels and annotations); then image, command
  and args on the trainer job's trainer container (named ``node``, else ``trainer``, else the
  first), and resourcesPerNode (merged per resource name into ``limits`` and ``requests``, the
  TrainJob's value winning, as v2.3) and ``trainer.env`` (by name) there and, for MPI, on the
  ``node`` and launcher jobs; initializer ``storageUri`` (``STORAGE_URI``), env and
  ``secretRef`` (envFrom) on the initializer's container. ``restartPolicy`` defaults to
  OnFailure (JobSet's default).
- **ML policies.** The resources per node the policies count are ``trainer.resourcesPerNode``,
  else the runtime's ``node`` container's (``policies.resources``). torch's numProcPerNode is the
  TrainJob's, else the runtime's (``auto``), resolved by ``policies.torch.nproc_per_node``; MPI's
  slots by ``policies.mpi.slots`` (the GPU count for the default 1) and ``mpiImplementation: ""``
  is OpenMPI. The policy plugins' own checks (``trainjob_mlpolicies``) join the TrainJob's and
  the runtime's problems. torchtune's command keeps the immutable configs of the runtime's
  trainer ``node`` container's command (``torchtune.runtime_overrides``).
- **JobSet fields on the pods** (``trainjob_jobset``): the ``coordinator``'s endpoint and its
  checks (the runtime's problems make the TrainJob wait, a podIndex beyond its nodes makes it
  invalid), each replicatedJob's ``groupName``, the ``volumeClaimPolicies`` claims and their
  checks, ``ttlSecondsAfterFinished``, and a Job's pods capped by ``completions``.
- **Lifecycle plans**: each replicatedJob's ``dependsOn`` (startupPolicy InOrder: each on the
  one before it, Ready), the JobSet ``failurePolicy``, and the ignored ``podGroupPolicy``.
- ``runtime_hash`` fingerprints a runtime (kind, name, spec) as 16 hex digits, stable across key
  order, for recording the runtime in effect.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from lattice.api.constants import GROUP_TRAINER
from lattice.api.runtime import (
    ClusterTrainingRuntime,
    ReplicatedJob,
    TrainingRuntime,
    TrainingRuntimeSpec,
)
from lattice.api.trainjob import PodSpecOverride, RuntimeKind, TrainJob
from lattice.frameworks.base import InvalidJob, OperatorContext, Problem
from lattice.frameworks.kubeflow import priority_problems, validation_problems
from lattice.frameworks.policies import mpi as mpi_policy
from lattice.frameworks.policies import torch as torch_policy
from lattice.frameworks.policies import torchtune
from lattice.frameworks.policies.resources import gpus_per_node, node_resources
from lattice.frameworks.trainjob_checks import (
    cross_problems,
    failure_policy,
    ignored_fields,
    not_ready,
    runtime_problems,
    steps,
)
from lattice.frameworks.trainjob_jobset import (
    claim_plans,
    claim_problems,
    completions_problems,
    coordinator_endpoint,
    coordinator_problems,
    pods_per_job,
)
from lattice.frameworks.trainjob_mlpolicies import (
    runtime_node_resources,
    runtime_policy_problems,
    trainjob_problems,
)
from lattice.frameworks.trainjob_patch import (
    patch_problems,
    patched_jobset_meta,
    pod_template_patches,
    runtime_patches,
    strategic_merge,
)
from lattice.frameworks.trainjob_plans import (
    ANCESTOR_DATASET,
    ANCESTOR_MODEL,
    ANCESTOR_TRAINER,
    DEFAULT_BACKOFF_LIMIT,
    LAUNCHER,
    NODE,
    STORAGE_URI,
    MPIPlan,
    ReplicatedJobPlan,
    ResolvedJob,
    RuntimeNotReady,
    TorchPlan,
    main_container,
    upsert,
)
from lattice.frameworks.units import quantity_units
from lattice.primitives.keys import kind_key
from lattice.primitives.objects import Obj

__all__ = ["resolve", "resolve_with", "runtime_hash", "runtime_key"]

# --------------------------------------------------------------------------- lookup


def runtime_key(*, kind: str, namespace: str | None, name: str) -> str:
    """The ``OperatorContext.runtimes`` key of a runtime: ``<kind>/<ns or "">/<name>``."""
    ns = (namespace or "") if kind == RuntimeKind.TRAINING_RUNTIME else ""
    return kind_key(kind=kind, namespace=ns, name=name)


def runtime_hash(runtime: Mapping[str, Any]) -> str:
    """A stable fingerprint of a runtime object (kind, name and spec)."""
    meta = runtime.get("metadata") or {}
    body = {"kind": runtime.get("kind"), "name": meta.get("name"), "spec": runtime.get("spec")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _where(kind: str, namespace: str | None, name: str) -> str:
    if kind == RuntimeKind.TRAINING_RUNTIME:
        return f'{kind} "{namespace or ""}/{name}"'
    return f'{kind} "{name}"'


def resolve(obj: Mapping[str, Any], ctx: OperatorContext) -> ResolvedJob:
    """The TrainJob ``obj`` merged over the runtime it references in ``ctx.runtimes``."""
    tj = _trainjob(obj)
    ref, ns = tj.spec.runtime_ref, tj.metadata.namespace
    runtime = ctx.runtimes.get(runtime_key(kind=ref.kind, namespace=ns, name=ref.name))
    if runtime is None:
        other = next(k for k in RuntimeKind if k != ref.kind)
        if ctx.runtimes.get(runtime_key(kind=other, namespace=ns, name=ref.name)) is not None:
            raise RuntimeNotReady(
                "RuntimeKindMismatch",
                f"{_where(ref.kind, ns, ref.name)} is not found, but a {other} of that name "
                f"exists: spec.runtimeRef.kind must name the runtime's kind",
            )
        raise RuntimeNotReady(
            f"{ref.kind}NotFound",
            f"{_where(ref.kind, ns, ref.name)} referenced by spec.runtimeRef is not found; "
            "the TrainJob starts once it exists",
        )
    return _merge(tj, runtime, ctx)


def resolve_with(
    obj: Mapping[str, Any], runtime: Mapping[str, Any], *, ctx: OperatorContext
) -> ResolvedJob:
    """The TrainJob ``obj`` merged over ``runtime`` (e.g. the snapshot recorded at start)."""
    return _merge(_trainjob(obj), runtime, ctx)


def _trainjob(obj: Mapping[str, Any]) -> TrainJob:
    try:
        tj = TrainJob.model_validate(obj)
    except ValidationError as exc:
        raise InvalidJob(validation_problems(exc)) from None
    problems = priority_problems(tj.metadata.annotations)
    if tj.spec.runtime_ref.api_group != GROUP_TRAINER:
        why = f"must be {GROUP_TRAINER}, got {tj.spec.runtime_ref.api_group!r}"
        problems.append(Problem("spec.runtimeRef.apiGroup", why))
    resources = (tj.spec.trainer.resources_per_node if tj.spec.trainer else None) or {}
    for kind in ("limits", "requests"):
        for res, value in (resources.get(kind) or {}).items():
            where = f"spec.trainer.resourcesPerNode.{kind}[{res}]"
            try:
                units = quantity_units(res, value)
            except ValueError:
                problems.append(Problem(where, f"must be a quantity, got {value!r}"))
                continue
            if units < 0:
                why = f"must be greater than or equal to 0, got {value!r}"
                problems.append(Problem(where, why))
    if problems:
        raise InvalidJob(problems)
    return tj


# --------------------------------------------------------------------------- merge


def _merge(tj: TrainJob, raw: Mapping[str, Any], ctx: OperatorContext) -> ResolvedJob:
    ref, ns = tj.spec.runtime_ref, tj.metadata.namespace
    where = _where(ref.kind, ns, ref.name)
    if raw.get("kind", ref.kind) != ref.kind:
        msg = f"{where} resolves to a {raw.get('kind')}: spec.runtimeRef.kind must match"
        raise RuntimeNotReady("RuntimeKindMismatch", msg)
    model = TrainingRuntime if ref.kind == RuntimeKind.TRAINING_RUNTIME else ClusterTrainingRuntime
    try:
        spec = model.model_validate({**raw, "kind": ref.kind}).spec
    except ValidationError as exc:
        raise not_ready(where, validation_problems(exc)) from None
    ancestors = steps(spec)
    problems = runtime_problems(spec, steps=ancestors, ctx=ctx) + runtime_policy_problems(spec)
    if problems:
        raise not_ready(where, problems)
    ml = spec.ml_policy
    torch_src, mpi_src = (ml.torch, ml.mpi) if ml else (None, None)
    trainer_spec = tj.spec.trainer
    resources = node_resources(
        trainer_spec.resources_per_node if trainer_spec else None,
        runtime_node_resources(spec, ancestors),
    )
    names = [r.name for r in spec.template.spec.replicated_jobs]
    trainer = next(n for n, s in ancestors.items() if s == ANCESTOR_TRAINER)
    num_nodes = (trainer_spec.num_nodes if trainer_spec else None) or (ml.num_nodes if ml else 1)
    num_nodes = num_nodes or 1
    elastic = torch_src.elastic_policy if torch_src else None
    is_elastic = elastic is not None and bool(elastic.min_nodes or elastic.max_nodes)
    lo = hi = num_nodes
    if elastic is not None and is_elastic:
        lo = elastic.min_nodes or elastic.max_nodes or 1
        hi = elastic.max_nodes or lo
    scaled: str | None = trainer
    mpi: MPIPlan | None = None
    if mpi_src is not None:
        scaled = NODE if NODE in names else None
        lo = hi = max(num_nodes - 1, 1) if mpi_src.run_launcher_as_node else num_nodes
        npp = trainer_spec.num_proc_per_node if trainer_spec else None
        mpi = MPIPlan(
            slots=mpi_policy.slots(
                requested=npp if isinstance(npp, int) else None,
                configured=mpi_src.num_proc_per_node,
                gpus=gpus_per_node(resources),
            ),
            implementation=mpi_policy.implementation(mpi_src.mpi_implementation),
            ssh_auth_mount_path=mpi_src.ssh_auth_mount_path,
            run_launcher_as_node=mpi_src.run_launcher_as_node,
        )
    torch: TorchPlan | None = None
    if torch_src is not None:
        npp = trainer_spec.num_proc_per_node if trainer_spec else None
        value = npp if npp is not None else torch_src.num_proc_per_node
        torch = TorchPlan(
            num_proc_per_node=torch_policy.nproc_per_node(value, resources),
            elastic=is_elastic,
            max_restarts=elastic.max_restarts if elastic else None,
            tune_overrides=tuple(torchtune.runtime_overrides(_node_command(spec, trainer))),
        )
    targets = {trainer}
    if mpi is not None:
        targets |= {NODE} | ({LAUNCHER} if mpi.run_launcher_as_node else set())
    plans = tuple(
        _plan(tj, rjob=rjob, step=ancestors.get(rjob.name), trainer=trainer, targets=targets)
        for rjob in spec.template.spec.replicated_jobs
    )
    if (order := spec.template.spec.startup_policy) and order.startup_policy_order == "InOrder":
        plans = tuple(
            dataclasses.replace(p, depends_on=((plans[i - 1].name, "Ready"),) if i else ())
            for i, p in enumerate(plans)
        )
    jobset = spec.template.spec
    name, network = tj.metadata.name or "", jobset.network
    subdomain = (network.subdomain if network else None) or name
    endpoint = coordinator_endpoint(jobset.coordinator, name=name, subdomain=subdomain)
    at_runtime, problems = coordinator_problems(
        jobset.coordinator, plans=plans, scaled=scaled, min_nodes=lo, endpoint=endpoint
    )
    claims = claim_plans(jobset.volume_claim_policies, name=name)
    at_runtime += completions_problems(jobset.replicated_jobs, exempt=(trainer, NODE, LAUNCHER))
    if at_runtime := at_runtime + claim_problems(claims, plans=plans):
        raise not_ready(where, at_runtime)
    problems += patch_problems(tj, names)
    problems += cross_problems(tj, plans=plans, torch=torch, mpi=mpi, scaled=scaled, max_nodes=hi)
    problems += trainjob_problems(tj, ml=ml, resources=resources)
    if problems:
        raise InvalidJob(problems)
    meta = spec.template.metadata
    labels, annotations = patched_jobset_meta(
        tj,
        {**((meta.labels if meta else None) or {}), **(tj.spec.labels or {})},
        {**((meta.annotations if meta else None) or {}), **(tj.spec.annotations or {})},
    )
    policy = jobset.success_policy
    return ResolvedJob(
        trainjob=tj,
        runtime_kind=ref.kind,
        runtime_name=ref.name,
        runtime_hash=runtime_hash({**raw, "kind": ref.kind}),
        replicated_jobs=plans,
        trainer=trainer,
        scaled=scaled,
        min_nodes=lo if scaled else 0,
        max_nodes=hi if scaled else 0,
        torch=torch,
        mpi=mpi,
        labels=labels,
        annotations=annotations,
        success_operator=policy.operator.value if policy else "All",
        success_targets=tuple(
            (policy.target_replicated_jobs if policy else None)
            or [p.name for p in plans if not p.initializer]
        ),
        subdomain=subdomain,
        dns_hostnames=not (network is not None and network.enable_dns_hostnames is False),
        publish_not_ready=not (
            network is not None and network.publish_not_ready_addresses is False
        ),
        ml_policy=ml,
        node_resources=resources,
        failure_policy=failure_policy(spec.template.spec.failure_policy),
        ignored=ignored_fields(spec),
        coordinator=endpoint,
        ttl_seconds_after_finished=jobset.ttl_seconds_after_finished,
        claims=claims,
    )


def _node_command(spec: TrainingRuntimeSpec, trainer: str) -> list[str]:
    """The command of container ``node`` in the runtime's trainer replicatedJob."""
    for rjob in spec.template.spec.replicated_jobs:
        pod = (rjob.template.get("spec") or {}).get("template") or {}
        for container in (pod.get("spec") or {}).get("containers") or ():
            if rjob.name == trainer and container.get("name") == NODE:
                return [str(part) for part in container.get("command") or ()]
    return []


# --------------------------------------------------------------------------- templates


def _plan(
    tj: TrainJob, *, rjob: ReplicatedJob, step: str | None, trainer: str, targets: set[str]
) -> ReplicatedJobPlan:
    """One replicatedJob with podSpecOverrides, trainer and initializer overrides applied."""
    name, job_template = rjob.name, rjob.template
    job_meta = job_template.get("metadata") or {}
    job_spec = job_template.get("spec") or {}
    pod: Obj = copy.deepcopy(dict(job_spec.get("template") or {}))
    spec: Obj = dict(pod.get("spec") or {})
    for override in tj.spec.pod_spec_overrides or ():
        if any(t.name == name for t in override.target_jobs):
            spec = _override(spec, override)
    pod["spec"] = spec
    for patch in pod_template_patches(tj, name):
        pod = strategic_merge(pod, patch)
    for job_patch in runtime_patches(tj, name):
        job_meta = strategic_merge(job_meta, job_patch.get("metadata") or {})
        pod = strategic_merge(pod, (job_patch.get("spec") or {}).get("template") or {})
    spec = dict(pod.get("spec") or {})
    containers: list[Obj] = [dict(c) for c in spec.get("containers") or ()]
    trainer_spec = tj.spec.trainer
    at = main_container(containers, step)
    if trainer_spec is not None and at is not None and name in targets:
        main = containers[at]
        if name == trainer:
            for field in ("image", "command", "args"):
                if getattr(trainer_spec, field) is not None:
                    main[field] = copy.deepcopy(getattr(trainer_spec, field))
        resources = trainer_spec.resources_per_node or {}
        if resources.get("limits") is not None or resources.get("requests") is not None:
            main["resources"] = merged_resources(main.get("resources") or {}, resources)
        main["env"] = upsert(main.get("env"), trainer_spec.env or (), key="name")
    init = tj.spec.initializer
    sources = {ANCESTOR_DATASET: init.dataset, ANCESTOR_MODEL: init.model} if init else {}
    source = sources.get(step or "")
    if source is not None and at is not None:
        main = containers[at]
        env = [{"name": STORAGE_URI, "value": source.storage_uri}] if source.storage_uri else []
        main["env"] = upsert(main.get("env"), [*env, *(source.env or ())], key="name")
        if source.secret_ref is not None:
            ref = {"secretRef": {"name": source.secret_ref.name}}
            main["envFrom"] = [*(main.get("envFrom") or ()), ref]
    spec["containers"] = containers
    spec.setdefault("restartPolicy", "OnFailure")
    pod["spec"] = spec
    single = step is not None or name in (trainer, NODE, LAUNCHER)
    counted = name in (trainer, NODE, LAUNCHER)  # Trainer sets their parallelism itself
    return ReplicatedJobPlan(
        name=name,
        step=step,
        replicas=1 if single else max(rjob.replicas, 1),
        parallelism=max(int(job_spec.get("parallelism") or 1), 1)
        if counted
        else pods_per_job(job_spec),
        labels=dict(job_meta.get("labels") or {}),
        annotations=dict(job_meta.get("annotations") or {}),
        template=pod,
        backoff_limit=int(job_spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)),
        depends_on=tuple((d.name, d.status.value) for d in rjob.depends_on or ()),
        group=rjob.group_name,
    )


def merged_resources(base: Mapping[str, Any], override: Mapping[str, Any]) -> Obj:
    """``resourcesPerNode`` merged over the container's resources, as Trainer v2.3 does: per
    resource name within ``limits`` and ``requests``, the TrainJob's value wins and every other
    runtime entry is kept."""
    merged = strategic_merge(
        {k: base[k] for k in ("limits", "requests", "claims") if base.get(k) is not None},
        {k: override[k] for k in ("limits", "requests", "claims") if override.get(k) is not None},
    )
    return merged


def _override(spec: Mapping[str, Any], override: PodSpecOverride) -> Obj:
    """``spec`` with one podSpecOverride applied (see the module docstring)."""
    result = copy.deepcopy(dict(spec))
    if override.service_account_name is not None:
        result["serviceAccountName"] = override.service_account_name
    if override.node_selector is not None:
        result["nodeSelector"] = {**(result.get("nodeSelector") or {}), **override.node_selector}
    if override.tolerations is not None:
        result["tolerations"] = copy.deepcopy(override.tolerations)
    if override.volumes is not None:
        result["volumes"] = upsert(result.get("volumes"), override.volumes, key="name")
    if override.scheduling_gates is not None:
        gates = [g.model_dump(by_alias=True, exclude_none=True) for g in override.scheduling_gates]
        result["schedulingGates"] = upsert(result.get("schedulingGates"), gates, key="name")
    for field, changes in (
        ("initContainers", override.init_containers),
        ("containers", override.containers),
    ):
        containers = [dict(c) for c in result.get(field) or ()]
        for change in changes or ():
            for container in containers:
                if container.get("name") == change.name:
                    if change.env is not None:
                        container["env"] = upsert(container.get("env"), change.env, key="name")
                    if change.volume_mounts is not None:
                        mounts = upsert(
                            container.get("volumeMounts"), change.volume_mounts, key="mountPath"
                        )
                        container["volumeMounts"] = mounts
        if field in result:
            result[field] = containers
    return result
