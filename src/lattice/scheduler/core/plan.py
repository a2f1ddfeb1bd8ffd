"""Output values of the scheduler core: one :class:`Decision` per job, gathered in a :class:`Plan`.

Contract:
- A decision carries the job's complete scheduler-owned state after the pass (the fields the
  loop persists in status), the job's 1-based ``queue_position`` among the candidates left
  waiting (``None`` for admitted and non-candidate jobs), a human
  ``reason``, the typed events for what changed, and a stable ``wait_reason`` code with its
  ``wait_message`` (:mod:`~lattice.scheduler.core.waitreason`).
- ``changed_fields`` names the persisted fields that differ from the input ``JobView``;
  ``queue_position``, ``reason``, ``events`` and the wait reason are not persisted state and
  never count.
  ``attained_service`` and ``service_updated_at`` (:data:`ACCOUNTING_FIELDS`) change on every
  pass for a running job; a loop that throttles status writes may treat a decision whose
  changes are all accounting as unchanged.
- ``Plan.decisions`` iterates in plan-key order; ``Plan.order`` is the scheduling order. Both
  may be computed on first access (:class:`Deferred`); they are the same values either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, NamedTuple, TypeVar

from lattice.scheduler.core.events import SchedulerEvent
from lattice.scheduler.core.waitreason import WaitReason

__all__ = ["ACCOUNTING_FIELDS", "STATE_FIELDS", "Decision", "Deferred", "Plan"]

T = TypeVar("T")

# Decision field -> JobView field, for every persisted field.
STATE_FIELDS: Mapping[str, str] = {
    "stage": "stage",
    "size": "current_size",
    "submit_time": "submit_time",
    "queued_time": "queued_time",
    "requeue_time": "requeue_time",
    "cooldown_time": "cooldown_time",
    "requeue_count": "requeue_count",
    "last_resize_time": "last_resize_time",
    "attained_service": "attained_service",
    "service_updated_at": "service_updated_at",
    "admitted_time": "admitted_time",
    "placement": "placement",
}

ACCOUNTING_FIELDS: frozenset[str] = frozenset({"attained_service", "service_updated_at"})


class Decision(NamedTuple):
    """The scheduler's verdict for one job.

    A named tuple rather than a frozen dataclass: a pass builds one for every job, and a named
    tuple built positionally is several times cheaper than a frozen dataclass's ``__init__``
    (and than the same tuple built with keywords, which the core's hot path therefore avoids;
    figures in docs/performance.md). Immutable all the same.
    """

    key: str
    stage: str
    size: int
    submit_time: datetime | None
    queued_time: datetime | None
    requeue_time: datetime | None
    cooldown_time: datetime | None
    requeue_count: int
    last_resize_time: datetime | None
    attained_service: float
    service_updated_at: datetime | None
    admitted_time: datetime | None
    queue_position: int | None
    reason: str
    events: tuple[SchedulerEvent, ...] = ()
    changed_fields: frozenset[str] = frozenset()
    #: The node of each pod the job holds, by pod index (fixed pods first); empty at size 0.
    placement: tuple[str, ...] = ()
    #: Why the job is held back (:mod:`~lattice.scheduler.core.waitreason`); ``None`` while it
    #: runs, or when the pass does not own its stage. Not persisted state: never counts.
    wait_reason: WaitReason | None = None
    #: The sentence of ``wait_reason`` ("" without one).
    wait_message: str = ""

    @property
    def changed(self) -> bool:
        """Whether any persisted field differs from the input."""
        return bool(self.changed_fields)


class Deferred(Generic[T]):
    """A value computed by ``compute`` on first :meth:`get`, then kept."""

    __slots__ = ("_compute", "_value")

    def __init__(self, compute: Callable[[], T]) -> None:
        self._compute: Callable[[], T] | None = compute
        self._value: T | None = None

    def get(self) -> T:
        if self._compute is not None:
            self._value = self._compute()
            self._compute = None
        return self._value  # type: ignore[return-value]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Plan:
    """The result of one pass.

    ``capacity_total`` is the sum of the nodes' free units; ``capacity_used`` the units held by
    the jobs the plan leaves running. ``next_wakeup`` is the earliest time after ``now`` at
    which re-running the pass on unchanged inputs could decide differently (``None``: never).
    """

    decisions: Mapping[str, Decision]
    next_wakeup: datetime | None
    capacity_total: int
    capacity_used: int
    deferred_order: Deferred[tuple[str, ...]] = field(repr=False, compare=False)

    @property
    def order(self) -> tuple[str, ...]:
        """Keys of the candidates in scheduling order."""
        return self.deferred_order.get()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plan):
            return NotImplemented
        return (
            self.next_wakeup == other.next_wakeup
            and self.capacity_total == other.capacity_total
            and self.capacity_used == other.capacity_used
            and self.order == other.order
            and dict(self.decisions) == dict(other.decisions)
        )

    __hash__ = None  # type: ignore[assignment]

    def __getitem__(self, key: str) -> Decision:
        return self.decisions[key]

    def changed(self, key: str, *, include_accounting: bool = True) -> bool:
        """Whether the decision for ``key`` differs from its input in persisted state."""
        fields = self.decisions[key].changed_fields
        if include_accounting:
            return bool(fields)
        return not fields <= ACCOUNTING_FIELDS

    def changed_keys(self, *, include_accounting: bool = True) -> tuple[str, ...]:
        """Keys of the changed decisions, in plan-key order."""
        fast = getattr(self.decisions, "changed_keys", None)
        if fast is not None:
            keys: tuple[str, ...] = fast(include_accounting=include_accounting)
            return keys
        return tuple(
            key
            for key in self.decisions
            if self.changed(key, include_accounting=include_accounting)
        )

    @property
    def events(self) -> tuple[tuple[str, SchedulerEvent], ...]:
        """Every ``(key, event)`` of the pass, in plan-key order."""
        return tuple((d.key, e) for d in self.decisions.values() for e in d.events)
