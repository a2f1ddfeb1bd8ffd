"""Per-node placement of pods on resource vectors, honouring constraints: the core's cluster.

Contract (internal to the core; mutable, one per pass, copied with :meth:`Cluster.copy`):
- Nodes are indexed in name order. Each has a free vector over the pass's resource names (the
  union of the nodes' and the demands' names; a name a node lacks is 0 there), a count of
  Lattice pods placed on it and whether an exclusive pod holds it. Its *room* is its free
  vector before any Lattice pod: the most Lattice pods can ever have there (:meth:`could_hold`).
- A pod *fits* a node when the node is ``schedulable``, its constraint admits the node
  (:meth:`~lattice.scheduler.core.model.Constraint.admits`), the node is not excluded for the
  job, every requested quantity is at most the node's free quantity, no exclusive pod holds
  the node, and, for an exclusive pod, no Lattice pod is on it.
- :meth:`Cluster.place` puts one pod on the best-fitting node: the smallest free vector,
  compared resource by resource in :func:`fit_order` (extended resources first, then cpu,
  memory, ephemeral storage, the rest, pod slots last), then the lowest node index. So GPU
  pods pack onto the fullest GPU nodes and CPU-only pods prefer nodes without GPUs.
- :meth:`Cluster.place_all` places a gang all or nothing, the pods that may use the fewest
  nodes first, then exclusive pods, then the largest (by the same order), and returns each
  pod's node in input order; a gang of several kinds of pod that does not fit so is tried once
  more, the kind with the fewest node slots to spare first (stable within that), then by a
  bounded search over buckets (:func:`~lattice.scheduler.core.packing.search`).
  :meth:`Cluster.reserve` puts a pod on a named node with no fit check (a persisted placement
  is kept even where the node is now over-committed: negative free never fits anything new);
  :meth:`Cluster.release` undoes one.
- Identical nodes (same class: labels, taints, schedulability; same free vector and state)
  share a bucket, so a search costs O(buckets of eligible classes), not O(nodes).
- :meth:`Cluster.explain` names the binding constraint of a gang that does not fit, as
  kube-scheduler's FailedScheduling does.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence

from lattice.scheduler.core.model import UNIT_RESOURCE, Constraint, PodDemand
from lattice.scheduler.core.packing import greedy, search
from lattice.scheduler.core.placement_text import why
from lattice.scheduler.core.types import NodeView

__all__ = ["Cluster", "fit_order"]

_CORE = {"cpu": 1, "memory": 2, "ephemeral-storage": 3}


def fit_order(name: str) -> tuple[int, str]:
    """Sort key of a resource name in best-fit comparisons."""
    if name == "pods":
        return (5, name)
    if "/" in name or name == UNIT_RESOURCE:
        return (0, name)
    return (_CORE.get(name, 4), name)


# A node's bucket within its class: (free vector in fit order, state: 0 empty of Lattice
# pods, 1 holding some, 2 held by an exclusive pod).
_Key = tuple[tuple[int, ...], int]


class Cluster:
    """Free resources per node, with Lattice's placements (see the module contract)."""

    __slots__ = (
        "_allowed",
        "_buckets",
        "_class_of",
        "_class_room",
        "_classes",
        "_eligible",
        "_ids",
        "_index",
        "_keys",
        "_reaches",
        "_vectors",
        "count",
        "excl",
        "free",
        "names",
        "node_index",
        "resources",
        "room",
        "total",
    )

    def __init__(self, nodes: Sequence[NodeView], demands: Iterable[PodDemand] = ()) -> None:
        ordered = sorted(nodes, key=lambda n: n.name)
        names: set[str] = set()
        frees = [n.free_resources() for n in ordered]
        for free in frees:
            names.update(name for name, _ in free)
        for d in demands:
            names.update(name for name, _ in d.requests)
        self.resources: tuple[str, ...] = tuple(sorted(names, key=fit_order))
        self._index = {name: i for i, name in enumerate(self.resources)}
        self.names = [n.name for n in ordered]
        self.node_index = {name: i for i, name in enumerate(self.names)}
        width = len(self.resources)
        self.free: list[list[int]] = []
        for free in frees:
            row = [0] * width
            for name, q in free:
                row[self._index[name]] = q
            self.free.append(row)
        self.room: list[tuple[int, ...]] = [tuple(row) for row in self.free]
        self._class_room: dict[int, tuple[int, ...]] = {}
        self.count = [0] * len(ordered)
        self.excl = [False] * len(ordered)
        self.total = [sum(max(0, row[k]) for row in self.free) for k in range(width)]
        classes: dict[tuple[object, ...], int] = {}
        self._classes: list[NodeView] = []
        self._class_of: list[int] = []
        for n in ordered:
            key = (n.labels, n.taints, n.schedulable)
            cid = classes.get(key)
            if cid is None:
                cid = classes[key] = len(self._classes)
                self._classes.append(n)
            self._class_of.append(cid)
        self._buckets: list[dict[_Key, list[int]]] = [{} for _ in self._classes]
        for i in range(len(ordered)):
            self._buckets[self._class_of[i]].setdefault(self._key(i), []).append(i)
        # Each class's bucket keys, sorted: a search bisects to the first key with enough of
        # the first resource and stops at the first key larger than the best found.
        self._keys: list[list[_Key]] = [sorted(b) for b in self._buckets]
        self._eligible: dict[Constraint, tuple[int, ...]] = {}
        self._allowed: dict[Constraint, frozenset[int] | None] = {}
        self._vectors: dict[int, tuple[PodDemand, tuple[tuple[int, int], ...]]] = {}
        self._reaches: dict[Constraint, int] = {}
        self._ids: dict[int, tuple[Constraint, tuple[int, ...], frozenset[int] | None]] = {}

    def copy(self) -> Cluster:
        clone = object.__new__(Cluster)
        clone.resources, clone._index = self.resources, self._index
        clone.names, clone.node_index = self.names, self.node_index
        clone.free, clone.room = [list(row) for row in self.free], self.room
        clone._class_room = self._class_room
        clone.count, clone.excl, clone.total = list(self.count), list(self.excl), list(self.total)
        clone._classes, clone._class_of = self._classes, self._class_of
        clone._buckets = [{k: list(v) for k, v in b.items()} for b in self._buckets]
        clone._keys = [list(keys) for keys in self._keys]
        clone._eligible, clone._allowed = self._eligible, self._allowed
        clone._vectors, clone._reaches, clone._ids = self._vectors, self._reaches, self._ids
        return clone

    def memo_size(self) -> int:  # entries in the memos by demand and constraint
        return len(self._vectors) + len(self._ids) + len(self._eligible)

    def _key(self, i: int) -> _Key:
        state = 2 if self.excl[i] else (1 if self.count[i] else 0)
        return (tuple(self.free[i]), state)

    def _vector(self, d: PodDemand) -> tuple[tuple[int, int], ...]:
        """The demand's non-zero requests as (resource index, quantity), in fit order."""
        hit = self._vectors.get(id(d))
        if hit is not None and hit[0] is d:
            return hit[1]
        index = self._index
        found = [(index[n], q) for n, q in d.requests if q > 0 and n in index]
        if any(q > 0 and n not in index for n, q in d.requests):
            found.append((-1, 1))  # a resource no node has: never fits
        vec = tuple(sorted(found))
        self._vectors[id(d)] = (d, vec)  # by identity: hashing a demand costs more
        return vec

    def vector(self, d: PodDemand) -> tuple[tuple[int, int], ...]:
        """The demand's requests as (resource index, quantity), in fit order; a resource no
        node has shows as index -1."""
        return self._vector(d)

    def eligibility(self, d: PodDemand) -> tuple[frozenset[int], frozenset[int] | None]:
        """The class ids ``d``'s constraint admits and, for ``matchFields``, the node indices;
        node ``i`` is usable when ``class_of(i)`` is in the first and ``i`` in the second."""
        classes, allowed = self._info(d.constraint)
        return frozenset(classes), allowed

    def class_could_hold(self, cid: int, d: PodDemand) -> bool:
        """Whether some node of class ``cid`` could hold ``d`` with no Lattice pod on it."""
        most = self._class_room.get(cid)
        if most is None:
            rows = [self.room[i] for i, c in enumerate(self._class_of) if c == cid]
            most = self._class_room[cid] = tuple(map(max, zip(*rows, strict=True)))
        return all(k >= 0 and most[k] >= q for k, q in self._vector(d))

    def could_hold(self, i: int, d: PodDemand) -> bool:
        """Whether node index ``i`` holds ``d`` with no Lattice pod on it (room aside from
        the constraint)."""
        room = self.room[i]
        return all(k >= 0 and room[k] >= q for k, q in self._vector(d))

    def overcommitted(self, node: str) -> bool:
        """Whether ``node`` has less than nothing free of some resource."""
        i = self.node_index.get(node)
        return i is not None and any(q < 0 for q in self.free[i])

    def classes_of(self, nodes: Iterable[str]) -> set[int]:
        """The class ids of the known ``nodes`` among ``nodes`` (empty names skipped)."""
        index, of = self.node_index, self._class_of
        return {of[index[n]] for n in nodes if n in index}

    def class_of(self, i: int) -> int:
        """The class id of node index ``i``."""
        return self._class_of[i]

    def _apply(self, i: int, d: PodDemand, sign: int) -> None:
        cid = self._class_of[i]
        bucket, keys = self._buckets[cid], self._keys[cid]
        old = self._key(i)
        nodes = bucket[old]
        del nodes[bisect_left(nodes, i)]
        if not nodes:
            del bucket[old]
            del keys[bisect_left(keys, old)]
        row, total = self.free[i], self.total
        for k, q in self._vector(d):
            if k >= 0:
                before = row[k]
                row[k] = after = before - sign * q
                total[k] += max(0, after) - max(0, before)
        self.count[i] += sign
        if d.exclusive:
            self.excl[i] = sign > 0
        new = self._key(i)
        held = bucket.get(new)
        if held is None:
            bucket[new] = [i]
            insort(keys, new)
        else:
            insort(held, i)

    def reserve(self, node: str, d: PodDemand) -> bool:
        """Put ``d`` on ``node`` without a fit check; False when the node is unknown."""
        i = self.node_index.get(node)
        if i is None:
            return False
        self._apply(i, d, 1)
        return True

    def release(self, node: str, d: PodDemand) -> None:
        """Undo one :meth:`reserve` or placement of ``d`` on ``node``."""
        i = self.node_index.get(node)
        if i is not None:
            self._apply(i, d, -1)

    def fits_on(self, node: str, d: PodDemand) -> bool:
        """Whether ``d`` could be placed on ``node`` now (the constraint included)."""
        i = self.node_index.get(node)
        if i is None:
            return False
        c = self._class_of[i]
        if c not in self._eligible_classes(d.constraint):
            return False
        allowed = self._allowed_of(d.constraint)
        if allowed is not None and i not in allowed:
            return False
        return self._room(i, d)

    def place_on(self, node: str, d: PodDemand, exclude: frozenset[int] = frozenset()) -> bool:
        """Place ``d`` on ``node`` if it fits there (constraint and exclusion included)."""
        i = self.node_index.get(node)
        if i is None or i in exclude or not self.fits_on(node, d):
            return False
        self._apply(i, d, 1)
        return True

    def buckets(
        self, d: PodDemand, exclude: frozenset[int] = frozenset(), *, first: bool = False
    ) -> Iterator[tuple[tuple[int, ...], int, list[int]]]:
        """The nodes ``d``'s constraint admits, outside ``exclude``, by bucket: (free vector,
        state, node indices ascending), state 0: no Lattice pod, 1: some, 2: an exclusive one;
        with ``first``, only buckets holding the demand's first requested resource. A list is
        valid until the cluster next changes."""
        vec = self._vector(d)
        allowed = self._allowed_of(d.constraint)
        low = ((vec[0][1],),) if first and vec and vec[0][0] == 0 else None
        for cid in self._eligible_classes(d.constraint):
            keys, bucket = self._keys[cid], self._buckets[cid]
            for j in range(0 if low is None else bisect_left(keys, low), len(keys)):
                nodes = bucket[keys[j]]
                if exclude or allowed is not None:
                    ok = allowed
                    nodes = [i for i in nodes if i not in exclude and (ok is None or i in ok)]
                if nodes:
                    yield keys[j][0], keys[j][1], nodes

    def groups(
        self, d: PodDemand, exclude: frozenset[int] = frozenset(), *, first: bool = False
    ) -> Iterator[tuple[tuple[int, ...], int, int]]:
        """:meth:`buckets` with node counts for node lists."""
        for free, state, nodes in self.buckets(d, exclude, first=first):
            yield free, state, len(nodes)

    def fit_count(self, d: PodDemand, exclude: frozenset[int] = frozenset()) -> int:
        """How many pods ``d`` fit on the cluster now, each node taken alone (an exclusive pod
        at most one per node): an upper bound on how many :meth:`place_all` places."""
        vec = self._vector(d)
        if not vec or vec[0][0] < 0:
            return 0 if vec else len(self.names)
        exclusive = d.exclusive
        out = 0
        for free, state, nodes in self.buckets(d, exclude, first=True):
            if state == 2 or (exclusive and state == 1):
                continue
            m = min(free[k] // q for k, q in vec)
            if m > 0:
                out += len(nodes) if exclusive else len(nodes) * m
        return out

    def covers(self, demands: Iterable[PodDemand]) -> bool:
        """Whether the free totals hold the sum of ``demands`` (a necessary condition)."""
        need: dict[int, int] = {}
        for d in demands:
            for k, q in self._vector(d):
                if k < 0:
                    return False
                need[k] = need.get(k, 0) + q
        total = self.total
        return all(total[k] >= q for k, q in need.items())

    def _room(self, i: int, d: PodDemand) -> bool:
        if self.excl[i] or (d.exclusive and self.count[i]):
            return False
        row = self.free[i]
        return all(k >= 0 and row[k] >= q for k, q in self._vector(d))

    # ------------------------------------------------------------------ search

    def _eligible_classes(self, c: Constraint) -> tuple[int, ...]:
        return self._info(c)[0]

    def _allowed_of(self, c: Constraint) -> frozenset[int] | None:
        return self._info(c)[1]

    def _info(self, c: Constraint) -> tuple[tuple[int, ...], frozenset[int] | None]:
        """The classes (and, for ``matchFields``, the nodes) ``c`` admits; memoised by
        identity first (hashing a constraint costs more than the lookup), then by value."""
        hit = self._ids.get(id(c))
        if hit is not None and hit[0] is c:
            return hit[1], hit[2]
        found = self._value_classes(c)
        allowed = self._allowed[c]
        self._ids[id(c)] = (c, found, allowed)
        return found, allowed

    def _value_classes(self, c: Constraint) -> tuple[int, ...]:
        found = self._eligible.get(c)
        if found is None:
            fields = c.terms is not None and any(r.field for t in c.terms for r in t)
            out = []
            for cid, n in enumerate(self._classes):
                if not n.schedulable:
                    continue
                labels = dict(n.labels)
                if fields or c.admits(name=n.name, labels=labels, taints=n.taints):
                    out.append(cid)
            found = self._eligible[c] = tuple(out)
            allowed: frozenset[int] | None = None
            if fields:
                allowed = frozenset(
                    i
                    for i, name in enumerate(self.names)
                    if self._class_of[i] in found
                    and c.admits(
                        name=name,
                        labels=dict(self._classes[self._class_of[i]].labels),
                        taints=self._classes[self._class_of[i]].taints,
                    )
                )
            self._allowed[c] = allowed
        return found

    def _best(self, d: PodDemand, exclude: frozenset[int]) -> int | None:
        vec = self._vector(d)
        if vec and vec[0][0] < 0:
            return None
        total = self.total
        if any(total[k] < q for k, q in vec):
            return None
        classes = self._eligible_classes(d.constraint)
        allowed = self._allowed_of(d.constraint)
        best: tuple[tuple[int, ...], int] | None = None
        exclusive = d.exclusive
        k0, q0 = vec[0] if vec else (-1, 0)
        # Keys sort by free vector in fit order: with the first resource requested, the
        # first candidate is the first key holding q0 of it.
        low: tuple[tuple[int, ...]] | None = ((q0,),) if k0 == 0 else None
        for cid in classes:
            keys = self._keys[cid]
            bucket = self._buckets[cid]
            start = 0 if low is None else bisect_left(keys, low)
            for j in range(start, len(keys)):
                free, state = keys[j]
                if best is not None and free > best[0]:
                    break
                if state == 2 or (exclusive and state == 1):
                    continue
                if any(free[k] < q for k, q in vec):
                    continue
                pick = _first(bucket[keys[j]], exclude, allowed)
                if pick is not None and (best is None or (free, pick) < best):
                    best = (free, pick)
        return None if best is None else best[1]

    def place(self, d: PodDemand, exclude: frozenset[int] = frozenset()) -> str | None:
        """Place one pod best-fit; its node, or ``None`` when it fits nowhere."""
        i = self._best(d, exclude)
        if i is None:
            return None
        self._apply(i, d, 1)
        return self.names[i]

    def place_all(
        self,
        demands: Sequence[PodDemand],
        exclude: frozenset[int] = frozenset(),
        *,
        thorough: bool = True,
    ) -> list[str] | None:
        """Place every pod or none; their nodes in input order. Largest first; a gang of
        several kinds of pod that does not fit so is tried once more scarcest kind first (the
        kind with the fewest node slots to spare), when every kind has slots enough alone, then
        (when ``thorough``) by :func:`~lattice.scheduler.core.packing.search` in that order."""
        order: Sequence[int] = range(n := len(demands))
        if n > 1 and demands.count(demands[0]) < n:  # else one kind: sorting keeps the order
            order = sorted(order, key=lambda j: self._size_key(demands[j]))
        out = greedy(self, demands, order, exclude)
        if out is not None or len(set(demands)) < 2:
            return out
        wanted: dict[PodDemand, int] = {}
        for d in demands:
            wanted[d] = wanted.get(d, 0) + 1
        spare = {d: self.fit_count(d, exclude) - n for d, n in wanted.items()}
        if any(v < 0 for v in spare.values()):
            return None
        order = sorted(order, key=lambda j: spare[demands[j]])
        out = greedy(self, demands, order, exclude)
        if out is not None or not thorough:
            return out
        return search(self, demands, order, exclude)

    def fits_all(self, demands: Sequence[PodDemand], exclude: frozenset[int] = frozenset()) -> bool:
        """Whether :meth:`place_all` would succeed; the cluster is left unchanged."""
        nodes = self.place_all(demands, exclude)
        if nodes is None:
            return False
        for node, d in zip(nodes, demands, strict=True):
            self.release(node, d)
        return True

    def exclusion(self, names: Iterable[str]) -> frozenset[int]:
        """Node indices of ``names`` (unknown names ignored)."""
        index = self.node_index
        return frozenset(index[n] for n in names if n in index)

    def _size_key(self, d: PodDemand) -> tuple[object, ...]:
        width = len(self.resources)
        row = [0] * width
        for k, q in self._vector(d):
            if k >= 0:
                row[k] = q
        return (self._reach(d.constraint), not d.exclusive, tuple(-q for q in row))

    def _reach(self, c: Constraint) -> int:
        """How many nodes a pod under ``c`` may use (the most constrained pods go first)."""
        found = self._reaches.get(c)
        if found is None:
            classes = set(self._eligible_classes(c))
            allowed = self._allowed_of(c)
            if allowed is not None:
                found = len(allowed)
            else:
                found = sum(1 for cid in self._class_of if cid in classes)
            self._reaches[c] = found
        return found

    # ------------------------------------------------------------------ messages

    def explain(self, demands: Sequence[PodDemand], exclude: frozenset[int] = frozenset()) -> str:
        """Why ``demands`` do not fit, naming the first pod's binding constraint."""
        for d in sorted(demands, key=self._size_key):
            if self._best(d, exclude) is None:
                return why(self, d, exclude)
        return f"{len(demands)} pods do not fit together (fragmented across nodes)"

    def node_classes(self) -> Sequence[NodeView]:
        """One node of each class, by class id."""
        return self._classes

    def unit_free(self) -> int:
        """Free :data:`UNIT_RESOURCE` in total (0 when the model has none)."""
        k = self._index.get(UNIT_RESOURCE)
        return 0 if k is None else self.total[k]


def _first(nodes: list[int], exclude: frozenset[int], allowed: frozenset[int] | None) -> int | None:
    if not exclude and allowed is None:
        return nodes[0]
    for i in nodes:
        if i not in exclude and (allowed is None or i in allowed):
            return i
    return None
