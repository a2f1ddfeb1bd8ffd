"""Test tiers.

- ``tests/unit``: pure, no network.
- ``tests/real``: upstream jobs whose pods really run on real kubelet nodes; needs the cluster
  started with ``LATTICE_REAL_NODES`` >= 2 (see ``tests/real/conftest.py``).
- ``tests/integration`` and ``tests/e2e``: against the real local control plane, which the session
  fixture ``cluster`` starts once (or reuses if ``make cluster-up`` already runs one) and stops at
  the end if it started it. A control plane that cannot start is an error, never a skip.

With ``LATTICE_REQUIRE_INTEGRATION=1`` (set by ``make test``) the run fails if no integration or
e2e test ran, so CI can never pass on the unit tier alone.

Hypothesis: with ``LATTICE_HYPOTHESIS_PROFILE=ci`` (set by ``.ci/run``) every property test
draws the same examples on every run (``derandomize``), so CI's verdict does not depend on a
random draw; a plain ``pytest`` or ``make test`` keeps searching new examples.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.cluster import CONTROLPLANE, REPO, Cluster

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("LATTICE_HYPOTHESIS_PROFILE") == "ci":
    settings.load_profile("ci")

_ran_integration = 0
_cluster_up_line = ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO).parts
        if "integration" in parts:
            item.add_marker(pytest.mark.integration)
        if "e2e" in parts:
            item.add_marker(pytest.mark.e2e)
        if "real" in parts:
            item.add_marker(pytest.mark.real)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    global _ran_integration
    if (
        report.when == "call"
        and report.passed
        and any(k in report.keywords for k in ("integration", "e2e", "real"))
    ):
        _ran_integration += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if (
        os.environ.get("LATTICE_REQUIRE_INTEGRATION") == "1"
        and exitstatus == 0
        and _ran_integration == 0
    ):
        session.exitstatus = 1
        print("\nLATTICE_REQUIRE_INTEGRATION=1 but no integration or e2e test passed")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _cluster_up_line:
        terminalreporter.write_line(f"cluster-up: {_cluster_up_line}")


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The local control plane, started once per test run."""
    run_dir = Path(os.environ.get("LATTICE_CLUSTER_DIR", REPO / ".cluster"))
    kubeconfig = run_dir / "kubeconfig"
    was_running = (run_dir / "kube-apiserver.pid").exists() and subprocess.run(
        ["bash", "-c", f'kill -0 "$(cat {run_dir}/kube-apiserver.pid)"'], check=False
    ).returncode == 0
    env = dict(os.environ)
    env.setdefault("LATTICE_NODES_ARGS", "")  # tests create their own labelled nodes
    proc = subprocess.run(
        [str(CONTROLPLANE / "cluster-up.sh")], env=env, capture_output=True, text=True, check=False
    )
    global _cluster_up_line
    _cluster_up_line = next(
        (ln for ln in reversed(proc.stderr.splitlines()) if "control plane" in ln), ""
    )
    if proc.returncode != 0:
        pytest.fail(
            f"cluster-up.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}", pytrace=False
        )
    paths = subprocess.run(
        [str(CONTROLPLANE / "build.sh"), "paths"], capture_output=True, text=True, check=True
    ).stdout.split()
    yield Cluster(kubeconfig=kubeconfig, bin_dirs=paths)
    if not was_running and os.environ.get("LATTICE_KEEP_CLUSTER") != "1":
        subprocess.run([str(CONTROLPLANE / "cluster-down.sh")], capture_output=True, check=False)


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test (its default ServiceAccount exists), deleted afterwards."""
    from tests.support.wait import wait_for

    ns = cluster.create_namespace()
    wait_for(
        lambda: cluster.exists("serviceaccount", "default", "-n", ns),
        timeout=90,
        what=f"default ServiceAccount in {ns}",
    )
    yield ns
    cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="session")
def crds_installed(cluster: Cluster) -> Cluster:
    """The generated CRDs, applied once per run and Established."""
    cluster.kubectl("apply", "-k", str(REPO / "deploy" / "crds"))
    cluster.wait_crds_established()
    return cluster
