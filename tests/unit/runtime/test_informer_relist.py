"""A LIST reaches the informer page by page (``begin_list``/``add_page``/``commit``).

The pages are projected as they arrive and the raw objects are let go, yet the store and the
handlers see exactly what a one-shot replace of the whole scope gave: the same final contents
and the same ADDED/MODIFIED/DELETED notifications in the same order. ``reference_replace`` below
is that one-shot algorithm (the informer's ``on_replace`` before pages), the model the page-by-page
path is checked against on random scopes and random page splits.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from lattice.kube.client import WatchEvent
from lattice.kube.resources import CONFIGMAPS, Resource
from lattice.primitives.keys import object_key
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from lattice.runtime.projections import ObjectInfo, object_info
from lattice.runtime.store import Store
from tests.support.fake_apiserver import RecordingClock, running
from tests.support.memory_client import MemoryClient

Value = tuple[str, str]
Note = tuple[str, Value | None, Value | None]


def raw(
    name: str, value: str, *, ns: str = "default", drop: bool = False, boom: bool = False
) -> Obj:
    return {
        "metadata": {"name": name, "namespace": ns},
        "data": {"v": value, "drop": drop, "boom": boom},
    }


def project(obj: Obj) -> Value | None:
    """None for ``drop``, raises for ``boom``, else (key, value)."""
    data = obj["data"]
    if data["boom"]:
        raise RuntimeError("projection bug")
    if data["drop"]:
        return None
    return (object_key(obj), data["v"])


def reference_replace(cache: Store[Value], items: list[Obj], rv: str) -> list[Note]:
    """The one-shot replace of the whole scope on ``cache``: its notifications, in order."""
    fresh: dict[str, Value] = {}
    before: dict[str, Value | None] = {}
    for obj in items:
        key = object_key(obj)
        old = cache.get(key)
        try:
            value = project(obj)
        except RuntimeError:
            value = old  # a failing transform keeps what was cached
        if value is None:
            continue
        fresh[key] = value
        before[key] = old
    vanished = cache.replace(fresh, rv)
    notes: list[Note] = []
    for key, value in fresh.items():
        old = before[key]
        if old is None:
            notes.append(("ADDED", None, value))
        elif old != value:
            notes.append(("MODIFIED", old, value))
    notes += [("DELETED", old, None) for old in vanished.values()]
    return notes


def list_in_pages(informer: Informer[Value], items: list[Obj], cuts: list[int], rv: str) -> int:
    listing = informer.begin_list(namespace=None)
    bounds = [0, *cuts, len(items)]
    for lo, hi in itertools.pairwise(bounds):
        listing.add_page(items[lo:hi])
    return listing.commit(rv)


def random_scope(rng: random.Random) -> list[Obj]:
    names = rng.sample([f"o{i:02d}" for i in range(30)], rng.randint(0, 20))
    return [
        raw(
            n,
            rng.choice("abc"),
            drop=rng.random() < 0.15,
            boom=rng.random() < 0.1,
        )
        for n in names
    ]


@pytest.mark.parametrize("seed", range(25))
def test_page_by_page_relists_match_the_one_shot_replace(seed: int) -> None:
    rng = random.Random(seed)
    informer: Informer[Value] = Informer(
        KubeClientStub(), CONFIGMAPS, transform=project, clock=RecordingClock()
    )
    notes: list[Note] = []
    informer.add_handler(lambda t, old, new: notes.append((t, old, new)))
    model: Store[Value] = Store()
    for n in range(6):  # the initial LIST, then five relists of a changing scope
        items = random_scope(rng)
        cuts = sorted(rng.sample(range(len(items) + 1), rng.randint(0, min(4, len(items)))))
        want = reference_replace(model, items, rv=str(n))
        notes.clear()
        with capture_logs() as logs:  # and not rendered: the failing projections log tracebacks
            count = list_in_pages(informer, items, cuts, rv=str(n))
        assert notes == want
        booms = sum(1 for obj in items if obj["data"]["boom"])
        assert [e["event"] for e in logs if e["log_level"] == "error"] == [
            "informer.transform_failed"
        ] * booms
        assert informer.store.items() == model.items()
        assert count == len(model)
        assert informer.store.resource_version() == str(n)
        assert informer.has_synced


def test_an_uncommitted_listing_changes_nothing() -> None:
    informer: Informer[Value] = Informer(
        KubeClientStub(), CONFIGMAPS, transform=project, clock=RecordingClock()
    )
    notes: list[Note] = []
    informer.add_handler(lambda t, old, new: notes.append((t, old, new)))
    list_in_pages(informer, [raw("a", "1"), raw("b", "1")], [1], rv="1")
    notes.clear()
    abandoned = informer.begin_list(namespace=None)
    abandoned.add_page([raw("a", "2")])  # page 2 never comes: the LIST failed
    assert notes == []
    assert dict(informer.store.items()) == {
        "default/a": ("default/a", "1"),
        "default/b": ("default/b", "1"),
    }
    list_in_pages(informer, [raw("b", "2")], [], rv="2")
    assert notes == [
        ("MODIFIED", ("default/b", "1"), ("default/b", "2")),
        ("DELETED", ("default/a", "1"), None),
    ]


def test_a_namespace_listing_replaces_only_its_namespace_and_syncs_once_all_did() -> None:
    informer: Informer[Value] = Informer(
        KubeClientStub(),
        CONFIGMAPS,
        transform=project,
        clock=RecordingClock(),
        namespaces=["a", "b"],
    )
    notes: list[Note] = []
    informer.add_handler(lambda t, old, new: notes.append((t, old, new)))
    for ns in ("a", "b"):
        assert not informer.has_synced
        listing = informer.begin_list(namespace=ns)
        listing.add_page([raw("x", "1", ns=ns)])
        listing.add_page([raw("y", "1", ns=ns)])
        listing.commit("1")
    assert informer.has_synced
    notes.clear()
    listing = informer.begin_list(namespace="a")
    listing.add_page([raw("y", "2", ns="a")])
    listing.commit("2")
    assert notes == [
        ("MODIFIED", ("a/y", "1"), ("a/y", "2")),
        ("DELETED", ("a/x", "1"), None),
    ]
    assert sorted(informer.store.keys()) == ["a/y", "b/x", "b/y"]
    assert informer.store.resource_version("a") == "2"
    assert informer.store.resource_version("b") == "1"


# --- the reflector lets each raw page go before it asks for the next ---------------------------


class Tracked(dict[str, Any]):
    """A raw object the test can hold a weak reference to."""

    __slots__ = ("__weakref__",)


class KubeClientStub(MemoryClient):
    """Serves ``total`` ConfigMaps in LIST pages of ``limit``; a WATCH stays open, empty.

    Before serving each page it counts the raw objects of the earlier pages still alive. The
    other verbs are the in-memory client's."""

    def __init__(self, total: int = 0) -> None:
        super().__init__()
        self.total = total
        self.pages: list[list[weakref.ref[Tracked]]] = []
        self.alive_when_asked: list[int] = []
        self.watching = asyncio.Event()

    def alive(self) -> int:
        return sum(1 for page in self.pages for ref in page if ref() is not None)

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Obj:
        del res, namespace, label_selector, field_selector, resource_version
        self.alive_when_asked.append(self.alive())
        size = limit or 500
        start = int(continue_token or 0)
        items = [
            Tracked(
                metadata={
                    "name": f"cm-{i:03d}",
                    "namespace": "default",
                    "uid": f"uid-{i}",
                    "resourceVersion": str(i),
                    "managedFields": [{"manager": "test", "fieldsV1": {"f:data": {}}}],
                },
                data={"payload": "x" * 1000},
            )
            for i in range(start, min(start + size, self.total))
        ]
        self.pages.append([weakref.ref(obj) for obj in items])
        end = start + size
        more = str(end) if end < self.total else ""
        return {"metadata": {"resourceVersion": "7", "continue": more}, "items": items}

    async def watch(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        label_selector: str | None = None,
        field_selector: str | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[WatchEvent]:
        del res, namespace, resource_version, timeout_seconds, label_selector, field_selector
        if on_open is not None:
            on_open()
        self.watching.set()
        await asyncio.Event().wait()
        yield WatchEvent("BOOKMARK", {})  # never reached


async def test_the_reflector_holds_one_raw_page_at_a_time() -> None:
    stub = KubeClientStub(total=35)
    informer = Informer(stub, CONFIGMAPS, transform=object_info, page_size=10)
    async with running(informer.run):
        await stub.watching.wait()  # the LIST is committed before the WATCH starts
        assert stub.alive_when_asked == [0, 0, 0, 0], "a raw page outlived its projection"
        assert stub.alive() == 0, "the store keeps projections, never the raw objects"
        assert len(informer.store) == 35
        info = informer.store.get("default/cm-034")
        assert isinstance(info, ObjectInfo)
        assert (info.uid, info.resource_version) == ("uid-34", "34")
        n = len(stub.alive_when_asked)
        stub.watching.clear()
        informer.force_relist()  # a relist at the same size lets go of its pages too
        await stub.watching.wait()
        assert stub.alive_when_asked[n:] == [0, 0, 0, 0]
        assert stub.alive() == 0
