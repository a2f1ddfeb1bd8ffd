"""Sharing of repeated immutable values between cached projections.

Contract:
- ``Interner[H]`` returns one shared instance per equal hashable value. Its table is bounded: when
  full it is cleared (values already handed out stay valid; only future sharing restarts), so it
  never grows with the number of objects ever seen.
- ``intern_opt`` is ``sys.intern`` for optional strings (falsy -> None). Interned strings are not
  immortal in CPython 3.11: they are freed when no cached object uses them any more.
- ``shared_time`` parses RFC 3339 timestamps into aware datetimes, one instance per distinct
  string among recent ones (the pods of one job are created within the same second).
- ``OwnerRef``/``controller_ref``: the controller ownerReference, shared by every child of an
  owner.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from lattice.primitives.times import parse_time

__all__ = ["Interner", "OwnerRef", "controller_ref", "intern_opt", "shared_time"]

H = TypeVar("H", bound=Hashable)


class Interner(Generic[H]):
    """A bounded table that returns one shared instance per equal value (cleared when full)."""

    def __init__(self, limit: int = 1 << 16) -> None:
        self._table: dict[H, H] = {}
        self._limit = limit

    def __call__(self, value: H) -> H:
        got = self._table.get(value)
        if got is not None:
            return got
        if len(self._table) >= self._limit:
            self._table.clear()
        self._table[value] = value
        return value


def intern_opt(value: Any) -> str | None:
    return sys.intern(str(value)) if value else None


_times: dict[str, datetime] = {}
_TIMES_LIMIT = 4096


def shared_time(value: Any) -> datetime | None:
    """RFC 3339 -> aware datetime, one shared instance per distinct recent string."""
    if not value:
        return None
    text = str(value)
    got = _times.get(text)
    if got is None:
        if len(_times) >= _TIMES_LIMIT:
            _times.clear()
        got = _times[text] = parse_time(text)
    return got


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """A controller ownerReference (``controller: true``)."""

    api_version: str
    kind: str
    name: str
    uid: str


_owners: Interner[OwnerRef] = Interner()


def controller_ref(meta: Mapping[str, Any]) -> OwnerRef | None:
    """The ownerReference with ``controller: true`` in ``metadata``, shared; None if absent."""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return _owners(
                OwnerRef(
                    api_version=sys.intern(str(ref.get("apiVersion", ""))),
                    kind=sys.intern(str(ref.get("kind", ""))),
                    name=sys.intern(str(ref.get("name", ""))),
                    uid=sys.intern(str(ref.get("uid", ""))),
                )
            )
    return None
