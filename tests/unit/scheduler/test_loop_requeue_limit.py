"""The requeue limit through the scheduler loop: kube-scheduler's message on a pending pod
reaches the ``Requeued`` event, then the ``Failed`` stage's reason and message in status; the
reconciler's ``Failed`` condition keeps the stage. Also: the columns' ``priority``, ``minSize``
and ``maxSize`` are written with the block, and again when the spec changes them."""

from __future__ import annotations

from datetime import timedelta

from lattice.primitives.objects import Obj
from lattice.scheduler.core import SchedulerConfig, Strategy
from tests.unit.scheduler.test_loop_runner import Harness, unchanged
from tests.unit.scheduler.test_loop_snapshot import pod_obj

MESSAGE = "0/1 nodes are available: 1 Insufficient example.com/widget."


def _unschedulable(since: float, rv: str) -> Obj:
    pod = pod_obj("a-w0", job="a", phase="Pending", created=0, unschedulable_since=since, rv=rv)
    pod["status"]["conditions"][0]["message"] = MESSAGE
    return pod


async def test_requeues_quote_kube_scheduler_then_the_limit_fails_the_job() -> None:
    config = SchedulerConfig(
        strategy=Strategy.STRICT_FIFO,
        pending_timeout=timedelta(seconds=300),
        cooldown_base=timedelta(seconds=60),
        requeue_limit=1,
    )
    h = Harness(config=config)
    h.add_nodes(1)
    h.add_job("a", units=8)
    await h.loop.run_once()
    assert h.status("a")["stage"] == "Running"

    h.pods.on_event("ADDED", _unschedulable(0, "1"))
    await h.clock.advance(300)
    await h.loop.run_once()
    status = h.status("a")
    assert (status["stage"], status["requeueCount"]) == ("RequeueCooldown", 1)
    (requeued,) = [e for e in h.recorder.events if e[2] == "Requeued"]
    assert requeued[1] == "Warning"
    assert requeued[3].endswith(f"; last message from kube-scheduler: {MESSAGE}")

    await h.clock.advance(60)
    await h.loop.run_once()
    assert h.status("a")["stage"] == "Running"
    h.pods.on_event("MODIFIED", _unschedulable(360, "2"))
    await h.clock.advance(300)
    await h.loop.run_once()
    status = h.status("a")
    assert (status["stage"], status["currentSize"], status["requeueCount"]) == ("Failed", 0, 1)
    assert status["reason"] == "RequeueLimitExceeded"
    assert status["message"] == (
        "requeued 1 time for pods that could not start (limit 1); pending again for 5m0s; "
        f"last message from kube-scheduler: {MESSAGE}"
    )
    assert status.get("cooldownTime") is None
    assert status.get("placement") is None
    assert [e[2] for e in h.recorder.events].count("Requeued") == 1, "no scheduler event"

    # The reconciler records the failure; the scheduler keeps stage Failed and writes once.
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "RequeueLimitExceeded",
        "message": status["message"],
        "lastTransitionTime": "2026-01-01T00:11:00Z",
    }
    h.update_job("a", lambda o: o["status"].update(execStatus={"conditions": [failed]}))
    await h.loop.run_once()
    status = h.status("a")
    assert (status["stage"], status["reason"], status["completionTime"]) == (
        "Failed",
        "RequeueLimitExceeded",
        "2026-01-01T00:11:00Z",
    )
    written = len(h.patches)
    assert unchanged(await h.loop.run_once())
    assert len(h.patches) == written
    assert h.metric("lattice_jobs", {"kind": "FakeJob", "stage": "Failed"}) == 1


async def test_priority_and_sizes_are_written_and_follow_the_spec() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("a", units=1, min=2, max=4, priority=3)
    await h.loop.run_once()
    status = h.status("a")
    assert (status["priority"], status["minSize"], status["maxSize"]) == (3, 2, 4)
    written = len(h.patches)
    assert unchanged(await h.loop.run_once())
    assert len(h.patches) == written

    # A new priority changes no decision of a lone running job, yet the column follows it.
    h.update_job("a", lambda o: o["spec"].update(priority=7))
    await h.loop.run_once()
    assert h.status("a")["priority"] == 7
    assert len(h.patches) == written + 1
