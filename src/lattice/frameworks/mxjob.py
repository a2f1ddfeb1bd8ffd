"""The MXJob (``kubeflow.org/v1``) plugin: training-operator v1.7 MXNet children and status
rules, scheduled as a gang.

Contract (see ``lattice.frameworks.base`` for the protocol; facts from training-operator v1.7):

- **Parse.** ``MXJob.model_validate`` (defaults: replicas 1, restartPolicy Never, cleanPodPolicy
  None), then v1.7's validation: only the six replica types, at most one Scheduler, every
  template has containers, each with an image, one of them named ``mxnet``; plus ours: at least
  one replica in all, child names within 63 characters, the ``mxnet`` container's
  ``mxjob-port`` (when given) a port number, the integer ``lattice.breezeml.ai/priority``
  annotation, well-formed templates (``demands.template_problems``). A ``mxnet`` container
  without ``mxjob-port`` gets
  ``mxjob-port: 9091``, as v1.7's defaulting does. A ``runPolicy.managedBy``
  naming another controller is skipped by the reconciler and scheduler (``base.managed_elsewhere``).
- **Demand.** A gang of every pod: ``min_size = max_size = sum(replicas)``. Every non-Worker
  pod is a fixed pod (named as its child, in the canonical type order), a Worker is one replica
  ``<job>-worker-<i>``, each with its template's ``demands.pod_demand`` (units: its request of
  the unit resource, possibly 0; node mode: 1 per Worker, 0 for the others; never exclusive).
  Priority: ``schedulingPolicy
  .priorityClass``, the Worker (else the first other) template's ``priorityClassName``, the
  annotation, ``ctx.default_priority``.
- **Children** (none at size 0; everything at any size > 0), per type in the order Scheduler,
  Server, Worker, TunerTracker, TunerServer, Tuner: pods ``<job>-<type lower>-<i>``, each with a
  headless Service of the same name (ports = the ``mxnet`` container's ports, selector = the
  pod's training.kubeflow.org labels). Labels: operator-name ``mxjob-controller``, job-name,
  replica-type (lower), replica-index, ``job-role: master`` on Server pods, ``MANAGED_LABEL``.
  Every container gets ``MX_CONFIG`` (Go-marshalled JSON: cluster ``{<type>: [{url, port}]}``,
  labels ``{<type>: <tuner-server-key annotation>}``, task ``{type, index}``),
  ``DMLC_PS_ROOT_PORT``/``DMLC_PS_ROOT_URI`` (scheduler 0, or 0/""), ``DMLC_NUM_SERVER``,
  ``DMLC_NUM_WORKER``, ``DMLC_ROLE`` (type lower), ``DMLC_USE_KUBERNETES=1``, and Workers
  ``DMLC_WORKER_ID=<i>``. ExitCode runs as restartPolicy Never; the operator's node selector
  applies to every pod (no node-mode exclusivity: pods share nodes by their requests).
- **Progress** over the non-deleted pods with index < replicas of each type (none at size 0):
  active counts Running pods. A Failed pod is *recreated* under ExitCode when its ``mxnet``
  exit code is 128+ or unknown; any other Failed pod (Never, OnFailure, Always, ExitCode 1-127)
  fails the job: "mxjob <name> is failed because <n> <Type> replica(s) failed." (first type in
  order; failure wins over success). The lead is the Scheduler, or the Worker of a single-worker
  job: the job is running while the lead has an active pod and has succeeded when all lead
  replicas have. Without a lead (MXTune) every pod must run / succeed.
- **Decided differences from v1.7** (docs/compatibility.md): an ExitCode pod that exited 1-127
  fails the job (v1.7 marks the job Restarting for ever), and a tuning job without a lead
  ends when every pod has succeeded (v1.7 never ends it). The ``schedulingPolicy`` PodGroup
  fields are ignored, each announced by an ``IgnoredField`` Warning Event (``IgnoresFields``).
- **Run policy.** cleanPodPolicy (each deleted pod's Service goes with it), ttlSecondsAfterFinished,
  activeDeadlineSeconds and backoffLimit, enforced by the reconciler. ExitCode recreations are
  charged to the backoffLimit (each recreated pod counts one failure; see
  ``lattice.controllers.failure``), so ``backoffLimit: N`` allows N recreations.
- **Messages** (``MXJobMessages``) as v1.7 words them: "MXJob <name> is created." / "is
  running." / "is successfully completed." / "is suspended." / "is resumed.", Restarting
  "mxjob <name> is restarting because <n> <Type> replica(s) failed." (the first type in order),
  backoff and deadline failures ``MXJobFailed`` with "Job <name> has failed because it has reached
  the specified backoff limit" / "... was active longer than specified deadline", failure events
  of type Normal, and a Normal ``ExitedWithCode`` event "Pod: <ns>.<pod> exited with code <c>"
  for each pod recreated (its ``mxnet`` exit code).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lattice.api.constants import (
    MX_REPLICA_TYPES,
    MXJOB,
    REPLICA_SCHEDULER,
    REPLICA_SERVER,
    REPLICA_WORKER,
    Resource,
)
from lattice.api.mxjob import MXJob
from lattice.frameworks import base as fw
from lattice.frameworks import mxjob_children
from lattice.frameworks.demands import pod_demand, template_problems
from lattice.frameworks.failures import is_retryable_exit_code
from lattice.frameworks.kubeflow import (
    KubeflowStatus,
    ignored_scheduling_fields,
    job_priority,
    priority_problems,
    run_policy_view,
    validated,
)
from lattice.frameworks.manifests import template_containers
from lattice.frameworks.mxjob_children import (
    CONTAINER_NAME,
    DEFAULT_PORT,
    OPERATOR_NAME,
    PORT_NAME,
    mx_config,
    mxnet_index,
    replica_types,
    replicas_of,
)
from lattice.frameworks.naming import child_name, child_prefix, service_name_problems
from lattice.scheduler.core.model import PodDemand

__all__ = [
    "CONTAINER_NAME",
    "DEFAULT_PORT",
    "OPERATOR_NAME",
    "PORT_NAME",
    "MXJobMessages",
    "MXJobPlugin",
    "mx_config",
]

_SPECS = "spec.mxReplicaSpecs"


class MXJobMessages(fw.Messages):
    """training-operator v1.7's wording of MXJob conditions and events (the job's name only)."""

    failed_event_type = "Normal"

    def created(self, ns: str, name: str) -> str:
        return f"MXJob {name} is created."

    def running(self, ns: str, name: str) -> str:
        return f"MXJob {name} is running."

    def succeeded(self, ns: str, name: str) -> str:
        return f"MXJob {name} is successfully completed."

    def suspended(self, ns: str, name: str) -> str:
        return f"MXJob {name} is suspended."

    def resumed(self, ns: str, name: str) -> str:
        return f"MXJob {name} is resumed."

    def backoff_exceeded(self, ns: str, name: str) -> tuple[str, str]:
        why = "has failed because it has reached the specified backoff limit"
        return f"{MXJOB.kind}Failed", f"Job {name} {why}"

    def deadline_exceeded(self, ns: str, name: str) -> tuple[str, str]:
        why = "has failed because it was active longer than specified deadline"
        return f"{MXJOB.kind}Failed", f"Job {name} {why}"

    def restarting(self, ns: str, name: str, recreated: Sequence[fw.PodView]) -> str:
        counts = dict.fromkeys(MX_REPLICA_TYPES, 0)
        canonical = {t.lower(): t for t in MX_REPLICA_TYPES}
        for pod in recreated:
            rtype = canonical.get((pod.replica_type or "").lower())
            if rtype is not None:
                counts[rtype] += 1
        rtype, n = next(((t, n) for t, n in counts.items() if n), (REPLICA_WORKER, len(recreated)))
        return f"mxjob {name} is restarting because {n} {rtype} replica(s) failed."

    def exited(self, ns: str, pod: fw.PodView) -> str | None:
        code = _mxnet_exit_code(pod)
        return None if code is None else f"Pod: {ns}.{pod.name} exited with code {code}"


class MXJobPlugin(KubeflowStatus):
    """``JobPlugin[MXJob]``: stateless; see the module docstring for every rule."""

    messages = MXJobMessages(MXJOB.kind)

    resource: Resource = MXJOB
    # ----------------------------------------------------------------------- parse

    def parse(self, obj: Mapping[str, Any], ctx: fw.OperatorContext) -> MXJob:
        return validated(MXJob, obj, lambda job: _problems(job, ctx))

    # ----------------------------------------------------------------------- scheduling

    def demand(self, job: MXJob, ctx: fw.OperatorContext) -> fw.Demand:
        name = job.metadata.name or ""
        fixed: list[PodDemand] = []
        names: list[str] = []
        workers: PodDemand | None = None
        for rtype, spec in replica_types(job):
            template = spec.template.get("spec") or {}
            if rtype == REPLICA_WORKER:
                workers = pod_demand(template, ctx, worker=True)
                continue
            pod = pod_demand(template, ctx, worker=False)
            fixed += [pod] * replicas_of(spec)
            names += [child_name(name, rtype, i) for i in range(replicas_of(spec))]
        size = sum(replicas_of(spec) for _, spec in replica_types(job))
        policy = job.spec.run_policy
        ordered = sorted(replica_types(job), key=lambda ts: ts[0] != REPLICA_WORKER)
        classes = [policy.scheduling_policy.priority_class if policy.scheduling_policy else None]
        classes += [(s.template.get("spec") or {}).get("priorityClassName") for _, s in ordered]
        return fw.Demand.of_pods(
            priority=job_priority(classes=classes, annotations=job.metadata.annotations, ctx=ctx),
            min_size=size,
            max_size=size,
            fixed=fixed,
            fixed_names=names,
            replica=workers,
            replica_prefix=child_prefix(name, REPLICA_WORKER),
            suspended=policy.suspend,
        )

    def ignored_fields(self, job: MXJob) -> list[tuple[str, str]]:
        """``IgnoresFields``: the PodGroup fields of ``runPolicy.schedulingPolicy``."""
        return ignored_scheduling_fields(job.spec.run_policy)

    def run_policy(self, job: MXJob) -> fw.RunPolicyView:
        return run_policy_view(job.spec.run_policy, service_cleanup="WithPods")

    # ----------------------------------------------------------------------- children

    def children(self, job: MXJob, *, size: int, ctx: fw.OperatorContext) -> fw.Children:
        return mxjob_children.children(job, size=size, ctx=ctx)

    # ----------------------------------------------------------------------- status

    def progress(
        self,
        job: MXJob,
        *,
        size: int,
        pods: Sequence[fw.PodView],
        others: Mapping[str, Mapping[str, Any]],
    ) -> fw.Progress:
        del others  # an MXJob has only pods and services
        name = job.metadata.name or ""
        types = replica_types(job)
        by_type: dict[str, list[fw.PodView]] = {rtype: [] for rtype, _ in types}
        lower = {rtype.lower(): (rtype, replicas_of(spec)) for rtype, spec in types}
        for pod in pods if size > 0 else ():
            rtype, replicas = lower.get(pod.replica_type or "", ("", 0))
            index = -1 if pod.replica_index is None else pod.replica_index
            if rtype and pod.deletion_timestamp is None and 0 <= index < replicas:
                by_type[rtype].append(pod)
        counts = {
            rtype: fw.ReplicaCounts(
                active=sum(1 for p in group if p.phase == "Running"),
                succeeded=sum(1 for p in group if p.phase == "Succeeded"),
                failed=sum(1 for p in group if p.phase == "Failed"),
            )
            for rtype, group in by_type.items()
        }
        recreate: list[str] = []
        failure: str | None = None
        for rtype, spec in types:
            policy = spec.restart_policy.value if spec.restart_policy else "Never"
            permanent = 0
            for pod in sorted(by_type[rtype], key=lambda p: (p.replica_index or 0, p.name)):
                if pod.phase != "Failed":
                    continue
                code = _mxnet_exit_code(pod)
                if policy == "ExitCode" and (not code or is_retryable_exit_code(code)):
                    recreate.append(pod.name)
                else:
                    permanent += 1
            if permanent and failure is None:
                failure = f"mxjob {name} is failed because {permanent} {rtype} replica(s) failed."
        if failure is not None:
            return fw.Progress(replicas=counts, failed=failure, failed_reason=f"{MXJOB.kind}Failed")
        lead = _lead(job)
        wanted = {t: replicas_of(s) for t, s in types if lead in (None, t)}
        succeeded = size > 0 and all(counts[t].succeeded >= n for t, n in wanted.items())
        if lead:
            running = counts[lead].active > 0
        else:
            running = size > 0 and all(counts[t].active >= n for t, n in wanted.items())
        if succeeded:
            return fw.Progress(replicas=counts, running=running, succeeded=True)
        return fw.Progress(
            replicas=counts, running=running, restarting=bool(recreate), recreate=tuple(recreate)
        )


def _mxnet_exit_code(pod: fw.PodView) -> int | None:
    """The ``mxnet`` container's exit code (v1.7 reads no other container), or None."""
    for container in pod.containers:
        if container.name == CONTAINER_NAME and container.state == "terminated":
            return container.exit_code
    return None


def _lead(job: MXJob) -> str | None:
    """The replica type whose success is the job's: the Scheduler, or a single Worker."""
    specs = job.spec.mx_replica_specs
    count = {t: replicas_of(specs[t]) if t in specs else 0 for t in MX_REPLICA_TYPES}
    if count[REPLICA_SCHEDULER]:
        return REPLICA_SCHEDULER
    if count[REPLICA_WORKER] == 1 and count[REPLICA_SERVER] == 0:
        return REPLICA_WORKER
    return None


# --------------------------------------------------------------------------- validation


def _problems(job: MXJob, ctx: fw.OperatorContext) -> list[fw.Problem]:
    """v1.7's validation rules the model does not apply, and ours."""
    name = job.metadata.name or ""
    problems = priority_problems(job.metadata.annotations)
    specs = job.spec.mx_replica_specs
    for rtype in specs:
        if rtype not in MX_REPLICA_TYPES:
            why = f"unknown replica type {rtype!r}: must be one of " + ", ".join(MX_REPLICA_TYPES)
            problems.append(fw.Problem(_SPECS, why))
    scheduler = specs.get(REPLICA_SCHEDULER)
    if scheduler is not None and replicas_of(scheduler) > 1:
        why = f"must be at most 1 (one scheduler), got {scheduler.replicas}"
        problems.append(fw.Problem(f"{_SPECS}.{REPLICA_SCHEDULER}.replicas", why))
    types = replica_types(job)
    if sum(replicas_of(spec) for _, spec in types) < 1:
        problems.append(fw.Problem(_SPECS, "must ask for at least one replica in all"))
    longest = ""
    for rtype, spec in types:
        field = f"{_SPECS}.{rtype}.template.spec.containers"
        containers = template_containers(spec.template)
        if not containers or not all(isinstance(c, Mapping) for c in containers):
            problems.append(fw.Problem(field, "must define at least one container"))
            continue
        for i, container in enumerate(containers):
            if not container.get("image"):
                problems.append(fw.Problem(f"{field}[{i}].image", "required"))
        if not any(c.get("name") == CONTAINER_NAME for c in containers):
            why = f'must have a container named "{CONTAINER_NAME}": it gets the '
            why += f"{PORT_NAME} port and the MX_CONFIG and DMLC_* variables"
            problems.append(fw.Problem(field, why))
        else:
            problems += _port_problems(containers, field)
        problems += template_problems(
            spec.template.get("spec") or {}, field=f"{_SPECS}.{rtype}.template.spec"
        )
        if replicas_of(spec):
            last = child_name(name, rtype, replicas_of(spec) - 1)
            longest = max(longest, last, key=len)
    problems += service_name_problems(name, longest=longest, owners="pods'", label="Service")
    return problems


def _port_problems(containers: Sequence[Mapping[str, Any]], field: str) -> list[fw.Problem]:
    """A problem when the ``mxnet`` container's ``mxjob-port`` is not a port number."""
    index = mxnet_index(containers)
    for j, port in enumerate(containers[index].get("ports") or ()):
        if not isinstance(port, Mapping) or port.get("name") != PORT_NAME:
            continue
        number = port.get("containerPort")
        if not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 65536:
            where = f"{field}[{index}].ports[{j}].containerPort"
            why = f'the port named "{PORT_NAME}" of the "{CONTAINER_NAME}" container must be a '
            why += f"port number (1-65535): the other replicas reach this one on it, got {number!r}"
            return [fw.Problem(where, why)]
    return []
