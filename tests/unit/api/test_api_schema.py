"""The pydantic -> structural schema converter, and the structural rules on every generated CRD."""

from __future__ import annotations

import re
from typing import Any, Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from lattice.api.base import IntOrString, K8sModel, Object
from lattice.api.crd import DESCRIPTORS, render_crds
from lattice.api.schema import (
    NonStructuralSchemaError,
    cel_rule,
    structural_schema,
    structural_violations,
)
from tests.unit.api.offline import crd_schema, iter_rules, load_yaml

CRDS = {d.resource.kind: load_yaml(render_crds()[d.file_name]) for d in DESCRIPTORS}
ESCAPES = ("x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")
FORBIDDEN_IN_ANY_OF = {"description", "type", "default", "additionalProperties", "nullable"}


def _nodes(schema: dict[str, Any], path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, schema)]
    for name, sub in schema.get("properties", {}).items():
        found += _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        found += _nodes(schema["additionalProperties"], f"{path}[*]")
    if isinstance(schema.get("items"), dict):
        found += _nodes(schema["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("kind", list(CRDS))
def test_generated_schema_is_structural(kind: str) -> None:
    schema = crd_schema(CRDS[kind])
    assert "$ref" not in yaml.safe_dump(schema)
    assert "$defs" not in yaml.safe_dump(schema)
    for path, node in _nodes(schema):
        assert "type" in node or any(node.get(e) for e in ESCAPES), f"{path} has no type"
        assert "title" not in node, path
        assert node.get("default", 0) is not None, f"{path} has default: null"
        assert not ("properties" in node and "additionalProperties" in node), path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
            assert "type" not in node, path
            for branch in node["anyOf"]:
                assert not FORBIDDEN_IN_ANY_OF & (set(branch) - {"type"}), path
                assert set(branch) == {"type"}, path
        for junctor in ("allOf", "oneOf", "not"):
            assert junctor not in node, path
    assert structural_violations(schema) == []


@pytest.mark.parametrize("kind", list(CRDS))
def test_root_metadata_only_declares_name_and_generate_name(kind: str) -> None:
    metadata = crd_schema(CRDS[kind])["properties"]["metadata"]
    assert metadata["type"] == "object"
    assert set(metadata.get("properties", {})) <= {"name", "generateName"}


@pytest.mark.parametrize("kind", list(CRDS))
def test_every_rule_has_a_one_line_message_naming_its_field(kind: str) -> None:
    for site in iter_rules(crd_schema(CRDS[kind])):
        message = site.rule["message"]
        assert message, site
        assert "\n" not in message, site
        assert set(site.rule) <= {"rule", "message", "fieldPath", "reason"}
        segments = [p for p in site.error_path().replace("[*]", ".").split(".") if p]
        assert any(seg in message for seg in segments[-3:]), (site.error_path(), message)


def _resolve(node: dict[str, Any], field_path: str) -> dict[str, Any]:
    """Mirror of the apiserver's ValidFieldPath: properties by name, map values by key."""
    for part in [p for p in field_path.split(".") if p]:
        node = node["properties"][part] if "properties" in node else node["additionalProperties"]
    return node


@pytest.mark.parametrize("kind", list(CRDS))
def test_every_field_path_points_at_a_declared_field(kind: str) -> None:
    for site in iter_rules(crd_schema(CRDS[kind])):
        if "fieldPath" in site.rule:
            assert "type" in _resolve(site.node, site.rule["fieldPath"]), site


_ITERATED_CHILD = re.compile(r"\bself\.(\w+)\.(?:all|exists|exists_one|map|filter)\(")


def _bounded_rules(schema: dict[str, Any], unbounded: tuple[str, ...] = ()) -> list[str]:
    """Rules that sit under, or iterate over, a list or map with no maxItems/maxProperties."""
    problems = []
    iterates = ("all(", "exists(", "exists_one(", "map(", "filter(")
    for rule in schema.get("x-kubernetes-validations", []):
        if unbounded:
            problems.append(f"{rule['rule']} under unbounded {unbounded}")
        kind = schema.get("type")
        bounded = "maxItems" in schema or "maxProperties" in schema
        # An object's rule may iterate its own declared children (self.<field>.all(...)): each
        # of those must be bounded; a rule over a literal list ([a, b].filter) is bounded.
        children = set(_ITERATED_CHILD.findall(rule["rule"]))
        if kind == "object" and children and "properties" in schema:
            for child in sorted(children):
                node = schema["properties"].get(child, {})
                if "maxItems" not in node and "maxProperties" not in node:
                    problems.append(f"{rule['rule']} iterates unbounded {child}")
            continue
        iterating = any(i in rule["rule"] for i in iterates) and not rule["rule"].startswith("[")
        if kind in ("array", "object") and iterating and not bounded:
            problems.append(f"{rule['rule']} iterates an unbounded {kind}")
    for sub in schema.get("properties", {}).values():
        problems += _bounded_rules(sub, unbounded)
    for key, bound in (("additionalProperties", "maxProperties"), ("items", "maxItems")):
        if isinstance(schema.get(key), dict):
            extra = () if bound in schema else (key,)
            problems += _bounded_rules(schema[key], unbounded + extra)
    return problems


@pytest.mark.parametrize("kind", list(CRDS))
def test_cel_rules_only_iterate_bounded_collections(kind: str) -> None:
    spec = crd_schema(CRDS[kind])["properties"]["spec"]
    assert _bounded_rules(spec) == []


# --------------------------------------------------------------------------- converter


class _Inner(K8sModel):
    """Inner docs."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [cel_rule("a", "m")]})

    some_value: int = Field(1, gt=0)
    """Some value."""


class _Outer(K8sModel):
    inner: _Inner | None = Field(
        None, json_schema_extra={"x-kubernetes-validations": [cel_rule("b", "n")]}
    )
    """Field docs win."""
    fixed: Literal["only"] = "only"
    labels: dict[str, str] | None = None
    anything: dict[str, Any] | None = None
    blob: Object | None = None
    port: IntOrString | None = None
    names: list[str] = Field(default_factory=list, max_length=3)


def test_converter_inlines_refs_strips_null_and_titles_and_keeps_descriptions() -> None:
    schema = structural_schema(_Outer)
    inner = schema["properties"]["inner"]
    assert inner["type"] == "object"
    assert inner["description"] == "Field docs win."
    assert [r["rule"] for r in inner["x-kubernetes-validations"]] == ["a", "b"]
    value = inner["properties"]["someValue"]
    assert value == {
        "default": 1,
        "description": "Some value.",
        "exclusiveMinimum": True,
        "minimum": 0,
        "type": "integer",
    }
    assert schema["properties"]["fixed"]["enum"] == ["only"]
    assert "const" not in schema["properties"]["fixed"]
    assert schema["properties"]["labels"] == {
        "additionalProperties": {"type": "string"},
        "type": "object",
    }
    assert schema["properties"]["anything"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert schema["properties"]["port"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    assert schema["properties"]["names"]["maxItems"] == 3
    assert "default" not in schema["properties"]["inner"]
    assert structural_violations(schema) == []


class _Union(BaseModel):
    value: int | str


class _ModelUnion(BaseModel):
    value: _Inner | _Union


class _Recursive(BaseModel):
    child: _Recursive | None = None


class _Unique(BaseModel):
    tags: set[str]


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        pytest.param(_Union, "union", id="plain-union"),
        pytest.param(_ModelUnion, "union", id="model-union"),
        pytest.param(_Recursive, "recursive", id="recursion"),
        pytest.param(_Unique, "uniqueItems", id="set"),
    ],
)
def test_converter_refuses_non_structural_models(model: type[BaseModel], needle: str) -> None:
    with pytest.raises(NonStructuralSchemaError, match=needle):
        structural_schema(model)


@pytest.mark.parametrize(
    ("schema", "needle"),
    [
        pytest.param({"properties": {"a": {}}}, "no type", id="untyped-node"),
        pytest.param({"type": "object", "$ref": "#/x"}, "$ref", id="ref"),
        pytest.param(
            {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "without x-kubernetes-int-or-string",
            id="bare-int-or-string",
        ),
        pytest.param(
            {"type": "object", "anyOf": [{"type": "object", "description": "x"}]},
            "forbidden keys",
            id="description-in-anyof",
        ),
        pytest.param(
            {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "both properties",
            id="properties-and-additional",
        ),
        pytest.param({"type": "array"}, "without items", id="array-no-items"),
        pytest.param(
            {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
            "neither required nor defaulted",
            id="list-map-key-optional",
        ),
    ],
)
def test_structural_violations_detects(schema: dict[str, Any], needle: str) -> None:
    problems = structural_violations({"type": "object", "properties": {"x": schema}})
    assert any(needle in p for p in problems), problems
