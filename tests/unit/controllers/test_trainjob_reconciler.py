"""The generic reconciler driving TrainJob (``harness.World``): waiting for a runtime
(Created=False, an event, no pods, level-triggered start), the runtime pinned in
``<tj>-runtime`` once the job gets pods, initializer staging (trainer pods only after every
initializer Succeeded, Succeeded initializers kept at size 0, a failed initializer fails the
job), Trainer's status (metav1 ``Suspended``/``Complete``/``Failed``, ``jobsStatus``, no
Kubeflow ``Created``/``Running``), and preemption back to waiting without failing.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from lattice.frameworks.base import OperatorContext
from lattice.frameworks.trainjob import TrainJobPlugin
from lattice.scheduler.loop.terminal import terminal_fields
from tests.unit.controllers.harness import Context, World

Obj = dict[str, Any]
PLUGIN = TrainJobPlugin()


def runtime(*, initializer: bool = False, image: str = "node:1") -> Obj:
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
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt"},
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [*jobs, rjob("node", "trainer")]}},
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
