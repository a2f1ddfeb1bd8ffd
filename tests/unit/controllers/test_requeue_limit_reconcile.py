"""What the reconciler shows for the scheduler's decisions (issue 25, items 2 and 5): a job the
requeue limit failed gets its kind's ``Failed`` condition, a Warning event and loses its pods; a
preempted job's last condition (the State column) is never Running; a TrainingJob's conditions
are where ``kubectl wait --for=condition=...`` reads them."""

from __future__ import annotations

from lattice.frameworks.mxjob import MXJobPlugin
from lattice.frameworks.trainingjob import TrainingJobPlugin
from lattice.primitives.objects import Obj
from lattice.scheduler.loop.terminal import terminal_fields
from tests.unit.controllers.harness import World, merge
from tests.unit.controllers.test_job_reconciler import MX_PODS, events, mxjob, running

MESSAGE = (
    "requeued 2 times for pods that could not start (limit 2); pending again for 5m0s; "
    "last message from kube-scheduler: 0/4 nodes are available: 4 Insufficient cpu."
)


def _fail(w: World, name: str, *, path: tuple[str, ...]) -> None:
    """The scheduler's write of a job past its requeue limit."""
    obj = w.job(name)
    block: Obj = {
        "stage": "Failed",
        "currentSize": 0,
        "reason": "RequeueLimitExceeded",
        "message": MESSAGE,
        "placement": None,
    }
    for step in reversed(path[1:]):
        block = {step: block}
    obj["status"] = merge(obj.get("status") or {}, block)
    w.put(w.res.plural, obj)


async def test_a_job_past_its_requeue_limit_fails_with_the_schedulers_message() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS
    _fail(w, "mx", path=("status", "lattice"))
    await w.reconcile("mx")
    conds = w.conditions("mx")
    failed = conds["Failed"]
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "RequeueLimitExceeded",
        MESSAGE,
    )
    assert (conds["Running"]["status"], conds["Running"]["reason"]) == ("False", "MXJobRunning")
    assert w.exec_status("mx")["completionTime"]
    # A Warning, although MXJob words its own failures as Normal events (as upstream).
    assert events(w, "RequeueLimitExceeded") == [("Warning", MESSAGE)]
    assert w.names("pods") == []
    assert w.names("services") == []
    assert w.sample("training_operator_jobs_failed_total", job_namespace="ns", framework="mxnet")
    # The scheduler keeps its stage from the condition, and nothing more happens.
    fields = terminal_fields(w.job("mx"), w.plugin)
    assert fields is not None
    assert (fields["stage"], fields["reason"], fields["message"]) == (
        "Failed",
        "RequeueLimitExceeded",
        MESSAGE,
    )
    written = len(w.calls)
    await w.reconcile("mx")
    assert len(w.calls) == written
    assert len(events(w, "RequeueLimitExceeded")) == 1


async def test_a_preempted_job_shows_suspended_last_never_running() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    await w.reconcile("mx")
    assert w.job("mx")["status"]["conditions"][-1]["type"] == "Running"
    w.grant("mx", 0)
    await w.reconcile("mx")
    last = w.job("mx")["status"]["conditions"][-1]
    assert (last["type"], last["status"], last["reason"]) == ("Suspended", "True", "Preempted")
    await w.reconcile("mx")
    assert w.job("mx")["status"]["conditions"][-1]["type"] == "Suspended"


def _trainingjob() -> Obj:
    container = {"name": "trainingjob", "image": "t:1", "command": ["python", "main.py"]}
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": "t"},
        "spec": {
            "minSize": 1,
            "maxSize": 2,
            "replicaSpecs": {"template": {"spec": {"containers": [container]}}},
        },
    }


async def test_a_trainingjob_shows_its_conditions_at_status_conditions() -> None:
    w = World(TrainingJobPlugin())
    w.apply(_trainingjob(), size=1)
    await w.reconcile("t")
    status = w.job("t")["status"]
    assert [c["type"] for c in status["conditions"]] == ["Created"]
    assert status["conditions"] == status["execStatus"]["conditions"]
    w.set_pod("t-worker-0", "Running")
    await w.reconcile("t")
    w.set_pod("t-worker-0", "Succeeded", exit_code=0)
    await w.reconcile("t")
    status = w.job("t")["status"]
    assert status["conditions"] == status["execStatus"]["conditions"]
    types = {c["type"]: c["status"] for c in status["conditions"]}
    assert types["Succeeded"] == "True"
    assert types["Running"] == "False"
    assert status["conditions"][-1]["type"] == "Succeeded"


async def test_a_trainingjob_past_its_requeue_limit_fails_at_status_conditions_too() -> None:
    w = World(TrainingJobPlugin())
    w.apply(_trainingjob(), size=1)
    await w.reconcile("t")
    _fail(w, "t", path=("status",))
    await w.reconcile("t")
    status = w.job("t")["status"]
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "RequeueLimitExceeded",
        MESSAGE,
    )
    assert status["stage"] == "Failed", "the scheduler's block is left alone"
    assert w.names("pods") == []
