"""The quiet jobs of a pass in scheduling order, kept from one pass to the next.

Contract (internal to the core; it only skips work, never changes a plan):
- :func:`backlog` splits a snapshot's jobs into the *quiet* ones (:mod:`.quiet`), as a
  :class:`Backlog` sorted by each entry's order key (which never changes with the clock), and
  the others, as views. Entries are grouped
  in *classes* of equal (minimum shape, priority): within one walk, what may be skipped is
  the same for every entry of a class (:mod:`.core`).
- The previous pass's backlog is kept, keyed by the views' identities (views are immutable)
  and the config's identity: the next pass drops the views that left and inserts the new
  quiet views, instead of sorting every
  quiet job again. A config change, a clock going back or a large change rebuilds it. A
  backlog once returned is never changed (later passes copy before changing), so a plan's
  lazily built parts may read it.
- :func:`set_caching` (tests only) turns both the reuse and the skipping of
  :mod:`.core`'s walk off, so that a pass processes every quiet job one by one: the plan must
  be the same either way.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from itertools import compress
from operator import attrgetter

from lattice.scheduler.core.model import PodDemand
from lattice.scheduler.core.order import OrderKey
from lattice.scheduler.core.quiet import Entry, entry_for, trim_memo
from lattice.scheduler.core.types import JobChanges, JobView, SchedulerConfig

__all__ = ["Backlog", "Class", "backlog", "caching", "set_caching"]

_NONE: frozenset[int] = frozenset()
_KEY = attrgetter("key")
_CACHING = [True]


def set_caching(enabled: bool) -> None:
    """Turn the backlog's reuse and the walk's skipping on or off (for tests)."""
    _CACHING[0] = enabled
    _STATE.clear()


def caching() -> bool:
    """Whether reuse and skipping are on."""
    return _CACHING[0]


@dataclass(slots=True, eq=False)
class Class:
    """The quiet entries of one (minimum shape, priority), by their keys in order."""

    shape: tuple[PodDemand, ...]
    priority: int
    keys: list[OrderKey] = field(default_factory=list)
    #: The memo keys a walk checks (:mod:`.core`'s ``failed`` and ``hopeless``).
    memo: tuple[tuple[PodDemand, ...], frozenset[int]] = field(init=False)
    hopeless: tuple[tuple[PodDemand, ...], frozenset[int], int] = field(init=False)

    def __post_init__(self) -> None:
        self.memo = (self.shape, _NONE)
        self.hopeless = (self.shape, _NONE, self.priority)


@dataclass(slots=True, eq=False)
class Backlog:
    """Quiet entries sorted by key (``keys[i]`` is ``entries[i]``'s), and their classes."""

    config: SchedulerConfig
    now: datetime
    keys: list[OrderKey] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    classes: list[Class] = field(default_factory=list)
    #: id(view) -> entry of every quiet view (the entry holds the view: ids stay unique).
    live: dict[int, Entry] = field(default_factory=dict)
    by_class: dict[tuple[tuple[PodDemand, ...], int], int] = field(default_factory=dict)
    #: The keys of the live entries.
    held: set[str] = field(default_factory=set)
    #: id(view) of the entries the last pass admitted (most likely gone from the next one).
    admitted: list[int] = field(default_factory=list)
    #: The snapshot's jobs it was built from, the views that are not quiet by id, and every
    #: job's key (``None``: not kept).
    jobs: Sequence[JobView] = ()
    others: dict[int, JobView] = field(default_factory=dict)
    names: set[str] | None = None

    def class_of(self, e: Entry) -> Class:
        ck = (e.shape, e.view.priority)
        ci = self.by_class.get(ck)
        if ci is None:
            ci = self.by_class[ck] = len(self.classes)
            self.classes.append(Class(e.shape, e.view.priority))
        return self.classes[ci]


class _Writer:
    """Changes to a backlog taken over from the previous pass: ``keys`` and ``entries`` are
    copied before the first one (a plan's lazy parts may still read them); the rest is read
    only by the walk of the pass that built it, and changes in place."""

    def __init__(self, b: Backlog) -> None:
        self.b = b
        self.copied = False

    def _class(self, e: Entry) -> Class:
        b = self.b
        if not self.copied:
            b.keys, b.entries = list(b.keys), list(b.entries)
            self.copied = True
        return b.class_of(e)

    def remove(self, e: Entry, key: OrderKey) -> None:
        c = self._class(e)
        b = self.b
        i = bisect_left(b.keys, key)
        if b.entries[i] is not e:
            raise AssertionError("backlog out of step with its entries")
        del b.keys[i], b.entries[i]
        del c.keys[bisect_left(c.keys, key)]

    def insert(self, e: Entry, key: OrderKey) -> None:
        c = self._class(e)
        b = self.b
        i = bisect_left(b.keys, key)
        b.keys.insert(i, key)
        b.entries.insert(i, e)
        insort(c.keys, key)


_STATE: list[Backlog] = []
if tuple(f.name for f in fields(Backlog)) != (  # pragma: no cover - guards _successor
    *("config", "now", "keys", "entries", "classes", "live", "by_class", "held", "admitted"),
    *("jobs", "others", "names"),
):
    raise ImportError("Backlog's fields must follow _successor's order")


def _fresh(quiet: list[Entry], config: SchedulerConfig, now: datetime) -> Backlog:
    b = Backlog(config=config, now=now)
    pairs = sorted(((e.key, e) for e in quiet), key=_first)
    b.keys = [k for k, _ in pairs]
    b.entries = [e for _, e in pairs]
    for k, e in pairs:
        b.class_of(e).keys.append(k)
        b.live[id(e.view)] = e
        b.held.add(e.view.key)
    return b


def _first(pair: tuple[OrderKey, Entry]) -> OrderKey:
    return pair[0]


def _check_keys(jobs: Sequence[JobView]) -> None:
    if len(set(map(_KEY, jobs))) != len(jobs):
        seen: set[str] = set()
        for view in jobs:
            if view.key in seen:
                raise ValueError(f"duplicate job key {view.key!r}")
            seen.add(view.key)


def backlog(
    jobs: Sequence[JobView],
    config: SchedulerConfig,
    now: datetime,
    changes: JobChanges | None = None,
) -> tuple[Backlog, list[JobView]]:
    """The quiet jobs of ``jobs`` as a backlog, and the other views (see the contract).
    Raises ``ValueError`` on a duplicate job key."""
    trim_memo(len(jobs))
    prev = _STATE.pop() if _STATE else None  # put back only once this pass is through
    if prev is not None and (prev.config is not config or now < prev.now):
        prev = None
    if prev is not None and changes is not None and changes.base is prev.jobs:
        found = _from_changes(prev, changes, jobs, now)
        if found is not None:
            if _CACHING[0]:
                _STATE[:] = [found[0]]
            return found
        prev = None
    ids = list(map(id, jobs))
    current = set(ids)
    gone: list[int] = []
    new: list[JobView] = []
    if prev is not None and len(current) == len(jobs):
        live = prev.live
        fresh = current.difference(live)  # the views that are not quiet, and new quiet ones
        new = list(compress(jobs, map(fresh.__contains__, ids)))
        missing = len(live) - len(jobs) + len(new)
        gone = [i for i in prev.admitted if i in live and i not in current]
        if len(gone) != missing:  # the guess (the views admitted last pass) fell short
            gone = list(live.keys() - current)
        if missing + len(new) > len(jobs) // 2 + 64 or not _unique(prev, gone, new):
            prev = None
    else:
        prev = None
    if prev is None:
        _check_keys(jobs)
        others: list[JobView] = []
        quiet: list[Entry] = []
        for view in jobs:
            e = entry_for(view, config)
            if e is None:
                others.append(view)
            else:
                quiet.append(e)
        b = _fresh(quiet, config, now)
        b.names = set(map(_KEY, jobs))
    else:
        b, others = _update(prev, gone, new, now)
        b.names = None
    b.jobs = jobs
    b.others = {id(v): v for v in others}
    if _CACHING[0]:
        _STATE[:] = [b]
    return b, others


def _unique(prev: Backlog, gone: list[int], new: list[JobView]) -> bool:
    """Whether the keys stay unique: the previous pass's were, so a duplicate involves a view
    that was not in its backlog."""
    keys = [v.key for v in new]
    if len(set(keys)) != len(keys):
        return False
    held = prev.held
    dropped = {prev.live[i].view.key for i in gone}
    return not any(k in held and k not in dropped for k in keys)


def _successor(b: Backlog, *, jobs: Sequence[JobView], names: set[str] | None) -> Backlog:
    """A new holder of ``b``'s parts (``admitted`` empty), so that the old keys stay as they are
    (:class:`_Writer`); positionally, as ``dataclasses.replace`` costs several times more."""
    return Backlog(
        b.config,
        b.now,
        b.keys,
        b.entries,
        b.classes,
        b.live,
        b.by_class,
        b.held,
        [],
        jobs,
        b.others,
        names,
    )


def _update(
    b: Backlog, gone: list[int], new: list[JobView], now: datetime
) -> tuple[Backlog, list[JobView]]:
    """The previous backlog, changed to this pass (see the contract)."""
    b = _successor(b, jobs=b.jobs, names=b.names)
    w = _Writer(b)
    live = b.live
    for i in gone:
        e = live.pop(i)
        b.held.discard(e.view.key)
        w.remove(e, e.key)
    b.now = now
    others: list[JobView] = []
    config = b.config
    for view in new:
        found = entry_for(view, config)
        if found is None:
            others.append(view)
            continue
        live[id(view)] = found
        b.held.add(view.key)
        w.insert(found, found.key)
    return b, others


def _from_changes(
    prev: Backlog, ch: JobChanges, jobs: Sequence[JobView], now: datetime
) -> tuple[Backlog, list[JobView]] | None:
    """The previous backlog changed by ``ch`` (see the contract); ``None`` when the change is
    large, or a duplicate key (or a view gone that was not there) calls for a rebuild."""
    gone, added = ch.gone, ch.added
    if len(jobs) != len(ch.base) - len(gone) + len(added):
        return None
    if len(gone) + len(added) > len(jobs) // 2 + 64:
        return None
    live, others = prev.live, prev.others
    quiet_gone: list[int] = []
    other_gone: list[int] = []
    for v in gone:
        e = live.get(id(v))
        if e is not None and e.view is v:
            quiet_gone.append(id(v))
        elif others.get(id(v)) is v:
            other_gone.append(id(v))
        else:
            return None
    names = prev.names if prev.names is not None else set(map(_KEY, ch.base))
    dropped = set(map(_KEY, gone))
    keys = list(map(_KEY, added))
    if len(set(keys)) != len(keys) or any(k in names and k not in dropped for k in keys):
        return None
    b = _successor(prev, jobs=jobs, names=names)
    w = _Writer(b)
    for i in quiet_gone:
        e = live.pop(i)
        b.held.discard(e.view.key)
        w.remove(e, e.key)
    for i in other_gone:
        del others[i]
    names.difference_update(dropped)
    names.update(keys)
    b.now = now
    config = b.config
    for view in added:
        found = entry_for(view, config)
        if found is None:
            others[id(view)] = view
            continue
        live[id(view)] = found
        b.held.add(view.key)
        w.insert(found, found.key)
    return b, list(others.values())
