"""Informer throughput and lag against the real local apiserver, vs the creates' own ceiling.

Needs a running control plane (``make cluster-up``; kubeconfig from ``--kubeconfig`` or
``$LATTICE_CLUSTER_DIR/kubeconfig``, default ``.cluster/kubeconfig``). In fresh namespaces it:

1. **baseline**: creates N ConfigMaps (``--concurrency`` in flight) with no informer running:
   the ceiling of the creates themselves, in creates/s;
2. **informer**: runs an ``Informer`` (``object_info`` projection) on a second namespace and
   creates N more the same way; reports events/s received by the handler (N over the time from
   the first create to the last notification), the ratio to the ceiling, and the lag from each
   create's response to its handler call (negative when the event beats the response);
3. **relist**: a fresh informer syncing the N objects: LIST + transform + store, objects/s;
4. **forced relist**: ``force_relist()`` on the running informer until its store is replaced.

Usage: ``python bench/bench_informer.py [--n 3000] [--concurrency 32] [--warmup 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from lattice.clock import RealClock
from lattice.kube.client import RestClient, connect
from lattice.kube.resources import CONFIGMAPS, NAMESPACES
from lattice.runtime.informer import Informer
from lattice.runtime.logs import configure_logging
from lattice.runtime.projections import ObjectInfo, object_info

REPO = Path(__file__).resolve().parents[1]
clock = RealClock()


async def create_many(
    client: RestClient,
    namespace: str,
    *,
    n: int,
    concurrency: int,
    done: Callable[[str, float], None] | None = None,
    prefix: str = "cm",
) -> float:
    """Create ``n`` ConfigMaps; returns the wall seconds; ``done(key, t)`` after each response."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            name = f"{prefix}-{i:05d}"
            body = {"metadata": {"name": name}, "data": {"i": str(i), "pad": "x" * 256}}
            await client.create(CONFIGMAPS, body, namespace=namespace)
            if done is not None:
                done(f"{namespace}/{name}", clock.monotonic())

    start = clock.monotonic()
    await asyncio.gather(*(one(i) for i in range(n)))
    return clock.monotonic() - start


async def until(event: asyncio.Event, what: str, timeout: float = 300.0) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        raise SystemExit(f"timed out waiting for {what}") from None


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(coro: Awaitable[object]) -> float:
    start = clock.monotonic()
    await coro
    return clock.monotonic() - start


async def bench(*, kubeconfig: str, n: int, concurrency: int, warmup: int) -> None:
    client = await connect(kubeconfig=kubeconfig)
    run = uuid.uuid4().hex[:6]
    base_ns, inf_ns = f"bench-base-{run}", f"bench-inf-{run}"
    tasks: list[asyncio.Task[None]] = []
    try:
        for ns in (base_ns, inf_ns):
            await client.create(NAMESPACES, {"metadata": {"name": ns}})

        # 1. the ceiling: creates with nothing else running (after a warm-up round that opens
        #    the connection pool and warms the apiserver)
        await create_many(client, base_ns, n=warmup, concurrency=concurrency, prefix="warm")
        base_s = await create_many(client, base_ns, n=n, concurrency=concurrency)

        # 2. the same creates with an informer watching them
        received: dict[str, float] = {}
        all_in = asyncio.Event()

        def handler(event_type: str, old: ObjectInfo | None, new: ObjectInfo | None) -> None:
            if event_type == "ADDED" and new is not None:
                received.setdefault(new.key, clock.monotonic())
                if len(received) >= n:
                    all_in.set()

        informer = Informer(client, CONFIGMAPS, transform=object_info, namespaces=[inf_ns])
        informer.add_handler(handler)
        tasks.append(asyncio.get_running_loop().create_task(informer.run()))
        await informer.wait_synced()
        responded: dict[str, float] = {}
        start = clock.monotonic()
        inf_create_s = await create_many(
            client, inf_ns, n=n, concurrency=concurrency, done=responded.__setitem__
        )
        await until(all_in, "every ADDED notification")
        events_s = max(received.values()) - start
        lags = [(received[k] - responded[k]) * 1000 for k in responded]

        # 3. a fresh informer's initial LIST of the n objects
        fresh = Informer(client, CONFIGMAPS, transform=object_info, namespaces=[inf_ns])
        fresh_task = asyncio.get_running_loop().create_task(fresh.run())
        tasks.append(fresh_task)
        sync_s = await timed(fresh.wait_synced())

        # 4. a forced relist (RV "") on the running informer; its scope is emptied first so
        #    the relist re-adds every object and the first ADDED marks the replace done
        relisted = asyncio.Event()
        fresh.store.replace({}, "0", namespace=inf_ns)
        fresh.add_handler(lambda t, o, nw: relisted.set() if len(fresh.store) >= n else None)
        relist_s = await timed(_force_and_wait(fresh, relisted))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for ns in (base_ns, inf_ns):
            try:
                await client.delete(NAMESPACES, ns)
            except Exception as exc:
                print(f"cleanup of {ns} failed: {exc!r}")
        await client.close()

    rows = [
        ("creates/s, no informer (ceiling)", f"{n / base_s:,.0f}"),
        ("creates/s, informer running", f"{n / inf_create_s:,.0f}"),
        ("informer events/s (create start -> last handler)", f"{n / events_s:,.0f}"),
        ("ratio events/s : ceiling", f"{(n / events_s) / (n / base_s):.2f}"),
        ("lag create response -> handler, p50 ms", f"{statistics.median(lags):,.1f}"),
        ("lag p95 ms", f"{pct(lags, 0.95):,.1f}"),
        ("lag p99 ms", f"{pct(lags, 0.99):,.1f}"),
        ("lag max ms", f"{max(lags):,.1f}"),
        (f"initial sync of {n:,} objects, s", f"{sync_s:.2f} ({n / sync_s:,.0f} obj/s)"),
        (f"forced relist of {n:,} objects, s", f"{relist_s:.2f} ({n / relist_s:,.0f} obj/s)"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"n={n:,} concurrency={concurrency}")
    print(f"{'metric':<{width}}  value")
    print("-" * (width + 24))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


async def _force_and_wait(informer: Informer[ObjectInfo], done: asyncio.Event) -> None:
    informer.force_relist()
    await until(done, "the forced relist")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_kc = Path(os.environ.get("LATTICE_CLUSTER_DIR", REPO / ".cluster")) / "kubeconfig"
    parser.add_argument("--kubeconfig", default=str(default_kc))
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    if not Path(args.kubeconfig).exists():
        raise SystemExit(f"no kubeconfig at {args.kubeconfig}: run `make cluster-up` first")
    configure_logging(level="warning", fmt="console")
    asyncio.run(
        bench(
            kubeconfig=args.kubeconfig, n=args.n, concurrency=args.concurrency, warmup=args.warmup
        )
    )


if __name__ == "__main__":
    main()
