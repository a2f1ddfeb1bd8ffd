"""Resource identity: one API resource type as the apiserver knows it.

Contract: a ``Resource`` names a resource by group (``""`` for the core group), version,
plural, kind and scope. ``api_version`` is ``group/version`` (``version`` alone for the core
group); ``crd_name`` is ``<plural>.<group>``; ``path`` builds the REST path of a collection,
an object or one of its subresources. Built-in kinds and Lattice's CRDs use the same type.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Resource"]


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: group ("" for core), version, plural, kind and scope."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``group/version`` as written in manifests (``v1`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def crd_name(self) -> str:
        """Name of the CustomResourceDefinition object, ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The REST path; ``namespace=None`` on a namespaced resource means all namespaces."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base
