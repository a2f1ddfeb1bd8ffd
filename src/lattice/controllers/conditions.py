"""The Kubeflow conditions a reconcile sets on its working ``Step``, and the events and counters
that go with them (recorded only after the status write that carries them).

Contract: each function edits ``step.exec``/``step.sched`` and appends to ``step.events`` and
``step.counters``; none reads a cache or writes. Reasons are ``<Kind><Condition>``; messages come
from the plugin's :class:`Messages`.

- ``mark_invalid``: ``Created=False`` with reason ``<Kind>FailedValidation`` and the problems
  (each field and rule) in the message, ``Running=False`` likewise when it was True, and
  ``startTime`` cleared; a Warning event when the condition changed. Not terminal
  (``lattice.frameworks.refusals.invalid_of``): the scheduler writes stage ``Wrong`` (reason
  ``InvalidSpec``) from it while it lasts, and ``mark_created`` replaces it once the job is
  valid again.
- ``mark_not_ready``: ``Created=False`` with the exception's reason and message; a Warning
  event only when that condition changed.
- ``mark_created``: ``Created=True`` once (an event when the kind words one); not while the
  condition shows a refusal (``child_refusals`` turns it back).
- ``child_refusals``: after a reconcile's creates, ``Created=False`` with reason
  ``ChildCreateRefused`` and the apiserver's messages while any create was refused (a Warning
  event when it turns so), ``Created=True`` (``<Kind>Created``) again once none is
  (``lattice.frameworks.refusals``: the scheduler requeues a job refused for too long).
- ``mark_finished``: ``Failed`` or ``Succeeded``, preceded, for a kind that words it, by
  ``Running=False`` on a job never Running.
- ``mark_requeue_limit``: the scheduler's stage ``Failed`` (its requeue limit) as ``Failed=True``
  with the scheduler block's reason and message, ``completionTime``, and a Warning event.
- ``mark_restarting``: ``Restarting=True`` and an ``ExitedWithCode`` event per recreated pod
  the kind words.
- ``mark_running``: ``Running=True`` (an event when it turns True and the kind words one).
- ``suspension``: the user's ``suspend``: ``Suspended=True`` and ``Running=False`` with reason
  ``<Kind>Suspended`` (``startTime`` cleared), and ``Suspended=False``/``<Kind>Resumed`` after.
- ``preemption``: a started job the scheduler stopped shows ``Suspended=True``/``Preempted``
  (kinds whose ``preempted_condition`` is ``Suspended``; set after ``Running=False``/
  ``<Kind>Waiting``, so the State column, the last condition, never shows Running);
  ``Suspended=False``/``<Kind>Resumed`` once it holds replicas again.
"""

from __future__ import annotations

from collections.abc import Sequence

from lattice.controllers.jobstatus import PREEMPTED, Step, condition_reason, condition_true
from lattice.frameworks.base import InvalidJob, JobNotReady, Messages, PodView
from lattice.frameworks.refusals import CHILD_CREATE_REFUSED, FAILED_VALIDATION
from lattice.primitives.times import format_time
from lattice.scheduler.core import REQUEUE_LIMIT_EXCEEDED

__all__ = [
    "CREATED",
    "FAILED",
    "RESTARTED",
    "SUCCESSFUL",
    "child_refusals",
    "mark_created",
    "mark_finished",
    "mark_invalid",
    "mark_not_ready",
    "mark_requeue_limit",
    "mark_restarting",
    "mark_running",
    "preemption",
    "suspension",
]

#: What a reconcile counts (``Step.counters``), mapped to metric families by ``lattice
#: .controllers.write``.
CREATED, SUCCESSFUL, FAILED, RESTARTED = "created", "successful", "failed", "restarted"


def mark_invalid(step: Step, kind: str, exc: InvalidJob) -> None:
    reason, message = f"{kind}{FAILED_VALIDATION}", f"invalid {kind}: {exc}"
    if condition_true(step.exec, "Running"):
        step.condition("Running", False, reason, message)
    step.exec.pop("startTime", None)
    _not_created(step, reason, message)


def mark_not_ready(step: Step, exc: JobNotReady) -> None:
    _not_created(step, exc.reason, exc.message)


def _not_created(step: Step, reason: str, message: str) -> None:
    """``Created=False`` for ``reason``; a Warning event when the condition changed."""
    before = [c for c in step.exec.get("conditions") or () if c.get("type") == "Created"]
    step.condition("Created", False, reason, message)
    after = [c for c in step.exec.get("conditions") or () if c.get("type") == "Created"]
    changed = [(c.get("status"), c.get("reason"), c.get("message")) for c in before] != [
        (c.get("status"), c.get("reason"), c.get("message")) for c in after
    ]
    if changed:
        step.events.append(("Warning", reason, message))


def mark_created(step: Step, words: Messages) -> None:
    if condition_true(step.exec, "Created") or _refused(step):
        return
    kind, ns, name = words.kind, step.ref.namespace, step.ref.name
    msg = words.created(ns, name)
    step.condition("Created", True, f"{kind}Created", msg)
    if words.created_event:
        step.events.append(("Normal", f"{kind}Created", msg))
    step.counters.append(CREATED)


def _refused(step: Step) -> bool:
    return condition_reason(step.exec, "Created") == CHILD_CREATE_REFUSED and not condition_true(
        step.exec, "Created"
    )


#: How many refused creates a ``ChildCreateRefused`` message quotes.
_QUOTED = 3


def child_refusals(step: Step, words: Messages, refused: Sequence[str]) -> None:
    """Show this reconcile's refused creates, or that there are none any more."""
    was = _refused(step)
    if refused:
        more = f" (+{len(refused) - _QUOTED} more)" if len(refused) > _QUOTED else ""
        message = "the apiserver refused to create " + "; ".join(refused[:_QUOTED]) + more
        if not was:
            step.condition("Created", False, CHILD_CREATE_REFUSED, message)
            step.events.append(("Warning", CHILD_CREATE_REFUSED, message))
        else:  # still refused, maybe for another cause: the refusal keeps its start time
            step.exec["conditions"] = [
                {**c, "message": message}
                if isinstance(c, dict) and c.get("type") == "Created"
                else c
                for c in step.exec.get("conditions") or ()
            ]
    elif was:
        kind, ns, name = words.kind, step.ref.namespace, step.ref.name
        step.condition("Created", True, f"{kind}Created", words.created(ns, name))


def mark_finished(step: Step, words: Messages, *, failed: str | None, reason: str) -> None:
    """``Failed`` (``failed`` is the message) or, when ``failed`` is None, ``Succeeded``."""
    kind, ns, name = words.kind, step.ref.namespace, step.ref.name
    never = words.never_running(ns, name)
    if never is not None and not any(
        c.get("type") == "Running" for c in step.exec.get("conditions") or ()
    ):
        step.condition("Running", False, f"{kind}Running", never)
    if failed is not None:
        step.condition("Failed", True, reason, failed)
        step.events.append((words.failed_event_type, reason, failed))
        step.counters.append(FAILED)
    else:
        msg = words.succeeded(ns, name)
        step.condition("Succeeded", True, f"{kind}Succeeded", msg)
        step.events.append(("Normal", f"{kind}Succeeded", msg))
        step.counters.append(SUCCESSFUL)


def mark_requeue_limit(step: Step, words: Messages) -> None:
    """The scheduler failed the job for its requeue limit (its stage ``Failed``): ``Failed``
    with the scheduler block's reason (``RequeueLimitExceeded``) and message, ``Running=False``
    on a job never Running, and a Warning event, whatever the kind's failure event type."""
    if condition_true(step.exec, "Failed"):
        return
    kind = words.kind
    reason = str(step.sched.get("reason") or REQUEUE_LIMIT_EXCEEDED)
    message = str(step.sched.get("message") or step.sched.get("lastDecision") or reason)
    if not any(c.get("type") == "Running" for c in step.exec.get("conditions") or ()):
        step.condition("Running", False, f"{kind}Running", message)
    step.condition("Failed", True, reason, message)
    step.events.append(("Warning", reason, message))
    step.counters.append(FAILED)
    step.exec.setdefault("completionTime", format_time(step.now))


def mark_restarting(step: Step, words: Messages, recreated: Sequence[PodView]) -> None:
    kind, ns, name = words.kind, step.ref.namespace, step.ref.name
    for pod in recreated:
        note = words.exited(ns, pod)
        if note is not None:
            step.events.append(("Normal", "ExitedWithCode", note))
    msg = words.restarting(ns, name, recreated)
    step.condition("Restarting", True, f"{kind}Restarting", msg)
    step.events.append(("Warning", f"{kind}Restarting", msg))
    step.counters.append(RESTARTED)


def mark_running(step: Step, words: Messages) -> None:
    kind, ns, name = words.kind, step.ref.namespace, step.ref.name
    was_running = condition_true(step.exec, "Running")
    step.condition("Running", True, f"{kind}Running", words.running(ns, name))
    note = words.running_event(ns, name)
    if note is not None and not was_running:
        step.events.append(("Normal", f"{kind}Running", note))


def suspension(step: Step, words: Messages, *, suspended: bool) -> None:
    kind, ns, name = words.kind, step.ref.namespace, step.ref.name
    user_suspended = condition_reason(step.exec, "Suspended") == f"{kind}Suspended"
    if suspended and not user_suspended:
        msg = words.suspended(ns, name)
        if condition_true(step.exec, "Running"):
            running = words.suspended_running(ns, name)
            step.condition("Running", False, f"{kind}Suspended", running)
        step.condition("Suspended", True, f"{kind}Suspended", msg)
        step.exec.pop("startTime", None)
        step.events.append(("Normal", f"{kind}Suspended", msg))
    elif not suspended and user_suspended and condition_true(step.exec, "Suspended"):
        msg = words.resumed(ns, name)
        step.condition("Suspended", False, f"{kind}Resumed", msg)
        step.events.append(("Normal", f"{kind}Resumed", msg))


def preemption(
    step: Step, *, kind: str, shows: str, size: int, suspended: bool, had_pods: bool
) -> None:
    """Show that the scheduler stopped (or resumed) a job that had started: one whose Running
    condition is True, or one moved to Waiting while its ``startTime`` (set with its pods) was
    still stored. A job released for pods pending too long goes to RequeueCooldown instead, and
    is not shown as preempted. ``shows`` is the plugin's ``preempted_condition``."""
    ref = step.ref
    preempted = condition_reason(step.exec, "Suspended") == PREEMPTED
    started = condition_true(step.exec, "Running") or (
        had_pods and step.sched.get("stage") == "Waiting"
    )
    if size == 0 and not suspended and started:
        msg = f"{kind} {ref.namespace}/{ref.name} holds no replicas: waiting for the scheduler."
        # Suspended goes last: the State column shows the last condition changed.
        step.condition("Running", False, f"{kind}Waiting", msg)
        if shows == "Suspended":
            step.condition("Suspended", True, PREEMPTED, msg)
    elif size > 0 and preempted:
        msg = f"{kind} {ref.namespace}/{ref.name} is resumed by the scheduler."
        step.condition("Suspended", False, f"{kind}Resumed", msg)
