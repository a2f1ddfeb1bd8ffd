"""Path access into nested JSON-like mappings.

Contract: ``get_path(obj, path)`` returns the mapping found by following ``path`` (a sequence
of keys) from ``obj``, or an empty mapping where any step is missing or is not a mapping. It
never copies and never mutates: callers that change the result copy it first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["get_path"]


def get_path(obj: Mapping[str, Any], path: Sequence[str]) -> Mapping[str, Any]:
    """The mapping at ``path`` below ``obj``; an empty mapping where any step is missing."""
    node: Any = obj
    for step in path:
        node = node.get(step) if isinstance(node, Mapping) else None
        if node is None:
            return {}
    return node if isinstance(node, Mapping) else {}
