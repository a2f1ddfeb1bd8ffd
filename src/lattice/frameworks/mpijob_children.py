"""MPIJob's children as mpi-operator v2beta1 builds them: the headless Service, the ConfigMap
with ``hostfile`` and ``discover_hosts.sh``, the ssh key Secret, the worker pods and the batch/v1
launcher Job, with the MPI policy (``lattice.frameworks.policies.mpi``) applied.

Contract (pure; the rules in full are in ``lattice.frameworks.mpijob``):
- ``children(job, size=, ctx=)``: everything at any size > 0; at size 0 (suspended, preempted or
  not admitted yet) what mpi-operator keeps while an MPIJob is suspended: the Service, ConfigMap
  and Secret, and the launcher Job with ``spec.suspend: true``, but no worker pod. A function of
  (job, size): its ``discover_hosts.sh`` lists every desired worker.
- ``observed_children``: ``discover_hosts.sh`` lists only the Running workers. At size 0 the
  kept children are desired only once the job has started (its ConfigMap, Secret or launcher
  Job exists), and the launcher Job only while it exists: a job that never started creates
  nothing. At size > 0 a launcher Job that does not exist is left out until every worker pod
  exists, under ``WaitForWorkersReady`` until every worker is Ready (``workers_ready``); one
  that exists is always kept, and one that is suspended stays suspended until that same gate
  opens (the reconciler then re-syncs its scheduling fields and unsuspends it,
  ``lattice.controllers.batchjobs``).
- ``hostfile``/``discover_hosts``: the workers' FQDNs (``<host>.<job>.<ns>.svc[.<domain>]``), the
  launcher first with runLauncherAsWorker.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lattice.api.common import ReplicaSpec, RestartPolicy
from lattice.api.constants import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    MPIJOB,
)
from lattice.api.mpijob import LauncherCreationPolicy, MPIJob
from lattice.frameworks.base import MANAGED_LABEL, Children, OperatorContext, PodView
from lattice.frameworks.manifests import pod_manifest, template_containers
from lattice.frameworks.naming import job_owner, object_meta
from lattice.frameworks.podspec import pod_restart_policy, with_env, with_placement
from lattice.frameworks.policies import mpi
from lattice.frameworks.policies.mpi import CONFIG_MOUNT_PATH, ssh_auth_secret
from lattice.primitives.objects import Obj

__all__ = [
    "OPERATOR_NAME",
    "children",
    "discover_hosts",
    "hostfile",
    "namespace_of",
    "observed_children",
    "replica_containers",
    "workers_of",
    "workers_ready",
]

#: ``training.kubeflow.org/operator-name`` of MPIJob pods (mpi-operator's ``OperatorName``).
OPERATOR_NAME = "mpi-operator"
_HOSTFILE = "hostfile"
_DISCOVER = "discover_hosts.sh"
_ROOT_SSH = "/root/.ssh"


def workers_of(job: MPIJob) -> int:
    worker = job.spec.worker
    return (worker.replicas or 0) if worker is not None else 0


def namespace_of(job: MPIJob) -> str:
    return job.metadata.namespace or "default"


def _fqdn(job: MPIJob, host: str, cluster_domain: str) -> str:
    fqdn = f"{host}.{job.metadata.name}.{namespace_of(job)}.svc"
    return f"{fqdn}.{cluster_domain}" if cluster_domain else fqdn


def hostfile(job: MPIJob, *, cluster_domain: str = "") -> str:
    """The ``hostfile``: one line per worker (the launcher first with runLauncherAsWorker)."""
    name = job.metadata.name or ""
    hosts = [f"{name}-launcher"] if job.spec.run_launcher_as_worker else []
    hosts += [f"{name}-worker-{i}" for i in range(workers_of(job))]
    return mpi.hostfile(
        (_fqdn(job, h, cluster_domain) for h in hosts),
        slots=job.spec.slots_per_worker,
        implementation=job.spec.mpi_implementation,
    )


def discover_hosts(job: MPIJob, running: Iterable[str], *, cluster_domain: str = "") -> str:
    """``discover_hosts.sh`` echoing the launcher (runLauncherAsWorker) and the ``running``
    worker pods, sorted by name (mpi-operator keeps it in sync with the Running workers)."""
    name = job.metadata.name or ""
    hosts = [f"{name}-launcher"] if job.spec.run_launcher_as_worker else []
    hosts += sorted(running)
    return "#!/bin/sh\n" + "".join(f"echo {_fqdn(job, h, cluster_domain)}\n" for h in hosts)


def workers_ready(job: MPIJob, pods: Sequence[PodView]) -> bool:
    """WaitForWorkersReady's gate: every desired worker exists, undeleted, and is Ready."""
    name = job.metadata.name or ""
    ready = {p.name for p in pods if p.deletion_timestamp is None and p.ready}
    return all(f"{name}-worker-{i}" in ready for i in range(workers_of(job)))


def children(job: MPIJob, *, size: int, ctx: OperatorContext) -> Children:
    """Every child at ``size`` (at 0 the suspended set; see the module contract)."""
    name, namespace = job.metadata.name or "", job.metadata.namespace
    owner = job_owner(MPIJOB, job.metadata)
    app = {"app": name, MANAGED_LABEL: "true"}
    workers = [f"{name}-worker-{i}" for i in range(workers_of(job))]
    config = _object("ConfigMap", f"{name}-config", namespace, app, owner)
    config["data"] = {_HOSTFILE: hostfile(job), _DISCOVER: discover_hosts(job, workers)}
    secret = ssh_auth_secret(name=f"{name}-ssh", namespace=namespace, labels=app, owner=owner)
    service = _object("Service", name, namespace, app, owner)
    service["spec"] = {
        "clusterIP": "None",
        "selector": {LABEL_OPERATOR_NAME: OPERATOR_NAME, LABEL_JOB_NAME: name},
    }
    if job.spec.run_launcher_as_worker:
        service["spec"]["publishNotReadyAddresses"] = True
    launcher = _launcher_job(job, owner=owner, ctx=ctx)
    if size <= 0:
        launcher["spec"]["suspend"] = True
        pods: tuple[Obj, ...] = ()
    else:
        pods = tuple(_worker_pod(job, i, owner=owner, ctx=ctx) for i in range(len(workers)))
    return Children(
        pods=pods,
        services=(service,),
        config_maps=(config,),
        secrets=(secret,),
        jobs=(launcher,),
    )


def observed_children(
    job: MPIJob,
    desired: Children,
    *,
    pods: Sequence[PodView],
    others: Mapping[str, Mapping[str, Any]],
) -> Children:
    """``discover_hosts.sh`` from the Running workers; the kept children at size 0 once the job
    started; the launcher held back (not created, or kept suspended) until every worker exists
    (a gang never starts partially: workers the apiserver refuses keep the launcher from running
    without them), under WaitForWorkersReady until every worker is Ready."""
    if not desired.jobs:
        return desired
    name = job.metadata.name or ""
    launcher_name = f"{name}-launcher"
    existing = others.get(f"Job/{launcher_name}")
    if _suspended(desired.jobs):
        started = existing is not None or any(
            f"{kind}/{name}{suffix}" in others
            for kind, suffix in (("ConfigMap", "-config"), ("Secret", "-ssh"))
        )
        if not started:
            return Children()
    workers = {f"{name}-worker-{i}" for i in range(workers_of(job))}
    running = [
        p.name
        for p in pods
        if p.name in workers and p.deletion_timestamp is None and p.phase == "Running"
    ]
    config_maps = []
    for manifest in desired.config_maps:
        data = manifest.get("data") or {}
        if _DISCOVER in data:
            data = {**data, _DISCOVER: discover_hosts(job, running)}
            config_maps.append({**manifest, "data": data})
        else:
            config_maps.append(manifest)
    waits = job.spec.launcher_creation_policy == LauncherCreationPolicy.WAIT_FOR_WORKERS_READY
    live = {p.name for p in pods if p.deletion_timestamp is None}
    gate_open = workers <= live and not (waits and not workers_ready(job, pods))
    jobs: list[Obj] = []
    for manifest in desired.jobs:
        if manifest["metadata"]["name"] != launcher_name:
            jobs.append(manifest)
        elif existing is None:
            if gate_open and not _suspended((manifest,)):
                jobs.append(manifest)
        elif not gate_open and ((existing.get("spec") or {}).get("suspend") is True):
            jobs.append({**manifest, "spec": {**manifest["spec"], "suspend": True}})
        else:
            jobs.append(manifest)
    return Children(
        pods=desired.pods,
        services=desired.services,
        config_maps=tuple(config_maps),
        secrets=desired.secrets,
        jobs=tuple(jobs),
    )


def _suspended(jobs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the desired launcher Jobs are the suspended set (size 0)."""
    return any((j.get("spec") or {}).get("suspend") is True for j in jobs)


def replica_containers(spec: ReplicaSpec | None) -> list[Obj]:
    return template_containers(spec.template) if spec is not None else []


def _object(kind: str, name: str, namespace: str | None, labels: Obj, owner: Obj) -> Obj:
    meta = object_meta(name=name, namespace=namespace, labels=labels, owner=owner)
    api_version = "batch/v1" if kind == "Job" else "v1"
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def _pod_labels(job: MPIJob, role: str, index: str | None) -> dict[str, str]:
    labels = {
        LABEL_OPERATOR_NAME: OPERATOR_NAME,
        LABEL_JOB_NAME: job.metadata.name or "",
        LABEL_JOB_ROLE: role,
    }
    if index is not None:
        labels[LABEL_REPLICA_INDEX] = index
    labels[MANAGED_LABEL] = "true"
    return labels


def _with_ssh(job: MPIJob, spec: Obj, container: Obj) -> None:
    """Mount the ssh Secret at ``sshAuthMountPath`` in ``container`` (mutates the copies)."""
    mode = 0o600 if job.spec.ssh_auth_mount_path == _ROOT_SSH else None
    volume = mpi.ssh_volume(volume="ssh-auth", secret=f"{job.metadata.name}-ssh", default_mode=mode)
    spec["volumes"] = [*(spec.get("volumes") or ()), volume]
    mount = {"name": "ssh-auth", "mountPath": job.spec.ssh_auth_mount_path}
    container["volumeMounts"] = [*(container.get("volumeMounts") or ()), mount]


def _pod_spec(job: MPIJob, replica: ReplicaSpec, hostname: str) -> Obj:
    spec: Obj = copy.deepcopy(dict(replica.template.get("spec") or {}))
    spec["hostname"] = hostname
    spec["subdomain"] = job.metadata.name
    if spec.get("hostNetwork"):
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    policy = replica.restart_policy or RestartPolicy.NEVER
    spec["restartPolicy"] = pod_restart_policy(policy.value)
    return spec


def _worker_pod(job: MPIJob, index: int, *, owner: Obj, ctx: OperatorContext) -> Obj:
    worker = job.spec.worker
    assert worker is not None  # only called for i < Worker.replicas
    name = f"{job.metadata.name}-worker-{index}"
    spec = _pod_spec(job, worker, name)
    dns = spec.get("dnsConfig") or {}
    search = f"{job.metadata.name}.{namespace_of(job)}.svc.cluster.local"
    spec["dnsConfig"] = {**dns, "searches": [*(dns.get("searches") or ()), search]}
    container = with_env(spec["containers"][0], [("K_MPI_JOB_ROLE", "worker")])
    if not container.get("command") and not container.get("args"):
        container["command"] = ["/usr/sbin/sshd", "-De"]
    _with_ssh(job, spec, container)
    spec["containers"] = [container, *spec["containers"][1:]]
    shift = 1 if job.spec.run_launcher_as_worker else 0
    labels = _pod_labels(job, "worker", str(index + shift))
    return pod_manifest(
        name=name,
        namespace=job.metadata.namespace,
        template=worker.template,
        labels=labels,
        owner=owner,
        spec=with_placement(spec, ctx),
    )


def _launcher_env(job: MPIJob) -> list[tuple[str, str]]:
    path = f"{CONFIG_MOUNT_PATH}/{_HOSTFILE}"
    impl = job.spec.mpi_implementation
    env = [("K_MPI_JOB_ROLE", "launcher")]
    env += mpi.launcher_env(impl, hostfile=path, slots=job.spec.slots_per_worker).items()
    if not job.spec.run_launcher_as_worker:
        env += [("NVIDIA_VISIBLE_DEVICES", ""), ("NVIDIA_DRIVER_CAPABILITIES", "")]
    return env


def _launcher_job(job: MPIJob, *, owner: Obj, ctx: OperatorContext) -> Obj:
    launcher = job.spec.launcher
    assert launcher is not None  # parse requires it
    name = job.metadata.name or ""
    spec = _pod_spec(job, launcher, f"{name}-launcher")
    container = with_env(spec["containers"][0], _launcher_env(job))
    _with_ssh(job, spec, container)
    items = [
        {"key": _HOSTFILE, "path": _HOSTFILE, "mode": 0o444},
        {"key": _DISCOVER, "path": _DISCOVER, "mode": 0o555},
    ]
    config = {"name": "mpi-job-config", "configMap": {"name": f"{name}-config", "items": items}}
    spec["volumes"] = [*spec["volumes"], config]
    mount = {"name": "mpi-job-config", "mountPath": CONFIG_MOUNT_PATH}
    container["volumeMounts"] = [*container["volumeMounts"], mount]
    spec["containers"] = [container, *spec["containers"][1:]]
    tmeta = launcher.template.get("metadata") or {}
    index = "0" if job.spec.run_launcher_as_worker else None
    meta: Obj = {"labels": {**(tmeta.get("labels") or {}), **_pod_labels(job, "launcher", index)}}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    meta["ownerReferences"] = [dict(owner)]
    manifest = _object("Job", f"{name}-launcher", job.metadata.namespace, {"app": name}, owner)
    manifest["metadata"]["labels"][MANAGED_LABEL] = "true"
    policy = job.spec.run_policy
    job_spec: Obj = {}
    if policy.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if policy.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = policy.active_deadline_seconds
    if policy.backoff_limit is not None:
        job_spec["backoffLimit"] = policy.backoff_limit
    job_spec["template"] = {"metadata": meta, "spec": with_placement(spec, ctx)}
    job_spec["podReplacementPolicy"] = "Failed"
    manifest["spec"] = job_spec
    return manifest
