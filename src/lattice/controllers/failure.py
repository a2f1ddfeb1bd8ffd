"""The failure policy of a running job: which failed pods are recreated, what is charged to
``backoffLimit``, and when ``activeDeadlineSeconds`` or ``backoffLimit`` fails the job.

Contract (pure: reads the working ``Step``, the plugin's ``Progress`` and the run policy):

- The pods to recreate are the live pods the kind's restart rules name (``progress.recreate``:
  the restart policies, ExitCode classification and disruption live in the plugins).
- ``activeDeadlineSeconds`` counts from ``startTime`` (``start``), which is set when the job
  gets pods and cleared while it holds none, so the deadline restarts on resume as Kubeflow's
  does. Before the deadline, ``requeue`` is the seconds left.
- ``backoffLimit`` (kinds whose run policy has one): the job fails when the failures charged to
  it exceed the limit. Charged: every pod failure (one per failed pod, the recreated ones
  included, persisted in ``replicaStatuses[<type>].failed``; see
  ``jobstatus.charged_statuses``) plus the container restarts of the live pods
  (OnFailure/Always). Never charged: pods Kubernetes evicted or preempted, and pods the
  scheduler deleted. The failures are written *before* the failed pods are deleted for
  recreation, so a persisted count survives operator restarts and ``backoffLimit: N`` means N
  recreations, as for a batch Job.
- The kind's own failure (``progress.failed``) wins over both. A job failed by the deadline or
  the limit is ``stop``: every pod and Service goes at once, whatever ``cleanPodPolicy`` says
  (as training-operator stops such a job).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from lattice.controllers.jobstatus import Step, charged_statuses, replica_statuses
from lattice.frameworks.base import Messages, PodView, Progress, RunPolicyView
from lattice.primitives.objects import Obj

__all__ = ["Verdict", "judge"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The failure policy applied: ``failed`` (the message) ends the job with ``reason``."""

    statuses: dict[str, Obj]
    recreated: list[PodView]
    failed: str | None
    reason: str
    requeue: float | None
    stop: bool


def judge(
    step: Step,
    *,
    progress: Progress,
    policy: RunPolicyView,
    words: Messages,
    live: Sequence[PodView],
    start: datetime | None,
) -> Verdict:
    ns, name = step.ref.namespace, step.ref.name
    doomed = frozenset(progress.recreate)
    recreated = [p for p in live if p.name in doomed]
    statuses = replica_statuses(progress)
    if policy.backoff_limit is not None:
        statuses = charged_statuses(statuses, step.exec.get("replicaStatuses"), recreated)
    requeue: float | None = None
    failed, reason = progress.failed, progress.failed_reason or f"{words.kind}Failed"
    deadline = policy.active_deadline_seconds
    if failed is None and deadline is not None and start is not None:
        left = (start + timedelta(seconds=deadline) - step.now).total_seconds()
        if left <= 0:
            reason, failed = words.deadline_exceeded(ns, name)
        else:
            requeue = left
    if failed is None and policy.backoff_limit is not None:
        restarts = sum(int(s.get("failed") or 0) for s in statuses.values())
        restarts += sum(c.restart_count for p in live for c in p.containers)
        if restarts > policy.backoff_limit:
            reason, failed = words.backoff_exceeded(ns, name)
    return Verdict(
        statuses=statuses,
        recreated=recreated,
        failed=failed,
        reason=reason,
        requeue=requeue,
        stop=failed is not None and progress.failed is None,
    )
