"""The strict settled check (tests/support/settled.py) on hand-built objects: a stage is not
enough; ``Running`` needs its pods, ``Wrong`` and ``Waiting`` need a reason."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.settled import NamespaceState, verdict


def _pod(name: str, owner: str) -> dict[str, Any]:
    refs = [{"controller": True, "uid": owner}]
    return {"metadata": {"name": name, "uid": f"pod-{name}", "ownerReferences": refs}}


def _tj(status: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "TrainingJob", "metadata": {"name": "a", "uid": "u1"}, "status": status}


def _mpi(lattice: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {
        "kind": "MPIJob",
        "metadata": {"name": "m", "uid": "u2"},
        "status": {"lattice": lattice, **status},
    }


PLACED = {"a-worker-0": "n1", "a-worker-1": "n2"}
FAILED_VALIDATION = {"type": "Failed", "status": "True", "reason": "X", "message": "spec.y: bad"}
JUDGED_INVALID = {
    "type": "Created",
    "status": "False",
    "reason": "MPIJobFailedValidation",
    "message": "invalid MPIJob: spec.y: bad",
}


@pytest.mark.parametrize(
    ("job", "pods", "outcome"),
    [
        # the case: Running, capacity held, no pod at all
        (_tj({"stage": "Running", "currentSize": 2, "placement": PLACED}), [], None),
        (_tj({"stage": "Running", "currentSize": 2, "placement": PLACED}), ["a-worker-0"], None),
        (
            _tj({"stage": "Running", "currentSize": 2, "placement": PLACED}),
            ["a-worker-0", "a-worker-1"],
            "running",
        ),
        (_tj({"stage": "Running", "currentSize": 0}), [], None),
        (_tj({"stage": "Running", "currentSize": 1}), ["a-worker-0"], "running"),
        (_tj({"stage": "Running", "currentSize": 2}), ["a-worker-0"], None),
        (_tj({"stage": "Wrong"}), [], None),
        (_tj({"stage": "Wrong", "reason": "InvalidSpec", "message": "spec.x: bad"}), [], "failed"),
        (_tj({"stage": "Waiting"}), [], None),
        (_tj({"stage": "Waiting", "lastDecision": "no node has 9 GPUs"}), [], "waiting"),
        (_tj({"stage": "Waiting", "lastDecision": "x"}), ["a-worker-0"], None),
        (_tj({}), [], None),
        (_tj({"stage": "Completed"}), [], None),
        (_tj({"execStatus": {"conditions": [FAILED_VALIDATION]}}), [], "failed"),
        (_mpi({"stage": "Running", "currentSize": 3}), [], None),
        (_mpi({}, conditions=[FAILED_VALIDATION]), [], "failed"),
        (
            _mpi({}, conditions=[{"type": "Created", "status": "False", "reason": "NotFound"}]),
            [],
            "waiting",
        ),
        (_mpi({}, conditions=[JUDGED_INVALID]), [], None),
        (
            _mpi({"stage": "Wrong", "reason": "R", "message": "m"}, conditions=[JUDGED_INVALID]),
            [],
            "failed",
        ),
        (
            _mpi(
                {"stage": "Completed"},
                conditions=[{"type": "Succeeded", "status": "True", "reason": "S"}],
            ),
            [],
            "succeeded",
        ),
    ],
)
def test_verdict(job: dict[str, Any], pods: list[str], outcome: str | None) -> None:
    owner = job["metadata"]["uid"]
    state = NamespaceState(pods=[_pod(p, owner) for p in pods])
    seen = verdict(job, state)
    assert seen.outcome == outcome, seen
    assert seen.settled is (outcome is not None)


def test_a_placed_child_that_is_a_batch_job_counts_through_its_pod() -> None:
    job = _mpi({"stage": "Running", "currentSize": 1, "placement": {"m-launcher": "n1"}})
    batch = {"metadata": {"name": "m-launcher", "uid": "j1", "ownerReferences": []}}
    assert verdict(job, NamespaceState(batch_jobs=[batch])).outcome is None
    state = NamespaceState(pods=[_pod("m-launcher-x1", "j1")], batch_jobs=[batch])
    assert verdict(job, state).outcome == "running"
