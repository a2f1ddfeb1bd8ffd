"""Apply a manifest as a user would, then wait until the object's status says what a test expects.

Contract:
- ``status_of(cluster, manifest, namespace=...)`` reads the ``.status`` of the object a manifest
  names (its ``apiVersion``, ``kind`` and ``metadata.name``) with ``kubectl get``: ``{}`` while
  the status is unset or the object does not exist.
- ``apply_and_wait(cluster, manifest, namespace=..., until=..., what=...)`` runs ``kubectl
  apply`` on the manifest, then polls ``status_of`` until ``until(status)`` holds and returns
  that status; past ``timeout`` it raises ``WaitTimeout`` naming ``what`` and the last status.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.support.cluster import Cluster
from tests.support.wait import wait_for

__all__ = ["apply_and_wait", "resource_of", "status_of"]

Status = dict[str, Any]


def resource_of(manifest: dict[str, Any]) -> str:
    """The fully qualified ``kubectl get`` type of a manifest: ``Kind.version.group`` (``Kind``
    for the core group), so that no short name of another group can shadow it."""
    kind, api = manifest["kind"], manifest["apiVersion"]
    if "/" not in api:
        return str(kind)
    group, version = api.split("/", 1)
    return f"{kind}.{version}.{group}"


def status_of(cluster: Cluster, manifest: dict[str, Any], *, namespace: str) -> Status:
    """The object's ``.status`` (see the contract)."""
    name = manifest["metadata"]["name"]
    out = cluster.kubectl(
        "get", resource_of(manifest), name, "-n", namespace, "-o", "json", "--ignore-not-found"
    )
    return dict(json.loads(out).get("status") or {}) if out.strip() else {}


def apply_and_wait(
    cluster: Cluster,
    manifest: dict[str, Any],
    *,
    namespace: str,
    until: Callable[[Status], bool],
    what: str,
    timeout: float = 60.0,
) -> Status:
    """``kubectl apply`` the manifest and wait until ``until`` holds of its status."""
    cluster.apply(manifest, namespace=namespace)
    return wait_for(
        lambda: status_of(cluster, manifest, namespace=namespace),
        until,
        timeout=timeout,
        what=what,
    )
