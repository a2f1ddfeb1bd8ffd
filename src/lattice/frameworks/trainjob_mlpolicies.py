"""TrainJob's ML policy plugins: one per ``mlPolicy`` field, in a fixed order, each applying its
kind-neutral policy (``lattice.frameworks.policies``) to the pod templates of a resolved job.

Contract (pure; the facts are Kubeflow Trainer v2.3's plugins):
- ``ML_POLICIES``: the plugins (torch, MPI, JAX, XGBoost, Flux) in the order they apply. A
  plugin (``trainjob_policy.TrainJobPolicy``) is ``active`` when the runtime states its policy;
  ``patch`` edits the pod spec of one replicatedJob (a copy the caller owns) and its main
  container; ``objects`` adds ConfigMaps and Secrets of its own; ``problems`` names what a
  TrainJob asks that the policy forbids (``InvalidJob``); ``runtime_problems`` what the runtime
  states that it cannot apply (the runtime is not ready). ``apply_policies``,
  ``policy_objects``, ``trainjob_problems`` and ``runtime_policy_problems`` run every active
  plugin.
- ``runtime_node_resources``: the runtime's resources per node, as upstream reads them: those of
  the container ``node`` of the first replicatedJob named ``node`` or labelled as the trainer.
- **torch**: on the trainer's main container the ``torch.torch_env`` variables (Trainer's order),
  ``PET_MAX_RESTARTS=100`` for an elastic job unless set, and the container port 29500. A ``tune
  run`` TrainJob (``torchtune``) has no ``PET_MASTER_*``, its command ``torchtune.tune_command``
  (rendezvous at the first trainer pod) and its problems ``torchtune.problems``.
  ``torch.envInjection.targets`` copy the same variables into the named containers (regular
  before init containers) of the named replicatedJob; a target the runtime lacks is a runtime
  problem at ``spec.mlPolicy.torch.envInjection.targets[i]``.
- **MPI**: the ssh volume ``mpi-ssh-auth`` (default mode 0400, ``id_rsa`` 0640, the public
  files 0644, as v2.3) on launcher and node pods, mounted at sshAuthMountPath; on the launcher
  the hostfile ConfigMap volume at ``/etc/mpi`` and the launcher env of the implementation
  (``""`` is OpenMPI) in Trainer's order; ``trainer.env`` must not set those launcher names
  (``spec.trainer.env``).
- **JAX**: ``JAX_NUM_PROCESSES`` (the node count), ``JAX_PROCESS_ID`` (the completion index),
  ``JAX_COORDINATOR_ADDRESS=<first trainer pod>.<subdomain>:29500`` and the port 29500 on the
  trainer's main container.
- **XGBoost**: ``DMLC_TRACKER_URI=<first trainer pod>.<subdomain>``, ``DMLC_TRACKER_PORT=29500``,
  ``DMLC_TASK_ID`` (the completion index), ``DMLC_NUM_WORKER`` (nodes times the GPUs per node,
  at least one per node) and the port 29500 on the trainer's main container; ``trainer.env``
  must not set the ``DMLC_*`` names (``spec.trainer.env[i]``).
- **Flux**: ``lattice.frameworks.trainjob_flux``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from lattice.api.runtime import MLPolicy, TrainingRuntimeSpec
from lattice.api.trainjob import TrainJob
from lattice.frameworks.base import Problem
from lattice.frameworks.policies import jax, mpi, torch, torchtune, xgboost
from lattice.frameworks.policies.resources import gpus_per_node
from lattice.frameworks.trainjob_flux import FluxPolicy
from lattice.frameworks.trainjob_plans import (
    ANCESTOR_TRAINER,
    LAUNCHER,
    NODE,
    ReplicatedJobPlan,
    ResolvedJob,
    TorchPlan,
    upsert,
)
from lattice.frameworks.trainjob_policy import (
    INDEX_REF,
    MASTER_PORT,
    Resources,
    TrainJobPolicy,
    env_entries,
    first_host,
    with_port,
)
from lattice.primitives.objects import Obj

__all__ = [
    "ML_POLICIES",
    "apply_policies",
    "policy_objects",
    "runtime_node_resources",
    "runtime_policy_problems",
    "trainjob_problems",
]

_SSH_VOLUME, _HOSTFILE_VOLUME = "mpi-ssh-auth", "mpi-hostfile"
#: The torch policy's variables, in Trainer's order.
_TRAINER_TORCH = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_RDZV_BACKEND",
    "PET_RDZV_ENDPOINT",
    "PET_RDZV_ID",
    "PET_MAX_RESTARTS",
)
#: The launcher variables per implementation, in Trainer's order.
_TRAINER_MPI = {
    mpi.OPENMPI: (
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
        "OMPI_MCA_plm_rsh_args",
    ),
}


class _Torch(TrainJobPolicy):
    name = "torch"

    def problems(self, tj: TrainJob, *, ml: MLPolicy, resources: Resources) -> list[Problem]:
        del ml
        trainer = tj.spec.trainer
        if trainer is None or not torchtune.is_torchtune(trainer.command):
            return []
        return torchtune.problems(
            runtime_name=tj.spec.runtime_ref.name,
            nodes=trainer.num_nodes,
            nproc=trainer.num_proc_per_node,
            gpus=gpus_per_node(resources),
            args=[str(a) for a in trainer.args or ()],
        )

    def runtime_problems(self, spec: TrainingRuntimeSpec) -> list[Problem]:
        policy = spec.ml_policy.torch if spec.ml_policy else None
        injection = policy.env_injection if policy else None
        jobs = {r.name: r for r in spec.template.spec.replicated_jobs}
        problems: list[Problem] = []
        for i, target in enumerate((injection.targets if injection else None) or ()):
            rjob = jobs.get(target.job_name)
            pod = ((rjob.template.get("spec") or {}).get("template") or {}) if rjob else {}
            pod_spec = pod.get("spec") or {}
            have = {
                c.get("name")
                for field in ("containers", "initContainers")
                for c in pod_spec.get(field) or ()
            }
            for name in target.container_names:
                if name not in have:
                    why = (
                        f"envInjection target replicatedJob {target.job_name!r} container "
                        f"{name!r} not found in the runtime template"
                    )
                    problems.append(Problem(f"spec.mlPolicy.torch.envInjection.targets[{i}]", why))
        return problems

    def patch(self, job: ResolvedJob, r: ReplicatedJobPlan, spec: Obj, main: Obj) -> None:
        if job.torch is None:
            return
        entries = env_entries(_torch_env(job))
        if r.name == job.trainer:
            tune = _tune_command(job, job.torch)
            mine = [e for e in entries if tune is None or not e["name"].startswith("PET_MASTER")]
            main["env"] = upsert(main.get("env"), mine, key="name")
            if tune is not None:
                main["command"] = tune
            name, value = torch.DEFAULT_RESTARTS
            if job.torch.elastic and not any(e.get("name") == name for e in main["env"]):
                main["env"].append({"name": name, "value": value})
            with_port(main, MASTER_PORT)
        policy = job.ml_policy.torch if job.ml_policy else None
        injection = policy.env_injection if policy else None
        for target in (injection.targets if injection else None) or ():
            if target.job_name != r.name:
                continue
            for container_name in target.container_names:
                container = _container(spec, container_name)
                if container is not None:
                    container["env"] = upsert(container.get("env"), entries, key="name")


def _tune_command(job: ResolvedJob, plan: TorchPlan) -> list[str] | None:
    """torchtune's command for a ``tune run`` TrainJob, else None."""
    trainer = job.trainjob.spec.trainer
    if trainer is None or not torchtune.is_torchtune(trainer.command):
        return None
    return torchtune.tune_command(
        endpoint=f"{first_host(job)}:{MASTER_PORT}",
        nodes=job.max_nodes,
        nproc=plan.num_proc_per_node,
        gpus=gpus_per_node(job.node_resources),
        model=torchtune.model_of(job.runtime_name),
        args=[str(a) for a in trainer.args or ()],
        overrides=plan.tune_overrides,
    )


def _container(spec: Obj, name: str) -> Obj | None:
    """Container ``name`` of ``spec``: regular containers first, then init containers."""
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            if container.get("name") == name:
                found: Obj = container
                return found
    return None


def _torch_env(job: ResolvedJob) -> dict[str, str | Obj]:
    assert job.torch is not None  # only called for torch runtimes
    master = first_host(job)
    elastic = job.torch.elastic
    rdzv = None
    if elastic:
        backend, endpoint = torch.rendezvous(master, MASTER_PORT, None)
        rdzv = torch.Rendezvous(backend, endpoint, job.trainjob.metadata.uid or job.name)
    env = torch.torch_env(
        nodes=torch.nnodes(job.min_nodes, job.max_nodes, elastic=elastic),
        nproc_per_node=job.torch.num_proc_per_node,
        node_rank=copy.deepcopy(INDEX_REF),
        master_addr=master,
        master_port=MASTER_PORT,
        rdzv=rdzv,
        max_restarts=job.torch.max_restarts if elastic else None,
    )
    return dict(torch.pick(env, _TRAINER_TORCH))


class _MPI(TrainJobPolicy):
    name = "mpi"

    def problems(self, tj: TrainJob, *, ml: MLPolicy, resources: Resources) -> list[Problem]:
        del ml, resources
        env = tj.spec.trainer.env if tj.spec.trainer else None
        reserved = {n for names in _TRAINER_MPI.values() for n in names}
        found = sorted({str(e.get("name")) for e in env or ()} & reserved)
        if not found:
            return []
        why = f"must not have reserved envs, invalid envs configured: [{' '.join(found)}]"
        return [Problem("spec.trainer.env", why)]

    def patch(self, job: ResolvedJob, r: ReplicatedJobPlan, spec: Obj, main: Obj) -> None:
        if job.mpi is None or r.name not in (LAUNCHER, NODE):
            return
        secret = f"{job.name}-mpi-ssh-auth"
        volumes = [
            mpi.ssh_volume(
                volume=_SSH_VOLUME, secret=secret, default_mode=0o400, file_modes=(0o640, 0o644)
            )
        ]
        mounts = [{"name": _SSH_VOLUME, "mountPath": job.mpi.ssh_auth_mount_path}]
        if r.name == LAUNCHER:
            items = [{"key": "hostfile", "path": "hostfile", "mode": 0o444}]
            config = {"name": f"{job.name}-mpi-hostfile", "items": items}
            volumes.append({"name": _HOSTFILE_VOLUME, "configMap": config})
            mounts.append({"name": _HOSTFILE_VOLUME, "mountPath": mpi.CONFIG_MOUNT_PATH})
            impl = job.mpi.implementation
            env = mpi.launcher_env(
                impl, hostfile=f"{mpi.CONFIG_MOUNT_PATH}/hostfile", slots=job.mpi.slots
            )
            ordered = {n: env[n] for n in _TRAINER_MPI.get(impl, tuple(env))}
            main["env"] = upsert(main.get("env"), env_entries(ordered), key="name")
        spec["volumes"] = upsert(spec.get("volumes"), volumes, key="name")
        main["volumeMounts"] = upsert(main.get("volumeMounts"), mounts, key="name")


class _JAX(TrainJobPolicy):
    name = "jax"

    def patch(self, job: ResolvedJob, r: ReplicatedJobPlan, spec: Obj, main: Obj) -> None:
        if r.name != job.trainer:
            return
        env = jax.jax_env(
            processes=job.max_nodes,
            process_id=copy.deepcopy(INDEX_REF),
            coordinator=first_host(job),
            port=jax.PORT,
        )
        main["env"] = upsert(main.get("env"), env_entries(env), key="name")
        with_port(main, jax.PORT)


class _XGBoost(TrainJobPolicy):
    name = "xgboost"

    def problems(self, tj: TrainJob, *, ml: MLPolicy, resources: Resources) -> list[Problem]:
        del ml, resources
        env = tj.spec.trainer.env if tj.spec.trainer else None
        why = "{} is reserved for the XGBoost runtime"
        return [
            Problem(f"spec.trainer.env[{i}]", why.format(e.get("name")))
            for i, e in enumerate(env or ())
            if e.get("name") in xgboost.RESERVED_ENV
        ]

    def patch(self, job: ResolvedJob, r: ReplicatedJobPlan, spec: Obj, main: Obj) -> None:
        if r.name != job.trainer:
            return
        workers = xgboost.workers(nodes=job.max_nodes, gpus=gpus_per_node(job.node_resources))
        env = xgboost.xgboost_env(
            tracker=first_host(job),
            port=xgboost.PORT,
            task_id=copy.deepcopy(INDEX_REF),
            workers=workers,
        )
        main["env"] = upsert(main.get("env"), env_entries(env), key="name")
        with_port(main, xgboost.PORT)


ML_POLICIES: tuple[TrainJobPolicy, ...] = (_Torch(), _MPI(), _JAX(), _XGBoost(), FluxPolicy())


def apply_policies(job: ResolvedJob, r: ReplicatedJobPlan, spec: Obj, main: Obj) -> None:
    """Every active plugin's edits of replicatedJob ``r``'s pod ``spec`` (and ``main``)."""
    for policy in ML_POLICIES:
        if policy.active(job.ml_policy):
            policy.patch(job, r, spec, main)


def policy_objects(
    job: ResolvedJob, *, labels: Mapping[str, str], owner: Obj
) -> tuple[list[Obj], list[Obj]]:
    """Every active plugin's ConfigMaps and Secrets."""
    config_maps: list[Obj] = []
    secrets: list[Obj] = []
    for policy in ML_POLICIES:
        if policy.active(job.ml_policy):
            maps, keys = policy.objects(job, labels=labels, owner=owner)
            config_maps += maps
            secrets += keys
    return config_maps, secrets


def trainjob_problems(tj: TrainJob, *, ml: MLPolicy | None, resources: Resources) -> list[Problem]:
    """What ``tj`` asks that an active policy forbids (``resources``: per node, as counted)."""
    if ml is None:
        return []
    active = [policy for policy in ML_POLICIES if policy.active(ml)]
    return [p for policy in active for p in policy.problems(tj, ml=ml, resources=resources)]


def runtime_policy_problems(spec: TrainingRuntimeSpec) -> list[Problem]:
    """What the runtime ``spec`` states that an active policy cannot apply."""
    ml = spec.ml_policy
    return [p for policy in ML_POLICIES if policy.active(ml) for p in policy.runtime_problems(spec)]


def runtime_node_resources(spec: TrainingRuntimeSpec, steps: Mapping[str, str]) -> Obj | None:
    """The ``resources`` of container ``node`` in the runtime's node or trainer replicatedJob."""
    for rjob in spec.template.spec.replicated_jobs:
        if rjob.name != NODE and steps.get(rjob.name) != ANCESTOR_TRAINER:
            continue
        pod = (rjob.template.get("spec") or {}).get("template") or {}
        containers: Sequence[Obj] = (pod.get("spec") or {}).get("containers") or ()
        for container in containers:
            if container.get("name") == NODE and container.get("resources") is not None:
                resources: Obj = dict(container["resources"])
                return resources
    return None
