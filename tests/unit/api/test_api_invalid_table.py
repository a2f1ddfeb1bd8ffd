"""The invalid-manifest table, checked offline against the generated CRDs.

The apiserver run lives in tests/integration; here we make sure every case is invalid for exactly
one reason: schema cases produce exactly one schema error containing the expected strings, CEL
cases pass the schema and name a rule that exists at the expected path.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from lattice.api import (
    ClusterTrainingRuntime,
    MPIJob,
    MXJob,
    TrainingJob,
    TrainingRuntime,
    TrainJob,
)
from lattice.api.crd import DESCRIPTORS, render_crds
from tests.integration.invalid_manifests import (
    INVALID_MANIFESTS,
    INVALID_UPDATES,
    InvalidCase,
    InvalidUpdateCase,
    valid,
)
from tests.unit.api.offline import (
    RuleSite,
    apply_defaults,
    crd_schema,
    iter_rules,
    load_yaml,
    schema_errors,
)

KINDS = [d.resource.kind for d in DESCRIPTORS]
MODELS: dict[str, Any] = {
    "TrainingJob": TrainingJob,
    "MPIJob": MPIJob,
    "MXJob": MXJob,
    "TrainJob": TrainJob,
    "TrainingRuntime": TrainingRuntime,
    "ClusterTrainingRuntime": ClusterTrainingRuntime,
}


def _schemas() -> dict[str, dict[str, Any]]:
    rendered = render_crds()
    return {d.resource.kind: crd_schema(load_yaml(rendered[d.file_name])) for d in DESCRIPTORS}


SCHEMAS = _schemas()


def _rule_sites(kind: str, message: str) -> list[RuleSite]:
    return [s for s in iter_rules(SCHEMAS[kind]) if message in s.rule["message"]]


def _path_pattern(site_path: str) -> re.Pattern[str]:
    parts = re.split(r"(\[\*\]|\[\])", site_path)
    regex = "".join(
        r"\[[^\]]+\]" if p == "[*]" else r"\[\d+\]" if p == "[]" else re.escape(p) for p in parts
    )
    return re.compile(regex)


def test_table_is_large_covers_every_kind_and_has_unique_ids_and_names() -> None:
    assert len(INVALID_MANIFESTS) >= 30
    assert {c.manifest["kind"] for c in INVALID_MANIFESTS} == set(KINDS)
    assert len({c.id for c in INVALID_MANIFESTS}) == len(INVALID_MANIFESTS)
    names = [c.manifest["metadata"]["name"] for c in INVALID_MANIFESTS]
    assert len(set(names)) == len(names)
    assert all("namespace" not in c.manifest["metadata"] for c in INVALID_MANIFESTS)


@pytest.mark.parametrize("kind", KINDS)
def test_the_valid_base_of_every_kind_passes_the_schema_and_parses(kind: str) -> None:
    manifest = valid(kind)
    assert schema_errors(apply_defaults(manifest, SCHEMAS[kind]), SCHEMAS[kind]) == []
    MODELS[kind].model_validate(manifest)


@pytest.mark.parametrize("case", INVALID_MANIFESTS, ids=[c.id for c in INVALID_MANIFESTS])
def test_case_is_invalid_for_exactly_one_reason(case: InvalidCase) -> None:
    kind = case.manifest["kind"]
    errors = schema_errors(apply_defaults(case.manifest, SCHEMAS[kind]), SCHEMAS[kind])
    sites = _rule_sites(kind, case.expect[-1])
    if sites:
        # a CEL case: the schema accepts it, so the rule is the only thing that fails
        assert errors == [], f"{case.id} also fails the schema: {errors}"
        path = case.expect[0].split(":")[0]
        assert any(_path_pattern(s.error_path()).fullmatch(path) for s in sites), (
            f"{case.id}: {path!r} is not where {[s.error_path() for s in sites]} report"
        )
        if "Required value" in case.expect[0]:
            assert any(s.rule.get("reason") == "FieldValueRequired" for s in sites)
    else:
        assert len(errors) == 1, f"{case.id}: expected one schema error, got {errors}"
        for expected in case.expect:
            assert expected in errors[0]


@pytest.mark.parametrize("case", INVALID_UPDATES, ids=[c.id for c in INVALID_UPDATES])
def test_update_case_only_breaks_a_transition_rule(case: InvalidUpdateCase) -> None:
    kind = case.manifest["kind"]
    for manifest in (case.manifest, case.updated):
        assert schema_errors(apply_defaults(manifest, SCHEMAS[kind]), SCHEMAS[kind]) == []
    assert case.manifest != case.updated
    sites = _rule_sites(kind, case.expect[-1])
    assert sites
    assert all("oldSelf" in s.rule["rule"] for s in sites)
    assert any(_path_pattern(s.error_path()).fullmatch(case.expect[0]) for s in sites)
