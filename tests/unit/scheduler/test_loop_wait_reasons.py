"""The loop persists why every held-back job waits, and the queue metrics of what it decided.

Over the runner's harness (``MemoryClient``, informers filled directly, a ``FakeClock``): the
``reason`` code of a waiting job is never blank, whatever its place in the queue; a preempted
job shows ``Preempted`` after the write, then its blocker after the next pass; a code change
costs one write and wording alone none. Then every queue metric after a scripted
admit/shrink/preempt/resume/grow/suspend sequence, and no ``*_created`` sample anywhere.
"""

from __future__ import annotations

import re
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from lattice.runtime.metrics import Metrics
from lattice.scheduler.core import SchedulerConfig, Strategy
from lattice.scheduler.loop.snapshot import SHOWN_POSITIONS
from tests.unit.scheduler.test_loop_runner import SUCCEEDED, Harness
from tests.unit.scheduler.test_loop_snapshot import ts

FIFO = SchedulerConfig(strategy=Strategy.BEST_EFFORT_FIFO)


def _codes(h: Harness, names: list[str]) -> dict[str, Any]:
    return {name: h.status(name).get("reason") for name in names}


async def test_a_preempted_job_shows_preempted_then_its_blocker_never_blank() -> None:
    h = Harness(config=FIFO)
    h.add_nodes(1)
    h.add_job("low", units=8, priority=0)
    waiting = [f"w{i:02d}" for i in range(SHOWN_POSITIONS + 5)]
    for i, name in enumerate(waiting):
        h.add_job(name, units=8, priority=0, created=i)
    await h.loop.run_once()
    assert h.status("low").get("reason") is None
    assert set(_codes(h, waiting).values()) == {"InsufficientCapacity"}
    far = h.status(waiting[-1])
    assert far.get("queuePosition") is None  # beyond the shown head: a code all the same
    assert far["message"].startswith("needs 8 units; no node eligible has 8 nvidia.com/gpu")
    assert far["waitingSince"] == ts(0)

    await h.clock.advance(5)
    h.add_job("high", units=8, priority=10)
    await h.loop.run_once()
    low = h.status("low")
    assert (low["stage"], low["reason"]) == ("Waiting", "Preempted")
    assert low["message"].startswith(
        "Preempted by ns/high (priority 10) at 2026-01-01T00:00:05Z; needs 8 units"
    )
    assert low["waitingSince"] == ts(5)  # its queuedTime (0) is older than this wait
    assert low["queuedTime"] == ts(0)
    assert h.status("high").get("reason") is None
    written = len(h.patches)

    await h.clock.advance(1)
    plan = await h.loop.run_once()
    assert not plan.changed_keys(include_accounting=False)
    assert h.names()[written:] == ["low"], "only the code change is written"
    low = h.status("low")
    assert low["reason"] == "InsufficientCapacity"
    assert low["message"] == far["message"]
    assert low["waitingSince"] == ts(5)
    # Nothing changes: no write, and no job ever lost its code.
    for _ in range(3):
        await h.clock.advance(1)
        await h.loop.run_once()
    assert len(h.patches) == written + 1
    assert None not in _codes(h, ["low", *waiting]).values()


async def test_a_change_of_wording_alone_costs_no_write() -> None:
    h = Harness(config=FIFO)
    h.add_nodes(1, gpus=8)
    h.add_job("big", units=6, priority=5)
    h.add_job("w", units=4)
    await h.loop.run_once()
    before = h.status("w")["message"]
    assert before.endswith("(1 node match; largest free 2)")
    written = len(h.patches)
    # big finishes; an 8-unit job takes the node: w needs 4 with 0 free, the same code.
    h.update_job("big", lambda o: o["status"].update(execStatus=SUCCEEDED))
    h.add_job("big2", units=8, priority=5)
    plan = await h.loop.run_once()
    assert plan["FakeJob/ns/w"].wait_message.endswith("(1 node match; largest free 0)")
    assert "w" not in h.names()[written:]
    assert h.status("w")["message"] == before  # it rides along with a later write


async def test_each_queue_metric_after_admit_shrink_preempt_resume_grow_and_suspend() -> None:
    h = Harness(config=FIFO)
    h.add_nodes(1)  # 8 units

    def m(name: str, **labels: str) -> float | None:
        return h.metric(name, {"kind": "FakeJob", "namespace": "ns", **labels})

    # t=0: a (elastic, 2 x 4 units) is admitted at once: a first admission that waited 0 s.
    h.add_job("a", min=1, max=2, units=4, priority=0)
    await h.loop.run_once()
    assert m("lattice_admission_wait_time_seconds_count", admission="first") == 1
    assert m("lattice_admission_wait_time_seconds_sum", admission="first") == 0
    assert m("lattice_admitted_jobs") == 1
    assert m("lattice_pending_jobs", status="waiting") == 0
    assert m("lattice_pending_jobs", status="cooldown") == 0

    # t=5: b (priority 5, 4 units) shrinks a to 1 and is admitted.
    await h.clock.advance(5)
    h.add_job("b", units=4, priority=5)
    await h.loop.run_once()
    assert h.status("a")["currentSize"] == 1
    assert m("lattice_resizes_total", direction="shrink") == 1
    assert not m("lattice_resizes_total", direction="grow")
    assert m("lattice_admitted_jobs") == 2
    assert m("lattice_admission_wait_time_seconds_count", admission="first") == 2

    # t=10: c (priority 9, 8 units) preempts both: two evictions, two preemptions.
    await h.clock.advance(5)
    h.add_job("c", units=8, priority=9)
    await h.loop.run_once()
    assert m("lattice_preempted_jobs_total", reason="HigherPriority") == 2
    assert m("lattice_evicted_jobs_total", reason="Preempted") == 2
    assert m("lattice_admitted_jobs") == 1
    assert m("lattice_pending_jobs", status="waiting") == 2
    assert h.metric("lattice_preemptions_total") == 2  # kept for one release

    # t=20: c finishes; b and a resume after 10 s of waiting each.
    await h.clock.advance(10)
    h.update_job("c", lambda o: o["status"].update(execStatus=SUCCEEDED))
    await h.loop.run_once()
    assert (h.status("a")["currentSize"], h.status("b")["currentSize"]) == (1, 1)
    assert m("lattice_admission_wait_time_seconds_count", admission="resume") == 2
    assert m("lattice_admission_wait_time_seconds_sum", admission="resume") == 20
    assert m("lattice_admission_wait_time_seconds_bucket", admission="resume", le="10.0") == 2
    assert m("lattice_admission_wait_time_seconds_bucket", admission="resume", le="5.0") == 0
    assert m("lattice_pending_jobs", status="waiting") == 0
    assert m("lattice_admitted_jobs") == 2

    # t=60: b finishes; a grows back to 2 (its resize interval is over).
    await h.clock.advance(40)
    h.update_job("b", lambda o: o["status"].update(execStatus=SUCCEEDED))
    await h.loop.run_once()
    assert h.status("a")["currentSize"] == 2
    assert m("lattice_resizes_total", direction="grow") == 1

    # a is suspended: an eviction for that reason; it waits no more (nor counts as pending).
    h.update_job("a", lambda o: o["spec"].update(suspend=True))
    await h.loop.run_once()
    assert h.status("a")["reason"] == "Suspended"
    assert m("lattice_evicted_jobs_total", reason="Suspended") == 1
    assert m("lattice_pending_jobs", status="waiting") == 0
    assert m("lattice_admitted_jobs") == 0

    # Counted once per written decision: passes that write nothing add nothing.
    for _ in range(2):
        await h.loop.run_once()
    assert m("lattice_evicted_jobs_total", reason="Suspended") == 1
    assert m("lattice_resizes_total", direction="shrink") == 1
    assert m("lattice_preempted_jobs_total", reason="HigherPriority") == 2


async def test_the_gauges_drop_a_namespace_with_no_job_left() -> None:
    h = Harness(config=FIFO)
    h.add_nodes(1)
    h.add_job("a", units=8, namespace="gone")
    h.add_job("b", units=8)
    await h.loop.run_once()
    admitted = {"kind": "FakeJob", "namespace": "gone"}
    assert h.metric("lattice_admitted_jobs", admitted) == 1
    waiting = {"kind": "FakeJob", "namespace": "ns", "status": "waiting"}
    assert h.metric("lattice_pending_jobs", waiting) == 1
    h.jobs["FakeJob"].on_event("DELETED", h.jobs["FakeJob"].store.list()[0])
    await h.loop.run_once()
    assert h.metric("lattice_admitted_jobs", admitted) is None
    assert h.metric("lattice_admitted_jobs", {"kind": "FakeJob", "namespace": "ns"}) == 1


async def test_dashboard_series_exist_before_anything_happens() -> None:
    """Label sets a dashboard sums by reason are there (at 0) before the first preemption."""
    h = Harness()
    labels = {"kind": "FakeJob", "namespace": ""}
    for reason in ("HigherPriority", "LeastAttainedService", "EarlierInQueue"):
        assert h.metric("lattice_preempted_jobs_total", {**labels, "reason": reason}) == 0
    for reason in ("Preempted", "PodsPendingTimeout", "RequeueLimitExceeded", "Suspended"):
        assert h.metric("lattice_evicted_jobs_total", {**labels, "reason": reason}) == 0
    for direction in ("grow", "shrink"):
        assert h.metric("lattice_resizes_total", {**labels, "direction": direction}) == 0
    count = h.metric("lattice_admission_wait_time_seconds_count", {**labels, "admission": "first"})
    assert count == 0


def test_no_created_series_is_exported() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.init_kinds(["TrainingJob"])
    metrics.preempted_jobs.labels("TrainingJob", "ns", "HigherPriority").inc()
    metrics.admission_wait.labels("TrainingJob", "ns", "first").observe(3)
    metrics.status_writes.labels("ok").inc()
    names = [s.name for family in registry.collect() for s in family.samples]
    assert "lattice_preempted_jobs_total" in names
    assert "lattice_admission_wait_time_seconds_count" in names
    assert not [n for n in names if n.endswith("_created")]
    exposed = generate_latest(registry).decode()
    assert not re.findall(r"^\w+_created[{ ]", exposed, flags=re.MULTILINE)
