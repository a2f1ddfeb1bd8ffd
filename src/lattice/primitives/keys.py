"""Object keys: how the code base names one object in a store, an index or a plan.

Contract:
- A store key is ``namespace/name``, or ``name`` for a cluster-scoped object
  (``namespaced_key``, ``object_key`` from a raw object, ``split_key`` back).
- A kind key is ``Kind/namespace/name`` (``kind_key``): the scheduler plan's job key and the
  owner index value of a child (kind ``""`` = owner known by label only). ``owner_key`` is its
  positional spelling, kept for the index functions on the informers' hot paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["kind_key", "namespaced_key", "object_key", "owner_key", "split_key"]


def namespaced_key(namespace: str | None, name: str) -> str:
    """``"ns/name"``, or ``"name"`` when ``namespace`` is empty (a cluster-scoped object)."""
    return f"{namespace}/{name}" if namespace else name


def object_key(obj: Mapping[str, Any]) -> str:
    """The store key of a raw object: ``namespace/name``, or ``name`` if it has no namespace."""
    meta = obj.get("metadata") or {}
    return namespaced_key(meta.get("namespace"), str(meta.get("name") or ""))


def split_key(key: str) -> tuple[str, str]:
    """``"ns/name"`` -> ("ns", "name"); ``"name"`` -> ("", "name")."""
    namespace, _, name = key.rpartition("/")
    return namespace, name


def kind_key(*, kind: str, namespace: str, name: str) -> str:
    """``"Kind/namespace/name"``."""
    return f"{kind}/{namespace}/{name}"


def owner_key(kind: str, namespace: str, name: str) -> str:
    """``kind_key`` with positional arguments: the ``owner`` index value of a child."""
    return f"{kind}/{namespace}/{name}"
