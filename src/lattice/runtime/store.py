"""An in-memory indexer: the informer's cache, in the manner of client-go's ``thread_safe_store``.

Contract:
- Keys are ``namespace/name``, or ``name`` for cluster-scoped objects (``object_key`` /
  ``split_key``). Identity is the key, not the UID (client-go invariant 14): a delete followed by a
  re-create with the same name can look like an update; consumers that care compare UIDs.
- Values are opaque ``T`` (raw dicts or slim projections). The store never inspects them: the key
  is given by the caller (the informer derives it from the raw object's metadata before any
  transform), and secondary indexes are plain functions ``T -> Iterable[str]`` run on insert,
  update and delete. Index functions must be pure and cheap.
- The ``namespace`` index is built in and is computed from the key, so it works for any ``T``.
- ``replace(items, rv, namespace=...)`` swaps the content of one scope (all keys, or the keys of one
  namespace when one reflector per namespace feeds the store) and returns the entries that
  vanished with their last known value, so the informer can emit tombstone deletes (client-go
  invariant 13).
- Thread-free by design: one asyncio event loop owns the store, and no method awaits, so every
  call is atomic with respect to other coroutines. Readers must treat returned values as
  read-only (they are shared with the cache).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

from lattice.primitives.keys import object_key, split_key

__all__ = ["NAMESPACE_INDEX", "IndexFn", "Store", "object_key", "split_key"]

T = TypeVar("T")
_List = list  # ``Store.list`` shadows the builtin inside the class body

#: A secondary index function: the index values of one stored value.
IndexFn = Callable[[T], Iterable[str]]

#: The built-in index on the key's namespace ("" for cluster-scoped keys).
NAMESPACE_INDEX = "namespace"


_EMPTY: dict[str, None] = {}


def _key_namespace(key: str) -> str:
    slash = key.find("/")
    return key[:slash] if slash >= 0 else ""


class Store(Generic[T]):
    """Key -> value map with named secondary indexes (index value -> set of keys)."""

    def __init__(self) -> None:
        self._items: dict[str, T] = {}
        self._index_fns: dict[str, IndexFn[T]] = {}
        self._indices: dict[str, dict[str, dict[str, None]]] = {}
        self._by_namespace: dict[str, dict[str, None]] = {}
        self._rvs: dict[str | None, str] = {}

    # --- indexes -------------------------------------------------------------------------------

    def add_index(self, name: str, fn: IndexFn[T]) -> None:
        """Register index ``name``; existing items are indexed at once."""
        if name == NAMESPACE_INDEX or name in self._index_fns:
            raise ValueError(f"index {name!r} already exists")
        self._index_fns[name] = fn
        index: dict[str, dict[str, None]] = {}
        self._indices[name] = index
        for key, value in self._items.items():
            for iv in fn(value):
                index.setdefault(iv, {})[key] = None

    @property
    def index_names(self) -> tuple[str, ...]:
        return (NAMESPACE_INDEX, *self._index_fns)

    def index_keys(self, name: str, value: str) -> list[str]:
        """The keys whose index ``name`` yields ``value``, sorted."""
        return sorted(self._bucket(name, value))

    def by_index(self, name: str, value: str) -> list[T]:
        """The values whose index ``name`` yields ``value``, in key order."""
        items = self._items
        return [items[k] for k in sorted(self._bucket(name, value))]

    def index_values(self, name: str) -> list[str]:
        """Every value index ``name`` currently holds, sorted."""
        if name == NAMESPACE_INDEX:
            return sorted(self._by_namespace)
        if name not in self._indices:
            raise KeyError(f"no index {name!r}")
        return sorted(self._indices[name])

    def _bucket(self, name: str, value: str) -> dict[str, None]:
        if name == NAMESPACE_INDEX:
            return self._by_namespace.get(value, _EMPTY)
        try:
            index = self._indices[name]
        except KeyError:
            raise KeyError(f"no index {name!r}") from None
        return index.get(value, _EMPTY)

    def _index_add(self, key: str, value: T) -> None:
        self._by_namespace.setdefault(_key_namespace(key), {})[key] = None
        for name, fn in self._index_fns.items():
            index = self._indices[name]
            for iv in fn(value):
                index.setdefault(iv, {})[key] = None

    def _index_remove(self, key: str, value: T) -> None:
        ns = _key_namespace(key)
        bucket = self._by_namespace.get(ns)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del self._by_namespace[ns]
        for name, fn in self._index_fns.items():
            index = self._indices[name]
            for iv in fn(value):
                keys = index.get(iv)
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del index[iv]

    # --- reads ---------------------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def keys(self) -> _List[str]:
        return _List(self._items)

    def list(self) -> _List[T]:
        return _List(self._items.values())

    def items(self) -> _List[tuple[str, T]]:
        return _List(self._items.items())

    def by_namespace(self, namespace: str) -> _List[T]:
        return self.by_index(NAMESPACE_INDEX, namespace)

    def resource_version(self, namespace: str | None = None) -> str | None:
        """The resourceVersion of the last ``replace`` of that scope (None: all namespaces)."""
        return self._rvs.get(namespace)

    # --- writes --------------------------------------------------------------------------------

    def upsert(self, key: str, value: T) -> T | None:
        """Insert or overwrite ``key``; returns the previous value."""
        old = self._items.get(key)
        self._items[key] = value
        if old is None:
            self._index_add(key, value)
            return None
        # Same key, same namespace: only the custom indexes can move.
        for name, fn in self._index_fns.items():
            before, after = set(fn(old)), set(fn(value))
            if before == after:
                continue
            index = self._indices[name]
            for iv in before - after:
                keys = index.get(iv)
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del index[iv]
            for iv in after - before:
                index.setdefault(iv, {})[key] = None
        return old

    def delete(self, key: str) -> T | None:
        """Remove ``key``; returns the value it had, or None if it was absent."""
        old = self._items.pop(key, None)
        if old is not None:
            self._index_remove(key, old)
        return old

    def replace(
        self, items: Mapping[str, T], rv: str, *, namespace: str | None = None
    ) -> dict[str, T]:
        """Make the scope hold exactly ``items``; return the vanished keys and their last values.

        ``namespace=None`` replaces the whole store; otherwise only keys of that namespace are
        candidates for removal (every key in ``items`` must belong to it).
        """
        if namespace is None:
            scope = list(self._items)
        else:
            scope = list(self._by_namespace.get(namespace, ()))
            stray = [k for k in items if _key_namespace(k) != namespace]
            if stray:
                raise ValueError(f"keys outside namespace {namespace!r}: {stray[:3]}")
        vanished: dict[str, T] = {}
        for key in scope:
            if key not in items:
                old = self.delete(key)
                if old is not None:
                    vanished[key] = old
        for key, value in items.items():
            self.upsert(key, value)
        self._rvs[namespace] = rv
        return vanished
