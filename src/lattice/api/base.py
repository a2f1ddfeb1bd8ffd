"""Shared base model, scalar types and time helpers for every Lattice API model.

Contract:

- ``K8sModel`` is the base of every CRD model: camelCase on the wire (``alias_generator=to_camel``),
  snake_case in Python (``populate_by_name``), unknown fields ignored (``extra="ignore"``), and
  attribute docstrings become schema descriptions (they feed ``kubectl explain``).
- ``Time`` is a ``metav1.Time``: parsed from RFC 3339, normalised to timezone-aware UTC at second
  precision, serialised (JSON mode) as ``2026-01-01T00:00:00Z``. ``MicroTime`` is a
  ``metav1.MicroTime``: the same at microsecond precision, ``2026-01-01T00:00:00.000000Z``; the
  scheduler's time keys use it, so that arrivals within one second keep their order.
  Both are built on ``lattice.primitives.times``, the one place that formats and parses
  Kubernetes timestamps (``lattice.api`` re-exports its functions).
- ``IntOrString`` and ``Object`` carry the JSON schema the CRD generator needs
  (``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields``). ``K8sSchema(name)``
  marks a plain-``dict`` field as a Kubernetes built-in type whose full schema comes from the
  committed OpenAPI snapshot (``k8s_schema``), read lazily when a CRD is generated; ``PodTemplate``,
  ``EnvVar``, ``Volume`` ... are such fields. In Python they stay plain data.
- ``CustomResource[Spec]`` is the envelope of a kind: ``apiVersion``, ``kind``, ``metadata`` and
  ``spec``, in that wire order; ``CustomResourceWithStatus[Spec, Status]`` adds an optional
  ``status``. A kind narrows ``api_version`` and ``kind`` to its own ``Literal`` values.

No I/O, no clock: callers pass times in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PlainSerializer,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from lattice.api.k8s_schema import k8s_schema
from lattice.primitives.times import (
    format_micro_time,
    format_time,
    normalize_micro_time,
    normalize_time,
)

__all__ = [
    "INT_OR_STRING_SCHEMA",
    "OBJECT_SCHEMA",
    "Affinity",
    "CustomResource",
    "CustomResourceWithStatus",
    "EnvVar",
    "IntOrString",
    "JobSpecObject",
    "K8sModel",
    "K8sSchema",
    "LocalObjectRef",
    "MetricSpec",
    "MicroTime",
    "Object",
    "ObjectMeta",
    "PersistentVolumeClaim",
    "PodSchedulingGateObject",
    "PodSecurityContext",
    "PodTemplate",
    "ResourceRequirements",
    "SecurityContext",
    "Time",
    "Toleration",
    "Volume",
    "VolumeMount",
]


class K8sModel(BaseModel):
    """Base of every Kubernetes-facing model (see the module docstring for the contract)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        use_attribute_docstrings=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase keys, ``None`` fields omitted, times as RFC 3339 strings."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# --------------------------------------------------------------------------- time

Time = Annotated[
    datetime,
    AfterValidator(normalize_time),
    PlainSerializer(format_time, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A ``metav1.Time``: UTC, whole seconds, ``2026-01-01T00:00:00Z`` on the wire."""

MicroTime = Annotated[
    datetime,
    AfterValidator(normalize_micro_time),
    PlainSerializer(format_micro_time, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A ``metav1.MicroTime``: UTC, microseconds, ``2026-01-01T00:00:00.000000Z`` on the wire."""

# --------------------------------------------------------------------------- open types

INT_OR_STRING_SCHEMA: dict[str, Any] = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
}
OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
IntOrString = Annotated[int | str, WithJsonSchema(INT_OR_STRING_SCHEMA)]
"""``intstr.IntOrString``: an integer or a string such as ``"auto"`` or ``"50%"``."""

Object = Annotated[dict[str, Any], WithJsonSchema(OBJECT_SCHEMA)]
"""An embedded Kubernetes object kept as plain data (env var, toleration, volume, resources ...)."""


@dataclass(frozen=True, slots=True)
class K8sSchema:
    """Annotation: the field's CRD schema is the snapshot's definition ``name`` (see module)."""

    name: str

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return k8s_schema(self.name)

    @property
    def kind(self) -> str:
        """The short type name, e.g. ``PodTemplateSpec``."""
        return self.name.rsplit(".", 1)[-1]

    @property
    def group_version(self) -> str:
        """``v1-core``, ``v1-batch``, ``v2-autoscaling``: the reference's anchor suffix."""
        parts = self.name.split(".")
        return f"{parts[-2]}-{parts[-3]}"


_CORE = "io.k8s.api.core.v1."
PodTemplate = Annotated[dict[str, Any], K8sSchema(_CORE + "PodTemplateSpec")]
"""An embedded ``PodTemplateSpec`` kept as plain data; its full schema is in the CRD."""
JobSpecObject = Annotated[dict[str, Any], K8sSchema("io.k8s.api.batch.v1.JobSpec")]
"""An embedded batch/v1 ``JobSpec``."""
PersistentVolumeClaim = Annotated[dict[str, Any], K8sSchema(_CORE + "PersistentVolumeClaim")]
"""An embedded ``PersistentVolumeClaim`` template."""
MetricSpec = Annotated[dict[str, Any], K8sSchema("io.k8s.api.autoscaling.v2.MetricSpec")]
"""An autoscaling/v2 ``MetricSpec``."""
Affinity = Annotated[dict[str, Any], K8sSchema(_CORE + "Affinity")]
"""A pod's ``Affinity``."""
EnvVar = Annotated[dict[str, Any], K8sSchema(_CORE + "EnvVar")]
"""A container environment variable."""
LocalObjectRef = Annotated[dict[str, Any], K8sSchema(_CORE + "LocalObjectReference")]
"""A reference by name to an object in the same namespace."""
PodSchedulingGateObject = Annotated[dict[str, Any], K8sSchema(_CORE + "PodSchedulingGate")]
"""A pod scheduling gate."""
PodSecurityContext = Annotated[dict[str, Any], K8sSchema(_CORE + "PodSecurityContext")]
"""A pod's security context."""
ResourceRequirements = Annotated[dict[str, Any], K8sSchema(_CORE + "ResourceRequirements")]
"""Compute resource requests and limits."""
SecurityContext = Annotated[dict[str, Any], K8sSchema(_CORE + "SecurityContext")]
"""A container's security context."""
Toleration = Annotated[dict[str, Any], K8sSchema(_CORE + "Toleration")]
"""A pod toleration."""
Volume = Annotated[dict[str, Any], K8sSchema(_CORE + "Volume")]
"""A pod volume."""
VolumeMount = Annotated[dict[str, Any], K8sSchema(_CORE + "VolumeMount")]
"""A container volume mount."""


class ObjectMeta(K8sModel):
    """The subset of ``metav1.ObjectMeta`` the operator reads; every other field is kept as-is.

    Unlike the other models this one allows extra fields, so that re-serialising an object never
    drops metadata written by someone else (managedFields, finalizers of other controllers ...).
    """

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    finalizers: list[str] | None = None


SpecT = TypeVar("SpecT", bound=BaseModel)
StatusT = TypeVar("StatusT", bound=BaseModel)


class CustomResource(K8sModel, Generic[SpecT]):
    """The envelope of a kind without status; a kind overrides ``api_version`` and ``kind``
    with its ``Literal`` values (their position on the wire stays first)."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SpecT


class CustomResourceWithStatus(CustomResource[SpecT], Generic[SpecT, StatusT]):
    """The envelope of a kind with an optional status subresource."""

    status: StatusT | None = None
