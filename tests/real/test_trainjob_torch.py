"""TrainJobs whose pods really run: torchrun forms a gloo process group from the ``PET_*``
variables, and a dataset initializer runs to completion before the trainer reads its data."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import OperatorProcess
from tests.real.conftest import pod_logs
from tests.support.cluster import REPO, Cluster
from tests.support.wait import wait_for

RUNTIME = REPO / "examples" / "trainjob" / "torch-distributed-runtime.yaml"
TORCH_IMAGE = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
ALL_REDUCE = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * dist.get_rank()
dist.all_reduce(t)
print(f"rank {dist.get_rank()} world size {dist.get_world_size()} rank sum {int(t.item())}",
      flush=True)
"""


def conditions(obj: dict[str, object]) -> dict[str, str]:
    status = obj.get("status") or {}
    assert isinstance(status, dict)
    return {str(c.get("type")): str(c.get("status")) for c in status.get("conditions") or []}


def finished(cluster: Cluster, ns: str, name: str) -> dict[str, str]:
    return wait_for(
        lambda: conditions(cluster.get_json("trainjob", name, "-n", ns)),
        lambda c: c.get("Complete") == "True" or c.get("Failed") == "True",
        timeout=300,
        interval=1,
        what=f"TrainJob {name} to finish",
    )


def job_pods(cluster: Cluster, ns: str, name: str) -> list[dict[str, Any]]:
    pods = cluster.get_json("pods", "-n", ns)["items"]
    return [p for p in pods if p["metadata"]["name"].startswith(f"{name}-")]


def test_torch_distributed_trainjob_runs_torchrun_with_gloo_across_three_pods(
    real_cluster: Cluster, real_namespace: str, real_operator: Callable[..., OperatorProcess]
) -> None:
    op = real_operator()
    ns = real_namespace
    real_cluster.apply(RUNTIME)
    real_cluster.apply(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "torch3"},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {
                    "numNodes": 3,
                    "image": TORCH_IMAGE,
                    "command": ["torchrun", "--no-python", "python3", "-c", ALL_REDUCE],
                    "resourcesPerNode": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                },
            },
        },
        namespace=ns,
    )
    final = finished(real_cluster, ns, "torch3")
    pods = sorted(p["metadata"]["name"] for p in job_pods(real_cluster, ns, "torch3"))
    logs = {p: pod_logs(real_cluster, ns, p) for p in pods}
    assert final.get("Complete") == "True", f"{final}\n{logs}\noperator:\n{op.logs()}"
    assert len(pods) == 3, pods
    reports = [
        re.findall(r"rank (\d) world size (\d+) rank sum (\d+)", log) for log in logs.values()
    ]
    ranks = sorted(int(r[0][0]) for r in reports if r)
    assert ranks == [0, 1, 2], logs
    assert all(r and r[0][1:] == ("3", "3") for r in reports), logs


@pytest.fixture
def shared_dir(real_cluster: Cluster, real_namespace: str) -> Iterator[Path]:
    """A host directory that every pod of the test mounts (all real nodes share this host)."""
    path = real_cluster.kubeconfig.parent / "real-data" / real_namespace
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


READ_DATASET = """
import csv, hashlib, json, os
d = "/workspace/dataset"
meta = json.load(open(os.path.join(d, "meta.json")))
raw = open(os.path.join(d, "data.csv"), "rb").read()
assert hashlib.sha256(raw).hexdigest() == meta["sha256"], "dataset checksum mismatch"
rows = list(csv.DictReader(open(os.path.join(d, "data.csv"))))
assert len(rows) == meta["rows"], (len(rows), meta)
print(f"trainer read {len(rows)} rows of {meta['name']} ({meta['sha256'][:12]})", flush=True)
"""


def test_dataset_initializer_runs_before_the_trainer_reads_the_data(
    real_cluster: Cluster,
    real_namespace: str,
    real_operator: Callable[..., OperatorProcess],
    shared_dir: Path,
) -> None:
    op = real_operator()
    ns = real_namespace
    volume = {"name": "initializer", "hostPath": {"path": str(shared_dir), "type": "Directory"}}
    mount = [{"name": "initializer", "mountPath": "/workspace"}]
    step = "trainer.kubeflow.org/trainjob-ancestor-step"

    def job(name: str, container: dict[str, object]) -> dict[str, object]:
        return {
            "name": name,
            "template": {
                "metadata": {"labels": {step: name if name != "node" else "trainer"}},
                "spec": {
                    "template": {
                        "spec": {"containers": [container], "volumes": [volume]},
                    }
                },
            },
        }

    real_cluster.apply(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "metadata": {"name": "torch-with-dataset"},
            "spec": {
                "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": 1}},
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            job(
                                "dataset-initializer",
                                {
                                    "name": "dataset-initializer",
                                    "image": "ghcr.io/kubeflow/trainer/dataset-initializer",
                                    "volumeMounts": mount,
                                },
                            ),
                            {
                                **job(
                                    "node",
                                    {
                                        "name": "node",
                                        "image": TORCH_IMAGE,
                                        "command": ["python3", "-c", READ_DATASET],
                                        "volumeMounts": mount,
                                    },
                                ),
                                # as the official runtimes order their initializers
                                "dependsOn": [
                                    {"name": "dataset-initializer", "status": "Complete"}
                                ],
                            },
                        ]
                    }
                },
            },
        },
        namespace=ns,
    )
    real_cluster.apply(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "with-data"},
            "spec": {
                "runtimeRef": {"kind": "TrainingRuntime", "name": "torch-with-dataset"},
                "initializer": {"dataset": {"storageUri": "synthetic://tiny-mnist?rows=256"}},
            },
        },
        namespace=ns,
    )
    final = finished(real_cluster, ns, "with-data")
    pods = {p["metadata"]["name"]: p for p in job_pods(real_cluster, ns, "with-data")}
    logs = {name: pod_logs(real_cluster, ns, name) for name in pods}
    assert final.get("Complete") == "True", f"{final}\n{logs}\noperator:\n{op.logs()}"
    init = [n for n in pods if "dataset-initializer" in n]
    trainer = [n for n in pods if "-node-" in n]
    assert len(init) == 1, sorted(pods)
    assert len(trainer) == 1, sorted(pods)
    assert "wrote 256 rows of 'tiny-mnist'" in logs[init[0]], logs
    assert "trainer read 256 rows of tiny-mnist" in logs[trainer[0]], logs
    meta = json.loads((shared_dir / "dataset" / "meta.json").read_text())
    assert meta["rows"] == 256
    # The trainer started only after the initializer had finished.
    init_end = pods[init[0]]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    trainer_start = pods[trainer[0]]["status"]["containerStatuses"][0]["state"]["terminated"][
        "startedAt"
    ]
    assert init_end <= trainer_start, (init_end, trainer_start)
