"""The memory section's in-memory apiserver: LIST pages and WATCH streams of generated JSON.

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself.
"""

from __future__ import annotations

import asyncio
import collections
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from _support import Obj

from lattice.clock import RealClock, yield_now
from lattice.kube.client import WatchEvent
from lattice.kube.errors import NotFound
from lattice.kube.resources import Resource
from schedload.common import MANAGED
from schedload.world import MemWorld
from tests.support.patches import apply_merge_patch

__all__ = ["FakeApi", "WorldClock", "filled", "until"]


class FakeApi:
    """A ``KubeClient`` serving generated datasets by LIST pages and WATCH streams, in memory.

    A dataset is keyed by (plural, label selector); it is served only once enabled. LIST pages
    are built as JSON text and parsed with ``json.loads`` (what ``RestClient`` does); a WATCH
    stays open and, when a dataset is streamed, yields one ADDED event per object (parsed from
    its text) and later any queued MODIFIED texts. Status patches of TrainingJobs return the
    regenerated job with the patch merged (the patch carries every scheduler field), recording
    the patch so it can be delivered back as a MODIFIED event. The arguments a method does not
    use (namespaces, field selectors, resource versions...) go to ``**_``.
    """

    def __init__(self, world: MemWorld) -> None:
        self.world = world
        self.sources: dict[tuple[str, str], Callable[[], Iterator[str]]] = {
            ("trainingjobs", ""): world.job_texts,
            ("pods", MANAGED): world.pod_texts,
            ("pods", f"!{MANAGED}"): world.daemon_texts,
            ("services", MANAGED): world.service_texts,
            ("nodes", ""): world.node_texts,
        }
        self.enabled: set[tuple[str, str]] = set()
        self._cursors: dict[str, Iterator[str]] = {}
        self._streams: dict[tuple[str, str], Iterator[str]] = {}
        self._modified: dict[tuple[str, str], collections.deque[str]] = collections.defaultdict(
            collections.deque
        )
        self._wake: dict[tuple[str, str], asyncio.Event] = collections.defaultdict(asyncio.Event)
        self._rv = 10_000_000
        self.patches: list[tuple[int, str]] = []
        self.events = 0

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def stream(self, key: tuple[str, str]) -> None:
        self.enabled.add(key)
        self._streams[key] = self.sources[key]()
        self._wake[key].set()

    def deliver_patched(self) -> int:
        """Queue every recorded patch's result as a MODIFIED event on the jobs watch."""
        key = ("trainingjobs", "")
        n = 0
        for j, body in self.patches:
            obj = apply_merge_patch(self.world.job(j), json.loads(body))
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self._modified[key].append(json.dumps(obj, separators=(",", ":")))
            n += 1
        self.patches.clear()
        self._wake[key].set()
        return n

    def pending(self, key: tuple[str, str]) -> int:
        return len(self._modified[key]) + (1 if key in self._streams else 0)

    async def list(
        self,
        res: Resource,
        *,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        **_: Any,
    ) -> Obj:
        key = (res.plural, label_selector or "")
        await yield_now()
        rv = self._next_rv()
        if key not in self.enabled:
            return {"metadata": {"resourceVersion": rv}, "items": []}
        cursor = self._cursors.pop(continue_token) if continue_token else self.sources[key]()
        chunk = [text for _, text in zip(range(limit or 500), cursor, strict=False)]
        token = ""
        if len(chunk) == (limit or 500):
            token = uuid.uuid4().hex
            self._cursors[token] = cursor
        meta = json.dumps({"resourceVersion": rv, "continue": token})
        page: Obj = json.loads(f'{{"metadata":{meta},"items":[{",".join(chunk)}]}}')
        return page

    async def watch(
        self, res: Resource, *, label_selector: str | None = None, **_: Any
    ) -> AsyncIterator[WatchEvent]:
        key = (res.plural, label_selector or "")
        wake = self._wake[key]
        while True:
            queued = self._modified[key]
            while queued:
                yield WatchEvent("MODIFIED", json.loads(queued.popleft()))
            it = self._streams.get(key)
            if it is not None:
                for n, text in enumerate(it):
                    yield WatchEvent("ADDED", json.loads(text))
                    if n % 256 == 255:
                        await yield_now()
                self._streams.pop(key, None)
                continue
            wake.clear()
            await wake.wait()

    async def get(self, res: Resource, name: str, **_: Any) -> Obj:
        raise NotFound(404, "NotFound", f"{res.plural} {name} not found")

    async def create(self, res: Resource, body: Obj, **_: Any) -> Obj:
        self.events += 1
        return body

    async def patch(
        self, res: Resource, name: str, body: Any, *, subresource: str | None = None, **_: Any
    ) -> Obj:
        if res.plural != "trainingjobs" or subresource != "status":
            raise NotFound(404, "NotFound", f"{res.plural} {name}")
        j = int(name.rsplit("-", 1)[1])
        patch = dict(body)
        patch.pop("metadata", None)
        self.patches.append((j, json.dumps(patch, separators=(",", ":"))))
        obj: Obj = apply_merge_patch(self.world.job(j), patch)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        return obj

    async def replace(self, res: Resource, name: str, body: Obj, **_: Any) -> Obj:
        return body

    async def delete(self, res: Resource, name: str, **_: Any) -> Obj:
        return {}

    async def close(self) -> None:
        return None


def filled(store: Any, key: tuple[str, str], want: int, fake: FakeApi) -> Callable[[], bool]:
    return lambda: len(store) >= want and not fake.pending(key)


async def until(cond: Callable[[], bool], period: float = 0.05) -> None:
    while True:
        if cond():
            return
        await RealClock().sleep(period)


class WorldClock(RealClock):
    """Real sleeps and monotonic time; wall time pinned to the world's snapshot time, so the
    pass decides at the ``now`` the objects were generated for however long the fill took."""

    def __init__(self, at: datetime) -> None:
        self._at = at + timedelta(seconds=1)

    def now(self) -> datetime:
        return self._at
