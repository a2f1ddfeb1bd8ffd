"""TrainJob's status: JobSet's reading of its pods (progress, ``jobsStatus``), and Trainer's
stored status shape translated from and to the reconciler's Kubeflow working block.

Contract (pure; see ``lattice.frameworks.trainjob`` for the rules in full):
- ``progress``: a disrupted Failed pod, or one of an earlier attempt, is recreated; a failed
  Job fails or restarts the job per the runtime's failurePolicy (``trainjob_failures``;
  ``restart_counts`` gives the counts to store); success follows successPolicy; running when
  every desired non-initializer pod is Running or Succeeded.
- ``released``: the replicatedJobs whose ``dependsOn`` are reached (JobSet's rule).
- ``jobs_status``: ``status.jobsStatus`` as JobSet counts its Jobs.
- ``read_status`` / ``render_status``: Trainer's metav1 conditions (``Complete``,
  ``Suspended`` with reasons ``Suspended``/``Resumed``/``Preempted``, ``Failed``, and a
  ``Created=False`` while the runtime is not ready) from and to the working block; Kubeflow's
  ``Created``/``Running``/``Restarting`` are never stored, the working ones are derived from
  ``jobsStatus``; ``restarts``/``restartsCountTowardsMax`` are carried through.
- ``TrainJobMessages``: Trainer's and JobSet's wording.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from lattice.api.common import ConditionStatus
from lattice.api.conditions import parse_conditions, set_status_condition
from lattice.api.trainjob import Condition
from lattice.frameworks.base import PodView, Progress, ReplicaCounts
from lattice.frameworks.failures import exit_code, is_disrupted
from lattice.frameworks.manifests import template_containers
from lattice.frameworks.messages import Messages
from lattice.frameworks.trainjob_failures import FailedJob, Outcome, current, outcome, stale
from lattice.frameworks.trainjob_failures import restart_counts as restart_totals
from lattice.frameworks.trainjob_plans import ReplicatedJobPlan, ResolvedJob, main_container
from lattice.frameworks.trainjob_pods import full_size, pod_counts, pod_name, pod_slots
from lattice.primitives.objects import Obj

__all__ = [
    "REASON_COMPLETED",
    "REASON_FAILED_JOBS",
    "TrainJobMessages",
    "jobs_status",
    "progress",
    "read_status",
    "released",
    "render_status",
    "restart_counts",
]

#: JobSet's reason (and message prefix) for a failed Job, which upstream copies to the TrainJob.
REASON_FAILED_JOBS = "FailedJobs"
#: JobSet's reason for a completed JobSet, which upstream copies to the TrainJob's Complete.
REASON_COMPLETED = "AllJobsCompleted"


class TrainJobMessages(Messages):
    """Trainer's wording (``TrainJob is suspended``...) and JobSet's completion message."""

    def succeeded(self, ns: str, name: str) -> str:
        del ns, name
        return "jobset completed successfully"

    def suspended(self, ns: str, name: str) -> str:
        del ns, name
        return "TrainJob is suspended"

    def resumed(self, ns: str, name: str) -> str:
        del ns, name
        return "TrainJob is resumed"

    def deadline_exceeded(self, ns: str, name: str) -> tuple[str, str]:
        del ns, name
        return "DeadlineExceeded", "TrainJob exceeded its active deadline"


#: JobSet's restart counts, stored on the TrainJob's status.
_RESTART_KEYS = ("restarts", "restartsCountTowardsMax")
#: Working (Kubeflow) Suspended reasons and the stored (Trainer) ones.
_SUSPENDED_REASONS = {"TrainJobSuspended": "Suspended", "TrainJobResumed": "Resumed"}


def progress(
    job: ResolvedJob,
    *,
    size: int,
    pods: Sequence[PodView],
) -> Progress:
    """The status rules over the current attempt's undeleted pods named as desired at ``size``."""
    if size <= 0:
        return Progress()
    slots = {s.name: s for init in (True, False) for s in pod_slots(job, size, initializers=init)}
    mine = {p.name: p for p in current(job, pods) if p.name in slots}
    replicas: dict[str, ReplicaCounts] = {}
    for r in job.replicated_jobs:
        of = [p for p in mine.values() if slots[p.name].rjob is r]
        replicas[r.name] = ReplicaCounts(
            active=sum(1 for p in of if p.phase in ("Pending", "Running")),
            succeeded=sum(1 for p in of if p.phase == "Succeeded"),
            failed=sum(1 for p in of if p.phase == "Failed"),
        )
    result = outcome(job, slots, mine)
    if result.failed is not None and result.failed_job is not None:
        reason, message = result.failed
        detail = failure_message(result.failed_job)
        return Progress(replicas=replicas, failed=f"{message}: {detail}", failed_reason=reason)
    if result.restart:
        every = tuple(p.name for p in pods if p.deletion_timestamp is None)
        return Progress(replicas=replicas, restarting=True, recreate=every)
    old = [p.name for p in pods if p.deletion_timestamp is None and stale(job, p)]
    recreate = [*old, *(n for n, p in mine.items() if p.phase == "Failed" and is_disrupted(p))]
    if succeeded(job, size, mine):
        return Progress(replicas=replicas, succeeded=True)
    running = all(
        name in mine and mine[name].phase in ("Running", "Succeeded")
        for name, slot in slots.items()
        if not slot.rjob.initializer
    )
    return Progress(
        replicas=replicas,
        running=running and not recreate,
        restarting=bool(recreate),
        recreate=tuple(recreate),
    )


def released(job: ResolvedJob, pods: Sequence[PodView], *, size: int) -> set[str]:
    """The replicatedJobs whose pods may exist: every ``dependsOn`` entry reached (JobSet:
    Ready when its failed, ready and succeeded Jobs make up its replicas, Complete when every
    Job succeeded), over the current attempt's pods."""
    counts = {e["name"]: e for e in jobs_status(job, current(job, pods), size=size)}
    by_name = {r.name: r for r in job.replicated_jobs}

    def reached(name: str, status: str) -> bool:
        entry, r = counts.get(name), by_name.get(name)
        if entry is None or r is None:
            return False
        done = entry["succeeded"]
        if status == "Ready":
            done += entry["ready"] + entry["failed"]
        return bool(done == r.replicas)

    return {r.name for r in job.replicated_jobs if all(reached(n, st) for n, st in r.depends_on)}


def failure_message(failed: FailedJob) -> str:
    """Which pod failed its Job, and how (its exit code, its reason, or its restarts)."""
    slot, pod = failed.slot, failed.pod
    role = slot.rjob.step if slot.rjob.step else "replicatedJob"
    what = f"{role} pod {pod.name} (replicatedJob {slot.rjob.name})"
    if failed.restarts is not None:
        limit = slot.rjob.backoff_limit
        return (
            f"{what}: its containers restarted {failed.restarts} times, over backoffLimit {limit}"
        )
    containers = template_containers(slot.rjob.template)
    at = main_container(containers, slot.rjob.step)
    code = exit_code(pod, str(containers[at].get("name")) if at is not None else "")
    if code:
        return f"{what} exited with code {code}"
    return f"{what} failed" + (f": {pod.reason}" if pod.reason else "")


def job_done(
    job: ResolvedJob, *, r: ReplicatedJobPlan, j: int, count: int, pods: Mapping[str, PodView]
) -> bool:
    """Whether Job ``j`` of ``r`` is complete: every completion index Succeeded."""
    return count > 0 and all(
        (p := pods.get(pod_name(job, r.name, j, i))) is not None and p.phase == "Succeeded"
        for i in range(count)
    )


def succeeded(job: ResolvedJob, size: int, pods: Mapping[str, PodView]) -> bool:
    counts = pod_counts(job, size)
    done = [
        job_done(job, r=r, j=j, count=counts[r.name], pods=pods)
        for r in job.replicated_jobs
        if r.name in job.success_targets
        for j in range(r.replicas)
    ]
    return any(done) if job.success_operator == "Any" else bool(done) and all(done)


def jobs_status(
    job: ResolvedJob,
    pods: Sequence[PodView],
    *,
    size: int | None = None,
    suspended: bool | None = None,
) -> list[dict[str, Any]]:
    """``status.jobsStatus``: per replicatedJob, its Jobs as JobSet counts them.

    A Job is succeeded when every index Succeeded, failed when a pod failed (not by
    disruption); otherwise, once it has pods or while ``suspended`` (default ``spec.suspend``),
    it is suspended, ready when succeeded plus ready pods reach its count, and active with a
    Pending or Running pod. ``size`` (default and 0: the full size) sets the scaled job's count.
    """
    counts = pod_counts(job, size or full_size(job))
    held = job.suspend if suspended is None else suspended
    mine = {p.name: p for p in pods if p.deletion_timestamp is None}
    result: list[dict[str, Any]] = []
    for r in job.replicated_jobs:
        entry: dict[str, Any] = {"name": r.name, "ready": 0, "succeeded": 0, "failed": 0}
        entry.update(active=0, suspended=0)
        for j in range(r.replicas):
            names = [pod_name(job, r.name, j, i) for i in range(counts[r.name])]
            of = [mine[n] for n in names if n in mine]
            if job_done(job, r=r, j=j, count=len(names), pods=mine):
                entry["succeeded"] += 1
            elif any(p.phase == "Failed" and not is_disrupted(p) for p in of):
                entry["failed"] += 1
            elif of or held:
                entry["suspended"] += 1 if held else 0
                ok = sum(
                    1 for p in of if p.phase == "Succeeded" or (p.ready and p.phase == "Running")
                )
                entry["ready"] += 1 if names and ok >= len(names) else 0
                entry["active"] += 1 if any(p.phase in ("Pending", "Running") for p in of) else 0
        result.append(entry)
    return result


def read_status(stored: Mapping[str, Any]) -> Obj:
    back = {v: k for k, v in _SUSPENDED_REASONS.items()}
    conditions: list[Obj] = []
    for raw in stored.get("conditions") or ():
        if not isinstance(raw, Mapping):
            continue
        type_, reason = raw.get("type"), raw.get("reason")
        if type_ == "Complete":
            type_ = "Succeeded"
        elif type_ == "Suspended":
            reason = back.get(str(reason), reason)
        when = raw.get("lastTransitionTime")
        entry = {"type": type_, "status": raw.get("status"), "reason": reason}
        entry.update(message=raw.get("message"), lastUpdateTime=when, lastTransitionTime=when)
        conditions.append({k: v for k, v in entry.items() if v is not None})
    jobs = [j for j in stored.get("jobsStatus") or () if isinstance(j, Mapping)]
    counts = {k: stored[k] for k in _RESTART_KEYS if isinstance(stored.get(k), int)}
    if jobs and not any(c.get("type") == "Created" for c in conditions):
        conditions.append({"type": "Created", "status": "True", "reason": "TrainJobCreated"})
    if any(int(j.get("active") or 0) + int(j.get("ready") or 0) > 0 for j in jobs):
        conditions.append({"type": "Running", "status": "True", "reason": "TrainJobRunning"})
    return {"conditions": conditions, "jobsStatus": [dict(j) for j in jobs], **counts}


def render_status(
    block: Mapping[str, Any],
    *,
    stored: Mapping[str, Any],
    generation: int | None,
    now: datetime,
) -> Obj:
    conditions = parse_conditions(Condition, stored)
    working = {c.get("type"): c for c in block.get("conditions") or () if isinstance(c, Mapping)}
    if not any(c.get("type") == "Created" and c.get("status") == "False" for c in working.values()):
        conditions = [c for c in conditions if c.type != "Created"]
    for kind, c in working.items():
        status, reason = str(c.get("status")), str(c.get("reason") or "")
        if kind in ("Running", "Restarting") or (kind == "Created" and status == "True"):
            continue
        stored_type = str(kind)
        if kind == "Succeeded":
            stored_type, reason = "Complete", REASON_COMPLETED
        elif kind == "Suspended":
            reason = _SUSPENDED_REASONS.get(reason, reason)
        conditions = set_status_condition(
            conditions,
            type=stored_type,
            status=ConditionStatus(status),
            reason=reason,
            message=str(c.get("message") or ""),
            now=now,
            observed_generation=generation,
        )
    out: Obj = {
        "conditions": [
            c.model_dump(by_alias=True, exclude_none=True, mode="json") for c in conditions
        ]
    }
    jobs = block.get("jobsStatus")
    if jobs:
        out["jobsStatus"] = [dict(j) for j in jobs]
    out.update({k: block[k] for k in _RESTART_KEYS if isinstance(block.get(k), int)})
    return out


def restart_counts(job: ResolvedJob, *, size: int, pods: Sequence[PodView]) -> dict[str, int]:
    """``restarts`` / ``restartsCountTowardsMax`` to store: one more when ``progress`` restarts."""
    if size <= 0:
        return restart_totals(job, Outcome())
    slots = {s.name: s for init in (True, False) for s in pod_slots(job, size, initializers=init)}
    mine = {p.name: p for p in current(job, pods) if p.name in slots}
    return restart_totals(job, outcome(job, slots, mine))
