"""The loop's nodes: every node listed with its free resource vector, labels, taints and
schedulability; live pods that no placement covers charged against it (issue 26's invariant);
and what of a node or pod wakes a pass."""

from __future__ import annotations

from typing import Any

import pytest

from lattice.frameworks.base import OperatorContext
from lattice.primitives.objects import Obj
from lattice.runtime.projections import NodeInfo, PodInfo, foreign_pod_usage, node_info, pod_info
from lattice.scheduler.core import NodeView
from lattice.scheduler.core.model import Taint
from lattice.scheduler.loop import covered, node_schedulable, node_views
from lattice.scheduler.loop.nodes import node_signature, pod_signature
from tests.unit.scheduler.test_loop_snapshot import foreign_obj, node_obj, pod_obj

GPU_RES = "nvidia.com/gpu"
GPU = OperatorContext(scheduling_unit=GPU_RES)
NODE = OperatorContext(scheduling_unit="node")
GI = 2**30


def allocatable(gpus: int = 8) -> tuple[tuple[str, int], ...]:
    """``node_obj``'s allocatable (64 cpus, 256Gi, ``gpus``, 110 pods)."""
    return (("cpu", 64000), ("memory", 256 * GI), (GPU_RES, gpus), ("pods", 110))


def ours(name: str, node: str | None, **kw: Any) -> PodInfo:
    kw.setdefault("phase", "Running")
    return pod_info(pod_obj(name, job=kw.pop("job", "a"), node=node, **kw))


def test_every_node_is_listed_with_labels_taints_and_schedulability() -> None:
    nodes = [
        node_info(node_obj("ok", labels={"pool": "gpu"})),
        node_info(node_obj("not-ready", ready=False)),
        node_info(node_obj("cordoned", unschedulable=True)),
        node_info(node_obj("tainted", taints=[(GPU_RES, "present", "NoSchedule")])),
        node_info(node_obj("prefer", taints=[("t", "PreferNoSchedule")])),
    ]
    ctx = OperatorContext(scheduling_unit=GPU_RES, node_selector=(("pool", "gpu"),))
    views = {v.name: v for v in node_views(nodes, ctx=ctx)}
    assert list(views) == ["cordoned", "not-ready", "ok", "prefer", "tainted"]  # sorted, all
    assert views["ok"] == NodeView(
        "ok", 8, free=allocatable(), labels=(("pool", "gpu"),), taints=(), schedulable=True
    )
    assert not views["not-ready"].schedulable
    assert not views["cordoned"].schedulable
    assert views["cordoned"].free_units == 0  # no capacity figure: nothing new goes there
    assert views["cordoned"].free == allocatable()  # but what is placed there is accounted
    assert views["tainted"].taints == (Taint(GPU_RES, "present", "NoSchedule"),)
    assert views["tainted"].schedulable  # the pods' tolerations decide
    assert views["prefer"].taints == (Taint("t", "", "PreferNoSchedule"),)


def test_foreign_pods_take_every_resource_they_request_and_a_pod_slot() -> None:
    raw = node_obj("a")
    raw["status"]["allocatable"]["pods"] = "110"
    usage = [
        foreign_pod_usage(foreign_obj("x", "a", {GPU_RES: "3", "cpu": "1"})),
        foreign_pod_usage(foreign_obj("y", "a", {"memory": "1Gi", "example.com/fpga": "1"})),
        foreign_pod_usage(foreign_obj("z", "b", {GPU_RES: "8"})),
    ]
    (view,) = node_views([node_info(raw)], ctx=GPU, foreign=[u for u in usage if u])
    assert view.free == (
        ("cpu", 63000),
        ("memory", 255 * GI),
        (GPU_RES, 5),
        ("pods", 108),
    )  # a resource the node does not offer (fpga) is not listed
    assert view.free_units == 5


def test_an_over_committed_resource_has_nothing_free() -> None:
    usage = foreign_pod_usage(foreign_obj("x", "a", {GPU_RES: "16"}))
    assert usage is not None
    (view,) = node_views([node_info(node_obj("a"))], ctx=GPU, foreign=[usage])
    assert dict(view.free).get(GPU_RES) is None
    assert view.free_units == 0


def test_node_mode_counts_one_unit_per_schedulable_node() -> None:
    nodes = [node_info(node_obj("a", gpus=None)), node_info(node_obj("b", unschedulable=True))]
    usage = foreign_pod_usage(foreign_obj("gpu", "a", {GPU_RES: "1"}))
    assert usage is not None
    views = node_views(nodes, ctx=NODE, foreign=[usage])
    assert [(v.name, v.free_units) for v in views] == [("a", 1), ("b", 0)]


def test_live_pods_of_ours_count_until_a_placement_covers_them_or_they_are_gone() -> None:
    cpu = {"cpu": "4"}
    pods = [
        ours("placed", "a", requests=cpu),  # the placement covers it: the core accounts it
        ours("elsewhere", "a", requests=cpu),  # placed on b, still bound to a: charged here
        ours("orphan", "a", requests=cpu),  # no placement (a Wrong job's pod): charged
        ours("deleting", "a", requests=cpu, deleting=True),  # live until gone: charged
        ours("done", "a", requests=cpu, phase="Succeeded"),  # gone: free
        ours("failed", "a", requests=cpu, phase="Failed"),  # gone: free
        ours("unbound", None, requests=cpu, phase="Pending"),  # on no node yet
        ours("launcher-x1", "a", requests=cpu, kind="Job", job="j-launcher"),  # via its Job
    ]
    placed = {("ns", "placed"): "a", ("ns", "elsewhere"): "b", ("ns", "j-launcher"): "a"}
    (view,) = node_views([node_info(node_obj("a"))], ctx=GPU, pods=pods, placed=placed)
    assert dict(view.free)["cpu"] == 64000 - 3 * 4000
    assert [p.name for p in pods if covered(p, placed)] == ["placed", "launcher-x1"]


def test_a_pod_is_covered_only_in_its_own_namespace_on_its_node() -> None:
    pod = ours("w-0", "a")
    assert covered(pod, {("ns", "w-0"): "a"})
    assert not covered(ours("w-0", None, phase="Pending"), {("ns", "w-0"): "a"})
    assert not covered(ours("w-0", None, phase="Pending"), {})
    assert not covered(pod, {("other", "w-0"): "a"})
    assert not covered(pod, {("ns", "w-0"): "b"})


@pytest.mark.parametrize(
    ("changed", "relevant"),
    [
        pytest.param({"rv": "2"}, False, id="a heartbeat"),
        pytest.param({"ready": False}, True, id="readiness"),
        pytest.param({"unschedulable": True}, True, id="a cordon"),
        pytest.param({"gpus": 4}, True, id="allocatable"),
        pytest.param({"labels": {"pool": "b"}}, True, id="labels"),
        pytest.param({"taints": [("k", "v", "NoSchedule")]}, True, id="taints"),
    ],
)
def test_node_signature(changed: Obj, relevant: bool) -> None:
    before: NodeInfo = node_info(node_obj("a"))
    after = node_info(node_obj("a", **changed))
    assert (node_signature(before) != node_signature(after)) is relevant
    assert node_schedulable(after) is not (
        changed.get("ready") is False or bool(changed.get("unschedulable"))
    )


@pytest.mark.parametrize(
    ("changed", "relevant"),
    [
        pytest.param({"rv": "2"}, False, id="status noise"),
        pytest.param({"phase": "Running"}, True, id="running"),
        pytest.param({"node": "n1"}, True, id="bound"),
        pytest.param({"unschedulable_since": 5}, True, id="unschedulable"),
        pytest.param({"deleting": True}, True, id="deleting"),
        pytest.param({"requests": {"cpu": "2"}}, True, id="requests"),
    ],
)
def test_pod_signature(changed: Obj, relevant: bool) -> None:
    before = pod_info(pod_obj("w", job="a"))
    after = pod_info(pod_obj("w", job="a", **changed))
    assert (pod_signature(before) != pod_signature(after)) is relevant
