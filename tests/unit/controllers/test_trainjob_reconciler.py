"""The generic reconciler driving TrainJob (``harness.World``): waiting for a runtime
(Created=False, an event, no pods, level-triggered start), the runtime pinned in
``<tj>-runtime`` once the job gets pods, initializer staging (trainer pods, which dependsOn the
initializer, only after it Succeeded; Succeeded initializers kept at size 0; a failed initializer
fails the job), Trainer's status (metav1 ``Suspended``/``Complete``/``Failed``, ``jobsStatus``, no
Kubeflow ``Created``/``Running``), preemption back to waiting without failing, and the lifecycle
of issue 23: JobSet failurePolicy restarts (attempts, stale pods, rules, maxRestarts),
activeDeadlineSeconds from admission, and the IgnoredField warning.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from lattice.controllers.job import ChildSyncError
from lattice.frameworks.base import OperatorContext
from lattice.frameworks.trainjob import TrainJobPlugin
from lattice.kube.errors import ServerError
from lattice.primitives.objects import Obj
from lattice.primitives.times import format_time
from lattice.scheduler.loop.terminal import terminal_fields
from tests.unit.controllers.harness import Context, World

PLUGIN = TrainJobPlugin()


def runtime(*, initializer: bool = False, image: str = "node:1", **template: Any) -> Obj:
    def rjob(name: str, step: str) -> Obj:
        spec = {"restartPolicy": "Never", "containers": [{"name": name, "image": image}]}
        return {
            "name": name,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
                "spec": {"template": {"spec": spec}},
            },
        }

    jobs = [rjob("dataset-initializer", "dataset-initializer")] if initializer else []
    node = rjob("node", "trainer")
    if initializer:  # as the official runtimes order them
        node["dependsOn"] = [{"name": "dataset-initializer", "status": "Complete"}]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt"},
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [*jobs, node], **template}},
        },
    }


def trainjob(name: str = "tj", **spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "generation": 1},
        "spec": {"runtimeRef": {"name": "rt"}, **spec},
    }


def with_runtimes(w: World, *runtimes: Obj) -> None:
    ctx = dataclasses.replace(
        w.ctx, runtimes={f"ClusterTrainingRuntime//{r['metadata']['name']}": r for r in runtimes}
    )
    w.reconciler._context = Context(ctx)  # the runtime informers changed


def world(*runtimes: Obj) -> World:
    w = World(PLUGIN, ctx=OperatorContext(scheduling_unit="node"))
    with_runtimes(w, *runtimes)
    return w


def events(w: World, reason: str) -> list[tuple[str, str]]:
    return [(e.type, e.note) for e in w.recorder.events if e.reason == reason]


async def test_waits_for_its_runtime_then_starts_and_pins_it() -> None:
    w = world()
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    created = w.conditions("tj")["Created"]
    assert (created["status"], created["reason"]) == ("False", "ClusterTrainingRuntimeNotFound")
    assert '"rt"' in created["message"]
    assert events(w, "ClusterTrainingRuntimeNotFound") == [("Warning", created["message"])]
    assert w.names("pods") == []
    await w.reconcile("tj")
    assert len(events(w, "ClusterTrainingRuntimeNotFound")) == 1, "no repeated event"

    with_runtimes(w, runtime())
    await w.reconcile("tj")
    assert w.names("pods") == ["tj-node-0-0", "tj-node-0-1"]
    assert "Created" not in w.conditions("tj"), "the waiting condition is removed"
    pin = w.get_obj("configmaps", "tj-runtime")
    assert json.loads(pin["data"]["runtime.json"])["metadata"]["name"] == "rt"
    assert (
        pin["metadata"]["annotations"]["trainer.kubeflow.org/runtime-hash"] == pin["data"]["hash"]
    )

    # Editing, then deleting, the runtime changes nothing for the started job.
    with_runtimes(w, runtime(image="edited:2"))
    for name in ("tj-node-0-0", "tj-node-0-1"):
        w.set_pod(name, "Running")
    await w.reconcile("tj")
    with_runtimes(w)
    await w.reconcile("tj")
    assert "Created" not in w.conditions("tj")
    assert w.names("pods") == ["tj-node-0-0", "tj-node-0-1"]
    assert (
        json.loads(w.get_obj("configmaps", "tj-runtime")["data"]["runtime.json"])["spec"][
            "template"
        ]
        == runtime()["spec"]["template"]
    )


async def test_completes_with_trainer_conditions_and_jobs_status() -> None:
    w = world(runtime())
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    for name in ("tj-node-0-0", "tj-node-0-1"):
        w.set_pod(name, "Running")
    await w.reconcile("tj")
    status = w.status("tj")
    assert status.get("conditions", []) == [], "no Kubeflow Created/Running for TrainJob"
    (node,) = status["jobsStatus"]
    assert (node["name"], node["active"], node["ready"]) == ("node", 1, 1)
    for name in ("tj-node-0-0", "tj-node-0-1"):
        w.set_pod(name, "Succeeded")
    await w.reconcile("tj")
    conds = w.conditions("tj")
    assert set(conds) == {"Complete"}
    complete = conds["Complete"]
    assert (complete["status"], complete["reason"], complete["message"]) == (
        "True",
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    assert complete["observedGeneration"] == 1
    assert w.status("tj")["jobsStatus"][0]["succeeded"] == 1
    # The scheduler, the one writer of status.lattice, writes Completed from these conditions.
    assert w.status("tj")["lattice"]["stage"] == "Running"
    assert (terminal_fields(w.job("tj"), w.plugin) or {}).get("stage") == "Completed"


async def test_initializers_run_first_and_succeeded_ones_are_kept() -> None:
    w = world(runtime(initializer=True))
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    assert w.names("pods") == ["tj-dataset-initializer-0-0"]
    w.set_pod("tj-dataset-initializer-0-0", "Running")
    await w.reconcile("tj")
    assert w.names("pods") == ["tj-dataset-initializer-0-0"]
    w.set_pod("tj-dataset-initializer-0-0", "Succeeded")
    await w.reconcile("tj")
    assert w.names("pods") == ["tj-dataset-initializer-0-0", "tj-node-0-0", "tj-node-0-1"]
    for name in ("tj-node-0-0", "tj-node-0-1"):
        w.set_pod(name, "Running")
    await w.reconcile("tj")

    w.grant("tj", 0)  # preempted by the scheduler
    await w.reconcile("tj")
    assert w.names("pods") == ["tj-dataset-initializer-0-0"], "the Succeeded initializer stays"
    suspended = w.conditions("tj")["Suspended"]
    assert (suspended["status"], suspended["reason"]) == ("True", "Preempted")
    assert "Failed" not in w.conditions("tj")
    await w.reconcile("tj")
    assert w.conditions("tj")["Suspended"]["reason"] == "Preempted"

    w.grant("tj", 2)
    await w.reconcile("tj")
    assert w.names("pods") == ["tj-dataset-initializer-0-0", "tj-node-0-0", "tj-node-0-1"]
    suspended = w.conditions("tj")["Suspended"]
    assert (suspended["status"], suspended["reason"]) == ("False", "Resumed")


async def test_a_failed_initializer_fails_the_trainjob() -> None:
    w = world(runtime(initializer=True))
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    w.set_pod("tj-dataset-initializer-0-0", "Failed", exit_code=2)
    await w.reconcile("tj")
    failed = w.conditions("tj")["Failed"]
    assert (failed["status"], failed["reason"]) == ("True", "FailedJobs")
    assert "tj-dataset-initializer-0-0" in failed["message"]
    assert w.names("pods") == ["tj-dataset-initializer-0-0"], "no trainer pods ever"


async def test_user_suspension_uses_trainer_reasons() -> None:
    w = world(runtime())
    w.apply(trainjob(suspend=True), size=0)
    await w.reconcile("tj")
    suspended = w.conditions("tj")["Suspended"]
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "True",
        "Suspended",
        "TrainJob is suspended",
    )
    assert w.names("pods") == []
    w.edit_spec("tj", lambda s: s.update(suspend=False))
    w.grant("tj", 2)
    await w.reconcile("tj")
    suspended = w.conditions("tj")["Suspended"]
    assert (suspended["status"], suspended["reason"]) == ("False", "Resumed")
    assert w.names("pods") == ["tj-node-0-0", "tj-node-0-1"]


# --------------------------------------------------------------------- lifecycle (issue 23)


def attempts(w: World) -> dict[str, str]:
    return {
        name: w.get_obj("pods", name)["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"]
        for name in w.names("pods")
    }


async def test_failure_policy_restarts_every_pod_then_fails_at_max_restarts() -> None:
    w = world(runtime(failurePolicy={"maxRestarts": 1}))
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    assert attempts(w) == {"tj-node-0-0": "0", "tj-node-0-1": "0"}
    w.set_pod("tj-node-0-0", "Running")
    w.set_pod("tj-node-0-1", "Failed", exit_code=1)
    await w.reconcile("tj")  # restart 1: every pod goes, the count is written first
    assert "Failed" not in w.conditions("tj")
    assert (w.exec_status("tj")["restarts"], w.exec_status("tj")["restartsCountTowardsMax"]) == (
        1,
        1,
    )
    assert w.names("pods") == []
    await w.reconcile("tj")
    assert attempts(w) == {"tj-node-0-0": "1", "tj-node-0-1": "1"}

    w.set_pod("tj-node-0-0", "Failed", exit_code=3)
    await w.reconcile("tj")
    failed = w.conditions("tj")["Failed"]
    assert (failed["status"], failed["reason"]) == ("True", "ReachedMaxRestarts")
    assert failed["message"].startswith("jobset failed due to reaching max number of restarts")
    assert "tj-node-0-0" in failed["message"]
    assert "exited with code 3" in failed["message"]
    assert w.exec_status("tj")["restarts"] == 1


async def test_failure_policy_rules_fail_or_restart_without_counting() -> None:
    rules = [
        {"name": "init", "action": "FailJobSet", "targetReplicatedJobs": ["dataset-initializer"]},
        {"name": "any", "action": "RestartJobSetAndIgnoreMaxRestarts"},
    ]
    w = world(runtime(initializer=True, failurePolicy={"maxRestarts": 0, "rules": rules}))
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    w.set_pod("tj-dataset-initializer-0-0", "Succeeded")
    await w.reconcile("tj")
    w.set_pod("tj-node-0-1", "Failed", exit_code=1)
    await w.reconcile("tj")
    assert "Failed" not in w.conditions("tj"), "maxRestarts 0, but this rule does not count"
    assert w.exec_status("tj")["restarts"] == 1
    assert "restartsCountTowardsMax" not in w.exec_status("tj")
    await w.reconcile("tj")
    # JobSet recreates every Job: the initializer runs again and the trainer waits for it.
    assert attempts(w) == {"tj-dataset-initializer-0-0": "1"}
    w.set_pod("tj-dataset-initializer-0-0", "Failed", exit_code=2)
    await w.reconcile("tj")
    failed = w.conditions("tj")["Failed"]
    assert (failed["reason"], failed["message"][:41]) == (
        "FailJobSetFailurePolicyAction",
        "applying FailJobSet failure policy action",
    )


async def test_a_stale_pod_of_an_earlier_attempt_is_recreated_not_judged() -> None:
    w = world(runtime(failurePolicy={"maxRestarts": 5}))
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    w.set_pod("tj-node-0-0", "Running")
    w.set_pod("tj-node-0-1", "Failed", exit_code=1)
    w.client.fail("delete", ServerError(500, "InternalError", "etcd"), plural="pods", times=2)
    with pytest.raises(ChildSyncError):
        await w.reconcile("tj")  # restart 1 is written, but the old pods stay
    assert w.exec_status("tj")["restarts"] == 1
    assert attempts(w) == {"tj-node-0-0": "0", "tj-node-0-1": "0"}
    await w.reconcile("tj")
    assert w.exec_status("tj")["restarts"] == 1, "the stale failure restarts nothing more"
    assert w.exec_status("tj")["jobsStatus"][0]["failed"] == 0, "nor counts as a failed Job"
    assert w.names("pods") == []
    await w.reconcile("tj")
    assert attempts(w) == {"tj-node-0-0": "1", "tj-node-0-1": "1"}


def admit(w: World, size: int) -> None:
    """The scheduler grants ``size`` now (``admittedTime``, which a TrainJob's deadline counts
    from: Trainer stores no startTime)."""
    w.grant("tj", size)
    obj = w.job("tj")
    obj["status"]["lattice"]["admittedTime"] = format_time(w.clock.now())
    w.put(w.res.plural, obj)


async def test_active_deadline_fails_with_deadline_exceeded_and_requeues_at_it() -> None:
    w = world(runtime())
    w.apply(trainjob(activeDeadlineSeconds=60))
    admit(w, 2)
    result = await w.reconcile("tj")
    assert result.requeue_after == 60
    await w.clock.advance(45)
    assert (await w.reconcile("tj")).requeue_after == 15
    await w.clock.advance(15)
    await w.reconcile("tj")
    failed = w.conditions("tj")["Failed"]
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    assert w.names("pods") == [], "every pod is stopped"


async def test_a_job_waiting_for_capacity_does_not_spend_its_deadline() -> None:
    w = world(runtime())
    w.apply(trainjob(activeDeadlineSeconds=60), size=0)
    assert (await w.reconcile("tj")).requeue_after is None
    await w.clock.advance(600)
    admit(w, 2)
    assert (await w.reconcile("tj")).requeue_after == 60
    assert "Failed" not in w.conditions("tj")


async def test_an_ignored_pod_group_policy_is_told_once_as_a_warning() -> None:
    rt = runtime()
    rt["spec"]["podGroupPolicy"] = {"volcano": {}}
    w = world(rt)
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    await w.reconcile("tj")
    warned = events(w, "IgnoredField")
    assert len(warned) == 1
    kind, note = warned[0]
    assert kind == "Warning"
    assert note.startswith("spec.podGroupPolicy.volcano: ignored")


async def test_a_finished_trainjob_keeps_its_headless_service() -> None:
    # JobSet deletes its active Jobs when it finishes, never its Service: that goes with the
    # JobSet (here the TrainJob), or with its TTL.
    w = world(runtime())
    w.apply(trainjob(), size=2)
    await w.reconcile("tj")
    assert w.names("services") == ["tj"]
    w.set_pod("tj-node-0-0", "Running")
    w.set_pod("tj-node-0-1", "Failed")
    for _ in range(3):
        await w.reconcile("tj")
    assert w.conditions("tj")["Failed"]["status"] == "True"
    assert w.names("pods") == ["tj-node-0-1"], "the running pod is deleted, the failed one kept"
    assert w.names("services") == ["tj"]
