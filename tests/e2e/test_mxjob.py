"""MXJob (``kubeflow.org/v1``) end to end: the operator process, kwok nodes, ``kubectl``.

1. training-operator's dist example, applied unchanged: pods and headless Services
   ``<job>-<type>-<i>``, their labels, ``MX_CONFIG`` and ``DMLC_*`` env, v1.7's conditions; the
   pods exit 0 through kwok and the job Succeeds when its scheduler does.
2. The BytePS example, applied unchanged (2 servers, 2 workers of 8 GPUs): the defaulted
   ``mxjob-port`` 9091, ``DMLC_WORKER_ID``, and cleanPodPolicy Running deleting the pods still
   running with their Services once the scheduler succeeds.
3. Failure paths: a worker exiting 1 fails the job; under ExitCode a worker exiting 137 is
   recreated (``ExitedWithCode``, Restarting) until the backoffLimit ends the job; the
   activeDeadlineSeconds failure with v1.7's message.
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import (
    FLAGS,
    JOB_NAME,
    MANAGED,
    OPERATOR_NAME,
    REPLICA_INDEX,
    TIMEOUT,
    Kubeflow,
    controller_of,
    env_of,
    scrape,
)
from tests.e2e.test_trainingjob_lifecycle import sample
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

REPLICA_TYPE = "training.kubeflow.org/replica-type"
JOB_ROLE = "training.kubeflow.org/job-role"


def mx_config(job: str, port: int, counts: dict[str, int], role: str, index: int) -> str:
    cluster = {
        t: [{"url": f"{job}-{t}-{i}", "port": port} for i in range(n)]
        for t, n in sorted(counts.items())
    }
    labels = dict.fromkeys(sorted(counts), "")
    config = {"cluster": cluster, "labels": labels, "task": {"type": role, "index": index}}
    return json.dumps(config, separators=(",", ":"))


def mx_env(job: str, port: int, counts: dict[str, int], role: str, index: int) -> dict[str, str]:
    env = {
        "MX_CONFIG": mx_config(job, port, counts, role, index),
        "DMLC_PS_ROOT_PORT": str(port),
        "DMLC_PS_ROOT_URI": f"{job}-scheduler-0",
        "DMLC_NUM_SERVER": str(counts.get("server", 0)),
        "DMLC_NUM_WORKER": str(counts.get("worker", 0)),
        "DMLC_ROLE": role,
        "DMLC_USE_KUBERNETES": "1",
    }
    if role == "worker":
        env["DMLC_WORKER_ID"] = str(index)
    return env


def mxjob(name: str, *, workers: int = 1, policy: str = "Never", **run: Any) -> dict[str, Any]:
    """A scheduler and ``workers`` workers (restartPolicy ``policy``), no GPUs."""

    def replica(replicas: int, restart: str) -> dict[str, Any]:
        container = {"name": "mxnet", "image": "mxjob/mxnet:gpu", "command": ["python", "t.py"]}
        return {
            "replicas": replicas,
            "restartPolicy": restart,
            "template": {"spec": {"containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name},
        "spec": {
            "jobMode": "MXTrain",
            "runPolicy": run,
            "mxReplicaSpecs": {
                "Scheduler": replica(1, "Never"),
                "Worker": replica(workers, policy),
            },
        },
    }


def running(mx: Kubeflow, job: str, n: int) -> dict[str, dict[str, Any]]:
    """Wait until ``job`` has exactly ``n`` pods, all Running; returns them."""
    wait_for(
        lambda: mx.phases(job),
        lambda p: len(p) == n and set(p.values()) == {"Running"},
        timeout=TIMEOUT,
        what=f"{n} running pods of {job}",
    )
    return mx.pods(job)


def test_dist_example_children_env_and_success(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    mx = Kubeflow(crds_installed, namespace, "mxjobs", "MXJob")
    job = "mxnet-job"
    counts = {"scheduler": 1, "server": 1, "worker": 1}
    with explained(op):
        mx.apply_example("mxjob", "mxjob-dist.yaml")
        pods = running(mx, job, 3)
        uid = mx.get(job)["metadata"]["uid"]
        services = mx.owned("services", job)
        assert sorted(pods) == sorted(services) == [f"{job}-{t}-0" for t in sorted(counts)]
        for role in counts:
            name = f"{job}-{role}-0"
            pod = pods[name]
            assert controller_of(pod) == ("MXJob", job, uid)
            labels = {
                OPERATOR_NAME: "mxjob-controller",
                JOB_NAME: job,
                REPLICA_TYPE: role,
                REPLICA_INDEX: "0",
                MANAGED: "true",
            }
            if role == "server":
                labels[JOB_ROLE] = "master"
            assert pod["metadata"]["labels"] == labels
            assert pod["spec"]["restartPolicy"] == "Never"
            (container,) = pod["spec"]["containers"]
            assert container["name"] == "mxnet"
            assert env_of(container) == mx_env(job, 9991, counts, role, 0)
            assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [
                ("mxjob-port", 9991)
            ]
            if role == "worker":
                assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
            svc = services[name]
            assert controller_of(svc) == ("MXJob", job, uid)
            assert svc["spec"]["clusterIP"] == "None"
            assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("mxjob-port", 9991)]
            selector = {OPERATOR_NAME: "mxjob-controller", JOB_NAME: job}
            selector.update({REPLICA_TYPE: role, REPLICA_INDEX: "0"})
            assert svc["spec"]["selector"] == selector

        status = mx.wait_condition(job, "Running")
        conds = {c["type"]: c for c in status["conditions"]}
        assert (conds["Created"]["reason"], conds["Created"]["message"]) == (
            "MXJobCreated",
            f"MXJob {job} is created.",
        )
        assert (conds["Running"]["reason"], conds["Running"]["message"]) == (
            "MXJobRunning",
            f"MXJob {job} is running.",
        )

        for role in ("worker", "server", "scheduler"):
            mx.finish(f"{job}-{role}-0", 0)
        status = mx.wait_condition(job, "Succeeded")
        conds = {c["type"]: c for c in status["conditions"]}
        assert (conds["Succeeded"]["reason"], conds["Succeeded"]["message"]) == (
            "MXJobSucceeded",
            f"MXJob {job} is successfully completed.",
        )
        assert status["replicaStatuses"]["Scheduler"]["succeeded"] == 1
        mx.wait_stage(job, "Completed")
        event = mx.wait_event(job, "MXJobSucceeded")
        assert (event["type"], event["note"]) == (
            "Normal",
            f"MXJob {job} is successfully completed.",
        )
        # cleanPodPolicy None (the default): pods and Services stay.
        assert set(mx.phases(job).values()) <= {"Succeeded", "Running"}
        assert len(mx.owned("services", job)) == 3

        def counted(s: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> bool:
            labels = {"job_namespace": namespace, "framework": "mxnet"}
            return sample(s, "training_operator_jobs_successful_total", **labels) == 1

        s = wait_for(lambda: scrape(op), counted, timeout=TIMEOUT, what="MXJob metrics")
        labels = {"job_namespace": namespace, "framework": "mxnet"}
        assert sample(s, "training_operator_jobs_created_total", **labels) == 1


def test_byteps_example_env_and_clean_pod_policy_running(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=8)
    op: OperatorProcess = operator(*FLAGS)
    mx = Kubeflow(crds_installed, namespace, "mxjobs", "MXJob")
    job = "byteps-mxnet-job"
    counts = {"scheduler": 1, "server": 2, "worker": 2}
    with explained(op):
        mx.apply_example("mxjob", "mxjob-byteps.yaml")
        pods = running(mx, job, 5)
        for role, n in counts.items():
            for i in range(n):
                (container,) = pods[f"{job}-{role}-{i}"]["spec"]["containers"]
                assert container["command"] == ["bpslaunch"]
                assert env_of(container) == mx_env(job, 9091, counts, role, i)
                ports = [(p["name"], p["containerPort"]) for p in container["ports"]]
                assert ports == [("mxjob-port", 9091)], "v1.7 defaults the port"
                if role == "worker":
                    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
                    assert container["volumeMounts"][0] == {"mountPath": "/dev/shm", "name": "dshm"}
        nodes = {pods[f"{job}-worker-{i}"]["spec"]["nodeName"] for i in range(2)}
        assert len(nodes) == 2, "an 8-GPU worker per node"
        services = mx.owned("services", job)
        assert sorted(services) == sorted(pods)
        for svc in services.values():
            assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("mxjob-port", 9091)]

        mx.finish(f"{job}-scheduler-0", 0)
        mx.wait_condition(job, "Succeeded")
        # cleanPodPolicy Running: the pods still running go, each with its Service.
        wait_for(
            lambda: (mx.phases(job), sorted(mx.owned("services", job))),
            lambda seen: seen == ({f"{job}-scheduler-0": "Succeeded"}, [f"{job}-scheduler-0"]),
            timeout=TIMEOUT,
            what="the running pods and their Services are cleaned",
        )


def test_failures_exit_code_restarts_backoff_limit_and_deadline(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    mx = Kubeflow(crds_installed, namespace, "mxjobs", "MXJob")
    ns = namespace
    with explained(op):
        mx.apply(mxjob("crash"))
        mx.apply(mxjob("retry", workers=2, policy="ExitCode", backoffLimit=1))
        mx.apply(mxjob("slow", activeDeadlineSeconds=3))

        # Never: exit 1 fails the job.
        running(mx, "crash", 2)
        mx.finish("crash-worker-0", 1)
        failed = {c["type"]: c for c in mx.wait_condition("crash", "Failed")["conditions"]}
        message = "mxjob crash is failed because 1 Worker replica(s) failed."
        assert (failed["Failed"]["reason"], failed["Failed"]["message"]) == ("MXJobFailed", message)
        event = mx.wait_event("crash", "MXJobFailed")
        assert (event["type"], event["note"]) == ("Normal", message)

        # ExitCode: 137 recreates the pod, the Restarting condition and events say so.
        first = running(mx, "retry", 3)["retry-worker-0"]["metadata"]["uid"]
        mx.finish("retry-worker-0", 137)
        exited = mx.wait_event("retry", "ExitedWithCode")
        assert (exited["type"], exited["note"]) == (
            "Normal",
            f"Pod: {ns}.retry-worker-0 exited with code 137",
        )
        restarting = mx.wait_event("retry", "MXJobRestarting")
        message = "mxjob retry is restarting because 1 Worker replica(s) failed."
        assert (restarting["type"], restarting["note"]) == ("Warning", message)
        again = wait_for(
            lambda: mx.pods("retry").get("retry-worker-0"),
            lambda p: (
                p is not None
                and p["metadata"]["uid"] != first
                and p["status"].get("phase") == "Running"
            ),
            timeout=TIMEOUT,
            what="retry-worker-0 recreated and running",
        )
        assert again is not None
        status = mx.wait_condition("retry", "Running")
        conds = {c["type"]: c for c in status["conditions"]}
        assert "Restarting" not in conds, "Running replaces Restarting"
        assert status["replicaStatuses"]["Worker"]["failed"] == 1, "the restart is charged"
        assert "Failed" not in conds

        # A second retryable exit passes backoffLimit 1: the job fails and its pods stop.
        mx.finish("retry-worker-1", 137)
        failed = {c["type"]: c for c in mx.wait_condition("retry", "Failed")["conditions"]}
        message = "Job retry has failed because it has reached the specified backoff limit"
        assert (failed["Failed"]["reason"], failed["Failed"]["message"]) == ("MXJobFailed", message)
        wait_for(lambda: mx.pods("retry"), lambda p: p == {}, timeout=TIMEOUT, what="retry stops")

        failed = {c["type"]: c for c in mx.wait_condition("slow", "Failed")["conditions"]}
        message = "Job slow has failed because it was active longer than specified deadline"
        assert (failed["Failed"]["reason"], failed["Failed"]["message"]) == ("MXJobFailed", message)
        assert mx.wait_event("slow", "MXJobFailed")["note"] == message

        def counted(s: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> bool:
            labels = {"job_namespace": ns, "framework": "mxnet"}
            return sample(s, "training_operator_jobs_failed_total", **labels) == 3

        s = wait_for(lambda: scrape(op), counted, timeout=TIMEOUT, what="failures counted")
        labels = {"job_namespace": ns, "framework": "mxnet"}
        assert sample(s, "training_operator_jobs_restarted_total", **labels) == 1
