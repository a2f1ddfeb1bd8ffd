"""The generated API reference: the committed file is current, and it documents every field."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from lattice.api import SchedulingStatus, TrainingJob
from lattice.api.crd import DESCRIPTORS
from lattice.api.docs import EXAMPLE_TRAININGJOB, main, render_api_reference

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "api-reference.md"


def _section(text: str, name: str) -> str:
    """The Markdown of type ``name``, from its heading to the next type heading."""
    match = re.search(rf"^#### {name}\n(.*?)(?=^#### |^## |\Z)", text, re.M | re.S)
    assert match is not None, f"no section for {name}"
    return match.group(1)


def _models() -> set[type[BaseModel]]:
    """Every model reachable from the CRD kinds (what the reference must cover)."""
    seen: set[type[BaseModel]] = set()
    todo: list[object] = [d.kind_model for d in DESCRIPTORS]
    while todo:
        tp = todo.pop()
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in seen:
                continue
            seen.add(tp)
            todo.extend(info.annotation for info in tp.model_fields.values())
        else:
            todo.extend(typing.get_args(tp))
    return seen


def test_committed_reference_is_current() -> None:
    """Regenerate with `make docs` (python -m lattice.api.docs) when this fails."""
    assert DOC.read_text(encoding="utf-8") == render_api_reference()


def test_rendering_is_deterministic() -> None:
    assert render_api_reference() == render_api_reference()


def test_every_model_field_is_a_row_with_its_wire_name() -> None:
    text = render_api_reference()
    for model in _models():
        if model.__name__ == "ObjectMeta":
            assert "#objectmeta-v1-meta" in text
            continue
        section = _section(text, model.__name__)
        for name, info in model.model_fields.items():
            wire = info.alias or name
            assert f"| `{wire}` _" in section, f"{model.__name__}.{wire} missing"


def test_descriptions_come_from_the_attribute_docstrings() -> None:
    section = _section(render_api_reference(), "SchedulingStatus")
    for name, info in SchedulingStatus.model_fields.items():
        assert info.description, name
        first_words = " ".join(info.description.split()[:3]).replace("``", "`")
        assert first_words in section, name


def test_types_link_to_their_sections_and_upstream() -> None:
    text = render_api_reference()
    spec = _section(text, "TrainingJobSpec")
    assert "| `runPolicy` _[TrainingJobRunPolicy](#trainingjobrunpolicy)_ |" in spec
    assert "| `minSize` _integer_ | Fewest workers" in spec
    status = _section(text, "JobStatus")
    assert "_object (keys:string, values:[ReplicaStatus](#replicastatus))_" in status
    assert "_[JobCondition](#jobcondition) array_" in status
    assert "kubernetes-api/v1.34/#time-v1-meta" in status
    root = _section(text, "TrainingJob")
    assert "| `apiVersion` _string_ | `breezeml.ai/v1` |" in root
    assert "Refer to Kubernetes API documentation for fields of `metadata`." in root
    # Every in-page link has a target.
    anchors = {m.lower() for m in re.findall(r"^#### (\w+)$", text, re.M)}
    for target in re.findall(r"\]\(#(\w+)\)", text):
        assert target in anchors or target.endswith(("v1", "v2beta1", "v1alpha1")), target


def test_enums_list_their_values_and_where_they_appear() -> None:
    section = _section(render_api_reference(), "Stage")
    assert "_Underlying type:_ _string_" in section
    assert "`Waiting`, `Running`, `Completed`, `RequeueCooldown`, `Wrong`" in section
    assert "- [SchedulingStatus](#schedulingstatus)" in section


def test_the_packages_are_the_crd_group_versions() -> None:
    text = render_api_reference()
    versions = {d.resource.api_version for d in DESCRIPTORS}
    assert set(re.findall(r"^## (\S+/\S+)$", text, re.M)) == versions


def test_the_example_is_a_valid_trainingjob() -> None:
    job = TrainingJob.model_validate(EXAMPLE_TRAININGJOB)
    assert (job.spec.min_size, job.spec.max_size) == (2, 4)


def test_check_fails_on_a_stale_file_and_passes_after_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "api.md"
    assert main(["--output", str(out), "--check"]) == 1
    out.write_text("old\n", encoding="utf-8")
    assert main(["--output", str(out), "--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--output", str(out)]) == 0
    assert main(["--output", str(out), "--check"]) == 0
    assert out.read_text(encoding="utf-8") == render_api_reference()
