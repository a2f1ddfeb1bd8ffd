"""An existing batch Job child kept in step with its desired manifest: its ``spec.suspend``, and
the scheduling fields of its pod template, which are mutable only while it is suspended (pure).

Contract (no I/O; ``ChildRounds`` sends the patches, in order, as merge patches):

- :func:`job_patches` ``(current, desired)`` returns the patches, each ``(subresource, body)``
  (``subresource`` ``""`` for the object, ``"status"`` for the status subresource), that bring
  the observed Job ``current`` to the ``spec.suspend`` of ``desired`` (absent means false).
  Nothing else of an existing Job is ever changed.
  - Desired suspended, current running: ``{"spec": {"suspend": true}}``; the batch Job
    controller then deletes the Job's active pods.
  - A suspended Job whose ``status.startTime`` is set gets it cleared (status subresource). The
    apiserver lets a Job's pod template change only while the Job is suspended and has no
    ``startTime`` (Kubernetes' mutable scheduling directives), and the Job controller sets it
    only while the Job runs. Kueue clears it on a batch Job it stops for the same reason.
  - Desired running, current suspended: one patch that sets ``suspend: false`` and syncs the
    template's scheduling fields from ``desired``, as mpi-operator's
    ``syncLauncherSchedulingDirectives`` does: the pod template's labels and annotations, and
    its spec's ``nodeSelector``, ``tolerations``, ``schedulingGates`` and node affinity (the
    whole ``affinity`` when the current template has none). A Lattice placement binds a pod
    through its required node affinity (docs/compatibility.md), so this is also how a resumed
    launcher moves to the node the scheduler chose for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice.controllers.jobstatus import with_nulls
from lattice.primitives.objects import Obj

__all__ = ["SCHEDULING_FIELDS", "job_patches"]

#: The pod-spec fields synced on resume (besides the node affinity).
SCHEDULING_FIELDS = ("nodeSelector", "tolerations", "schedulingGates")


def _map(obj: Mapping[str, Any], *path: str) -> Obj:
    cur: Any = obj
    for key in path:
        cur = cur.get(key) if isinstance(cur, Mapping) else None
    return dict(cur) if isinstance(cur, Mapping) else {}


def _suspend(job: Mapping[str, Any]) -> bool:
    return _map(job, "spec").get("suspend") is True


def job_patches(current: Mapping[str, Any], desired: Mapping[str, Any]) -> list[tuple[str, Obj]]:
    """The patches that bring ``current`` to ``desired``'s suspension (module contract)."""
    want, have = _suspend(desired), _suspend(current)
    if want and not have:
        return [("", {"spec": {"suspend": True}})]
    patches: list[tuple[str, Obj]] = []
    if have and _map(current, "status").get("startTime") is not None:
        patches.append(("status", {"status": {"startTime": None}}))
    if have and not want:
        template = _template_patch(current, desired)
        patches.append(("", {"spec": {"suspend": False, "template": template}}))
    return patches


def _template_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Obj:
    new_meta = _map(desired, "spec", "template", "metadata")
    old_spec = _map(current, "spec", "template", "spec")
    new_spec = _map(desired, "spec", "template", "spec")
    spec: Obj = {
        "nodeSelector": with_nulls(old_spec.get("nodeSelector"), new_spec.get("nodeSelector"))
        or None,
        "tolerations": new_spec.get("tolerations") or None,
        "schedulingGates": new_spec.get("schedulingGates") or None,
    }
    old_affinity = old_spec.get("affinity")
    new_affinity = new_spec.get("affinity")
    if isinstance(old_affinity, Mapping) and old_affinity:
        new_node = _map(new_spec, "affinity", "nodeAffinity")
        old_node = old_affinity.get("nodeAffinity")
        spec["affinity"] = {"nodeAffinity": with_nulls(old_node, new_node) or None}
    elif isinstance(new_affinity, Mapping) and new_affinity:
        spec["affinity"] = dict(new_affinity)
    # Labels and annotations are merged in, never removed: the Job controller adds its own
    # labels (controller-uid, job-name) to the template, and its selector needs them.
    meta = {
        k: dict(v)
        for k in ("labels", "annotations")
        if isinstance(v := new_meta.get(k), Mapping) and v
    }
    return {"metadata": meta, "spec": spec} if meta else {"spec": spec}
