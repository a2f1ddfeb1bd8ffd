"""Schemas of Kubernetes built-in types (PodTemplateSpec, JobSpec ...) for the generated CRDs.

Contract: ``schemas/k8s-1.34.json`` is a committed snapshot of the component schemas that the
kube-apiserver we build (v1.34.4) serves at ``/openapi/v3/api/v1``, ``/openapi/v3/apis/batch/v1``
and ``/openapi/v3/apis/autoscaling/v2``: the closure of ``ROOTS``, descriptions dropped, keys
sorted. ``make k8s-schema`` refreshes it from a running control plane (through ``main``);
``make crds`` only reads it, so CRD generation needs no cluster.

``k8s_schema(name)`` turns one definition into a structural CRD schema, the way controller-gen
renders embedded core types: ``$ref``/``allOf`` inlined; ``IntOrString`` and ``Quantity`` become
``x-kubernetes-int-or-string`` (quantities with the resource-quantity pattern); ``Time`` a
date-time string; an embedded ``ObjectMeta`` only labels, annotations, name, namespace and
finalizers; patch-strategy, union and GVK extensions dropped; object and array defaults dropped,
and so are defaults of required properties and defaults outside their enum (the OpenAPI's zero
values), while scalar defaults the list-map keys rely on (``protocol: TCP``) stay. Unknown
fields are *not* preserved: a typo inside a pod template is refused at apply time with its path.
No I/O apart from reading the snapshot and ``main``.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "K8S_VERSION",
    "QUANTITY_PATTERN",
    "ROOTS",
    "SNAPSHOT",
    "extract",
    "k8s_schema",
    "main",
    "snapshot_definitions",
]

K8S_VERSION = "1.34"
SNAPSHOT = Path(__file__).parent / "schemas" / f"k8s-{K8S_VERSION}.json"

ROOTS = (
    "io.k8s.api.core.v1.PodTemplateSpec",
    "io.k8s.api.batch.v1.JobSpec",
    "io.k8s.api.core.v1.PersistentVolumeClaim",
    "io.k8s.api.autoscaling.v2.MetricSpec",
    "io.k8s.api.core.v1.Affinity",
    "io.k8s.api.core.v1.EnvVar",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.PodSchedulingGate",
    "io.k8s.api.core.v1.PodSecurityContext",
    "io.k8s.api.core.v1.ResourceRequirements",
    "io.k8s.api.core.v1.SecurityContext",
    "io.k8s.api.core.v1.Toleration",
    "io.k8s.api.core.v1.Volume",
    "io.k8s.api.core.v1.VolumeMount",
)
"""Definitions the CRDs embed; their closure is what the snapshot keeps."""

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_OBJECT_META = _META + "ObjectMeta"
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_INT_OR_STRING: dict[str, Any] = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_SPECIAL: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": _INT_OR_STRING,
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        **_INT_OR_STRING,
        "pattern": QUANTITY_PATTERN,
    },
    _META + "Time": {"type": "string", "format": "date-time"},
    _META + "MicroTime": {"type": "string", "format": "date-time"},
    _OBJECT_META: {
        "type": "object",
        "properties": {
            "annotations": _STRING_MAP,
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": _STRING_MAP,
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
    },
}
_DROP = frozenset(
    {
        "description",
        "x-kubernetes-patch-merge-key",
        "x-kubernetes-patch-strategy",
        "x-kubernetes-unions",
        "x-kubernetes-group-version-kind",
    }
)
_REF_PREFIX = "#/components/schemas/"


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.removeprefix(_REF_PREFIX)
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: (
                {name: _without_descriptions(sub) for name, sub in sorted(v.items())}
                if k == "properties"
                else _without_descriptions(v)
            )
            for k, v in sorted(node.items())
            if k != "description"
        }
    if isinstance(node, list):
        return [_without_descriptions(item) for item in node]
    return node


def extract(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The snapshot: the closure of ``ROOTS`` over the documents' component schemas."""
    components: dict[str, Any] = {}
    for document in documents:
        components.update(document.get("components", {}).get("schemas", {}))
    found: dict[str, Any] = {}
    pending = list(ROOTS)
    while pending:
        name = pending.pop()
        if name in found or name in _SPECIAL:
            continue
        if name not in components:
            raise KeyError(f"definition {name} is not in the OpenAPI documents")
        found[name] = _without_descriptions(components[name])
        pending.extend(_refs(components[name]))
    return {"kubernetesVersion": K8S_VERSION, "definitions": dict(sorted(found.items()))}


@functools.cache
def snapshot_definitions() -> dict[str, Any]:
    """The committed snapshot's definitions (read once)."""
    data: dict[str, Any] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    definitions: dict[str, Any] = data["definitions"]
    return definitions


def _convert(node: dict[str, Any], *, stack: tuple[str, ...]) -> dict[str, Any]:
    node = {k: v for k, v in node.items() if k not in _DROP}
    parts = node.pop("allOf", None)
    if parts is not None:
        if len(parts) != 1:
            raise ValueError(f"{stack[-1]}: allOf with {len(parts)} members")
        node = {**parts[0], **node}
    ref = node.pop("$ref", None)
    if ref is not None:
        base = _definition(ref.removeprefix(_REF_PREFIX), stack=stack)
        node = {**base, **{k: v for k, v in node.items() if k != "default"}}
    if "oneOf" in node or ("anyOf" in node and not node.get("x-kubernetes-int-or-string")):
        raise ValueError(f"{stack[-1]}: union schemas other than int-or-string are not structural")
    if "default" in node and (
        isinstance(node["default"], dict | list)
        or ("enum" in node and node["default"] not in node["enum"])
    ):
        del node["default"]
    if "properties" in node:
        required = set(node.get("required", ()))
        properties = {}
        for name, sub in node["properties"].items():
            converted = _convert(sub, stack=stack)
            if name in required:
                converted.pop("default", None)
            properties[name] = converted
        node["properties"] = properties
        node.setdefault("type", "object")
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _convert(node["additionalProperties"], stack=stack)
    if "items" in node:
        node["items"] = _convert(node["items"], stack=stack)
    return node


def _definition(name: str, *, stack: tuple[str, ...]) -> dict[str, Any]:
    if name in _SPECIAL:
        return copy.deepcopy(_SPECIAL[name])
    if name in stack:
        raise ValueError(f"{name}: recursive definition is not structural")
    return _convert(copy.deepcopy(snapshot_definitions()[name]), stack=(*stack, name))


@functools.cache
def _cached(name: str) -> str:
    return json.dumps(_definition(name, stack=()), sort_keys=True)


def k8s_schema(name: str, *, description: str | None = None) -> dict[str, Any]:
    """The structural schema of one snapshot definition, e.g. ``io.k8s.api.core.v1.Volume``
    (a fresh copy on every call)."""
    schema: dict[str, Any] = json.loads(_cached(name))
    if description:
        schema["description"] = description
    return schema


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lattice.api.k8s_schema OPENAPI.json... [--output PATH]``: write the snapshot."""
    parser = argparse.ArgumentParser(
        prog="python -m lattice.api.k8s_schema",
        description="Extract the Kubernetes schemas the CRDs embed from OpenAPI v3 documents.",
    )
    parser.add_argument("documents", nargs="+", type=Path, help="OpenAPI v3 JSON documents")
    parser.add_argument("--output", type=Path, default=SNAPSHOT, help=f"default: {SNAPSHOT}")
    args = parser.parse_args(argv)
    documents = [json.loads(p.read_text(encoding="utf-8")) for p in args.documents]
    snapshot = extract(documents)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.output}: {len(snapshot['definitions'])} definitions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
