"""The Kubernetes schema snapshot and its conversion into CRD schemas."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from lattice.api.k8s_schema import (
    QUANTITY_PATTERN,
    ROOTS,
    SNAPSHOT,
    extract,
    k8s_schema,
    snapshot_definitions,
)
from lattice.api.schema import structural_violations

POD = "io.k8s.api.core.v1.PodTemplateSpec"


def _container(schema: dict[str, Any]) -> dict[str, Any]:
    spec = schema["properties"]["spec"]
    items: dict[str, Any] = spec["properties"]["containers"]["items"]
    return items


def _descriptions(node: Any) -> int:
    if isinstance(node, dict):
        own = int(isinstance(node.get("description"), str))
        return own + sum(_descriptions(v) for v in node.values())
    if isinstance(node, list):
        return sum(_descriptions(v) for v in node)
    return 0


def test_snapshot_holds_the_closure_of_the_roots_without_descriptions() -> None:
    definitions = snapshot_definitions()
    assert set(ROOTS) <= set(definitions)
    assert _descriptions(definitions) == 0
    assert json.loads(SNAPSHOT.read_text(encoding="utf-8"))["kubernetesVersion"] == "1.34"


@pytest.mark.parametrize("name", ROOTS)
def test_every_root_converts_to_a_structural_schema(name: str) -> None:
    assert structural_violations(k8s_schema(name)) == []


def test_pod_template_is_closed_and_typed() -> None:
    pod = k8s_schema(POD)
    container = _container(pod)
    assert "x-kubernetes-preserve-unknown-fields" not in json.dumps(pod)
    assert container["required"] == ["name"]
    assert container["properties"]["imagePullPolicy"]["enum"] == ["Always", "IfNotPresent", "Never"]
    assert pod["properties"]["spec"]["required"] == ["containers"]


def test_quantities_are_int_or_string_with_the_quantity_pattern() -> None:
    resources = _container(k8s_schema(POD))["properties"]["resources"]
    limit = resources["properties"]["limits"]["additionalProperties"]
    assert limit["x-kubernetes-int-or-string"] is True
    assert limit["pattern"] == QUANTITY_PATTERN
    assert re.match(QUANTITY_PATTERN, "500Mi")
    assert re.match(QUANTITY_PATTERN, "1.5")
    assert not re.match(QUANTITY_PATTERN, "4GB")


def test_embedded_object_meta_is_the_controller_gen_subset() -> None:
    meta = k8s_schema(POD)["properties"]["metadata"]
    assert list(meta["properties"]) == ["annotations", "finalizers", "labels", "name", "namespace"]


def test_list_map_keys_keep_their_defaults_and_zero_defaults_go() -> None:
    ports = _container(k8s_schema(POD))["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert ports["items"]["properties"]["protocol"]["default"] == "TCP"
    assert "default" not in ports["items"]["properties"]["containerPort"]  # required: no default
    assert "default" not in ports["items"]  # object defaults ({}) are dropped


def test_defaults_outside_their_enum_are_dropped() -> None:
    claim = k8s_schema("io.k8s.api.core.v1.PersistentVolumeClaim")
    modes = claim["properties"]["spec"]["properties"]["accessModes"]["items"]
    assert "" not in modes["enum"]
    assert "default" not in modes


def test_extract_follows_refs_and_fails_on_a_missing_definition() -> None:
    leaf = {"type": "object", "description": "gone", "properties": {"a": {"type": "string"}}}
    documents: list[dict[str, Any]] = [
        {"components": {"schemas": {name: {"type": "object"} for name in ROOTS}}},
        {
            "components": {
                "schemas": {
                    POD: {"properties": {"x": {"$ref": "#/components/schemas/my.Leaf"}}},
                    "my.Leaf": leaf,
                }
            }
        },
    ]
    snapshot = extract(documents)
    assert snapshot["definitions"]["my.Leaf"] == {
        "properties": {"a": {"type": "string"}},
        "type": "object",
    }
    pod_only = {"components": {"schemas": {POD: documents[1]["components"]["schemas"][POD]}}}
    with pytest.raises(KeyError, match=r"my\.Leaf"):
        extract([documents[0], pod_only])
