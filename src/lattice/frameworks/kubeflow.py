"""What the Kubeflow kinds share outside the ML policies: parsing with field-named problems,
the job's priority, and the ``runPolicy`` as the reconciler reads it.

Contract (pure):
- ``validated``: the model validated from the raw object, then the kind's operator-side rules;
  ``InvalidJob`` names every problem of the first stage that found any.
  ``validation_problems`` turns pydantic errors into :class:`Problem` values on camelCase paths.
- ``job_priority`` picks a job's priority: the first of the given PriorityClass names that
  ``ctx.priority_classes`` knows (an unknown name is skipped), else the integer annotation
  ``lattice.breezeml.ai/priority``, else ``ctx.default_priority``; ``priority_problems`` names an
  annotation that is not an integer within TrainingJob's ``spec.priority`` range
  ([-1e6, 1e9], the ceiling of user-defined PriorityClass values).
- ``run_policy_view``: a Kubeflow ``runPolicy`` as a :class:`RunPolicyView`.
- ``KubeflowStatus``: where the Kubeflow kinds (MPIJob, MXJob, TrainJob) keep their state: the
  upstream status at ``status`` and the scheduler's block at ``status.lattice``; a job the
  scheduler stopped shows ``Suspended=True`` (reason ``Preempted``), as Kubeflow kinds show an
  external stop.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from lattice.api.common import RunPolicy
from lattice.api.constants import ANNOTATION_PRIORITY
from lattice.api.trainingjob import MAX_PRIORITY, MIN_PRIORITY
from lattice.frameworks.base import InvalidJob, OperatorContext, Problem, RunPolicyView

ModelT = TypeVar("ModelT", bound=BaseModel)

__all__ = [
    "KubeflowStatus",
    "ignored_scheduling_fields",
    "job_priority",
    "priority_problems",
    "run_policy_view",
    "validated",
    "validation_problems",
]


_INTEGER = re.compile(r"^[+-]?\d+$")


def validated(
    model: type[ModelT],
    obj: Mapping[str, Any],
    rules: Callable[[ModelT], Sequence[Problem]],
) -> ModelT:
    """``model`` validated from ``obj``, then checked by the kind's operator-side ``rules``;
    ``InvalidJob`` names every problem of the first stage that found any."""
    try:
        job = model.model_validate(obj)
    except ValidationError as exc:
        raise InvalidJob(validation_problems(exc)) from None
    problems = rules(job)
    if problems:
        raise InvalidJob(problems)
    return job


def validation_problems(exc: ValidationError) -> list[Problem]:
    """Pydantic errors as problems on camelCase paths: ``spec.containers[0].name``."""
    problems = []
    for error in exc.errors(include_url=False):
        path = ""
        for part in error["loc"]:
            path += f"[{part}]" if isinstance(part, int) else ("." if path else "") + str(part)
        problems.append(Problem(path or "(object)", error["msg"]))
    return problems


def priority_problems(annotations: Mapping[str, str] | None) -> list[Problem]:
    """A problem when the ``lattice.breezeml.ai/priority`` annotation is not an integer in
    [MIN_PRIORITY, MAX_PRIORITY]."""
    value = (annotations or {}).get(ANNOTATION_PRIORITY)
    if value is None:
        return []
    where = f"metadata.annotations[{ANNOTATION_PRIORITY}]"
    if not _INTEGER.match(value.strip()):
        return [Problem(where, f"must be an integer, got {value!r}")]
    if not MIN_PRIORITY <= int(value.strip()) <= MAX_PRIORITY:
        why = f"must be between {MIN_PRIORITY} and {MAX_PRIORITY}, got {value.strip()}"
        return [Problem(where, why)]
    return []


def job_priority(
    *,
    classes: Iterable[str | None],
    annotations: Mapping[str, str] | None,
    ctx: OperatorContext,
) -> int:
    """The priority of a job: first known PriorityClass in ``classes``, annotation, default."""
    for name in classes:
        if name and name in ctx.priority_classes:
            return ctx.priority_classes[name]
    value = (annotations or {}).get(ANNOTATION_PRIORITY)
    if value is not None and _INTEGER.match(value.strip()):
        return int(value.strip())
    return ctx.default_priority


def run_policy_view(policy: RunPolicy, *, service_cleanup: str = "All") -> RunPolicyView:
    """A Kubeflow ``runPolicy`` as the reconciler reads it."""
    return RunPolicyView(
        clean_pod_policy=policy.clean_pod_policy.value,
        ttl_seconds_after_finished=policy.ttl_seconds_after_finished,
        active_deadline_seconds=policy.active_deadline_seconds,
        backoff_limit=policy.backoff_limit,
        service_cleanup=service_cleanup,
    )


#: ``runPolicy.schedulingPolicy`` fields a PodGroup would take, camelCase -> model attribute.
_GANG_FIELDS = (
    ("minAvailable", "min_available"),
    ("queue", "queue"),
    ("minResources", "min_resources"),
    ("scheduleTimeoutSeconds", "schedule_timeout_seconds"),
)
_GANG_WHY = (
    "ignored: Lattice's own scheduler admits all of the job's pods or none, in priority order, "
    "so no PodGroup is created"
)


def ignored_scheduling_fields(policy: RunPolicy) -> list[tuple[str, str]]:
    """The PodGroup fields of ``runPolicy.schedulingPolicy`` the job sets (``priorityClass``
    is used: it feeds the job's priority)."""
    sp = policy.scheduling_policy
    if sp is None:
        return []
    base = "spec.runPolicy.schedulingPolicy"
    return [
        (f"{base}.{wire}", _GANG_WHY)
        for wire, attr in _GANG_FIELDS
        if getattr(sp, attr) is not None
    ]


class KubeflowStatus:
    """The status layout plugin attributes of the Kubeflow kinds (a mixin)."""

    scheduling_path: tuple[str, ...] = ("status", "lattice")
    exec_path: tuple[str, ...] = ("status",)
    preempted_condition: str = "Suspended"
