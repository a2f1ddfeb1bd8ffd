"""An offline stand-in for the apiserver's schema handling, used by the api unit tests.

``apply_defaults`` mirrors structural defaulting (a missing property gets its ``default``, then
defaulting recurses into it); ``schema_errors`` mirrors the OpenAPI value validation the apiserver
runs before CEL (types, enums, bounds, required, unknown fields under strict field validation),
formatting errors the way the apiserver does. CEL rules are *not* evaluated: ``iter_rules`` lists
them with the path of the schema node that carries them, for tests to reason about.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["RuleSite", "apply_defaults", "crd_schema", "iter_rules", "load_yaml", "schema_errors"]


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` through libyaml when available (the CRDs are large)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def crd_schema(crd: dict[str, Any]) -> dict[str, Any]:
    """The openAPIV3Schema of the (single) version of a CRD manifest."""
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """Return a copy of ``value`` with the schema's defaults applied, top-down."""
    value = copy.deepcopy(value)
    _default(value, schema)
    return value


def _default(value: Any, schema: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        for key, item in value.items():
            if key in schema.get("properties", {}):
                _default(item, schema["properties"][key])
            elif isinstance(schema.get("additionalProperties"), dict):
                _default(item, schema["additionalProperties"])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(item, schema["items"])


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _is_type(value: Any, kind: str) -> bool:
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    }
    return checks[kind](value)


def schema_errors(value: Any, schema: dict[str, Any], *, path: str = "") -> list[str]:
    """Apiserver-formatted schema errors of ``value`` (already defaulted); [] when valid."""
    shown = json.dumps(value)
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, int | str) and not isinstance(value, bool)):
            return [f"{path}: Invalid value: {shown}: {path} in body must be of type int-or-string"]
        if (
            "pattern" in schema
            and isinstance(value, str)
            and not re.search(schema["pattern"], value)
        ):
            return [
                f"{path}: Invalid value: {shown}: {path} in body should match '{schema['pattern']}'"
            ]
        return []
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        return [f"{path}: Invalid value: {shown}: {path} in body must be of type {kind}: {shown}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(json.dumps(v) for v in schema["enum"])
        errors.append(f"{path}: Unsupported value: {shown}: supported values: {supported}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(
            f"{path}: Invalid value: {shown}: {path} in body should be greater than or equal to "
            f"{schema['minimum']}"
        )
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(
            f"{path}: Invalid value: {shown}: {path} in body should be less than or equal to "
            f"{schema['maximum']}"
        )
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(
            f"{path}: Invalid value: {shown}: {path} in body should be at least "
            f"{schema['minLength']} chars long"
        )
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{path}: Too long: may not be more than {schema['maxLength']} bytes")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(
            f"{path}: Too many: {len(value)}: must have at most {schema['maxItems']} items"
        )
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(
            f"{path}: Too many: {len(value)}: must have at most {schema['maxProperties']} items"
        )
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(
            f"{path}: Invalid value: {shown}: {path} in body should match '{schema['pattern']}'"
        )
    if isinstance(value, dict):
        errors.extend(_object_errors(value, schema, path=path))
    if isinstance(value, list) and schema.get("x-kubernetes-list-type") == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen: set[str] = set()
        for index, item in enumerate(value):
            key = json.dumps({k: item.get(k) for k in keys} if isinstance(item, dict) else item)
            if key in seen:
                errors.append(f"{path}[{index}]: Duplicate value: {key}")
            seen.add(key)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors.extend(schema_errors(item, schema["items"], path=f"{path}.{index}"))
    return errors


def _object_errors(value: dict[str, Any], schema: dict[str, Any], *, path: str) -> list[str]:
    errors = [
        f"{_join(path, k)}: Required value" for k in schema.get("required", []) if k not in value
    ]
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if key in properties:
            if path == "" and key == "metadata":
                continue  # ObjectMeta is validated by the apiserver itself
            errors.extend(schema_errors(item, properties[key], path=_join(path, key)))
        elif isinstance(extra, dict):
            errors.extend(schema_errors(item, extra, path=_join(path, key)))
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            errors.append(f"{_join(path, key)}: field not declared in schema")
    return errors


@dataclass(frozen=True)
class RuleSite:
    """A CEL rule and where it sits: ``path`` uses ``[*]`` for map values, ``[]`` for items."""

    path: str
    rule: dict[str, Any]
    node: dict[str, Any]

    def error_path(self) -> str:
        """The path the apiserver reports for this rule (``fieldPath`` appended)."""
        suffix = str(self.rule.get("fieldPath", "")).lstrip(".")
        return _join(self.path, suffix) if suffix else self.path


def iter_rules(schema: dict[str, Any], path: str = "") -> Iterator[RuleSite]:
    """Every ``x-kubernetes-validations`` entry in ``schema``, outermost first."""
    for rule in schema.get("x-kubernetes-validations", []):
        yield RuleSite(path, rule, schema)
    for name, sub in schema.get("properties", {}).items():
        yield from iter_rules(sub, _join(path, name))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from iter_rules(schema["additionalProperties"], f"{path}[*]")
    if isinstance(schema.get("items"), dict):
        yield from iter_rules(schema["items"], f"{path}[]")
