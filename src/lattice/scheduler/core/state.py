"""The mutable per-job record one pass works on (internal to the core).

Contract: a :class:`JobState` starts as a copy of a ``JobView``'s scheduler-owned fields, is
mutated only by the steps of a single ``schedule`` call, and is turned into an immutable
``Decision`` by :func:`to_decision`. It never escapes the core.
"""

from __future__ import annotations

from datetime import datetime
from itertools import compress
from operator import ne

from lattice.scheduler.core.events import SchedulerEvent
from lattice.scheduler.core.model import PodDemand
from lattice.scheduler.core.order import OrderKey
from lattice.scheduler.core.plan import Decision
from lattice.scheduler.core.types import JobView, Stage
from lattice.scheduler.core.waitreason import classify

__all__ = ["JobState", "changed_fields", "to_decision"]

# Enum members bound once: looking one up on its class costs more than a global's lookup.
_RUNNING = Stage.RUNNING


class JobState:
    """Working copy of one job's state during a pass."""

    __slots__ = (
        "admitted",
        "attained",
        "band",
        "blocker",
        "cooldown",
        "count",
        "detail",
        "events",
        "exclude",
        "fragmented",
        "free_at_check",
        "grow_at",
        "growth_deferred",
        "held",
        "key",
        "last_resize",
        "min_shape",
        "placed",
        "position",
        "queued",
        "rank",
        "reason",
        "requeue",
        "since",
        "size",
        "stage",
        "submit",
        "unfittable",
        "updated",
        "victim",
        "view",
    )

    def __init__(self, view: JobView) -> None:
        self.view = view
        self.stage: str = view.stage
        self.size = view.current_size
        self.submit = view.submit_time
        self.queued = view.queued_time
        self.requeue = view.requeue_time
        self.cooldown = view.cooldown_time
        self.count = view.requeue_count
        self.last_resize = view.last_resize_time
        self.attained = view.attained_service
        self.updated = view.service_updated_at
        # Size the job runs at on input: what it holds and accrues service on.
        self.held = view.current_size if view.stage == _RUNNING else 0
        # When the job was admitted; settle() moves it to now for a job admitted from 0.
        self.since = view.admitted_time if self.held else None
        self.position: int | None = None
        self.reason = ""
        self.events: list[SchedulerEvent] = []
        self.band = 0
        self.rank = 0
        self.admitted = False
        self.unfittable = False
        self.min_shape: tuple[PodDemand, ...] = ()
        # Node of each pod the job holds in this pass, by index ("" = not placed yet).
        self.placed: list[str] = []
        self.exclude: frozenset[int] = frozenset()
        self.key: OrderKey | None = None
        # Why a waiting job's minimum has no room, in the cluster's terms ("" in the unit model).
        self.detail = ""
        # With ``detail``: the free totals would hold its minimum (waitreason's Fragmented).
        self.fragmented = False
        # Its minimum was released to make room for a job earlier in order (rule 5).
        self.victim = False
        self.free_at_check = 0
        self.blocker: JobView | None = None
        self.growth_deferred = False
        self.grow_at: datetime | None = None

    def resize(self, size: int, now: datetime) -> None:
        """Set the size; ``last_resize_time`` moves to ``now`` when it differs from the input."""
        self.size = size
        if size != self.view.current_size:
            self.last_resize = now


_NAMES = (
    "stage",
    "size",
    "submit_time",
    "queued_time",
    "requeue_time",
    "cooldown_time",
    "requeue_count",
    "last_resize_time",
    "attained_service",
    "service_updated_at",
    "admitted_time",
)
_UNCHANGED: frozenset[str] = frozenset()
if Decision._fields[1:12] != _NAMES:  # pragma: no cover - guards the positional build below
    raise ImportError("Decision's persisted fields must follow _NAMES, in order")


_T = datetime | None
_Persisted = tuple[str, int, _T, _T, _T, _T, int, _T, float, _T, _T]


def _persisted(state: JobState) -> _Persisted:
    return (
        state.stage,
        state.size,
        state.submit,
        state.queued,
        state.requeue,
        state.cooldown,
        state.count,
        state.last_resize,
        state.attained,
        state.updated,
        state.since if state.size > 0 else None,
    )


def _placement(state: JobState) -> tuple[str, ...]:
    return tuple(state.placed[: state.size]) if state.size > 0 else ()


# Which persisted fields differ (one flag each) -> their names.
_CHANGED: dict[tuple[bool, ...], frozenset[str]] = {}
# By which of attained_service (1) and service_updated_at (2) differ.
_ACCOUNTING = (
    _UNCHANGED,
    frozenset(_NAMES[8:9]),
    frozenset(_NAMES[9:10]),
    frozenset(_NAMES[8:10]),
)


def changed_fields(state: JobState) -> frozenset[str]:
    """The persisted fields of ``state`` that differ from its view (placement included)."""
    v = state.view
    size = state.size
    new = (  # _persisted(state), inlined: a pass calls this for every job it touched
        state.stage,
        size,
        state.submit,
        state.queued,
        state.requeue,
        state.cooldown,
        state.count,
        state.last_resize,
        state.attained,
        state.updated,
        state.since if size > 0 else None,
    )
    old = (
        v.stage,
        v.current_size,
        v.submit_time,
        v.queued_time,
        v.requeue_time,
        v.cooldown_time,
        v.requeue_count,
        v.last_resize_time,
        v.attained_service,
        v.service_updated_at,
        v.admitted_time,
    )
    changed = _UNCHANGED
    if new != old and new[:8] == old[:8] and new[10] == old[10]:
        # Only the service accounting (a running job's usual change).
        changed = _ACCOUNTING[(new[8] != old[8]) + 2 * (new[9] != old[9])]
    elif new != old:
        flags = tuple(map(ne, new, old))
        changed = _CHANGED.get(flags) or _CHANGED.setdefault(
            flags, frozenset(compress(_NAMES, flags))
        )
    if (tuple(state.placed[:size]) if size > 0 else ()) != v.placement:  # _placement(state)
        changed = changed | {"placement"}
    return changed


def to_decision(state: JobState, changed: frozenset[str] | None = None) -> Decision:
    """Freeze ``state`` into a :class:`Decision`, naming the persisted fields that changed
    (``changed``: :func:`changed_fields` of ``state``, if known)."""
    if changed is None:
        changed = changed_fields(state)
    # Positionally (``_NAMES`` are the fields after ``key``, in order): keywords cost 2.9 us a
    # decision against 0.7, and a pass builds one per job.
    return Decision(
        state.view.key,
        *_persisted(state),
        state.position,
        state.reason,
        tuple(state.events),
        changed,
        _placement(state),
        *classify(state),
    )
