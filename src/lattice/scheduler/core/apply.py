"""``apply(snapshot, plan) -> Snapshot``: the world after a plan, for simulators and tests.

Contract:
- Each job's scheduler-owned fields are replaced by its decision (``stage``, ``current_size``,
  the timestamps, ``requeue_count``, ``attained_service``, ``service_updated_at``,
  ``placement``); spec fields (priority, sizes, units, demands, ``suspended``, ``finished``)
  and nodes are kept; ``refused_nodes`` is kept while the job stays ``Running``.
- ``pending_since`` (and ``pending_message``) is an observation of pods, not scheduler state:
  it is kept while a job stays ``Running`` and cleared when the job starts or stops running
  (its pods are new or gone), which is what the loop would observe right after applying the plan.
- Jobs missing from the plan are kept unchanged. Pure; the input is not modified.
"""

from __future__ import annotations

from dataclasses import replace

from lattice.scheduler.core.plan import Decision, Plan
from lattice.scheduler.core.types import JobView, Snapshot, Stage

__all__ = ["apply", "apply_decision"]


def apply_decision(job: JobView, decision: Decision) -> JobView:
    """``job`` with the scheduler-owned state of ``decision``."""
    was_running = job.stage == Stage.RUNNING
    runs = decision.stage == Stage.RUNNING
    return replace(
        job,
        stage=decision.stage,
        current_size=decision.size,
        submit_time=decision.submit_time,
        queued_time=decision.queued_time,
        requeue_time=decision.requeue_time,
        cooldown_time=decision.cooldown_time,
        requeue_count=decision.requeue_count,
        last_resize_time=decision.last_resize_time,
        attained_service=decision.attained_service,
        service_updated_at=decision.service_updated_at,
        admitted_time=decision.admitted_time,
        placement=decision.placement,
        refused_nodes=job.refused_nodes if was_running and runs else (),
        pending_since=job.pending_since if was_running and runs else None,
        pending_message=job.pending_message if was_running and runs else "",
    )


def apply(snapshot: Snapshot, plan: Plan) -> Snapshot:
    """``snapshot`` as it would look once every decision of ``plan`` has been written."""
    decisions = plan.decisions
    jobs = tuple(
        apply_decision(job, decisions[job.key]) if job.key in decisions else job
        for job in snapshot.jobs
    )
    return replace(snapshot, jobs=jobs)
