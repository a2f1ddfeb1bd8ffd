"""The operator installed in-cluster on real nodes, as a user installs it, watched by Prometheus.

For each install path (``kubectl apply -k`` of an overlay of ``deploy/``, and ``helm install``
of ``deploy/helm/lattice-operator``) the test:

- builds the operator's image from the Dockerfile (``hack/images/operator.sh --push``: cached by
  content, so only the first run builds) into the cluster's registry mirror under the names that
  ``deploy/`` and the chart use by default;
- installs the operator as a Deployment with leader election under its least-privilege
  ServiceAccount, and waits until its pod holds the Lease and is Ready;
- starts a real Prometheus on the host whose only scrape job is the one that
  ``deploy/monitoring/service_monitor.yaml`` describes (``tests/real/prometheus.py``);
- runs a job of each kind on the real nodes: an elastic TrainingJob that a higher-priority
  TrainingJob shrinks and that grows back when it ends (resize and preemption series), an MXJob
  that waits for GPUs meanwhile (``Waiting``), then upstream's MPIJob ``pi``, a TrainJob on the
  torch-distributed runtime, the MXJob, and a TrainingJob whose pod kube-scheduler cannot place
  (``RequeueCooldown`` after ``pendingTimeout``);
- runs every PromQL expression of ``deploy/dashboards/lattice.json`` (read at test time, so new
  panels are checked too) against Prometheus' HTTP API, and asserts that each returns data.

The overlay and the Helm values change only what the jobs need (the GPU scheduling unit, no
resize delay, a short pending timeout); the image, names, RBAC and probes are the defaults.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.clock import RealClock
from tests.real.conftest import GPU, diagnose, pod_logs
from tests.real.prometheus import Prometheus, dashboard_queries, scrape_config, substitute
from tests.support.cluster import REPO, Cluster
from tests.support.wait import WaitTimeout, wait_for

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "lattice-operator"
SYSTEM = "lattice-system"
OPERATOR_IMAGE = REPO / "hack" / "images" / "operator.sh"
TORCH_IMAGE = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
#: What the jobs below need, as environment (kustomize) and as Helm values.
SETTINGS = {
    "LATTICE_SCHEDULING_UNIT": ("schedulingUnit", GPU),
    "LATTICE_RESIZE_INTERVAL": ("resizeInterval", "0s"),
    "LATTICE_PENDING_TIMEOUT": ("pendingTimeout", "30s"),
}
SCRAPE_INTERVAL = "5s"
TIMEOUT = 300.0


@pytest.fixture(scope="module")
def operator_image(real_cluster: Cluster) -> None:
    """The image in the mirror (built when its content changed; a push of known blobs is cheap)."""
    proc = subprocess.run(
        [str(OPERATOR_IMAGE), "--push"], capture_output=True, text=True, check=False, timeout=3000
    )
    if proc.returncode != 0:
        pytest.fail(f"hack/images/operator.sh --push failed:\n{proc.stderr[-4000:]}", pytrace=False)


def _kustomize_install(cluster: Cluster, workdir: Path) -> list[str]:
    """Apply an overlay of deploy/ (only env added); return the teardown command."""
    overlay = workdir / "overlay"
    overlay.mkdir()
    env = [{"name": k, "value": v} for k, (_, v) in SETTINGS.items()]
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "lattice-operator", "namespace": SYSTEM},
        "spec": {"template": {"spec": {"containers": [{"name": "manager", "env": env}]}}},
    }
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(DEPLOY, overlay)],
                "patches": [{"patch": yaml.safe_dump(patch)}],
            }
        )
    )
    cluster.kubectl("apply", "-k", str(overlay))
    # Teardown keeps the CRDs: the session's other real tests use them.
    docs = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(overlay))) if d]
    kept = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    (workdir / "installed.yaml").write_text(yaml.safe_dump_all(kept))
    return ["kubectl", "delete", "--ignore-not-found", "-f", str(workdir / "installed.yaml")]


def _helm_install(cluster: Cluster, workdir: Path) -> list[str]:
    values = {"operator": dict(SETTINGS.values())}
    (workdir / "values.yaml").write_text(yaml.safe_dump(values))
    install = ["helm", "install", "lattice", str(CHART), "-n", SYSTEM, "--create-namespace"]
    subprocess.run(
        [*install, "-f", str(workdir / "values.yaml")],
        env=cluster.env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return ["helm", "uninstall", "lattice", "-n", SYSTEM, "--wait", "--timeout", "120s"]


def _leader(cluster: Cluster) -> str:
    """The name of the operator pod that is Ready and holds the Lease ("" until one does)."""
    if not cluster.exists("lease", "lattice-operator", "-n", SYSTEM):
        return ""
    lease = cluster.get_json("lease", "lattice-operator", "-n", SYSTEM)
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    pods = cluster.get_json("pods", "-n", SYSTEM, "-l", "app.kubernetes.io/component=manager")
    for pod in pods["items"]:
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
        if ready and pod["metadata"]["name"] == holder:
            return holder
    return ""


@pytest.fixture(params=["kustomize", "helm"])
def installed(
    request: pytest.FixtureRequest, real_cluster: Cluster, operator_image: None, tmp_path: Path
) -> Iterator[str]:
    """The operator installed one way and leading; yields the leader pod's name."""
    del operator_image
    install = _kustomize_install if request.param == "kustomize" else _helm_install
    teardown = install(real_cluster, tmp_path)
    try:
        leader = wait_for(
            lambda: _leader(real_cluster), timeout=180, interval=1, what="a Ready leader"
        )
    except WaitTimeout as e:
        pytest.fail(f"{e}\n{diagnose(real_cluster, SYSTEM)}", pytrace=False)
    sa = real_cluster.get_json("pod", leader, "-n", SYSTEM)["spec"]["serviceAccountName"]
    assert sa == "lattice-operator"
    yield leader
    subprocess.run(teardown, env=real_cluster.env, capture_output=True, check=False, timeout=180)
    real_cluster.kubectl("delete", "namespace", SYSTEM, "--ignore-not-found", "--wait=false")
    wait_for(
        lambda: real_cluster.exists("namespace", SYSTEM),
        lambda there: not there,
        timeout=180,
        what=f"namespace {SYSTEM} to be gone",
    )


@pytest.fixture
def prometheus(real_cluster: Cluster, tmp_path: Path) -> Iterator[Prometheus]:
    scrape = scrape_config(
        DEPLOY / "monitoring" / "service_monitor.yaml",
        kubeconfig=real_cluster.kubeconfig,
        interval=SCRAPE_INTERVAL,
    )
    binary = next(
        (str(Path(d) / "prometheus") for d in real_cluster.bin_dirs if "prometheus" in d), ""
    )
    if not Path(binary).is_file():
        pytest.fail("no prometheus binary: run hack/controlplane/build.sh prometheus")
    prom = Prometheus(binary, tmp_path / "prometheus", scrape, SCRAPE_INTERVAL)
    prom.start()
    yield prom
    prom.stop()


def trainingjob(name: str, *, size: tuple[int, int], priority: int, seconds: int) -> dict[str, Any]:
    """A TrainingJob whose workers each take a whole node's 4 GPUs and sleep."""
    container = {
        "name": "trainingjob",
        "image": TORCH_IMAGE,
        "command": ["sleep", str(seconds)],
        "resources": {"requests": {GPU: 4}, "limits": {GPU: 4}},
    }
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "minSize": size[0],
            "maxSize": size[1],
            "priority": priority,
            # `sleep` as PID 1 ignores SIGTERM: without a short grace period a shrunk worker
            # would hold its GPUs for 30 s, longer than the pending timeout below.
            "replicaSpecs": {
                "template": {
                    "spec": {"containers": [container], "terminationGracePeriodSeconds": 1}
                }
            },
        },
    }


def mxjob() -> dict[str, Any]:
    """tests/real/test_mxjob_dist.py's job: scheduler, server and 2 one-GPU workers."""

    def replica(count: int, gpu: int) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "mxnet", "image": "mxjob/mxnet:gpu"}
        if gpu:
            container["resources"] = {"limits": {GPU: gpu}}
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": "mxnet-job"},
        "spec": {
            "jobMode": "MXTrain",
            "mxReplicaSpecs": {
                "Scheduler": replica(1, 0),
                "Server": replica(1, 0),
                "Worker": replica(2, 1),
            },
        },
    }


def mpijob() -> dict[str, Any]:
    """Upstream's ``pi`` (OpenMPI) with half a CPU per pod, so the other jobs fit beside it."""
    job = yaml.safe_load((REPO / "examples" / "mpijob" / "pi.yaml").read_text())
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "500m"
    return dict(job)


def trainjob() -> dict[str, Any]:
    """torchrun with gloo across 2 pods on the torch-distributed runtime."""
    script = (
        "import torch.distributed as d; d.init_process_group('gloo'); "
        "print('world size', d.get_world_size(), flush=True)"
    )
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "torch2"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 2,
                "image": TORCH_IMAGE,
                "command": ["torchrun", "--no-python", "python3", "-c", script],
                "resourcesPerNode": {"requests": {"cpu": "500m", "memory": "512Mi"}},
            },
        },
    }


def _status(cluster: Cluster, ns: str, kind: str, name: str) -> dict[str, Any]:
    obj = cluster.get_json(kind, name, "-n", ns)
    status = obj.get("status") or {}
    return dict(status if kind == "trainingjob" else status.get("lattice") or {})


def _conditions(cluster: Cluster, ns: str, kind: str, name: str) -> dict[str, str]:
    obj = cluster.get_json(kind, name, "-n", ns)
    conds = (obj.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): str(c.get("status")) for c in conds}


def test_in_cluster_operator_runs_every_kind_and_fills_every_dashboard_query(
    real_cluster: Cluster, real_namespace: str, installed: str, prometheus: Prometheus
) -> None:
    cluster, ns, leader = real_cluster, real_namespace, installed
    clock = RealClock()
    started = clock.monotonic()

    def wait(probe: Any, until: Any, what: str) -> Any:
        try:
            return wait_for(probe, until, timeout=TIMEOUT, interval=1, what=what)
        except WaitTimeout as e:
            operator = pod_logs(cluster, SYSTEM, leader)[-4000:]
            pytest.fail(f"{e}\n{diagnose(cluster, ns)}\noperator:\n{operator}", pytrace=False)

    def size(name: str) -> int:
        return int(_status(cluster, ns, "trainingjob", name).get("currentSize") or 0)

    def stage(kind: str, name: str) -> str:
        return str(_status(cluster, ns, kind, name).get("stage") or "")

    # Prometheus found the operator's pod through the ServiceMonitor's selection.
    targets = wait(
        lambda: [t for t in prometheus.targets() if t["health"] == "up"],
        lambda ts: len(ts) == 1,
        "Prometheus to scrape the operator",
    )
    assert targets[0]["labels"]["pod"] == leader, targets
    assert targets[0]["labels"]["job"] == "lattice-operator-metrics", targets

    # An elastic TrainingJob takes both nodes; a higher-priority one shrinks it, ends, and the
    # elastic job grows back (a shrink and a growth).
    cluster.apply(trainingjob("elastic", size=(1, 2), priority=0, seconds=3600), namespace=ns)
    wait(lambda: size("elastic"), lambda n: n == 2, "elastic to run at size 2")
    cluster.apply(trainingjob("urgent", size=(1, 1), priority=10, seconds=15), namespace=ns)
    wait(lambda: size("elastic"), lambda n: n == 1, "elastic to shrink to 1 for urgent")
    wait(lambda: stage("trainingjob", "urgent"), lambda s: s == "Completed", "urgent to end")
    wait(lambda: size("elastic"), lambda n: n == 2, "elastic to grow back to 2")

    # The MXJob finds every GPU taken and waits until the elastic job is deleted; meanwhile
    # upstream's MPIJob pi, a TrainJob, and a TrainingJob that no node fits.
    cluster.apply(mxjob(), namespace=ns)
    wait(lambda: stage("mxjob", "mxnet-job"), lambda s: s != "", "the MXJob to be seen")
    cluster.kubectl("delete", "trainingjob", "elastic", "-n", ns, "--wait=false")
    cluster.apply(REPO / "examples" / "trainjob" / "torch-distributed-runtime.yaml")
    cluster.apply(mpijob(), namespace=ns)
    cluster.apply(trainjob(), namespace=ns)
    # (the scheduler admits it, having room for its GPU; kube-scheduler finds no pod that its
    # required pod affinity names, reports it Unschedulable, and pendingTimeout requeues it)
    stuck = trainingjob("stuck", size=(1, 1), priority=0, seconds=1)
    template = stuck["spec"]["replicaSpecs"]["template"]["spec"]
    template["containers"][0]["resources"] = {"requests": {GPU: 1}, "limits": {GPU: 1}}
    template["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"lattice-test": "no-such-pod"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    cluster.apply(stuck, namespace=ns)

    def finished(kind: str, name: str, good: str) -> str:
        conds = wait(
            lambda: _conditions(cluster, ns, kind, name),
            lambda c: c.get(good) == "True" or c.get("Failed") == "True",
            f"{kind} {name} to finish",
        )
        return str(conds.get(good))

    assert finished("mpijob", "pi", "Succeeded") == "True", diagnose(cluster, ns)
    assert finished("trainjob", "torch2", "Complete") == "True", diagnose(cluster, ns)
    assert finished("mxjob", "mxnet-job", "Succeeded") == "True", diagnose(cluster, ns)
    wait(
        lambda: stage("trainingjob", "stuck"),
        lambda s: s == "RequeueCooldown",
        "the unschedulable TrainingJob to be requeued",
    )
    cluster.kubectl("delete", "trainingjob", "stuck", "-n", ns, "--wait=false")

    # Every query of the dashboard, as Grafana would send it for this scrape job over the run.
    window = f"{int(clock.monotonic() - started) + 60}s"
    variables = {
        "job": "lattice-operator-metrics",
        "__rate_interval": window,
        "__interval": SCRAPE_INTERVAL,
        "__range": window,
    }
    queries = dashboard_queries(DEPLOY / "dashboards" / "lattice.json")
    assert len(queries) >= 20, queries
    exprs = [(title, substitute(expr, variables)) for title, expr in queries]

    def empty() -> list[str]:
        return [f"{title}: {expr}" for title, expr in exprs if not prometheus.query(expr)]

    missing = wait_for(empty, lambda m: not m, timeout=120, interval=2, what="every query")
    assert not missing
    assert (
        prometheus.query('max(leader_election_master_status{job="lattice-operator-metrics"})')[0][
            "value"
        ][1]
        == "1"
    )
