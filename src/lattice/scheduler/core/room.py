"""Jobs' pods on the cluster: keeping persisted placements, placing, and making room.

Contract (internal to the core; the rules are stated in :mod:`lattice.scheduler.core.core`):
- :func:`reserve_running` puts a running job's persisted placement on the cluster before the
  walk: pod ``i`` stays on ``placement[i]`` when that node is still known and not among the
  job's refused nodes (:func:`refusals`: only once the refusal is ``refusal_grace`` old);
  otherwise the pod is unplaced (``""``) and must be placed again.
- :func:`place_missing` places a job's unplaced pods below an index, all or none.
- :func:`make_room` is preemption: to place a job's missing minimum it releases, in this
  order, the growth (pods at ``min_size`` and above) of every other job that holds some, the
  job latest in order first and its highest index first, then the whole placement of jobs
  later in order than it, the latest first; once the pods fit it places them and gives back,
  best in order first, every released pod that still fits where it was (a job's pods in index
  order, stopping at the first that no longer fits; a minimum only whole). A job already
  admitted in this pass keeps its minimum, and a protected job (rigid, not checkpointing)
  yields its minimum only to a higher priority. It returns whether
  the job was placed; when not, everything released is put back. Only jobs holding pods on
  nodes where a pod of the gang that lacks room (:class:`~lattice.scheduler.core.probe.
  ReleaseProbe`'s scarce demands) may go are released. The releases are first made on paper
  (the probe) until its necessary condition holds; none do: nothing changes. Then pods are
  released for real only on nodes where a scarce pod then fits, or that are over-committed:
  elsewhere the gang's placement is the same and every pod would be given back, so they stay.
  When the gang still does not fit together, holders are then released one at a time where any
  pod of the gang may go (a scarce pod may have pushed another off the node it fitted on),
  the gang tried greedily after each and, once all are released, by the bounded search too.
- :func:`release_from` releases a job's pods from an index up, highest index first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta

from lattice.scheduler.core.model import PodDemand
from lattice.scheduler.core.order import OrderKey, is_protected
from lattice.scheduler.core.placement import Cluster
from lattice.scheduler.core.probe import ReleaseProbe
from lattice.scheduler.core.state import JobState
from lattice.scheduler.core.types import JobView

__all__ = [
    "Holders",
    "growth_floor",
    "make_room",
    "min_demands",
    "place_missing",
    "refusals",
    "release_from",
    "reserve_running",
]


def refusals(v: JobView, *, now: datetime, grace: timedelta) -> frozenset[str]:
    """The nodes that count as refused for ``v`` now: its refused nodes, once its pods have
    been Unschedulable (``pending_since``) for ``grace``."""
    since = v.pending_since
    if not v.refused_nodes or since is None or now - since < grace:
        return frozenset()
    return frozenset(v.refused_nodes)


def reserve_running(s: JobState, cluster: Cluster, refused: frozenset[str]) -> None:
    """Keep the persisted placement of a job that runs on input (see the contract)."""
    v = s.view
    s.exclude = cluster.exclusion(refused) if refused else frozenset()
    placement = v.placement
    placed: list[str] = []
    for i in range(s.held):
        node = placement[i] if i < len(placement) else ""
        if node and node not in refused and cluster.reserve(node, v.pod_demand(i)):
            placed.append(node)
        else:
            placed.append("")
    s.placed = placed


def growth_floor(s: JobState) -> int:
    """The size below which a job's pods are not growth others may take: its minimum."""
    return s.view.min_size


# id(view) -> (view, its minimum's demands): views are immutable, so a hit is exact.
_SHAPES: dict[int, tuple[JobView, tuple[PodDemand, ...]]] = {}


def min_demands(s: JobState) -> tuple[PodDemand, ...]:
    """The demands of the pods of ``s``'s minimum, by index (memoised per view)."""
    v = s.view
    hit = _SHAPES.get(id(v))
    if hit is not None and hit[0] is v:
        return hit[1]
    if len(_SHAPES) > 8192:
        _SHAPES.clear()
    shape = tuple(v.pod_demand(i) for i in range(v.min_size))
    _SHAPES[id(v)] = (v, shape)
    return shape


def missing(s: JobState, upto: int) -> list[int]:
    """Indices below ``upto`` that have no node."""
    placed = s.placed
    if len(placed) >= upto and all(placed[:upto]):
        return []
    return [i for i in range(upto) if i >= len(placed) or not placed[i]]


def place_missing(s: JobState, cluster: Cluster, upto: int, holders: Holders) -> bool:
    """Place the unplaced pods of ``s`` below ``upto``, all or none (``holders`` noted)."""
    todo = missing(s, upto)
    if not todo:
        return True
    v = s.view
    nodes = cluster.place_all([v.pod_demand(i) for i in todo], s.exclude)
    if nodes is None:
        return False
    _fill(s, todo, nodes)
    holders.note(s, cluster)
    return True


def _fill(s: JobState, indices: Sequence[int], nodes: Sequence[str]) -> None:
    placed = s.placed
    if len(placed) < max(indices) + 1:
        placed.extend([""] * (max(indices) + 1 - len(placed)))
    for i, node in zip(indices, nodes, strict=True):
        placed[i] = node


def release_from(s: JobState, cluster: Cluster, start: int) -> list[str]:
    """Release the pods of ``s`` at ``start`` and above; return their nodes (by index)."""
    placed = s.placed
    v = s.view
    for i in range(len(placed) - 1, start - 1, -1):
        if placed[i]:
            cluster.release(placed[i], v.pod_demand(i))
    removed = placed[start:]
    del placed[start:]
    return removed


def _restore(s: JobState, cluster: Cluster, start: int, nodes: list[str], *, check: bool) -> None:
    """Put back pods of ``s`` from ``start`` on ``nodes`` (see the contract)."""
    _give_back(s, cluster, _Released(s, start, nodes, [False] * len(nodes)), check=check)


class _Released:
    """Pods of one holder taken back from ``start`` on (their nodes by index); ``kept`` marks
    those still reserved on the cluster: a pod on a node the gang cannot use after the
    releases changes nothing for the gang, so it is released only on paper."""

    __slots__ = ("h", "kept", "nodes", "start")

    def __init__(self, h: JobState, start: int, nodes: list[str], kept: list[bool]) -> None:
        self.h, self.start, self.nodes, self.kept = h, start, nodes, kept

    def release_kept(self, cluster: Cluster, first: int = 0) -> None:
        """Release the pods still reserved from offset ``first`` on (then released for
        real)."""
        v = self.h.view
        for offset in range(len(self.nodes) - 1, first - 1, -1):
            if self.kept[offset]:
                cluster.release(self.nodes[offset], v.pod_demand(self.start + offset))
                self.kept[offset] = False


def _take(h: JobState, cluster: Cluster, start: int, really: Callable[[str], bool]) -> _Released:
    """Take back the pods of ``h`` from ``start``, releasing on the cluster those ``really``
    names the node of (highest index first)."""
    placed = h.placed
    v = h.view
    kept = [False] * max(0, len(placed) - start)
    for i in range(len(placed) - 1, start - 1, -1):
        node = placed[i]
        if node:
            if really(node):
                cluster.release(node, v.pod_demand(i))
            else:
                kept[i - start] = True
    out = _Released(h, start, placed[start:], kept)
    del placed[start:]
    return out


def _give_back(s: JobState, cluster: Cluster, r: _Released, *, check: bool) -> None:
    """Put back the pods of ``r`` (``check``: in index order, stopping at the first that no
    longer fits, a minimum only whole; else all, as they were)."""
    v = s.view
    for offset, node in enumerate(r.nodes):
        d = v.pod_demand(r.start + offset)
        if r.kept[offset]:
            s.placed.append(node)
            continue
        if node and check and not cluster.fits_on(node, d):
            r.release_kept(cluster, offset)
            break
        if node:
            cluster.reserve(node, d)
        s.placed.append(node)
    if check and r.start < v.min_size and len(s.placed) < v.min_size:
        release_from(s, cluster, r.start)


_MostKey = tuple[PodDemand, frozenset[int], bool]


class Holders:
    """The jobs holding reserved pods at the start of a pass, in scheduling order, and those
    of them holding growth (pruned as their growth is released)."""

    __slots__ = ("_classes", "_relevant", "all", "gen", "growers", "most", "no_fit", "no_room")

    def __init__(self, states: Sequence[JobState]) -> None:
        self.all = list(states)
        self.growers = [h for h in self.all if len(h.placed) > h.view.min_size]
        # Replicas that found no room even taking later jobs' growth, with the release
        # generation then: while nothing is released, a later job's replica finds none either
        # (it may take less growth: only that of jobs later than itself).
        self.no_room: dict[tuple[PodDemand, frozenset[int]], int] = {}
        # Growth replicas that did not fit on the free nodes, with the release generation
        # then: while nothing is released the free room only shrinks, so they fit no better.
        self.no_fit: dict[tuple[PodDemand, frozenset[int]], int] = {}
        # The most pods of a demand that found room after releasing everything make_room may
        # take, with the generation, order key and priority then: a later job of no higher
        # priority in the same generation may take no more (its candidates are a subset), so
        # it needs no dry run to fail.
        self.most: dict[_MostKey, tuple[int, OrderKey, int, int]] = {}
        self.gen = 0
        # The node classes each holder has pods in (a superset: pods only leave during the
        # walk, and :meth:`note` adds new ones), and per set of classes the holders (all, and
        # those holding growth then) with pods there, in order.
        self._classes: dict[int, set[int]] | None = None
        self._relevant: dict[frozenset[int], tuple[list[JobState], list[JobState]]] = {}

    def relevant(
        self, classes: frozenset[int], cluster: Cluster, *, remember: bool = True
    ) -> tuple[list[JobState], list[JobState]]:
        """The holders with pods in ``classes`` (all, and those with growth), in order; not
        ``remember``: not kept for later calls (asked while pods are released for a while,
        when a holder's growth is missing that may be given back)."""
        if self._classes is None:
            self._classes = {id(h): _classes_of(h.placed, cluster) for h in self.all}
        hit = self._relevant.get(classes)
        if hit is None:
            of = self._classes
            found = [h for h in self.all if not of[id(h)].isdisjoint(classes)]
            hit = (found, [h for h in found if len(h.placed) > h.view.min_size])
            if remember:
                self._relevant[classes] = hit
        return hit

    def note(self, s: JobState, cluster: Cluster) -> None:
        """Record that ``s`` got pods placed (it may now hold pods in more classes)."""
        of = self._classes
        if of is None or id(s) not in of:
            return
        new = cluster.classes_of(s.placed)
        if not new <= of[id(s)]:
            of[id(s)] |= new
            self._relevant = {}

    def growth_after(self, key: OrderKey) -> Iterator[JobState]:
        """Holders later in order than ``key`` with growth above their floor, latest first."""
        for h in reversed(self.growers):
            if h.key is None or h.key <= key:
                return
            if len(h.placed) > growth_floor(h):
                yield h


# The node classes of a tuple of node names, for the cluster (by its node index) they were
# found on: a running job's pods mostly sit where they sat in the last pass.
_OWNER: list[dict[str, int]] = []
_CLASSES: dict[tuple[str, ...], frozenset[int]] = {}


def _classes_of(placed: list[str], cluster: Cluster) -> set[int]:
    """``cluster.classes_of(placed)`` (a new set), memoised per cluster node index."""
    memo = _CLASSES
    if not _OWNER or _OWNER[0] is not cluster.node_index or len(memo) > 4096:
        memo.clear()
        _OWNER[:] = [cluster.node_index]
    key = tuple(placed)
    found = memo.get(key)
    if found is None:
        found = memo[key] = frozenset(cluster.classes_of(placed))
    return set(found)


def make_room(s: JobState, holders: Holders, cluster: Cluster, *, minimums: bool = True) -> bool:
    """Preempt for the missing minimum of ``s`` (see the contract); without ``minimums``
    only growth is taken."""
    todo = missing(s, s.view.min_size)
    if not todo:
        return True
    v = s.view
    demands = [v.pod_demand(i) for i in todo]
    key = s.key
    if key is None:
        return False
    # A dry run first: release nothing until the steps so far would give the gang room
    # (ReleaseProbe's necessary condition); none do, and nothing is touched.
    memo = (s.exclude, minimums) if not s.placed else None
    if memo is not None and _known_short(holders, demands, memo, key, v.priority):
        return False
    probe = ReleaseProbe(cluster, demands, s.exclude)
    steps: list[tuple[JobState, int]] = []
    candidates = _candidates(
        s, holders, key, minimums=minimums, classes=probe.classes(), cluster=cluster
    )
    upto: dict[int, int] = {}  # holder -> lowest index released in the dry run
    usable = probe.usable
    for h, start in candidates:
        placed = h.placed
        end = upto.get(id(h), len(placed))
        if not any(map(usable, placed[start:end])):
            continue  # nothing it holds is where the gang's pods may go
        pods = [(placed[i], h.view.pod_demand(i)) for i in range(start, end) if placed[i]]
        upto[id(h)] = min(start, end)
        steps.append((h, start))
        probe.add(pods)
        if probe.enough():
            break
    else:
        if memo is not None:
            for d, room in probe.room.items():
                holders.most[(d, *memo)] = (holders.gen, key, v.priority, room)
        return False
    # Release for real only where the gang may land: on nodes where, after the whole prefix,
    # one of its pods fits (elsewhere the gang's placement is the same either way), and on
    # over-committed nodes (where giving back may fail).
    seen: dict[str, bool] = {}

    def really(node: str) -> bool:
        hit = seen.get(node)
        if hit is None:
            hit = seen[node] = probe.fits_after(node) or cluster.overcommitted(node)
        return hit

    released = [_take(h, cluster, start, really) for h, start in steps]
    if _place_gang(
        s, todo=todo, demands=demands, cluster=cluster, released=released, holders=holders
    ):
        return True
    # The prefix was not enough after all (pods that fit alone do not fit together): go on
    # one step at a time, trying the gang after each. The prefix's pods released on paper only
    # are released for real first, and the gang tried again on them before anything more.
    kept = any(True in r.kept for r in released)
    for r in released:
        r.release_kept(cluster)
    if kept and _place_gang(
        s, todo=todo, demands=demands, cluster=cluster, released=released, holders=holders
    ):
        return True
    rest = _fallback(
        s,
        holders,
        cluster=cluster,
        demands=demands,
        key=key,
        candidates=candidates,
        usable=usable,
        minimums=minimums,
    )
    # One holder at a time, the gang tried greedily after each (a search per step would cost a
    # search budget per holder); once every candidate is released, by the search as well.
    for h, start in rest:
        released.append(_take(h, cluster, start, _always))
        if _place_gang(
            s,
            todo=todo,
            demands=demands,
            cluster=cluster,
            released=released,
            holders=holders,
            thorough=False,
        ):
            return True
    if rest and _place_gang(
        s, todo=todo, demands=demands, cluster=cluster, released=released, holders=holders
    ):
        return True
    for r in reversed(released):
        _give_back(r.h, cluster, r, check=False)
    return False


def _fallback(
    s: JobState,
    holders: Holders,
    *,
    cluster: Cluster,
    demands: Sequence[PodDemand],
    key: OrderKey,
    candidates: Iterator[tuple[JobState, int]],
    usable: Callable[[str], bool],
    minimums: bool,
) -> Iterator[tuple[JobState, int]]:
    """The holders :func:`make_room` takes one at a time once its dry run's prefix proved not
    enough: the rest of its candidates with pods where a scarce pod may go, then, in release
    order again, those with pods where any pod of the gang may go (a scarce pod may take the
    node another one fitted on, which then needs room elsewhere)."""
    for h, start in candidates:
        if len(h.placed) > start and any(map(usable, h.placed[start:])):
            yield h, start
    whole = ReleaseProbe(cluster, demands, s.exclude, every=True)
    # Asked while pods are released: not remembered (see Holders.relevant).
    for h, start in _candidates(
        s, holders, key, minimums=minimums, classes=whole.classes(), cluster=cluster, remember=False
    ):
        if len(h.placed) > start and any(map(whole.usable, h.placed[start:])):
            yield h, start


def _always(node: str) -> bool:
    return True


def _known_short(
    holders: Holders,
    demands: list[PodDemand],
    memo: tuple[frozenset[int], bool],
    key: OrderKey,
    priority: int,
) -> bool:
    """Whether :attr:`Holders.most` already shows that some demand cannot get its pods."""
    gen = holders.gen
    wanted: dict[PodDemand, int] = {}
    for d in demands:
        wanted[d] = wanted.get(d, 0) + 1
    for d, n in wanted.items():
        hit = holders.most.get((d, *memo))
        if hit is None or hit[0] != gen or key < hit[1] or priority > hit[2]:
            continue
        if n > hit[3]:
            return True
    return False


def _candidates(
    s: JobState,
    holders: Holders,
    key: OrderKey,
    *,
    minimums: bool,
    classes: frozenset[int],
    cluster: Cluster,
    remember: bool = True,
) -> Iterator[tuple[JobState, int]]:
    """The holders ``s`` may take from, in release order, with the index they release from:
    only those with pods in ``classes`` (elsewhere nothing helps ``s``)."""
    everyone, growers = holders.relevant(classes, cluster, remember=remember)
    for h in reversed(growers):
        floor = growth_floor(h)
        if h is not s and len(h.placed) > floor:
            yield h, floor
    if minimums:
        priority = s.view.priority
        for h in reversed(everyone):
            if h.key is None or h.key <= key:
                return
            if h is s or not h.placed or h.admitted:
                continue
            if priority <= h.view.priority and is_protected(h.view):
                continue
            yield h, 0


def _place_gang(
    s: JobState,
    *,
    todo: list[int],
    demands: list[PodDemand],
    cluster: Cluster,
    released: list[_Released],
    holders: Holders,
    thorough: bool = True,
) -> bool:
    """Place the gang now (a search only when ``thorough``); on success give back what still
    fits (see the contract)."""
    if not cluster.covers(demands):
        return False
    nodes = cluster.place_all(demands, s.exclude, thorough=thorough)
    if nodes is None:
        return False
    _fill(s, todo, nodes)
    holders.note(s, cluster)
    for r in reversed(released):
        if len(r.h.placed) == r.start:
            _give_back(r.h, cluster, r, check=True)
        else:
            r.release_kept(cluster)
        r.h.victim = r.h.victim or not r.h.placed
    return True
