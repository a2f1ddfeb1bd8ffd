"""The TrainJob (``trainer.kubeflow.org/v1alpha1``) plugin: the runtime's JobSet-shaped template
interpreted directly into pods (no JobSet, no batch Jobs), scheduled as a gang or elastically.

Contract (see ``lattice.frameworks.base`` for the protocol, ``trainjob_runtime`` for the merge):

- **Parse** is ``trainjob_runtime.resolve``: a :class:`ResolvedJob`, ``InvalidJob``, or
  ``RuntimeNotReady`` - *not* an ``InvalidJob``: the reconciler shows it as a waiting condition
  and parses again when the runtime changes. ``spec.managedBy``: ``base.managed_elsewhere``.
- **Demand.** Sizes count the gang's pods, initializers excluded (they run to completion
  before the trainer pods exist, on capacity the job already holds). The scaled job
  (torch/plain trainer, MPI ``node``) gives ``[min_nodes, max_nodes]``, plus every other pod as
  a fixed pod (the MPI launcher), named as its pod; a scaled pod ``i`` is
  ``<tj>-<scaled>-0-<i>``. Each has its template's ``demands.pod_demand`` (units: its request
  of the unit resource, possibly 0; node mode: 1 for a scaled pod and a launcher run as a node
  (or the trainer when nothing scales), 0 for the others; never exclusive). Initializers have
  no demand: they run before the trainer's pods exist. Priority: the first known
  ``priorityClassName`` of the trainer pod template, then the other templates in order
  (initializers last), the ``lattice.breezeml.ai/priority`` annotation, ``ctx.default_priority``.
  Suspended: ``spec.suspend``.
- **Run policy.** cleanPodPolicy Running (JobSet deletes its active Jobs when it finishes and
  keeps the finished ones), the headless Service kept (it goes with the JobSet); backoffLimit
  the smallest Job ``backoffLimit`` (default 6). The runtime's JobSet
  ``ttlSecondsAfterFinished``: that long after the TrainJob finished its pods, Services and
  owned claims are deleted and the TrainJob stays (JobSet deletes itself, and what it owns, and
  Trainer keeps the TrainJob); its ConfigMaps and Secrets stay, as upstream (the TrainJob owns
  them there).
- **Claims** at every size, waiting and suspended included (JobSet creates them with the
  JobSet): the runtime's ``volumeClaimPolicies`` as PVCs ``<template>-<tj>``, owned unless
  ``Retain`` (``trainjob_jobset``), mounted where a container mounts the template's name.
- **Children** at size > 0 (none but the claims at 0): per non-initializer job ``r``, Job index
  ``j`` and pod ``i``, the pod ``<tj>-<r>-<j>-<i>`` with that hostname, ``subdomain``
  (network.subdomain, else ``<tj>``; none when enableDNSHostnames is false), restartPolicy from
  the template (OnFailure by default), ``JOB_COMPLETION_INDEX`` in every container, the
  operator's placement. Labels: the JobSet-level, Job and pod template labels, then
  ``jobset.sigs.k8s.io/{jobset-name, replicatedjob-name, replicatedjob-replicas,
  global-replicas, job-index, job-global-index, job-key, restart-attempt}``,
  ``batch.kubernetes.io/job-completion-index`` and ``job-name``,
  ``training.kubeflow.org/{job-name, operator-name, replica-type, replica-index}`` and
  ``MANAGED_LABEL``; annotations likewise with the jobset and completion-index keys. A
  controller ownerReference on everything. One headless Service ``<subdomain>`` selecting
  ``jobset-name=<tj>``, ``publishNotReadyAddresses`` from the runtime (default true).
- **Torch** on the trainer container: ``PET_NNODES`` (numNodes, or ``min:max`` elastic),
  ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` (fieldRef to the completion-index annotation),
  ``PET_MASTER_ADDR=<tj>-<trainer job>-0-0.<subdomain>``, ``PET_MASTER_PORT=29500`` and the
  container port 29500; elastic adds ``PET_RDZV_BACKEND=c10d``, ``PET_RDZV_ENDPOINT=<master
  addr>:29500``, ``PET_RDZV_ID=<uid>`` and ``PET_MAX_RESTARTS`` (maxRestarts, else 100 unless set).
- **MPI**: ConfigMap ``<tj>-mpi-hostfile`` (``hostfile``: ``<tj>-<r>-0-<i>.<subdomain>
  slots=<n>``, the launcher first with runLauncherAsNode, then ``node``), Secret
  ``<tj>-mpi-ssh-auth`` (``mpi.ssh_auth_secret``, keys filled by the reconciler), the volume
  ``mpi-ssh-auth`` on launcher and node pods mounted at sshAuthMountPath, ``mpi-hostfile`` at
  ``/etc/mpi`` and the OpenMPI env on the launcher.
- **JAX, XGBoost, Flux** and torch's envInjection: the ML policy plugins of
  ``lattice.frameworks.trainjob_mlpolicies`` (their pod edits, ConfigMaps and Secrets).
- **Initializers**: ``initializer_children`` gives their pods (same naming and labels). When a
  pod has the runtime's ``initializer`` volume, an initializer's main container gets it at its
  output path (``/workspace/dataset`` / ``/workspace/model``) and the trainer's at both, unless a
  mount already covers the path. Their order is the runtime's ``dependsOn`` (below), as upstream:
  a runtime without dependsOn starts every replicatedJob at once, as JobSet does.
- **Progress** over the undeleted pods of the current attempt named as desired at ``size``
  (``trainjob_failures``): a Failed pod that was evicted or disruption-targeted is recreated, and
  so is a pod of an earlier attempt; a failed Job (a pod Failed otherwise, or container restarts
  over its ``backoffLimit``) goes to the runtime's JobSet ``failurePolicy``: fail the job
  (``FailedJobs`` without a policy, ``FailJobSetFailurePolicyAction``, ``ReachedMaxRestarts``)
  or recreate every pod as the next attempt (``status.restarts``, the pods'
  ``restart-attempt`` label). Success follows successPolicy (All/Any of the targeted jobs, a
  job done when every pod index Succeeded; default All over the non-initializer jobs).
  ``running``: every desired non-initializer pod is Running or Succeeded. ``jobs_status``
  computes ``status.jobsStatus`` as JobSet counts its Jobs. ``activeDeadlineSeconds`` is the
  reconciler's deadline (``DeadlineExceeded``, "TrainJob exceeded its active deadline"), counted
  from the scheduler's admission (``admittedTime``), so it restarts on resume as upstream's does.
- **Ignored** (``IgnoresFields``): ``podGroupPolicy.coscheduling``/``volcano``, announced once per
  generation by an ``IgnoredField`` Warning event.

Capabilities used by the generic reconciler (``lattice.frameworks.base``):

- ``StagesChildren``: at size > 0 a replicatedJob's pods exist only once every ``dependsOn``
  entry is reached (JobSet: Ready when its ready, failed and succeeded Jobs make up its
  replicas, Complete when all succeeded; startupPolicy InOrder: each job Ready before the next);
  a pod that exists is kept whatever its dependencies do later. At size 0 (waiting, suspended,
  preempted) the Succeeded initializer pods are kept, never recreated.
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

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from lattice.api.constants import TRAINJOB, Resource
from lattice.frameworks import trainjob_status
from lattice.frameworks.base import (
    MANAGED_LABEL,
    Children,
    Demand,
    OperatorContext,
    PodView,
    Progress,
    RunPolicyView,
)
from lattice.frameworks.demands import pod_demand
from lattice.frameworks.kubeflow import KubeflowStatus, job_priority
from lattice.frameworks.manifests import headless_service
from lattice.frameworks.naming import object_meta
from lattice.frameworks.policies.mpi import ssh_auth_secret
from lattice.frameworks.trainjob_failures import current
from lattice.frameworks.trainjob_jobset import claim_manifests
from lattice.frameworks.trainjob_mlpolicies import policy_objects
from lattice.frameworks.trainjob_plans import LAUNCHER, ReplicatedJobPlan, ResolvedJob
from lattice.frameworks.trainjob_pods import (
    LABEL_COMPLETION_INDEX,
    LABEL_JOBSET_NAME,
    LABEL_REPLICATED_JOB,
    MASTER_PORT,
    OPERATOR_NAME,
    build_pods,
    fixed_jobs,
    hostfile,
    owner_of,
    pod_name,
    pod_slots,
)
from lattice.frameworks.trainjob_runtime import resolve, resolve_with, runtime_hash, runtime_key
from lattice.frameworks.trainjob_status import (
    REASON_COMPLETED,
    REASON_FAILED_JOBS,
    TrainJobMessages,
    jobs_status,
    released,
)
from lattice.primitives.objects import Obj
from lattice.scheduler.core.model import PodDemand

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
    "jobs_status",
    "pod_name",
]

#: The runtime fingerprint on the pin ConfigMap ``<tj>-runtime``.
ANNOTATION_RUNTIME_HASH = "trainer.kubeflow.org/runtime-hash"
_PIN_KEY = "runtime.json"
#: The kind of the volumeClaimPolicies claims; the TTL deletes the owned ones (JobSet owns them).
PVC_KIND = "PersistentVolumeClaim"


class TrainJobPlugin(KubeflowStatus):
    """``JobPlugin[ResolvedJob]``: stateless; see the module docstring for every rule."""

    messages = TrainJobMessages("TrainJob")

    resource: Resource = TRAINJOB

    def parse(self, obj: Mapping[str, Any], ctx: OperatorContext) -> ResolvedJob:
        return resolve(obj, ctx)

    def names_runtime(self, obj: Mapping[str, Any], runtime: Mapping[str, Any]) -> bool:
        """``ReadsRuntimes``: ``spec.runtimeRef.name`` is the runtime's name."""
        ref = (obj.get("spec") or {}).get("runtimeRef") or {}
        return bool(ref.get("name") == (runtime.get("metadata") or {}).get("name"))

    # ----------------------------------------------------------------------- scheduling

    def demand(self, job: ResolvedJob, ctx: OperatorContext) -> Demand:
        def demand_of(r: ReplicatedJobPlan, *, worker: bool) -> PodDemand:
            return pod_demand(r.template.get("spec") or {}, ctx, worker=worker)

        as_node = job.mpi is not None and job.mpi.run_launcher_as_node
        fixed: list[PodDemand] = []
        names: list[str] = []
        for r in fixed_jobs(job):
            # The launcher is a worker when it runs as a node (or is the whole job).
            worker = (r.name == LAUNCHER and as_node) or (
                job.scaled is None and r.name == job.trainer
            )
            fixed += [demand_of(r, worker=worker)] * (r.replicas * r.parallelism)
            names += [
                pod_name(job, r.name, j, i) for j in range(r.replicas) for i in range(r.parallelism)
            ]
        scaled = demand_of(job.rjob(job.scaled), worker=True) if job.scaled else None
        order = sorted(job.replicated_jobs, key=lambda r: (r.name != job.trainer, r.initializer))
        classes = [(r.template.get("spec") or {}).get("priorityClassName") for r in order]
        annotations = job.trainjob.metadata.annotations
        return Demand.of_pods(
            priority=job_priority(classes=classes, annotations=annotations, ctx=ctx),
            min_size=len(fixed) + job.min_nodes,
            max_size=len(fixed) + job.max_nodes,
            fixed=fixed,
            fixed_names=names,
            replica=scaled,
            replica_prefix=pod_name(job, job.scaled, 0, 0)[:-1] if job.scaled else "",
            suspended=job.suspend,
        )

    def run_policy(self, job: ResolvedJob) -> RunPolicyView:
        return RunPolicyView(
            clean_pod_policy="Running",
            service_cleanup="None",
            active_deadline_seconds=job.trainjob.spec.active_deadline_seconds,
            ttl_seconds_after_finished=job.ttl_seconds_after_finished,
            ttl_children=None if job.ttl_seconds_after_finished is None else (PVC_KIND,),
        )

    # ----------------------------------------------------------------------- children

    def children(self, job: ResolvedJob, *, size: int, ctx: OperatorContext) -> Children:
        owner = owner_of(job)
        owned, retained = claim_manifests(
            job.claims, name=job.name, namespace=job.namespace, owner=owner
        )
        claims = (*owned, *retained)
        if size <= 0:
            return Children(claims=claims)
        pods = build_pods(job, pod_slots(job, size, initializers=False), owner=owner, ctx=ctx)
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
        config_maps, secrets = policy_objects(job, labels=labels, owner=owner)
        if job.mpi is not None:
            meta = object_meta(
                name=f"{job.name}-mpi-hostfile", namespace=job.namespace, labels=labels, owner=owner
            )
            config: Obj = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta,
                "data": {"hostfile": hostfile(job, size=size)},
            }
            secret = ssh_auth_secret(
                name=f"{job.name}-mpi-ssh-auth", namespace=job.namespace, labels=labels, owner=owner
            )
            config_maps.insert(0, config)
            secrets.insert(0, secret)
        return Children(
            pods=pods,
            services=services,
            config_maps=tuple(config_maps),
            secrets=tuple(secrets),
            claims=claims,
        )

    def initializer_children(self, job: ResolvedJob, *, ctx: OperatorContext) -> Children:
        """The dataset/model initializer pods; the trainer children wait until they Succeeded."""
        slots = pod_slots(job, 0, initializers=True)
        return Children(pods=build_pods(job, slots, owner=owner_of(job), ctx=ctx))

    # ----------------------------------------------------------------------- status

    def progress(
        self,
        job: ResolvedJob,
        *,
        size: int,
        pods: Sequence[PodView],
        others: Mapping[str, Mapping[str, Any]],
    ) -> Progress:
        del others  # a TrainJob's pods tell it all
        return trainjob_status.progress(job, size=size, pods=pods)

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
        live = {p.name for p in pods if p.deletion_timestamp is None}
        if size <= 0:
            done = {p.name for p in pods if p.deletion_timestamp is None and p.phase == "Succeeded"}
            kept = tuple(p for p in init if p["metadata"]["name"] in done)
            return dataclasses.replace(desired, pods=(*kept, *desired.pods))
        free = released(job, pods, size=size)
        gated = tuple(
            p
            for p in (*init, *desired.pods)
            if p["metadata"]["labels"][LABEL_REPLICATED_JOB] in free
            or p["metadata"]["name"] in live
        )
        return dataclasses.replace(desired, pods=gated)

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
            "metadata": object_meta(
                name=self.pinned_name(obj),
                namespace=job.namespace,
                labels=labels,
                owner=owner_of(job),
            ),
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

    #: ``RendersStatus``: Trainer's stored status from and to the Kubeflow working block.
    read_status = staticmethod(trainjob_status.read_status)
    render_status = staticmethod(trainjob_status.render_status)

    def observed_status(
        self, job: ResolvedJob, *, size: int, pods: Sequence[PodView], suspended: bool
    ) -> Obj:
        mine = current(job, pods)  # a stale pod of an earlier attempt is no Job of this one
        status: Obj = {"jobsStatus": jobs_status(job, mine, size=size, suspended=suspended)}
        return status | trainjob_status.restart_counts(job, size=size, pods=pods)

    def ignored_fields(self, job: ResolvedJob) -> Sequence[tuple[str, str]]:
        """``IgnoresFields``: the runtime fields accepted and ignored (``podGroupPolicy``)."""
        return job.ignored
