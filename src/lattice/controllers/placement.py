"""The reconciler's half of a binding placement: bind the desired children, move misplaced pods.

The scheduler loop persists each admitted job's placement in its scheduling block
(``placement``: child name -> node name; ``lattice.api.common.SchedulingStatus``). It is the one
writer of that map: nothing here writes or clears it.

Contract (pure; works on the ``Children`` the plugin returned, whatever the kind):

- ``placement_of(sched)``: the map of the scheduling block, or None when the job has none (absent,
  null or empty: the job runs unplaced, as before placements existed). Entries whose name or node
  is not a non-empty string are ignored.
- ``bind_children(children, placement, existing=...)``: with no placement, ``children`` itself.
  Otherwise every desired pod whose name is in the map is bound to its node, and so is the pod
  template of every desired batch Job whose name is in the map (an MPI launcher), by
  ``lattice.primitives.binding.bind_spec`` (the user's required terms are kept, kube-scheduler
  still runs its own checks). A desired pod or batch Job whose name is NOT in the map is not
  created yet: it is dropped from the desired set, unless a child of that name already exists
  (``existing``), which is then kept as it is (dropping it would delete it). Services,
  ConfigMaps and Secrets are left as they are.
- ``misplaced(pods, placement)``: the names of the live pods (neither deleting nor terminal)
  whose name is in the map but whose binding names another node: the node it runs on when it is
  scheduled, else the node its required affinity binds it to (``PodInfo.bound_node``; an
  unbound pending pod names none, and is moved too). The reconciler deletes them, and recreates
  them bound right once they are gone. Such a delete is a re-placement, not a failure: a
  deleted pod is never a Failed pod of the job (the kind's rules read live, non-deleting pods
  only), so it is charged to no ``backoffLimit`` and sets no ``Restarting`` condition (``failure``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from lattice.frameworks.base import Children, Demand
from lattice.primitives.binding import bind_spec
from lattice.primitives.objects import Obj
from lattice.runtime.projections import PodInfo

__all__ = ["bind_children", "misplaced", "placeable_names", "placement_of"]


def placement_of(sched: Mapping[str, Any]) -> dict[str, str] | None:
    """The job's placement (child name -> node name) from its scheduling block, or None."""
    raw = sched.get("placement")
    if not isinstance(raw, Mapping):
        return None
    placement = {
        name: node
        for name, node in raw.items()
        if isinstance(name, str) and name and isinstance(node, str) and node
    }
    return placement or None


def _name(manifest: Mapping[str, Any]) -> str:
    return str((manifest.get("metadata") or {}).get("name", ""))


def _bound_pod(manifest: Obj, node: str) -> Obj:
    return {**manifest, "spec": bind_spec(manifest.get("spec") or {}, node)}


def _bound_job(manifest: Obj, node: str) -> Obj:
    spec = dict(manifest.get("spec") or {})
    template = dict(spec.get("template") or {})
    template["spec"] = bind_spec(template.get("spec") or {}, node)
    spec["template"] = template
    return {**manifest, "spec": spec}


def _placed(
    manifests: Sequence[Obj],
    placement: Mapping[str, str],
    existing: Collection[str],
    bind: Callable[[Obj, str], Obj],
    placeable: Callable[[str], bool],
) -> tuple[Obj, ...]:
    out: list[Obj] = []
    for manifest in manifests:
        name = _name(manifest)
        node = placement.get(name)
        if node is not None:
            out.append(bind(manifest, node))
        elif name in existing or not placeable(name):
            out.append(manifest)
    return tuple(out)


def placeable_names(demand: Demand) -> Callable[[str], bool]:
    """Whether the scheduler places the child of a name: a fixed pod's child, or a replica
    (``replica_prefix`` + index). Others (a TrainJob's initializers) are never withheld."""
    fixed = frozenset(demand.fixed_names)
    prefix = demand.replica_prefix

    def placeable(name: str) -> bool:
        if name in fixed:
            return True
        return bool(prefix) and name.startswith(prefix) and name[len(prefix) :].isdigit()

    return placeable


def bind_children(
    children: Children,
    placement: Mapping[str, str] | None,
    *,
    existing: Collection[str],
    placeable: Callable[[str], bool] = lambda _: True,
) -> Children:
    """``children`` bound to ``placement`` (see the module docstring); ``existing`` names the
    pods and batch Jobs that exist already; a child ``placeable`` rejects is left unbound."""
    if not placement:
        return children
    return dataclasses.replace(
        children,
        pods=_placed(children.pods, placement, existing, _bound_pod, placeable),
        jobs=_placed(children.jobs, placement, existing, _bound_job, placeable),
    )


def misplaced(pods: Sequence[PodInfo], placement: Mapping[str, str] | None) -> list[str]:
    """The live pods in ``placement`` whose binding names another node (to delete)."""
    if not placement:
        return []
    out: list[str] = []
    for pod in pods:
        node = placement.get(pod.name)
        if node is None or pod.deletion_timestamp is not None or pod.terminal:
            continue
        if (pod.node_name or pod.bound_node) != node:
            out.append(pod.name)
    return sorted(out)
