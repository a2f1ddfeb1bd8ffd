"""The pure scheduler core: ``schedule(snapshot, now) -> Plan``, shared by every job kind.

Contract: no I/O, no clock (time is an argument), no randomness, standard library only. Inputs
(:class:`Snapshot`, :class:`NodeView`, :class:`JobView`, :class:`SchedulerConfig`) and outputs
(:class:`Plan`, :class:`Decision`, the events) are frozen values. The policy is documented as
numbered rules in :mod:`lattice.scheduler.core.core`; :func:`apply` plays a plan back onto its
snapshot (for the simulator and the idempotence property).
"""

from __future__ import annotations

from lattice.primitives.times import format_time
from lattice.scheduler.core.apply import apply, apply_decision
from lattice.scheduler.core.core import cooldown_for, schedule
from lattice.scheduler.core.events import (
    Admitted,
    CooldownOver,
    Grown,
    Preempted,
    Queued,
    Requeued,
    SchedulerEvent,
    Shrunk,
    Suspended,
    format_duration,
)
from lattice.scheduler.core.model import (
    ANY,
    UNIT_RESOURCE,
    Constraint,
    PodDemand,
    Requirement,
    Resources,
    Taint,
    Toleration,
    resources,
)
from lattice.scheduler.core.order import OrderKey, las_band, order_key
from lattice.scheduler.core.plan import ACCOUNTING_FIELDS, STATE_FIELDS, Decision, Plan
from lattice.scheduler.core.requeue import REQUEUE_LIMIT_EXCEEDED
from lattice.scheduler.core.types import (
    JobChanges,
    JobView,
    NodeView,
    SchedulerConfig,
    Snapshot,
    Stage,
    Strategy,
    job_key,
)
from lattice.scheduler.core.waitreason import PreemptionCause, WaitReason

__all__ = [
    "ACCOUNTING_FIELDS",
    "ANY",
    "REQUEUE_LIMIT_EXCEEDED",
    "STATE_FIELDS",
    "UNIT_RESOURCE",
    "Admitted",
    "Constraint",
    "CooldownOver",
    "Decision",
    "Grown",
    "JobChanges",
    "JobView",
    "NodeView",
    "OrderKey",
    "Plan",
    "PodDemand",
    "Preempted",
    "PreemptionCause",
    "Queued",
    "Requeued",
    "Requirement",
    "Resources",
    "SchedulerConfig",
    "SchedulerEvent",
    "Shrunk",
    "Snapshot",
    "Stage",
    "Strategy",
    "Suspended",
    "Taint",
    "Toleration",
    "WaitReason",
    "apply",
    "apply_decision",
    "cooldown_for",
    "format_duration",
    "format_time",
    "job_key",
    "las_band",
    "order_key",
    "resources",
    "schedule",
]
