"""A small REST client for any Kubernetes resource, on kubernetes_asyncio's HTTP transport.

Contract:
- Every call takes a ``Resource`` and plain dicts, and returns plain dicts (parsed JSON).
- Non-2xx answers raise the typed errors of ``lattice.kube.errors``; transport failures raise
  ``ServerError`` (status 0), so callers retry them like a 5xx.
- ``watch`` streams events from one resourceVersion. It yields ADDED, MODIFIED, DELETED and
  BOOKMARK events untouched, and turns an ERROR event into the matching error (410 → ``Gone``):
  it never retries on its own. The informer owns the list/watch loop. ``on_open`` is called
  once the apiserver accepted the watch (2xx), before any event.
- kubernetes_asyncio supplies only configuration loading (kubeconfig, in-cluster, token refresh),
  TLS and the aiohttp session; we build paths and parse bodies ourselves.
- A kubeconfig user's impersonation fields (``as``, ``as-uid``, ``as-groups``, ``as-user-extra``)
  become ``Impersonate-*`` headers on every request, watches included
  (``lattice.kube.impersonation``); malformed ones refuse to connect (``KubeconfigError``).
- An optional client-side token bucket (``qps``/``burst``; ``qps <= 0`` disables it) paces
  requests, and an optional observer sees each request's verb, resource, code and duration.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, Required, TypedDict, Unpack
from urllib.parse import unquote, urlsplit, urlunsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from lattice.clock import Clock, RealClock
from lattice.kube.errors import ApiError, ServerError, error_from_response
from lattice.kube.impersonation import Impersonation, loader_impersonation
from lattice.kube.resources import Resource
from lattice.primitives.objects import Obj

__all__ = [
    "DeleteOptions",
    "KubeClient",
    "ListOptions",
    "PatchOptions",
    "PatchType",
    "ReplaceOptions",
    "RequestObserver",
    "RestClient",
    "WatchEvent",
    "WatchOptions",
    "connect",
]


class PatchType(StrEnum):
    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"
    STRATEGIC = "application/strategic-merge-patch+json"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event. ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: Obj


class RequestObserver(Protocol):
    def observe(self, *, verb: str, resource: str, code: int, seconds: float) -> None: ...

    def throttled(self, *, verb: str, seconds: float) -> None:
        """A request waited ``seconds`` for the client-side rate limiter (0 when it did not)."""
        ...


class _Scope(TypedDict, total=False):
    namespace: str | None
    label_selector: str | None
    field_selector: str | None


class ListOptions(_Scope, total=False):
    """The keyword options of ``KubeClient.list`` (each absent or None means unset)."""

    resource_version: str | None
    limit: int | None
    continue_token: str | None


class WatchOptions(_Scope, total=False):
    """The keyword options of ``KubeClient.watch``; ``on_open`` is called once the apiserver
    accepted the watch."""

    resource_version: Required[str]
    timeout_seconds: Required[int]
    on_open: Callable[[], None] | None


class PatchOptions(TypedDict, total=False):
    """The keyword options of ``KubeClient.patch``: ``patch_type`` defaults to a merge patch,
    ``force`` to False."""

    namespace: str | None
    subresource: str | None
    patch_type: PatchType
    field_manager: str | None
    force: bool


class ReplaceOptions(TypedDict, total=False):
    """The keyword options of ``KubeClient.replace``."""

    namespace: str | None
    subresource: str | None


class DeleteOptions(TypedDict, total=False):
    """The keyword options of ``KubeClient.delete``: ``propagation`` defaults to Background."""

    namespace: str | None
    propagation: str
    uid: str | None
    grace_period_seconds: int | None


class KubeClient(Protocol):
    """What the rest of the operator may ask of the API server."""

    async def list(self, res: Resource, **opts: Unpack[ListOptions]) -> Obj: ...

    def watch(self, res: Resource, **opts: Unpack[WatchOptions]) -> AsyncIterator[WatchEvent]: ...

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj: ...

    async def create(self, res: Resource, body: Obj, *, namespace: str | None = None) -> Obj: ...

    async def patch(
        self, res: Resource, name: str, body: Any, **opts: Unpack[PatchOptions]
    ) -> Obj: ...

    async def replace(
        self, res: Resource, name: str, body: Obj, **opts: Unpack[ReplaceOptions]
    ) -> Obj: ...

    async def delete(self, res: Resource, name: str, **opts: Unpack[DeleteOptions]) -> Obj: ...

    async def close(self) -> None: ...


class _TokenBucket:
    """Client-side pacing like client-go's flowcontrol: ``qps`` tokens a second, ``burst`` deep."""

    def __init__(self, *, qps: float, burst: int, clock: Clock) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._clock = clock
        self._last = clock.monotonic()

    async def take(self) -> float:
        """Take a token, waiting for it if the bucket is empty; returns the seconds waited."""
        now = self._clock.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens < 0:
            wait = -self._tokens / self.qps
            await self._clock.sleep(wait)
            return wait
        return 0.0


class RestClient:
    """``KubeClient`` over a kubernetes_asyncio ``ApiClient``."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        *,
        qps: float = 0.0,
        burst: int = 0,
        clock: Clock | None = None,
        observer: RequestObserver | None = None,
        user_agent: str = "lattice-operator",
    ) -> None:
        self._api = api
        self._api.user_agent = user_agent
        self._clock = clock or RealClock()
        self._bucket = _TokenBucket(qps=qps, burst=burst, clock=self._clock) if qps > 0 else None
        self._observer = observer
        self.impersonation: Impersonation | None = None

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    def with_own_limit(self) -> RestClient:
        """The same connection pool and observer behind a rate limiter of its own (same qps and
        burst), as client-go gives the event broadcaster a clientset of its own: a burst of one
        kind of request (events) then never delays the others (reconcile and scheduler writes).
        """
        bucket = self._bucket
        twin = RestClient(
            self._api,
            qps=0.0 if bucket is None else bucket.qps,
            burst=0 if bucket is None else bucket.burst,
            clock=self._clock,
            observer=self._observer,
            user_agent=str(self._api.user_agent),
        )
        twin.impersonation = self.impersonation  # the same session: the same headers
        return twin

    async def _request(
        self,
        verb: str,
        method: str,
        res: Resource,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        http_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        if self._bucket is not None:
            waited = await self._bucket.take()
            if self._observer is not None:
                self._observer.throttled(verb=verb, seconds=waited)
        start = self._clock.monotonic()
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            resp: aiohttp.ClientResponse = await self._api.call_api(
                path,
                method,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=http_timeout or aiohttp.ClientTimeout(total=60, sock_connect=10),
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._observe(verb, res, 0, start)
            raise ServerError(0, "TransportError", f"{method} {path}: {exc!r}") from exc
        self._observe(verb, res, resp.status, start)
        if resp.status >= 300:
            text = await resp.text()
            resp.release()
            raise error_from_response(resp.status, text, resp.headers.get("Retry-After"))
        return resp

    def _observe(self, verb: str, res: Resource, code: int, start: float) -> None:
        if self._observer is not None:
            self._observer.observe(
                verb=verb, resource=res.plural, code=code, seconds=self._clock.monotonic() - start
            )

    async def _json(self, resp: aiohttp.ClientResponse) -> Obj:
        try:
            data = await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ServerError(0, "TransportError", repr(exc)) from exc
        finally:
            resp.release()
        parsed = json.loads(data) if data else {}
        return parsed if isinstance(parsed, dict) else {"items": parsed}

    async def list(self, res: Resource, **opts: Unpack[ListOptions]) -> Obj:
        q = _selectors(opts)
        if (resource_version := opts.get("resource_version")) is not None:
            q.append(("resourceVersion", resource_version))
        if limit := opts.get("limit"):
            q.append(("limit", str(limit)))
        if continue_token := opts.get("continue_token"):
            q.append(("continue", continue_token))
        namespace = opts.get("namespace")
        resp = await self._request("LIST", "GET", res, res.path(namespace=namespace), query=q)
        return await self._json(resp)

    async def watch(self, res: Resource, **opts: Unpack[WatchOptions]) -> AsyncIterator[WatchEvent]:
        timeout_seconds = opts["timeout_seconds"]
        q: list[tuple[str, str]] = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", opts["resource_version"]),
            ("timeoutSeconds", str(timeout_seconds)),
            *_selectors(opts),
        ]
        namespace = opts.get("namespace")
        # The server ends the stream after timeoutSeconds; the read timeout catches a silent,
        # half-open connection a little after that.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout_seconds + 30)
        resp = await self._request(
            "WATCH", "GET", res, res.path(namespace=namespace), query=q, http_timeout=timeout
        )
        if (on_open := opts.get("on_open")) is not None:
            on_open()
        try:
            async for raw in resp.content:
                line = raw.strip()
                if not line:
                    continue
                event = json.loads(line)
                etype = event.get("type", "")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    code = int(obj.get("code") or 500)
                    raise error_from_response(code, json.dumps(obj))
                yield WatchEvent(type=etype, object=obj)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ServerError(0, "WatchBroken", repr(exc)) from exc
        finally:
            resp.release()

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj:
        resp = await self._request("GET", "GET", res, res.path(namespace=namespace, name=name))
        return await self._json(resp)

    async def create(self, res: Resource, body: Obj, *, namespace: str | None = None) -> Obj:
        resp = await self._request("CREATE", "POST", res, res.path(namespace=namespace), body=body)
        return await self._json(resp)

    async def patch(self, res: Resource, name: str, body: Any, **opts: Unpack[PatchOptions]) -> Obj:
        q: list[tuple[str, str]] = []
        if field_manager := opts.get("field_manager"):
            q.append(("fieldManager", field_manager))
        if opts.get("force", False):
            q.append(("force", "true"))
        namespace, subresource = opts.get("namespace"), opts.get("subresource")
        patch_type = opts.get("patch_type", PatchType.MERGE)
        path = res.path(namespace=namespace, name=name, subresource=subresource)
        resp = await self._request(
            "PATCH", "PATCH", res, path, query=q, body=body, content_type=patch_type.value
        )
        return await self._json(resp)

    async def replace(
        self, res: Resource, name: str, body: Obj, **opts: Unpack[ReplaceOptions]
    ) -> Obj:
        namespace, subresource = opts.get("namespace"), opts.get("subresource")
        path = res.path(namespace=namespace, name=name, subresource=subresource)
        resp = await self._request("UPDATE", "PUT", res, path, body=body)
        return await self._json(resp)

    async def delete(self, res: Resource, name: str, **opts: Unpack[DeleteOptions]) -> Obj:
        propagation = opts.get("propagation", "Background")
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid := opts.get("uid"):
            body["preconditions"] = {"uid": uid}
        if (grace_period_seconds := opts.get("grace_period_seconds")) is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        namespace = opts.get("namespace")
        resp = await self._request(
            "DELETE", "DELETE", res, res.path(namespace=namespace, name=name), body=body
        )
        return await self._json(resp)

    async def close(self) -> None:
        await self._api.close()


def _selectors(opts: _Scope) -> list[tuple[str, str]]:
    """The query parameters of a LIST's or WATCH's label and field selectors."""
    q: list[tuple[str, str]] = []
    if label_selector := opts.get("label_selector"):
        q.append(("labelSelector", label_selector))
    if field_selector := opts.get("field_selector"):
        q.append(("fieldSelector", field_selector))
    return q


def _in_cluster(token_path: str | None) -> bool:
    token = token_path or "/var/run/secrets/kubernetes.io/serviceaccount/token"
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(token)


async def connect(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    in_cluster: bool | None = None,
    qps: float = 0.0,
    burst: int = 0,
    clock: Clock | None = None,
    observer: RequestObserver | None = None,
    token_path: str | None = None,
    ca_path: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RestClient:
    """Build a client from a kubeconfig, or from the in-cluster service-account environment.

    ``in_cluster=None`` chooses in-cluster config when no kubeconfig is given and the pod
    environment (service host env and token file) is present. ``token_path``/``ca_path`` override
    the service-account files (``lattice run --service-account-dir``). The kubeconfig user's
    impersonation fields are honoured; ``KubeconfigError`` if they are malformed.
    """
    cfg = k8s_client.Configuration()
    use_in_cluster = (
        in_cluster if in_cluster is not None else (kubeconfig is None and _in_cluster(token_path))
    )
    if use_in_cluster:
        loader = k8s_config.incluster_config.InClusterConfigLoader(
            token_filename=token_path or k8s_config.incluster_config.SERVICE_TOKEN_FILENAME,
            cert_filename=ca_path or k8s_config.incluster_config.SERVICE_CERT_FILENAME,
            try_refresh_token=True,
        )
        loader.load_and_set(cfg)
    impersonation = None
    if not use_in_cluster:
        impersonation = loader_impersonation(
            await k8s_config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=cfg
            )
        )
    cfg.connection_pool_maxsize = 64
    for key, value in (extra or {}).items():
        setattr(cfg, key, value)
    api = k8s_client.ApiClient(configuration=cfg)
    read_environment_once(api.rest_client, str(cfg.host))
    client = RestClient(api, qps=qps, burst=burst, clock=clock, observer=observer)
    if impersonation is not None:
        # Session headers go out on every request, and may repeat (one per group).
        session_headers = api.rest_client.pool_manager.headers
        for name, value in impersonation.headers():
            session_headers.add(name, value)
        client.impersonation = impersonation
    return client


def env_proxy(url: str) -> tuple[str, dict[str, str]] | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``/``HTTP_PROXY``, unless
    ``NO_PROXY`` exempts its host), without its credentials, and the headers that carry them;
    None for a direct connection. client-go reads the same variables
    (``http.ProxyFromEnvironment``)."""
    parts = urlsplit(url)
    if parts.hostname and proxy_bypass(parts.hostname):
        return None
    proxy = getproxies().get(parts.scheme)
    if not proxy:
        return None
    p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    headers: dict[str, str] = {}
    if p.username is not None:
        pair = f"{unquote(p.username)}:{unquote(p.password or '')}".encode()
        headers["Proxy-Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
    netloc = p.hostname or ""
    if p.port is not None:
        netloc += f":{p.port}"
    return urlunsplit((p.scheme, netloc, p.path, "", "")), headers


def read_environment_once(rest: Any, host: str) -> None:
    """Resolve the environment's proxy for ``host`` now, and stop the session reading the
    environment on every request.

    kubernetes-asyncio opens its aiohttp session with ``trust_env=True``, so aiohttp looks up
    ``~/.netrc`` and the proxy variables once per request, each in a thread-pool round trip
    (two hops, and the GIL handed over four times, per request); reading it once nearly doubles
    the request rate (docs/performance.md). A proxy set in the kubeconfig (``proxy-url``) is
    kept; netrc credentials were never used by client-go, which authenticates from the
    kubeconfig alone."""
    if not rest.proxy:
        found = env_proxy(host)
        if found is not None:
            rest.proxy, headers = found
            if headers:
                rest.proxy_headers = {**(rest.proxy_headers or {}), **headers}
    # aiohttp has no public setter: the session is kubernetes-asyncio's, built in its __init__.
    rest.pool_manager._trust_env = False


def is_retryable(exc: BaseException) -> bool:
    """Transport failures, 429 and 5xx are worth retrying; 4xx answers are not."""
    return isinstance(exc, ApiError) and (exc.status in {0, 429} or exc.status >= 500)
