"""TrainJob ``trainer.kubeflow.org/v1alpha1``: the Kubeflow Trainer job API, v2.0 to v2.3.

Contract: the spec mirrors ``trainjob_types.go`` at v2.3.0: ``runtimeRef``, ``initializer`` and
``trainer`` (all three immutable), ``runtimePatches``, ``suspend``, ``activeDeadlineSeconds``
(>= 1, immutable) and ``managedBy`` (trainjob-controller or MultiKueue, immutable). The fields
that v2.2 removed upstream (``labels``, ``annotations``, v2.0's ``podSpecOverrides`` and v2.1's
``podTemplateOverrides``) are still accepted, so TrainJobs written for any release since v2.0
apply unchanged (``lattice.api.trainjob_overrides``). The status mirrors upstream
(``metav1.Condition`` list, ``jobsStatus``, ``trainerStatus``) plus ``lattice``, the scheduler
block.

Schema defaults: ``runtimeRef.apiGroup`` trainer.kubeflow.org, ``runtimeRef.kind``
ClusterTrainingRuntime, ``suspend`` false, ``managedBy`` trainer.kubeflow.org/trainjob-controller.
Operator-side: ``trainer.numNodes`` falls back to the runtime's ``mlPolicy.numNodes`` (then 1);
``trainer.env`` must not set the reserved PET_* variables (torch plugin validation).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints
from pydantic.config import JsonDict

from lattice.api.base import (
    CustomResourceWithStatus,
    EnvVar,
    IntOrString,
    K8sModel,
    ResourceRequirements,
    Time,
)
from lattice.api.common import ConditionStatus, SchedulingStatus
from lattice.api.constants import MANAGED_BY_MULTIKUEUE, MANAGED_BY_TRAINJOB_CONTROLLER
from lattice.api.schema import cel_rule, dns1035_name_rule, immutable, list_map, validations
from lattice.api.trainjob_overrides import (
    ContainerOverride,
    PodSchedulingGate,
    PodSpecOverride,
    PodSpecOverrideTargetJob,
    PodTemplateOverride,
    RuntimePatch,
)

__all__ = [
    "Condition",
    "ContainerOverride",
    "DatasetInitializer",
    "Initializer",
    "JobsStatus",
    "LocalObjectReference",
    "Metric",
    "ModelInitializer",
    "PodSchedulingGate",
    "PodSpecOverride",
    "PodSpecOverrideTargetJob",
    "PodTemplateOverride",
    "RuntimeKind",
    "RuntimePatch",
    "RuntimeRef",
    "TrainJob",
    "TrainJobConditionType",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "TrainerStatus",
    "trainjob_root_rules",
]

_URI = "^[A-Za-z][A-Za-z0-9+.-]*://.+$"


def _env() -> Any:
    return Field(
        None,
        max_length=128,
        json_schema_extra=list_map("name"),
    )


def _storage_uri(what: str) -> Any:
    return Field(
        None,
        max_length=2048,
        json_schema_extra=validations(
            cel_rule(
                f"self == '' || self.matches('{_URI}')",
                f"initializer.{what}.storageUri must be empty or a URI (scheme://...)",
            )
        ),
    )


_Arg = Annotated[str, StringConstraints(max_length=1_048_576)]


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

    storage_uri: str | None = _storage_uri("dataset")
    """Storage URI of the dataset provider, e.g. hf://tatsu-lab/alpaca."""
    env: list[EnvVar] | None = _env()
    """Environment variables merged into the initializer container."""
    secret_ref: LocalObjectReference | None = None
    """Secret with the credentials to download the dataset."""


class ModelInitializer(K8sModel):
    """Overrides for the runtime's model-initializer job."""

    storage_uri: str | None = _storage_uri("model")
    """Storage URI of the model provider, e.g. hf://meta-llama/Llama-3.2-1B."""
    env: list[EnvVar] | None = _env()
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

    image: str | None = Field(None, max_length=500)
    """Image of the training container."""
    command: list[_Arg] | None = Field(
        None, max_length=128, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Entrypoint of the training container."""
    args: list[_Arg] | None = Field(
        None, max_length=128, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Arguments of the entrypoint."""
    env: list[EnvVar] | None = _env()
    """Environment variables merged into the training container."""
    num_nodes: int | None = Field(None, ge=1, le=100_000)
    """Number of training nodes; overrides the runtime's mlPolicy.numNodes."""
    resources_per_node: ResourceRequirements | None = None
    """Compute resources (requests/limits) of each training node."""
    num_proc_per_node: IntOrString | None = None
    """Processes per node: an integer (v2.3), or auto, cpu or gpu (torch, Trainer v2.0/v2.1)."""


class TrainJobSpec(K8sModel):
    """Desired state of a TrainJob."""

    runtime_ref: RuntimeRef = Field(json_schema_extra=immutable("spec.runtimeRef"))
    """The training runtime to instantiate. Immutable."""
    initializer: Initializer | None = Field(None, json_schema_extra=immutable("spec.initializer"))
    """Dataset and model initialisation. Immutable."""
    trainer: Trainer | None = Field(None, json_schema_extra=immutable("spec.trainer"))
    """Training container overrides: image, command, env, number of nodes, resources.
    Immutable."""
    runtime_patches: list[RuntimePatch] | None = Field(
        None,
        max_length=16,
        json_schema_extra=list_map("manager"),
    )
    """Patches of the runtime's JobSet template, one entry per manager, applied in order
    (Trainer v2.2+)."""
    labels: dict[str, str] | None = None
    """Labels merged into the JobSet and its Jobs (Trainer v2.0/v2.1)."""
    annotations: dict[str, str] | None = None
    """Annotations merged into the JobSet and its Jobs (Trainer v2.0/v2.1)."""
    pod_spec_overrides: list[PodSpecOverride] | None = Field(
        None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Pod spec overrides for the runtime's replicatedJobs (Trainer v2.0)."""
    pod_template_overrides: list[PodTemplateOverride] | None = Field(
        None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Pod template overrides for the runtime's replicatedJobs; later entries win (Trainer
    v2.1)."""
    suspend: bool = False
    """Suspend the TrainJob (the JobSet is suspended). Defaults to false."""
    active_deadline_seconds: int | None = Field(
        None, ge=1, json_schema_extra=immutable("spec.activeDeadlineSeconds")
    )
    """Seconds the TrainJob may be active, counted from its start (reset on resume), before its
    pods are terminated and it fails with reason DeadlineExceeded. Immutable."""
    managed_by: str = Field(
        MANAGED_BY_TRAINJOB_CONTROLLER,
        max_length=253,
        json_schema_extra=validations(
            cel_rule(
                f"self in ['{MANAGED_BY_TRAINJOB_CONTROLLER}', '{MANAGED_BY_MULTIKUEUE}']",
                f"spec.managedBy must be {MANAGED_BY_TRAINJOB_CONTROLLER} or "
                f"{MANAGED_BY_MULTIKUEUE}",
            ),
            cel_rule("self == oldSelf", "spec.managedBy is immutable"),
        ),
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


class Metric(K8sModel):
    """A training metric reported by the trainer."""

    name: str = Field(min_length=1, max_length=64)
    """Metric name, e.g. loss."""
    value: str = Field(min_length=1, max_length=64)
    """Metric value, as a string."""


class TrainerStatus(K8sModel):
    """Progress the trainer reported (Trainer v2.2+, alpha upstream)."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel_rule(
                "has(self.lastUpdatedTime)",
                "status.trainerStatus.lastUpdatedTime is required",
            )
        )
    )

    progress_percentage: int | None = Field(None, ge=0, le=100)
    """Estimated completion, 0 to 100."""
    estimated_remaining_seconds: int | None = Field(None, ge=0)
    """Estimated seconds until completion."""
    metrics: list[Metric] | None = Field(
        None, max_length=256, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Current metrics."""
    last_updated_time: Time | None = None
    """When this status was observed."""


class TrainJobStatus(K8sModel):
    """Observed state of a TrainJob."""

    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=8,
        json_schema_extra=list_map("type"),
    )
    """Current conditions."""
    jobs_status: list[JobsStatus] = Field(
        default_factory=list,
        max_length=100,
        json_schema_extra=list_map("name"),
    )
    """Child Job counts per replicatedJob."""
    trainer_status: TrainerStatus | None = None
    """Progress reported by the trainer (accepted; Lattice does not write it)."""
    restarts: int | None = Field(None, ge=0)
    """Times the runtime's JobSet failurePolicy recreated every pod of the job (Lattice: upstream
    keeps this count on the JobSet's status)."""
    restarts_count_towards_max: int | None = Field(None, ge=0)
    """Those restarts that count towards failurePolicy.maxRestarts (Lattice: upstream keeps this
    count on the JobSet's status)."""
    lattice: SchedulingStatus | None = None
    """Lattice scheduler state of this job."""


def trainjob_root_rules() -> list[JsonDict]:
    """Root-level rules on the name (Trainer HEAD): the JobSet and pod hostnames derive from it."""
    return [
        dns1035_name_rule(
            "metadata.name must match RFC 1035 DNS label format",
        ),
        cel_rule(
            "size(self.metadata.name) <= 63",
            "metadata.name must be no more than 63 characters",
            field_path=".metadata.name",
        ),
    ]


class TrainJob(CustomResourceWithStatus[TrainJobSpec, TrainJobStatus]):
    """A training job instantiated from a (Cluster)TrainingRuntime."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainJob"] = "TrainJob"
