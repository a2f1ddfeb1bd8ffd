"""Applying patches the way the apiserver does, for the in-memory fakes of the API seam.

Contract:
- ``apply_merge_patch(target, patch)`` is RFC 7386 (JSON merge patch): ``null`` deletes a key,
  an object merges key by key, anything else replaces. ``target`` is never changed.
- ``apply_json_patch(target, ops)`` is RFC 6902 (JSON patch) for ``add``, ``replace``,
  ``remove`` and ``test``; a failed ``test`` raises ``PatchTestFailed``. ``target`` is never
  changed.

``lattice.runtime.status.merge_patch`` is the other direction: the patch between two objects.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PatchTestFailed", "apply_json_patch", "apply_merge_patch"]


class PatchTestFailed(ValueError):
    """A JSON patch ``test`` operation did not hold."""


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``target`` with the JSON merge patch ``patch`` applied (``target`` unchanged)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = apply_merge_patch(out.get(k), v)
    return out


def _steps(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer must start with '/': {path!r}")
    return [s.replace("~1", "/").replace("~0", "~") for s in path[1:].split("/")]


def _parent(doc: Any, steps: list[str]) -> Any:
    node = doc
    for step in steps[:-1]:
        node = node[int(step)] if isinstance(node, list) else node[step]
    return node


def apply_json_patch(target: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """RFC 6902 (add, replace, remove, test): ``target`` with ``ops`` applied, unchanged itself."""
    doc = copy.deepcopy(target)
    for op in ops:
        steps = _steps(str(op["path"]))
        parent = _parent(doc, steps)
        last = steps[-1]
        kind = op["op"]
        if kind == "test":
            got = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if got != op.get("value"):
                raise PatchTestFailed(
                    f"test failed at {op['path']}: {got!r} != {op.get('value')!r}"
                )
        elif kind in ("add", "replace"):
            value = copy.deepcopy(op.get("value"))
            if isinstance(parent, list):
                if last == "-":
                    parent.append(value)
                elif kind == "add":
                    parent.insert(int(last), value)
                else:
                    parent[int(last)] = value
            else:
                parent[last] = value
        elif kind == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        else:
            raise ValueError(f"unsupported JSON patch op {kind!r}")
    return doc
