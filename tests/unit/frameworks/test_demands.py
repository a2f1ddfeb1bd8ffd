"""Per-pod demands: requests, constraints (selector, node affinity, tolerations), units, and the
problems a malformed template gives instead of a crash."""

from __future__ import annotations

from typing import Any

import pytest

from lattice.frameworks.base import InvalidJob, OperatorContext, Problem
from lattice.frameworks.demands import pod_constraint, pod_demand, template_problems
from lattice.primitives.objects import Obj
from lattice.scheduler.core.model import Requirement, Taint, Toleration

GPU = "nvidia.com/gpu"
NODE = OperatorContext()
GPU_CTX = OperatorContext(scheduling_unit=GPU)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
WHERE = f"s.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"


def spec(**more: Any) -> Obj:
    container = {"name": "c", "image": "i", "resources": {"limits": {GPU: 2, "cpu": "1"}}}
    return {"containers": [container], **more}


def affinity(*terms: Obj) -> Obj:
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, op: str, *values: str) -> Obj:
    return {"key": key, "operator": op, "values": list(values)}


def test_selector_merges_with_the_operators_and_the_operator_wins() -> None:
    ctx = OperatorContext(node_selector=(("pool", "a"),))
    constraint = pod_constraint(spec(nodeSelector={"pool": "b", "zone": "z"}), ctx)
    assert constraint.node_selector == (("pool", "a"), ("zone", "z"))
    assert constraint.terms is None
    # The pod asks for GPUs: it tolerates their taint, as the ExtendedResourceToleration
    # admission plugin (and Lattice's binding) makes it.
    assert constraint.tolerations == (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),)


def test_a_pod_without_extended_resources_gets_no_added_toleration() -> None:
    constraint = pod_constraint({"containers": [{"name": "c"}]}, OperatorContext())
    assert constraint.tolerations == ()


def test_required_node_affinity_becomes_terms() -> None:
    raw = affinity(
        {
            "matchExpressions": [expr("pool", "In", "a", "b"), expr("gpu", "Exists")],
            "matchFields": [expr("metadata.name", "In", "n1")],
        },
        {"matchExpressions": [expr("size", "Gt", "3")]},
    )
    constraint = pod_constraint(spec(affinity=raw), NODE)
    assert constraint.terms == (
        (
            Requirement("pool", "In", ("a", "b")),
            Requirement("gpu", "Exists"),
            Requirement("metadata.name", "In", ("n1",), field=True),
        ),
        (Requirement("size", "Gt", ("3",)),),
    )
    assert constraint.admits(name="n1", labels={"pool": "b", "gpu": "x"})
    assert constraint.admits(name="n9", labels={"size": "4"})
    assert not constraint.admits(name="n2", labels={"pool": "b", "gpu": "x"})


def test_preferred_affinity_and_pod_affinity_constrain_nothing() -> None:
    raw: Obj = {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
        "podAntiAffinity": {REQUIRED: []},
    }
    assert pod_constraint(spec(affinity=raw), NODE).terms is None


def test_tolerations_decide_which_taints_a_pod_accepts() -> None:
    tolerations = [
        {"key": GPU, "operator": "Exists", "effect": "NoSchedule"},
        {"key": "team", "value": "ml"},
    ]
    constraint = pod_constraint(spec(tolerations=tolerations), NODE)
    assert constraint.tolerations == (
        Toleration(GPU, "Exists", "", "NoSchedule"),
        Toleration("team", "Equal", "ml", ""),
    )
    assert constraint.admits(name="n", labels={}, taints=[Taint(GPU, "present", "NoSchedule")])
    assert constraint.admits(name="n", labels={}, taints=[Taint("team", "ml", "NoExecute")])
    assert not constraint.admits(name="n", labels={}, taints=[Taint("team", "cv", "NoSchedule")])


@pytest.mark.parametrize(
    ("ctx", "worker", "exclusive", "units", "is_exclusive"),
    [
        pytest.param(GPU_CTX, True, True, 2, False, id="gpu mode: the pod's gpus, never exclusive"),
        pytest.param(GPU_CTX, False, False, 2, False, id="gpu mode: an auxiliary pod's gpus too"),
        pytest.param(NODE, True, True, 1, True, id="node mode: an exclusive worker"),
        pytest.param(NODE, True, False, 1, False, id="node mode: a shared worker"),
        pytest.param(NODE, False, False, 0, False, id="node mode: an auxiliary pod"),
    ],
)
def test_units_and_exclusivity(
    ctx: OperatorContext, worker: bool, exclusive: bool, units: int, is_exclusive: bool
) -> None:
    pod = pod_demand(spec(), ctx, worker=worker, exclusive=exclusive)
    assert pod.requests == (("cpu", 1000), (GPU, 2), ("pods", 1))
    assert (pod.units, pod.exclusive) == (units, is_exclusive)


def test_a_cpu_only_pod_holds_no_gpu() -> None:
    cpu = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
    assert pod_demand(cpu, GPU_CTX, worker=True).units == 0


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param(
            {"nodeSelector": {"a": 1}},
            Problem("s.nodeSelector", "must be a map of label keys to string values"),
            id="a selector value that is not a string",
        ),
        pytest.param(
            {"affinity": []}, Problem("s.affinity", "must be an object"), id="affinity a list"
        ),
        pytest.param(
            {"affinity": affinity()},
            Problem(WHERE, "must be a non-empty list of terms"),
            id="no terms",
        ),
        pytest.param(
            {"affinity": affinity({"matchExpressions": [expr("a", "Near", "x")]})},
            Problem(
                f"{WHERE}[0].matchExpressions[0].operator",
                "must be one of DoesNotExist, Exists, Gt, In, Lt, NotIn, got 'Near'",
            ),
            id="an unknown operator",
        ),
        pytest.param(
            {"affinity": affinity({"matchExpressions": [expr("a", "In")]})},
            Problem(f"{WHERE}[0].matchExpressions[0].values", "must be non-empty for In"),
            id="In without values",
        ),
        pytest.param(
            {"affinity": affinity({"matchExpressions": [expr("a", "Exists", "x")]})},
            Problem(f"{WHERE}[0].matchExpressions[0].values", "must be empty for Exists"),
            id="Exists with values",
        ),
        pytest.param(
            {"affinity": affinity({"matchExpressions": [expr("a", "Gt", "x")]})},
            Problem(f"{WHERE}[0].matchExpressions[0].values", "must be a single integer for Gt"),
            id="Gt not an integer",
        ),
        pytest.param(
            {"affinity": affinity({"matchFields": [expr("metadata.labels", "In", "x")]})},
            Problem(
                f"{WHERE}[0].matchFields[0].key",
                "must be metadata.name (the only node field), got 'metadata.labels'",
            ),
            id="a field other than the name",
        ),
        pytest.param(
            {"affinity": affinity({"matchFields": [expr("metadata.name", "In", "a", "b")]})},
            Problem(f"{WHERE}[0].matchFields[0].values", "must hold exactly one node name for In"),
            id="two node names",
        ),
        pytest.param(
            {"affinity": affinity({"matchExpressions": "x"})},
            Problem(f"{WHERE}[0].matchExpressions", "must be a list"),
            id="expressions not a list",
        ),
        pytest.param(
            {"affinity": affinity({"matchExpressions": [{"operator": "Exists"}]})},
            Problem(f"{WHERE}[0].matchExpressions[0].key", "must be a non-empty string"),
            id="no key",
        ),
        pytest.param(
            {"tolerations": {"key": "a"}}, Problem("s.tolerations", "must be a list"), id="a map"
        ),
        pytest.param(
            {"tolerations": [{"key": "a", "operator": "Maybe"}]},
            Problem("s.tolerations[0].operator", "must be Equal or Exists, got 'Maybe'"),
            id="an unknown toleration operator",
        ),
        pytest.param(
            {"tolerations": [{"value": "x"}]},
            Problem("s.tolerations[0].operator", "must be Exists when the key is empty"),
            id="no key without Exists",
        ),
        pytest.param(
            {"tolerations": [{"key": "a", "effect": "Never"}]},
            Problem(
                "s.tolerations[0].effect",
                "must be NoSchedule, PreferNoSchedule, NoExecute or empty, got 'Never'",
            ),
            id="an unknown effect",
        ),
        pytest.param(
            {"tolerations": [{"key": 3}]},
            Problem("s.tolerations[0]", "key, operator, value and effect must be strings"),
            id="a key that is not a string",
        ),
        pytest.param(
            {"overhead": {"cpu": "x"}},
            Problem("s.overhead[cpu]", "must be a quantity, got 'x'"),
            id="a malformed overhead",
        ),
    ],
)
def test_a_malformed_template_gives_a_problem_naming_the_field(raw: Obj, problem: Problem) -> None:
    assert template_problems(spec(**raw), field="s") == [problem]
    with pytest.raises(InvalidJob) as info:
        pod_demand(spec(**raw), NODE, worker=True)
    assert [p.message for p in info.value.problems] == [problem.message]


def test_a_well_formed_template_has_no_problem() -> None:
    raw = spec(
        nodeSelector={"pool": "a"},
        affinity=affinity({"matchExpressions": [expr("zone", "NotIn", "z")]}),
        tolerations=[{"operator": "Exists"}],
    )
    assert template_problems(raw, field="s") == []
    assert template_problems([], field="s") == [Problem("s", "must be an object")]
