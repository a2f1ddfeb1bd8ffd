"""How a gang is packed onto the core's cluster: greedily in one order, or by a bounded search.

Contract (internal to the core; deterministic: the same cluster and gang give the same nodes;
the cluster is changed only by a success, which leaves the pods placed):
- :func:`greedy` places a gang's pods one at a time in a given order, each best-fit
  (:meth:`~lattice.scheduler.core.placement.Cluster.place`), all or nothing.
- :func:`search` is the fallback when the greedy orders fail: a depth-first search that
  places the gang kind by kind (a kind is one distinct demand; kinds in the order of their
  first pod in ``order``). For each pod it tries one node per bucket of identical nodes
  (:meth:`~lattice.scheduler.core.placement.Cluster.buckets`), buckets in fit order (the
  smallest free vector first, then the lowest node index), the node being the lowest of the
  bucket at or after the node of the previous pod of the same kind (pods of one kind are
  interchangeable, so their nodes need only be tried in ascending order). A branch is cut as
  soon as the free totals do not hold the pods left, or some kind left has fewer slots than
  pods (each node taken alone). The search examines at most :data:`BUDGET` buckets; when it
  runs out, or no placement exists, it returns ``None``.
- Within the budget the search is complete for gangs whose constraints name no node
  (``matchFields``): it finds a placement whenever one exists. Nodes are returned in input
  order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lattice.scheduler.core.model import PodDemand

if TYPE_CHECKING:
    from lattice.scheduler.core.placement import Cluster

__all__ = ["BUDGET", "greedy", "search"]

#: Buckets one :func:`search` may examine (listing a pod's candidates, counting slots).
BUDGET = 4000


def greedy(
    cluster: Cluster, demands: Sequence[PodDemand], order: Sequence[int], exclude: frozenset[int]
) -> list[str] | None:
    """Place ``demands`` best-fit one at a time in ``order``, all or none; nodes in input order."""
    out: list[str] = [""] * len(demands)
    done: list[int] = []
    for j in order:
        node = cluster.place(demands[j], exclude)
        if node is None:
            for k in done:
                cluster.release(out[k], demands[k])
            return None
        out[j] = node
        done.append(j)
    return out


class _Spent:
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


def search(
    cluster: Cluster, demands: Sequence[PodDemand], order: Sequence[int], exclude: frozenset[int]
) -> list[str] | None:
    """Place ``demands`` all or none by a bounded search (see the module contract)."""
    kinds: dict[PodDemand, list[int]] = {}
    for j in order:
        kinds.setdefault(demands[j], []).append(j)
    seq = [d for d, js in kinds.items() for _ in js]  # the demand at each depth
    rests, needs = _what_is_left(cluster, kinds)
    names, n, spent = cluster.names, len(seq), _Spent()
    chosen: list[int] = []
    # Candidates at each depth, best last (popped first); one more list than nodes chosen.
    stack = [_candidates(cluster, seq[0], exclude, -1, spent)]
    while stack:
        p = len(chosen)
        cands = stack[-1]
        if cands and spent.n < BUDGET:
            i, d = cands.pop(), seq[p]
            spent.n += 1
            cluster.reserve(names[i], d)
            chosen.append(i)
            if p + 1 == n:
                return _nodes(cluster, kinds, chosen)
            if _feasible(cluster, rests[p], needs[p], exclude, spent):
                last = i if seq[p + 1] is d else -1
                stack.append(_candidates(cluster, seq[p + 1], exclude, last, spent))
                continue
        else:
            stack.pop()
            if not chosen:
                break
        i = chosen.pop()
        cluster.release(names[i], seq[len(chosen)])
    return None


def _what_is_left(
    cluster: Cluster, kinds: dict[PodDemand, list[int]]
) -> tuple[list[list[tuple[PodDemand, int]]], list[dict[int, int]]]:
    """For each depth: the kinds and counts of the pods after it, and their summed requests."""
    rests: list[list[tuple[PodDemand, int]]] = []
    needs: list[dict[int, int]] = []
    left = [(d, len(js)) for d, js in kinds.items()]
    need: dict[int, int] = {}
    for d, count in left:
        for k, q in cluster.vector(d):
            need[k] = need.get(k, 0) + q * count
    for at, (d, count) in enumerate(left):
        vec = cluster.vector(d)
        for c in range(count - 1, -1, -1):
            for k, q in vec:
                need[k] -= q
            rests.append(([(d, c)] if c else []) + left[at + 1 :])
            needs.append({k: q for k, q in need.items() if q > 0})
    return rests, needs


def _feasible(
    cluster: Cluster,
    rest: list[tuple[PodDemand, int]],
    need: dict[int, int],
    exclude: frozenset[int],
    spent: _Spent,
) -> bool:
    """Whether the free totals hold ``need`` and every kind in ``rest`` has slots enough."""
    total = cluster.total
    if any(k < 0 or total[k] < q for k, q in need.items()):
        return False
    return all(_has_slots(cluster, d, count, exclude, spent) for d, count in rest)


def _has_slots(
    cluster: Cluster, d: PodDemand, want: int, exclude: frozenset[int], spent: _Spent
) -> bool:
    vec = cluster.vector(d)
    if not vec or vec[0][0] < 0:
        return not vec
    got = 0
    for free, state, nodes in cluster.buckets(d, exclude, first=True):
        spent.n += 1
        if state == 2 or (d.exclusive and state == 1):
            continue
        m = min(free[k] // q for k, q in vec)
        if m > 0:
            got += len(nodes) if d.exclusive else len(nodes) * m
            if got >= want:
                return True
    return False


def _candidates(
    cluster: Cluster, d: PodDemand, exclude: frozenset[int], last: int, spent: _Spent
) -> list[int]:
    """One node per bucket that fits ``d``, none before ``last``; the best-fitting last."""
    vec = cluster.vector(d)
    if vec and vec[0][0] < 0:
        return []
    found: list[tuple[tuple[int, ...], int]] = []
    for free, state, nodes in cluster.buckets(d, exclude, first=True):
        spent.n += 1
        if state == 2 or (d.exclusive and state == 1):
            continue
        if any(free[k] < q for k, q in vec):
            continue
        at = bisect_left(nodes, last)
        if at < len(nodes):
            found.append((free, nodes[at]))
    found.sort(reverse=True)
    return [i for _, i in found]


def _nodes(cluster: Cluster, kinds: dict[PodDemand, list[int]], chosen: list[int]) -> list[str]:
    out = [""] * len(chosen)
    depth = iter(chosen)
    for js in kinds.values():
        for j in js:
            out[j] = cluster.names[next(depth)]
    return out
