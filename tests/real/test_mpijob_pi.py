"""Upstream's MPIJob ``pi`` (OpenMPI, and MPICH) on real nodes: ``mpirun`` reaches both workers
over ssh by their headless-Service names, and the launcher prints the estimate."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import OperatorProcess
from tests.real.conftest import diagnose, pod_logs
from tests.support.cluster import REPO, Cluster
from tests.support.wait import WaitTimeout, wait_for

EXAMPLES = REPO / "examples" / "mpijob"


def condition(obj: dict[str, object], kind: str) -> str:
    status = obj.get("status") or {}
    assert isinstance(status, dict)
    for c in status.get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("status"))
    return ""


@pytest.mark.parametrize(
    ("example", "name"),
    [
        pytest.param(EXAMPLES / "pi.yaml", "pi", id="openmpi"),
        pytest.param(EXAMPLES / "pi-mpich.yaml", "pi-mpich", id="mpich"),
    ],
)
def test_upstream_pi_computes_pi_across_two_workers(
    real_cluster: Cluster,
    real_namespace: str,
    real_operator: Callable[..., OperatorProcess],
    example: Path,
    name: str,
) -> None:
    op = real_operator()
    ns = real_namespace
    real_cluster.apply(example, namespace=ns)

    def state() -> tuple[str, str]:
        job = real_cluster.get_json("mpijob", name, "-n", ns)
        return condition(job, "Succeeded"), condition(job, "Failed")

    try:
        final = wait_for(
            state, lambda s: "True" in s, timeout=300, interval=1, what=f"MPIJob {name} to finish"
        )
    except WaitTimeout as e:
        pytest.fail(f"{e}\n{diagnose(real_cluster, ns)}\noperator:\n{op.logs()}", pytrace=False)
    launchers = real_cluster.get_json(
        "pods", "-n", ns, "-l", "training.kubeflow.org/job-role=launcher"
    )["items"]
    logs = "\n".join(pod_logs(real_cluster, ns, p["metadata"]["name"]) for p in launchers)
    assert final == ("True", ""), f"MPIJob failed; launcher log:\n{logs}\noperator:\n{op.logs()}"
    assert "Workers: 2" in logs, logs
    hosts = set(re.findall(r"Rank \d+ on host (\S+)", logs))
    assert hosts == {f"{name}-worker-0", f"{name}-worker-1"}, logs
    estimate = re.search(r"pi is approximately (\d+\.\d+)", logs)
    assert estimate is not None, logs
    assert abs(float(estimate.group(1)) - 3.14159) < 0.01, logs
