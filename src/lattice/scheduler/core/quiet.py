"""Memoised facts about *quiet* jobs, and the plan's lazily built mapping of decisions.

Contract (internal to the core; neither changes any result, both only skip work):
- A view is *quiet* when a pass can only leave it exactly as it is or admit it: stage
  ``Waiting``, holding nothing, with ``submit_time`` and ``queued_time`` set, no
  ``requeue_time`` or ``admitted_time``, not suspended, not finished and valid. Its LAS band,
  order key and minimum shape depend on the view and the config alone (never on the clock), so
  :func:`entry_for` memoises them per view object (by identity, holding the view, so an id is
  never reused while its entry lives). Views are immutable, so a hit is always exact; the memo
  is cleared when it outgrows the snapshots it serves.
- :class:`LazyDecisions` is the read-only mapping a plan exposes. The changed fields of the
  jobs the pass touched are known at once, and each one's decision is built on first access
  to it; those of quiet jobs it left waiting (no persisted field changes, only
  ``queue_position`` and ``reason``) are built by ``build_rest`` on first access to any of
  them. Iteration is in plan-key order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from lattice.scheduler.core.model import PodDemand
from lattice.scheduler.core.order import (
    NOT_RUNNING,
    OrderKey,
    full_units,
    las_band,
    las_position,
    order_key,
)
from lattice.scheduler.core.plan import ACCOUNTING_FIELDS, Decision
from lattice.scheduler.core.types import JobView, SchedulerConfig, Stage, Strategy

__all__ = ["Entry", "LazyDecisions", "entries_for", "entry_for", "trim_memo"]


class Entry:
    """What a pass needs of a quiet job before admitting it."""

    __slots__ = ("band", "key", "need", "shape", "view")

    def __init__(self, view: JobView, config: SchedulerConfig) -> None:
        self.view = view
        queued = view.queued_time or NOT_RUNNING  # set for every quiet view
        self.band = 0
        rank = 0
        if config.strategy == Strategy.LEAST_ATTAINED_SERVICE:
            self.band = las_band(view.attained_service, config)
            rank, queued = las_position(
                band=self.band, queued_time=queued, units=full_units(view), config=config
            )
        self.key: OrderKey = order_key(view, queued_time=queued, rank=rank, admitted=NOT_RUNNING)
        self.shape: tuple[PodDemand, ...] = tuple(view.pod_demand(i) for i in range(view.min_size))
        self.need = view.units_at(view.min_size)


def _is_quiet(v: JobView) -> bool:
    return (
        v.stage == Stage.WAITING
        and v.current_size == 0
        and v.queued_time is not None
        and v.submit_time is not None
        and v.requeue_time is None
        and v.admitted_time is None
        and not v.suspended
        and not v.finished
        and v.problem() is None
    )


_MEMO: dict[int, tuple[JobView, SchedulerConfig, Entry | None]] = {}


def entry_for(view: JobView, config: SchedulerConfig) -> Entry | None:
    """The memoised :class:`Entry` of a quiet ``view``, ``None`` for any other view."""
    hit = _MEMO.get(id(view))
    if hit is not None and hit[0] is view and hit[1] is config:
        return hit[2]
    entry = Entry(view, config) if _is_quiet(view) else None
    _MEMO[id(view)] = (view, config, entry)
    return entry


def entries_for(views: Sequence[JobView], config: SchedulerConfig) -> list[Entry | None]:
    """:func:`entry_for` of each view, in order (the memo lookup inlined: a pass calls this
    once for every job)."""
    memo = _MEMO
    get = memo.get
    out: list[Entry | None] = []
    append = out.append
    for view in views:
        hit = get(id(view))
        if hit is not None and hit[0] is view and hit[1] is config:
            append(hit[2])
            continue
        entry = Entry(view, config) if _is_quiet(view) else None
        memo[id(view)] = (view, config, entry)
        append(entry)
    return out


def trim_memo(live: int) -> None:
    """Forget every entry once the memo holds far more than the ``live`` views of a pass."""
    if len(_MEMO) > 4 * live + 4096:
        _MEMO.clear()


class LazyDecisions(Mapping[str, Decision]):
    """Decisions by plan key: those of the jobs in ``changed`` (their changed fields) from
    ``build_one`` on first access to each, the others from ``build_rest`` when asked."""

    __slots__ = ("_all", "_build_one", "_build_rest", "_built", "_changed", "_count", "_keys")

    def __init__(
        self,
        changed: dict[str, frozenset[str]],
        *,
        count: int,
        keys: Callable[[], list[str]],
        build_one: Callable[[str], Decision],
        build_rest: Callable[[], dict[str, Decision]],
    ) -> None:
        self._changed = changed
        self._count = count
        self._keys = keys
        self._build_one = build_one
        self._build_rest = build_rest
        self._built: dict[str, Decision] = {}
        self._all: dict[str, Decision] | None = None

    def _complete(self) -> dict[str, Decision]:
        if self._all is None:
            merged = self._build_rest()
            merged.update((k, self[k]) for k in self._changed)
            self._all = {k: merged[k] for k in self._keys()}
        return self._all

    def __getitem__(self, key: str) -> Decision:
        found = self._built.get(key)
        if found is None:
            if key not in self._changed:
                return self._complete()[key]
            found = self._built[key] = self._build_one(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._complete())

    def __len__(self) -> int:
        return self._count

    def changed_keys(self, *, include_accounting: bool) -> tuple[str, ...]:
        """Keys of decisions that changed persisted state (only those in ``changed`` can),
        sorted."""
        keys = [
            k
            for k, fields in self._changed.items()
            if fields and (include_accounting or not fields <= ACCOUNTING_FIELDS)
        ]
        return tuple(sorted(keys))
