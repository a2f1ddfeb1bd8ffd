"""An MXJob ``dist`` job on real nodes: MXNet's scheduler, server and workers find each other
through ``DMLC_PS_ROOT_URI``/``DMLC_PS_ROOT_PORT`` and exchange data through the parameter server
(a ``dist_sync`` kvstore); the job ends Succeeded."""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.e2e.conftest import OperatorProcess
from tests.real.conftest import pod_logs
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

IMAGE = "mxjob/mxnet:gpu"


def replica(count: int, gpu: bool = False) -> dict[str, object]:
    container: dict[str, object] = {
        "name": "mxnet",
        "image": IMAGE,
        "ports": [{"containerPort": 9991, "name": "mxjob-port"}],
    }
    if gpu:
        container["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [container]}},
    }


def test_mxjob_dist_roles_exchange_data_through_the_parameter_server(
    real_cluster: Cluster, real_namespace: str, real_operator: Callable[..., OperatorProcess]
) -> None:
    op = real_operator()
    ns = real_namespace
    real_cluster.apply(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": "mxnet-job"},
            "spec": {
                "jobMode": "MXTrain",
                "mxReplicaSpecs": {
                    "Scheduler": replica(1),
                    "Server": replica(1),
                    "Worker": replica(2, gpu=True),
                },
            },
        },
        namespace=ns,
    )

    def state() -> dict[str, str]:
        job = real_cluster.get_json("mxjob", "mxnet-job", "-n", ns)
        conds = (job.get("status") or {}).get("conditions") or []
        return {c["type"]: c["status"] for c in conds}

    final = wait_for(
        state,
        lambda c: c.get("Succeeded") == "True" or c.get("Failed") == "True",
        timeout=300,
        interval=1,
        what="MXJob mxnet-job to finish",
    )
    pods = sorted(p["metadata"]["name"] for p in real_cluster.get_json("pods", "-n", ns)["items"])
    logs = {p: pod_logs(real_cluster, ns, p) for p in pods}
    assert final.get("Succeeded") == "True", f"{final}\n{logs}\noperator:\n{op.logs()}"
    workers = [p for p in pods if "-worker-" in p]
    assert len(workers) == 2, pods
    ranks = set()
    for w in workers:
        assert "exchanged 5 rounds through the parameter server" in logs[w], logs[w]
        m = re.search(r"worker rank (\d) of 2 connected to (\S+)", logs[w])
        assert m is not None, logs[w]
        ranks.add(m.group(1))
        assert m.group(2).startswith("mxnet-job-scheduler-0"), logs[w]
        # the server summed what both workers pushed: round 4 = (0 + 4) + (1 + 4)
        assert "round 4 pulled [9.0, 9.0, 9.0, 9.0] expected 9.0" in logs[w], logs[w]
    assert ranks == {"0", "1"}, logs
