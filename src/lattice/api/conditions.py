"""Condition-update semantics, as pure functions over condition lists.

Contract (Kubeflow, training-operator ``pkg/util/status.go``), for ``set_condition``:

1. Once any condition ``Failed=True`` exists, nothing changes any more (Failed is sticky).
2. If a condition of that type exists with the same status *and* reason, nothing changes (not
   even the message or lastUpdateTime).
3. If it exists with the same status (reason differs), its ``lastTransitionTime`` is kept.
4. The condition is removed and re-appended at the end, so the last element is the most recent
   change (``.status.conditions[-1:].type`` is the State printer column).
5. Running and Restarting exclude each other: setting one removes the other.
6. Setting Succeeded or Failed flips an existing Running condition to status False (its other
   fields, including lastTransitionTime, are kept, as upstream does).

``set_status_condition`` is ``meta.SetStatusCondition`` for ``metav1.Condition`` lists (TrainJob):
upsert by type, ``lastTransitionTime`` changes only when the status does.

Inputs are never mutated; the functions return new lists. Time is an argument (no clock here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from lattice.api.common import ConditionStatus, JobCondition, JobConditionType
from lattice.api.trainjob import Condition
from lattice.primitives.times import normalize_time

__all__ = [
    "get_condition",
    "has_condition",
    "is_failed",
    "is_finished",
    "is_running",
    "is_succeeded",
    "is_suspended",
    "new_reason",
    "parse_conditions",
    "set_condition",
    "set_status_condition",
]


M = TypeVar("M", bound=BaseModel)


def parse_conditions(model: type[M], block: Mapping[str, Any]) -> list[M]:
    """``block["conditions"]`` parsed as ``model`` values; entries that do not parse are skipped."""
    out: list[M] = []
    for raw in block.get("conditions") or ():
        try:
            out.append(model.model_validate(raw))
        except ValueError:
            continue
    return out


def new_reason(kind: str, reason: str) -> str:
    """Kubeflow's kind-prefixed reason: ``new_reason("MPIJob", "Running")`` is ``MPIJobRunning``."""
    return f"{kind}{reason}"


def get_condition(conditions: Sequence[JobCondition], type: str) -> JobCondition | None:
    """The condition of ``type``, or None."""
    for condition in conditions:
        if condition.type == type:
            return condition
    return None


def has_condition(conditions: Sequence[JobCondition], type: str) -> bool:
    """Whether a condition of ``type`` is True."""
    condition = get_condition(conditions, type)
    return condition is not None and condition.status == ConditionStatus.TRUE


def is_succeeded(conditions: Sequence[JobCondition]) -> bool:
    """Succeeded=True."""
    return has_condition(conditions, JobConditionType.SUCCEEDED)


def is_failed(conditions: Sequence[JobCondition]) -> bool:
    """Failed=True."""
    return has_condition(conditions, JobConditionType.FAILED)


def is_finished(conditions: Sequence[JobCondition]) -> bool:
    """Succeeded=True or Failed=True."""
    return is_succeeded(conditions) or is_failed(conditions)


def is_running(conditions: Sequence[JobCondition]) -> bool:
    """Running=True."""
    return has_condition(conditions, JobConditionType.RUNNING)


def is_suspended(conditions: Sequence[JobCondition]) -> bool:
    """Suspended=True."""
    return has_condition(conditions, JobConditionType.SUSPENDED)


_EXCLUSIVE = {
    JobConditionType.RUNNING.value: JobConditionType.RESTARTING.value,
    JobConditionType.RESTARTING.value: JobConditionType.RUNNING.value,
}
_TERMINAL = frozenset({JobConditionType.SUCCEEDED.value, JobConditionType.FAILED.value})


def set_condition(
    conditions: Sequence[JobCondition],
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
) -> list[JobCondition]:
    """Return ``conditions`` with the condition applied (rules in the module docstring).

    When nothing changes the result equals the input (compare with ``==`` to skip a status write).
    """
    if is_failed(conditions):
        return list(conditions)
    current = get_condition(conditions, type)
    if current is not None and current.status == status and current.reason == reason:
        return list(conditions)

    stamp = normalize_time(now)
    transition = stamp
    if current is not None and current.status == status and current.last_transition_time:
        transition = current.last_transition_time
    updated = JobCondition(
        type=type,
        status=status,
        reason=reason,
        message=message,
        last_update_time=stamp,
        last_transition_time=transition,
    )

    kept: list[JobCondition] = []
    for condition in conditions:
        if condition.type == type or condition.type == _EXCLUSIVE.get(type):
            continue
        if type in _TERMINAL and condition.type == JobConditionType.RUNNING:
            kept.append(condition.model_copy(update={"status": ConditionStatus.FALSE}))
        else:
            kept.append(condition)
    return [*kept, updated]


def set_status_condition(
    conditions: Sequence[Condition],
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None = None,
) -> list[Condition]:
    """``meta.SetStatusCondition``: upsert by type, keeping position and, if the status is
    unchanged, ``lastTransitionTime``."""
    result = list(conditions)
    for index, condition in enumerate(result):
        if condition.type != type:
            continue
        transition = (
            condition.last_transition_time if condition.status == status else normalize_time(now)
        )
        result[index] = condition.model_copy(
            update={
                "status": status,
                "reason": reason,
                "message": message,
                "last_transition_time": transition,
                "observed_generation": observed_generation
                if observed_generation is not None
                else condition.observed_generation,
            }
        )
        return result
    result.append(
        Condition(
            type=type,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=normalize_time(now),
            observed_generation=observed_generation,
        )
    )
    return result
