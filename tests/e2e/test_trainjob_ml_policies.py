"""TrainJob ML policies end to end: the operator process, kwok nodes.

The JAX and XGBoost runtime shapes of ``tests/integration/manifests/runtimes.yaml`` (renamed per
test, since ClusterTrainingRuntimes are cluster-wide) and a TrainJob over each, with two nodes of
two GPUs: every created pod carries the policy's environment (JAX coordinator, process count and
id; XGBoost tracker, task id and worker count, one worker per GPU) and the container port
29500, and the TrainJob completes when its pods exit 0. The Flux runtime shape likewise: the
installer init container and wrapped command on every pod, the scripts ConfigMap, and the CURVE
Secret with a certificate the operator generated. A ``tune run`` TrainJob over the torchtune
trainer shape, as the namespaced runtime ``torchtune-llama3.2-1b``, runs the command Trainer
v2.3 builds for it.
"""

from __future__ import annotations

import base64
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


def trainjob(name: str, runtime: str, **extra: Any) -> dict[str, Any]:
    ref = {"apiGroup": GROUP, "kind": "ClusterTrainingRuntime", "name": runtime}
    trainer = {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}}, **extra}
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": ref, "trainer": trainer},
    }


def policy_env(pod: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The ``prefix*`` variables of the pod's one container."""
    (container,) = pod["spec"]["containers"]
    return {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in container.get("env") or []
        if e["name"].startswith(prefix)
    }


def run(
    cluster: Cluster,
    namespace: str,
    *,
    runtime: str,
    job: str,
    ports: tuple[int, ...] = (29500,),
    **trainer: Any,
) -> dict[str, dict[str, Any]]:
    """Apply the runtime and a TrainJob over it; its pods, by name, after checking names, owner
    and ports, and after they finished and the job completed."""
    tj = trainjobs(cluster, namespace)
    name = f"{runtime}-{namespace}"
    cluster.apply(official(runtime, rename=name))
    try:
        tj.apply(trainjob(job, name, **trainer))
        pods = wait_pods(tj, job, 2)
        uid = tj.get(job)["metadata"]["uid"]
        assert sorted(pods) == [f"{job}-node-0-0", f"{job}-node-0-1"]
        for pod in pods.values():
            assert controller_of(pod) == ("TrainJob", job, uid)
            (container,) = pod["spec"]["containers"]
            assert tuple(p["containerPort"] for p in container.get("ports") or []) == ports
        for pod_name in pods:
            tj.finish(pod_name, 0)
        tj.wait_condition(job, "Complete")
        return pods
    finally:
        cluster.kubectl("delete", "clustertrainingruntime", name, "--ignore-not-found")


def test_jax_trainjob_pods_get_the_coordinator_env_and_port(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=2)
    op: OperatorProcess = operator(*FLAGS)
    job = "jax-mnist"
    with explained(op):
        pods = run(crds_installed, namespace, runtime="lt-jax", job=job)
    for pod in pods.values():
        assert policy_env(pod, "JAX_") == {
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
        pods = run(crds_installed, namespace, runtime="lt-xgboost", job=job)
    for pod in pods.values():
        assert policy_env(pod, "DMLC_") == {
            "DMLC_TRACKER_URI": f"{job}-node-0-0.{job}",
            "DMLC_TRACKER_PORT": "29500",
            "DMLC_TASK_ID": {"fieldRef": {"apiVersion": "v1", "fieldPath": INDEX_PATH}},
            "DMLC_NUM_WORKER": "4",
        }


def test_flux_trainjob_pods_get_the_installer_scripts_and_curve_secret(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=2)
    op: OperatorProcess = operator(*FLAGS)
    job = "lammps"
    tj = trainjobs(crds_installed, namespace)
    with explained(op):
        pods = run(
            crds_installed,
            namespace,
            runtime="lt-flux",
            job=job,
            ports=(),
            command=["lmp", "-in", "in.reaxc.hns"],
        )
        config = tj.owned("configmaps", job)[f"{job}-flux-entrypoint"]
        secret = tj.owned("secrets", job)[f"{job}-flux-curve"]
    for pod in pods.values():
        assert not any(n.startswith(("PET_", "JAX_", "DMLC_")) for n in policy_env(pod, ""))
        (installer,) = pod["spec"]["initContainers"]
        assert installer["name"] == "flux-installer"
        (container,) = pod["spec"]["containers"]
        assert container["command"] == [
            "/bin/bash",
            "/etc/flux-config/entrypoint.sh",
            "lmp -in in.reaxc.hns",
        ]
    assert "flux run -N 2 -n 8 -g 2 $1" in config["data"]["entrypoint.sh"]
    assert f"{job}-node-0-[0-1]" in config["data"]["init.sh"]
    cert = base64.b64decode(secret["data"]["curve.cert"]).decode()
    assert f'name = "{job}-flux-curve"' in cert
    assert cert.count("-key = ") == 2


def test_torchtune_trainjob_pod_runs_the_rewritten_command(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=2)
    op: OperatorProcess = operator(*FLAGS)
    rt = official("lt-torchtune-small", rename="torchtune-llama3.2-1b")
    rt["kind"] = "TrainingRuntime"
    spec = rt["spec"]
    spec["template"]["spec"].pop("volumeClaimPolicies")
    (node,) = [j for j in spec["template"]["spec"]["replicatedJobs"] if j["name"] == "node"]
    node.pop("dependsOn")
    pod_spec = node["template"]["spec"]["template"]["spec"]
    pod_spec.pop("volumes")
    pod_spec["containers"][0]["command"] = [
        "tune",
        "run",
        "--rdzv_endpoint=localhost:29500",
        "full_finetune_distributed",
        "--config",
        "llama3_2/1B_full",
        "output_dir=/workspace/output",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    spec["template"]["spec"]["replicatedJobs"] = [node]
    crds_installed.apply(rt, namespace=namespace)
    job = "tune-llama"
    body = trainjob(job, "torchtune-llama3.2-1b", command=["tune", "run"], args=["epochs=1"])
    body["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    body["spec"]["trainer"]["numNodes"] = 1
    tj = trainjobs(crds_installed, namespace)
    with explained(op):
        tj.apply(body)
        pods = wait_pods(tj, job, 1)
        (container, _sidecar) = pods[f"{job}-node-0-0"]["spec"]["containers"]
        tj.finish(f"{job}-node-0-0", 0)
        tj.wait_condition(job, "Complete")
    assert container["command"] == [
        "tune",
        "run",
        f"--rdzv_endpoint={job}-node-0-0.{job}:29500",
        "full_finetune_distributed",
        "--config",
        "llama3_2/1B_full",
        "output_dir=/workspace/output",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert container["args"] == ["epochs=1"]
    names = [e["name"] for e in container.get("env") or []]
    assert sorted(n for n in names if n.startswith("PET_")) == [
        "PET_NNODES",
        "PET_NODE_RANK",
        "PET_NPROC_PER_NODE",
    ]
