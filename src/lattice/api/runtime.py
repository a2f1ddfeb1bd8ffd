"""TrainingRuntime / ClusterTrainingRuntime ``trainer.kubeflow.org/v1alpha1`` (Trainer v2.0.0).

Contract: the spec mirrors ``trainingruntime_types.go`` at v2.0.0: ``mlPolicy`` (numNodes, and
at most one of ``torch``/``mpi``), ``podGroupPolicy`` (coscheduling) and ``template``, a JobSet
template. Only the JobSet fields the operator reads are declared (replicatedJobs, successPolicy,
network); every other JobSet field is preserved untouched. Runtimes have no status.

Rules (v2.0.0 CEL plus Lattice's): only one of torch/mpi; numNodes not together with
torch.elasticPolicy; elasticPolicy ``1 <= minNodes <= maxNodes``; torch numProcPerNode is a
positive integer or auto/cpu/gpu; replicatedJobs names unique and non-empty; mpi
mpiImplementation is OpenMPI (the only one v2.0.0 accepts).

Schema defaults: torch ``numProcPerNode`` auto; mpi ``numProcPerNode`` 1, ``mpiImplementation``
OpenMPI, ``sshAuthMountPath`` /root/.ssh, ``runLauncherAsNode`` false; coscheduling
``scheduleTimeoutSeconds`` 60; replicatedJob ``replicas`` 1. Operator-side: ``mlPolicy.numNodes``
defaults to 1 (not a schema default: it would collide with elasticPolicy).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import ConfigDict, Field

from lattice.api.base import IntOrString, K8sModel, Object, ObjectMeta
from lattice.api.schema import cel_rule

__all__ = [
    "ClusterTrainingRuntime",
    "CoschedulingPodGroupPolicySource",
    "JobSetNetwork",
    "JobSetSpec",
    "JobSetSuccessPolicy",
    "JobSetTemplateSpec",
    "MLPolicy",
    "MPIMLPolicySource",
    "PodGroupPolicy",
    "ReplicatedJob",
    "SuccessPolicyOperator",
    "TemplateMetadata",
    "TorchElasticPolicy",
    "TorchMLPolicySource",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
]

MAX_REPLICATED_JOBS = 32
"""Bound on replicatedJobs, so that the uniqueness rule stays within the CEL cost budget."""


class TorchElasticPolicy(K8sModel):
    """Elastic PyTorch: torchrun ``--nnodes=minNodes:maxNodes`` (not implemented in v2.0.0)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel_rule(
                    "!has(self.minNodes) || !has(self.maxNodes) || self.minNodes <= self.maxNodes",
                    "mlPolicy.torch.elasticPolicy.minNodes must be less than or equal to maxNodes",
                    field_path=".minNodes",
                ),
            ]
        }
    )

    max_restarts: int | None = Field(None, ge=0)
    """torchrun --max-restarts, and the JobSet failurePolicy.maxRestarts."""
    min_nodes: int | None = Field(None, ge=1, le=100_000)
    """Fewest nodes the job scales down to."""
    max_nodes: int | None = Field(None, ge=1, le=100_000)
    """Most nodes the job scales up to."""
    metrics: list[Object] | None = Field(
        None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """autoscaling/v2 MetricSpecs for an HPA."""


class TorchMLPolicySource(K8sModel):
    """PyTorch runtime configuration."""

    num_proc_per_node: IntOrString = Field(
        "auto",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel_rule(
                    "type(self) == int ? self > 0 : self in ['auto', 'cpu', 'gpu']",
                    "mlPolicy.torch.numProcPerNode must be a positive integer or one of auto, cpu, "
                    "gpu",
                ),
            ]
        },
    )
    """torchrun --nproc-per-node: auto (default), cpu, gpu or a positive integer."""
    elastic_policy: TorchElasticPolicy | None = None
    """Elastic training policy; excludes mlPolicy.numNodes."""


class MPIMLPolicySource(K8sModel):
    """MPI runtime configuration."""

    num_proc_per_node: int = Field(1, ge=1)
    """Slots per node in the hostfile. Defaults to 1."""
    mpi_implementation: Literal["OpenMPI"] = "OpenMPI"
    """MPI implementation; v2.0.0 supports OpenMPI only."""
    ssh_auth_mount_path: str = "/root/.ssh"
    """Directory where the SSH keys are mounted. Defaults to /root/.ssh."""
    run_launcher_as_node: bool = False
    """Also run a training process in the launcher Job. Defaults to false."""


class MLPolicy(K8sModel):
    """ML-specific parameters of the runtime."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel_rule(
                    "!(has(self.numNodes) && has(self.torch) && has(self.torch.elasticPolicy))",
                    "mlPolicy.numNodes must not be set when mlPolicy.torch.elasticPolicy is "
                    "configured",
                    field_path=".numNodes",
                ),
                cel_rule(
                    "!(has(self.torch) && has(self.mpi))",
                    "only one of mlPolicy.torch and mlPolicy.mpi may be configured",
                ),
            ]
        }
    )

    num_nodes: int | None = Field(None, ge=1, le=100_000)
    """Number of training nodes. Defaults to 1 (operator-side)."""
    torch: TorchMLPolicySource | None = None
    """PyTorch configuration."""
    mpi: MPIMLPolicySource | None = None
    """MPI configuration."""


class CoschedulingPodGroupPolicySource(K8sModel):
    """scheduler-plugins coscheduling: minMember is the total number of pods."""

    schedule_timeout_seconds: int = Field(60, ge=0)
    """Seconds to wait for the whole group. Defaults to 60."""


class PodGroupPolicy(K8sModel):
    """Gang-scheduling through a PodGroup."""

    coscheduling: CoschedulingPodGroupPolicySource | None = None
    """Use the coscheduling plugin of scheduler-plugins."""


class TemplateMetadata(K8sModel):
    """Labels and annotations of the JobSet built from the runtime."""

    labels: dict[str, str] | None = None
    """Labels of the JobSet."""
    annotations: dict[str, str] | None = None
    """Annotations of the JobSet."""


class ReplicatedJob(K8sModel):
    """A group of identical batch Jobs in the JobSet."""

    name: str = Field(min_length=1, max_length=63)
    """Name of the replicatedJob (node, launcher, dataset-initializer, model-initializer ...)."""
    replicas: int = Field(1, ge=0, le=10_000)
    """Number of Jobs. Defaults to 1."""
    template: Object = Field(default_factory=dict)
    """batch/v1 JobTemplateSpec (metadata and spec) of each Job."""


class SuccessPolicyOperator(StrEnum):
    """How targetReplicatedJobs combine."""

    ALL = "All"
    ANY = "Any"


class JobSetSuccessPolicy(K8sModel):
    """When the JobSet counts as succeeded."""

    operator: SuccessPolicyOperator
    """All or Any of the targeted Jobs must succeed."""
    target_replicated_jobs: list[str] | None = None
    """replicatedJobs the operator applies to; empty means all."""


class JobSetNetwork(K8sModel):
    """Headless service and DNS of the JobSet."""

    enable_dns_hostnames: bool | None = Field(None, alias="enableDNSHostnames")
    """Give pods stable hostnames <jobset>-<rjob>-<job>-<pod>.<subdomain>."""
    subdomain: str | None = None
    """Name of the headless service; defaults to the JobSet name."""
    publish_not_ready_addresses: bool | None = None
    """Publish DNS records of pods that are not ready."""


class JobSetSpec(K8sModel):
    """A ``jobset.x-k8s.io/v1alpha2`` JobSetSpec; undeclared fields are preserved as written."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )

    replicated_jobs: list[ReplicatedJob] = Field(
        default_factory=list,
        max_length=MAX_REPLICATED_JOBS,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel_rule(
                    "self.all(x, self.exists_one(y, y.name == x.name))",
                    "spec.template.spec.replicatedJobs names must be unique",
                ),
            ]
        },
    )
    """The replicatedJobs; names must be unique."""
    success_policy: JobSetSuccessPolicy | None = None
    """When the JobSet counts as succeeded."""
    network: JobSetNetwork | None = None
    """Headless service and DNS settings."""


class JobSetTemplateSpec(K8sModel):
    """Template of the JobSet a TrainJob creates."""

    metadata: TemplateMetadata | None = None
    """Labels and annotations of the JobSet."""
    spec: JobSetSpec = Field(default_factory=JobSetSpec)
    """The JobSet spec."""


class TrainingRuntimeSpec(K8sModel):
    """Desired state of a (Cluster)TrainingRuntime."""

    ml_policy: MLPolicy | None = None
    """ML-specific parameters: numNodes, torch or mpi."""
    pod_group_policy: PodGroupPolicy | None = None
    """Gang-scheduling configuration."""
    template: JobSetTemplateSpec
    """JobSet template instantiated for every TrainJob."""


class TrainingRuntime(K8sModel):
    """A namespaced training runtime, usable by TrainJobs in its namespace."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainingRuntime"] = "TrainingRuntime"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec


class ClusterTrainingRuntime(K8sModel):
    """A cluster-scoped training runtime, usable by TrainJobs in any namespace."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["ClusterTrainingRuntime"] = "ClusterTrainingRuntime"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec
