"""The generic reconciler driven through MPIJob and MXJob (and TrainingJob's wording), against
an in-memory API (``harness.World``): restarts charged to the backoffLimit and persisted before
the pods go, the deadline, preemption and suspension, the MPI launcher gate and the Running-
workers script, mpi-operator's clean-up, per-kind wording, events and metrics.
"""

from __future__ import annotations

from typing import Any

import pytest

from lattice.clock import yield_now
from lattice.controllers.job import ChildSyncError
from lattice.frameworks.mpijob import MPIJobPlugin
from lattice.frameworks.mxjob import MXJobPlugin
from lattice.frameworks.trainingjob import TrainingJobPlugin
from lattice.kube import Conflict, Invalid, TooManyRequests
from lattice.primitives.objects import Obj
from lattice.primitives.times import format_time
from lattice.scheduler.loop.terminal import terminal_fields
from tests.unit.controllers.harness import NS, World, merge


def mxjob(name: str = "mx", *, policy: str = "ExitCode", workers: int = 2, **run: Any) -> Obj:
    def replica(replicas: int, restart: str) -> Obj:
        container = {
            "name": "mxnet",
            "image": "mx:1",
            "ports": [{"name": "mxjob-port", "containerPort": 9091}],
        }
        return {
            "replicas": replicas,
            "restartPolicy": restart,
            "template": {"spec": {"containers": [container, {"name": "log", "image": "l:1"}]}},
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


def mpijob(name: str = "pi", *, workers: int = 2, run: Obj | None = None, **spec: Any) -> Obj:
    def replica(replicas: int, command: str) -> Obj:
        container = {"name": command, "image": "mpi:1", "command": [command]}
        return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": run or {},
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "mpiReplicaSpecs": {
                "Launcher": replica(1, "mpirun"),
                "Worker": replica(workers, "sshd"),
            },
            **spec,
        },
    }


def running(world: World, *names: str) -> None:
    for name in names:
        world.set_pod(name, "Running")


def events(world: World, reason: str) -> list[tuple[str, str]]:
    return [(e.type, e.note) for e in world.recorder.events if e.reason == reason]


MX_PODS = ["mx-scheduler-0", "mx-worker-0", "mx-worker-1"]


# --- MXJob: ExitCode restarts and the backoffLimit ---------------------------------------------


async def test_exit_code_137_recreates_the_pod_and_backoff_limit_ends_the_job() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(backoffLimit=1), size=3)
    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS
    assert w.conditions("mx")["Created"]["message"] == "MXJob mx is created."
    running(w, *MX_PODS)
    await w.reconcile("mx")
    assert w.conditions("mx")["Running"]["message"] == "MXJob mx is running."

    w.set_pod("mx-worker-1", "Failed", exit_code=137, container="mxnet")
    w.calls.clear()
    await w.reconcile("mx")
    restarting = w.conditions("mx")["Restarting"]
    assert (restarting["status"], restarting["reason"]) == ("True", "MXJobRestarting")
    assert restarting["message"] == "mxjob mx is restarting because 1 Worker replica(s) failed."
    assert "Running" not in w.conditions("mx"), "Running and Restarting exclude each other"
    assert events(w, "ExitedWithCode") == [
        ("Normal", f"Pod: {NS}.mx-worker-1 exited with code 137")
    ]
    assert events(w, "MXJobRestarting") == [("Warning", restarting["message"])]
    assert w.exec_status("mx")["replicaStatuses"]["Worker"]["failed"] == 1
    # The charged failure is written before the pod showing it is deleted.
    assert w.calls.index(("patch/status", "MXJob", "mx")) < w.calls.index(
        ("delete", "Pod", "mx-worker-1")
    )
    assert (
        w.sample("training_operator_jobs_restarted_total", job_namespace=NS, framework="mxnet") == 1
    )

    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS, "the pod is recreated under the same name"
    running(w, "mx-worker-1")
    await w.reconcile("mx")
    assert w.conditions("mx")["Running"]["status"] == "True"
    assert w.exec_status("mx")["replicaStatuses"]["Worker"]["failed"] == 1, "kept once replaced"

    w.set_pod("mx-worker-0", "Failed", exit_code=137, container="mxnet")
    await w.reconcile("mx")
    failed = w.conditions("mx")["Failed"]
    assert (failed["reason"], failed["message"]) == (
        "MXJobFailed",
        "Job mx has failed because it has reached the specified backoff limit",
    )
    assert events(w, "MXJobFailed") == [("Normal", failed["message"])]
    assert w.exec_status("mx")["replicaStatuses"]["Worker"]["failed"] == 2
    # The scheduler block is the scheduler's: it writes Completed from the Failed condition.
    assert w.status("mx")["lattice"] == {"stage": "Running", "currentSize": 3}
    assert (terminal_fields(w.job("mx"), w.plugin) or {}).get("stage") == "Completed"
    assert w.names("pods") == [], "past its backoffLimit every pod is stopped (policy None)"
    assert w.names("services") == []
    assert w.sample("training_operator_jobs_failed_total", job_namespace=NS, framework="mxnet") == 1


async def test_backoff_limit_zero_fails_on_the_first_retryable_exit() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(backoffLimit=0), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    w.set_pod("mx-worker-0", "Failed", exit_code=143, container="mxnet")
    await w.reconcile("mx")
    assert w.conditions("mx")["Failed"]["reason"] == "MXJobFailed"
    assert "Restarting" not in w.conditions("mx")


async def test_a_conflicting_status_write_deletes_nothing() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(backoffLimit=3), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    await w.reconcile("mx")
    w.set_pod("mx-worker-0", "Failed", exit_code=137, container="mxnet")
    w.inject_conflicts(1)
    with pytest.raises(Conflict):
        await w.reconcile("mx")
    assert "mx-worker-0" in w.names("pods")
    await w.reconcile("mx")
    assert "mx-worker-0" not in w.names("pods")
    assert w.exec_status("mx")["replicaStatuses"]["Worker"]["failed"] == 1, "counted once"


async def test_exit_code_1_fails_the_job_with_upstream_wording() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    w.set_pod("mx-worker-1", "Failed", exit_code=1, container="mxnet")
    await w.reconcile("mx")
    failed = w.conditions("mx")["Failed"]
    assert (failed["reason"], failed["message"]) == (
        "MXJobFailed",
        "mxjob mx is failed because 1 Worker replica(s) failed.",
    )
    assert events(w, "MXJobFailed") == [("Normal", failed["message"])]


async def test_an_evicted_pod_is_recreated_without_charging_the_backoff_limit() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(backoffLimit=0), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    w.set_pod(
        "mx-worker-0",
        "Failed",
        exit_code=137,
        container="mxnet",
        reason="Evicted",
        disruption="EvictionByEvictionAPI",
    )
    await w.reconcile("mx")
    assert "Failed" not in w.conditions("mx")
    assert "mx-worker-0" not in w.names("pods")
    assert w.exec_status("mx")["replicaStatuses"]["Worker"]["failed"] == 0


async def test_success_follows_the_scheduler_with_upstream_wording() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    w.set_pod("mx-scheduler-0", "Succeeded", exit_code=0)
    await w.reconcile("mx")
    done = w.conditions("mx")["Succeeded"]
    assert (done["reason"], done["message"]) == (
        "MXJobSucceeded",
        "MXJob mx is successfully completed.",
    )
    assert events(w, "MXJobSucceeded") == [("Normal", done["message"])]


# --- status ownership -------------------------------------------------------------------------


async def test_a_new_job_is_marked_created_at_once_without_touching_the_scheduler_block() -> None:
    """The reconciler writes only its own block, with no resourceVersion precondition: the
    scheduler's concurrent writes of its block cannot conflict with it."""
    w = World(MXJobPlugin())
    w.apply(mxjob())
    w.grant("mx", 0)
    result = await w.reconcile("mx")
    patches = [c.body for c in w.client.served if c.verb == "patch"]
    assert result.requeue_after is None
    assert w.conditions("mx")["Created"]["status"] == "True"
    (body,) = patches
    assert "metadata" not in body, "no resourceVersion precondition"
    assert "lattice" not in body["status"]


async def test_a_reconcile_works_from_its_own_last_write_until_the_watch_delivers_it() -> None:
    """What the resourceVersion precondition guarded: a reconcile on a cache that does not show
    the reconciler's last write yet must not count or announce the same thing again."""
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    w.hold_events = True  # the watch lags the writes
    await w.reconcile("mx")
    assert w.conditions("mx")["Created"]["status"] == "True"
    writes = [c for c in w.calls if c[0] == "patch/status"]
    await w.reconcile("mx")
    assert [c for c in w.calls if c[0] == "patch/status"] == writes, "nothing new to write"
    created = {"job_namespace": NS, "framework": "mxnet"}
    assert w.sample("training_operator_jobs_created_total", **created) == 1
    w.release()
    await w.reconcile("mx")
    assert w.sample("training_operator_jobs_created_total", **created) == 1


# --- deadline, preemption, suspension ----------------------------------------------------------


async def test_start_time_is_written_when_the_scheduler_shows_its_admission() -> None:
    """``admittedTime`` is only the start of a kind that stores none (TrainJob): a kind with
    ``startTime`` still gets it written, and its deadline counts from admission at once."""
    w = World(MXJobPlugin())
    w.apply(mxjob(activeDeadlineSeconds=10), size=3)
    obj = w.job("mx")
    block = obj
    for key in w.plugin.scheduling_path:
        block = block[key]
    block["admittedTime"] = format_time(w.clock.now())
    w.put(w.res.plural, obj)
    await w.clock.advance(2)
    result = await w.reconcile("mx")
    assert w.exec_status("mx")["startTime"] == format_time(w.clock.now())
    assert result.requeue_after == pytest.approx(8)


async def test_deadline_fails_with_upstream_message_and_preempted_time_does_not_count() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(activeDeadlineSeconds=10), size=3)
    await w.reconcile("mx")
    assert w.exec_status("mx")["startTime"]
    await w.clock.advance(6)
    w.grant("mx", 0)
    await w.reconcile("mx")
    assert "startTime" not in w.exec_status("mx"), "a job holding no pods has not started"
    await w.clock.advance(60)
    await w.reconcile("mx")
    assert "Failed" not in w.conditions("mx")
    w.grant("mx", 3)
    await w.reconcile("mx")
    await w.clock.advance(6)
    result = await w.reconcile("mx")
    assert "Failed" not in w.conditions("mx")
    assert result.requeue_after == pytest.approx(4)
    await w.clock.advance(5)
    await w.reconcile("mx")
    failed = w.conditions("mx")["Failed"]
    assert (failed["reason"], failed["message"]) == (
        "MXJobFailed",
        "Job mx has failed because it was active longer than specified deadline",
    )


async def test_preemption_stops_every_pod_and_never_fails_or_charges() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(backoffLimit=0), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    await w.reconcile("mx")
    w.grant("mx", 0)
    await w.reconcile("mx")
    assert w.names("pods") == []
    assert w.names("services") == []
    conds = w.conditions("mx")
    assert (conds["Suspended"]["status"], conds["Suspended"]["reason"]) == ("True", "Preempted")
    assert (conds["Running"]["status"], conds["Running"]["reason"]) == ("False", "MXJobWaiting")
    assert "Failed" not in conds
    assert w.job("mx")["spec"]["runPolicy"].get("suspend") is None, "the user's field untouched"

    w.grant("mx", 3)
    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS
    conds = w.conditions("mx")
    assert (conds["Suspended"]["status"], conds["Suspended"]["reason"]) == ("False", "MXJobResumed")
    assert w.exec_status("mx")["replicaStatuses"]["Worker"]["failed"] == 0


async def test_a_job_turned_invalid_while_running_stops_its_pods() -> None:
    """Issue 26: its pods hold capacity the scheduler counts until they are gone, so a job the
    operator finds invalid while it runs is marked invalid (not Failed) and its pods are
    stopped; once the spec is fixed it is judged again and runs."""
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    await w.reconcile("mx")

    def negative_cpu(spec: Obj) -> None:
        container = spec["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        container["resources"] = {"requests": {"cpu": "-2"}}

    w.edit_spec("mx", negative_cpu)
    await w.reconcile("mx")
    assert w.names("pods") == []
    conds = w.conditions("mx")
    assert "Failed" not in conds
    invalid = conds["Created"]
    assert (invalid["status"], invalid["reason"]) == ("False", "MXJobFailedValidation")
    assert "spec.mxReplicaSpecs.Worker.template.spec.containers[0].resources" in invalid["message"]
    assert conds["Running"]["status"] == "False"
    assert events(w, "MXJobFailedValidation") == [("Warning", invalid["message"])]
    # The scheduler holds it at Wrong, with nothing.
    wrong = terminal_fields(w.job("mx"), w.plugin) or {}
    assert (wrong.get("stage"), wrong.get("currentSize")) == ("Wrong", 0)
    w.grant("mx", 0, stage="Wrong")
    await w.reconcile("mx")
    assert len(events(w, "MXJobFailedValidation")) == 1, "one event per change"

    def fixed(spec: Obj) -> None:
        container = spec["mxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        container["resources"] = {"requests": {"cpu": "2"}}

    w.edit_spec("mx", fixed)
    await w.reconcile("mx")
    created = w.conditions("mx")["Created"]
    assert (created["status"], created["reason"]) == ("True", "MXJobCreated")
    assert terminal_fields(w.job("mx"), w.plugin) is None, "the scheduler may admit it again"
    w.grant("mx", 3)
    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS


async def test_a_job_preempted_before_its_running_condition_was_written_shows_preempted() -> None:
    """The e2e race: the scheduler took the pods back before any reconcile saw them run, and
    the first write of the preemption conflicted. The stored ``startTime`` still says the job
    was started, so the retry shows it preempted."""
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS
    assert "Running" not in w.conditions("mx")
    assert w.exec_status("mx")["startTime"]
    w.grant("mx", 0)
    w.inject_conflicts(1)
    with pytest.raises(Conflict):
        await w.reconcile("mx")
    assert w.names("pods") == [], "the pods went before the write that failed"
    await w.reconcile("mx")
    conds = w.conditions("mx")
    assert (conds["Suspended"]["status"], conds["Suspended"]["reason"]) == ("True", "Preempted")
    assert (conds["Running"]["status"], conds["Running"]["reason"]) == ("False", "MXJobWaiting")
    assert "startTime" not in w.exec_status("mx")


async def test_a_job_released_to_requeue_cooldown_is_not_shown_preempted() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    w.grant("mx", 0, stage="RequeueCooldown")
    await w.reconcile("mx")
    assert w.names("pods") == []
    assert "Suspended" not in w.conditions("mx")
    w.grant("mx", 0)
    await w.reconcile("mx")
    assert "Suspended" not in w.conditions("mx"), "its startTime went with its pods"


async def test_user_suspension_with_upstream_wording() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    await w.reconcile("mx")
    w.edit_spec("mx", lambda s: s["runPolicy"].update(suspend=True))
    w.grant("mx", 0)
    await w.reconcile("mx")
    conds = w.conditions("mx")
    assert (conds["Suspended"]["reason"], conds["Suspended"]["message"]) == (
        "MXJobSuspended",
        "MXJob mx is suspended.",
    )
    assert (conds["Running"]["status"], conds["Running"]["reason"]) == ("False", "MXJobSuspended")
    assert events(w, "MXJobSuspended") == [("Normal", "MXJob mx is suspended.")]
    assert w.names("pods") == []

    w.edit_spec("mx", lambda s: s["runPolicy"].update(suspend=False))
    w.grant("mx", 3)
    await w.reconcile("mx")
    conds = w.conditions("mx")
    assert (conds["Suspended"]["status"], conds["Suspended"]["message"]) == (
        "False",
        "MXJob mx is resumed.",
    )
    assert w.names("pods") == MX_PODS


# --- MPIJob ------------------------------------------------------------------------------------


async def test_what_pods_consume_is_created_before_any_pod_or_job() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(), size=3)
    await w.reconcile("pi")
    await w.reconcile("pi")  # the launcher once every worker exists
    creates = [(kind, name) for verb, kind, name in w.calls if verb == "create"]
    consumers = [i for i, (kind, _) in enumerate(creates) if kind in ("Pod", "Job")]
    inputs = [i for i, (kind, _) in enumerate(creates) if kind in ("ConfigMap", "Secret")]
    assert {kind for kind, _ in creates} == {"Service", "ConfigMap", "Secret", "Pod", "Job"}
    assert max(inputs) < min(consumers), creates
    kinds = [kind for kind, _ in creates]
    assert kinds.index("Service") < kinds.index("Job"), "the launcher resolves the workers at once"


def _overlapping_creates(w: World) -> list[frozenset[str]]:
    """Wrap the server's ``create`` to record, for each create, the kinds being created at
    that moment."""
    inflight: list[str] = []
    seen: list[frozenset[str]] = []
    real = w.client.create

    async def create(res: Any, body: Obj, *, namespace: str | None = None) -> Obj:
        inflight.append(res.kind)
        await yield_now()  # let the other creates of this round start
        seen.append(frozenset(inflight))
        try:
            return await real(res, body, namespace=namespace)
        finally:
            inflight.remove(res.kind)

    w.client.create = create  # type: ignore[method-assign]
    return seen


async def test_without_batch_jobs_services_are_created_in_the_same_round_as_the_pods() -> None:
    w = World(TrainingJobPlugin())
    w.apply(_trainingjob("t"), size=2)
    seen = _overlapping_creates(w)
    await w.reconcile("t")
    assert any({"Pod", "Service"} <= kinds for kinds in seen), seen


async def test_services_precede_the_mpi_launcher_job() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(), size=2)
    seen = _overlapping_creates(w)
    await w.reconcile("pi")
    assert any("Service" in kinds for kinds in seen)
    assert not any({"Service", "Job"} <= kinds for kinds in seen), seen


async def test_wait_for_workers_ready_holds_the_launcher_and_never_deletes_it() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(launcherCreationPolicy="WaitForWorkersReady"), size=3)
    await w.reconcile("pi")
    assert w.names("pods") == ["pi-worker-0", "pi-worker-1"]
    assert w.names("configmaps") == ["pi-config"]
    assert w.names("secrets") == ["pi-ssh"]
    assert w.names("jobs") == [], "no launcher before the workers are ready"
    assert w.get_obj("configmaps", "pi-config")["data"]["discover_hosts.sh"] == "#!/bin/sh\n"

    w.set_pod("pi-worker-0", "Running", ready=False)
    w.set_pod("pi-worker-1", "Running", ready=True)
    await w.reconcile("pi")
    assert w.names("jobs") == []
    assert w.get_obj("configmaps", "pi-config")["data"]["discover_hosts.sh"] == (
        f"#!/bin/sh\necho pi-worker-0.pi.{NS}.svc\necho pi-worker-1.pi.{NS}.svc\n"
    )

    w.set_pod("pi-worker-0", "Running", ready=True)
    await w.reconcile("pi")
    assert w.names("jobs") == ["pi-launcher"]

    w.set_pod("pi-worker-1", "Running", ready=False)
    await w.reconcile("pi")
    assert w.names("jobs") == ["pi-launcher"], "an existing launcher is kept"
    assert ("delete", "Job", "pi-launcher") not in w.calls


async def test_discover_hosts_lists_only_running_workers_updated_in_place() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(), size=3)
    await w.reconcile("pi")
    await w.reconcile("pi")  # the launcher once every worker exists
    assert w.names("jobs") == ["pi-launcher"], "AtStartup: once every worker exists"
    w.set_pod("pi-worker-1", "Running")
    await w.reconcile("pi")
    config = w.get_obj("configmaps", "pi-config")
    assert config["data"]["discover_hosts.sh"] == f"#!/bin/sh\necho pi-worker-1.pi.{NS}.svc\n"
    assert config["data"]["hostfile"] == (
        f"pi-worker-0.pi.{NS}.svc slots=1\npi-worker-1.pi.{NS}.svc slots=1\n"
    )
    assert ("patch", "ConfigMap", "pi-config") in w.calls
    assert ("delete", "ConfigMap", "pi-config") not in w.calls


async def test_mpijob_success_cleans_only_workers_and_counts_both_metric_families() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(run={"cleanPodPolicy": "Running"}), size=3)
    await w.reconcile("pi")
    await w.reconcile("pi")  # the launcher once every worker exists
    assert events(w, "MPIJobCreated") == [("Normal", f"MPIJob {NS}/pi is created.")]
    running(w, "pi-worker-0", "pi-worker-1")
    w.set_job_status("pi-launcher", {"active": 1, "ready": 1})
    await w.reconcile("pi")
    await w.reconcile("pi")
    assert w.conditions("pi")["Running"]["message"] == f"MPIJob {NS}/pi is running."
    assert events(w, "MPIJobRunning") == [("Normal", f"MPIJob {NS}/pi is running")]

    complete = {"type": "Complete", "status": "True"}
    w.set_job_status("pi-launcher", {"succeeded": 1, "conditions": [complete]})
    await w.reconcile("pi")
    done = w.conditions("pi")["Succeeded"]
    assert (done["reason"], done["message"]) == (
        "MPIJobSucceeded",
        f"MPIJob {NS}/pi successfully completed.",
    )
    await w.reconcile("pi")
    assert w.names("pods") == [], "Running workers are cleaned"
    assert w.names("services") == ["pi"], "the Service stays, as mpi-operator keeps it"
    assert w.names("jobs") == ["pi-launcher"]
    assert w.names("configmaps") == ["pi-config"]
    assert w.sample("mpi_operator_jobs_created_total") == 1
    assert w.sample("mpi_operator_jobs_successful_total") == 1
    assert w.sample("training_operator_jobs_created_total", job_namespace=NS, framework="mpi") == 1
    assert (
        w.sample("training_operator_jobs_successful_total", job_namespace=NS, framework="mpi") == 1
    )


async def test_mpijob_launcher_failure_counts_failed() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(), size=3)
    await w.reconcile("pi")
    await w.reconcile("pi")  # the launcher once every worker exists
    failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "x"}
    w.set_job_status("pi-launcher", {"failed": 1, "conditions": [failed]})
    await w.reconcile("pi")
    assert w.conditions("pi")["Failed"]["reason"] == "BackoffLimitExceeded"
    assert events(w, "BackoffLimitExceeded") == [("Warning", "x")]
    assert w.sample("mpi_operator_jobs_failed_total") == 1


async def test_suspended_mpijob_creates_nothing_until_resumed() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(run={"suspend": True}), size=0)
    await w.reconcile("pi")
    for plural in ("pods", "services", "configmaps", "secrets", "jobs"):
        assert w.names(plural) == [], plural
    suspended = w.conditions("pi")["Suspended"]
    assert (suspended["reason"], suspended["message"]) == ("MPIJobSuspended", "MPIJob suspended")

    w.edit_spec("pi", lambda s: s["runPolicy"].update(suspend=False))
    w.grant("pi", 3)
    await w.reconcile("pi")
    await w.reconcile("pi")
    assert w.conditions("pi")["Suspended"]["message"] == "MPIJob resumed"
    assert w.names("jobs") == ["pi-launcher"]
    assert len(w.names("pods")) == 2


def _uids(w: World) -> dict[str, str]:
    """The UIDs of an MPIJob's kept children (Service, ConfigMap, Secret, launcher Job)."""
    return {
        f"{plural}/{name}": w.get_obj(plural, name)["metadata"]["uid"]
        for plural, name in (
            ("services", "pi"),
            ("configmaps", "pi-config"),
            ("secrets", "pi-ssh"),
            ("jobs", "pi-launcher"),
        )
    }


async def _started_mpijob(w: World, **spec: Any) -> dict[str, str]:
    w.apply(mpijob(**spec))
    w.grant("pi", 3, placement={"pi-launcher": "n1", "pi-worker-0": "n1", "pi-worker-1": "n2"})
    await w.reconcile("pi")
    await w.reconcile("pi")  # the launcher once every worker exists
    running(w, "pi-worker-0", "pi-worker-1")
    w.set_job_status("pi-launcher", {"active": 1, "ready": 1, "startTime": "2026-01-01T00:00:00Z"})
    await w.reconcile("pi")
    assert w.conditions("pi")["Running"]["status"] == "True"
    return _uids(w)


def _launcher_node(w: World) -> list[str]:
    affinity = w.get_obj("jobs", "pi-launcher")["spec"]["template"]["spec"]["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [f["values"][0] for t in terms["nodeSelectorTerms"] for f in t["matchFields"]]


@pytest.mark.parametrize("how", ["user", "scheduler"])
async def test_mpijob_suspend_resume_keeps_its_children(how: str) -> None:
    """As mpi-operator v0.8: suspension (the user's, or a preemption by the scheduler) deletes
    the workers and suspends the launcher Job; the Service, ConfigMap, Secret and launcher Job
    stay (same UIDs); on resume the launcher Job's scheduling fields are re-synced (it moves to
    the node of the new placement) and it is unsuspended."""
    w = World(MPIJobPlugin())
    uids = await _started_mpijob(w)
    assert _launcher_node(w) == ["n1"]
    if how == "user":
        w.edit_spec("pi", lambda s: s["runPolicy"].update(suspend=True))
    w.grant("pi", 0, placement={})
    await w.reconcile("pi")
    assert w.names("pods") == [], "the workers are deleted"
    assert _uids(w) == uids, "the Service, ConfigMap, Secret and launcher Job are kept"
    assert w.get_obj("jobs", "pi-launcher")["spec"]["suspend"] is True
    conds = w.conditions("pi")
    assert conds["Running"]["status"] == "False"
    if how == "user":
        assert (conds["Suspended"]["reason"], conds["Running"]["reason"]) == (
            "MPIJobSuspended",
            "MPIJobSuspended",
        )
        assert events(w, "MPIJobSuspended") == [("Normal", "MPIJob suspended")]
    else:
        assert (conds["Suspended"]["status"], conds["Suspended"]["reason"]) == ("True", "Preempted")
    assert "Failed" not in conds
    # The Job controller stops the launcher's pod; its startTime is cleared so that the pod
    # template's scheduling fields may change.
    await w.reconcile("pi")
    assert "startTime" not in w.get_obj("jobs", "pi-launcher").get("status", {})
    assert ("patch/status", "Job", "pi-launcher") in w.calls
    await w.reconcile("pi")
    assert _uids(w) == uids

    if how == "user":
        w.edit_spec("pi", lambda s: s["runPolicy"].update(suspend=False))
    w.grant("pi", 3, placement={"pi-launcher": "n3", "pi-worker-0": "n3", "pi-worker-1": "n2"})
    await w.reconcile("pi")
    assert w.get_obj("jobs", "pi-launcher")["spec"]["suspend"] is True, "until the workers exist"
    await w.reconcile("pi")
    launcher = w.get_obj("jobs", "pi-launcher")
    assert launcher["spec"]["suspend"] is False
    assert _launcher_node(w) == ["n3"], "re-synced to the new placement"
    assert sorted(w.names("pods")) == ["pi-worker-0", "pi-worker-1"]
    assert _uids(w) == uids
    resumed = w.conditions("pi")["Suspended"]
    assert (resumed["status"], resumed["reason"]) == ("False", "MPIJobResumed")


async def test_mpijob_never_started_creates_nothing_at_size_zero() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(), size=0)
    await w.reconcile("pi")
    for plural in ("pods", "services", "configmaps", "secrets", "jobs"):
        assert w.names(plural) == [], plural


async def test_mpijob_resume_syncs_the_launchers_scheduling_fields() -> None:
    """The launcher template's nodeSelector, tolerations and labels edited while suspended
    reach the launcher Job when it resumes; its other fields are left alone."""
    w = World(MPIJobPlugin())
    uids = await _started_mpijob(w)
    w.edit_spec("pi", lambda s: s["runPolicy"].update(suspend=True))
    w.grant("pi", 0, placement={})
    await w.reconcile("pi")
    await w.reconcile("pi")

    def edit(spec: Obj) -> None:
        spec["runPolicy"]["suspend"] = False
        template = spec["mpiReplicaSpecs"]["Launcher"]["template"]
        template.setdefault("metadata", {})["labels"] = {"queue": "b"}
        template["spec"]["nodeSelector"] = {"pool": "b"}
        template["spec"]["tolerations"] = [{"key": "b", "operator": "Exists"}]

    w.edit_spec("pi", edit)
    w.grant("pi", 3, placement={"pi-launcher": "n2", "pi-worker-0": "n2", "pi-worker-1": "n1"})
    await w.reconcile("pi")
    await w.reconcile("pi")
    template = w.get_obj("jobs", "pi-launcher")["spec"]["template"]
    assert template["metadata"]["labels"]["queue"] == "b"
    assert template["spec"]["nodeSelector"]["pool"] == "b"
    assert template["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]
    assert _launcher_node(w) == ["n2"]
    assert _uids(w) == uids


# --- TrainingJob keeps its wording -------------------------------------------------------------


async def test_trainingjob_keeps_its_wording() -> None:
    w = World(TrainingJobPlugin())
    container = {"name": "trainingjob", "image": "t:1", "command": ["python", "main.py"]}
    w.apply(
        {
            "apiVersion": "breezeml.ai/v1",
            "kind": "TrainingJob",
            "metadata": {"name": "t"},
            "spec": {
                "minSize": 1,
                "maxSize": 1,
                "runPolicy": {"activeDeadlineSeconds": 5},
                "replicaSpecs": {"template": {"spec": {"containers": [container]}}},
            },
        },
        size=1,
    )
    await w.reconcile("t")
    assert w.conditions("t")["Created"]["message"] == f"TrainingJob {NS}/t is created."
    await w.clock.advance(6)
    await w.reconcile("t")
    failed = w.conditions("t")["Failed"]
    assert (failed["reason"], failed["message"]) == (
        "DeadlineExceeded",
        f"TrainingJob {NS}/t has failed because it was active longer than specified deadline",
    )
    assert events(w, "DeadlineExceeded") == [("Warning", failed["message"])]


async def test_clean_pod_policy_running_takes_each_deleted_pods_service_with_it() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(cleanPodPolicy="Running"), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    w.set_pod("mx-scheduler-0", "Succeeded", exit_code=0)
    await w.reconcile("mx")
    assert w.conditions("mx")["Succeeded"]["status"] == "True"
    await w.reconcile("mx")
    assert w.names("pods") == ["mx-scheduler-0"]
    assert w.names("services") == ["mx-scheduler-0"], "as training-operator: with its pod only"


async def test_a_deadline_stops_every_pod_whatever_the_clean_pod_policy() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(activeDeadlineSeconds=5), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    await w.clock.advance(5)
    await w.reconcile("mx")
    assert w.conditions("mx")["Failed"]["status"] == "True"
    assert w.names("pods") == []
    assert w.names("services") == []


async def test_an_mpijob_finished_before_running_gets_running_false() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob(), size=3)
    await w.reconcile("pi")
    await w.reconcile("pi")  # the launcher once every worker exists
    complete = {"type": "Complete", "status": "True"}
    w.set_job_status("pi-launcher", {"succeeded": 1, "conditions": [complete]})
    await w.reconcile("pi")
    conds = w.conditions("pi")
    assert (conds["Running"]["status"], conds["Running"]["reason"]) == ("False", "MPIJobRunning")
    assert conds["Running"]["message"] == (
        f"MPIJob {NS}/pi is finished but Running condition was never set."
    )
    assert conds["Succeeded"]["status"] == "True"
    assert list(conds)[-1] == "Succeeded"


async def test_a_failed_pod_create_fails_the_reconcile_so_it_is_retried() -> None:
    """A create the apiserver refused leaves no watch event behind: unless the reconcile fails
    (and the harness requeues it with backoff), the job waits at its size with the pod missing
    until some unrelated event (issue 9: px-0011 stuck at currentSize 1 with 0 pods)."""
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    injected = TooManyRequests(429, "TooManyRequests", "injected")
    w.client.fail("create", injected, plural="pods", name="mx-worker-1")
    with pytest.raises(ChildSyncError, match="mx-worker-1"):
        await w.reconcile("mx")
    assert w.names("pods") == ["mx-scheduler-0", "mx-worker-0"]
    assert w.conditions("mx")["Created"]["status"] == "True", "the status is written first"
    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS


async def test_an_already_exists_whose_get_fails_is_reported_and_retried() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    # The cache loses the worker (a lagging informer) while the apiserver still has it.
    w.pods.on_event("DELETED", w.get_obj("pods", "mx-worker-0"))
    injected = TooManyRequests(429, "TooManyRequests", "injected")
    w.client.fail("get", injected, plural="pods", name="mx-worker-0")
    with pytest.raises(ChildSyncError, match="get existing Pod mx-worker-0"):
        await w.reconcile("mx")
    await w.reconcile("mx")  # AlreadyExists, ours: success
    assert w.names("pods") == MX_PODS


async def test_a_create_refused_as_malformed_makes_the_job_wrong_instead_of_retrying() -> None:
    """A 422 (or 400) on create means the manifest itself is bad: the same create would be
    refused forever, so the job goes Wrong with the apiserver's message and no error is raised."""
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    invalid = Invalid(422, "Invalid", 'Pod "mx-worker-0" is invalid: spec.containers: bad')
    w.client.fail("create", invalid, plural="pods", name="mx-worker-0", times=1)
    await w.reconcile("mx")
    assert "Failed" not in w.conditions("mx")
    assert w.conditions("mx")["Created"]["reason"] == "MXJobFailedValidation"
    assert w.status("mx")["lattice"] == {"stage": "Running", "currentSize": 3}
    # From which the scheduler, the one writer of the block, writes the job Wrong.
    wrong = terminal_fields(w.job("mx"), w.plugin) or {}
    assert (wrong.get("stage"), wrong.get("reason")) == ("Wrong", "InvalidSpec")
    assert "spec.containers: bad" in wrong["message"]
    # The same spec is not tried again (the apiserver would refuse it again) ...
    w.grant("mx", 3)
    creates = sum(1 for c in w.calls if c[0] == "create")
    await w.reconcile("mx")
    assert sum(1 for c in w.calls if c[0] == "create") == creates
    # ... a changed one is.
    w.edit_spec("mx", lambda s: s.update(jobMode="MXTrain"))
    await w.reconcile("mx")
    assert w.conditions("mx")["Created"]["status"] == "True"


# --- what enqueues a job ------------------------------------------------------------------------


def _trainingjob(name: str) -> Obj:
    container = {"name": "trainingjob", "image": "t:1"}
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "minSize": 1,
            "maxSize": 2,
            "replicaSpecs": {"template": {"spec": {"containers": [container]}}},
        },
    }


@pytest.mark.parametrize(
    ("plugin", "manifest"),
    [
        (MXJobPlugin(), mxjob("j")),
        (MPIJobPlugin(), mpijob("j")),
        (TrainingJobPlugin(), _trainingjob("j")),
    ],
    ids=["MXJob", "MPIJob", "TrainingJob"],
)
async def test_scheduler_bookkeeping_alone_does_not_enqueue_but_decisions_and_status_do(
    plugin: Any, manifest: Obj
) -> None:
    w = World(plugin)
    w.apply(manifest)
    assert w.enqueued == [f"{NS}/j"]

    def scheduler_writes(block: Obj) -> None:
        obj = w.job("j")
        patch: Obj = block
        for step in reversed(plugin.scheduling_path[1:]):
            patch = {step: patch}
        obj["status"] = merge(obj.get("status") or {}, patch)
        w.put(w.res.plural, obj)

    w.enqueued.clear()
    scheduler_writes({"queuePosition": 3, "queuedTime": "2026-01-01T00:00:00Z"})
    scheduler_writes({"attainedService": 12.5, "lastDecision": "Waiting"})
    assert w.enqueued == [], "bookkeeping the reconciler never reads woke it"

    w.grant("j", 1)  # currentSize: the decision the reconciler acts on
    assert w.enqueued == [f"{NS}/j"]

    w.enqueued.clear()
    own: Obj = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    for step in reversed(plugin.exec_path[1:]):
        own = {step: own}
    await w.client.patch(w.res, "j", {"status": own}, namespace=NS, subresource="status")
    await w.settle()  # the watch delivers the write
    assert w.enqueued == [f"{NS}/j"], "a change to the status the reconciler keeps must enqueue"

    w.enqueued.clear()
    w.edit_spec("j", lambda spec: spec.setdefault("runPolicy", {}).update(backoffLimit=2))
    assert w.enqueued == [f"{NS}/j"]


async def test_the_echo_of_the_write_that_finishes_a_job_still_enqueues_it() -> None:
    """The clean-up of a finished job (cleanPodPolicy, Completed, TTL) runs on the reconcile
    after the one that wrote Succeeded: that write's watch echo must wake it, even when it
    arrives after the write's response (an own-write echo filter once broke this)."""
    w = World(MXJobPlugin())
    w.apply(mxjob(cleanPodPolicy="Running"), size=3)
    await w.reconcile("mx")
    running(w, *MX_PODS)
    w.set_pod("mx-scheduler-0", "Succeeded", exit_code=0)
    w.enqueued.clear()
    w.hold_events = True
    await w.reconcile("mx")
    w.release()
    assert w.conditions("mx")["Succeeded"]["status"] == "True"
    assert w.enqueued == [f"{NS}/mx"]
    await w.reconcile("mx")
    assert w.names("pods") == ["mx-scheduler-0"]
