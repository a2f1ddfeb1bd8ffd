"""TrainJob lifecycle end to end (issue 23): the operator process, kwok nodes.

1. ``dependsOn``: a trainer ``dependsOn`` its dataset initializer (Complete) is created only once
   the initializer Succeeded.
2. ``runtimePatches``: a manager's patch (labels, annotations, tolerations, a container's env) is
   on the trainer pods, and not on the initializer's.
3. ``activeDeadlineSeconds``: a running TrainJob past its deadline is ``Failed``
   (``DeadlineExceeded``) and its pods are gone.
4. JobSet ``failurePolicy.maxRestarts: 1``: the first failed pod recreates every pod as attempt
   1 (``status.restarts``, the ``restart-attempt`` label); the next failure fails the TrainJob
   (``ReachedMaxRestarts``).
Pods finish through kwok (``kwok.lattice.breezeml.ai/exit-code``).
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_mpijob import FLAGS, TIMEOUT, env_of
from tests.e2e.test_trainjob import GROUP, runtime, trainjob, trainjobs, wait_pods
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"


def staged_runtime(name: str) -> dict[str, Any]:
    """``runtime(name)`` with a dataset initializer the trainer dependsOn (Complete)."""
    rt = runtime(name)
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
    return rt


def test_depends_on_creates_the_trainer_after_the_initializer_completed(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    init = "dep-dataset-initializer-0-0"
    with explained(op):
        tj.apply(staged_runtime("staged"))
        tj.apply(trainjob("dep", "staged", nodes=2))
        pods = wait_pods(tj, "dep", 1)
        assert list(pods) == [init], "the trainer waits for its dependency"
        tj.finish(init, 0)
        wait_for(
            lambda: tj.phases("dep"),
            lambda p: (
                p == {init: "Succeeded", "dep-node-0-0": "Running", "dep-node-0-1": "Running"}
            ),
            timeout=TIMEOUT,
            what="the trainer pods once the initializer completed",
        )


def test_a_runtime_patch_is_on_the_pods_of_its_target_job(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    pod_patch = {
        "metadata": {"labels": {"team": "vision"}, "annotations": {"patched-by": "kueue"}},
        "spec": {
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "node", "env": [{"name": "FROM_PATCH", "value": "yes"}]}],
        },
    }
    patches = [
        {
            "manager": "kueue.x-k8s.io/manager",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": "node", "template": {"spec": {"template": pod_patch}}}
                        ]
                    }
                }
            },
        }
    ]
    with explained(op):
        tj.apply(staged_runtime("patched"))
        tj.apply(trainjob("pt", "patched", nodes=1, runtimePatches=patches))
        init = wait_pods(tj, "pt", 1)["pt-dataset-initializer-0-0"]
        assert "team" not in init["metadata"]["labels"], "only the target job is patched"
        tj.finish("pt-dataset-initializer-0-0", 0)
        pods = wait_for(
            lambda: tj.pods("pt"),
            lambda p: "pt-node-0-0" in p,
            timeout=TIMEOUT,
            what="the patched trainer pod",
        )
        node: dict[str, Any] = pods["pt-node-0-0"]
        assert node["metadata"]["labels"]["team"] == "vision"
        assert node["metadata"]["annotations"]["patched-by"] == "kueue"
        assert {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"} in node["spec"][
            "tolerations"
        ]
        assert env_of(node["spec"]["containers"][0])["FROM_PATCH"] == "yes"


def test_active_deadline_fails_a_running_trainjob(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    with explained(op):
        tj.apply(runtime("plain"))
        tj.apply(trainjob("late", "plain", nodes=2, activeDeadlineSeconds=3))
        status = tj.wait_condition("late", "Failed")
        failed = {c["type"]: c for c in status["conditions"]}["Failed"]
        assert (failed["reason"], failed["message"]) == (
            "DeadlineExceeded",
            "TrainJob exceeded its active deadline",
        )
        wait_for(lambda: tj.pods("late"), lambda p: p == {}, timeout=TIMEOUT, what="pods gone")


def test_failure_policy_restarts_once_then_fails_at_max_restarts(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    tj = trainjobs(crds_installed, namespace)
    rt = runtime("restarting")
    rt["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 1}

    def attempts() -> dict[str, str]:
        return {
            name: pod["metadata"]["labels"][ATTEMPT]
            for name, pod in tj.pods("rs").items()
            if (pod.get("status") or {}).get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
        }

    with explained(op):
        tj.apply(rt)
        tj.apply(trainjob("rs", "restarting", nodes=2))
        wait_pods(tj, "rs", 2)
        assert attempts() == {"rs-node-0-0": "0", "rs-node-0-1": "0"}
        tj.finish("rs-node-0-1", 1)
        wait_for(
            attempts,
            lambda a: a == {"rs-node-0-0": "1", "rs-node-0-1": "1"},
            timeout=TIMEOUT,
            what="every pod recreated as attempt 1",
        )
        status = tj.status("rs")
        assert (status["restarts"], status["restartsCountTowardsMax"]) == (1, 1)
        assert "Failed" not in tj.conditions("rs")

        tj.finish("rs-node-0-0", 2)
        status = tj.wait_condition("rs", "Failed")
        failed = {c["type"]: c for c in status["conditions"]}["Failed"]
        assert failed["reason"] == "ReachedMaxRestarts"
        assert "rs-node-0-0" in failed["message"]
