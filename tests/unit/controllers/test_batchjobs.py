"""``lattice.controllers.batchjobs``: the patches that suspend and resume an existing batch Job."""

from __future__ import annotations

from typing import Any

from lattice.controllers.batchjobs import job_patches
from lattice.primitives.objects import Obj


def job(*, suspend: bool | None, node: str = "n1", start: bool = False, **tmpl: Any) -> Obj:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    spec: Obj = {
        "template": {
            "metadata": {"labels": {"job-name": "pi-launcher", **tmpl.pop("labels", {})}},
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [term]
                        }
                    }
                },
                **tmpl,
            },
        }
    }
    if suspend is not None:
        spec["suspend"] = suspend
    out: Obj = {"metadata": {"name": "pi-launcher"}, "spec": spec}
    if start:
        out["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    return out


def test_in_step_needs_nothing() -> None:
    assert job_patches(job(suspend=None), job(suspend=None)) == []
    assert job_patches(job(suspend=True), job(suspend=True)) == []


def test_suspending_patches_only_the_flag() -> None:
    assert job_patches(job(suspend=None, start=True), job(suspend=True)) == [
        ("", {"spec": {"suspend": True}})
    ]


def test_a_suspended_job_gets_its_start_time_cleared() -> None:
    assert job_patches(job(suspend=True, start=True), job(suspend=True)) == [
        ("status", {"status": {"startTime": None}})
    ]


def test_resuming_resyncs_the_scheduling_fields_and_keeps_the_job_controllers_labels() -> None:
    current = job(suspend=True, node="n1", nodeSelector={"old": "x"}, tolerations=[{"key": "a"}])
    desired = job(
        suspend=None,
        node="n3",
        labels={"queue": "b"},
        nodeSelector={"pool": "b"},
        schedulingGates=[{"name": "g"}],
    )
    ((sub, body),) = job_patches(current, desired)
    assert sub == ""
    spec = body["spec"]
    assert spec["suspend"] is False
    template = spec["template"]
    assert template["metadata"]["labels"] == {"job-name": "pi-launcher", "queue": "b"}
    assert template["spec"]["nodeSelector"] == {"old": None, "pool": "b"}
    assert template["spec"]["tolerations"] is None
    assert template["spec"]["schedulingGates"] == [{"name": "g"}]
    required = template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert required["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n3"]


def test_resuming_a_started_suspended_job_clears_its_start_time_first() -> None:
    patches = job_patches(job(suspend=True, start=True), job(suspend=False))
    assert [sub for sub, _ in patches] == ["status", ""]
