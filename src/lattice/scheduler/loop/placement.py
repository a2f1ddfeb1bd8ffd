"""The names a job's pods run under, its persisted placement both ways, and what its pods say
about that placement.

Contract (pure; no I/O, no clock):

- :class:`Naming`: pod ``i`` of a job runs in the child ``Demand.fixed_names[i]`` (a pod, or
  the batch Job whose pod it is) for its fixed pods, else replica ``i - len(fixed)`` as
  ``f"{replica_prefix}{i - len(fixed)}"``.
- :func:`read_placement`: the persisted ``placement`` map (``{child name: node}``, written by
  the scheduler loop only) as a ``JobView.placement`` tuple; :func:`placement_map` is the
  inverse for ``Decision.placement`` (None when no pod is placed: the field is removed).
- :func:`pending_since`: the earliest time a live (not Succeeded/Failed), undeleted pod of the
  job was reported ``PodScheduled=False`` reason ``Unschedulable`` (its creation time when the
  condition has none). Image pulls and container creation do not count.
  :func:`earliest_pending` also gives kube-scheduler's message on that pod
  (``JobView.pending_message``).
- :func:`refused_nodes`: the nodes the placement names for such a pod (by its name, or the
  name of the batch Job that controls it), unless a Lattice pod is being deleted on that node
  (``deleting_on``: a preemption victim still terminating is not a refusal).
- :func:`with_pods`: a view with both, read only while the job is Running (else none); for a
  running job without a persisted map, also the placement its pods show
  (:func:`observed_placement`: the node each named pod, or batch Job's pod, is bound to), so
  that a job started before placements were persisted keeps its pods where they run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from lattice.runtime.projections import PodInfo
from lattice.scheduler.core import Decision, JobView, Stage

__all__ = [
    "Naming",
    "earliest_pending",
    "never_deleting",
    "observed_placement",
    "pending_since",
    "placement_map",
    "read_placement",
    "refused_nodes",
    "with_pods",
]


@dataclass(frozen=True, slots=True)
class Naming:
    """The child names a job's pods run under, by pod index (``Demand.fixed_names`` first, then
    replica ``i`` as ``f"{replica_prefix}{i}"``)."""

    fixed_names: tuple[str, ...] = ()
    replica_prefix: str = ""

    def name(self, index: int) -> str:
        fixed = self.fixed_names
        if index < len(fixed):
            return fixed[index]
        return f"{self.replica_prefix}{index - len(fixed)}"

    def names(self, count: int) -> tuple[str, ...]:
        """The names of pods ``0 .. count - 1``."""
        return tuple(self.name(i) for i in range(count))


def read_placement(state: Mapping[str, Any], naming: Naming, size: int) -> tuple[str, ...]:
    """The persisted ``placement`` map of scheduler block ``state`` as a view's index tuple for
    pods ``0 .. size - 1`` (``""``: no node; empty without a map or at size 0)."""
    placed = state.get("placement")
    if size <= 0 or not isinstance(placed, Mapping):
        return ()
    nodes = (placed.get(name) for name in naming.names(size))
    return tuple(node if isinstance(node, str) else "" for node in nodes)


def pending_since(pods: Iterable[PodInfo]) -> datetime | None:
    """When the earliest live, undeleted pod kube-scheduler reports Unschedulable became so."""
    return earliest_pending(pods)[0]


def earliest_pending(pods: Iterable[PodInfo]) -> tuple[datetime | None, str]:
    """:func:`pending_since` and kube-scheduler's message on that pod (ties: the first pod
    by name, so the message does not depend on the cache's order)."""
    earliest: tuple[datetime, str] | None = None
    message = ""
    for pod in pods:
        if not pod.unschedulable or pod.terminal or pod.deletion_timestamp is not None:
            continue
        since = pod.unschedulable_since or pod.creation_timestamp
        if since is not None and (earliest is None or (since, pod.name) < earliest):
            earliest, message = (since, pod.name), pod.unschedulable_message
    return (None, "") if earliest is None else (earliest[0], message)


def refused_nodes(
    pods: Iterable[PodInfo],
    *,
    placed: Mapping[str, str],
    deleting_on: Callable[[str], bool],
) -> tuple[str, ...]:
    """Nodes where kube-scheduler refused a pod placed there (see :func:`with_pods`)."""
    refused: set[str] = set()
    for pod in pods:
        if not pod.unschedulable or pod.terminal or pod.deletion_timestamp is not None:
            continue
        node = placed.get(pod.name)
        if not node and pod.owner is not None and pod.owner.kind == "Job":
            node = placed.get(pod.owner.name)
        if node and node not in refused and not deleting_on(node):
            refused.add(node)
    return tuple(sorted(refused))


def never_deleting(node: str) -> bool:
    """No pod is being deleted anywhere (the default of ``deleting_on``)."""
    return False


def placement_map(decision: Decision, naming: Naming) -> dict[str, str] | None:
    """``Decision.placement`` as the persisted ``{child name: node}`` (None when it places no
    pod: a job at size 0, or a core that does not place)."""
    placed = {naming.name(i): node for i, node in enumerate(decision.placement) if node}
    return placed or None


def observed_placement(pods: Iterable[PodInfo], names: Sequence[str]) -> tuple[str, ...]:
    """The node each of ``names`` runs on: its live, undeleted, bound pod's (by the pod's name,
    or the name of the batch Job that controls it), else ``""``."""
    bound: dict[str, str] = {}
    for pod in pods:
        node = pod.node_name
        if node is None or pod.terminal or pod.deletion_timestamp is not None:
            continue
        bound[pod.name] = node
        owner = pod.owner
        if owner is not None and owner.kind == "Job":
            bound[owner.name] = node
    return tuple(bound.get(name, "") for name in names)


def with_pods(
    view: JobView,
    pods: Sequence[PodInfo],
    *,
    naming: Naming,
    deleting_on: Callable[[str], bool] = never_deleting,
    observe: bool = False,
) -> JobView:
    """``view`` with the parts that come from its pods (the same object when they are
    unchanged), read only while the job is Running (else none): ``pending_since`` and
    ``pending_message`` (:func:`earliest_pending`), and ``refused_nodes``: the nodes the
    placement names for a pod (by its name, or its controlling batch Job's) that kube-scheduler
    reports Unschedulable, unless ``deleting_on(node)`` (a Lattice pod is being deleted there:
    a preemption victim still terminating is not a refusal).

    ``observe``: the job has no persisted placement map (it started before placements were
    persisted, or under a core that placed nothing), so its placement is where its pods run
    (:func:`observed_placement`): its running pods are then neither moved nor charged twice.
    """
    since: datetime | None = None
    message = ""
    refused: tuple[str, ...] = ()
    placement = view.placement
    if view.stage == Stage.RUNNING:
        if observe and view.current_size > 0:
            placement = observed_placement(pods, naming.names(view.current_size))
            placement = placement if any(placement) else ()
        since, message = earliest_pending(pods)
        if placement and since is not None:
            placed = dict(zip(naming.names(len(placement)), placement, strict=True))
            refused = refused_nodes(pods, placed=placed, deleting_on=deleting_on)
    if (since, message, refused, placement) == (
        view.pending_since,
        view.pending_message,
        view.refused_nodes,
        view.placement,
    ):
        return view
    return replace(
        view,
        pending_since=since,
        pending_message=message,
        refused_nodes=refused,
        placement=placement,
    )
