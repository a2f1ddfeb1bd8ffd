"""MPIJob ``kubeflow.org/v2beta1``: every field of mpi-operator v2beta1 (v0.8).

Contract: the spec mirrors mpi-operator ``types.go``; validation mirrors its ``validation.go``
as CRD rules: exactly the replica types Launcher and Worker, a Launcher is required and has
``replicas == 1``, restartPolicy is Never or OnFailure, every template has a container,
``slotsPerWorker >= 1``, ``runPolicy.managedBy`` is mpi-operator or MultiKueue and immutable, and
the longest worker hostname ``<name>-worker-<N-1>`` is a DNS-1035 label.

Schema defaults: ``slotsPerWorker`` 1, ``runLauncherAsWorker`` false, ``sshAuthMountPath``
``/root/.ssh``, ``launcherCreationPolicy`` AtStartup, ``mpiImplementation`` OpenMPI,
``runPolicy.cleanPodPolicy`` None, ``runPolicy.suspend`` false.
Operator-side defaults (they depend on the map key, so the schema cannot hold them; the model
applies them on parse): Launcher ``replicas`` 1 / ``restartPolicy`` OnFailure, Worker ``replicas``
0 / ``restartPolicy`` Never.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Self

from pydantic import Field, model_validator
from pydantic.config import JsonDict, JsonValue

from lattice.api.base import CustomResourceWithStatus, K8sModel
from lattice.api.common import (
    KubeflowJobStatus,
    ManagedRunPolicy,
    ReplicaSpec,
    RestartPolicy,
    managed_by,
    replica_names_frozen_while_running,
)
from lattice.api.constants import MANAGED_BY_MPI_OPERATOR, REPLICA_LAUNCHER, REPLICA_WORKER
from lattice.api.schema import cel_rule, dns1035_name_rule, validations

__all__ = [
    "LauncherCreationPolicy",
    "MPIImplementation",
    "MPIJob",
    "MPIJobSpec",
    "MPIRunPolicy",
    "mpijob_root_rules",
]


class MPIImplementation(StrEnum):
    """MPI flavour; decides the hostfile format and launcher environment."""

    OPENMPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


class LauncherCreationPolicy(StrEnum):
    """When the launcher is created."""

    AT_STARTUP = "AtStartup"
    WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


class MPIRunPolicy(ManagedRunPolicy):
    """Run policy of an MPIJob (the launcher Job gets ttl, deadline and backoffLimit)."""

    model_config = managed_by(MANAGED_BY_MPI_OPERATOR)


_REPLICA_RULES: list[JsonValue] = [
    cel_rule(
        f"size(self) == ('{REPLICA_LAUNCHER}' in self ? 1 : 0) + "
        f"('{REPLICA_WORKER}' in self ? 1 : 0)",
        "spec.mpiReplicaSpecs may only contain the replica types Launcher and Worker",
    ),
    cel_rule(
        f"'{REPLICA_LAUNCHER}' in self",
        "spec.mpiReplicaSpecs must have a Launcher replica spec",
        reason="FieldValueRequired",
    ),
    cel_rule(
        f"!('{REPLICA_LAUNCHER}' in self) || !has(self.{REPLICA_LAUNCHER}.replicas) || "
        f"self.{REPLICA_LAUNCHER}.replicas == 1",
        "spec.mpiReplicaSpecs.Launcher.replicas must be 1",
    ),
    # Only Always and ExitCode are refused here; unknown values are the enum's to report.
    cel_rule(
        f"['{REPLICA_LAUNCHER}', '{REPLICA_WORKER}'].all(t, !(t in self) || "
        "!has(self[t].restartPolicy) || !(self[t].restartPolicy in ['Always', 'ExitCode']))",
        "spec.mpiReplicaSpecs restartPolicy must be Never or OnFailure",
    ),
]


INT32_MAX = 2**31 - 1
"""Upstream's ``*int32`` bound of ``slotsPerWorker``."""


class MPIJobSpec(K8sModel):
    """Desired state of an MPIJob."""

    slots_per_worker: int = Field(1, ge=1, le=INT32_MAX)
    """Slots per worker in the hostfile (an int32 upstream). Defaults to 1."""
    run_launcher_as_worker: bool = False
    """Also run a worker process in the launcher. Defaults to false."""
    run_policy: MPIRunPolicy = Field(
        default_factory=MPIRunPolicy, json_schema_extra={"default": {}}
    )
    """Runtime policies: clean-up, TTL, deadline, retries, gang, suspend, managedBy."""
    mpi_replica_specs: dict[str, ReplicaSpec] = Field(
        max_length=2, json_schema_extra=validations(*_REPLICA_RULES)
    )
    """Replica specs keyed by type: Launcher (required, 1 replica) and Worker."""
    ssh_auth_mount_path: str = "/root/.ssh"
    """Directory where the SSH keys are mounted. Defaults to /root/.ssh."""
    launcher_creation_policy: LauncherCreationPolicy = LauncherCreationPolicy.AT_STARTUP
    """AtStartup, or WaitForWorkersReady to create the launcher once all workers are ready."""
    mpi_implementation: MPIImplementation = MPIImplementation.OPENMPI
    """OpenMPI (default), Intel or MPICH."""

    @model_validator(mode="after")
    def _default_replicas(self) -> Self:
        """Operator-side defaults that depend on the replica type (mpi-operator default.go)."""
        for replica_type, replicas, restart_policy in (
            (REPLICA_LAUNCHER, 1, RestartPolicy.ON_FAILURE),
            (REPLICA_WORKER, 0, RestartPolicy.NEVER),
        ):
            spec = self.mpi_replica_specs.get(replica_type)
            if spec is None:
                continue
            if spec.replicas is None:
                spec.replicas = replicas
            if spec.restart_policy is None:
                spec.restart_policy = restart_policy
        return self

    @property
    def launcher(self) -> ReplicaSpec | None:
        """The Launcher replica spec."""
        return self.mpi_replica_specs.get(REPLICA_LAUNCHER)

    @property
    def worker(self) -> ReplicaSpec | None:
        """The Worker replica spec, if any."""
        return self.mpi_replica_specs.get(REPLICA_WORKER)


def mpijob_root_rules() -> list[JsonDict]:
    """Root-level rules: pods and the service are named ``<name>-worker-<i>`` and ``<name>``."""
    workers = f"self.spec.mpiReplicaSpecs.{REPLICA_WORKER}"
    last_index = (
        f"('{REPLICA_WORKER}' in self.spec.mpiReplicaSpecs && has({workers}.replicas) && "
        f"{workers}.replicas > 1) ? {workers}.replicas - 1 : 0"
    )
    return [
        dns1035_name_rule(
            "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', "
            "starting with a letter): it names the worker pods",
        ),
        cel_rule(
            "!has(self.spec) || !has(self.spec.mpiReplicaSpecs) || "
            f"size(self.metadata.name) + size('-worker-') + size(string({last_index})) <= 63",
            "metadata.name is too long: the worker hostname <name>-worker-<index> must be at "
            "most 63 characters",
            field_path=".metadata.name",
        ),
        replica_names_frozen_while_running(
            "mpiReplicaSpecs", "status.lattice", (REPLICA_LAUNCHER, REPLICA_WORKER)
        ),
    ]


class MPIJob(CustomResourceWithStatus[MPIJobSpec, KubeflowJobStatus]):
    """An MPI job: one launcher running mpirun against N workers reached over SSH."""

    api_version: Literal["kubeflow.org/v2beta1"] = "kubeflow.org/v2beta1"
    kind: Literal["MPIJob"] = "MPIJob"
