"""One aiohttp application serving ``/metrics``, ``/healthz`` and ``/readyz``.

It listens on two addresses (metrics, default ``:8080``; probes, default ``:8081``, the ports of
the seed chart's service values). ``/readyz`` answers 503 while ``unready()`` names any reason
(the operator's: an informer not synced yet, or a watch failing for longer than
``--watch-failure-timeout``), one reason a line; ``/healthz`` answers 500 when the event loop has
stalled (the watchdog's heartbeat is older than ``stall_after`` seconds), and stays 200 through
an apiserver outage (restarting the process would not bring the apiserver back). Every replica
serves these, leader or not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from lattice.clock import Clock

__all__ = ["ProbeServer", "split_addr"]


def split_addr(addr: str) -> tuple[str, int]:
    """``":8080"`` → ("0.0.0.0", 8080); ``"127.0.0.1:0"`` → ("127.0.0.1", 0)."""
    host, _, port = addr.rpartition(":")
    return (host or "0.0.0.0", int(port))  # all interfaces by default


class ProbeServer:
    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        unready: Callable[[], list[str]],
        clock: Clock,
        metrics_addr: str,
        probe_addr: str,
        stall_after: float = 30.0,
    ) -> None:
        self._unready = unready
        self._clock = clock
        self._stall_after = stall_after
        self._beat = clock.monotonic()
        self._addrs = [metrics_addr] if metrics_addr == probe_addr else [metrics_addr, probe_addr]
        app = web.Application()
        app.router.add_get("/metrics", make_aiohttp_handler(registry))
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        self._watchdog: asyncio.Task[None] | None = None
        self.bound: list[tuple[str, int]] = []

    async def _healthz(self, _: web.Request) -> web.Response:
        stalled = self._clock.monotonic() - self._beat > self._stall_after
        return (
            web.Response(status=500, text="event loop stalled\n")
            if stalled
            else web.Response(text="ok\n")
        )

    async def _readyz(self, _: web.Request) -> web.Response:
        reasons = self._unready()
        if not reasons:
            return web.Response(text="ok\n")
        return web.Response(status=503, text="".join(f"{r}\n" for r in reasons))

    async def _heartbeat(self) -> None:
        while True:
            self._beat = self._clock.monotonic()
            await self._clock.sleep(1.0)

    async def start(self) -> None:
        await self._runner.setup()
        for addr in self._addrs:
            host, port = split_addr(addr)
            site = web.TCPSite(self._runner, host, port)
            await site.start()
            server = site._server  # the bound port is only exposed here
            sockets = getattr(server, "sockets", None) or []
            for sock in sockets:
                name = sock.getsockname()
                self.bound.append((str(name[0]), int(name[1])))
        self._watchdog = asyncio.create_task(self._heartbeat(), name="healthz-heartbeat")

    async def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        await self._runner.cleanup()
