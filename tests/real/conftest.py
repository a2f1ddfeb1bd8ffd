"""The ``real`` tier: upstream jobs whose pods really run, on real kubelet nodes.

The session's control plane (``tests/conftest.py``) must have been started with
``LATTICE_REAL_NODES`` >= 2 (``make real`` and ``make test`` set it): then ``cluster-up.sh`` adds
the kubelets ``real-<i>``, their registry mirror and CoreDNS. ``real_cluster`` checks that the
nodes are Ready and runs ``hack/images/build.sh --push`` once (a no-op when the images are cached
and pushed). Missing nodes or images are failures with the reason, never skips.

Each test gets a namespace (deleted at the end, waiting until its pods are gone so that the next
test sees the nodes free) and starts the operator for it with ``real_operator``: the GPU
scheduling unit (each real node advertises ``LATTICE_REAL_NODE_GPUS`` = 4 simulated GPUs) and a
node selector naming the real nodes only.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import OperatorProcess, free_port
from tests.support.cluster import REPO, Cluster
from tests.support.wait import wait_for

LATTICE = str(REPO / ".venv" / "bin" / "lattice")
REAL_LABEL = "lattice.breezeml.ai/node-type=real"
GPU = "nvidia.com/gpu"
IMAGES = REPO / "hack" / "images" / "build.sh"


def real_nodes(cluster: Cluster) -> list[str]:
    """Names of the Ready real nodes."""
    nodes = cluster.get_json("nodes", "-l", REAL_LABEL)["items"]
    return [
        n["metadata"]["name"]
        for n in nodes
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n["status"].get("conditions", [])
        )
    ]


@pytest.fixture(scope="session")
def real_cluster(cluster: Cluster) -> Cluster:
    """The control plane with >= 2 Ready real nodes and the images in its mirror."""
    want = int(os.environ.get("LATTICE_REAL_NODES", "0") or 0)
    if want < 2:
        pytest.fail(
            "the real tier needs LATTICE_REAL_NODES >= 2 when the cluster starts "
            f"(got {want!r}): run `make real` or `LATTICE_REAL_NODES=2 make test`",
            pytrace=False,
        )
    nodes = wait_for(
        lambda: real_nodes(cluster),
        lambda ns: len(ns) >= want,
        timeout=120,
        what=f"{want} Ready real nodes",
    )
    assert len(nodes) >= 2, nodes
    proc = subprocess.run(
        [str(IMAGES), "--push"], capture_output=True, text=True, check=False, timeout=3000
    )
    if proc.returncode != 0:
        pytest.fail(f"hack/images/build.sh --push failed:\n{proc.stderr[-4000:]}", pytrace=False)
    cluster.kubectl("apply", "-k", str(REPO / "deploy" / "crds"))
    cluster.wait_crds_established()
    return cluster


@pytest.fixture
def real_namespace(real_cluster: Cluster) -> Iterator[str]:
    """A fresh namespace; at the end it is deleted and its pods are waited out."""
    ns = real_cluster.create_namespace("real")
    wait_for(
        lambda: real_cluster.exists("serviceaccount", "default", "-n", ns),
        timeout=30,
        what=f"default ServiceAccount in {ns}",
    )
    yield ns
    real_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    wait_for(
        lambda: real_cluster.kubectl("get", "pods", "-n", ns, "-o", "name", check=False).strip(),
        lambda out: out == "",
        timeout=120,
        what=f"the pods of {ns} to be gone",
    )


@pytest.fixture
def real_operator(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    """``real_operator(*flags)`` starts the operator for this namespace on the real nodes."""
    selector = tmp_path / "node-selector"
    selector.write_text(f"# the real kubelet nodes\n{REAL_LABEL}\n")
    procs: list[OperatorProcess] = []

    def start(*flags: str) -> OperatorProcess:
        env = dict(os.environ)
        env["PATH"] = real_cluster.env["PATH"]
        args = [
            "--kubeconfig",
            str(real_cluster.kubeconfig),
            "--namespaces",
            real_namespace,
            "--metrics-addr",
            f"127.0.0.1:{free_port()}",
            "--probe-addr",
            f"127.0.0.1:{free_port()}",
            "--node-selector-path",
            str(selector),
            "--scheduling-unit",
            GPU,
            "--resize-interval",
            "0",
            "--log-format",
            "console",
            *flags,
        ]
        proc = OperatorProcess(args, env, tmp_path / f"operator-{len(procs)}")
        proc.start()
        procs.append(proc)
        return proc

    yield start
    for p in procs:
        p.stop()


#: Every process of a container (pid, state, wait channel, command line), without ``ps``.
_PROCESSES = (
    'for p in /proc/[0-9]*; do echo "${p#/proc/} $(cut -d" " -f3 "$p/stat") '
    '$(cat "$p/wchan") $(tr "\\0" " " <"$p/cmdline")"; done'
)


def diagnose(cluster: Cluster, namespace: str) -> str:
    """What a stuck job looks like: pods, every pod's log, its processes while it runs, and the
    namespace's events."""
    out = [cluster.kubectl("get", "pods,jobs,services", "-n", namespace, "-o", "wide", check=False)]
    for pod in cluster.get_json("pods", "-n", namespace)["items"]:
        name = pod["metadata"]["name"]
        out.append(f"--- log of {name}:\n{pod_logs(cluster, namespace, name)}")
        if (pod.get("status") or {}).get("phase") == "Running":
            ps = cluster.kubectl(
                "exec", "-n", namespace, name, "--", "sh", "-c", _PROCESSES, check=False
            )
            out.append(f"--- processes of {name} (pid state wchan cmdline):\n{ps}")
    events = ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp")
    out.append("--- events:\n" + cluster.kubectl(*events, check=False))
    return "\n".join(out)


def pod_logs(cluster: Cluster, namespace: str, pod: str, container: str | None = None) -> str:
    """The pod's log ("" while it has none)."""
    args = ["logs", "-n", namespace, pod]
    if container:
        args += ["-c", container]
    return cluster.kubectl(*args, check=False)
