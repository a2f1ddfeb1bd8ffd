"""A job's children as the informer caches hold them, and the expectation keys that guard them.

Contract: every read goes through the caches' ``owner`` index (``lattice.runtime.projections``)
and keeps only the children whose controller ownerReference carries the job's UID, so a child
left by an earlier job of the same name is never counted. Nothing here writes.

- ``pods``: the owned pods (deleting ones included).
- ``services``: the owned Services as :class:`Existing` values, by name.
- ``others``: the owned ConfigMaps, Secrets and batch Jobs (raw cached objects), keyed
  ``"<Kind>/<name>"``.
- ``exp_key(ns, name, what)``: ``<Kind>/<ns>/<name>/<what>``, ``what`` one of ``pods``,
  ``services`` or an other child kind; ``what_kinds`` lists them all.
"""

from __future__ import annotations

from collections.abc import Mapping

from lattice.controllers.children import Existing
from lattice.controllers.jobstatus import controller_ref
from lattice.kube.resources import Resource
from lattice.primitives.keys import owner_key
from lattice.primitives.objects import Obj
from lattice.runtime.events import ObjectRef
from lattice.runtime.informer import Informer
from lattice.runtime.projections import OWNER_INDEX, ObjectInfo, PodInfo

__all__ = ["OwnedChildren"]


class OwnedChildren:
    """Cache reads of the children of the jobs of one kind."""

    def __init__(
        self,
        *,
        kind: str,
        pods: Informer[PodInfo],
        services: Informer[ObjectInfo],
        others: Mapping[str, tuple[Resource, Informer[Obj]]],
    ) -> None:
        self.kind = kind
        self.pod_informer = pods
        self.service_informer = services
        #: Other child kinds (``"ConfigMap"``, ``"Secret"``, ``"Job"``): REST descriptor + cache.
        self.other_informers = dict(others)

    @property
    def what_kinds(self) -> tuple[str, ...]:
        """Every ``what`` of ``exp_key``: pods, services and the other child kinds."""
        return ("pods", "services", *self.other_informers)

    def exp_key(self, ns: str, name: str, what: str) -> str:
        return f"{self.kind}/{ns}/{name}/{what}"

    def pods(self, ref: ObjectRef) -> list[PodInfo]:
        key = owner_key(self.kind, ref.namespace, ref.name)
        return [
            p
            for p in self.pod_informer.store.by_index(OWNER_INDEX, key)
            if p.owner is not None and p.owner.uid == ref.uid
        ]

    def services(self, ref: ObjectRef) -> dict[str, Existing]:
        key = owner_key(self.kind, ref.namespace, ref.name)
        return {
            svc.name: Existing(
                svc.name, True, svc.deletion_timestamp is not None, svc.replica_index or 0
            )
            for svc in self.service_informer.store.by_index(OWNER_INDEX, key)
            if svc.owner is not None and svc.owner.uid == ref.uid
        }

    def others(self, ref: ObjectRef) -> dict[str, Obj]:
        out: dict[str, Obj] = {}
        key = owner_key(self.kind, ref.namespace, ref.name)
        for child_kind, (_, informer) in self.other_informers.items():
            for obj in informer.store.by_index(OWNER_INDEX, key):
                meta = obj.get("metadata") or {}
                owner = controller_ref(meta)
                if owner is not None and owner.get("uid") == ref.uid:
                    out[f"{child_kind}/{meta.get('name')}"] = obj
        return out
