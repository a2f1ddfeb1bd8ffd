"""A fault-injecting reverse proxy between the operator and the real kube-apiserver.

Design: a TLS-terminating HTTP proxy (aiohttp) on ``127.0.0.1``. The operator talks plain HTTP to
the proxy through a kubeconfig written by ``write_kubeconfig`` (``server: http://127.0.0.1:<port>``,
no credentials); the proxy talks HTTPS to the apiserver with the cluster's CA and admin client
certificate from ``.cluster/pki``. So the operator acts as the admin user, exactly as it does with
the normal test kubeconfig, and the proxy sees every request in clear text and can answer it.

Faults (``Faults``, mutable while the proxy runs; each rate is a probability per request):

- ``error_429`` / ``error_500``: answer any non-watch request with a Kubernetes ``Status`` 429
  (with ``Retry-After: 1``) or 500 instead of forwarding it;
- ``conflict_409``: answer writes (POST/PUT/PATCH/DELETE) with a 409 Conflict;
- ``drop_watch``: forward a watch, then cut the connection ``drop_watch_after`` seconds after it
  opened, whether or not data is flowing (or after the first chunk if that is 0), as a dying
  apiserver or load balancer would;
- ``slow``: delay a request by ``slow_seconds`` before forwarding it.

A fixed ``random.Random(seed)`` decides, so a run is reproducible given the request order.
``counts`` records what was injected. Run it in a background thread with ``FaultProxy.start()``.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web

from lattice.clock import RealClock

__all__ = ["FaultProxy", "Faults"]

_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}
_WRITES = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass
class Faults:
    """Injection rates (0..1) and timings; mutate freely while the proxy runs."""

    error_429: float = 0.0
    error_500: float = 0.0
    conflict_409: float = 0.0
    drop_watch: float = 0.0
    drop_watch_after: float = 0.0
    slow: float = 0.0
    slow_seconds: float = 0.5
    seed: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def off(self) -> None:
        self.error_429 = self.error_500 = self.conflict_409 = self.drop_watch = self.slow = 0.0

    def hit(self, rate: float) -> bool:
        return rate > 0 and self.rng.random() < rate


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    headers = {"Retry-After": "1"} if code == 429 else {}
    return web.Response(
        status=code, text=json.dumps(body), content_type="application/json", headers=headers
    )


class FaultProxy:
    """The proxy; ``start()`` runs it on its own event loop thread, ``stop()`` ends it."""

    def __init__(self, *, upstream: str, pki: Path, faults: Faults | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults = faults or Faults()
        self.counts: Counter[str] = Counter()
        self.port = 0
        self._pki = pki
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("fault proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def write_kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: proxy\n  cluster: {{server: 'http://127.0.0.1:{self.port}'}}\n"
            "users:\n- name: proxy\n  user: {}\n"
            "contexts:\n- name: proxy\n  context: {cluster: proxy, user: proxy}\n"
            "current-context: proxy\n"
        )
        return path

    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        ctx = ssl.create_default_context(cafile=str(self._pki / "ca.crt"))
        ctx.load_cert_chain(str(self._pki / "admin.crt"), str(self._pki / "admin.key"))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()
        await self._session.close()

    # --- one request -----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        f = self.faults
        watch = request.query.get("watch") in {"true", "1"}
        self._count("requests")
        if f.hit(f.slow):
            self._count("slow")
            await RealClock().sleep(f.slow_seconds)
        if not watch:
            if f.hit(f.error_429):
                self._count("429")
                return _status(429, "TooManyRequests", "fault proxy: too many requests")
            if f.hit(f.error_500):
                self._count("500")
                return _status(500, "InternalError", "fault proxy: internal error")
            if request.method in _WRITES and f.hit(f.conflict_409):
                self._count("409")
                return _status(409, "Conflict", "fault proxy: the object has been modified")
        drop = watch and f.hit(f.drop_watch)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        body = await request.read()
        try:
            upstream = await self._session.request(
                request.method,
                self.upstream + request.rel_url.path_qs,
                headers=headers,
                data=body or None,
            )
        except (aiohttp.ClientError, OSError) as exc:
            self._count("upstream_error")
            return _status(503, "ServiceUnavailable", f"fault proxy: upstream: {exc!r}")
        resp = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for k, v in upstream.headers.items():
            if k.lower() not in _HOP:
                resp.headers[k] = v
        try:
            await resp.prepare(request)
            loop = asyncio.get_running_loop()
            cut_at = loop.time() + f.drop_watch_after if drop else None
            while True:
                if cut_at is None or f.drop_watch_after <= 0:
                    chunk = await upstream.content.readany()
                else:
                    # Cut on a timer, not on the next chunk: a quiet watch is dropped too, as a
                    # load balancer's idle timeout would (a chunk-driven cut never hit a watch
                    # that had gone quiet, so a fast run saw no drop at all).
                    try:
                        chunk = await asyncio.wait_for(
                            upstream.content.readany(), max(0.0, cut_at - loop.time())
                        )
                    except TimeoutError:
                        chunk = None
                if chunk is None:
                    self._count("watch_dropped")
                    if request.transport is not None:
                        request.transport.close()
                    return resp
                if not chunk:
                    break
                await resp.write(chunk)
                if cut_at is not None and f.drop_watch_after <= 0:
                    self._count("watch_dropped")
                    if request.transport is not None:
                        request.transport.close()
                    return resp
            await resp.write_eof()
        except (aiohttp.ClientError, ConnectionError, OSError):
            self._count("stream_error")
        finally:
            upstream.release()
        return resp
