"""Pure helpers over a job's raw ``status``: paths, Kubeflow conditions, times, own writes.

Contract: nothing here does I/O or reads a clock. Functions take the raw object (a dict from the
cache) and return new values; inputs are never mutated (``with_path`` copies along the path).
Conditions follow ``lattice.api.conditions.set_condition`` (Kubeflow ``status.go`` rules) and
are serialised in the wire's camelCase.

Status ownership: the reconciler is the one writer of the block at ``plugin.exec_path`` (the
conditions, replica statuses, start and completion times; for the Kubeflow kinds all of
``status`` but ``status.lattice``), the scheduler of the block at ``plugin.scheduling_path``.
:func:`status_after` builds the reconciler's new ``status`` with the cached scheduler block left
as it was, so its merge patch never touches a scheduler field and needs no resourceVersion
precondition; a kind whose exec block is not ``status`` itself (TrainingJob's
``status.execStatus``) also gets a copy of its conditions at ``status.conditions``, where
``kubectl wait --for=condition=...`` reads them (the reconciler is their one writer too).
:class:`ReadBack` keeps what that precondition guarded: a reconcile never works from a version
older than the reconciler's own last write.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from lattice.api.common import ConditionStatus, JobCondition
from lattice.api.conditions import parse_conditions, set_condition
from lattice.frameworks.base import JobPlugin, PodView, Progress, RendersStatus
from lattice.frameworks.failures import is_disrupted
from lattice.primitives import paths
from lattice.primitives.objects import Obj
from lattice.runtime.events import ObjectRef

__all__ = [
    "PREEMPTED",
    "ReadBack",
    "Step",
    "charged_statuses",
    "condition_reason",
    "condition_true",
    "conditions_of",
    "controller_ref",
    "get_path",
    "put_condition",
    "reconcile_signature",
    "replica_statuses",
    "status_after",
    "with_nulls",
    "with_path",
]


def get_path(obj: Mapping[str, Any], path: Sequence[str]) -> Obj:
    """A copy of the dict at ``path`` (``{}`` where any step is missing or not a dict)."""
    return dict(paths.get_path(obj, path))


#: The scheduler's fields a reconcile acts on. The others (queue position, queued and requeue
#: times, attained service, last decision, ...) are the scheduler's bookkeeping: no reconcile
#: reads them, so a change to them alone needs no reconcile.
RECONCILED_SCHEDULING_FIELDS = ("stage", "currentSize", "completionTime", "placement")
_VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})


def reconcile_signature(obj: Mapping[str, Any], plugin: JobPlugin[Any]) -> tuple[Any, ...]:
    """What of a job object a reconcile depends on: metadata (but its resourceVersion and
    managedFields), spec, the status block the reconciler keeps (``exec_path``), and the
    scheduler's ``RECONCILED_SCHEDULING_FIELDS``. Two versions with equal signatures reconcile
    alike, so an update between them need not enqueue the job."""
    meta = obj.get("metadata") or {}
    sched_path, exec_path = tuple(plugin.scheduling_path), tuple(plugin.exec_path)
    own = get_path(obj, exec_path)
    if sched_path[: len(exec_path)] == exec_path and len(sched_path) > len(exec_path):
        own.pop(sched_path[len(exec_path)], None)  # the scheduling block nests in it (MPIJob)
    sched = get_path(obj, sched_path)
    return (
        {k: v for k, v in meta.items() if k not in _VOLATILE_METADATA},
        obj.get("spec"),
        own,
        tuple(sched.get(field) for field in RECONCILED_SCHEDULING_FIELDS),
    )


def with_path(status: Obj, path: Sequence[str], value: Obj) -> Obj:
    """A copy of ``status`` (the object's ``status`` dict) with the block at ``path`` replaced.

    ``path`` starts with ``"status"``; ``("status",)`` replaces the whole status.
    """
    if not path or path[0] != "status":
        raise ValueError(f"status path must start with 'status', got {path!r}")
    rest = path[1:]
    if not rest:
        return dict(value)
    out = dict(status)
    child = out.get(rest[0])
    out[rest[0]] = with_path(
        dict(child) if isinstance(child, Mapping) else {}, ("status", *rest[1:]), value
    )
    return out


def conditions_of(block: Mapping[str, Any]) -> list[JobCondition]:
    """The Kubeflow conditions of an exec-status block, parsed (bad entries are skipped)."""
    return parse_conditions(JobCondition, block)


def condition_true(block: Mapping[str, Any], type: str) -> bool:
    """Whether the block has a condition ``type`` with status True."""
    return any(
        c.get("type") == type and c.get("status") == "True"
        for c in block.get("conditions") or ()
        if isinstance(c, Mapping)
    )


def put_condition(
    block: Obj, *, type: str, status: bool, reason: str, message: str, now: datetime
) -> Obj:
    """A copy of ``block`` with the condition set by Kubeflow's rules."""
    updated = set_condition(
        conditions_of(block),
        type=type,
        status=ConditionStatus.TRUE if status else ConditionStatus.FALSE,
        reason=reason,
        message=message,
        now=now,
    )
    out = copy.copy(block)
    out["conditions"] = [
        c.model_dump(by_alias=True, exclude_none=True, mode="json") for c in updated
    ]
    return out


class Step:
    """The mutable working copy of one reconcile: new status blocks, events, counters."""

    def __init__(self, obj: Obj, plugin: JobPlugin[Any], now: datetime, ref: ObjectRef) -> None:
        self.now = now
        self.ref = ref
        #: The object the next status write is a diff against (replaced by each write).
        self.obj = obj
        self.sched = get_path(obj, plugin.scheduling_path)
        self.exec = get_path(obj, plugin.exec_path)
        if isinstance(plugin, RendersStatus):
            # The kind stores its own status shape: work on its Kubeflow reading.
            self.exec = plugin.read_status(self.exec)
        if plugin.exec_path == plugin.scheduling_path:
            raise ValueError("exec_path and scheduling_path must differ")
        self.events: list[tuple[str, str, str]] = []
        #: What to count once the status is written ("created", "failed", ...).
        self.counters: list[str] = []
        #: Child creates/deletes that failed: the reconcile raises after writing the status, so
        #: the key is retried (a failed create is never observed, nothing else would re-enqueue).
        self.errors: list[str] = []
        #: Creates the apiserver refused as malformed: the job becomes Wrong.
        self.rejected: list[str] = []
        #: Creates refused for a cause outside the manifest (403, 409 clash): the job shows
        #: ``ChildCreateRefused`` (``lattice.frameworks.refusals``) and is retried.
        self.refused: list[str] = []
        #: A create found the job's namespace being deleted: nothing is retried.
        self.gone = False
        self.finished = condition_true(self.exec, "Succeeded") or condition_true(
            self.exec, "Failed"
        )

    def absorb(self, outcome: Any) -> None:
        """Collect a ``SyncOutcome``'s failures (``errors`` retried, ``rejected`` Wrong,
        ``refused`` shown and retried, ``gone`` dropped)."""
        self.errors.extend(outcome.errors)
        self.rejected.extend(outcome.rejected)
        self.refused.extend(outcome.refused)
        self.gone = self.gone or outcome.gone

    def condition(self, type: str, status: bool, reason: str, message: str) -> None:
        self.exec = put_condition(
            self.exec, type=type, status=status, reason=reason, message=message, now=self.now
        )


def replica_statuses(progress: Progress) -> dict[str, Obj]:
    return {
        rtype: {"active": c.active, "succeeded": c.succeeded, "failed": c.failed}
        for rtype, c in sorted(progress.replicas.items())
    }


def charged_statuses(
    observed: Mapping[str, Obj], previous: object, recreated: Sequence[PodView]
) -> dict[str, Obj]:
    """``replicaStatuses`` whose ``failed`` counts every failure charged to the backoffLimit.

    ``observed`` is this reconcile's count (``replica_statuses``); ``previous`` the stored
    ``replicaStatuses``. For a kind that enforces a backoffLimit every observed Failed pod is
    recreated or ends the job (the plugin contract), so each failure is observed in exactly one
    reconcile and the stored ``failed`` is the sum of those before: the new count is
    ``previous.failed + observed.failed``, less the ``recreated`` pods that were disrupted (evicted
    or preempted by Kubernetes: never charged). Like a batch Job's ``status.failed`` it keeps
    counting pods that were replaced, and it is kept while the job holds no pods (suspended or
    preempted by the scheduler, which deletes pods and so never charges them).
    """
    before = previous if isinstance(previous, Mapping) else {}
    excused: dict[str, int] = {}
    types = {rtype.lower(): rtype for rtype in (*observed, *before)}
    for pod in recreated:
        if is_disrupted(pod):
            rtype = types.get((pod.replica_type or "").lower(), "")
            excused[rtype] = excused.get(rtype, 0) + 1
    out: dict[str, Obj] = {}
    for rtype in sorted({*observed, *before}):
        now = dict(observed.get(rtype) or {"active": 0, "succeeded": 0, "failed": 0})
        old = before.get(rtype)
        carried = old.get("failed") if isinstance(old, Mapping) else 0
        carried = carried if isinstance(carried, int) and carried > 0 else 0
        now["failed"] = max(0, carried + int(now.get("failed") or 0) - excused.get(rtype, 0))
        out[rtype] = now
    return out


PREEMPTED = "Preempted"


def condition_reason(block: Obj, type: str) -> str | None:
    for cond in block.get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == type:
            reason = cond.get("reason")
            return str(reason) if reason is not None else None
    return None


def with_nulls(old: object, new: object) -> dict[str, Any]:
    """A merge patch body for a string map: keys gone from ``new`` become null."""
    before = old if isinstance(old, dict) else {}
    after = new if isinstance(new, dict) else {}
    patch: dict[str, Any] = {k: None for k in before if k not in after}
    patch.update(after)
    return patch


def controller_ref(meta: Obj) -> Obj | None:
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def status_after(obj: Mapping[str, Any], plugin: JobPlugin[Any], exec_block: Obj) -> Obj:
    """``obj``'s ``status`` with the reconciler's block replaced by ``exec_block`` and the
    scheduler's block exactly as cached (restored after, when it nests in the exec block)."""
    old = obj.get("status") or {}
    new = dict(old) if isinstance(old, Mapping) else {}
    sched = get_path(obj, plugin.scheduling_path)
    # The shorter path first: Kubeflow kinds keep the scheduler block inside the exec one.
    for path, block in sorted(
        ((plugin.exec_path, exec_block), (plugin.scheduling_path, sched)),
        key=lambda pb: len(pb[0]),
    ):
        new = with_path(new, path, block)
    if tuple(plugin.exec_path) != ("status",):
        # Shown where kubectl wait --for=condition reads them (TrainingJob: status.conditions).
        conditions = exec_block.get("conditions")
        if conditions:
            new["conditions"] = copy.deepcopy(conditions)
        else:
            new.pop("conditions", None)
    return new


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class ReadBack:
    """Each job's last status write by this reconciler, read back until the cache shows it.

    :meth:`current` returns the cached object, or the object the last write returned while the
    cache still shows an older version: one whose reconciler block differs from the one written
    (the reconciler being its one writer, a cached version with a different block is older than
    the write, and everything in the written object is at least as new). A version with the
    same block, the written version itself, or a new uid ends the read-back.
    """

    def __init__(self, plugin: JobPlugin[Any]) -> None:
        self._plugin = plugin
        self._written: dict[str, Obj] = {}

    def _own(self, obj: Mapping[str, Any]) -> Obj:
        own = get_path(obj, self._plugin.exec_path)
        sched, exec_ = tuple(self._plugin.scheduling_path), tuple(self._plugin.exec_path)
        if sched[: len(exec_)] == exec_ and len(sched) > len(exec_):
            own.pop(sched[len(exec_)], None)  # the scheduling block nests in it
        return own

    def current(self, key: str, cached: Obj) -> Obj:
        """The object a reconcile of ``key`` works from."""
        written = self._written.get(key)
        if written is None:
            return cached
        uid = (cached.get("metadata") or {}).get("uid")
        if (
            uid != (written.get("metadata") or {}).get("uid")
            or _rv(cached) == _rv(written)
            or self._own(cached) == self._own(written)
        ):
            del self._written[key]
            return cached
        return written

    def wrote(self, key: str, written: Obj) -> None:
        """Remember the object a status write of ``key`` returned."""
        if _rv(written):
            self._written[key] = written

    def forget(self, key: str) -> None:
        self._written.pop(key, None)
