"""Turn pydantic JSON Schema into a Kubernetes *structural* OpenAPI v3 schema.

Contract: ``structural_schema(model)`` returns a plain ``dict`` that a kube-apiserver accepts as
(part of) ``openAPIV3Schema``:

- every ``$ref`` is inlined and ``$defs`` dropped (recursive models raise);
- ``title``, ``$schema``, ``examples`` and ``discriminator`` are dropped; ``description`` is kept
  (``kubectl explain``);
- ``Optional[X]`` loses its ``null`` branch; any other union raises ``NonStructuralSchemaError``
  unless it is the int-or-string pattern marked ``x-kubernetes-int-or-string``;
- ``const`` becomes a one-value ``enum``; JSON Schema 2020-12 numeric ``exclusiveMinimum`` /
  ``exclusiveMaximum`` become OpenAPI 3.0 ``minimum`` + boolean flags;
- ``type: object`` is added wherever ``properties``/``additionalProperties`` appear;
  ``additionalProperties: true`` becomes ``x-kubernetes-preserve-unknown-fields: true``;
- ``default: null`` is dropped; other defaults are kept (the apiserver applies them);
- ``x-kubernetes-validations`` given on a field and on the referenced model are concatenated.

``structural_violations(schema)`` re-checks the result independently (used by the unit tests and by
``crd.render_crds``). ``cel_rule`` builds one ``x-kubernetes-validations`` entry, ``validations``
the marker holding a list of them, ``immutable`` the marker of a field that never changes. No I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.config import JsonDict, JsonValue

__all__ = [
    "NonStructuralSchemaError",
    "canonical",
    "cel_rule",
    "dns1035_name_rule",
    "immutable",
    "list_map",
    "structural_schema",
    "structural_violations",
    "validations",
]

_DROP = frozenset({"title", "$schema", "examples", "discriminator", "$comment", "readOnly"})
_ALLOWED = frozenset(
    {
        "type",
        "format",
        "description",
        "properties",
        "additionalProperties",
        "items",
        "required",
        "enum",
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "multipleOf",
        "nullable",
        "anyOf",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)
_ESCAPES = ("x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")
_FORBIDDEN_IN_JUNCTORS = frozenset(
    {"description", "type", "default", "additionalProperties", "nullable", "title"}
)
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


class NonStructuralSchemaError(ValueError):
    """The model cannot be expressed as a structural schema (e.g. a union of two models)."""


def cel_rule(
    rule: str,
    message: str,
    *,
    field_path: str | None = None,
    reason: str | None = None,
) -> JsonDict:
    """One ``x-kubernetes-validations`` entry; ``reason`` is e.g. ``FieldValueRequired``."""
    entry: JsonDict = {"rule": rule, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    if reason is not None:
        entry["reason"] = reason
    return entry


def validations(*rules: JsonValue) -> JsonDict:
    """The ``x-kubernetes-validations`` marker holding ``rules``, for a model or a field."""
    return {"x-kubernetes-validations": list(rules)}


def immutable(path: str) -> JsonDict:
    """The marker of a field that must not change once set: ``<path> is immutable``."""
    return validations(cel_rule("self == oldSelf", f"{path} is immutable"))


def list_map(key: str) -> JsonDict:
    """The schema markers of a list that is a map keyed by ``key`` (``+listType=map``)."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]}


RFC1035 = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""A DNS-1035 label: lowercase letters, digits and '-', starting with a letter."""


def dns1035_name_rule(message: str) -> JsonDict:
    """The root rule that ``metadata.name`` is a DNS-1035 label, reported with ``message``."""
    return cel_rule(
        f"self.metadata.name.matches('{RFC1035}')", message, field_path=".metadata.name"
    )


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model`` (see the module docstring for the rules)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = raw.pop("$defs", {})
    result: dict[str, Any] = canonical(_convert(raw, defs, stack=(), path="$"))
    return result


def canonical(value: Any) -> Any:
    """Deep copy with every mapping's keys sorted, except property names (declaration order)."""
    if isinstance(value, list):
        return [canonical(item) for item in value]
    if not isinstance(value, dict):
        return value
    result: dict[str, Any] = {}
    for key in sorted(value):
        item = value[key]
        if key == "properties" and isinstance(item, dict):
            result[key] = {name: canonical(sub) for name, sub in item.items()}
        else:
            result[key] = canonical(item)
    return result


def _resolve(
    ref: str, defs: dict[str, Any], *, stack: tuple[str, ...], path: str
) -> dict[str, Any]:
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        raise NonStructuralSchemaError(f"{path}: unsupported $ref {ref!r}")
    name = ref[len(prefix) :]
    if name in stack:
        raise NonStructuralSchemaError(f"{path}: recursive model {name!r} is not structural")
    return _convert(copy.deepcopy(defs[name]), defs, stack=(*stack, name), path=path)


def _merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``overlay`` (the referencing field) wins, except that validation lists are concatenated."""
    merged = dict(base)
    for key, value in overlay.items():
        if key == "x-kubernetes-validations" and key in merged:
            merged[key] = [*merged[key], *value]
        else:
            merged[key] = value
    return merged


def _convert(
    node: dict[str, Any], defs: dict[str, Any], *, stack: tuple[str, ...], path: str
) -> dict[str, Any]:
    node = {k: v for k, v in node.items() if k not in _DROP}
    if "default" in node and node["default"] is None:
        del node["default"]

    if "$ref" in node:
        target = _resolve(node.pop("$ref"), defs, stack=stack, path=path)
        node = _merge(target, _convert(node, defs, stack=stack, path=path))
    if "allOf" in node:
        parts = node.pop("allOf")
        if len(parts) != 1:
            raise NonStructuralSchemaError(f"{path}: allOf with {len(parts)} members")
        node = _merge(_convert(parts[0], defs, stack=stack, path=path), node)
    if "oneOf" in node:
        raise NonStructuralSchemaError(f"{path}: oneOf is not structural")
    if "anyOf" in node:
        node = _convert_any_of(node, defs, stack=stack, path=path)

    if "const" in node:
        node["enum"] = [node.pop("const")]
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = node.get(bound)
        if value is not None and not isinstance(value, bool):
            node[flag] = value
            node[bound] = True

    if "properties" in node:
        node["properties"] = {
            name: _convert(sub, defs, stack=stack, path=f"{path}.{name}")
            for name, sub in node["properties"].items()
        }
        node.setdefault("type", "object")
    if "additionalProperties" in node:
        extra = node["additionalProperties"]
        if extra is True:
            del node["additionalProperties"]
            node["x-kubernetes-preserve-unknown-fields"] = True
        elif extra is False:
            del node["additionalProperties"]
        else:
            node["additionalProperties"] = _convert(extra, defs, stack=stack, path=f"{path}[*]")
        node.setdefault("type", "object")
    if "items" in node:
        node["items"] = _convert(node["items"], defs, stack=stack, path=f"{path}[]")
    if node.get("uniqueItems"):
        raise NonStructuralSchemaError(f"{path}: uniqueItems is not allowed in CRD schemas")
    node.pop("uniqueItems", None)

    unknown = set(node) - _ALLOWED
    if unknown:
        raise NonStructuralSchemaError(f"{path}: unsupported keywords {sorted(unknown)}")
    if isinstance(node.get("description"), str):
        node["description"] = " ".join(node["description"].split())
    return node


def _convert_any_of(
    node: dict[str, Any], defs: dict[str, Any], *, stack: tuple[str, ...], path: str
) -> dict[str, Any]:
    branches = [b for b in node.pop("anyOf") if b != {"type": "null"}]
    if node.get("x-kubernetes-int-or-string"):
        node["anyOf"] = _INT_OR_STRING_ANY_OF
        return node
    if len(branches) == 1:
        return _merge(_convert(branches[0], defs, stack=stack, path=path), node)
    raise NonStructuralSchemaError(
        f"{path}: union of {len(branches)} types is not structural (only int-or-string is)"
    )


# --------------------------------------------------------------------------- checking


def _children(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, sub in node.get("properties", {}).items():
        yield f"{path}.{name}", sub
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        yield f"{path}[*]", extra
    items = node.get("items")
    if isinstance(items, dict):
        yield f"{path}[]", items


def structural_violations(schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every way ``schema`` breaks the structural-schema rules; empty when it is structural."""
    problems: list[str] = []
    if "$ref" in schema or "$defs" in schema:
        problems.append(f"{path}: $ref/$defs present")
    unknown = set(schema) - _ALLOWED
    if unknown:
        problems.append(f"{path}: unsupported keywords {sorted(unknown)}")
    if "type" not in schema and not any(schema.get(k) for k in _ESCAPES):
        problems.append(f"{path}: no type and no x-kubernetes escape")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{path}: both properties and additionalProperties")
    if schema.get("additionalProperties") in (True, False):
        problems.append(f"{path}: boolean additionalProperties")
    if schema.get("type") == "array" and "items" not in schema:
        problems.append(f"{path}: array without items")
    for junctor in ("anyOf", "allOf", "oneOf", "not"):
        if junctor not in schema:
            continue
        if junctor == "anyOf" and schema["anyOf"] == _INT_OR_STRING_ANY_OF:
            if not schema.get("x-kubernetes-int-or-string"):
                problems.append(f"{path}: int-or-string anyOf without x-kubernetes-int-or-string")
            continue
        problems.append(f"{path}: {junctor} other than the int-or-string pattern")
        members = schema[junctor] if isinstance(schema[junctor], list) else [schema[junctor]]
        for member in members:
            bad = _FORBIDDEN_IN_JUNCTORS & set(member)
            if bad:
                problems.append(f"{path}.{junctor}: forbidden keys {sorted(bad)}")
    if schema.get("x-kubernetes-int-or-string") and "type" in schema:
        problems.append(f"{path}: int-or-string must not declare a type")
    if schema.get("x-kubernetes-list-type") == "map":
        item = schema.get("items", {})
        for key in schema.get("x-kubernetes-list-map-keys", []):
            if key not in item.get("required", []) and "default" not in item.get(
                "properties", {}
            ).get(key, {}):
                problems.append(f"{path}: list-map key {key!r} neither required nor defaulted")
    for child_path, child in _children(schema, path):
        problems.extend(structural_violations(child, child_path))
    return problems
