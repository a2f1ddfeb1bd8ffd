"""Per-node fit checks on a histogram of nodes by free units.

Node identity does not matter for deciding *whether* pods fit, only how many nodes have how
many free units. A :class:`Histogram` keeps ``free units -> node count`` (nodes with 0 free
units are dropped) plus the sorted list of distinct free values, so a placement costs
O(distinct free values), not O(nodes) per pod.

Placement policy (the contract the tests re-implement node by node):
- Pods of a job are placed largest first (*best-fit decreasing*): each pod goes on a node
  with the smallest free value that still holds it. Pods needing 0 units always fit.
- For ``n`` identical pods, per-pod best fit is the same as filling nodes completely in
  ascending order of free units (after a pod lands on the smallest feasible node, that node
  is still the smallest feasible one). :meth:`Histogram.place` does exactly that in bulk.
- :meth:`Histogram.try_place` is all-or-nothing (a failed attempt is rolled back);
  :meth:`Histogram.place` may place fewer pods than asked (used to grow replica by replica).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

__all__ = ["Histogram", "Shape", "make_shape"]

# A job's pods as ((units, count), ...), largest units first, 0-unit pods omitted.
Shape = tuple[tuple[int, int], ...]

# One journal entry: `count` nodes moved from `src` free units to `dst` free units.
_Move = tuple[int, int, int]


class Histogram:
    """Free units per node, as a multiset. Mutable; copy with :meth:`copy`."""

    __slots__ = ("_counts", "_keys", "total")

    def __init__(self, free_units: Iterable[int] = ()) -> None:
        self._counts: dict[int, int] = {}
        self.total = 0
        for free in free_units:
            if free > 0:
                self._counts[free] = self._counts.get(free, 0) + 1
                self.total += free
        self._keys: list[int] = sorted(self._counts)

    def copy(self) -> Histogram:
        clone = Histogram()
        clone._counts = dict(self._counts)
        clone._keys = list(self._keys)
        clone.total = self.total
        return clone

    @property
    def largest(self) -> int:
        """The largest free value of any node (0 when every node is full)."""
        return self._keys[-1] if self._keys else 0

    def items(self) -> list[tuple[int, int]]:
        """``(free units, node count)`` pairs, ascending."""
        return [(k, self._counts[k]) for k in self._keys]

    def fits_one(self, units: int) -> bool:
        """Whether one more pod of ``units`` fits on some node."""
        return units <= 0 or self.largest >= units

    def _move(self, src: int, dst: int, count: int) -> None:
        counts = self._counts
        left = counts[src] - count
        if left:
            counts[src] = left
        else:
            del counts[src]
            keys = self._keys
            del keys[bisect_left(keys, src)]
        self.total -= (src - dst) * count
        if dst > 0:
            have = counts.get(dst, 0)
            counts[dst] = have + count
            if not have:
                insort(self._keys, dst)

    def place(self, units: int, n: int, *, journal: list[_Move] | None = None) -> int:
        """Place up to ``n`` pods of ``units`` (> 0) best-fit; return how many were placed."""
        keys = self._keys
        start = bisect_left(keys, units)
        if start == len(keys):
            return 0
        placed = 0
        counts = self._counts
        # Moves only ever target values below `units` (full nodes) or, for the last partial
        # node, a value we never revisit, so iterating a copy of the tail is safe.
        for free in keys[start:]:
            want = n - placed
            if want <= 0:
                break
            per_node = free // units
            nodes = counts[free]
            full = min(nodes, want // per_node)
            if full:
                dst = free - per_node * units
                self._move(free, dst, full)
                if journal is not None:
                    journal.append((free, dst, full))
                placed += full * per_node
                want -= full * per_node
            if want and full < nodes:
                dst = free - want * units
                self._move(free, dst, 1)
                if journal is not None:
                    journal.append((free, dst, 1))
                placed += want
        return placed

    def rollback(self, journal: list[_Move]) -> None:
        """Undo the moves of ``journal`` (newest first)."""
        for src, dst, count in reversed(journal):
            if dst > 0:
                self._move(dst, src, count)
            else:
                counts = self._counts
                have = counts.get(src, 0)
                counts[src] = have + count
                if not have:
                    insort(self._keys, src)
                self.total += src * count

    def fits(self, shape: Shape) -> bool:
        """Whether every pod of ``shape`` would fit; the histogram is left unchanged."""
        journal: list[_Move] = []
        if self.try_place(shape, journal):
            self.rollback(journal)
            return True
        return False

    def try_place(self, shape: Shape, journal: list[_Move] | None = None) -> bool:
        """Place every pod of ``shape`` or none of them; successful moves go to ``journal``."""
        need = 0
        for units, count in shape:
            need += units * count
        if need > self.total or (shape and shape[0][0] > self.largest):
            return False
        moves: list[_Move] = [] if journal is None else journal
        mark = len(moves)
        for units, count in shape:
            if self.place(units, count, journal=moves) != count:
                self.rollback(moves[mark:])
                del moves[mark:]
                return False
        return True


def make_shape(*, fixed_pods: tuple[int, ...], replica_units: int, replicas: int) -> Shape:
    """The :data:`Shape` of fixed pods plus ``replicas`` replicas, largest units first."""
    groups: dict[int, int] = {}
    for units in fixed_pods:
        if units > 0:
            groups[units] = groups.get(units, 0) + 1
    if replica_units > 0 and replicas > 0:
        groups[replica_units] = groups.get(replica_units, 0) + replicas
    return tuple(sorted(groups.items(), reverse=True))
