"""The scheduler's block of a finished job, derived from the reconciler's conditions (pure).

Contract (no I/O, no clock): the scheduler block at ``plugin.scheduling_path`` has one writer,
the scheduler, so the end of a job is written there by the scheduler too, from what the kind
reconciler (the one writer of the conditions at ``plugin.exec_path``) recorded:

- :func:`terminal_fields` is ``None`` while the job has no True ``Succeeded``/``Failed``/
  ``Complete`` condition and does not show the invalid-spec condition
  (``lattice.frameworks.refusals.invalid_of``). Otherwise it is the fields to persist: ``stage``
  ``Wrong`` while the job shows that condition (the reconciler could not parse or build the
  job; not terminal: the job is judged again when its spec changes, and a job whose stage is
  ``Wrong`` without it is scheduled again, ``snapshot.is_finished``), or when the terminal
  condition is a ``Failed`` with a reason ending in ``FailedValidation`` (what earlier
  versions wrote), with ``reason`` ``InvalidSpec`` and the condition's message; ``Failed`` when
  it is a ``Failed`` with reason ``RequeueLimitExceeded`` (the stage the scheduler set, kept),
  with that reason, the condition's message and the completion time below; else
  ``Completed``, with ``completionTime`` the exec block's
  ``completionTime`` (else the condition's ``lastTransitionTime``). ``currentSize`` is 0 and
  ``placement`` null (removed) in both: a finished job holds nothing.
- :func:`terminal_pending` tells whether the persisted block still lacks any of those values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice.frameworks.base import JobPlugin
from lattice.frameworks.refusals import FAILED_VALIDATION, invalid_of
from lattice.primitives.paths import get_path
from lattice.scheduler.core import REQUEUE_LIMIT_EXCEEDED, Stage
from lattice.scheduler.loop.snapshot import TERMINAL_CONDITIONS

__all__ = ["INVALID_SPEC", "terminal_fields", "terminal_pending"]

#: ``reason`` of the scheduler block of a job its reconciler found invalid.
INVALID_SPEC = "InvalidSpec"


def terminal_fields(obj: Mapping[str, Any], plugin: JobPlugin[Any]) -> dict[str, Any] | None:
    """The scheduler fields of a finished job (see the module contract), or ``None``."""
    block = get_path(obj, plugin.exec_path)
    invalid = invalid_of(block)
    if invalid is not None:
        return _wrong(invalid)
    conditions = block.get("conditions")
    if not isinstance(conditions, list):
        return None
    done = [
        c
        for c in conditions
        if isinstance(c, Mapping)
        and c.get("type") in TERMINAL_CONDITIONS
        and c.get("status") == "True"
    ]
    if not done:
        return None
    wrong = next(
        (c for c in done if c.get("type") == "Failed" and _is_validation(c.get("reason"))), None
    )
    if wrong is not None:
        return _wrong(wrong)
    completion = block.get("completionTime") or done[0].get("lastTransitionTime")
    limit = next(
        (
            c
            for c in done
            if c.get("type") == "Failed" and c.get("reason") == REQUEUE_LIMIT_EXCEEDED
        ),
        None,
    )
    if limit is not None:
        return {
            "stage": str(Stage.FAILED),
            "currentSize": 0,
            "placement": None,
            "reason": REQUEUE_LIMIT_EXCEEDED,
            "message": str(limit.get("message") or ""),
            "completionTime": completion if isinstance(completion, str) else None,
        }
    return {
        "stage": str(Stage.COMPLETED),
        "currentSize": 0,
        "placement": None,
        "completionTime": completion if isinstance(completion, str) else None,
    }


def _wrong(condition: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "stage": str(Stage.WRONG),
        "currentSize": 0,
        "placement": None,
        "reason": INVALID_SPEC,
        "message": str(condition.get("message") or ""),
    }


def terminal_pending(block: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    """Whether the persisted scheduler ``block`` differs from the terminal ``fields``
    (a ``None`` field is satisfied by an absent or null value)."""
    return any(block.get(key) != value for key, value in fields.items())


def _is_validation(reason: object) -> bool:
    return isinstance(reason, str) and reason.endswith(FAILED_VALIDATION)
