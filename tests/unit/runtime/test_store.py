"""The indexer: keys, the built-in namespace index, custom indexes, scoped replace."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lattice.primitives.keys import object_key, split_key
from lattice.runtime.store import NAMESPACE_INDEX, Store


@dataclass(frozen=True, slots=True)
class V:
    owner: str
    tags: tuple[str, ...] = ()


def owners(v: V) -> tuple[str, ...]:
    return (v.owner,) if v.owner else ()


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param({"metadata": {"namespace": "ns", "name": "a"}}, "ns/a", id="namespaced"),
        pytest.param({"metadata": {"name": "node-1"}}, "node-1", id="cluster-scoped"),
        pytest.param({"metadata": {"namespace": "", "name": "n"}}, "n", id="empty namespace"),
    ],
)
def test_object_key(obj: dict[str, object], want: str) -> None:
    assert object_key(obj) == want


def test_split_key() -> None:
    assert split_key("ns/a") == ("ns", "a")
    assert split_key("node-1") == ("", "node-1")


def test_upsert_get_delete() -> None:
    s: Store[V] = Store()
    assert s.upsert("ns/a", V("j1")) is None
    assert s.upsert("ns/a", V("j2")) == V("j1")
    assert s.get("ns/a") == V("j2")
    assert "ns/a" in s
    assert len(s) == 1
    assert s.delete("ns/a") == V("j2")
    assert s.delete("ns/a") is None
    assert s.get("ns/a") is None
    assert s.keys() == []


def test_namespace_index_is_built_in() -> None:
    s: Store[V] = Store()
    s.upsert("a/x", V(""))
    s.upsert("a/y", V(""))
    s.upsert("b/x", V(""))
    s.upsert("node", V(""))
    assert s.index_keys(NAMESPACE_INDEX, "a") == ["a/x", "a/y"]
    assert len(s.by_namespace("b")) == 1
    assert s.index_keys(NAMESPACE_INDEX, "") == ["node"]
    s.delete("b/x")
    assert s.index_values(NAMESPACE_INDEX) == ["", "a"]


def test_custom_index_follows_updates_and_deletes() -> None:
    s: Store[V] = Store()
    s.add_index("owner", owners)
    s.upsert("ns/p0", V("job/a"))
    s.upsert("ns/p1", V("job/a"))
    s.upsert("ns/p2", V("job/b"))
    assert s.index_keys("owner", "job/a") == ["ns/p0", "ns/p1"]
    s.upsert("ns/p1", V("job/b"))  # re-owned
    assert s.index_keys("owner", "job/a") == ["ns/p0"]
    assert s.by_index("owner", "job/b") == [V("job/b"), V("job/b")]
    s.upsert("ns/p0", V(""))  # orphaned: leaves the index, bucket disappears
    assert s.index_keys("owner", "job/a") == []
    assert s.index_values("owner") == ["job/b"]
    s.delete("ns/p2")
    assert s.index_keys("owner", "job/b") == ["ns/p1"]


def test_multi_valued_index() -> None:
    s: Store[V] = Store()
    s.add_index("tag", lambda v: v.tags)
    s.upsert("k1", V("", ("x", "y")))
    s.upsert("k2", V("", ("y",)))
    assert s.index_keys("tag", "y") == ["k1", "k2"]
    s.upsert("k1", V("", ("z",)))
    assert s.index_keys("tag", "x") == []
    assert s.index_keys("tag", "y") == ["k2"]
    assert s.index_keys("tag", "z") == ["k1"]


def test_add_index_indexes_existing_items() -> None:
    s: Store[V] = Store()
    s.upsert("ns/p0", V("job/a"))
    s.add_index("owner", owners)
    assert s.index_keys("owner", "job/a") == ["ns/p0"]
    with pytest.raises(ValueError, match="already exists"):
        s.add_index("owner", owners)
    with pytest.raises(ValueError, match="already exists"):
        s.add_index(NAMESPACE_INDEX, owners)


def test_unknown_index_raises() -> None:
    s: Store[V] = Store()
    with pytest.raises(KeyError):
        s.by_index("nope", "x")


def test_replace_returns_vanished_with_last_values() -> None:
    s: Store[V] = Store()
    s.add_index("owner", owners)
    s.upsert("ns/a", V("j"))
    s.upsert("ns/b", V("j"))
    vanished = s.replace({"ns/b": V("k"), "ns/c": V("k")}, "42")
    assert vanished == {"ns/a": V("j")}
    assert sorted(s.keys()) == ["ns/b", "ns/c"]
    assert s.index_keys("owner", "j") == []
    assert s.index_keys("owner", "k") == ["ns/b", "ns/c"]
    assert s.resource_version() == "42"


def test_replace_scoped_to_a_namespace_leaves_others_alone() -> None:
    s: Store[V] = Store()
    s.upsert("a/x", V(""))
    s.upsert("b/y", V(""))
    vanished = s.replace({"a/z": V("")}, "7", namespace="a")
    assert vanished == {"a/x": V("")}
    assert sorted(s.keys()) == ["a/z", "b/y"]
    assert s.resource_version("a") == "7"
    assert s.resource_version() is None
    with pytest.raises(ValueError, match="outside namespace"):
        s.replace({"b/q": V("")}, "8", namespace="a")


def test_iteration_is_a_snapshot() -> None:
    s: Store[V] = Store()
    s.upsert("a", V(""))
    s.upsert("b", V(""))
    for key in s:
        s.delete(key)  # no "dict changed size during iteration"
    assert len(s) == 0
