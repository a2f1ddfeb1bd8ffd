"""``lattice run --kubeconfig`` acts as the kubeconfig says, impersonation included.

A small HTTP server records the headers of every request the real ``RestClient`` sends (a LIST,
a WATCH, a write), since what matters is what reaches the apiserver. The denial itself (a user
without rights is refused, as kubectl is) runs on the real control plane:
tests/e2e/test_impersonation.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from lattice.kube.client import connect
from lattice.kube.impersonation import Impersonation, KubeconfigError, impersonation_of
from lattice.kube.resources import CONFIGMAPS

Seen = list[tuple[str, dict[str, list[str]]]]


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[str, Seen]]:
    seen: Seen = []

    async def handle(request: web.Request) -> web.StreamResponse:
        names = {k for k in request.headers if k.lower().startswith("impersonate-")}
        seen.append(
            (
                "WATCH" if request.query.get("watch") else request.method,
                {k: request.headers.getall(k) for k in names},
            )
        )
        if request.query.get("watch"):
            resp = web.StreamResponse()
            await resp.prepare(request)
            await resp.write(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"2"}}}\n')
            return resp
        body = {"metadata": {"resourceVersion": "1"}, "items": []}
        return web.Response(text=json.dumps(body), content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    await runner.cleanup()


def kubeconfig(path: Path, server: str, user: dict[str, Any]) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "admin", "user": {"token": "t", **user}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "admin"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


async def test_every_request_carries_the_impersonation_headers_watches_included(
    recorder: tuple[str, Seen], tmp_path: Path
) -> None:
    url, seen = recorder
    user = {
        "as": "system:serviceaccount:ns:norights",
        "as-uid": "u-1",
        "as-groups": ["team-a", "system:authenticated"],
        "as-user-extra": {"scopes.example.com/a b": ["x", "y"]},
    }
    client = await connect(kubeconfig=kubeconfig(tmp_path / "kc", url, user))
    events_client = client.with_own_limit()
    try:
        await client.list(CONFIGMAPS, namespace="ns")
        async for _ in client.watch(CONFIGMAPS, resource_version="1", timeout_seconds=1):
            break
        await events_client.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
    finally:
        await client.close()
    assert [verb for verb, _ in seen] == ["GET", "WATCH", "POST"]
    expected = {
        "Impersonate-User": ["system:serviceaccount:ns:norights"],
        "Impersonate-Uid": ["u-1"],
        "Impersonate-Group": ["team-a", "system:authenticated"],
        "Impersonate-Extra-scopes.example.com%2Fa%20b": ["x", "y"],
    }
    for _, headers in seen:
        assert headers == expected


async def test_no_impersonation_fields_no_headers(
    recorder: tuple[str, Seen], tmp_path: Path
) -> None:
    url, seen = recorder
    client = await connect(kubeconfig=kubeconfig(tmp_path / "kc", url, {}))
    try:
        await client.list(CONFIGMAPS)
    finally:
        await client.close()
    assert client.impersonation is None
    assert seen == [("GET", {})]


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"as-groups": ["g"]}, "'admin': as-groups set without `as`"),
        ({"as-uid": "1", "as-user-extra": {"k": ["v"]}}, "as-uid, as-user-extra set without `as`"),
        ({"as": ["me"]}, "'admin': as must be a string"),
        ({"as": "me", "as-groups": "g"}, "as-groups must be a list of strings"),
        ({"as": "me", "as-user-extra": {"k": "v"}}, "as-user-extra.k must be a list of strings"),
        ({"as": "me", "as-user-extra": ["k"]}, "as-user-extra must map keys to lists"),
    ],
)
async def test_malformed_impersonation_refuses_to_connect_naming_the_field(
    tmp_path: Path, user: dict[str, Any], message: str
) -> None:
    with pytest.raises(KubeconfigError, match=message.replace("(", r"\(")) as info:
        await connect(kubeconfig=kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", user))
    assert "kubeconfig user 'admin'" in str(info.value)


def test_impersonation_of_reads_the_kubeconfig_fields() -> None:
    assert impersonation_of(None) is None
    assert impersonation_of({"token": "t"}) is None
    got = impersonation_of({"as": "jane", "as-groups": ["a"]}, user_name="u")
    assert got == Impersonation(user="jane", groups=("a",))
    assert got.headers() == [("Impersonate-User", "jane"), ("Impersonate-Group", "a")]
