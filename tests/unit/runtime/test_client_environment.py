"""The kube client reads the proxy environment once, when it connects, not per request."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from lattice.kube.client import connect, env_proxy
from lattice.kube.resources import CONFIGMAPS
from tests.support.fake_apiserver import FakeApiServer

PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{server}"}}
users:
- name: u
  user: {{token: t0k3n}}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
"""
    )
    return str(path)


def test_no_proxy_in_the_environment_means_a_direct_connection(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    assert env_proxy("https://10.0.0.1:6443") is None


def test_the_proxy_for_the_scheme_is_used_and_its_credentials_become_a_header(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://al%40ice:s3cret@proxy.corp:3128")
    no_proxy_env.setenv("HTTP_PROXY", "http://plain.corp:8080")
    url, headers = env_proxy("https://10.0.0.1:6443") or ("", {})
    assert url == "http://proxy.corp:3128"
    expected = base64.b64encode(b"al@ice:s3cret").decode()
    assert headers == {"Proxy-Authorization": f"Basic {expected}"}
    assert env_proxy("http://10.0.0.1:8080") == ("http://plain.corp:8080", {})


def test_no_proxy_exempts_the_apiserver(no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    no_proxy_env.setenv("NO_PROXY", "localhost,.cluster.local,10.0.0.1")
    assert env_proxy("https://10.0.0.1:6443") is None
    assert env_proxy("https://kubernetes.default.svc.cluster.local") is None
    assert env_proxy("https://10.0.0.2:6443") == ("http://proxy.corp:3128", {})


async def test_a_connected_client_carries_the_proxy_and_stops_reading_the_environment(
    no_proxy_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    client = await connect(kubeconfig=kubeconfig(tmp_path, "https://10.0.0.2:6443"))
    try:
        rest = client._api.rest_client
        assert rest.proxy == "http://proxy.corp:3128"
        assert rest.pool_manager.trust_env is False
    finally:
        await client.close()


async def test_requests_work_without_the_environment_read(
    no_proxy_env: pytest.MonkeyPatch, tmp_path: Path, server: FakeApiServer
) -> None:
    client = await connect(kubeconfig=kubeconfig(tmp_path, server.url))
    try:
        proxy: str | None = client._api.rest_client.proxy  # typed str; unset is None
        assert proxy is None
        assert client._api.rest_client.pool_manager.trust_env is False
        assert (await client.list(CONFIGMAPS, namespace="ns"))["items"] == []
    finally:
        await client.close()
