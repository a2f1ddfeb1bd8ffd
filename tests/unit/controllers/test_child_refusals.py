"""Children the apiserver refuses to create (issue 26, item 2), against the in-memory API.

A 403 or a 409 clash shows as ``Created=False``/``ChildCreateRefused`` with the apiserver's
message and a growing retry delay, never an exception; it clears once the creates are
accepted; a clash never adopts and warns the other owner; a namespace being deleted stops the
reconcile quietly; an MPIJob's launcher waits for every worker; a priority beyond 1e9 is Wrong.
"""

from __future__ import annotations

from typing import Any

import pytest

from lattice.controllers.children import namespace_gone
from lattice.controllers.job import refusal_retry
from lattice.frameworks.mpijob import MPIJobPlugin
from lattice.frameworks.mxjob import MXJobPlugin
from lattice.frameworks.refusals import CHILD_CREATE_REFUSED, refusal_of
from lattice.frameworks.trainingjob import TrainingJobPlugin
from lattice.kube import Forbidden, NotFound
from lattice.kube.resources import PODS
from lattice.primitives.objects import Obj
from lattice.primitives.times import parse_opt_time
from tests.support.matching import Call
from tests.unit.controllers.harness import NS, World
from tests.unit.controllers.test_job_reconciler import _trainingjob, mpijob, mxjob

NO_CLASS = 'pods "t-worker-0" is forbidden: no PriorityClass with name gold was found'


def _refusing(w: World, names: set[str], error: Exception) -> list[str]:
    """Make ``w``'s server refuse the creates of ``names`` with ``error`` until the list is
    cleared."""
    refusing = sorted(names)

    def refuse(call: Call) -> None:
        if call.name in refusing:
            raise error

    w.client.before("create", refuse)
    return refusing


def _created(w: World, name: str) -> Obj:
    return w.conditions(name)["Created"]


async def test_a_403_is_shown_with_the_apiservers_message_and_retried_not_raised() -> None:
    w = World(TrainingJobPlugin())
    w.apply(_trainingjob("t"), size=1)
    refusing = _refusing(w, {"t-worker-0"}, Forbidden(403, "Forbidden", NO_CLASS))
    result = await w.reconcile("t")
    created = _created(w, "t")
    assert (created["status"], created["reason"]) == ("False", CHILD_CREATE_REFUSED)
    assert NO_CLASS in created["message"]
    assert result.requeue_after == 1.0
    warned = [e for e in w.recorder.events if e.reason == CHILD_CREATE_REFUSED]
    assert [e.type for e in warned] == ["Warning"]
    since = created["lastTransitionTime"]

    await w.clock.advance(20)
    result = await w.reconcile("t")
    assert result.requeue_after == 10.0, "half the time refused so far"
    assert _created(w, "t")["lastTransitionTime"] == since, "the refusal keeps its start"
    assert len([e for e in w.recorder.events if e.reason == CHILD_CREATE_REFUSED]) == 1

    refusing.clear()
    result = await w.reconcile("t")
    created = _created(w, "t")
    assert (created["status"], created["reason"]) == ("True", "TrainingJobCreated")
    assert w.names("pods") == ["t-worker-0"]
    assert w.recorder.reasons().count("TrainingJobCreated") <= 1, "created once, not twice"


async def test_a_refusal_is_cleared_when_the_job_holds_no_pods() -> None:
    w = World(TrainingJobPlugin())
    w.apply(_trainingjob("t"), size=1)
    _refusing(w, {"t-worker-0"}, Forbidden(403, "Forbidden", NO_CLASS))
    await w.reconcile("t")
    assert refusal_of(w.exec_status("t")) is not None
    w.grant("t", 0, stage="RequeueCooldown")
    await w.reconcile("t")
    assert refusal_of(w.exec_status("t")) is None, "a requeued job starts afresh"


async def test_a_changed_cause_updates_the_message() -> None:
    w = World(TrainingJobPlugin())
    w.apply(_trainingjob("t"), size=1)
    no_class = _refusing(w, {"t-worker-0"}, Forbidden(403, "Forbidden", NO_CLASS))
    await w.reconcile("t")
    no_class.clear()  # the cause changes: now the quota refuses the same creates
    _refusing(w, {"t-worker-0"}, Forbidden(403, "Forbidden", "exceeded quota: gpus"))
    await w.reconcile("t")
    assert "exceeded quota: gpus" in _created(w, "t")["message"]


async def test_a_name_taken_by_another_job_is_never_adopted_and_both_are_told() -> None:
    w = World(TrainingJobPlugin())
    other = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "t"}
    foreign = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "t-worker-0",
            "namespace": NS,
            "ownerReferences": [{**other, "uid": "mpi-uid", "controller": True}],
        },
        "spec": {"containers": [{"name": "c", "image": "i:1"}]},
    }
    foreign = w.put("pods", foreign)
    w.apply(_trainingjob("t"), size=1)
    result = await w.reconcile("t")
    created = _created(w, "t")
    assert created["reason"] == CHILD_CREATE_REFUSED
    assert "is controlled by MPIJob" in created["message"]
    assert result.requeue_after is not None
    clash = [e for e in w.recorder.events if e.reason == "ChildNameClash"]
    assert [e.about for e in clash] == ["MPIJob/t"]
    assert "TrainingJob" in clash[0].note
    assert w.get_obj("pods", "t-worker-0") == foreign, "never adopted nor changed"


async def test_a_namespace_being_deleted_stops_the_reconcile_quietly() -> None:
    w = World(TrainingJobPlugin())
    w.apply(_trainingjob("t"), size=1)
    await w.reconcile("t")
    before = w.job("t")
    await w.client.delete(PODS, "t-worker-0", namespace=NS)  # someone deletes the pod
    terminating = Forbidden(
        403,
        "Forbidden",
        f'pods "t-worker-0" is forbidden: unable to create new content in namespace {NS} '
        "because it is being terminated",
    )
    _refusing(w, {"t-worker-0"}, terminating)
    result = await w.reconcile("t")
    assert result.requeue_after is None
    assert w.job("t")["status"] == before["status"], "nothing written"
    assert CHILD_CREATE_REFUSED not in w.recorder.reasons()


def test_namespace_gone_reads_the_apiservers_words() -> None:
    gone = NotFound(
        404, "NotFound", 'namespaces "x" not found', body={"details": {"kind": "namespaces"}}
    )
    assert namespace_gone(gone)
    assert not namespace_gone(NotFound(404, "NotFound", 'pods "p" not found'))
    assert not namespace_gone(Forbidden(403, "Forbidden", NO_CLASS))


@pytest.mark.parametrize(("elapsed", "delay"), [(0, 1.0), (1, 1.0), (8, 4.0), (600, 30.0)])
def test_refused_creates_are_retried_sooner_at_first(elapsed: float, delay: float) -> None:
    assert refusal_retry(elapsed) == delay


async def test_an_mpijob_launcher_waits_for_every_worker() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(), size=3)
    refusing = _refusing(w, {"pi-worker-1"}, Forbidden(403, "Forbidden", "no such account"))
    for _ in range(3):
        await w.reconcile("pi")
    assert w.names("pods") == ["pi-worker-0"]
    assert w.names("jobs") == [], "no launcher while a worker is refused"
    assert _created(w, "pi")["reason"] == CHILD_CREATE_REFUSED
    refusing.clear()
    await w.reconcile("pi")
    await w.reconcile("pi")
    assert w.names("jobs") == ["pi-launcher"]
    assert _created(w, "pi")["status"] == "True"


async def test_a_priority_beyond_the_cap_makes_an_mpijob_wrong_naming_the_field() -> None:
    w = World(MPIJobPlugin())
    job = mpijob()
    job["metadata"]["annotations"] = {"lattice.breezeml.ai/priority": str(2**40)}
    w.apply(job, size=3)
    await w.reconcile("pi")
    conds = w.conditions("pi")
    assert "Failed" not in conds, "an invalid job is not failed: it is judged again"
    failed = conds["Created"]
    assert (failed["status"], failed["reason"]) == ("False", "MPIJobFailedValidation")
    assert "metadata.annotations[lattice.breezeml.ai/priority]" in failed["message"]
    assert "1000000000" in failed["message"]
    assert w.names("pods") == []


def test_refusal_of_reads_only_a_false_refused_created_condition() -> None:
    when = "2026-11-26T05:00:00Z"
    refused = {"type": "Created", "status": "False", "reason": CHILD_CREATE_REFUSED}
    block = {"conditions": [{**refused, "message": "m", "lastTransitionTime": when}]}
    got = refusal_of(block)
    assert got is not None
    assert (got.since, got.message) == (parse_opt_time(when), "m")
    assert (
        refusal_of({"conditions": [{**refused, "status": "True", "lastTransitionTime": when}]})
        is None
    )
    other = {**refused, "reason": "RuntimeNotFound", "lastTransitionTime": when}
    assert refusal_of({"conditions": [other]}) is None
    assert refusal_of({}) is None


@pytest.mark.parametrize("plugin", [MPIJobPlugin(), MXJobPlugin()], ids=["MPIJob", "MXJob"])
async def test_ignored_scheduling_policy_fields_warn_once_per_generation(plugin: Any) -> None:
    """Issue 23: the PodGroup fields of runPolicy.schedulingPolicy are ignored (Lattice gangs the
    job itself); each one is named in a Warning Event IgnoredField, once per generation, after
    the status write. priorityClass is used, so it is not named."""
    w = World(plugin)
    job = mpijob() if isinstance(plugin, MPIJobPlugin) else mxjob()
    job["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {
        "minAvailable": 2,
        "queue": "q",
        "priorityClass": "high",
    }
    name = job["metadata"]["name"]
    w.apply(job, size=0)
    await w.reconcile(name)
    ignored = [e for e in w.recorder.events if e.reason == "IgnoredField"]
    assert [(e.type, e.note.split(":")[0]) for e in ignored] == [
        ("Warning", "spec.runPolicy.schedulingPolicy.minAvailable"),
        ("Warning", "spec.runPolicy.schedulingPolicy.queue"),
    ]
    assert ("patch/status", w.res.kind, name) in w.calls, "after the status write"
    await w.reconcile(name)
    assert sum(e.reason == "IgnoredField" for e in w.recorder.events) == 2, "once per generation"
    w.edit_spec(name, lambda s: s["runPolicy"]["schedulingPolicy"].update(queue="r"))
    await w.reconcile(name)
    assert sum(e.reason == "IgnoredField" for e in w.recorder.events) == 4
