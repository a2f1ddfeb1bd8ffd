"""The informer against the real kube-apiserver: the cache converges to a fresh LIST.

An informer on ConfigMaps in a fresh namespace runs while 1,000 objects are created (20 at a
time), some updated, a relist is forced half-way (the 410 path: RV "" and tombstones), some are
deleted while it watches, and more are deleted while it is stopped (those can only reach the
handlers as relist tombstones). After each phase the cache must equal a fresh LIST (names and
resourceVersions), and each key's last notification must carry its final state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import suppress

import pytest

from lattice.kube.client import RestClient, connect
from lattice.kube.resources import CONFIGMAPS
from lattice.runtime.informer import Informer
from lattice.runtime.projections import ObjectInfo, object_info
from tests.support.cluster import Cluster
from tests.support.wait import wait_for_async

N = 1000
CONCURRENCY = 20


class LastSeen:
    """Handler keeping each key's last notification, and every relist reason via metrics."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[str, ObjectInfo]] = {}
        self.relists: list[str] = []

    def __call__(self, event_type: str, old: ObjectInfo | None, new: ObjectInfo | None) -> None:
        value = new if new is not None else old
        assert value is not None
        self.last[value.key] = (event_type, value)

    # InformerMetrics
    def relisted(self, informer: str, reason: str) -> None:
        self.relists.append(reason)

    def watch_ended(self, informer: str, reason: str) -> None:
        pass

    def event_applied(self, informer: str, event_type: str) -> None:
        pass

    def synced(self, informer: str, value: bool) -> None:
        pass


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[RestClient]:
    c = await connect(kubeconfig=str(cluster.kubeconfig))
    yield c
    await c.close()


async def fresh_list(client: RestClient, namespace: str) -> dict[str, str]:
    """``{key: resourceVersion}`` from a consistent LIST (no RV: read from etcd)."""
    out: dict[str, str] = {}
    token: str | None = None
    while True:
        page = await client.list(CONFIGMAPS, namespace=namespace, limit=500, continue_token=token)
        for item in page["items"]:
            meta = item["metadata"]
            out[f"{meta['namespace']}/{meta['name']}"] = meta["resourceVersion"]
        token = page["metadata"].get("continue")
        if not token:
            return out


def cached(informer: Informer[ObjectInfo]) -> dict[str, str]:
    return {key: value.resource_version for key, value in informer.store.items()}


async def converge(
    client: RestClient, informer: Informer[ObjectInfo], namespace: str
) -> dict[str, str]:
    async def probe() -> tuple[dict[str, str], dict[str, str]]:
        return await fresh_list(client, namespace), cached(informer)

    truth, _ = await wait_for_async(
        probe,
        lambda pair: pair[0] == pair[1],
        timeout=90,
        interval=0.5,
        what="informer cache == fresh LIST",
    )
    return truth


def assert_handlers_saw_final_state(
    seen: LastSeen, truth: dict[str, str], deleted: set[str]
) -> None:
    for key, rv in truth.items():
        event_type, value = seen.last[key]
        assert event_type in ("ADDED", "MODIFIED"), key
        assert value.resource_version == rv, key
    for key in deleted:
        assert seen.last[key][0] == "DELETED", key


async def run_informer(informer: Informer[ObjectInfo]) -> asyncio.Task[None]:
    task = asyncio.get_running_loop().create_task(informer.run())
    await asyncio.wait_for(informer.wait_synced(), 60)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task


async def test_informer_cache_converges_through_creates_relists_and_deletes(
    cluster: Cluster, namespace: str, client: RestClient
) -> None:
    seen = LastSeen()
    informer = Informer(
        client, CONFIGMAPS, transform=object_info, namespaces=[namespace], metrics=seen
    )
    informer.add_handler(seen)
    task = await run_informer(informer)
    try:
        gate = asyncio.Semaphore(CONCURRENCY)
        created = 0

        async def create(i: int) -> None:
            nonlocal created
            async with gate:
                body = {"metadata": {"name": f"cm-{i:04d}"}, "data": {"i": str(i)}}
                await client.create(CONFIGMAPS, body, namespace=namespace)
            created += 1
            if created == N // 2:
                informer.force_relist()  # mid-stream: the relist path under load

        await asyncio.gather(*(create(i) for i in range(N)))
        for i in range(0, 100, 2):  # MODIFIED through the watch
            await client.patch(
                CONFIGMAPS, f"cm-{i:04d}", {"data": {"i": "changed"}}, namespace=namespace
            )
        truth = await converge(client, informer, namespace)
        assert sum(1 for k in truth if k.startswith(f"{namespace}/cm-")) == N
        assert "forced" in seen.relists
        assert_handlers_saw_final_state(seen, truth, set())

        # deletes seen by the watch
        watched = {f"{namespace}/cm-{i:04d}" for i in range(100, 150)}
        await asyncio.gather(
            *(client.delete(CONFIGMAPS, k.split("/")[1], namespace=namespace) for k in watched)
        )
        truth = await converge(client, informer, namespace)
        assert not watched & truth.keys()
        assert_handlers_saw_final_state(seen, truth, watched)
    finally:
        await stop(task)

    # deletes missed while stopped: only a relist (RV "") can report them, as tombstones
    missed = {f"{namespace}/cm-{i:04d}" for i in range(150, 200)}
    await asyncio.gather(
        *(client.delete(CONFIGMAPS, k.split("/")[1], namespace=namespace) for k in missed)
    )
    relists_before = len(seen.relists)
    informer.force_relist()
    task = asyncio.get_running_loop().create_task(informer.run())
    try:
        truth = await converge(client, informer, namespace)
        assert seen.relists[relists_before:][:1] == ["forced"]
        assert not missed & truth.keys()
        assert_handlers_saw_final_state(seen, truth, watched | missed)
    finally:
        await stop(task)
