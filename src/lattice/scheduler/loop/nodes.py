"""Pure translation of the node and pod caches into the core's nodes.

Contract (no I/O, no clock; deterministic in the arguments):

- :func:`node_views` lists every node the informer knows, sorted by name. ``schedulable``: Ready
  and not cordoned (:func:`node_schedulable`); a node that is not keeps the pods placed on it
  and gets no new ones. ``labels`` and ``taints`` (every effect, with values) are passed
  through: the pods' constraints and tolerations decide, so neither the operator's node
  selector nor a taint drops a node. ``free`` is the allocatable vector (every resource,
  ``pods`` included) minus the requests of every *live* pod bound to the node that no placement
  covers, one ``pods`` slot each: foreign pods, and our own pods that :func:`covered` does not
  match (issue 26: every live pod of ours counts against capacity until it is gone, whatever
  its job). A live pod is bound (``nodeName`` set) and not Succeeded/Failed; a pod being deleted
  is live until it is gone. Quantities below 0 are dropped (an over-committed node has nothing
  free). ``free_units`` (capacity figures only): GPU mode, the free amount of the unit resource;
  node mode, 1; 0 on a node that is not schedulable.
- :func:`covered`: one of our pods is covered when ``placed`` maps its (namespace, name), or the
  name of the batch Job that controls it (an MPIJob launcher), to the node it is bound to.
  ``placed`` holds the placements the core accounts for itself in this pass
  (:func:`placed_pods`: jobs in the snapshot that hold pods and are not finished).
- Trigger relevance: :func:`node_signature` is what a pass reads of a node (schedulability,
  allocatable, labels, taints), so heartbeats and status noise are not a change;
  :func:`pod_signature` what it reads of one of our pods (phase class, deleting, node, requests,
  the Unschedulable condition); a foreign pod matters whenever it appears, changes or goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lattice.frameworks.base import OperatorContext
from lattice.runtime.projections import ForeignPodUsage, NodeInfo, PodInfo
from lattice.scheduler.core import NodeView
from lattice.scheduler.core.model import Taint, resources

__all__ = [
    "PlacedPods",
    "covered",
    "node_schedulable",
    "node_signature",
    "node_taints",
    "node_views",
    "pod_signature",
]

#: (namespace, child name) -> node, for every pod a job in the snapshot holds a placement for.
PlacedPods = Mapping[tuple[str, str], str]
_JOB = "Job"
_GONE = frozenset({"Succeeded", "Failed"})


def node_schedulable(node: NodeInfo) -> bool:
    """Ready and not cordoned (``spec.unschedulable``)."""
    return node.ready and not node.unschedulable


def node_taints(node: NodeInfo) -> tuple[Taint, ...]:
    """The node's taints as the core's values (every effect; the core ignores soft ones)."""
    return tuple(Taint(key, value, effect) for key, value, effect in node.taints)


def covered(pod: PodInfo, placed: PlacedPods) -> bool:
    """Whether a placement covers ``pod`` on the node it is bound to (module contract)."""
    node = pod.node_name
    if node is None:
        return False
    if placed.get((pod.namespace, pod.name)) == node:
        return True
    owner = pod.owner
    return (
        owner is not None and owner.kind == _JOB and placed.get((pod.namespace, owner.name)) == node
    )


def _charge(
    used: dict[str, dict[str, int]], node: str, requests: Iterable[tuple[str, int]]
) -> None:
    vector = used.get(node)
    if vector is None:
        vector = used[node] = {}
    for name, n in requests:
        vector[name] = vector.get(name, 0) + n
    vector["pods"] = vector.get("pods", 0) + 1


def node_views(
    nodes: Iterable[NodeInfo],
    *,
    ctx: OperatorContext,
    foreign: Iterable[ForeignPodUsage] = (),
    pods: Iterable[PodInfo] = (),
    placed: PlacedPods | None = None,
) -> tuple[NodeView, ...]:
    """Every node with what Lattice's placements may use on it, sorted by node name."""
    used: dict[str, dict[str, int]] = {}
    for usage in foreign:
        _charge(used, usage.node_name, usage.requests)
    get = (placed or {}).get
    for pod in pods:  # ``covered`` inlined: this runs over every pod of ours, every pass
        bound = pod.node_name
        if bound is None or pod.phase in _GONE:
            continue
        namespace = pod.namespace
        if get((namespace, pod.name)) == bound:
            continue
        owner = pod.owner
        if owner is not None and owner.kind == _JOB and get((namespace, owner.name)) == bound:
            continue
        _charge(used, bound, pod.requests)
    unit = ctx.scheduling_unit
    views: list[NodeView] = []
    for node in nodes:
        taken = used.get(node.name) or {}
        free = resources({k: n - taken.get(k, 0) for k, n in node.allocatable.items()})
        schedulable = node_schedulable(node)
        units = 0
        if schedulable:
            units = 1 if ctx.node_mode else dict(free).get(unit, 0)
        views.append(
            NodeView(
                node.name,
                units,
                free=free,
                labels=tuple(sorted(node.labels.items())),
                taints=node_taints(node),
                schedulable=schedulable,
            )
        )
    views.sort(key=lambda v: v.name)
    return tuple(views)


def node_signature(node: NodeInfo) -> tuple[Any, ...]:
    """What of a node a pass depends on (heartbeats and conditions other than Ready are not)."""
    return (node_schedulable(node), node.allocatable, node.labels, node.taints)


def pod_signature(pod: PodInfo) -> tuple[Any, ...]:
    """What of one of our pods a pass depends on: pending time, refusals and capacity."""
    if pod.terminal:
        phase = "terminal"
    else:
        phase = pod.phase if pod.phase in ("Pending", "Running") else "other"
    return (
        phase,
        pod.deletion_timestamp is not None,
        pod.unschedulable,
        pod.unschedulable_since,
        pod.node_name,
        pod.requests,
    )
