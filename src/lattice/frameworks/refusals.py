"""The child-creation refusal condition: the one shape the reconciler writes and the scheduler
and ``kubectl lattice`` read (pure).

Contract (no I/O, no clock):
- When the apiserver refuses to create a child of a job (403 from admission: a missing
  PriorityClass or ServiceAccount, an exceeded ResourceQuota; 409: the name is taken by an
  object another job, or no one, controls), the reconciler sets the job's ``Created`` condition
  to ``False`` with reason :data:`CHILD_CREATE_REFUSED` and the apiserver's message. Its
  ``lastTransitionTime`` is when the refusal began; it turns ``True`` again (reason
  ``<Kind>Created``) at the first reconcile whose creates are all accepted, or that holds no
  pods.
- :func:`refusal_of` reads that condition from a job's exec-status block (the stored shape of
  any kind: Kubeflow ``JobCondition`` or TrainJob's ``metav1.Condition``, both camelCase):
  ``None`` unless it is present, ``False`` and of that reason.
- The operator refuses a job's spec the same way: a job it judges invalid (its plugin's parse
  raises ``InvalidJob``, its children cannot be built, or the apiserver refused one as
  malformed) shows ``Created=False`` with reason ``<Kind>FailedValidation`` (ending in
  :data:`FAILED_VALIDATION`) and a message naming each field and rule. It is not terminal:
  the job holds nothing while it shows it (the scheduler writes its stage ``Wrong``), and it is
  judged again when its spec changes. :func:`invalid_of` reads it (``None`` unless present,
  ``False`` and of such a reason).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice.primitives.times import parse_opt_time

__all__ = [
    "CHILD_CREATE_REFUSED",
    "FAILED_VALIDATION",
    "NAME_CLASH",
    "Refusal",
    "invalid_of",
    "refusal_of",
]

#: Reason of ``Created=False`` while the apiserver refuses a child of the job.
CHILD_CREATE_REFUSED = "ChildCreateRefused"
#: The suffix of the reason (``<Kind>FailedValidation``) of ``Created=False`` on an invalid job.
FAILED_VALIDATION = "FailedValidation"
#: Reason of the Warning event recorded on the *other* owner of a child name both jobs want.
NAME_CLASH = "ChildNameClash"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refusal in force: since when, and the apiserver's message."""

    since: datetime
    message: str


def refusal_of(block: Mapping[str, Any]) -> Refusal | None:
    """The refusal recorded in exec-status ``block`` (see the module contract), or ``None``."""
    for cond in block.get("conditions") or ():
        if not isinstance(cond, Mapping) or cond.get("type") != "Created":
            continue
        if cond.get("status") != "False" or cond.get("reason") != CHILD_CREATE_REFUSED:
            return None
        since = parse_opt_time(cond.get("lastTransitionTime")) or parse_opt_time(
            cond.get("lastUpdateTime")
        )
        if since is None:
            return None
        return Refusal(since=since, message=str(cond.get("message") or ""))
    return None


def invalid_of(block: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The invalid-spec condition of exec-status ``block`` (module contract), or ``None``."""
    for cond in block.get("conditions") or ():
        if not isinstance(cond, Mapping) or cond.get("type") != "Created":
            continue
        reason = cond.get("reason")
        if cond.get("status") == "False" and isinstance(reason, str):
            return cond if reason.endswith(FAILED_VALIDATION) else None
        return None
    return None
