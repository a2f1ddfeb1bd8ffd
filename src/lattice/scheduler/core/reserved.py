"""The cluster of a pass with the running jobs' placements reserved, kept across passes.

Contract (internal to the core; it only skips work, never changes a plan): :func:`reserved`
gives what building :class:`~lattice.scheduler.core.placement.Cluster` from ``nodes`` and
then :func:`~lattice.scheduler.core.room.reserve_running` of every state in ``holding``
gives: each state's ``placed`` and ``exclude``, and the cluster (a copy the caller may
change). A cluster's state after a set of reservations does not depend on their order, so the
previous pass's cluster is reused when ``nodes`` is the same tuple: the placements of the
views that left are released and those of the new ones reserved. A state with refused nodes,
an exclusive pod among the changes, or caching off
(:func:`~lattice.scheduler.core.backlog.set_caching`) builds it afresh, and so does a cluster
whose demand memos outgrew ``limit``. :func:`empty` gives a copy of ``nodes``' cluster
with nothing reserved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from lattice.scheduler.core.backlog import caching
from lattice.scheduler.core.placement import Cluster
from lattice.scheduler.core.room import refusals, reserve_running
from lattice.scheduler.core.state import JobState
from lattice.scheduler.core.types import JobView, NodeView

__all__ = ["empty", "reserved"]


@dataclass(slots=True)
class _Kept:
    nodes: Sequence[NodeView]
    pristine: Cluster
    cluster: Cluster
    #: id(view) -> (view, its pods' nodes) of every job reserved on ``cluster``.
    held: dict[int, tuple[JobView, tuple[str, ...]]]


_KEPT: list[_Kept] = []


def _pristine(nodes: Sequence[NodeView], memo_limit: int) -> Cluster:
    kept = _KEPT[0] if _KEPT and caching() else None
    if kept is not None and kept.nodes is nodes and kept.pristine.memo_size() <= memo_limit:
        return kept.pristine
    _KEPT.clear()
    return Cluster(nodes)


def empty(nodes: Sequence[NodeView], *, limit: int) -> Cluster:
    """A copy of ``nodes``' cluster with nothing reserved (``limit``: see the contract)."""
    return _pristine(nodes, limit).copy()


def reserved(
    nodes: Sequence[NodeView],
    holding: Sequence[JobState],
    *,
    now: datetime,
    grace: timedelta,
    limit: int,
) -> Cluster:
    """The cluster with ``holding``'s placements reserved (see the contract)."""
    pristine = _pristine(nodes, limit)
    kept = _KEPT[0] if _KEPT and caching() else None
    if kept is None or any(
        s.view.refused_nodes and refusals(s.view, now=now, grace=grace) for s in holding
    ):
        cluster = pristine.copy()
        for s in holding:
            reserve_running(s, cluster, refusals(s.view, now=now, grace=grace))
        _keep(nodes, pristine, cluster, holding)
        return cluster.copy()
    held = kept.held
    ids = {id(s.view): s for s in holding}
    gone_ids = held.keys() - ids.keys()
    gone = [held[i] for i in gone_ids]
    new = [s for i, s in ids.items() if i not in held]
    if not gone and not new:  # the same running views: the kept cluster as it is
        for i, s in ids.items():
            s.placed, s.exclude = list(held[i][1]), frozenset()
        return kept.cluster.copy()
    if any(v.pod_demand(i).exclusive for v, placed in gone for i in range(len(placed))) or any(
        s.view.pod_demand(i).exclusive for s in new for i in range(s.held)
    ):
        _KEPT.clear()
        return reserved(nodes, holding, now=now, grace=grace, limit=limit)
    cluster = kept.cluster.copy()
    for v, placed in gone:
        for i in range(len(placed) - 1, -1, -1):
            if placed[i]:
                cluster.release(placed[i], v.pod_demand(i))
    for s in new:
        reserve_running(s, cluster, frozenset())
    for i, s in ids.items():
        if i in held:
            s.placed, s.exclude = list(held[i][1]), frozenset()
    # What _keep would keep (nothing here has an exclusion): the kept ids, changed.
    now_held = dict(held)
    for i in gone_ids:
        del now_held[i]
    now_held.update((id(s.view), (s.view, tuple(s.placed))) for s in new)
    _KEPT[:] = [_Kept(nodes=nodes, pristine=pristine, cluster=cluster, held=now_held)]
    return cluster.copy()


def _keep(
    nodes: Sequence[NodeView], pristine: Cluster, cluster: Cluster, holding: Sequence[JobState]
) -> None:
    if caching() and not any(s.exclude for s in holding):
        held = {id(s.view): (s.view, tuple(s.placed)) for s in holding}
        _KEPT[:] = [_Kept(nodes=nodes, pristine=pristine, cluster=cluster, held=held)]
    else:
        _KEPT[:] = [_Kept(nodes=nodes, pristine=pristine, cluster=pristine.copy(), held={})]
