"""The memory section's API server: the one in-memory fake of the API seam
(``tests.support.memory_client.MemoryClient``), loaded with the world's generated objects.

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself. The pass bench (``bench/bench_scheduler_pass.py``) builds on it too.

Contract:
- A dataset is keyed by (plural, label selector), as the operator's informers select it (the
  managed pods and their complement share one ``pods`` store on the server). ``load`` parses the
  world's JSON texts and seeds them into the server without requests, then wakes the open
  watches: they deliver one ADDED event per object; an informer told to ``force_relist`` reads
  them by LIST pages instead.
- The server applies the scheduler's status patches and sends them back on the jobs watch as
  MODIFIED events, as an apiserver does; ``caught_up`` says when an informer has them all.
- The server holds every object (as compact JSON): its memory is part of the process's RSS, so
  the memory section measures it in a step of its own before each informer fills.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from lattice.clock import RealClock
from lattice.kube.resources import NODES, PODS, SERVICES, Resource
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from schedload.common import MANAGED, TRAININGJOBS
from schedload.world import MemWorld
from tests.support.memory_client import MemoryClient

__all__ = [
    "RESOURCES",
    "WorldClock",
    "caught_up",
    "events_sent",
    "load",
    "status_patches",
    "until",
]

#: The server resource behind each dataset key.
RESOURCES: dict[tuple[str, str], Resource] = {
    ("trainingjobs", ""): TRAININGJOBS,
    ("pods", MANAGED): PODS,
    ("pods", f"!{MANAGED}"): PODS,
    ("services", MANAGED): SERVICES,
    ("nodes", ""): NODES,
}


def _texts(world: MemWorld, key: tuple[str, str]) -> Iterator[str]:
    sources: dict[tuple[str, str], Callable[[], Iterator[str]]] = {
        ("trainingjobs", ""): world.job_texts,
        ("pods", MANAGED): world.pod_texts,
        ("pods", f"!{MANAGED}"): world.daemon_texts,
        ("services", MANAGED): world.service_texts,
        ("nodes", ""): world.node_texts,
    }
    return sources[key]()


async def load(
    server: MemoryClient, world: MemWorld, key: tuple[str, str], *, wake: bool = True
) -> int:
    """Seed dataset ``key`` into ``server``; with ``wake``, open watches then deliver it (else
    only a LIST reads it). Returns how many objects were stored."""
    res = RESOURCES[key]
    n = 0
    for text in _texts(world, key):
        server.seed(res, json.loads(text))
        n += 1
    if wake:
        await server.notify_watches()
    return n


def caught_up(server: MemoryClient, informer: Informer[Any], want: int) -> Callable[[], bool]:
    """Whether ``informer`` holds at least ``want`` objects and has seen the server's last change
    to its resource (one scope: every namespace)."""
    res = informer.resource

    def done() -> bool:
        seen = informer.resource_versions.get(None) or "0"
        return len(informer.store) >= want and int(seen) >= int(server.latest(res))

    return done


def status_patches(server: MemoryClient) -> list[Obj]:
    """The bodies of the TrainingJob status patches the server applied, in order."""
    return [
        c.body
        for c in server.served
        if (c.verb, c.plural, c.subresource) == ("patch", "trainingjobs", "status")
    ]


def events_sent(server: MemoryClient) -> int:
    """How many Events the operator created."""
    return sum(1 for c in server.served if (c.verb, c.plural) == ("create", "events"))


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
