"""The TrainJob (``trainer.kubeflow.org/v1alpha1``) plugin: the runtime's JobSet-shaped template
interpreted directly into pods (no JobSet, no batch Jobs), scheduled as a gang or elastically.

Contract (see ``lattice.frameworks.base`` for the protocol, ``trainjob_runtime`` for the merge):

- **Parse** is ``trainjob_runtime.resolve``: a :class:`ResolvedJob`, ``InvalidJob``, or
  ``RuntimeNotReady`` - *not* an ``InvalidJob``: the reconciler shows it as a waiting condition
  and parses again when the runtime changes. ``spec.managedBy``: ``base.managed_elsewhere``.
- **Demand.** Sizes count the gang's pods, initializers excluded (they run to completion
  before the trainer pods exist, on capacity the job already holds). The scaled job
  (torch/plain trainer, MPI ``node``) gives ``[min_nodes, max_nodes]``, plus every other pod as
  a fixed pod (the MPI launcher). Units: node
  mode 1 per pod; else the pod's containers' requests of the unit (limits when no request), at
  least 1 for a scaled pod and for a launcher run as a node. Priority: the first known
  ``priorityClassName`` of the trainer pod template, then the other templates in order
  (initializers last), the ``lattice.breezeml.ai/priority`` annotation, ``ctx.default_priority``.
  Suspended: ``spec.suspend``.
- **Run policy.** cleanPodPolicy Running (JobSet deletes its active Jobs when it finishes and
  keeps the finished ones); backoffLimit the smallest Job ``backoffLimit`` (default 6).
- **Children** at size > 0 (none at 0): per non-initializer job ``r``, Job index ``j`` and pod
  ``i``, the pod ``<tj>-<r>-<j>-<i>`` with that hostname, ``subdomain`` (network.subdomain, else
  ``<tj>``; none when enableDNSHostnames is false), restartPolicy from the template (OnFailure by
  default), ``JOB_COMPLETION_INDEX`` in every container, the operator's placement. Labels: the
  JobSet-level, Job and pod template labels, then ``jobset.sigs.k8s.io/{jobset-name,
  replicatedjob-name, replicatedjob-replicas, global-replicas, job-index, job-global-index,
  job-key, restart-attempt}``, ``batch.kubernetes.io/job-completion-index`` and ``job-name``,
  ``training.kubeflow.org/{job-name, operator-name, replica-type, replica-index}`` and
  ``MANAGED_LABEL``; annotations likewise with the jobset and completion-index keys. A controller
  ownerReference on everything. One headless Service ``<subdomain>`` selecting
  ``jobset-name=<tj>``, ``publishNotReadyAddresses`` from the runtime (default true).
- **Torch** on the trainer container: ``PET_NNODES`` (numNodes, or ``min:max`` elastic),
  ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` (fieldRef to the completion-index annotation),
  ``PET_MASTER_ADDR=<tj>-<trainer job>-0-0.<subdomain>``, ``PET_MASTER_PORT=29500`` and the
  container port 29500; elastic adds ``PET_RDZV_BACKEND=c10d``, ``PET_RDZV_ENDPOINT=<master
  addr>:29500``, ``PET_RDZV_ID=<uid>`` and ``PET_MAX_RESTARTS`` (maxRestarts, else 100 unless set).
- **MPI**: ConfigMap ``<tj>-mpi-hostfile`` (``hostfile``: ``<tj>-<r>-0-<i>.<subdomain>
  slots=<n>``, the launcher first with runLauncherAsNode, then ``node``), Secret
  ``<tj>-mpi-ssh-auth`` (``pods.ssh_auth_secret``, keys filled by the reconciler), the volume
  ``mpi-ssh-auth`` on launcher and node pods mounted at sshAuthMountPath, ``mpi-hostfile`` at
  ``/etc/mpi`` and the OpenMPI env on the launcher.
- **Initializers**: ``initializer_children`` gives their pods (same naming and labels); the
  reconciler creates the trainer children only once ``initializers_succeeded``. When a pod has
  the runtime's ``initializer`` volume, an initializer's main container gets it at its output
  path (``/workspace/dataset`` / ``/workspace/model``) and the trainer's at both, unless a mount
  already covers the path.
- **Progress** over the undeleted pods named as desired at ``size``: a Failed pod that was evicted
  or disruption-targeted is recreated; any other Failed pod (initializer or not) fails the job
  (``FailedJobs``, naming the pod and exit code). Success follows successPolicy (All/Any of the
  targeted jobs, a job done when every pod index Succeeded; default All over the non-initializer
  jobs). ``running``: every desired non-initializer pod is Running or Succeeded.
  ``jobs_status`` computes ``status.jobsStatus`` as JobSet counts its Jobs.

Capabilities used by the generic reconciler (``lattice.frameworks.base``):

- ``StagesChildren``: at size > 0 the initializer pods first, the trainer pods only once every
  initializer Succeeded; at size 0 (waiting, suspended, preempted) the Succeeded initializer pods
  are kept, never recreated.
- ``PinsInputs``: the runtime in effect is pinned, when the job first gets pods, in the owned
  ConfigMap ``<tj>-runtime`` (``runtime.json``: the runtime object; ``hash``: ``runtime_hash``;
  also the annotation ``trainer.kubeflow.org/runtime-hash`` on the ConfigMap). From then on the
  job resolves over that snapshot (``resolve_with``): editing or deleting the runtime never
  changes a started job. (A ConfigMap, not an annotation on the TrainJob: the operator has no
  write access to TrainJob objects, only to their status, whose schema prunes unknown fields.)
- ``RendersStatus``: the stored status is Trainer's: metav1 conditions ``Suspended`` (reasons
  ``Suspended``, ``Resumed``, and ``Preempted`` when the scheduler took the pods back),
  ``Complete`` (reason ``AllJobsCompleted``, JobSet's) and ``Failed``, each with
  ``observedGeneration``; ``jobsStatus``; and, while the runtime is missing or unusable,
  ``Created=False`` with the ``RuntimeNotReady`` reason (e.g. ``ClusterTrainingRuntimeNotFound``)
  and message, removed once it resolves. Kubeflow's ``Created``/``Running``/``Restarting`` are
  never stored; the reconciler's working ``Created`` and ``Running`` are derived from
  ``jobsStatus`` (``Running``: some Job active or ready).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice.api.common import ConditionStatus
from lattice.api.conditions import set_status_condition
from lattice.api.constants import (
    LABEL_JOB_NAME,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    TRAINJOB,
    Resource,
)
from lattice.api.trainjob import Condition
from lattice.frameworks.base import (
    MANAGED_LABEL,
    Children,
    Demand,
    Messages,
    OperatorContext,
    PodView,
    Progress,
    ReplicaCounts,
    RunPolicyView,
)
from lattice.frameworks.pods import (
    container_units,
    exit_code,
    headless_service,
    is_disrupted,
    job_priority,
    owner_reference,
    pod_manifest,
    ssh_auth_secret,
    template_containers,
    with_placement,
)
from lattice.frameworks.trainingjob import DEFAULT_MAX_RESTARTS
from lattice.frameworks.trainjob_runtime import (
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
    resolve,
    resolve_with,
    runtime_hash,
    runtime_key,
    upsert,
)

__all__ = [
    "ANNOTATION_RUNTIME_HASH",
    "LABEL_COMPLETION_INDEX",
    "LABEL_JOBSET_NAME",
    "LABEL_REPLICATED_JOB",
    "MASTER_PORT",
    "OPERATOR_NAME",
    "REASON_COMPLETED",
    "REASON_FAILED_JOBS",
    "TrainJobMessages",
    "TrainJobPlugin",
    "hostfile",
    "initializers_succeeded",
    "jobs_status",
    "pod_name",
]

Obj = dict[str, Any]

#: ``training.kubeflow.org/operator-name`` of TrainJob pods.
OPERATOR_NAME = "trainjob-controller"
MASTER_PORT = 29500
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_JOBSET = "jobset.sigs.k8s.io/"
#: JobSet's reason (and message prefix) for a failed Job, which upstream copies to the TrainJob.
REASON_FAILED_JOBS = "FailedJobs"
_FAILED_MESSAGE = "jobset failed due to one or more job failures"
#: JobSet's reason for a completed JobSet, which upstream copies to the TrainJob's Complete.
REASON_COMPLETED = "AllJobsCompleted"
#: The runtime fingerprint on the pin ConfigMap ``<tj>-runtime``.
ANNOTATION_RUNTIME_HASH = "trainer.kubeflow.org/runtime-hash"
_PIN_KEY = "runtime.json"
_INDEX_REF = {"fieldRef": {"fieldPath": f"metadata.annotations['{LABEL_COMPLETION_INDEX}']"}}
_MPI_DIR = "/etc/mpi"
_SSH_VOLUME, _HOSTFILE_VOLUME = "mpi-ssh-auth", "mpi-hostfile"
_RSH_ARGS = "-o ConnectionAttempts=10"


@dataclass(frozen=True, slots=True)
class _Slot:
    """One desired pod: Job ``job`` of replicatedJob ``rjob``, completion index ``index``."""

    rjob: ReplicatedJobPlan
    job: int
    index: int
    name: str


def pod_name(job: ResolvedJob, rjob: str, job_index: int, index: int) -> str:
    """``<tj>-<rjob>-<job index>-<pod index>``, the pod name and hostname JobSet gives."""
    return f"{job.name}-{rjob}-{job_index}-{index}"


def _counts(job: ResolvedJob, size: int) -> dict[str, int]:
    """Pods per Job of every replicatedJob at ``size`` (the scaled job takes what is left)."""
    fixed = sum(r.replicas * r.parallelism for r in _fixed(job))
    return {
        r.name: max(size - fixed, 0) if r.name == job.scaled else r.parallelism
        for r in job.replicated_jobs
    }


def _fixed(job: ResolvedJob) -> list[ReplicatedJobPlan]:
    return [r for r in job.replicated_jobs if not r.initializer and r.name != job.scaled]


def _max_size(job: ResolvedJob) -> int:
    return sum(r.replicas * r.parallelism for r in _fixed(job)) + job.max_nodes


def _slots(job: ResolvedJob, size: int, *, initializers: bool) -> Iterator[_Slot]:
    counts = _counts(job, size)
    for r in job.replicated_jobs:
        if r.initializer == initializers:
            for j in range(r.replicas):
                for i in range(counts[r.name]):
                    yield _Slot(r, j, i, pod_name(job, r.name, j, i))


def hostfile(job: ResolvedJob, *, size: int | None = None) -> str:
    """The MPI ``hostfile`` at ``size`` (default: the full size): one line per node pod."""
    if job.mpi is None:
        return ""
    counts = _counts(job, size or _max_size(job))
    hosts = [LAUNCHER] if job.mpi.run_launcher_as_node else []
    lines = ""
    for r in job.replicated_jobs:
        if r.name in (*hosts, NODE):
            for i in range(counts[r.name]):
                lines += f"{pod_name(job, r.name, 0, i)}.{job.subdomain} slots={job.mpi.slots}\n"
    return lines


def initializers_succeeded(job: ResolvedJob, pods: Sequence[PodView]) -> bool:
    """Whether every initializer pod exists, undeleted, and Succeeded (True without any)."""
    done = {p.name for p in pods if p.deletion_timestamp is None and p.phase == "Succeeded"}
    return all(s.name in done for s in _slots(job, 0, initializers=True))


class TrainJobMessages(Messages):
    """Trainer's wording (``TrainJob is suspended``...) and JobSet's completion message."""

    def succeeded(self, ns: str, name: str) -> str:
        del ns, name
        return "jobset completed successfully"

    def suspended(self, ns: str, name: str) -> str:
        del ns, name
        return "TrainJob is suspended"

    def resumed(self, ns: str, name: str) -> str:
        del ns, name
        return "TrainJob is resumed"


#: Working (Kubeflow) Suspended reasons and the stored (Trainer) ones.
_SUSPENDED_REASONS = {"TrainJobSuspended": "Suspended", "TrainJobResumed": "Resumed"}


class TrainJobPlugin:
    """``JobPlugin[ResolvedJob]``: stateless; see the module docstring for every rule."""

    messages = TrainJobMessages("TrainJob")

    @property
    def resource(self) -> Resource:
        return TRAINJOB

    @property
    def scheduling_path(self) -> tuple[str, ...]:
        return ("status", "lattice")

    @property
    def exec_path(self) -> tuple[str, ...]:
        return ("status",)

    @property
    def preempted_condition(self) -> str:
        return "Suspended"

    def parse(self, obj: Mapping[str, Any], ctx: OperatorContext) -> ResolvedJob:
        return resolve(obj, ctx)

    def names_runtime(self, obj: Mapping[str, Any], runtime: Mapping[str, Any]) -> bool:
        """``ReadsRuntimes``: ``spec.runtimeRef.name`` is the runtime's name."""
        ref = (obj.get("spec") or {}).get("runtimeRef") or {}
        return bool(ref.get("name") == (runtime.get("metadata") or {}).get("name"))

    # ----------------------------------------------------------------------- scheduling

    def demand(self, job: ResolvedJob, ctx: OperatorContext) -> Demand:
        def units(r: ReplicatedJobPlan) -> int:
            return 1 if ctx.node_mode else container_units(template_containers(r.template), unit)

        unit = ctx.scheduling_unit
        fixed: list[int] = []
        for r in _fixed(job):
            n = units(r)
            if r.name == LAUNCHER and job.mpi is not None and job.mpi.run_launcher_as_node:
                n = n or 1
            fixed += [n] * (r.replicas * r.parallelism)
        scaled = max(units(job.rjob(job.scaled)), 1) if job.scaled else 1
        order = sorted(job.replicated_jobs, key=lambda r: (r.name != job.trainer, r.initializer))
        classes = [(r.template.get("spec") or {}).get("priorityClassName") for r in order]
        annotations = job.trainjob.metadata.annotations
        return Demand(
            priority=job_priority(classes=classes, annotations=annotations, ctx=ctx),
            min_size=len(fixed) + job.min_nodes,
            max_size=len(fixed) + job.max_nodes,
            fixed_pods=tuple(fixed),
            replica_units=scaled,
            suspended=job.suspend,
        )

    def run_policy(self, job: ResolvedJob) -> RunPolicyView:
        limits = [r.backoff_limit for r in job.replicated_jobs if not r.initializer]
        return RunPolicyView(clean_pod_policy="Running", backoff_limit=min(limits, default=None))

    # ----------------------------------------------------------------------- children

    def children(self, job: ResolvedJob, *, size: int, ctx: OperatorContext) -> Children:
        if size <= 0:
            return Children()
        owner = _owner(job)
        pods = _pods(job, _slots(job, size, initializers=False), owner=owner, ctx=ctx)
        labels = {LABEL_JOBSET_NAME: job.name, MANAGED_LABEL: "true"}
        services: tuple[Obj, ...] = ()
        if job.dns_hostnames:
            service = headless_service(
                name=job.subdomain,
                namespace=job.namespace,
                labels={**job.labels, **labels},
                selector={LABEL_JOBSET_NAME: job.name},
                ports=(),
                owner=owner,
            )
            del service["spec"]["ports"]
            service["spec"]["publishNotReadyAddresses"] = job.publish_not_ready
            services = (service,)
        if job.mpi is None:
            return Children(pods=pods, services=services)
        config: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{job.name}-mpi-hostfile", job, labels, owner),
            "data": {"hostfile": hostfile(job, size=size)},
        }
        secret = ssh_auth_secret(
            name=f"{job.name}-mpi-ssh-auth", namespace=job.namespace, labels=labels, owner=owner
        )
        return Children(pods=pods, services=services, config_maps=(config,), secrets=(secret,))

    def initializer_children(self, job: ResolvedJob, *, ctx: OperatorContext) -> Children:
        """The dataset/model initializer pods; the trainer children wait until they Succeeded."""
        slots = _slots(job, 0, initializers=True)
        return Children(pods=_pods(job, slots, owner=_owner(job), ctx=ctx))

    # ----------------------------------------------------------------------- status

    def progress(
        self,
        job: ResolvedJob,
        *,
        size: int,
        pods: Sequence[PodView],
        others: Mapping[str, Mapping[str, Any]],
    ) -> Progress:
        if size <= 0:
            return Progress()
        slots = {s.name: s for init in (True, False) for s in _slots(job, size, initializers=init)}
        mine = {p.name: p for p in pods if p.deletion_timestamp is None and p.name in slots}
        replicas: dict[str, ReplicaCounts] = {}
        for r in job.replicated_jobs:
            of = [p for p in mine.values() if slots[p.name].rjob is r]
            replicas[r.name] = ReplicaCounts(
                active=sum(1 for p in of if p.phase in ("Pending", "Running")),
                succeeded=sum(1 for p in of if p.phase == "Succeeded"),
                failed=sum(1 for p in of if p.phase == "Failed"),
            )
        recreate: list[str] = []
        for name, slot in slots.items():
            pod = mine.get(name)
            if pod is None or pod.phase != "Failed":
                continue
            if is_disrupted(pod):
                recreate.append(name)
                continue
            message = f"{_FAILED_MESSAGE}: {_failure(slot, pod)}"
            return Progress(replicas=replicas, failed=message, failed_reason=REASON_FAILED_JOBS)
        if _succeeded(job, size, mine):
            return Progress(replicas=replicas, succeeded=True)
        running = all(
            name in mine and mine[name].phase in ("Running", "Succeeded")
            for name, slot in slots.items()
            if not slot.rjob.initializer
        )
        return Progress(
            replicas=replicas,
            running=running and not recreate,
            restarting=bool(recreate),
            recreate=tuple(recreate),
        )

    # ----------------------------------------------------------------------- capabilities

    def staged_children(
        self,
        job: ResolvedJob,
        desired: Children,
        *,
        size: int,
        pods: Sequence[PodView],
        ctx: OperatorContext,
    ) -> Children:
        init = self.initializer_children(job, ctx=ctx).pods
        if size <= 0:
            done = {p.name for p in pods if p.deletion_timestamp is None and p.phase == "Succeeded"}
            kept = tuple(p for p in init if p["metadata"]["name"] in done)
            return dataclasses.replace(desired, pods=(*kept, *desired.pods))
        if initializers_succeeded(job, pods):
            return dataclasses.replace(desired, pods=(*init, *desired.pods))
        return dataclasses.replace(desired, pods=init)

    def pinned_name(self, obj: Mapping[str, Any]) -> str:
        return f"{(obj.get('metadata') or {}).get('name', '')}-runtime"

    def pin(self, obj: Mapping[str, Any], ctx: OperatorContext) -> Obj | None:
        job = resolve(obj, ctx)
        ref, ns = job.trainjob.spec.runtime_ref, job.namespace
        raw = ctx.runtimes.get(runtime_key(kind=ref.kind, namespace=ns, name=ref.name))
        if raw is None:
            return None
        meta = raw.get("metadata") or {}
        kept = {k: meta[k] for k in ("name", "namespace", "generation") if k in meta}
        runtime = {"apiVersion": raw.get("apiVersion"), "kind": raw.get("kind")}
        runtime.update(metadata=kept, spec=raw.get("spec"))
        digest = runtime_hash(runtime)
        labels = {LABEL_JOBSET_NAME: job.name, MANAGED_LABEL: "true"}
        config: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(self.pinned_name(obj), job, labels, _owner(job)),
            "data": {_PIN_KEY: json.dumps(runtime, sort_keys=True), "hash": digest},
        }
        config["metadata"]["annotations"] = {ANNOTATION_RUNTIME_HASH: digest}
        return config

    def parse_pinned(
        self, obj: Mapping[str, Any], pinned: Mapping[str, Any], ctx: OperatorContext
    ) -> ResolvedJob:
        text = (pinned.get("data") or {}).get(_PIN_KEY)
        try:
            runtime = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            runtime = None
        if not isinstance(runtime, dict):
            return resolve(obj, ctx)  # an unreadable pin: the live runtime, as before pinning
        return resolve_with(obj, runtime, ctx=ctx)

    def read_status(self, stored: Mapping[str, Any]) -> Obj:
        back = {v: k for k, v in _SUSPENDED_REASONS.items()}
        conditions: list[Obj] = []
        for raw in stored.get("conditions") or ():
            if not isinstance(raw, Mapping):
                continue
            type_, reason = raw.get("type"), raw.get("reason")
            if type_ == "Complete":
                type_ = "Succeeded"
            elif type_ == "Suspended":
                reason = back.get(str(reason), reason)
            when = raw.get("lastTransitionTime")
            entry = {"type": type_, "status": raw.get("status"), "reason": reason}
            entry.update(message=raw.get("message"), lastUpdateTime=when, lastTransitionTime=when)
            conditions.append({k: v for k, v in entry.items() if v is not None})
        jobs = [j for j in stored.get("jobsStatus") or () if isinstance(j, Mapping)]
        if jobs and not any(c.get("type") == "Created" for c in conditions):
            conditions.append({"type": "Created", "status": "True", "reason": "TrainJobCreated"})
        if any(int(j.get("active") or 0) + int(j.get("ready") or 0) > 0 for j in jobs):
            conditions.append({"type": "Running", "status": "True", "reason": "TrainJobRunning"})
        return {"conditions": conditions, "jobsStatus": [dict(j) for j in jobs]}

    def observed_status(
        self, job: ResolvedJob, *, size: int, pods: Sequence[PodView], suspended: bool
    ) -> Obj:
        return {"jobsStatus": jobs_status(job, pods, size=size, suspended=suspended)}

    def render_status(
        self,
        block: Mapping[str, Any],
        *,
        stored: Mapping[str, Any],
        generation: int | None,
        now: datetime,
    ) -> Obj:
        conditions: list[Condition] = []
        for raw in stored.get("conditions") or ():
            try:
                conditions.append(Condition.model_validate(raw))
            except ValueError:
                continue
        working = {
            c.get("type"): c for c in block.get("conditions") or () if isinstance(c, Mapping)
        }
        if not any(
            c.get("type") == "Created" and c.get("status") == "False" for c in working.values()
        ):
            conditions = [c for c in conditions if c.type != "Created"]
        for kind, c in working.items():
            status, reason = str(c.get("status")), str(c.get("reason") or "")
            if kind in ("Running", "Restarting") or (kind == "Created" and status == "True"):
                continue
            stored_type = str(kind)
            if kind == "Succeeded":
                stored_type, reason = "Complete", REASON_COMPLETED
            elif kind == "Suspended":
                reason = _SUSPENDED_REASONS.get(reason, reason)
            conditions = set_status_condition(
                conditions,
                type=stored_type,
                status=ConditionStatus(status),
                reason=reason,
                message=str(c.get("message") or ""),
                now=now,
                observed_generation=generation,
            )
        out: Obj = {
            "conditions": [
                c.model_dump(by_alias=True, exclude_none=True, mode="json") for c in conditions
            ]
        }
        jobs = block.get("jobsStatus")
        if jobs:
            out["jobsStatus"] = [dict(j) for j in jobs]
        return out


def _failure(slot: _Slot, pod: PodView) -> str:
    containers = template_containers(slot.rjob.template)
    at = main_container(containers, slot.rjob.step)
    code = exit_code(pod, str(containers[at].get("name")) if at is not None else "")
    role = slot.rjob.step if slot.rjob.step else "replicatedJob"
    what = f"{role} pod {pod.name} (replicatedJob {slot.rjob.name})"
    if code:
        return f"{what} exited with code {code}"
    return f"{what} failed" + (f": {pod.reason}" if pod.reason else "")


def _done(
    job: ResolvedJob, *, r: ReplicatedJobPlan, j: int, count: int, pods: Mapping[str, PodView]
) -> bool:
    """Whether Job ``j`` of ``r`` is complete: every completion index Succeeded."""
    return count > 0 and all(
        (p := pods.get(pod_name(job, r.name, j, i))) is not None and p.phase == "Succeeded"
        for i in range(count)
    )


def _succeeded(job: ResolvedJob, size: int, pods: Mapping[str, PodView]) -> bool:
    counts = _counts(job, size)
    done = [
        _done(job, r=r, j=j, count=counts[r.name], pods=pods)
        for r in job.replicated_jobs
        if r.name in job.success_targets
        for j in range(r.replicas)
    ]
    return any(done) if job.success_operator == "Any" else bool(done) and all(done)


def jobs_status(
    job: ResolvedJob,
    pods: Sequence[PodView],
    *,
    size: int | None = None,
    suspended: bool | None = None,
) -> list[dict[str, Any]]:
    """``status.jobsStatus``: per replicatedJob, its Jobs as JobSet counts them.

    A Job is succeeded when every index Succeeded, failed when a pod failed (not by
    disruption); otherwise, once it has pods or while ``suspended`` (default ``spec.suspend``),
    it is suspended, ready when succeeded plus ready pods reach its count, and active with a
    Pending or Running pod. ``size`` (default and 0: the full size) sets the scaled job's count.
    """
    counts = _counts(job, size or _max_size(job))
    held = job.suspend if suspended is None else suspended
    mine = {p.name: p for p in pods if p.deletion_timestamp is None}
    result: list[dict[str, Any]] = []
    for r in job.replicated_jobs:
        entry: dict[str, Any] = {"name": r.name, "ready": 0, "succeeded": 0, "failed": 0}
        entry.update(active=0, suspended=0)
        for j in range(r.replicas):
            names = [pod_name(job, r.name, j, i) for i in range(counts[r.name])]
            of = [mine[n] for n in names if n in mine]
            if _done(job, r=r, j=j, count=len(names), pods=mine):
                entry["succeeded"] += 1
            elif any(p.phase == "Failed" and not is_disrupted(p) for p in of):
                entry["failed"] += 1
            elif of or held:
                entry["suspended"] += 1 if held else 0
                ok = sum(
                    1 for p in of if p.phase == "Succeeded" or (p.ready and p.phase == "Running")
                )
                entry["ready"] += 1 if names and ok >= len(names) else 0
                entry["active"] += 1 if any(p.phase in ("Pending", "Running") for p in of) else 0
        result.append(entry)
    return result


# --------------------------------------------------------------------------- builders


def _owner(job: ResolvedJob) -> Obj:
    uid = job.trainjob.metadata.uid or ""
    return owner_reference(
        api_version=TRAINJOB.api_version, kind=TRAINJOB.kind, name=job.name, uid=uid
    )


def _meta(name: str, job: ResolvedJob, labels: Mapping[str, str], owner: Obj) -> Obj:
    meta: Obj = {"name": name}
    if job.namespace:
        meta["namespace"] = job.namespace
    meta["labels"] = dict(labels)
    meta["ownerReferences"] = [dict(owner)]
    return meta


def _pods(
    job: ResolvedJob, slots: Iterator[_Slot], *, owner: Obj, ctx: OperatorContext
) -> tuple[Obj, ...]:
    specs: dict[str, Obj] = {}
    total = sum(r.replicas for r in job.replicated_jobs)
    offsets, seen = {}, 0
    for r in job.replicated_jobs:
        offsets[r.name], seen = seen, seen + r.replicas
    pods: list[Obj] = []
    for slot in slots:
        r = slot.rjob
        if r.name not in specs:
            specs[r.name] = with_placement(_spec(job, r), ctx)
        job_name = f"{job.name}-{r.name}-{slot.job}"
        key = hashlib.sha1(f"{job.namespace or ''}/{job_name}".encode()).hexdigest()
        jobset = {
            f"{_JOBSET}jobset-name": job.name,
            f"{_JOBSET}replicatedjob-name": r.name,
            f"{_JOBSET}restart-attempt": "0",
            f"{_JOBSET}replicatedjob-replicas": str(r.replicas),
            f"{_JOBSET}global-replicas": str(total),
            f"{_JOBSET}job-index": str(slot.job),
            f"{_JOBSET}job-key": key,
            f"{_JOBSET}job-global-index": str(offsets[r.name] + slot.job),
            LABEL_COMPLETION_INDEX: str(slot.index),
        }
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
    if job.torch is not None and r.name == job.trainer:
        main["env"] = upsert(main.get("env"), _torch_env(job), key="name")
        if job.torch.elastic and not any(e.get("name") == "PET_MAX_RESTARTS" for e in main["env"]):
            main["env"].append({"name": "PET_MAX_RESTARTS", "value": str(DEFAULT_MAX_RESTARTS)})
        if not any(p.get("containerPort") == MASTER_PORT for p in main.get("ports") or ()):
            main["ports"] = [*(main.get("ports") or ()), {"containerPort": MASTER_PORT}]
    if job.mpi is not None and r.name in (LAUNCHER, NODE):
        secret = {
            "secretName": f"{job.name}-mpi-ssh-auth",
            "items": [
                {"key": "ssh-privatekey", "path": "id_rsa"},
                {"key": "ssh-publickey", "path": "id_rsa.pub"},
                {"key": "ssh-publickey", "path": "authorized_keys"},
            ],
        }
        volumes = [{"name": _SSH_VOLUME, "secret": secret}]
        mounts = [{"name": _SSH_VOLUME, "mountPath": job.mpi.ssh_auth_mount_path}]
        if r.name == LAUNCHER:
            items = [{"key": "hostfile", "path": "hostfile", "mode": 0o444}]
            config = {"name": f"{job.name}-mpi-hostfile", "items": items}
            volumes.append({"name": _HOSTFILE_VOLUME, "configMap": config})
            mounts.append({"name": _HOSTFILE_VOLUME, "mountPath": _MPI_DIR})
            env = [
                ("OMPI_MCA_orte_default_hostfile", f"{_MPI_DIR}/hostfile"),
                ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                ("OMPI_MCA_orte_set_default_slots", str(job.mpi.slots)),
                ("OMPI_MCA_plm_rsh_args", _RSH_ARGS),
            ]
            entries = [{"name": n, "value": v} for n, v in env]
            main["env"] = upsert(main.get("env"), entries, key="name")
        spec["volumes"] = upsert(spec.get("volumes"), volumes, key="name")
        main["volumeMounts"] = upsert(main.get("volumeMounts"), mounts, key="name")
    if any(v.get("name") == INITIALIZER_VOLUME for v in spec.get("volumes") or ()):
        _mount_outputs(job, r, main)
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or ():
            if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in container.get("env") or ()):
                entry = {"name": "JOB_COMPLETION_INDEX", "valueFrom": copy.deepcopy(_INDEX_REF)}
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


def _torch_env(job: ResolvedJob) -> list[Obj]:
    assert job.torch is not None  # only called for torch runtimes
    master = f"{pod_name(job, job.trainer, 0, 0)}.{job.subdomain}"
    nnodes = f"{job.min_nodes}:{job.max_nodes}" if job.torch.elastic else str(job.max_nodes)
    env: list[Obj] = [
        {"name": "PET_NNODES", "value": nnodes},
        {"name": "PET_NPROC_PER_NODE", "value": job.torch.num_proc_per_node},
        {"name": "PET_NODE_RANK", "valueFrom": copy.deepcopy(_INDEX_REF)},
        {"name": "PET_MASTER_ADDR", "value": master},
        {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
    ]
    if job.torch.elastic:
        env += [
            {"name": "PET_RDZV_BACKEND", "value": "c10d"},
            {"name": "PET_RDZV_ENDPOINT", "value": f"{master}:{MASTER_PORT}"},
            {"name": "PET_RDZV_ID", "value": job.trainjob.metadata.uid or job.name},
        ]
        if job.torch.max_restarts is not None:
            env.append({"name": "PET_MAX_RESTARTS", "value": str(job.torch.max_restarts)})
    return env
