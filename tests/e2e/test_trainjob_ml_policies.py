"""TrainJob ML policies end to end: the operator process, kwok nodes.

The JAX and XGBoost runtime shapes of ``tests/integration/manifests/runtimes.yaml`` (renamed per
test, since ClusterTrainingRuntimes are cluster-wide) and a TrainJob over each, with two nodes of
two GPUs: every created pod carries the policy's environment (JAX coordinator, process count and
id; XGBoost tracker, task id and worker count, one worker per GPU) and the container port
29500, and the TrainJob completes when its pods exit 0.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import FLAGS, controller_of
from tests.e2e.test_trainjob import API, GROUP, trainjobs, wait_pods
from tests.support.cluster import Cluster

MANIFESTS = Path(__file__).parents[1] / "integration" / "manifests" / "runtimes.yaml"
INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def official(name: str, *, rename: str) -> dict[str, Any]:
    """ClusterTrainingRuntime ``name`` of the manifests, renamed ``rename``."""
    for doc in yaml.safe_load_all(MANIFESTS.read_text()):
        if doc and doc["metadata"]["name"] == name:
            runtime: dict[str, Any] = copy.deepcopy(doc)
            runtime["metadata"]["name"] = rename
            return runtime
    raise KeyError(name)


def trainjob(name: str, runtime: str) -> dict[str, Any]:
    ref = {"apiGroup": GROUP, "kind": "ClusterTrainingRuntime", "name": runtime}
    trainer = {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}}}
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": ref, "trainer": trainer},
    }


def policy_env(container: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in container.get("env") or []
        if e["name"].startswith(prefix)
    }


def run(
    cluster: Cluster, namespace: str, *, runtime: str, job: str, prefix: str
) -> dict[str, dict[str, Any]]:
    """Apply the runtime and a TrainJob over it; the policy env of each pod, by pod name, after
    checking names, owner, port and index, then let the pods finish and the job complete."""
    tj = trainjobs(cluster, namespace)
    name = f"{runtime}-{namespace}"
    cluster.apply(official(runtime, rename=name))
    try:
        tj.apply(trainjob(job, name))
        pods = wait_pods(tj, job, 2)
        uid = tj.get(job)["metadata"]["uid"]
        assert sorted(pods) == [f"{job}-node-0-0", f"{job}-node-0-1"]
        envs: dict[str, dict[str, Any]] = {}
        for pod_name, pod in pods.items():
            assert controller_of(pod) == ("TrainJob", job, uid)
            (container,) = pod["spec"]["containers"]
            assert [p["containerPort"] for p in container.get("ports") or []] == [29500]
            envs[pod_name] = policy_env(container, prefix)
        for pod_name in pods:
            tj.finish(pod_name, 0)
        tj.wait_condition(job, "Complete")
        return envs
    finally:
        cluster.kubectl("delete", "clustertrainingruntime", name, "--ignore-not-found")


def test_jax_trainjob_pods_get_the_coordinator_env_and_port(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=2)
    op: OperatorProcess = operator(*FLAGS)
    job = "jax-mnist"
    with explained(op):
        envs = run(crds_installed, namespace, runtime="lt-jax", job=job, prefix="JAX_")
    for env in envs.values():
        assert env == {
            "JAX_NUM_PROCESSES": "2",
            "JAX_PROCESS_ID": {"fieldRef": {"apiVersion": "v1", "fieldPath": INDEX_PATH}},
            "JAX_COORDINATOR_ADDRESS": f"{job}-node-0-0.{job}:29500",
        }


def test_xgboost_trainjob_pods_get_the_tracker_env_and_port(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=2)
    op: OperatorProcess = operator(*FLAGS)
    job = "xgb-train"
    with explained(op):
        envs = run(crds_installed, namespace, runtime="lt-xgboost", job=job, prefix="DMLC_")
    for env in envs.values():
        assert env == {
            "DMLC_TRACKER_URI": f"{job}-node-0-0.{job}",
            "DMLC_TRACKER_PORT": "29500",
            "DMLC_TASK_ID": {"fieldRef": {"apiVersion": "v1", "fieldPath": INDEX_PATH}},
            "DMLC_NUM_WORKER": "4",
        }
