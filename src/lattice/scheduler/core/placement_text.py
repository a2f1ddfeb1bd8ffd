"""Texts of the placement messages: quantities, node counts, and why no node matches.

Contract (pure): :func:`fmt_quantity` writes a quantity as a user writes it (cpu in cores or
millicores, memory in Gi/Mi when whole); :func:`no_match` names why no schedulable node admits
a pod (its selector and affinity match none, or every matching node has a taint it does not
tolerate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lattice.scheduler.core.model import Constraint, Taint
from lattice.scheduler.core.types import NodeView

__all__ = ["fmt_quantity", "labels_of", "no_match", "nodes_text", "taint_text"]


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
