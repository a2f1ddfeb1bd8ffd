"""``Obj``: a Kubernetes object, or any part of one, as decoded JSON (a ``dict`` keyed by field)."""

from __future__ import annotations

from typing import Any

__all__ = ["Obj"]

Obj = dict[str, Any]
