"""TrainJob (``trainer.kubeflow.org/v1alpha1``) end to end: the operator process, kwok nodes.

1. Upstream's ``torch-distributed`` ClusterTrainingRuntime and a TrainJob over it (numNodes 2,
   image and command overrides, GPU ``resourcesPerNode``), both from ``examples/`` unchanged:
   JobSet-named pods (hostname, subdomain, PET_* env), the headless Service, the runtime pinned
   in ``<tj>-runtime``; the pods exit 0 and the TrainJob is ``Complete`` (``AllJobsCompleted``)
   with ``jobsStatus`` and no Kubeflow Created/Running conditions.
2. A TrainJob applied before its runtime waits (``Created=False``, reason
   ``TrainingRuntimeNotFound``, a Warning event, no pods) and runs once the runtime exists.
3. A trainer pod exiting non-zero fails the TrainJob (``FailedJobs``, naming pod and code); the
   running pod is deleted, the failed pod and the headless Service are kept.
4. Kueue-style ``spec.suspend`` then unsuspend: ``Suspended`` True (``Suspended``) with no pods,
   then False (``Resumed``) and the pods are created.
5. Initializers: the dataset initializer runs alone first (``STORAGE_URI``), the trainer pod,
   which ``dependsOn`` it (Complete), only after it Succeeded; a failing initializer fails the
   TrainJob and no trainer pod is created.
6. Upstream's ``mpi-distributed`` runtime and ``mpi-pi`` (runLauncherAsNode): hostfile, ssh
   Secret, launcher env; the launcher's success completes the job (successPolicy).
7. Elastic torch (minNodes 1, maxNodes 4, ``PET_NNODES=1:4``, c10d) grows to 4 on 4 GPUs, shrinks
   to 2 (highest indices) when a TrainingJob needs 2, and grows back when it is deleted.
Pods finish through kwok (``kwok.lattice.breezeml.ai/exit-code`` / ``run-for``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import FLAGS, TIMEOUT, Kubeflow, controller_of, env_of
from tests.e2e.test_trainingjob_scheduling import World
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

GROUP = "trainer.kubeflow.org"
API = f"{GROUP}/v1alpha1"


def trainjobs(cluster: Cluster, namespace: str) -> Kubeflow:
    return Kubeflow(cluster, namespace, "trainjobs.trainer.kubeflow.org", "TrainJob")


def runtime(name: str, *, kind: str = "TrainingRuntime") -> dict[str, Any]:
    """A minimal torch runtime: one ``node`` replicatedJob, pods never restarted."""
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "node", "image": "busybox", "command": ["true"]}],
    }
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {f"{GROUP}/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": pod}},
        },
    }
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [job]}},
        },
    }


def trainjob(name: str, runtime_name: str, *, nodes: int = 1, **spec: Any) -> dict[str, Any]:
    ref = {"apiGroup": GROUP, "kind": "TrainingRuntime", "name": runtime_name}
    resources = {"limits": {"nvidia.com/gpu": "1"}}
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": ref,
            "trainer": {"numNodes": nodes, "resourcesPerNode": resources},
            **spec,
        },
    }


def wait_pods(tj: Kubeflow, job: str, n: int, phase: str = "Running") -> dict[str, Any]:
    def ready(pods: dict[str, Any]) -> bool:
        return len(pods) == n and all(
            (p.get("status") or {}).get("phase") == phase for p in pods.values()
        )

    pods: dict[str, Any] = wait_for(
        lambda: tj.pods(job), ready, timeout=TIMEOUT, what=f"{n} {phase} pods of {job}"
    )
    return dict(pods)


def test_torch_distributed_example_pods_env_and_complete(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    job = "torch-multi-node"
    with explained(op):
        tj.apply_example("trainjob", "torch-distributed-runtime.yaml")
        tj.apply_example("trainjob", "trainjob-torch.yaml")
        pods = wait_pods(tj, job, 2)
        uid = tj.get(job)["metadata"]["uid"]
        assert sorted(pods) == [f"{job}-node-0-0", f"{job}-node-0-1"]
        for index, name in enumerate(sorted(pods)):
            pod = pods[name]
            assert controller_of(pod) == ("TrainJob", job, uid)
            assert pod["spec"]["hostname"] == name
            assert pod["spec"]["subdomain"] == job
            labels = pod["metadata"]["labels"]
            assert labels["jobset.sigs.k8s.io/jobset-name"] == job
            assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
            assert labels["batch.kubernetes.io/job-completion-index"] == str(index)
            (container,) = pod["spec"]["containers"]
            assert container["image"] == "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
            assert container["command"][0] == "torchrun"
            assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
            env = env_of(container)
            assert env["PET_NNODES"] == "2"
            assert env["PET_MASTER_ADDR"] == f"{job}-node-0-0.{job}"
            assert env["PET_MASTER_PORT"] == "29500"
            assert "PET_NPROC_PER_NODE" in env
            rank = next(e for e in container["env"] if e["name"] == "PET_NODE_RANK")
            assert "job-completion-index" in rank["valueFrom"]["fieldRef"]["fieldPath"]
        (service,) = tj.owned("services", job).values()
        assert service["metadata"]["name"] == job
        assert service["spec"]["clusterIP"] == "None"
        pin = tj.owned("configmaps", job)[f"{job}-runtime"]
        pinned = json.loads(pin["data"]["runtime.json"])
        assert (pinned["kind"], pinned["metadata"]["name"]) == (
            "ClusterTrainingRuntime",
            "torch-distributed",
        )
        assert pin["metadata"]["annotations"][f"{GROUP}/runtime-hash"] == pin["data"]["hash"]

        for name in pods:
            tj.finish(name, 0)
        status = tj.wait_condition(job, "Complete")
        conds = {c["type"]: c for c in status["conditions"]}
        assert conds["Complete"]["reason"] == "AllJobsCompleted"
        assert conds["Complete"]["observedGeneration"] == tj.get(job)["metadata"]["generation"]
        assert not {"Created", "Running", "Succeeded"} & set(conds)
        (node,) = status["jobsStatus"]
        assert (node["name"], node["succeeded"], node["failed"]) == ("node", 1, 0)
        tj.wait_stage(job, "Completed")


def test_trainjob_waits_for_its_runtime_then_runs(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    with explained(op):
        tj.apply(trainjob("early", "late-runtime"))
        status = tj.wait_condition("early", "Created", "False")
        created = {c["type"]: c for c in status["conditions"]}["Created"]
        assert created["reason"] == "TrainingRuntimeNotFound"
        assert "late-runtime" in created["message"]
        event = tj.wait_event("early", "TrainingRuntimeNotFound")
        assert event["type"] == "Warning"
        assert tj.pods("early") == {}

        tj.apply(runtime("late-runtime"))
        wait_pods(tj, "early", 1)
        tj.wait(
            "early",
            lambda s: not any(c["type"] == "Created" for c in s.get("conditions") or []),
            what="the waiting condition removed",
        )
        tj.finish("early-node-0-0", 0)
        tj.wait_condition("early", "Complete")


def test_trainer_pod_exiting_non_zero_fails_the_trainjob(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    with explained(op):
        tj.apply(runtime("plain"))
        tj.apply(trainjob("crash", "plain", nodes=2))
        wait_pods(tj, "crash", 2)
        tj.finish("crash-node-0-1", 3)
        status = tj.wait_condition("crash", "Failed")
        failed = {c["type"]: c for c in status["conditions"]}["Failed"]
        assert failed["reason"] == "FailedJobs"
        assert failed["message"].startswith("jobset failed due to one or more job failures")
        assert "crash-node-0-1" in failed["message"]
        assert "3" in failed["message"]
        assert not any(c["type"] == "Complete" for c in status["conditions"])
        tj.wait_stage("crash", "Completed")
        # cleanPodPolicy Running: the pod still running goes, the failed one and the headless
        # Service stay (JobSet deletes its Service only with itself).
        tj.wait(
            "crash",
            lambda _: sorted(tj.pods("crash")) == ["crash-node-0-1"],
            what="only the failed pod left",
        )
        assert list(tj.owned("services", "crash")) == ["crash"]


def test_suspend_then_unsuspend_kueue_style(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    with explained(op):
        tj.apply(runtime("plain"))
        tj.apply(trainjob("held", "plain", nodes=2, suspend=True))
        status = tj.wait_condition("held", "Suspended")
        suspended = {c["type"]: c for c in status["conditions"]}["Suspended"]
        assert (suspended["reason"], suspended["message"]) == ("Suspended", "TrainJob is suspended")
        assert tj.pods("held") == {}

        crds_installed.kubectl(
            "patch",
            "trainjobs.trainer.kubeflow.org",
            "held",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"suspend":false}}',
        )
        wait_pods(tj, "held", 2)
        status = tj.wait_condition("held", "Suspended", "False")
        resumed = {c["type"]: c for c in status["conditions"]}["Suspended"]
        assert (resumed["reason"], resumed["message"]) == ("Resumed", "TrainJob is resumed")
        for name in tj.pods("held"):
            tj.finish(name, 0)
        tj.wait_condition("held", "Complete")


def test_initializer_runs_first_and_a_failing_one_fails_the_trainjob(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    rt = runtime("staged")
    init = {
        "name": "dataset-initializer",
        "template": {
            "metadata": {"labels": {f"{GROUP}/trainjob-ancestor-step": "dataset-initializer"}},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "dataset-initializer", "image": "busybox"}],
                    }
                }
            },
        },
    }
    jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    jobs[0]["dependsOn"] = [{"name": "dataset-initializer", "status": "Complete"}]
    jobs.insert(0, init)
    dataset = {"dataset": {"storageUri": "hf://org/data"}}
    init_pod = "good-dataset-initializer-0-0"
    with explained(op):
        tj.apply(rt)
        tj.apply(trainjob("good", "staged", nodes=1, initializer=dataset))
        pods = wait_pods(tj, "good", 1)
        assert list(pods) == ["good-dataset-initializer-0-0"], "initializer first, alone"
        env = env_of(pods["good-dataset-initializer-0-0"]["spec"]["containers"][0])
        assert env["STORAGE_URI"] == "hf://org/data"
        tj.finish("good-dataset-initializer-0-0", 0)
        wait_for(
            lambda: tj.phases("good"),
            lambda p: p == {init_pod: "Succeeded", "good-node-0-0": "Running"},
            timeout=TIMEOUT,
            what="the trainer pod after the initializer",
        )
        tj.finish("good-node-0-0", 0)
        tj.wait_condition("good", "Complete")

        tj.apply(trainjob("bad", "staged", nodes=1, initializer=dataset))
        wait_pods(tj, "bad", 1)
        tj.finish("bad-dataset-initializer-0-0", 1)
        status = tj.wait_condition("bad", "Failed")
        failed = {c["type"]: c for c in status["conditions"]}["Failed"]
        assert failed["reason"] == "FailedJobs"
        assert "bad-dataset-initializer-0-0" in failed["message"]
        assert "bad-node-0-0" not in tj.pods("bad")


def test_mpi_distributed_example_hostfile_ssh_and_launcher_success(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    job = "mpi-pi"
    with explained(op):
        tj.apply_example("trainjob", "mpi-distributed-runtime.yaml")
        tj.apply_example("trainjob", "trainjob-mpi.yaml")
        pods = wait_pods(tj, job, 2)
        assert sorted(pods) == [f"{job}-launcher-0-0", f"{job}-node-0-0"]
        hostfile = tj.owned("configmaps", job)[f"{job}-mpi-hostfile"]["data"]["hostfile"]
        assert hostfile == (f"{job}-launcher-0-0.{job} slots=2\n{job}-node-0-0.{job} slots=2\n"), (
            "runLauncherAsNode: the launcher is the first host"
        )
        secret = tj.owned("secrets", job)[f"{job}-mpi-ssh-auth"]
        assert {"ssh-privatekey", "ssh-publickey"} <= set(secret["data"])
        launcher = pods[f"{job}-launcher-0-0"]["spec"]["containers"][0]
        env = env_of(launcher)
        assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        assert env["OMPI_MCA_orte_set_default_slots"] == "2"

        tj.finish(f"{job}-launcher-0-0", 0)
        status = tj.wait_condition(job, "Complete")
        jobs = {j["name"]: j for j in status["jobsStatus"]}
        assert jobs["launcher"]["succeeded"] == 1


def test_elastic_torch_grows_and_shrinks_next_to_a_trainingjob(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    world = World(crds_installed, namespace)
    rt = runtime("elastic")
    rt["spec"]["mlPolicy"] = {
        "torch": {"numProcPerNode": "auto", "elasticPolicy": {"minNodes": 1, "maxNodes": 4}}
    }
    job = trainjob("el", "elastic")
    del job["spec"]["trainer"]["numNodes"]

    def nodes() -> list[str]:
        return sorted(tj.phases("el"))

    def expect(n: int, what: str) -> None:
        want = [f"el-node-0-{i}" for i in range(n)]
        wait_for(
            lambda: {k: v for k, v in tj.phases("el").items() if v == "Running"},
            lambda p: sorted(p) == want and nodes() == want,
            timeout=TIMEOUT,
            what=what,
        )

    with explained(op):
        tj.apply(rt)
        tj.apply(job)
        expect(4, "the elastic TrainJob grown to 4 nodes")
        env = env_of(tj.pods("el")["el-node-0-0"]["spec"]["containers"][0])
        assert env["PET_NNODES"] == "1:4"
        assert env["PET_RDZV_BACKEND"] == "c10d"

        world.apply(trainingjob("t", min_size=2, max_size=2))
        world.expect({"t": 2}, what="the TrainingJob admitted")
        expect(2, "the elastic TrainJob shrunk to 2 (highest indices removed)")

        crds_installed.kubectl("delete", "trainingjob", "t", "-n", namespace)
        expect(4, "the elastic TrainJob grown back to 4")
        assert "Failed" not in tj.conditions("el")
