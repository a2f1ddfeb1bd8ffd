"""The binding placement, on the reconciler's side: how a child is bound to its node
(``primitives.binding``), and what the generic reconciler creates, keeps and deletes while the
scheduler's ``placement`` map is set (``controllers.placement``), driven through MXJob and MPIJob
against the in-memory API (``harness.World``).
"""

from __future__ import annotations

import copy

import pytest

from lattice.frameworks.mpijob import MPIJobPlugin
from lattice.frameworks.mxjob import MXJobPlugin
from lattice.primitives.binding import bind_spec, bound_node
from lattice.primitives.objects import Obj
from lattice.runtime.projections import pod_info
from tests.unit.controllers.harness import World
from tests.unit.controllers.test_job_reconciler import MX_PODS, mpijob, mxjob

ON_NODE = {"key": "metadata.name", "operator": "In", "values": ["node-1"]}


def _terms(spec: Obj) -> list[Obj]:
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms: list[Obj] = required["nodeSelectorTerms"]
    return terms


# --- bind_spec ---------------------------------------------------------------------------------


def test_a_spec_without_terms_gets_one_term_naming_the_node() -> None:
    spec = {"containers": [{"name": "c", "image": "i"}]}
    bound = bind_spec(spec, "node-1")
    assert _terms(bound) == [{"matchFields": [ON_NODE]}]
    assert bound["containers"] == spec["containers"]
    assert "affinity" not in spec, "the input is not mutated"
    assert bound_node(bound) == "node-1"
    assert bound_node(spec) is None


def test_every_user_term_is_kept_and_each_gets_the_node() -> None:
    pool_a = {"key": "pool", "operator": "In", "values": ["a"]}
    zone = {"key": "zone", "operator": "Exists"}
    user_field = {"key": "metadata.name", "operator": "NotIn", "values": ["bad"]}
    preferred = [{"weight": 1, "preference": {"matchExpressions": [zone]}}]
    spec: Obj = {
        "containers": [],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [pool_a]},
                        {"matchExpressions": [zone], "matchFields": [user_field]},
                        {},
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": preferred,
            },
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
        },
    }
    before = copy.deepcopy(spec)
    bound = bind_spec(spec, "node-1")
    assert spec == before
    assert _terms(bound) == [
        {"matchExpressions": [pool_a], "matchFields": [ON_NODE]},
        {"matchExpressions": [zone], "matchFields": [user_field, ON_NODE]},
        {},  # matches no node: binding must not widen it
    ]
    node_affinity = bound["affinity"]["nodeAffinity"]
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    assert bound["affinity"]["podAntiAffinity"] == before["affinity"]["podAntiAffinity"]
    assert bind_spec(bound, "node-1") == bound, "binding twice adds nothing"


def test_binding_needs_a_node_name() -> None:
    with pytest.raises(ValueError, match="node must be a non-empty node name"):
        bind_spec({}, "")


def test_the_pod_projection_reads_the_binding() -> None:
    raw = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": bind_spec({"containers": []}, "node-7"),
    }
    assert pod_info(raw).bound_node == "node-7"
    assert pod_info({"metadata": {"name": "p"}, "spec": {}}).bound_node is None


# --- the reconciler ----------------------------------------------------------------------------


def _pod_spec(w: World, name: str) -> Obj:
    spec: Obj = w.get_obj("pods", name)["spec"]
    return spec


async def test_placed_pods_are_bound_and_unplaced_ones_are_not_created_yet() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob())
    w.grant("mx", 3, placement={"mx-scheduler-0": "node-1", "mx-worker-0": "node-2"})
    await w.reconcile("mx")
    assert w.names("pods") == ["mx-scheduler-0", "mx-worker-0"]
    assert bound_node(_pod_spec(w, "mx-scheduler-0")) == "node-1"
    assert bound_node(_pod_spec(w, "mx-worker-0")) == "node-2"
    assert _terms(_pod_spec(w, "mx-worker-0")) == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}
    ]

    w.grant("mx", 3, placement=dict.fromkeys(MX_PODS, "node-1") | {"mx-worker-0": "node-2"})
    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS
    assert bound_node(_pod_spec(w, "mx-worker-1")) == "node-1"
    assert not [c for c in w.calls if c[0] == "delete"]


async def test_the_users_required_terms_are_kept_on_the_created_pod() -> None:
    pool = {"key": "pool", "operator": "In", "values": ["a"]}
    gpu = {"key": "gpu", "operator": "Exists"}
    job = mxjob()
    for replica in job["spec"]["mxReplicaSpecs"].values():
        replica["template"]["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [pool]}, {"matchExpressions": [gpu]}]
                }
            }
        }
    w = World(MXJobPlugin())
    w.apply(job)
    w.grant("mx", 3, placement=dict.fromkeys(MX_PODS, "node-9"))
    await w.reconcile("mx")
    on_node = {"key": "metadata.name", "operator": "In", "values": ["node-9"]}
    for name in MX_PODS:
        assert _terms(_pod_spec(w, name)) == [
            {"matchExpressions": [pool], "matchFields": [on_node]},
            {"matchExpressions": [gpu], "matchFields": [on_node]},
        ]


async def test_without_a_placement_pods_are_created_unbound_as_before() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")
    assert w.names("pods") == MX_PODS
    assert all(bound_node(_pod_spec(w, n)) is None for n in MX_PODS)


async def test_a_pod_bound_elsewhere_is_replaced_without_charging_the_backoff_limit() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(backoffLimit=0))
    w.grant("mx", 3, placement=dict.fromkeys(MX_PODS, "node-1"))
    await w.reconcile("mx")
    w.set_node("mx-scheduler-0", "node-1")
    w.set_pod("mx-scheduler-0", "Running")
    w.set_pod("mx-worker-0", "Pending")  # kube-scheduler could not place it on node-1

    w.grant("mx", 3, placement=dict.fromkeys(MX_PODS, "node-1") | {"mx-worker-0": "node-2"})
    await w.reconcile("mx")
    deletes = [c for c in w.calls if c[0] == "delete"]
    assert deletes == [("delete", "Pod", "mx-worker-0")]
    assert "mx-worker-0" not in w.names("pods")

    await w.reconcile("mx")
    assert bound_node(_pod_spec(w, "mx-worker-0")) == "node-2"
    assert w.names("pods") == MX_PODS
    conditions = w.conditions("mx")
    assert "Failed" not in conditions
    assert "Restarting" not in conditions
    assert w.exec_status("mx")["replicaStatuses"]["Worker"]["failed"] == 0


async def test_a_running_pod_is_judged_by_the_node_it_runs_on() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob(), size=3)
    await w.reconcile("mx")  # created unbound, before the scheduler persisted a placement
    for name, node in zip(MX_PODS, ("node-1", "node-1", "node-2"), strict=True):
        w.set_node(name, node)
        w.set_pod(name, "Running")
    w.grant("mx", 3, placement={"mx-scheduler-0": "node-1", "mx-worker-0": "node-1"})
    await w.reconcile("mx")
    assert not [c for c in w.calls if c[0] == "delete"], "unplaced existing pods are kept"

    w.grant("mx", 3, placement=dict.fromkeys(MX_PODS, "node-1"))
    await w.reconcile("mx")
    assert [c for c in w.calls if c[0] == "delete"] == [("delete", "Pod", "mx-worker-1")]


async def test_the_mpi_launchers_pod_template_is_bound() -> None:
    w = World(MPIJobPlugin())
    w.apply(mpijob())
    w.grant("pi", 2, placement={"pi-worker-0": "node-1", "pi-worker-1": "node-2"})
    await w.reconcile("pi")
    assert w.names("pods") == ["pi-worker-0", "pi-worker-1"]
    assert w.names("jobs") == [], "the launcher is not placed: not created yet"

    w.grant(
        "pi",
        2,
        placement={"pi-launcher": "node-3", "pi-worker-0": "node-1", "pi-worker-1": "node-2"},
    )
    await w.reconcile("pi")
    assert w.names("jobs") == ["pi-launcher"]
    template = w.get_obj("jobs", "pi-launcher")["spec"]["template"]["spec"]
    assert bound_node(template) == "node-3"
    assert w.names("services") == ["pi"]


async def test_the_reconciler_never_writes_the_placement_and_a_new_one_enqueues_the_job() -> None:
    w = World(MXJobPlugin())
    w.apply(mxjob())
    placement = dict.fromkeys(MX_PODS, "node-1")
    w.grant("mx", 3, placement=placement)
    await w.reconcile("mx")
    patches = [c.body for c in w.client.served if c.verb == "patch"]
    assert patches
    assert all("lattice" not in (body.get("status") or {}) for body in patches)
    assert w.status("mx")["lattice"]["placement"] == placement

    w.enqueued.clear()
    w.grant("mx", 3, placement=placement | {"mx-worker-1": "node-2"})
    assert w.enqueued == ["ns/mx"], "a placement change is a decision the reconciler acts on"
