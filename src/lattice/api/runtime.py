"""TrainingRuntime / ClusterTrainingRuntime ``trainer.kubeflow.org/v1alpha1`` (Trainer v2.3.0).

Contract: the spec mirrors ``trainingruntime_types.go`` at v2.3.0: ``mlPolicy`` (numNodes and at
most one of ``torch``, ``mpi``, ``flux``, ``jax``, ``xgboost``), ``podGroupPolicy``
(``coscheduling`` or ``volcano``) and ``template``, a JobSet template (``lattice.api.jobset``,
every JobSet v0.12 field, Job templates with the full Kubernetes schema). Fields that v2.0/v2.1
had and v2.2 removed (``torch.numProcPerNode``, ``torch.elasticPolicy``) are still accepted, so
runtimes written for v2.0 apply unchanged. Runtimes have no status and no printer columns.

Rules: only one ML policy; numNodes not together with torch.elasticPolicy; elasticPolicy
``minNodes <= maxNodes``; torch numProcPerNode a positive integer or auto/cpu/gpu;
``envInjection`` targets never name the ``node`` container; flux numProcPerNode >= 1; only one
of coscheduling/volcano; mpi mpiImplementation OpenMPI (or empty, as upstream's enum allows).

Schema defaults: torch ``numProcPerNode`` auto; mpi ``numProcPerNode`` 1, ``mpiImplementation``
OpenMPI, ``sshAuthMountPath`` /root/.ssh, ``runLauncherAsNode`` false; flux ``numProcPerNode`` 1;
coscheduling ``scheduleTimeoutSeconds`` 60; volcano networkTopology ``mode`` hard and
``highestTierAllowed`` 1. Operator-side: ``mlPolicy.numNodes`` defaults to 1 (not a schema
default: it would collide with elasticPolicy).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints

from lattice.api.base import CustomResource, IntOrString, K8sModel, MetricSpec
from lattice.api.jobset import (
    MAX_REPLICATED_JOBS,
    JobSetNetwork,
    JobSetSpec,
    JobSetSuccessPolicy,
    ReplicatedJob,
    SuccessPolicyOperator,
)
from lattice.api.schema import cel_rule, list_map, validations

__all__ = [
    "MAX_REPLICATED_JOBS",
    "ClusterTrainingRuntime",
    "CoschedulingPodGroupPolicySource",
    "EnvInjection",
    "EnvInjectionTarget",
    "FluxMLPolicySource",
    "JAXMLPolicySource",
    "JobSetNetwork",
    "JobSetSpec",
    "JobSetSuccessPolicy",
    "JobSetTemplateSpec",
    "MLPolicy",
    "MPIMLPolicySource",
    "NetworkTopologyMode",
    "NetworkTopologySpec",
    "PodGroupPolicy",
    "ReplicatedJob",
    "SuccessPolicyOperator",
    "TemplateMetadata",
    "TorchElasticPolicy",
    "TorchMLPolicySource",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "VolcanoPodGroupPolicySource",
    "XGBoostMLPolicySource",
]

_ONE_POLICY = ("torch", "mpi", "jax", "xgboost", "flux")


class TorchElasticPolicy(K8sModel):
    """Elastic PyTorch: torchrun ``--nnodes=minNodes:maxNodes`` (Trainer v2.0/v2.1 only)."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel_rule(
                "!has(self.minNodes) || !has(self.maxNodes) || self.minNodes <= self.maxNodes",
                "mlPolicy.torch.elasticPolicy.minNodes must be less than or equal to maxNodes",
                field_path=".minNodes",
            ),
        )
    )

    max_restarts: int | None = Field(None, ge=0)
    """torchrun --max-restarts, and the JobSet failurePolicy.maxRestarts."""
    min_nodes: int | None = Field(None, ge=1, le=100_000)
    """Fewest nodes the job scales down to."""
    max_nodes: int | None = Field(None, ge=1, le=100_000)
    """Most nodes the job scales up to."""
    metrics: list[MetricSpec] | None = Field(
        None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """autoscaling/v2 MetricSpecs for an HPA."""


_ContainerName = Annotated[str, StringConstraints(max_length=63)]


class EnvInjectionTarget(K8sModel):
    """Containers of one replicatedJob that also get the PET_* environment."""

    job_name: str = Field(min_length=1, max_length=253)
    """Name of the replicatedJob, e.g. node."""
    container_names: list[_ContainerName] = Field(
        min_length=1,
        max_length=8,
        json_schema_extra={
            "x-kubernetes-list-type": "set",
            **validations(
                cel_rule(
                    "!self.exists(c, c == 'node')",
                    "envInjection containerNames must not include node: the node container "
                    "always gets the PET_* variables",
                )
            ),
        },
    )
    """Containers (sidecars, init containers) that get the PET_* variables too."""


class EnvInjection(K8sModel):
    """Extra containers that get the framework environment."""

    targets: list[EnvInjectionTarget] | None = Field(
        None,
        max_length=16,
        json_schema_extra=list_map("jobName"),
    )
    """One entry per replicatedJob."""


class TorchMLPolicySource(K8sModel):
    """PyTorch runtime configuration."""

    num_proc_per_node: IntOrString = Field(
        "auto",
        json_schema_extra=validations(
            cel_rule(
                "type(self) == int ? self > 0 : self in ['auto', 'cpu', 'gpu']",
                "mlPolicy.torch.numProcPerNode must be a positive integer or one of auto, cpu, gpu",
            ),
        ),
    )
    """torchrun --nproc-per-node: auto (default), cpu, gpu or a positive integer (Trainer
    v2.0/v2.1; v2.2 derives it from the trainer's resources)."""
    elastic_policy: TorchElasticPolicy | None = None
    """Elastic training policy (Trainer v2.0/v2.1); excludes mlPolicy.numNodes."""
    env_injection: EnvInjection | None = None
    """Containers besides node that get the PET_* variables (Trainer v2.3)."""


class MPIMLPolicySource(K8sModel):
    """MPI runtime configuration."""

    num_proc_per_node: int = Field(1, ge=1)
    """Slots per node in the hostfile. Defaults to 1."""
    mpi_implementation: Literal["OpenMPI", ""] = "OpenMPI"
    """MPI implementation; Trainer supports OpenMPI only (empty means OpenMPI)."""
    ssh_auth_mount_path: str = Field("/root/.ssh", max_length=4096)
    """Directory where the SSH keys are mounted. Defaults to /root/.ssh."""
    run_launcher_as_node: bool = False
    """Also run a training process in the launcher Job. Defaults to false."""


class FluxMLPolicySource(K8sModel):
    """Flux Framework (HPC) runtime configuration."""

    num_proc_per_node: int = Field(
        1,
        json_schema_extra=validations(
            cel_rule("self >= 1", "mlPolicy.flux.numProcPerNode must be at least 1")
        ),
    )
    """Tasks per node. Defaults to 1."""


class JAXMLPolicySource(K8sModel):
    """JAX runtime configuration (no parameters: the coordinator and process ids are derived)."""


class XGBoostMLPolicySource(K8sModel):
    """XGBoost (Rabit/collective) runtime configuration: one worker per GPU of a node, or one
    per node without GPUs."""


class MLPolicy(K8sModel):
    """ML-specific parameters of the runtime."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel_rule(
                "!(has(self.numNodes) && has(self.torch) && has(self.torch.elasticPolicy))",
                "mlPolicy.numNodes must not be set when mlPolicy.torch.elasticPolicy is configured",
                field_path=".numNodes",
            ),
            cel_rule(
                "[" + ", ".join(f"has(self.{p})" for p in _ONE_POLICY) + "]"
                ".filter(x, x).size() <= 1",
                "only one of mlPolicy.torch, mpi, jax, xgboost and flux may be configured",
            ),
        )
    )

    num_nodes: int | None = Field(None, ge=1, le=100_000)
    """Number of training nodes. Defaults to 1 (operator-side)."""
    torch: TorchMLPolicySource | None = None
    """PyTorch configuration (torchrun)."""
    mpi: MPIMLPolicySource | None = None
    """MPI configuration (launcher and workers over SSH)."""
    flux: FluxMLPolicySource | None = None
    """Flux Framework configuration."""
    jax: JAXMLPolicySource | None = None
    """JAX configuration (distributed JAX over the JobSet's DNS)."""
    xgboost: XGBoostMLPolicySource | None = None
    """XGBoost configuration (collective tracker on the first node)."""


class CoschedulingPodGroupPolicySource(K8sModel):
    """scheduler-plugins coscheduling: minMember is the total number of pods."""

    schedule_timeout_seconds: int = Field(60, ge=0)
    """Seconds to wait for the whole group. Defaults to 60."""


class NetworkTopologyMode(StrEnum):
    """How strictly Volcano keeps a gang within a network tier."""

    HARD = "hard"
    SOFT = "soft"


class NetworkTopologySpec(K8sModel):
    """Volcano network-topology-aware scheduling (HyperNodes)."""

    mode: NetworkTopologyMode = NetworkTopologyMode.HARD
    """hard (default): never cross highestTierAllowed; soft: prefer not to."""
    highest_tier_allowed: int = 1
    """Highest HyperNode tier the gang may span. Defaults to 1."""


class VolcanoPodGroupPolicySource(K8sModel):
    """Gang-scheduling through a Volcano PodGroup."""

    network_topology: NetworkTopologySpec | None = None
    """Network topology constraints of the PodGroup."""


class PodGroupPolicy(K8sModel):
    """Gang-scheduling through a PodGroup."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel_rule(
                "!(has(self.coscheduling) && has(self.volcano))",
                "only one of podGroupPolicy.coscheduling and podGroupPolicy.volcano may be "
                "configured",
            )
        )
    )

    coscheduling: CoschedulingPodGroupPolicySource | None = None
    """Use the coscheduling plugin of scheduler-plugins."""
    volcano: VolcanoPodGroupPolicySource | None = None
    """Use the Volcano scheduler."""


class TemplateMetadata(K8sModel):
    """Labels and annotations of the JobSet built from the runtime (name and namespace are the
    TrainJob's; if given here they are ignored)."""

    labels: dict[str, str] | None = None
    """Labels of the JobSet."""
    annotations: dict[str, str] | None = None
    """Annotations of the JobSet."""
    name: str | None = None
    """Ignored: the JobSet is named after the TrainJob."""
    namespace: str | None = None
    """Ignored: the JobSet is in the TrainJob's namespace."""
    finalizers: list[str] | None = None
    """Ignored."""


class JobSetTemplateSpec(K8sModel):
    """Template of the JobSet a TrainJob creates."""

    metadata: TemplateMetadata | None = None
    """Labels and annotations of the JobSet."""
    spec: JobSetSpec = Field(default_factory=JobSetSpec)
    """The JobSet spec."""


class TrainingRuntimeSpec(K8sModel):
    """Desired state of a (Cluster)TrainingRuntime."""

    ml_policy: MLPolicy | None = None
    """ML-specific parameters: numNodes and one of torch, mpi, jax, xgboost, flux."""
    pod_group_policy: PodGroupPolicy | None = None
    """Gang-scheduling configuration."""
    template: JobSetTemplateSpec
    """JobSet template instantiated for every TrainJob."""


class TrainingRuntime(CustomResource[TrainingRuntimeSpec]):
    """A namespaced training runtime, usable by TrainJobs in its namespace."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainingRuntime"] = "TrainingRuntime"


class ClusterTrainingRuntime(CustomResource[TrainingRuntimeSpec]):
    """A cluster-scoped training runtime, usable by TrainJobs in any namespace."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["ClusterTrainingRuntime"] = "ClusterTrainingRuntime"
