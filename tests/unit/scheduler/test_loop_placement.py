"""Placements through the loop: the persisted ``placement`` map read back as the view's index
tuple, refused nodes, the map written from ``Decision.placement``, and a pass's snapshot (per-pod
demands reach the core; pods a placement covers are not charged twice)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest

from lattice.frameworks.base import Demand, OperatorContext
from lattice.primitives.objects import Obj
from lattice.runtime.projections import PodInfo, pod_info
from lattice.scheduler.core import JobView, Plan, Snapshot, schedule
from lattice.scheduler.core.model import PodDemand, resources
from lattice.scheduler.loop import Naming, job_view, status_fields
from lattice.scheduler.loop.placement import earliest_pending, placement_map
from lattice.scheduler.loop.snapshot import JobRead, read_job
from tests.unit.scheduler.test_loop_runner import Harness
from tests.unit.scheduler.test_loop_snapshot import (
    GPU,
    FakePlugin,
    _decision,
    at,
    job_obj,
    pod_obj,
)

NAMES: dict[str, Any] = {"names": ["x-launcher"], "prefix": "x-worker-"}
LAUNCHER = PodDemand(requests=resources({"cpu": 500, "pods": 1}))
WORKER = PodDemand(requests=resources({"nvidia.com/gpu": 4, "pods": 1}), units=4)


class DemandingPlugin(FakePlugin):
    """``FakePlugin`` whose pods carry per-pod demands (a launcher and GPU workers)."""

    def demand(self, job: Mapping[str, Any], ctx: OperatorContext) -> Demand:
        base = super().demand(job, ctx)
        fixed = (LAUNCHER,) * len(base.fixed_pods)
        return Demand(
            priority=base.priority,
            min_size=base.min_size,
            max_size=base.max_size,
            fixed_pods=tuple(d.units for d in fixed),
            replica_units=WORKER.units,
            fixed_demands=fixed,
            replica_demand=WORKER,
            fixed_names=base.fixed_names,
            replica_prefix=base.replica_prefix,
        )


def running(placement: Any = None, *, size: int = 3, **spec: Any) -> Obj:
    status: Obj = {"stage": "Running", "currentSize": size}
    if placement is not None:
        status["placement"] = placement
    return job_obj("x", status=status, fixed=[0], min=1, max=3, **NAMES, **spec)


@pytest.mark.parametrize(
    ("placement", "size", "want"),
    [
        pytest.param(
            {"x-launcher": "n1", "x-worker-0": "n2", "x-worker-1": "n2"},
            3,
            ("n1", "n2", "n2"),
            id="every pod placed",
        ),
        pytest.param({"x-worker-1": "n2", "x-worker-7": "n9"}, 3, ("", "", "n2"), id="gaps"),
        pytest.param({"x-launcher": 3}, 2, ("", ""), id="a value that is not a node name"),
        pytest.param(None, 3, (), id="no map: nothing placed"),
        pytest.param(["n1"], 3, (), id="not a map"),
        pytest.param({"x-launcher": "n1"}, 0, (), id="size 0"),
    ],
)
def test_the_persisted_map_is_read_by_the_plugins_names(
    placement: Any, size: int, want: tuple[str, ...]
) -> None:
    view = job_view("FakeJob", FakePlugin(), running(placement, size=size), [], GPU)
    assert isinstance(view, JobView)
    assert view.placement == want


def test_the_view_carries_the_plugins_per_pod_demands_and_names() -> None:
    read = read_job("FakeJob", DemandingPlugin(), running(), GPU)
    assert isinstance(read, JobRead)
    view, naming = read
    assert (view.fixed_demands, view.replica_demand) == ((LAUNCHER,), WORKER)
    assert view.pod_demand(2) == WORKER
    assert naming == Naming(("x-launcher",), "x-worker-")
    assert naming.names(3) == ("x-launcher", "x-worker-0", "x-worker-1")


def unschedulable(name: str, *, since: float = -10, **kw: Any) -> PodInfo:
    return pod_info(pod_obj(name, job=kw.pop("job", "x"), unschedulable_since=since, **kw))


def test_the_view_quotes_kube_scheduler_on_the_earliest_pending_pod() -> None:
    def says(name: str, since: float, message: str) -> PodInfo:
        obj = pod_obj(name, job="x", unschedulable_since=since)
        obj["status"]["conditions"][0]["message"] = message
        return pod_info(obj)

    pods = [says("x-worker-1", -5, "later"), says("x-worker-0", -10, "earliest")]
    view = job_view("FakeJob", FakePlugin(), running(), pods, GPU)
    assert isinstance(view, JobView)
    assert (view.pending_since, view.pending_message) == (at(-10), "earliest")
    tie = [says("x-worker-1", -10, "b"), says("x-worker-0", -10, "a")]
    assert earliest_pending(tie) == (at(-10), "a"), "a tie goes to the first name"
    assert earliest_pending([]) == (None, "")
    waiting = job_view(
        "FakeJob", FakePlugin(), job_obj("x", status={"stage": "Waiting"}), pods, GPU
    )
    assert isinstance(waiting, JobView)
    assert (waiting.pending_since, waiting.pending_message) == (None, "")


def test_refused_nodes_are_where_kube_scheduler_refused_a_placed_pod() -> None:
    placement = {"x-launcher": "n1", "x-worker-0": "n2", "x-worker-1": "n3"}
    pods = [
        unschedulable("x-launcher-abcde", kind="Job", job="x-launcher"),  # the launcher Job's
        unschedulable("x-worker-0"),
        unschedulable("x-worker-1"),
        pod_info(pod_obj("x-worker-9", job="x", phase="Running", node="n4")),
    ]
    deleting = {"n3"}  # a preemption victim is still terminating there: not a refusal
    view = job_view(
        "FakeJob", FakePlugin(), running(placement), pods, GPU, deleting_on=deleting.__contains__
    )
    assert isinstance(view, JobView)
    assert view.refused_nodes == ("n1", "n2")
    assert view.pending_since == at(-10)
    waiting = job_obj("x", status={"stage": "Waiting", "placement": placement}, **NAMES)
    view = job_view("FakeJob", FakePlugin(), waiting, pods, GPU)
    assert isinstance(view, JobView)
    assert view.refused_nodes == ()


def test_status_persists_the_decisions_placement_by_name() -> None:
    naming = Naming(("x-launcher",), "x-worker-")
    decision = _decision(size=3, placement=("n1", "", "n3"))
    assert placement_map(decision, naming) == {"x-launcher": "n1", "x-worker-1": "n3"}
    view = job_view("FakeJob", FakePlugin(), running(), [], GPU)
    assert isinstance(view, JobView)
    fields = status_fields(decision, view=view, previous={}, now=at(10), naming=naming)
    assert fields["placement"] == {"x-launcher": "n1", "x-worker-1": "n3"}
    at_zero = status_fields(_decision(size=0), view=view, previous={}, now=at(10), naming=naming)
    assert at_zero["placement"] is None  # a merge patch removes it


async def test_a_pass_gives_the_core_demands_placements_and_uncharged_placed_pods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness(plugins=[DemandingPlugin()])
    h.add_nodes(2)
    placement = {"x-launcher": "n0", "x-worker-0": "n0", "x-worker-1": "n1"}
    h.add_job(
        "x",
        status={"stage": "Running", "currentSize": 3, "placement": placement},
        fixed=[0],
        min=3,
        max=3,
        **NAMES,
    )
    gpus = {"nvidia.com/gpu": "4"}
    pods = [
        pod_obj("x-launcher-abcde", kind="Job", job="x-launcher", requests={"cpu": "500m"}),
        pod_obj("x-worker-0", job="x", requests=gpus),
        pod_obj("x-worker-1", job="x", requests=gpus, node="n1"),
        pod_obj("stray", job="gone", requests=gpus, node="n1"),  # no placement covers it
    ]
    for pod in pods:
        pod["spec"].setdefault("nodeName", "n0")
        pod["status"]["phase"] = "Running"
        h.pods.on_event("ADDED", pod)
    seen: list[Snapshot] = []

    def spy(snapshot: Snapshot, now: datetime) -> Plan:
        seen.append(snapshot)
        return real(snapshot, now)

    real = schedule
    monkeypatch.setattr("lattice.scheduler.loop.runner.schedule", spy)
    h.loop.decide_in_thread = False
    await h.loop.run_once()
    (snapshot,) = seen
    (job,) = snapshot.jobs
    assert job.placement == ("n0", "n0", "n1")
    assert (job.fixed_demands, job.replica_demand) == ((LAUNCHER,), WORKER)
    free = {n.name: dict(n.free) for n in snapshot.nodes}
    assert free["n0"]["nvidia.com/gpu"] == 8  # the job's own placed pods are the core's
    assert free["n0"]["cpu"] == 64000
    assert free["n1"]["nvidia.com/gpu"] == 4  # the stray pod is charged until it is gone


@pytest.mark.parametrize("victim", [False, True])
async def test_a_pass_sees_a_refused_launcher_through_its_batch_job(
    monkeypatch: pytest.MonkeyPatch, victim: bool
) -> None:
    h = Harness(plugins=[DemandingPlugin()])
    h.add_nodes(2)
    placement = {"x-launcher": "n0", "x-worker-0": "n1", "x-worker-1": "n1"}
    status = {"stage": "Running", "currentSize": 3, "placement": placement}
    h.add_job("x", status=status, fixed=[0], min=3, max=3, **NAMES)
    launcher = pod_obj("x-launcher-abcde", kind="Job", job="x-launcher", unschedulable_since=-5)
    h.pods.on_event("ADDED", launcher)
    if victim:  # a pod of ours terminating on n0 (a preemption victim) is making room there
        h.pods.on_event(
            "ADDED", pod_obj("y-worker-0", job="y", phase="Running", node="n0", deleting=True)
        )
    seen: list[Snapshot] = []

    def spy(snapshot: Snapshot, now: datetime) -> Plan:
        seen.append(snapshot)
        return schedule(snapshot, now)

    monkeypatch.setattr("lattice.scheduler.loop.runner.schedule", spy)
    h.loop.decide_in_thread = False
    await h.loop.run_once()
    (job,) = seen[0].jobs
    assert job.placement == ("n0", "n1", "n1")
    assert job.refused_nodes == (() if victim else ("n0",))
    assert job.pending_since == at(-5)


def test_without_a_persisted_map_a_running_job_is_placed_where_its_pods_run() -> None:
    pods = [
        pod_info(pod_obj("x-launcher-abcde", kind="Job", job="x-launcher", node="n1")),
        pod_info(pod_obj("x-worker-0", job="x", phase="Running", node="n2")),
        pod_info(pod_obj("x-worker-1", job="x", node="n3", deleting=True)),  # going
    ]
    view = job_view("FakeJob", FakePlugin(), running(), pods, GPU)
    assert isinstance(view, JobView)
    assert view.placement == ("n1", "n2", "")
    # A persisted map wins; with no bound pod, nothing is placed.
    view = job_view("FakeJob", FakePlugin(), running({"x-worker-0": "n9"}), pods, GPU)
    assert isinstance(view, JobView)
    assert view.placement == ("", "n9", "")
    view = job_view("FakeJob", FakePlugin(), running(), pods[2:], GPU)
    assert isinstance(view, JobView)
    assert view.placement == ()


async def test_a_job_started_before_placements_keeps_its_pods_and_is_charged_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness(plugins=[DemandingPlugin()])
    h.add_nodes(1)
    h.add_job("x", status={"stage": "Running", "currentSize": 2}, min=2, max=2, prefix="x-w-")
    for i in range(2):
        pod = pod_obj(f"x-w-{i}", job="x", phase="Running", node="n0", requests={"cpu": "1"})
        h.pods.on_event("ADDED", pod)
    seen: list[Snapshot] = []

    def spy(snapshot: Snapshot, now: datetime) -> Plan:
        seen.append(snapshot)
        return schedule(snapshot, now)

    monkeypatch.setattr("lattice.scheduler.loop.runner.schedule", spy)
    h.loop.decide_in_thread = False
    await h.loop.run_once()
    (job,) = seen[0].jobs
    assert job.placement == ("n0", "n0")
    (node,) = seen[0].nodes
    assert dict(node.free)["cpu"] == 64000  # its pods are the core's to account, once
