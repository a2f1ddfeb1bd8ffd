"""TrainJob ``trainer.kubeflow.org/v1alpha1``: the Kubeflow Trainer v2.0.0 job API.

Contract: the spec mirrors ``trainjob_types.go`` at v2.0.0: ``runtimeRef`` (immutable),
``initializer``, ``trainer``, ``labels``/``annotations``, ``podSpecOverrides``, ``suspend`` and
``managedBy`` (trainjob-controller or MultiKueue, immutable). The status mirrors upstream
(``metav1.Condition`` list and ``jobsStatus``) plus ``lattice``, the scheduler block.

Schema defaults: ``runtimeRef.apiGroup`` trainer.kubeflow.org, ``runtimeRef.kind``
ClusterTrainingRuntime, ``suspend`` false, ``managedBy`` trainer.kubeflow.org/trainjob-controller.
Operator-side: ``trainer.numNodes`` falls back to the runtime's ``mlPolicy.numNodes`` (then 1);
``trainer.env`` must not set the reserved PET_* variables (torch plugin validation).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field
from pydantic.config import JsonDict

from lattice.api.base import IntOrString, K8sModel, Object, ObjectMeta, Time
from lattice.api.common import ConditionStatus, SchedulingStatus
from lattice.api.constants import MANAGED_BY_MULTIKUEUE, MANAGED_BY_TRAINJOB_CONTROLLER
from lattice.api.schema import cel_rule

__all__ = [
    "Condition",
    "ContainerOverride",
    "DatasetInitializer",
    "Initializer",
    "JobsStatus",
    "LocalObjectReference",
    "ModelInitializer",
    "PodSchedulingGate",
    "PodSpecOverride",
    "PodSpecOverrideTargetJob",
    "RuntimeKind",
    "RuntimeRef",
    "TrainJob",
    "TrainJobConditionType",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "trainjob_root_rules",
]

_RFC1035 = "^[a-z]([-a-z0-9]*[a-z0-9])?$"


class RuntimeKind(StrEnum):
    """Kinds a TrainJob can reference."""

    TRAINING_RUNTIME = "TrainingRuntime"
    CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"


class TrainJobConditionType(StrEnum):
    """Condition types of a TrainJob."""

    SUSPENDED = "Suspended"
    COMPLETE = "Complete"
    FAILED = "Failed"


class RuntimeRef(K8sModel):
    """Reference to a TrainingRuntime or ClusterTrainingRuntime."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the runtime. A TrainingRuntime must be in the TrainJob's namespace."""
    api_group: str = Field("trainer.kubeflow.org", max_length=253)
    """API group of the runtime. Defaults to trainer.kubeflow.org."""
    kind: RuntimeKind = RuntimeKind.CLUSTER_TRAINING_RUNTIME
    """TrainingRuntime or ClusterTrainingRuntime (default)."""


class LocalObjectReference(K8sModel):
    """Reference to an object in the same namespace."""

    name: str | None = None
    """Name of the referent."""


class DatasetInitializer(K8sModel):
    """Overrides for the runtime's dataset-initializer job."""

    storage_uri: str | None = None
    """Storage URI of the dataset provider, e.g. hf://tatsu-lab/alpaca."""
    env: list[Object] | None = None
    """Environment variables merged into the initializer container."""
    secret_ref: LocalObjectReference | None = None
    """Secret with the credentials to download the dataset."""


class ModelInitializer(K8sModel):
    """Overrides for the runtime's model-initializer job."""

    storage_uri: str | None = None
    """Storage URI of the model provider, e.g. hf://meta-llama/Llama-3.2-1B."""
    env: list[Object] | None = None
    """Environment variables merged into the initializer container."""
    secret_ref: LocalObjectReference | None = None
    """Secret with the credentials to download the model."""


class Initializer(K8sModel):
    """Dataset and pre-trained model initialisation."""

    dataset: DatasetInitializer | None = None
    """Dataset initialisation and pre-processing."""
    model: ModelInitializer | None = None
    """Pre-trained model initialisation."""


class Trainer(K8sModel):
    """Overrides for the runtime's trainer job (the replicatedJob with ancestor-step=trainer)."""

    image: str | None = None
    """Image of the training container."""
    command: list[str] | None = None
    """Entrypoint of the training container."""
    args: list[str] | None = None
    """Arguments of the entrypoint."""
    env: list[Object] | None = None
    """Environment variables merged into the training container."""
    num_nodes: int | None = Field(None, ge=1, le=100_000)
    """Number of training nodes; overrides the runtime's mlPolicy.numNodes."""
    resources_per_node: Object | None = None
    """Compute resources (requests/limits) of each training node."""
    num_proc_per_node: IntOrString | None = None
    """Processes per node: auto, cpu, gpu or an integer (torch); an integer (MPI)."""


class PodSpecOverrideTargetJob(K8sModel):
    """A replicatedJob of the runtime."""

    name: str
    """Name of the replicatedJob whose pod spec is overridden."""


class ContainerOverride(K8sModel):
    """Per-container overrides."""

    name: str
    """Container name; the runtime must have it."""
    env: list[Object] | None = None
    """Environment variables merged into the container."""
    volume_mounts: list[Object] | None = None
    """Volume mounts added to the container."""


class PodSchedulingGate(K8sModel):
    """A pod scheduling gate."""

    name: str
    """Name of the gate."""


class PodSpecOverride(K8sModel):
    """Pod spec overrides applied to some replicatedJobs of the runtime."""

    target_jobs: list[PodSpecOverrideTargetJob]
    """The replicatedJobs to override."""
    service_account_name: str | None = None
    """Service account of the pods."""
    node_selector: dict[str, str] | None = None
    """Node selector of the pods."""
    tolerations: list[Object] | None = None
    """Tolerations of the pods."""
    volumes: list[Object] | None = None
    """Volumes of the pods."""
    init_containers: list[ContainerOverride] | None = None
    """Overrides of init containers."""
    containers: list[ContainerOverride] | None = None
    """Overrides of containers."""
    scheduling_gates: list[PodSchedulingGate] | None = None
    """Scheduling gates of the pods."""


class TrainJobSpec(K8sModel):
    """Desired state of a TrainJob."""

    runtime_ref: RuntimeRef = Field(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel_rule("self == oldSelf", "spec.runtimeRef is immutable"),
            ]
        }
    )
    """The training runtime to instantiate. Immutable."""
    initializer: Initializer | None = None
    """Dataset and model initialisation."""
    trainer: Trainer | None = None
    """Training container overrides: image, command, env, number of nodes, resources."""
    labels: dict[str, str] | None = None
    """Labels merged into the JobSet and its Jobs."""
    annotations: dict[str, str] | None = None
    """Annotations merged into the JobSet and its Jobs."""
    pod_spec_overrides: list[PodSpecOverride] | None = Field(
        None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Pod spec overrides for the runtime's replicatedJobs."""
    suspend: bool = False
    """Suspend the TrainJob (the JobSet is suspended). Defaults to false."""
    managed_by: str = Field(
        MANAGED_BY_TRAINJOB_CONTROLLER,
        max_length=63,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel_rule(
                    f"self in ['{MANAGED_BY_TRAINJOB_CONTROLLER}', '{MANAGED_BY_MULTIKUEUE}']",
                    f"spec.managedBy must be {MANAGED_BY_TRAINJOB_CONTROLLER} or "
                    f"{MANAGED_BY_MULTIKUEUE}",
                ),
                cel_rule("self == oldSelf", "spec.managedBy is immutable"),
            ]
        },
    )
    """Controller reconciling the TrainJob. Defaults to trainer.kubeflow.org/trainjob-controller.
    Immutable."""


class Condition(K8sModel):
    """A metav1.Condition."""

    type: str = Field(max_length=316)
    """Condition type: Suspended, Complete or Failed."""
    status: ConditionStatus
    """True, False or Unknown."""
    observed_generation: int | None = Field(None, ge=0)
    """metadata.generation the condition was set for."""
    last_transition_time: Time
    """Last time the status changed."""
    reason: str = Field(max_length=1024)
    """CamelCase reason of the last transition."""
    message: str = Field(max_length=32768)
    """Human-readable details."""


class JobsStatus(K8sModel):
    """Counts of the child Jobs of one replicatedJob."""

    name: str
    """Name of the replicatedJob."""
    ready: int = 0
    """Jobs whose ready plus completed pods reach the expected count."""
    succeeded: int = 0
    """Jobs that completed successfully."""
    failed: int = 0
    """Jobs that failed."""
    active: int = 0
    """Jobs with at least one running or pending pod."""
    suspended: int = 0
    """Jobs that are suspended."""


class TrainJobStatus(K8sModel):
    """Observed state of a TrainJob."""

    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )
    """Current conditions."""
    jobs_status: list[JobsStatus] = Field(
        default_factory=list,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    """Child Job counts per replicatedJob."""
    lattice: SchedulingStatus | None = None
    """Lattice scheduler state of this job."""


def trainjob_root_rules() -> list[JsonDict]:
    """Root-level rules on the name (Trainer HEAD): the JobSet and pod hostnames derive from it."""
    return [
        cel_rule(
            f"self.metadata.name.matches('{_RFC1035}')",
            "metadata.name must match RFC 1035 DNS label format",
            field_path=".metadata.name",
        ),
        cel_rule(
            "size(self.metadata.name) <= 63",
            "metadata.name must be no more than 63 characters",
            field_path=".metadata.name",
        ),
    ]


class TrainJob(K8sModel):
    """A training job instantiated from a (Cluster)TrainingRuntime."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainJob"] = "TrainJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainJobSpec
    status: TrainJobStatus | None = None
