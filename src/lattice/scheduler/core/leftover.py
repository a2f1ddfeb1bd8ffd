"""The quiet jobs a pass leaves waiting, recorded as runs of the backlog.

Contract (internal to the core): a pass records the quiet jobs it leaves waiting as *runs*
(:data:`Left`): backlog indices ``start`` to ``stop``, the number of candidates left waiting
before them, the free units when they were checked, and the StrictFIFO blocker ahead of them
(``None`` if none). A job's queue position is that number plus its 1-based place in the run.
:func:`from_entry` gives a quiet job's working state with the LAS rank its order key was
built from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from lattice.scheduler.core.backlog import Backlog
from lattice.scheduler.core.order import OrderKey
from lattice.scheduler.core.quiet import Entry
from lattice.scheduler.core.state import JobState
from lattice.scheduler.core.types import JobView

__all__ = ["Left", "from_entry", "left_items"]

Left = tuple[int, int, int, int, JobView | None]


def left_items(
    left: Iterable[Left], q: Backlog
) -> Iterator[tuple[Entry, OrderKey, int, int, JobView | None]]:
    """Each quiet job left waiting: (entry, key, queue position, free units at its check,
    the StrictFIFO blocker ahead of it), in order."""
    keys, entries = q.keys, q.entries
    for start, stop, before, free_at, blocker in left:
        for i in range(start, stop):
            yield entries[i], keys[i], before + i - start + 1, free_at, blocker


def from_entry(e: Entry, key: OrderKey) -> JobState:
    """A quiet job's working state, with the LAS rank its order key was built from."""
    s = JobState(e.view)
    s.key = key
    s.band = e.band
    s.rank = key[1]
    s.min_shape = e.shape
    return s
