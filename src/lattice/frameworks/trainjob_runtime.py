"""TrainJob runtime resolution: a TrainJob merged over its (Cluster)TrainingRuntime, pure.

Contract (facts from Kubeflow Trainer v2.0.0 and JobSet v0.8; the plugin is ``trainjob``):

- ``resolve(obj, ctx)`` looks the runtime up in ``ctx.runtimes`` under ``runtime_key`` and merges;
  ``resolve_with(obj, runtime, ctx)`` merges over a runtime object the caller holds (a recorded
  snapshot). Either returns a :class:`ResolvedJob` or raises:
  :class:`~lattice.frameworks.base.InvalidJob` when the TrainJob can never run as written
  (schema, ``runtimeRef.apiGroup``, the priority annotation, reserved ``PET_*`` env, numProcPerNode,
  podSpecOverrides naming what the runtime lacks, initializers the runtime lacks, pod hostnames
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
  name, volumeMounts by mountPath); then image, command and args on the trainer job's trainer
  container (named ``node``, else ``trainer``, else the first), and resourcesPerNode (replacing
  ``resources``) and ``trainer.env`` (by name) there and, for MPI, on the ``node`` and launcher
  jobs; initializer ``storageUri`` (``STORAGE_URI``), env and ``secretRef`` (envFrom) on the
  initializer's container. ``restartPolicy`` defaults to OnFailure (JobSet's default).
- **numProcPerNode** (torch): the TrainJob's, else the runtime's (``auto``). With resourcesPerNode,
  ``cpu``, and ``auto`` without a resource whose name contains ``gpu``, become the CPU count
  (requests, else limits, rounded up, at least 1); integers and ``gpu`` pass through (v2.1's
  reading: v2.0.0 turned ``auto`` with a GPU only in ``limits`` into 1).
- ``runtime_hash`` fingerprints a runtime (kind, name, spec) as 16 hex digits, stable across key
  order, for recording the runtime in effect.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from lattice.api.constants import GROUP_TRAINER, LABEL_TRAINJOB_ANCESTOR
from lattice.api.runtime import (
    ClusterTrainingRuntime,
    ReplicatedJob,
    TrainingRuntime,
    TrainingRuntimeSpec,
)
from lattice.api.trainjob import PodSpecOverride, RuntimeKind, TrainJob
from lattice.frameworks.base import InvalidJob, JobNotReady, OperatorContext, Problem
from lattice.frameworks.pods import (
    priority_problems,
    quantity_units,
    template_containers,
    unit_problems,
    validation_problems,
)
from lattice.primitives.keys import kind_key

__all__ = [
    "ANCESTOR_DATASET",
    "ANCESTOR_MODEL",
    "ANCESTOR_TRAINER",
    "DATASET_MOUNT_PATH",
    "INITIALIZERS",
    "INITIALIZER_VOLUME",
    "LAUNCHER",
    "MODEL_MOUNT_PATH",
    "NODE",
    "RESERVED_TORCH_ENV",
    "MPIPlan",
    "ReplicatedJobPlan",
    "ResolvedJob",
    "RuntimeNotReady",
    "TorchPlan",
    "main_container",
    "num_proc_per_node",
    "resolve",
    "resolve_with",
    "runtime_hash",
    "runtime_key",
    "upsert",
]

Obj = dict[str, Any]

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
_STORAGE_URI = "STORAGE_URI"
_DEFAULT_BACKOFF_LIMIT = 6  # batch/v1 Job default
_NPROC_WORDS = ("auto", "cpu", "gpu")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class RuntimeNotReady(JobNotReady):
    """The referenced runtime is missing or unusable: the TrainJob waits (never fails) for it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchPlan:
    """``mlPolicy.torch`` in effect: ``PET_NPROC_PER_NODE`` and the elastic settings."""

    num_proc_per_node: str
    elastic: bool = False
    max_restarts: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MPIPlan:
    """``mlPolicy.mpi`` in effect (``slots`` is numProcPerNode after the TrainJob's override)."""

    slots: int
    implementation: str
    ssh_auth_mount_path: str
    run_launcher_as_node: bool


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
            try:
                quantity_units(res, value)
            except ValueError:
                where = f"spec.trainer.resourcesPerNode.{kind}[{res}]"
                problems.append(Problem(where, f"must be a quantity, got {value!r}"))
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
        raise _not_ready(where, validation_problems(exc)) from None
    steps = _steps(spec)
    problems = _runtime_problems(spec, steps=steps, ctx=ctx)
    if problems:
        raise _not_ready(where, problems)
    ml = spec.ml_policy
    torch_src, mpi_src = (ml.torch, ml.mpi) if ml else (None, None)
    trainer_spec = tj.spec.trainer
    names = [r.name for r in spec.template.spec.replicated_jobs]
    trainer = next(n for n, s in steps.items() if s == ANCESTOR_TRAINER)
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
            slots=npp if isinstance(npp, int) else mpi_src.num_proc_per_node,
            implementation=mpi_src.mpi_implementation,
            ssh_auth_mount_path=mpi_src.ssh_auth_mount_path,
            run_launcher_as_node=mpi_src.run_launcher_as_node,
        )
    torch: TorchPlan | None = None
    if torch_src is not None:
        npp = trainer_spec.num_proc_per_node if trainer_spec else None
        value = npp if npp is not None else torch_src.num_proc_per_node
        resources = trainer_spec.resources_per_node if trainer_spec else None
        torch = TorchPlan(
            num_proc_per_node=num_proc_per_node(value, resources),
            elastic=is_elastic,
            max_restarts=elastic.max_restarts if elastic else None,
        )
    targets = {trainer}
    if mpi is not None:
        targets |= {NODE} | ({LAUNCHER} if mpi.run_launcher_as_node else set())
    plans = tuple(
        _plan(tj, rjob=rjob, step=steps.get(rjob.name), trainer=trainer, targets=targets)
        for rjob in spec.template.spec.replicated_jobs
    )
    problems = _cross_problems(tj, plans=plans, torch=torch, mpi=mpi, scaled=scaled, max_nodes=hi)
    if problems:
        raise InvalidJob(problems)
    meta = spec.template.metadata
    policy = spec.template.spec.success_policy
    network = spec.template.spec.network
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
        labels={**((meta.labels if meta else None) or {}), **(tj.spec.labels or {})},
        annotations={**((meta.annotations if meta else None) or {}), **(tj.spec.annotations or {})},
        success_operator=policy.operator.value if policy else "All",
        success_targets=tuple(
            (policy.target_replicated_jobs if policy else None)
            or [p.name for p in plans if not p.initializer]
        ),
        subdomain=(network.subdomain if network else None) or (tj.metadata.name or ""),
        dns_hostnames=not (network is not None and network.enable_dns_hostnames is False),
        publish_not_ready=not (
            network is not None and network.publish_not_ready_addresses is False
        ),
    )


def _not_ready(where: str, problems: Sequence[Problem]) -> RuntimeNotReady:
    """``InvalidMLPolicy`` when every problem is in ``spec.mlPolicy``, else ``InvalidRuntime``."""
    ml = all(p.field.startswith("spec.mlPolicy") for p in problems)
    text = "; ".join(str(p) for p in problems)
    return RuntimeNotReady(
        "InvalidMLPolicy" if ml else "InvalidRuntime", f"{where} is invalid: {text}"
    )


def _steps(spec: TrainingRuntimeSpec) -> dict[str, str]:
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


def _runtime_problems(
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
        elif not ctx.node_mode:
            problems += unit_problems(containers, ctx.scheduling_unit, field=f"{field}.containers")
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


def num_proc_per_node(value: int | str, resources: Mapping[str, Any] | None) -> str:
    """``PET_NPROC_PER_NODE`` from numProcPerNode and resourcesPerNode (module docstring)."""
    text = str(value)
    if resources is None or text not in ("cpu", "auto"):
        return text

    def amount(pick: Callable[[str], bool]) -> int:
        for kind in ("requests", "limits"):
            found = [v for k, v in (resources.get(kind) or {}).items() if pick(k)]
            units = quantity_units("cpu", found[0]) if found else 0
            if units:
                return math.ceil(units / 1000)
        return 0

    if text == "auto" and amount(lambda name: "gpu" in name.lower()):
        return text
    return str(max(1, amount(lambda name: name == "cpu")))


# --------------------------------------------------------------------------- templates


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
            main["resources"] = {
                k: dict(resources[k])
                for k in ("limits", "requests")
                if resources.get(k) is not None
            }
        main["env"] = upsert(main.get("env"), trainer_spec.env or (), key="name")
    init = tj.spec.initializer
    sources = {ANCESTOR_DATASET: init.dataset, ANCESTOR_MODEL: init.model} if init else {}
    source = sources.get(step or "")
    if source is not None and at is not None:
        main = containers[at]
        env = [{"name": _STORAGE_URI, "value": source.storage_uri}] if source.storage_uri else []
        main["env"] = upsert(main.get("env"), [*env, *(source.env or ())], key="name")
        if source.secret_ref is not None:
            ref = {"secretRef": {"name": source.secret_ref.name}}
            main["envFrom"] = [*(main.get("envFrom") or ()), ref]
    spec["containers"] = containers
    spec.setdefault("restartPolicy", "OnFailure")
    pod["spec"] = spec
    single = step is not None or name in (trainer, NODE, LAUNCHER)
    return ReplicatedJobPlan(
        name=name,
        step=step,
        replicas=1 if single else max(rjob.replicas, 1),
        parallelism=max(int(job_spec.get("parallelism") or 1), 1),
        labels=dict(job_meta.get("labels") or {}),
        annotations=dict(job_meta.get("annotations") or {}),
        template=pod,
        backoff_limit=int(job_spec.get("backoffLimit", _DEFAULT_BACKOFF_LIMIT)),
    )


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


# --------------------------------------------------------------------------- cross checks


def _cross_problems(
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
