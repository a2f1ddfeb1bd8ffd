"""``/readyz`` says why it is not ready; ``/healthz`` does not follow the apiserver."""

from __future__ import annotations

import aiohttp
from prometheus_client import CollectorRegistry

from lattice.clock import FakeClock
from lattice.runtime.server import ProbeServer


async def test_readyz_is_503_with_one_line_per_reason_and_healthz_stays_200() -> None:
    reasons: list[str] = ["pods:pod_info: failing for 31s: connection refused"]
    server = ProbeServer(
        registry=CollectorRegistry(),
        unready=lambda: list(reasons),
        clock=FakeClock(),
        metrics_addr="127.0.0.1:0",
        probe_addr="127.0.0.1:0",
    )
    await server.start()
    try:
        host, port = server.bound[-1]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://{host}:{port}/readyz") as resp:
                assert (resp.status, await resp.text()) == (503, f"{reasons[0]}\n")
            async with http.get(f"http://{host}:{port}/healthz") as resp:
                assert resp.status == 200
            reasons.clear()
            async with http.get(f"http://{host}:{port}/readyz") as resp:
                assert (resp.status, await resp.text()) == (200, "ok\n")
    finally:
        await server.stop()
