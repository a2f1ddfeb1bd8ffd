"""The core's cluster model: constraints, taints, multi-resource best fit, binding placements."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from lattice.scheduler.core import (
    Constraint,
    JobView,
    NodeView,
    PodDemand,
    Requirement,
    SchedulerConfig,
    Snapshot,
    Stage,
    Taint,
    Toleration,
    apply,
    resources,
    schedule,
)
from lattice.scheduler.core.placement import Cluster
from tests.unit.scheduler.builders import T0

GPU = "nvidia.com/gpu"
GIB = 1 << 30


def node(name: str, gpus: int = 4, *, cpu: int = 32, pool: str = "", **kw: object) -> NodeView:
    labels = (("pool", pool),) if pool else ()
    free = resources({GPU: gpus, "cpu": cpu * 1000, "memory": 128 * GIB, "pods": 110})
    return NodeView(name, gpus, free=free, labels=labels, **kw)  # type: ignore[arg-type]


def pod(gpus: int = 1, *, cpu: int = 1, where: Constraint | None = None, **kw: object) -> PodDemand:
    requests = resources({GPU: gpus, "cpu": cpu * 1000, "memory": GIB, "pods": 1})
    return PodDemand(requests=requests, constraint=where or Constraint(), units=gpus, **kw)  # type: ignore[arg-type]


POOL_A = Constraint(node_selector=(("pool", "a"),))


def job(name: str, size: int, demand: PodDemand, **kw: object) -> JobView:
    fields: dict[str, object] = {
        "key": f"TrainingJob/ns/{name}",
        "kind": "TrainingJob",
        "namespace": "ns",
        "name": name,
        "creation_time": T0,
        "min_size": size,
        "max_size": size,
        "replica_units": demand.units,
        "replica_demand": demand,
    }
    fields.update(kw)
    return JobView(**fields)  # type: ignore[arg-type]


def running(view: JobView, placement: tuple[str, ...]) -> JobView:
    return replace(
        view,
        stage=Stage.RUNNING,
        current_size=len(placement),
        placement=placement,
        submit_time=T0,
        queued_time=T0,
        admitted_time=T0,
        service_updated_at=T0,
        last_resize_time=T0,
    )


def plan_of(
    *jobs: JobView, nodes: tuple[NodeView, ...]
) -> dict[str, tuple[str, int, tuple[str, ...], str]]:
    plan = schedule(
        Snapshot(nodes=nodes, jobs=jobs, config=SchedulerConfig()), T0 + timedelta(minutes=1)
    )
    return {
        d.key.split("/")[-1]: (d.stage, d.size, d.placement, d.reason)
        for d in plan.decisions.values()
    }


# --------------------------------------------------------------------------- constraints


@pytest.mark.parametrize(
    ("requirement", "labels", "want"),
    [
        (Requirement("pool", "In", ("a", "b")), {"pool": "b"}, True),
        (Requirement("pool", "In", ("a",)), {}, False),
        (Requirement("pool", "NotIn", ("a",)), {}, True),
        (Requirement("pool", "NotIn", ("a",)), {"pool": "a"}, False),
        (Requirement("pool", "Exists"), {"pool": ""}, True),
        (Requirement("pool", "DoesNotExist"), {"pool": "a"}, False),
        (Requirement("gen", "Gt", ("3",)), {"gen": "4"}, True),
        (Requirement("gen", "Lt", ("3",)), {"gen": "x"}, False),
        (Requirement("metadata.name", "In", ("n1",), field=True), {}, True),
        (Requirement("metadata.name", "NotIn", ("n1",), field=True), {}, False),
        (Requirement("pool", "Sideways", ("a",)), {"pool": "a"}, False),
    ],
)
def test_requirements_follow_kube_scheduler(
    requirement: Requirement, labels: dict[str, str], want: bool
) -> None:
    assert requirement.matches(labels, "n1") is want


def test_terms_are_ored_and_an_empty_term_matches_nothing() -> None:
    a = Requirement("pool", "In", ("a",))
    b = Requirement("pool", "In", ("b",))
    assert Constraint(terms=((a,), (b,))).admits(name="n", labels={"pool": "b"})
    assert not Constraint(terms=((),)).admits(name="n", labels={"pool": "b"})
    assert Constraint(terms=None).admits(name="n", labels={})


@pytest.mark.parametrize(
    ("toleration", "want"),
    [
        (Toleration(key=GPU, operator="Exists"), True),
        (Toleration(operator="Exists"), True),
        (Toleration(key=GPU, value="present", effect="NoSchedule"), True),
        (Toleration(key=GPU, value="absent"), False),
        (Toleration(key=GPU, operator="Exists", effect="NoExecute"), False),
    ],
)
def test_tolerations_match_as_kube_scheduler(toleration: Toleration, want: bool) -> None:
    taint = Taint(GPU, "present", "NoSchedule")
    assert (
        Constraint(tolerations=(toleration,)).admits(name="n", labels={}, taints=(taint,)) is want
    )


def test_prefer_no_schedule_never_blocks() -> None:
    taint = Taint("soft", "", "PreferNoSchedule")
    assert Constraint().admits(name="n", labels={}, taints=(taint,))


# --------------------------------------------------------------------------- the cluster


def test_best_fit_packs_gpu_pods_and_sends_cpu_pods_to_nodes_without_gpus() -> None:
    cluster = Cluster([node("cpu-0", 0), node("gpu-0", 8), node("gpu-1", 4)])
    assert cluster.place(pod(0)) == "cpu-0"
    assert cluster.place(pod(4)) == "gpu-1"
    assert cluster.place(pod(2)) == "gpu-0"


def test_a_gang_is_placed_whole_or_not_at_all() -> None:
    cluster = Cluster([node("n0", 4), node("n1", 4)])
    assert cluster.place_all([pod(3), pod(3), pod(3)]) is None
    assert cluster.unit_free() == 0  # no unit resource in this model
    assert cluster.total == Cluster([node("n0", 4), node("n1", 4)]).total
    assert cluster.place_all([pod(2), pod(2), pod(4)]) == ["n1", "n1", "n0"]


def test_a_mixed_gang_that_greedy_order_strands_is_tried_scarcest_kind_first() -> None:
    """GPU-first order puts the 2-GPU pod on n1 (the fullest GPU node) and so takes the memory
    the third big-memory pod needs there; trying the kind with the fewest slots to spare first
    places the gang (as a later pass would, with more of the cluster taken)."""

    def at(name: str, **free: int) -> NodeView:
        return NodeView(name, free.get(GPU, 0), free=resources({"pods": 8, **free}))

    nodes = (
        at("n0", **{GPU: 4, "cpu": 4000, "memory": 64}),
        at("n1", **{GPU: 3, "cpu": 10000, "memory": 63}),
        at("n3", cpu=3000, memory=62),
        at("n4", cpu=16000, memory=64),
    )
    small = PodDemand(requests=resources({"cpu": 500, "memory": 1, "pods": 1}))
    gpu = PodDemand(requests=resources({GPU: 2, "cpu": 500, "memory": 32, "pods": 1}), units=2)
    big = PodDemand(requests=resources({"cpu": 6000, "memory": 32, "pods": 1}))
    assert Cluster(nodes).place_all([small, gpu, big, big, big]) == ["n3", "n0", "n4", "n4", "n1"]


def test_fit_is_multi_dimensional() -> None:
    cluster = Cluster([node("n0", 4, cpu=2)])
    assert cluster.place(pod(1, cpu=3)) is None
    assert "no node eligible has 3 cpu free (1 node match; largest free 2)" in cluster.explain(
        [pod(1, cpu=3)]
    )


def test_exclusive_pods_take_whole_nodes() -> None:
    cluster = Cluster([node("n0", 4), node("n1", 4)])
    whole = pod(1, exclusive=True)
    assert cluster.place(pod(1)) == "n0"
    assert cluster.place(whole) == "n1"
    assert cluster.place(pod(1)) == "n0"  # n1 is held whole
    assert cluster.place(whole) is None


def test_unschedulable_nodes_keep_what_they_hold_but_get_nothing_new() -> None:
    cluster = Cluster([node("n0", 4, schedulable=False)])
    assert cluster.reserve("n0", pod(2))
    assert cluster.place(pod(1)) is None
    assert cluster.explain([pod(1)]) == "no schedulable node"


def test_the_message_names_the_binding_constraint() -> None:
    nodes = [node("a0", 4, pool="a"), node("a1", 4, pool="a"), node("b0", 4, pool="b")]
    cluster = Cluster(nodes)
    for n in ("a0", "a1"):
        cluster.reserve(n, pod(4))
    assert cluster.explain([pod(4, where=POOL_A)]) == (
        "no node matching pool=a has 4 nvidia.com/gpu free (2 nodes match; largest free 0)"
    )
    assert cluster.explain([pod(1, where=Constraint(node_selector=(("pool", "c"),)))]) == (
        "no schedulable node matches pool=c"
    )
    tainted = Cluster([node("t0", 4, taints=(Taint(GPU, "present"),))])
    assert tainted.explain([pod(1)]) == (
        "every node has a taint the pod does not tolerate (nvidia.com/gpu=present:NoSchedule)"
    )
    fpga = PodDemand(requests=resources({"example.com/fpga": 1}))
    assert Cluster(nodes).explain([fpga]) == ("no node has 1 example.com/fpga")


# --------------------------------------------------------------------------- the core


def test_a_job_is_admitted_only_onto_nodes_its_pods_may_use() -> None:
    nodes = (node("a0", 4, pool="a"), node("b0", 4, pool="b"), node("b1", 4, pool="b"))
    full = running(job("full", 1, pod(4)), ("a0",))
    got = plan_of(full, job("w", 1, pod(4, where=POOL_A)), nodes=nodes)
    assert got["w"][:3] == ("Waiting", 0, ())
    assert got["w"][3] == (
        "Waiting at position 1: no node matching pool=a has 4 nvidia.com/gpu free "
        "(1 node match; largest free 0)"
    )
    assert got["full"][:3] == ("Running", 1, ("a0",))


def test_a_tolerated_taint_is_capacity() -> None:
    nodes = (node("t0", 4, taints=(Taint(GPU, "present", "NoSchedule"),)),)
    tolerant = pod(4, where=Constraint(tolerations=(Toleration(key=GPU, operator="Exists"),)))
    assert plan_of(job("t", 1, tolerant), nodes=nodes)["t"][:3] == ("Running", 1, ("t0",))
    assert plan_of(job("u", 1, pod(4)), nodes=nodes)["u"][:2] == ("Waiting", 0)


def test_running_pods_never_move_and_growth_places_only_new_replicas() -> None:
    nodes = (node("n0", 4), node("n1", 4), node("n2", 4))
    elastic = running(job("e", 1, pod(2), max_size=4), ("n1", "n1"))
    got = plan_of(elastic, nodes=nodes)
    assert got["e"][:3] == ("Running", 4, ("n1", "n1", "n0", "n0"))


def test_a_placed_pod_on_a_gone_or_refusing_node_is_placed_again_at_once() -> None:
    nodes = (node("n0", 4), node("n1", 4))
    gone = running(job("g", 2, pod(2)), ("n0", "gone"))
    assert plan_of(gone, nodes=nodes)["g"][:3] == ("Running", 2, ("n0", "n0"))
    refused = replace(
        running(job("r", 2, pod(2)), ("n0", "n1")), refused_nodes=("n1",), pending_since=T0
    )
    assert plan_of(refused, nodes=nodes)["r"][:3] == ("Running", 2, ("n0", "n0"))


def test_a_fresh_refusal_is_given_time_for_kube_scheduler_to_retry() -> None:
    nodes = (node("n0", 4), node("n1", 4))
    since = T0 + timedelta(seconds=50)  # refused 10 s before the pass, under the 30 s grace
    view = replace(
        running(job("r", 2, pod(2)), ("n0", "n1")), refused_nodes=("n1",), pending_since=since
    )
    snapshot = Snapshot(nodes=nodes, jobs=(view,))
    plan = schedule(snapshot, T0 + timedelta(minutes=1))
    assert plan.decisions[view.key].placement == ("n0", "n1")
    assert plan.next_wakeup == since + SchedulerConfig().refusal_grace


def test_preemption_stops_the_job_in_the_way_not_merely_the_latest() -> None:
    nodes = (node("a0", 4, pool="a"), node("b0", 4, pool="b"))
    in_a = running(job("in-a", 1, pod(4)), ("a0",))
    in_b = running(replace(job("in-b", 1, pod(4)), queued_time=T0), ("b0",))
    in_b = replace(in_b, queued_time=T0 + timedelta(seconds=1))
    urgent = job("urgent", 1, pod(4, where=POOL_A), priority=10)
    got = plan_of(in_a, in_b, urgent, nodes=nodes)
    assert got["urgent"][:3] == ("Running", 1, ("a0",))
    assert got["in-a"][:2] == ("Waiting", 0)
    assert got["in-b"][:3] == ("Running", 1, ("b0",))


def test_a_plan_applied_and_rescheduled_is_stable() -> None:
    nodes = (node("a0", 4, pool="a"), node("b0", 4, pool="b"), node("b1", 2, pool="b"))
    jobs = (
        job("x", 2, pod(2, where=POOL_A)),
        job("y", 1, pod(1), max_size=6),
        job("z", 1, pod(4), priority=5),
    )
    snapshot = Snapshot(nodes=nodes, jobs=jobs)
    now = T0 + timedelta(minutes=1)
    first = schedule(snapshot, now)
    again = schedule(apply(snapshot, first), now)
    assert again.changed_keys() == ()
    assert {k: d.placement for k, d in again.decisions.items()} == {
        k: d.placement for k, d in first.decisions.items()
    }


def test_refused_pods_with_nowhere_else_to_go_requeue_with_backoff() -> None:
    nodes = (node("n0", 4),)
    refused = replace(
        running(job("r", 2, pod(2)), ("n0", "n0")), refused_nodes=("n0",), pending_since=T0
    )
    stage, size, placement, reason = plan_of(refused, nodes=nodes)["r"]
    assert (stage, size, placement) == ("RequeueCooldown", 0, ())
    assert reason.startswith("Requeued: kube-scheduler refused its pods on n0")
