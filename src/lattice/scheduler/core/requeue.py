"""Rule 7's requeue and its limit: a job released for pods pending too long cools down, or fails.

Contract (internal to the core; changes only the :class:`JobState` it is given):

- :func:`requeue` is every requeue of a running job (pods pending past ``pending_timeout``,
  children refused past ``child_refusal_timeout``, pods kube-scheduler refused on their nodes
  with no other node fitting). It releases the job (size 0) and:
  - while ``requeue_count + 1 <= requeue_limit`` (or there is no limit): stage
    ``RequeueCooldown``, ``requeue_count`` + 1, ``cooldown_time`` = now + :func:`cooldown_for`,
    and a ``Requeued`` event quoting kube-scheduler's last message (``pending_message``);
  - past the limit (Kueue's ``backoffLimitCount``): stage ``Failed`` (the scheduler never
    schedules it again), no cooldown, ``requeue_count`` kept, no scheduler event, and the
    reason :func:`limit_message` naming the count, the limit and kube-scheduler's last
    message. The loop persists it with reason :data:`REQUEUE_LIMIT_EXCEEDED`; the kind's
    reconciler turns it into its ``Failed`` condition and a Warning event.
- :func:`cooldown_for`: ``min(cooldown_max, cooldown_base * 2**(requeue_count - 1))``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from lattice.scheduler.core.events import Requeued, format_duration
from lattice.scheduler.core.state import JobState
from lattice.scheduler.core.types import SchedulerConfig, Stage
from lattice.scheduler.core.waitreason import WaitReason

__all__ = ["REQUEUE_LIMIT_EXCEEDED", "cooldown_for", "limit_message", "requeue"]

#: The reason of a job failed by the requeue limit (scheduler block, condition and event).
REQUEUE_LIMIT_EXCEEDED = str(WaitReason.REQUEUE_LIMIT_EXCEEDED)


def cooldown_for(requeue_count: int, config: SchedulerConfig) -> timedelta:
    """Rule 7 backoff: ``min(cooldown_max, cooldown_base * 2**(requeue_count - 1))``."""
    delay = config.cooldown_base
    for _ in range(max(0, requeue_count - 1)):
        if delay >= config.cooldown_max:
            break
        delay *= 2
    return min(delay, config.cooldown_max)


def limit_message(
    *, count: int, limit: int, lasted: timedelta, last: str, source: str = "kube-scheduler"
) -> str:
    """Why a job failed its requeue limit, quoting ``last``, the last message of ``source``
    (kube-scheduler's on a pending pod, or the apiserver's refusal of a child)."""
    times = "time" if count == 1 else "times"
    text = (
        f"requeued {count} {times} for pods that could not start (limit {limit}); "
        f"pending again for {format_duration(lasted)}"
    )
    return f"{text}; last message from {source}: {last}" if last else text


def requeue(
    s: JobState,
    *,
    now: datetime,
    config: SchedulerConfig,
    lasted: timedelta,
    refused_by: str = "",
    refused_on: tuple[str, ...] = (),
) -> None:
    """Release ``s``: a cooldown, or stage Failed past the requeue limit (module contract)."""
    v = s.view
    s.requeue = None
    limit = config.requeue_limit
    if limit is not None and v.requeue_count + 1 > limit:
        s.stage, s.cooldown, s.count = Stage.FAILED, None, v.requeue_count
        s.reason = limit_message(
            count=v.requeue_count,
            limit=limit,
            lasted=lasted,
            last=refused_by or v.pending_message,
            source="the apiserver" if refused_by else "kube-scheduler",
        )
        s.resize(0, now)
        return
    s.count = v.requeue_count + 1
    s.stage = Stage.REQUEUE_COOLDOWN
    s.cooldown = now + cooldown_for(s.count, config)
    s.events.append(
        Requeued(
            pending_for=lasted,
            cooldown_until=s.cooldown,
            requeue_count=s.count,
            refused_on=refused_on,
            refused_by=refused_by,
            scheduler_message="" if refused_by else v.pending_message,
        )
    )
    s.reason = s.events[-1].message
    s.resize(0, now)
