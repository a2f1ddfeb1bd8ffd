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
  the job was placed; when not, everything released is put back.
- :func:`release_from` releases a job's pods from an index up, highest index first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

from lattice.scheduler.core.model import PodDemand
from lattice.scheduler.core.order import OrderKey, aged_growth_cap, is_protected
from lattice.scheduler.core.placement import Cluster
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
    """The size below which a job's pods are not growth others may take: its minimum, or for
    a promoted job admitted in this pass the cap of its early growth."""
    if s.aged and s.admitted:
        return max(s.view.min_size, aged_growth_cap(s.view))
    return s.view.min_size


def min_demands(s: JobState) -> tuple[PodDemand, ...]:
    """The demands of the pods of ``s``'s minimum, by index."""
    v = s.view
    return tuple(v.pod_demand(i) for i in range(v.min_size))


def missing(s: JobState, upto: int) -> list[int]:
    """Indices below ``upto`` that have no node."""
    placed = s.placed
    return [i for i in range(upto) if i >= len(placed) or not placed[i]]


def place_missing(s: JobState, cluster: Cluster, upto: int) -> bool:
    """Place the unplaced pods of ``s`` below ``upto``, all or none."""
    todo = missing(s, upto)
    if not todo:
        return True
    v = s.view
    nodes = cluster.place_all([v.pod_demand(i) for i in todo], s.exclude)
    if nodes is None:
        return False
    _fill(s, todo, nodes)
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
    v = s.view
    for offset, node in enumerate(nodes):
        i = start + offset
        d = v.pod_demand(i)
        if node and check and not cluster.fits_on(node, d):
            break
        if node:
            cluster.reserve(node, d)
        s.placed.append(node)
    if check and start < v.min_size and len(s.placed) < v.min_size:
        release_from(s, cluster, start)


class Holders:
    """The jobs holding reserved pods at the start of a pass, in scheduling order, and those
    of them holding growth (pruned as their growth is released)."""

    __slots__ = ("all", "gen", "growers", "no_room")

    def __init__(self, states: Sequence[JobState]) -> None:
        self.all = list(states)
        self.growers = [h for h in self.all if len(h.placed) > h.view.min_size]
        # Replicas that found no room even taking later jobs' growth, with the release
        # generation then: while nothing is released, a later job's replica finds none either
        # (it may take less growth: only that of jobs later than itself).
        self.no_room: dict[tuple[PodDemand, frozenset[int]], int] = {}
        self.gen = 0

    def growth(self) -> list[JobState]:
        """Holders with growth above their floor now, latest in order first."""
        found = [h for h in self.growers if len(h.placed) > growth_floor(h)]
        if len(found) < len(self.growers) // 2:
            self.growers = found
        found.reverse()
        return found

    def growth_after(self, key: OrderKey) -> Iterator[JobState]:
        """Holders later in order than ``key`` with growth above their floor, latest first."""
        for h in reversed(self.growers):
            if h.key is None or h.key <= key:
                return
            if len(h.placed) > growth_floor(h):
                yield h

    def later(self, key: OrderKey, priority: int) -> Iterator[JobState]:
        """Holders later in order than ``key`` not yet admitted, with pods, that a job of
        ``priority`` may stop (a protected one only for a higher priority), latest first."""
        for h in reversed(self.all):
            if h.key is None or h.key <= key:
                return
            if h.placed and not h.admitted:
                if priority <= h.view.priority and is_protected(h.view):
                    continue
                yield h


def _pods_by_node(steps: Sequence[tuple[JobState, int]]) -> dict[str, list[PodDemand]]:
    """The demands of the pods ``steps`` would release, by node."""
    out: dict[str, list[PodDemand]] = {}
    for h, start in steps:
        v = h.view
        for i in range(start, len(h.placed)):
            node = h.placed[i]
            if node:
                out.setdefault(node, []).append(v.pod_demand(i))
    return out


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
    distinct = set(demands)

    def useful(h: JobState, start: int) -> bool:
        """Whether ``h`` holds a pod at ``start`` or above where a pod of ``s`` may go."""
        nodes = set(h.placed[start:])
        return any(cluster.may_use(n, d, s.exclude) for n in nodes if n for d in distinct)

    steps = [(h, f) for h in holders.growth() if h is not s and useful(h, f := growth_floor(h))]
    if minimums:
        steps += [(h, 0) for h in holders.later(key, v.priority) if h is not s and useful(h, 0)]
    if not cluster.could_fit(demands, _pods_by_node(steps), s.exclude):
        return False
    released: list[tuple[JobState, int, list[str]]] = []
    # Pods of the gang that fit nowhere alone: releases only add room, and only on the nodes
    # they touch, so until each of them fits on a touched node the gang cannot fit.
    blocked = {d for d in set(demands) if not cluster.fits_somewhere(d, s.exclude)}
    for h, start in steps:
        if len(h.placed) <= start:
            continue
        if blocked and not any(
            cluster.may_use(n, d, s.exclude) for n in set(h.placed[start:]) for d in blocked
        ):
            continue  # nothing it holds is where the blocked pods may go
        touched = release_from(h, cluster, start)
        released.append((h, start, touched))
        if blocked:
            blocked = {d for d in blocked if not cluster.fits_on_any(touched, d, s.exclude)}
            if blocked:
                continue
        if not cluster.covers(demands):
            continue
        nodes = cluster.place_all(demands, s.exclude)
        if nodes is None:
            continue
        _fill(s, todo, nodes)
        for h2, start2, removed in reversed(released):
            if len(h2.placed) == start2:
                _restore(h2, cluster, start2, removed, check=True)
            h2.victim = h2.victim or not h2.placed
        return True
    for h, start, removed in reversed(released):
        _restore(h, cluster, start, removed, check=False)
    return False
