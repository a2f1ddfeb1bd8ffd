"""The TrainingJob (``breezeml.ai/v1``) plugin: validation, demand, pods, env and status rules.

Contract (see ``lattice.frameworks.base`` for the protocol):

- **Parse.** ``TrainingJob.model_validate``; pydantic errors become :class:`Problem` values with
  camelCase paths (``spec.replicaSpecs.template.spec.containers[0].name``). Operator-side rules:
  ``metadata.name`` is a DNS-1035 label short enough for ``<name>-worker-<maxSize-1>`` to be a
  Service name (at most 63 characters); ``minSize <= maxSize``; the template has a container and
  the first is named ``trainingjob``; ``injectLattice`` needs an explicit ``command``; the
  template's quantities, node selector, required node affinity and tolerations are well formed
  (``demands.template_problems``).
- **Demand.** ``spec.priority``, ``[minSize, maxSize]``, no fixed pods, suspended by
  ``runPolicy.suspend``. Every worker is a replica ``<job>-worker-<i>`` with the template's
  ``demands.pod_demand``: exclusive in node mode (one worker per node, 1 unit), else its
  request of the unit resource (possibly 0).
- **Children** at size ``n``: pods and headless Services ``<job>-worker-<i>``, ``i < n``, labelled
  by ``naming.replica_labels`` (``job-role: master`` on worker 0), owned by the job, with the
  operator's node selector merged and, in node mode, the one-replica-per-node anti-affinity.
  ``restartPolicy`` comes from ``replicaSpecs.restartPolicy`` (ExitCode runs as Never) and is
  Never with ``injectLattice``. ``schedulerName`` is left as the template has it.
- **Env** on the ``trainingjob`` container (our names replace the user's, others are kept):
  ``WORLD_SIZE=n``, ``RANK=i``, ``MASTER_ADDR=<job>-worker-0``, ``MASTER_PORT`` (the container
  port named ``trainingjob-port``, else 23456); torchrun's ``PET_NNODES=<min>:<max>``,
  ``PET_NODE_RANK=i``, ``PET_RDZV_ID=<job uid>``, ``PET_RDZV_BACKEND`` and ``PET_RDZV_ENDPOINT``:
  ``etcd-v2`` at ``RDZV_SERVICE_ENDPOINT[:RDZV_SERVICE_PORT]`` when ``RDZV_BACKEND`` is ``etcd``
  and an endpoint is set, otherwise ``c10d`` at ``<job>-worker-0:<MASTER_PORT>`` (worker 0 hosts
  the store); ``PET_MAX_RESTARTS=100`` unless the user set it (a shrink fails the survivors'
  workers once); and the seed operator's ``LATTICE_FRAMEWORK``, ``LATTICE_NNODES``,
  ``LATTICE_RDZV_ID``, ``LATTICE_RDZV_BACKEND`` / ``LATTICE_RDZV_CLIENT_SERVICE_HOST`` /
  ``LATTICE_RDZV_CLIENT_SERVICE_PORT`` (when configured), ``LATTICE_CHECKPOINT_TYPE``,
  ``LATTICE_CHECKPOINT_CONFIG`` and, for pytorch, ``LATTICE_AUTOPATCH=torch``.
- **injectLattice** runs the user's command under torchrun; the args are left untouched::

      command: [<py>, -m, torch.distributed.run, --nnodes=$(PET_NNODES),
                --rdzv_backend=$(PET_RDZV_BACKEND), --rdzv_endpoint=$(PET_RDZV_ENDPOINT),
                --rdzv_id=$(PET_RDZV_ID), --max_restarts=$(PET_MAX_RESTARTS),
                --no_python, <user command...>]
      args:    <user args...>

  so ``command: [python]``, ``args: [-u, main.py]`` runs ``python -u main.py`` in each local
  worker. ``<py>`` is the user's interpreter when the command starts with ``python*``, else
  ``python``. Kubernetes expands ``$(VAR)`` from the env above. A command that already starts
  torchrun (``torchrun`` or ``python -m torch.distributed.run``) is not wrapped again.
- **Progress** over the ``worker`` pods with index < size and no deletion timestamp:
  ``replicas["Worker"]`` counts active (not Succeeded/Failed), succeeded and failed pods;
  ``running`` when every index < size has a Running pod. A Failed pod is *recreated* if it was
  evicted or disruption-targeted (always), under ExitCode when its code is 128+ or unknown, and
  under OnFailure/Always (a pod-level failure the kubelet will not restart); otherwise (Never,
  ExitCode 1-127) it *fails* the job, naming the pod and exit code. Failure wins; else the job
  has *succeeded* when worker 0 Succeeded (torchrun's agents exit together, and worker 0 hosts
  the c10d store, so its success is the job's); else ``restarting`` when pods are recreated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lattice.api.common import RestartPolicy
from lattice.api.constants import (
    REPLICA_WORKER,
    TRAININGJOB,
    TRAININGJOB_CONTAINER_NAME,
    TRAININGJOB_PORT_NAME,
    Resource,
)
from lattice.api.trainingjob import TrainingJob, TrainingJobFramework
from lattice.frameworks import base as fw
from lattice.frameworks.demands import pod_demand, template_problems
from lattice.frameworks.failures import exit_code, must_recreate
from lattice.frameworks.kubeflow import run_policy_view, validated
from lattice.frameworks.manifests import (
    container_port,
    headless_service,
    pod_manifest,
    service_ports,
)
from lattice.frameworks.naming import (
    child_name,
    child_prefix,
    job_owner,
    replica_labels,
    replica_selector,
    service_name_problems,
)
from lattice.frameworks.podspec import (
    pod_restart_policy,
    with_env,
    with_placement,
)
from lattice.frameworks.policies import torch
from lattice.primitives.objects import Obj

__all__ = ["DEFAULT_PORT", "OPERATOR_NAME", "TrainingJobPlugin"]

#: ``training.kubeflow.org/operator-name`` of TrainingJob children (the seed's controller name).
OPERATOR_NAME = "trainingjob-reconciler"
#: Rendezvous/master port when the container declares no ``trainingjob-port`` (PyTorchJob's).
DEFAULT_PORT = 23456

_WORKER = REPLICA_WORKER.lower()
_CONTAINERS = "spec.replicaSpecs.template.spec.containers"
#: The torch policy's variables every worker gets, in training-operator's order.
_TORCH_LAYOUT = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "PET_NNODES",
    "PET_RDZV_ID",
    "PET_RDZV_BACKEND",
    "PET_RDZV_ENDPOINT",
)


def _containers(job: TrainingJob) -> list[Obj]:
    spec = job.spec.replica_specs.template.get("spec") or {}
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    return list(containers) if isinstance(containers, list) else []


def _restart_policy(job: TrainingJob) -> RestartPolicy:
    if job.spec.inject_lattice:
        return RestartPolicy.NEVER
    return job.spec.replica_specs.restart_policy or RestartPolicy.NEVER


class TrainingJobPlugin:
    """``JobPlugin[TrainingJob]``: stateless; see the module docstring for every rule."""

    resource: Resource = TRAININGJOB
    scheduling_path: tuple[str, ...] = ("status",)
    exec_path: tuple[str, ...] = ("status", "execStatus")
    preempted_condition: str = "Running"

    # ----------------------------------------------------------------------- parse

    def parse(self, obj: Mapping[str, Any], ctx: fw.OperatorContext) -> TrainingJob:
        return validated(TrainingJob, obj, lambda job: _problems(job, ctx))

    # ----------------------------------------------------------------------- scheduling

    def demand(self, job: TrainingJob, ctx: fw.OperatorContext) -> fw.Demand:
        spec = job.spec.replica_specs.template.get("spec") or {}
        worker = pod_demand(spec, ctx, worker=True, exclusive=True)
        return fw.Demand.of_pods(
            priority=job.spec.priority,
            min_size=job.spec.min_size,
            max_size=job.spec.max_size,
            replica=worker,
            replica_prefix=child_prefix(job.metadata.name or "", REPLICA_WORKER),
            suspended=job.spec.run_policy.suspend,
        )

    def run_policy(self, job: TrainingJob) -> fw.RunPolicyView:
        return run_policy_view(job.spec.run_policy)

    # ----------------------------------------------------------------------- children

    def children(self, job: TrainingJob, *, size: int, ctx: fw.OperatorContext) -> fw.Children:
        if size <= 0:
            return fw.Children()
        name = job.metadata.name or ""
        namespace = job.metadata.namespace
        owner = job_owner(TRAININGJOB, job.metadata)
        template = job.spec.replica_specs.template
        containers = _containers(job)
        main = containers[0]
        port = container_port(main, TRAININGJOB_PORT_NAME) or DEFAULT_PORT
        ports = service_ports(main, default_name=TRAININGJOB_PORT_NAME, default_port=DEFAULT_PORT)
        base = dict(template.get("spec") or {})
        base["restartPolicy"] = pod_restart_policy(_restart_policy(job).value)
        base = with_placement(base, ctx, exclusive=True)
        command = torch.torchrun_command(main["command"]) if job.spec.inject_lattice else None
        shared = _shared_env(job, port=port, ctx=ctx)
        pods: list[Obj] = []
        services: list[Obj] = []
        for index in range(size):
            pod_name = child_name(name, REPLICA_WORKER, index)
            ours = [
                ("WORLD_SIZE", str(size)),
                ("RANK", str(index)),
                *shared,
                ("PET_NODE_RANK", str(index)),
            ]
            container = with_env(main, ours, defaults=[torch.DEFAULT_RESTARTS])
            if command is not None:
                container["command"] = command
            labels = replica_labels(
                job_name=name,
                replica_type=REPLICA_WORKER,
                index=index,
                operator_name=OPERATOR_NAME,
                master=index == 0,
            )
            pods.append(
                pod_manifest(
                    name=pod_name,
                    namespace=namespace,
                    template=template,
                    labels=labels,
                    owner=owner,
                    spec={**base, "containers": [container, *containers[1:]]},
                )
            )
            selector = replica_selector(job_name=name, replica_type=REPLICA_WORKER, index=index)
            services.append(
                headless_service(
                    name=pod_name,
                    namespace=namespace,
                    labels=labels,
                    selector=selector,
                    ports=ports,
                    owner=owner,
                )
            )
        return fw.Children(pods=tuple(pods), services=tuple(services))

    # ----------------------------------------------------------------------- status

    def progress(
        self,
        job: TrainingJob,
        *,
        size: int,
        pods: Sequence[fw.PodView],
        others: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> fw.Progress:
        del others  # a TrainingJob has only pods and services
        workers = sorted(
            (
                p
                for p in pods
                if p.deletion_timestamp is None
                and p.replica_type == _WORKER
                and p.replica_index is not None
                and p.replica_index < size
            ),
            key=lambda p: (p.replica_index or 0, p.name),
        )
        failed = [p for p in workers if p.phase == "Failed"]
        counts = fw.ReplicaCounts(
            active=sum(1 for p in workers if p.phase not in ("Succeeded", "Failed")),
            succeeded=sum(1 for p in workers if p.phase == "Succeeded"),
            failed=len(failed),
        )
        replicas = {REPLICA_WORKER: counts}
        running_indexes = {p.replica_index for p in workers if p.phase == "Running"}
        running = size > 0 and all(i in running_indexes for i in range(size))
        policy = _restart_policy(job)
        recreate: list[str] = []
        for pod in failed:
            code = exit_code(pod, TRAININGJOB_CONTAINER_NAME)
            if must_recreate(pod, policy.value, code):
                recreate.append(pod.name)
                continue
            return fw.Progress(
                replicas=replicas,
                running=running,
                failed=_failure_message(pod, policy, code),
                failed_reason=f"{TRAININGJOB.kind}Failed",
            )
        if any(p.replica_index == 0 and p.phase == "Succeeded" for p in workers):
            return fw.Progress(replicas=replicas, running=running, succeeded=True)
        return fw.Progress(
            replicas=replicas,
            running=running,
            restarting=bool(recreate),
            recreate=tuple(recreate),
        )


def _shared_env(job: TrainingJob, *, port: int, ctx: fw.OperatorContext) -> list[tuple[str, str]]:
    """The variables every worker of the job gets (rank-independent)."""
    name = job.metadata.name or ""
    uid = job.metadata.uid or ""
    nnodes = torch.nnodes(job.spec.min_size, job.spec.max_size, elastic=True)
    master = child_name(name, REPLICA_WORKER, 0)
    backend, endpoint = torch.rendezvous(master, port, ctx)
    pet = torch.torch_env(
        nodes=nnodes,
        node_rank="",
        master_addr=master,
        master_port=port,
        rdzv=torch.Rendezvous(backend, endpoint, uid),
    )
    env = [(n, str(v)) for n, v in torch.pick(pet, _TORCH_LAYOUT)]
    env += [
        ("LATTICE_FRAMEWORK", job.spec.framework.value),
        ("LATTICE_NNODES", nnodes),
        ("LATTICE_RDZV_ID", uid),
    ]
    optional = (
        ("LATTICE_RDZV_BACKEND", ctx.rdzv_backend),
        ("LATTICE_RDZV_CLIENT_SERVICE_HOST", ctx.rdzv_service_endpoint),
        ("LATTICE_RDZV_CLIENT_SERVICE_PORT", ctx.rdzv_service_port),
    )
    env += [(k, v) for k, v in optional if v]
    checkpoint = ctx.checkpoint_type or "remote"
    if checkpoint == "local":
        config = f"root=/tmp/{uid}"
    else:
        config = f"job_id={uid}"
        if ctx.checkpoint_service_endpoint:
            config += f",ckpt_service_endpoint={ctx.checkpoint_service_endpoint}"
        if ctx.checkpoint_service_port:
            config += f",ckpt_service_port={ctx.checkpoint_service_port}"
    env += [("LATTICE_CHECKPOINT_TYPE", checkpoint), ("LATTICE_CHECKPOINT_CONFIG", config)]
    if job.spec.framework == TrainingJobFramework.PYTORCH:
        env.append(("LATTICE_AUTOPATCH", "torch"))
    return env


def _problems(job: TrainingJob, ctx: fw.OperatorContext) -> list[fw.Problem]:
    """The operator-side rules the schema cannot express."""
    spec, name = job.spec, job.metadata.name or ""
    problems: list[fw.Problem] = []
    last = child_name(name, REPLICA_WORKER, spec.max_size - 1)
    problems += service_name_problems(name, longest=last, owners="workers'", label="worker Service")
    if spec.min_size > spec.max_size:
        why = f"must be less than or equal to spec.maxSize ({spec.max_size}), got {spec.min_size}"
        problems.append(fw.Problem("spec.minSize", why))
    containers = _containers(job)
    if not containers or not all(isinstance(c, Mapping) for c in containers):
        return [*problems, fw.Problem(_CONTAINERS, "must be a non-empty list of containers")]
    first = containers[0]
    if first.get("name") != TRAININGJOB_CONTAINER_NAME:
        why = f'must be "{TRAININGJOB_CONTAINER_NAME}", got "{first.get("name", "")}"'
        problems.append(fw.Problem(f"{_CONTAINERS}[0].name", why))
    command = first.get("command")
    if spec.inject_lattice and not (isinstance(command, list) and command):
        why = "required when spec.injectLattice is true: the image's own entrypoint cannot be "
        problems.append(fw.Problem(f"{_CONTAINERS}[0].command", why + "wrapped"))
    pod_spec = job.spec.replica_specs.template.get("spec") or {}
    problems += template_problems(pod_spec, field="spec.replicaSpecs.template.spec")
    return problems


def _failure_message(pod: fw.PodView, policy: RestartPolicy, code: int | None) -> str:
    if code:
        what = f"exited with code {code}"
    else:
        what = "failed" + (f" ({pod.reason})" if pod.reason else "")
    return f"worker pod {pod.name} {what} (restartPolicy {policy.value})"
