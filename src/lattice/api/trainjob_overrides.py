"""How a TrainJob changes its runtime's pod templates: the three generations of the Trainer API.

Contract: ``podSpecOverrides`` (Trainer v2.0), ``podTemplateOverrides`` (v2.1) and
``runtimePatches`` (v2.2 and later, keyed by ``manager``) are all accepted, so that TrainJobs
written for any of those releases apply unchanged; v2.2 removed the first two upstream. Every
embedded Kubernetes type (volumes, tolerations, affinity, env, volume mounts, security contexts)
carries its full schema, so a typo is refused at apply time. Rules mirror
``trainjob_types.go`` at v2.3.0: ``manager`` and the patched serviceAccountName, volumes,
containers, init containers, image pull secrets, security context and termination grace period
are immutable; list sizes are bounded as upstream bounds them. Plain data in Python.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import Field

from lattice.api.base import (
    Affinity,
    EnvVar,
    K8sModel,
    LocalObjectRef,
    PodSchedulingGateObject,
    PodSecurityContext,
    SecurityContext,
    Time,
    Toleration,
    Volume,
    VolumeMount,
)
from lattice.api.schema import immutable, list_map

__all__ = [
    "ContainerOverride",
    "JobSetSpecPatch",
    "JobSetTemplatePatch",
    "JobSpecPatch",
    "JobTemplatePatch",
    "PatchMetadata",
    "PodSchedulingGate",
    "PodSpecOverride",
    "PodSpecOverrideTargetJob",
    "PodSpecPatch",
    "PodTemplateOverride",
    "PodTemplatePatch",
    "PodTemplateSpecOverride",
    "ReplicatedJobPatch",
    "RuntimePatch",
    "TrainingRuntimeSpecPatch",
]


def _map(key: str, *, max_items: int | None = None, frozen: str | None = None) -> Any:
    """A list-map field keyed by ``key``; ``frozen`` names it in its immutability rule."""
    extra = list_map(key) | (immutable(frozen) if frozen else {})
    return Field(None, max_length=max_items, json_schema_extra=extra)


class PodSpecOverrideTargetJob(K8sModel):
    """A replicatedJob of the runtime."""

    name: str = Field(min_length=1)
    """Name of the replicatedJob whose pods are overridden."""


class ContainerOverride(K8sModel):
    """Per-container overrides; the runtime must have the container."""

    name: str = Field(min_length=1, max_length=253)
    """Container name."""
    env: list[EnvVar] | None = _map("name", max_items=128)
    """Environment variables merged into the container (not for node, dataset-initializer or
    model-initializer: use spec.trainer / spec.initializer)."""
    volume_mounts: list[VolumeMount] | None = _map("name", max_items=128)
    """Volume mounts added to the container."""
    security_context: SecurityContext | None = None
    """Security context of the container (runtimePatches, Trainer v2.2+)."""


class PodSchedulingGate(K8sModel):
    """A pod scheduling gate."""

    name: str
    """Name of the gate."""


class _Targeted(K8sModel):
    """An override entry of some replicatedJobs (``podSpecOverrides``, ``podTemplateOverrides``)."""

    target_jobs: list[PodSpecOverrideTargetJob] = Field(
        json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """The replicatedJobs to override."""


class _PodOverrides(K8sModel):
    """The pod spec fields that both Trainer v2.0 and v2.1 overrides set."""

    service_account_name: str | None = None
    """Service account of the pods."""
    node_selector: dict[str, str] | None = None
    """Node selector of the pods."""
    tolerations: list[Toleration] | None = Field(
        None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Tolerations of the pods."""
    volumes: list[Volume] | None = _map("name")
    """Volumes of the pods."""
    init_containers: list[ContainerOverride] | None = _map("name")
    """Overrides of init containers."""
    containers: list[ContainerOverride] | None = _map("name")
    """Overrides of containers."""
    scheduling_gates: list[PodSchedulingGate] | None = _map("name")
    """Scheduling gates of the pods."""


# Fields come base by base from the last base to the first: targetJobs stays first, as upstream.
class PodSpecOverride(_PodOverrides, _Targeted):
    """Trainer v2.0 ``podSpecOverrides`` entry: pod spec overrides for some replicatedJobs."""


class PatchMetadata(K8sModel):
    """Labels and annotations merged into an object's metadata."""

    labels: dict[str, str] | None = None
    """Labels merged into the object's labels."""
    annotations: dict[str, str] | None = None
    """Annotations merged into the object's annotations."""


class PodTemplateSpecOverride(_PodOverrides):
    """Pod spec fields a ``podTemplateOverrides`` entry may set (Trainer v2.1)."""

    affinity: Affinity | None = None
    """Affinity of the pods."""
    image_pull_secrets: list[LocalObjectRef] | None = _map("name")
    """Image pull secrets of the pods."""


class PodTemplateOverride(_Targeted):
    """Trainer v2.1 ``podTemplateOverrides`` entry: pod template overrides for some replicatedJobs;
    later entries win over earlier ones for the same job."""

    metadata: PatchMetadata | None = None
    """Labels and annotations merged into the pod template's."""
    spec: PodTemplateSpecOverride | None = None
    """Pod spec overrides."""


class PodSpecPatch(K8sModel):
    """Pod spec fields a runtime patch may set (Trainer v2.2+)."""

    service_account_name: str | None = Field(
        None, max_length=253, json_schema_extra=immutable("serviceAccountName")
    )
    """Service account of the pods. Immutable."""
    volumes: list[Volume] | None = _map("name", max_items=128, frozen="volumes")
    """Volumes of the pods. Immutable."""
    init_containers: list[ContainerOverride] | None = _map(
        "name", max_items=64, frozen="initContainers"
    )
    """Init container patches. Immutable."""
    containers: list[ContainerOverride] | None = _map("name", max_items=64, frozen="containers")
    """Container patches. Immutable."""
    image_pull_secrets: list[LocalObjectRef] | None = _map(
        "name", max_items=64, frozen="imagePullSecrets"
    )
    """Image pull secrets of the pods. Immutable."""
    security_context: PodSecurityContext | None = Field(
        None, json_schema_extra=immutable("securityContext")
    )
    """Security context of the pods. Immutable."""
    node_selector: dict[str, str] | None = None
    """Node selector of the pods (Kueue sets it on admission)."""
    affinity: Affinity | None = None
    """Affinity of the pods."""
    tolerations: list[Toleration] | None = Field(
        None, max_length=128, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Tolerations of the pods."""
    scheduling_gates: list[PodSchedulingGateObject] | None = _map("name", max_items=16)
    """Scheduling gates of the pods."""
    termination_grace_period_seconds: int | None = Field(
        None, ge=0, json_schema_extra=immutable("terminationGracePeriodSeconds")
    )
    """Termination grace period of the pods. Immutable."""


SpecT = TypeVar("SpecT", bound=K8sModel)


class _TemplatePatch(K8sModel, Generic[SpecT]):
    """Patch of a template: its metadata and its spec."""

    metadata: PatchMetadata | None = None
    """Labels and annotations merged into the template's."""
    spec: SpecT | None = None
    """Patch of the template's spec."""


class PodTemplatePatch(_TemplatePatch[PodSpecPatch]):
    """Patch of a Job's pod template."""


class JobSpecPatch(K8sModel):
    """Patch of a Job spec: only its pod template."""

    template: PodTemplatePatch | None = None
    """Pod template patch."""


class JobTemplatePatch(_TemplatePatch[JobSpecPatch]):
    """Patch of a replicatedJob's Job template."""


class ReplicatedJobPatch(K8sModel):
    """Patch of one replicatedJob, by name."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the replicatedJob."""
    template: JobTemplatePatch | None = None
    """Job template patch."""


class JobSetSpecPatch(K8sModel):
    """Patch of the JobSet spec: per-replicatedJob patches."""

    replicated_jobs: list[ReplicatedJobPatch] | None = _map("name", max_items=100)
    """Patches keyed by replicatedJob name."""


class JobSetTemplatePatch(_TemplatePatch[JobSetSpecPatch]):
    """Patch of the runtime's JobSet template."""


class TrainingRuntimeSpecPatch(K8sModel):
    """The part of a TrainingRuntimeSpec a manager may patch."""

    template: JobSetTemplatePatch | None = None
    """JobSet template patch."""


class RuntimePatch(K8sModel):
    """A patch of the runtime, owned by one manager (the user, Kueue, a webhook ...)."""

    manager: str = Field(
        min_length=1, max_length=253, json_schema_extra=immutable("runtimePatches[].manager")
    )
    """Who owns the patch, e.g. kueue.x-k8s.io/manager. Immutable."""
    time: Time | None = None
    """When the patch was last written (informational)."""
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None
    """Patch of a (Cluster)TrainingRuntime's spec."""
