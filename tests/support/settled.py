"""The strict settled-state check of a job, as a user sees it with kubectl (issue 26).

Contract: :func:`verdict` reads one job object (any kind: TrainingJob keeps the scheduler's
block at ``status`` and the Kubeflow conditions at ``status.execStatus``; MPIJob, MXJob and
TrainJob keep the block at ``status.lattice`` and the conditions at ``status``) together with the
live pods and batch Jobs of its namespace, and says whether the job has *settled*, that is,
whether it may stay as it is forever without anyone being misled:

- ``failed``: a ``Failed=True`` condition with a reason and a message, or stage ``Wrong`` with
  both; the message is what names the field;
- ``succeeded``: stage ``Completed`` with ``Succeeded``/``Complete`` True;
- ``waiting``: stage ``Waiting`` (or ``RequeueCooldown``) with a non-empty ``reason``,
  ``message`` or ``lastDecision`` (the scheduler's word on why it waits), holding no pod; or
  a job the reconciler holds back (``Created=False`` or ``Suspended=True`` with a reason),
  except an invalid one (``Created=False`` with a ``...FailedValidation`` reason): it settles
  only as ``failed``, once the scheduler has marked it ``Wrong``;
- ``running``: stage ``Running`` with ``currentSize`` > 0 and every child the placement names
  alive (a pod of that name, or a batch Job of that name with a live pod); without a persisted
  placement, at least ``currentSize`` live pods owned by the job.

Everything else is unsettled (``outcome`` None) with ``detail`` saying why: ``Running`` with 0
pods, ``Wrong`` with no reason, a stage that was never written. Pure: callers pass the objects
(:func:`namespace_state` reads them with one ``kubectl get`` per type).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lattice.frameworks.refusals import FAILED_VALIDATION
from tests.support.cluster import Cluster

__all__ = ["NamespaceState", "Verdict", "namespace_state", "unsettled", "verdict"]

Obj = Mapping[str, Any]

FAILED, SUCCEEDED, WAITING, RUNNING = "failed", "succeeded", "waiting", "running"


@dataclass(frozen=True)
class Verdict:
    """``outcome`` is one of failed/succeeded/waiting/running, or None when unsettled."""

    kind: str
    name: str
    outcome: str | None
    detail: str

    @property
    def settled(self) -> bool:
        return self.outcome is not None

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}: {self.outcome or 'UNSETTLED'} ({self.detail})"


@dataclass(frozen=True)
class NamespaceState:
    """The live (not deleting) pods and the batch Jobs of one namespace."""

    pods: Sequence[Obj] = ()
    batch_jobs: Sequence[Obj] = ()
    _by_name: dict[str, Obj] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({p["metadata"]["name"]: p for p in self.pods})

    def pod(self, name: str) -> Obj | None:
        return self._by_name.get(name)

    def owned_by(self, uid: str) -> list[Obj]:
        """Live pods whose controller is ``uid``, directly or through a batch Job it owns."""
        jobs = {j["metadata"]["uid"] for j in self.batch_jobs if _controller(j) == uid}
        return [p for p in self.pods if _controller(p) == uid or _controller(p) in jobs]

    def job_pods(self, batch_job: str) -> list[Obj]:
        uids = {j["metadata"]["uid"] for j in self.batch_jobs if j["metadata"]["name"] == batch_job}
        return [p for p in self.pods if _controller(p) in uids]


def _controller(obj: Obj) -> str:
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller") is True:
            return str(ref.get("uid", ""))
    return ""


def namespace_state(cluster: Cluster, namespace: str) -> NamespaceState:
    pods = [
        p
        for p in cluster.get_json("pods", "-n", namespace)["items"]
        if not p["metadata"].get("deletionTimestamp")
    ]
    jobs = cluster.get_json("jobs.batch", "-n", namespace)["items"]
    return NamespaceState(pods=pods, batch_jobs=jobs)


def _blocks(job: Obj) -> tuple[Obj, Obj]:
    """(scheduler block, block holding the conditions) of ``job``."""
    status = job.get("status") or {}
    if job.get("kind") == "TrainingJob":
        return status, status.get("execStatus") or {}
    return status.get("lattice") or {}, status


def _conditions(block: Obj) -> dict[str, Obj]:
    out: dict[str, Obj] = {}
    for c in block.get("conditions") or ():
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            out[c["type"]] = c
    return out


def _said(c: Obj) -> str:
    return f"{c.get('reason') or ''}: {c.get('message') or ''}"


def verdict(job: Obj, state: NamespaceState) -> Verdict:
    """The strict settled state of ``job`` (module contract)."""
    kind, meta = str(job.get("kind", "")), job.get("metadata") or {}
    name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
    sched, execb = _blocks(job)
    conds = _conditions(execb)
    stage = str(sched.get("stage") or "")
    size = int(sched.get("currentSize") or 0)
    reason, message = str(sched.get("reason") or ""), str(sched.get("message") or "")
    owned = state.owned_by(uid)

    def out(outcome: str | None, detail: str) -> Verdict:
        return Verdict(kind, name, outcome, detail)

    failed = conds.get("Failed")
    if failed and failed.get("status") == "True":
        if failed.get("reason") and failed.get("message"):
            return out(FAILED, _said(failed))
        return out(None, f"Failed=True without a reason or message: {_said(failed)}")
    if stage == "Wrong":
        if reason and message:
            return out(FAILED, f"{reason}: {message}")
        return out(None, f"stage Wrong with reason {reason!r} and message {message!r}")
    if stage == "Completed":
        done = [conds.get(t) for t in ("Succeeded", "Complete")]
        if any(c and c.get("status") == "True" for c in done):
            return out(SUCCEEDED, "Completed")
        return out(None, "stage Completed with no Succeeded/Complete/Failed condition")
    if stage == "Running":
        return _running(out, sched, size, owned, state)
    if stage in ("Waiting", "RequeueCooldown"):
        if owned:
            return out(None, f"stage {stage} but {len(owned)} live pod(s)")
        decision = str(sched.get("lastDecision") or "")
        if reason or message or decision:
            return out(WAITING, f"{stage} {reason}: {message} (last decision: {decision})")
        return out(None, f"stage {stage} without a reason")
    created = conds.get("Created")
    if created and str(created.get("reason") or "").endswith(FAILED_VALIDATION):
        return out(None, f"Created=False {_said(created)}, stage {stage!r} not yet Wrong")
    for held in ("Created", "Suspended"):
        c = conds.get(held)
        want = "False" if held == "Created" else "True"
        if c and c.get("status") == want and c.get("reason") and not owned:
            return out(WAITING, f"{held}={want} {_said(c)}")
    return out(None, f"stage {stage!r}, currentSize {size}, {len(owned)} live pod(s)")


def _running(
    out: Callable[[str | None, str], Verdict],
    sched: Obj,
    size: int,
    owned: Sequence[Obj],
    state: NamespaceState,
) -> Verdict:
    if size <= 0:
        return out(None, f"stage Running with currentSize {size} ({len(owned)} live pods)")
    placement = sched.get("placement") or {}
    if placement:
        missing = [c for c in placement if not _alive_child(c, state)]
        if missing:
            return out(None, f"Running, size {size}, placed children missing: {sorted(missing)}")
        return out(RUNNING, f"Running, size {size}, {len(placement)} placed children alive")
    if len(owned) < size:
        return out(None, f"Running, size {size}, only {len(owned)} live pods")
    return out(RUNNING, f"Running, size {size}, {len(owned)} live pods")


def _alive_child(child: str, state: NamespaceState) -> bool:
    return state.pod(child) is not None or bool(state.job_pods(child))


def unsettled(jobs: Iterable[Obj], state: NamespaceState) -> list[Verdict]:
    """The verdicts of ``jobs`` that are not settled."""
    return [v for v in (verdict(j, state) for j in jobs) if not v.settled]
