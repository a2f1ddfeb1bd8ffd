"""A real Prometheus for the real tier, scraping the operator the way the ServiceMonitor says.

``scrape_config(monitor, kubeconfig=...)`` turns ``deploy/monitoring/service_monitor.yaml`` into the
scrape job that the Prometheus Operator generates from it: Kubernetes service discovery of the
EndpointSlices in the monitor's namespaces, kept when the Service's labels match its selector and
the port's name is the endpoint's ``port``, scraped at its ``path``, with ``job`` set to the
Service's name. Prometheus runs on the host (every real node's pods are reachable there) and
discovers the targets through the cluster's kubeconfig; the binary is built from the Go module
proxy by ``hack/controlplane/build.sh prometheus``.

``dashboard_queries(path)`` reads every PromQL ``expr`` of a Grafana dashboard, and
``substitute(expr, variables)`` replaces Grafana's variables (``$job``, ``${job}``,
``$__rate_interval`` ...) and raises ``ValueError`` naming any variable it was not given, so a new
panel with a new variable fails loudly instead of being skipped.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import free_port
from tests.support.wait import wait_for

__all__ = ["Prometheus", "dashboard_queries", "scrape_config", "substitute"]

_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def _label(name: str) -> str:
    """A Kubernetes label name as Prometheus' service-discovery meta label spells it."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def scrape_config(monitor: Path, *, kubeconfig: Path, interval: str) -> dict[str, Any]:
    """The scrape job of the ServiceMonitor in ``monitor`` (its first endpoint), at ``interval``."""
    sm = yaml.safe_load(monitor.read_text())
    spec = sm["spec"]
    endpoint = spec["endpoints"][0]
    keep = [
        {
            "action": "keep",
            "source_labels": [f"__meta_kubernetes_service_label_{_label(k)}"],
            "regex": v,
        }
        for k, v in sorted(spec["selector"]["matchLabels"].items())
    ]
    keep.append(
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
            "regex": endpoint["port"],
        }
    )
    meta = {"namespace": "namespace", "service_name": "job", "pod_name": "pod"}
    relabel = keep + [
        {"source_labels": [f"__meta_kubernetes_{src}"], "target_label": dst}
        for src, dst in meta.items()
    ]
    return {
        "job_name": f"serviceMonitor/{sm['metadata']['namespace']}/{sm['metadata']['name']}/0",
        "scrape_interval": interval,
        "metrics_path": endpoint.get("path", "/metrics"),
        "kubernetes_sd_configs": [
            {
                "role": "endpointslice",
                "kubeconfig_file": str(kubeconfig),
                "namespaces": {"names": spec["namespaceSelector"]["matchNames"]},
            }
        ],
        "relabel_configs": relabel,
    }


def dashboard_queries(path: Path) -> list[tuple[str, str]]:
    """(panel title, expr) of every PromQL target of the dashboard, in file order."""
    out: list[tuple[str, str]] = []

    def walk(node: Any, title: str) -> None:
        if isinstance(node, dict):
            title = str(node.get("title", title))
            for target in node.get("targets") or []:
                if isinstance(target, dict) and target.get("expr"):
                    out.append((title, str(target["expr"])))
            for key, value in node.items():
                if key != "targets":
                    walk(value, title)
        elif isinstance(node, list):
            for item in node:
                walk(item, title)

    walk(json.loads(path.read_text()), "")
    return out


def substitute(expr: str, variables: dict[str, str]) -> str:
    """``expr`` with Grafana's ``$name``/``${name}`` replaced; ValueError names an unknown one."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in variables:
            raise ValueError(f"dashboard variable ${name} has no test value (in {expr!r})")
        return variables[name]

    return _VARIABLE.sub(one, expr)


@dataclass
class Prometheus:
    """A Prometheus process on the host with one scrape job; ``query`` is its HTTP API."""

    binary_path: str
    workdir: Path
    scrape: dict[str, Any]
    interval: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": self.interval, "evaluation_interval": "15s"},
                    "scrape_configs": [self.scrape],
                }
            )
        )
        log = (self.workdir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [
                self.binary_path,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, timeout=60, what=f"Prometheus ready at {self.url}\n{self.logs()}")

    def _ready(self) -> bool:
        assert self.proc is not None
        assert self.proc.poll() is None, self.logs()
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def get(self, path: str, **params: str) -> Any:
        """GET an API path; the ``data`` of a success, AssertionError with the body otherwise."""
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{path} {params}: HTTP {e.code}: {e.read()!r}") from e
        assert body.get("status") == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or a scalar as one sample) of ``expr`` now."""
        data = self.get("/api/v1/query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/targets", state="active")["activeTargets"])

    def logs(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
