"""``lattice run`` as a real process against the local control plane.

- ``/readyz`` answers 200 once the informers have synced; ``/metrics`` is Prometheus text with
  the client-go, controller-runtime and training-operator names dashboards expect.
- SIGTERM drains and exits 0.
- Two replicas with leader election: exactly one leads; SIGKILL of the leader lets the other take
  over within the lease duration (plus one retry period). The takeover time is printed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from lattice.clock import RealClock
from tests.support.cluster import REPO, Cluster
from tests.support.wait import wait_for

LATTICE = str(REPO / ".venv" / "bin" / "lattice")

_CLOCK = RealClock()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str) -> int:
    return _http(url)[0]


def _http(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


@dataclass
class Proc:
    popen: subprocess.Popen[str]
    metrics: int
    probe: int
    name: str

    def url(self, path: str) -> str:
        port = self.metrics if path == "/metrics" else self.probe
        return f"http://127.0.0.1:{port}{path}"


@pytest.fixture
def start_operator(crds_installed: Cluster, tmp_path: object) -> Iterator[object]:
    cluster = crds_installed
    procs: list[Proc] = []

    def start(name: str, *extra: str) -> Proc:
        metrics, probe = _free_port(), _free_port()
        env = dict(os.environ)
        env.update({"POD_NAME": name, "PATH": cluster.env["PATH"]})
        popen = subprocess.Popen(
            [
                LATTICE,
                "run",
                "--kubeconfig",
                str(cluster.kubeconfig),
                "--metrics-addr",
                f"127.0.0.1:{metrics}",
                "--probe-addr",
                f"127.0.0.1:{probe}",
                *extra,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        proc = Proc(popen, metrics, probe, name)
        procs.append(proc)
        return proc

    yield start
    for p in procs:
        if p.popen.poll() is None:
            p.popen.kill()
        with contextlib.suppress(Exception):
            p.popen.communicate(timeout=10)


def test_readyz_metrics_and_graceful_sigterm(start_operator: object) -> None:
    op: Proc = start_operator("solo")  # type: ignore[operator]
    wait_for(
        lambda: _http(op.url("/readyz"))[0],
        lambda c: c == 200,
        timeout=60,
        what="/readyz to answer 200 after the informers synced",
    )
    assert _http(op.url("/healthz"))[0] == 200
    code, text = _http(op.url("/metrics"))
    assert code == 200
    for name in (
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_retries_total",
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_time_seconds",
        "training_operator_jobs_created_total",
        "training_operator_jobs_deleted_total",
        "training_operator_jobs_successful_total",
        "training_operator_jobs_failed_total",
        "training_operator_jobs_restarted_total",
        "lattice_scheduler_pass_duration_seconds",
        "lattice_scheduler_decisions_total",
        "lattice_jobs",
        "lattice_capacity_units",
        "lattice_preemptions_total",
        "lattice_informer_watch_ended_total",
        "lattice_informer_events_total",
        "rest_client_requests_total",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in text, f"{name} missing from /metrics"
    assert 'rest_client_requests_total{code="200"' in text, "the client's requests are counted"
    op.popen.send_signal(signal.SIGTERM)
    assert op.popen.wait(timeout=30) == 0


def _holder(cluster: Cluster, namespace: str) -> str:
    out = cluster.kubectl(
        "get",
        "lease",
        "lattice-operator",
        "-n",
        namespace,
        "-o",
        "jsonpath={.spec.holderIdentity}",
        check=False,
    )
    return out.strip()


def test_two_replicas_elect_one_leader_and_fail_over_after_sigkill(
    cluster: Cluster, namespace: str, start_operator: object
) -> None:
    lease, renew, retry = 6.0, 4.0, 1.0
    args = (
        "--leader-elect",
        "--leader-election-namespace",
        namespace,
        "--lease-duration",
        str(lease),
        "--renew-deadline",
        str(renew),
        "--retry-period",
        str(retry),
    )
    a: Proc = start_operator("replica-a", *args)  # type: ignore[operator]
    b: Proc = start_operator("replica-b", *args)  # type: ignore[operator]
    first = wait_for(
        lambda: _holder(cluster, namespace),
        lambda h: h in {"replica-a", "replica-b"},
        timeout=60,
        what="a leader",
    )
    # Both replicas serve probes; exactly one reports leadership.
    for p in (a, b):
        wait_for(
            functools.partial(_status, p.url("/readyz")),
            lambda c: c == 200,
            timeout=60,
            what="readyz",
        )
    leaders = [
        p.name
        for p in (a, b)
        if 'leader_election_master_status{name="lattice-operator"} 1.0'
        in _http(p.url("/metrics"))[1]
    ]
    assert leaders == [first]
    leader, standby = (a, b) if first == "replica-a" else (b, a)
    leader.popen.send_signal(signal.SIGKILL)
    killed = _CLOCK.monotonic()
    wait_for(
        lambda: _holder(cluster, namespace),
        lambda h: h == standby.name,
        timeout=lease * 4,
        interval=0.1,
        what="the standby to take over",
    )
    takeover = _CLOCK.monotonic() - killed
    print(
        f"\nleader takeover after SIGKILL: {takeover:.2f}s "
        f"(lease {lease:.0f}s, retry {retry:.0f}s)",
        file=sys.stderr,
    )
    assert takeover <= lease + retry + 1.0
    assert standby.popen.poll() is None
