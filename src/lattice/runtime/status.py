"""One status write per reconcile, through the status subresource, only when it changed.

``merge_patch(old, new)`` computes an RFC 7386 JSON merge patch that turns ``old`` into ``new``
(removed keys become ``null``; lists are replaced whole, which is what merge patch does anyway).
In merge-patch terms a key whose value is ``null`` and an absent key are the same thing, so they
compare equal and cost no request.
``StatusWriter.write`` sends it with ``metadata.resourceVersion`` for optimistic concurrency, so a
stale cache yields a 409 ``Conflict`` that the caller turns into a quiet requeue; or, for a
writer that owns every field it changes, with no precondition.
"""

from __future__ import annotations

from typing import Any

from lattice.kube import KubeClient
from lattice.kube.resources import Resource

__all__ = ["StatusWriter", "merge_patch"]


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch from ``old`` to ``new`` (``None`` when they are equal)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None if old == new else new
    patch: dict[str, Any] = {}
    for key, value in new.items():
        if key not in old:
            if value is not None:  # a null for an absent key would change nothing
                patch[key] = value
            continue
        sub = merge_patch(old[key], value)
        if sub is not None or (value is None and old[key] is not None):
            patch[key] = sub
    for key in old:
        if key not in new and old[key] is not None:
            patch[key] = None
    return patch or None


class StatusWriter:
    """Writes a custom resource's status subresource with a merge patch."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def write(
        self,
        res: Resource,
        *,
        namespace: str | None,
        name: str,
        resource_version: str | None,
        old: dict[str, Any],
        new: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Patch status from ``old`` to ``new``; returns the updated object, or None if unchanged
        (then no request is sent).

        Raises ``Conflict`` when ``resource_version`` is stale. ``resource_version`` must be the
        RV ``old`` was read at: custom resources refuse an empty one (422 ``Invalid``). ``None``
        sends no precondition: for a writer that is the one writer of every field it changes.
        """
        diff = merge_patch(old, new)
        if diff is None:
            return None
        body: dict[str, Any] = {"status": diff}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        return await self._client.patch(res, name, body, namespace=namespace, subresource="status")
