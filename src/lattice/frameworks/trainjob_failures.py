"""TrainJob failures as JobSet judges them: which Job failed, and what the runtime's
``failurePolicy`` does about it (fail the job, or recreate every pod as a new attempt).

Contract (pure; facts from JobSet v0.8+ ``failure_policy.go``; no batch Jobs exist here, so a
Job is the pods of one replicatedJob index):

- **Attempts.** Every pod carries ``jobset.sigs.k8s.io/restart-attempt`` = ``status.restarts``
  (JobSet's count, kept on the TrainJob's status). A live pod of an older attempt is stale: it is
  recreated and never judged. ``current(job, pods)`` are the undeleted pods of this attempt.
- **A Job fails** (reason ``BackoffLimitExceeded``, batch/v1's message) when one of its pods
  Failed other than by disruption (a failed pod is not retried inside its Job: Lattice has no
  batch Job), or when its pods' container restarts exceed the Job's ``backoffLimit``. The first
  failed Job in replicatedJob order is the one the policy is applied to.
- **Policy** (``outcome``): no ``failurePolicy``: the job fails (``FailedJobs``). Otherwise the
  first rule whose ``onJobFailureReasons``, ``onJobFailureMessagePatterns`` (regular expressions,
  searched) and ``targetReplicatedJobs`` all match (empty matches anything) gives the action,
  ``RestartJobSet`` when none does. ``FailJobSet`` fails the job
  (``FailJobSetFailurePolicyAction``); ``RestartJobSet`` restarts it unless
  ``restartsCountTowardsMax`` reached ``maxRestarts``, which fails it (``ReachedMaxRestarts``);
  ``RestartJobSetAndIgnoreMaxRestarts`` restarts it without counting. The per-Job actions
  ``RestartJob``/``RestartJobAndIgnoreMaxRestarts`` (behind a JobSet feature gate) restart the
  whole job here. A restart recreates every pod of the attempt (``restartStrategy`` Recreate;
  BlockingRecreate and InPlaceRestart act the same here: a pod is only created again once its
  old self is gone), and ``restart_counts`` gives the counts to store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lattice.frameworks.base import PodView
from lattice.frameworks.failures import is_disrupted
from lattice.frameworks.trainjob_plans import FailureRule, ReplicatedJobPlan, ResolvedJob
from lattice.frameworks.trainjob_pods import LABEL_RESTART_ATTEMPT, Slot

__all__ = [
    "JOB_FAILED_MESSAGE",
    "JOB_FAILED_REASON",
    "FailedJob",
    "Outcome",
    "attempt",
    "current",
    "outcome",
    "restart_counts",
    "stale",
]

#: batch/v1's reason and message for a Job whose pods failed more than its backoffLimit.
JOB_FAILED_REASON = "BackoffLimitExceeded"
JOB_FAILED_MESSAGE = "Job has reached the specified backoff limit"

_FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
_MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
_FAIL_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedJob:
    """The first failed Job: its replicatedJob, index, and the pod that failed it (the first
    pod of the Job when container restarts did) with why."""

    rjob: ReplicatedJobPlan
    index: int
    pod: PodView
    slot: Slot
    restarts: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What the failure policy does: nothing, ``failed`` (reason, base message), or ``restart``
    (``counted`` when it counts towards maxRestarts)."""

    failed_job: FailedJob | None = None
    failed: tuple[str, str] | None = None
    restart: bool = False
    counted: bool = False


def attempt(job: ResolvedJob) -> tuple[int, int]:
    """``(restarts, restartsCountTowardsMax)`` stored on the TrainJob's status."""
    status = job.trainjob.status
    if status is None:
        return 0, 0
    return status.restarts or 0, status.restarts_count_towards_max or 0


def _pod_attempt(pod: PodView) -> str | None:
    label = getattr(pod, "label", None)
    value = label(LABEL_RESTART_ATTEMPT) if callable(label) else None
    return value if isinstance(value, str) else None


def stale(job: ResolvedJob, pod: PodView) -> bool:
    """Whether ``pod`` belongs to an earlier attempt (a pod without the label never does)."""
    value = _pod_attempt(pod)
    return value is not None and value != str(attempt(job)[0])


def current(job: ResolvedJob, pods: Sequence[PodView]) -> list[PodView]:
    """The undeleted pods of the current attempt."""
    return [p for p in pods if p.deletion_timestamp is None and not stale(job, p)]


def first_failed(
    job: ResolvedJob, slots: Mapping[str, Slot], mine: Mapping[str, PodView]
) -> FailedJob | None:
    """The first Job (in replicatedJob order) that failed, and the pod that failed it."""
    jobs: dict[tuple[str, int], list[Slot]] = {}
    for slot in slots.values():
        jobs.setdefault((slot.rjob.name, slot.job), []).append(slot)
    for r in job.replicated_jobs:
        for j in range(r.replicas):
            of = [(s, mine[s.name]) for s in jobs.get((r.name, j), ()) if s.name in mine]
            for slot, pod in of:
                if pod.phase == "Failed" and not is_disrupted(pod):
                    return FailedJob(rjob=r, index=j, pod=pod, slot=slot)
            restarts = sum(c.restart_count for _, p in of for c in p.containers)
            if of and restarts > r.backoff_limit:
                slot, pod = of[0]
                return FailedJob(rjob=r, index=j, pod=pod, slot=slot, restarts=restarts)
    return None


def _matches(rule: FailureRule, failed: FailedJob) -> bool:
    if rule.reasons and JOB_FAILED_REASON not in rule.reasons:
        return False
    if rule.patterns and not any(_search(p, JOB_FAILED_MESSAGE) for p in rule.patterns):
        return False
    return not rule.targets or failed.rjob.name in rule.targets


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False  # JobSet skips a pattern that does not compile


def outcome(job: ResolvedJob, slots: Mapping[str, Slot], mine: Mapping[str, PodView]) -> Outcome:
    """The failure policy applied to the first failed Job among ``mine`` (current pods)."""
    failed = first_failed(job, slots, mine)
    if failed is None:
        return Outcome()
    policy = job.failure_policy
    if policy is None:
        return Outcome(failed_job=failed, failed=_FAILED_JOBS)
    rule = next((r for r in policy.rules if _matches(r, failed)), None)
    action = rule.action if rule is not None else "RestartJobSet"
    if action == "FailJobSet":
        return Outcome(failed_job=failed, failed=_FAIL_ACTION)
    if action.endswith("AndIgnoreMaxRestarts"):
        return Outcome(failed_job=failed, restart=True)
    if attempt(job)[1] >= policy.max_restarts:
        return Outcome(failed_job=failed, failed=_MAX_RESTARTS)
    return Outcome(failed_job=failed, restart=True, counted=True)


def restart_counts(job: ResolvedJob, result: Outcome) -> dict[str, int]:
    """``restarts`` and ``restartsCountTowardsMax`` to store after ``result``."""
    restarts, counted = attempt(job)
    if result.restart:
        restarts, counted = restarts + 1, counted + (1 if result.counted else 0)
    out: dict[str, int] = {}
    if restarts:
        out["restarts"] = restarts
    if counted:
        out["restartsCountTowardsMax"] = counted
    return out
