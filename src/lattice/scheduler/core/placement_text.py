"""Texts of the placement messages: quantities, node counts, and why no node matches.

Contract (pure): :func:`fmt_quantity` writes a quantity as a user writes it (cpu in cores or
millicores, memory in Gi/Mi when whole); :func:`no_match` names why no schedulable node admits
a pod (its selector and affinity match none, or every matching node has a taint it does not
tolerate); :func:`why` names the binding constraint of one pod that fits on no node, as
kube-scheduler's FailedScheduling does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from lattice.scheduler.core.model import Constraint, PodDemand, Taint
from lattice.scheduler.core.types import NodeView

if TYPE_CHECKING:
    from lattice.scheduler.core.placement import Cluster

__all__ = ["fmt_quantity", "labels_of", "no_match", "nodes_text", "taint_text", "why"]


def nodes_text(n: int) -> str:
    return "1 node" if n == 1 else f"{n} nodes"


def fmt_quantity(name: str, q: int, *, bare: bool = False) -> str:
    if name == "cpu":
        value = f"{q // 1000}" if q % 1000 == 0 else f"{q}m"
    elif name in ("memory", "ephemeral-storage") and q >= 1 << 20 and q % (1 << 20) == 0:
        value = f"{q >> 30}Gi" if q % (1 << 30) == 0 else f"{q >> 20}Mi"
    else:
        value = str(q)
    return value if bare else f"{value} {name}"


def no_match(c: Constraint, classes: Sequence[NodeView]) -> str:
    where = c.describe()
    selector = Constraint(node_selector=c.node_selector, terms=c.terms)
    ready = [n for n in classes if n.schedulable]
    labelled = [
        n for n in ready if selector.admits(name=n.name, labels=labels_of(n.labels), taints=())
    ]
    if where and not labelled:
        return f"no schedulable node matches {where}"
    if labelled:
        taints = sorted({taint_text(t) for n in labelled for t in n.taints})
        matching = f" matching {where}" if where else ""
        return (
            f"every node{matching} has a taint the pod does not tolerate ({', '.join(taints[:3])})"
        )
    return "no schedulable node"


def taint_text(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def labels_of(pairs: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    return dict(pairs)


def why(cluster: Cluster, d: PodDemand, exclude: frozenset[int]) -> str:
    """Why one pod ``d`` fits on no node of ``cluster`` (outside ``exclude``)."""
    where = d.constraint.describe()
    matching = f"matching {where}" if where else "eligible"
    vec = cluster.vector(d)
    if vec and vec[0][0] < 0:
        names = [n for n, q in d.requests if q > 0 and n not in cluster.resources]
        return f"no node has {fmt_quantity(names[0], 1)}"
    groups = list(cluster.groups(d, exclude))
    if not groups:
        return no_match(d.constraint, cluster.node_classes())
    if d.exclusive:
        usable = [g for g in groups if g[1] == 0]
        if not usable:
            count = sum(n for _, _, n in groups)
            return f"no node {matching} is free of other Lattice pods ({count} match)"
        groups = usable
    else:
        groups = [g for g in groups if g[1] != 2]
    count = sum(n for _, _, n in groups)
    for k, q in vec:
        largest = max((free[k] for free, _, _ in groups), default=0)
        if largest < q:
            name = cluster.resources[k]
            most = fmt_quantity(name, max(0, largest), bare=True)
            return (
                f"no node {matching} has {fmt_quantity(name, q)} free "
                f"({nodes_text(count)} match; largest free {most})"
            )
    parts = ", ".join(fmt_quantity(cluster.resources[k], q) for k, q in vec)
    return f"no node {matching} has room for a pod of {parts} ({nodes_text(count)} match)"
