"""Shared base model, scalar types and time helpers for every Lattice API model.

Contract:

- ``K8sModel`` is the base of every CRD model: camelCase on the wire (``alias_generator=to_camel``),
  snake_case in Python (``populate_by_name``), unknown fields ignored (``extra="ignore"``), and
  attribute docstrings become schema descriptions (they feed ``kubectl explain``).
- ``Time`` is a ``metav1.Time``: parsed from RFC 3339, normalised to timezone-aware UTC at second
  precision, serialised (JSON mode) as ``2026-01-01T00:00:00Z``. ``MicroTime`` is a
  ``metav1.MicroTime``: the same at microsecond precision, ``2026-01-01T00:00:00.000000Z``; the
  scheduler's time keys use it, so that arrivals within one second keep their order.
  Both are built on ``lattice.primitives.times`` (re-exported here: ``format_time``,
  ``format_micro_time``, ``parse_time``, ``normalize_time``, ``normalize_micro_time``), the one
  place that formats and parses Kubernetes timestamps.
- ``IntOrString``, ``Object`` and ``PodTemplate`` carry the JSON schema the CRD generator needs
  (``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields``).

No I/O, no clock: callers pass times in.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, PlainSerializer, WithJsonSchema
from pydantic.alias_generators import to_camel

from lattice.primitives.times import (
    format_micro_time,
    format_time,
    normalize_micro_time,
    normalize_time,
    parse_time,
)

__all__ = [
    "INT_OR_STRING_SCHEMA",
    "OBJECT_SCHEMA",
    "POD_TEMPLATE_SCHEMA",
    "IntOrString",
    "K8sModel",
    "MicroTime",
    "Object",
    "ObjectMeta",
    "PodTemplate",
    "Time",
    "format_micro_time",
    "format_time",
    "normalize_micro_time",
    "normalize_time",
    "parse_time",
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
POD_TEMPLATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "A core/v1 PodTemplateSpec (metadata and spec). Only spec.containers is declared here, so "
        "that validation rules can count containers; the rest is validated when pods are created."
    ),
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "metadata": dict(OBJECT_SCHEMA),
        "spec": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {
                "containers": {"type": "array", "items": dict(OBJECT_SCHEMA)},
            },
        },
    },
}

IntOrString = Annotated[int | str, WithJsonSchema(INT_OR_STRING_SCHEMA)]
"""``intstr.IntOrString``: an integer or a string such as ``"auto"`` or ``"50%"``."""

Object = Annotated[dict[str, Any], WithJsonSchema(OBJECT_SCHEMA)]
"""An embedded Kubernetes object kept as plain data (env var, toleration, volume, resources ...)."""

PodTemplate = Annotated[dict[str, Any], WithJsonSchema(POD_TEMPLATE_SCHEMA)]
"""An embedded ``PodTemplateSpec`` kept as plain data; validated when pods are created."""


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
