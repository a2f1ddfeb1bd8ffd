"""The building blocks every plugin shares (``naming``, ``manifests``, ``podspec``, ``units``,
``failures``, ``kubeflow``): names, labels, owner references, env, placement, Services, units and
failure classification. Pods are read through ``lattice.runtime.projections.pod_info`` so the
helpers are checked against the real ``PodView`` the informer cache serves.
"""

from __future__ import annotations

import copy

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from lattice.frameworks.base import MANAGED_LABEL, Problem
from lattice.frameworks.failures import (
    exit_code,
    is_disrupted,
    is_retryable_exit_code,
    must_recreate,
)
from lattice.frameworks.kubeflow import validation_problems
from lattice.frameworks.manifests import (
    container_port,
    headless_service,
    pod_manifest,
    service_ports,
)
from lattice.frameworks.naming import child_name, owner_reference, replica_labels, replica_selector
from lattice.frameworks.podspec import (
    pod_restart_policy,
    with_env,
    with_exclusive_node,
    with_node_selector,
)
from lattice.frameworks.units import quantity_problems, quantity_units
from lattice.primitives.objects import Obj
from lattice.runtime.projections import pod_info

OWNER = owner_reference(api_version="breezeml.ai/v1", kind="TrainingJob", name="j", uid="u-1")


def raw_pod(
    *,
    phase: str = "Failed",
    reason: str | None = None,
    disruption: str | None = None,
    statuses: list[Obj] | None = None,
) -> Obj:
    status: Obj = {"phase": phase, "containerStatuses": statuses or []}
    if reason:
        status["reason"] = reason
    if disruption:
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": disruption}
        ]
    return {"metadata": {"name": "j-worker-0", "namespace": "ns"}, "spec": {}, "status": status}


def terminated(name: str, code: int) -> Obj:
    return {"name": name, "state": {"terminated": {"exitCode": code, "reason": "Error"}}}


# --------------------------------------------------------------------------- identity


@pytest.mark.parametrize(
    ("job", "rtype", "index", "expected"),
    [
        pytest.param("j", "Worker", 0, "j-worker-0", id="worker type is lower-cased"),
        pytest.param("train", "Launcher", 12, "train-launcher-12", id="any type and index"),
        pytest.param("j", "TunerServer", 1, "j-tunerserver-1", id="camel case collapses"),
        pytest.param("j", "a/b", 0, "j-a-b-0", id="slashes become dashes as upstream"),
    ],
)
def test_child_names_are_a_pure_function_of_job_type_and_index(
    job: str, rtype: str, index: int, expected: str
) -> None:
    assert child_name(job, rtype, index) == expected


def test_owner_reference_is_a_blocking_controller_reference() -> None:
    assert OWNER == {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "name": "j",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


@pytest.mark.parametrize(
    ("master", "role"),
    [
        pytest.param(True, {"training.kubeflow.org/job-role": "master"}, id="master gets job-role"),
        pytest.param(False, {}, id="others carry no job-role"),
    ],
)
def test_replica_labels_are_upstream_keys_plus_the_managed_label(
    master: bool, role: dict[str, str]
) -> None:
    labels = replica_labels(
        job_name="j", replica_type="Worker", index=3, operator_name="op", master=master
    )
    assert labels == {
        "training.kubeflow.org/operator-name": "op",
        "training.kubeflow.org/job-name": "j",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "3",
        MANAGED_LABEL: "true",
        **role,
    }


def test_the_selector_picks_one_replica_by_job_type_and_index() -> None:
    assert replica_selector(job_name="j", replica_type="Worker", index=1) == {
        "training.kubeflow.org/job-name": "j",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }


# --------------------------------------------------------------------------- manifests


def test_pod_manifest_keeps_template_metadata_our_labels_win_and_spec_is_copied() -> None:
    template = {
        "metadata": {"labels": {"team": "a", MANAGED_LABEL: "no"}, "annotations": {"x": "1"}}
    }
    spec = {"containers": [{"name": "c", "env": []}]}
    pod = pod_manifest(
        name="j-worker-0",
        namespace="ns",
        template=template,
        labels={MANAGED_LABEL: "true"},
        owner=OWNER,
        spec=spec,
    )
    assert pod["metadata"] == {
        "name": "j-worker-0",
        "namespace": "ns",
        "labels": {"team": "a", MANAGED_LABEL: "true"},
        "annotations": {"x": "1"},
        "ownerReferences": [OWNER],
    }
    pod["spec"]["containers"][0]["env"].append({"name": "X"})
    pod["metadata"]["annotations"]["y"] = "2"
    assert spec == {"containers": [{"name": "c", "env": []}]}
    assert template["metadata"]["annotations"] == {"x": "1"}


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        pytest.param(
            None,
            [{"name": "tj-port", "port": 23456, "targetPort": 23456}],
            id="no container ports: the default port",
        ),
        pytest.param(
            [{"name": "tj-port", "containerPort": 9000}],
            [{"name": "tj-port", "port": 9000, "targetPort": 9000}],
            id="the container's named port",
        ),
        pytest.param(
            [{"containerPort": 80, "protocol": "UDP"}, {"name": "b", "containerPort": 81}],
            [
                {"name": "port-80", "port": 80, "targetPort": 80, "protocol": "UDP"},
                {"name": "b", "port": 81, "targetPort": 81},
            ],
            id="unnamed ports get a name, protocol is kept",
        ),
    ],
)
def test_service_ports_mirror_the_container_or_default(
    ports: list[Obj] | None, expected: list[Obj]
) -> None:
    container: Obj = {"name": "c"} if ports is None else {"name": "c", "ports": ports}
    assert service_ports(container, default_name="tj-port", default_port=23456) == expected


def test_headless_service_selects_one_pod_and_is_owned() -> None:
    selector = replica_selector(job_name="j", replica_type="Worker", index=0)
    service = headless_service(
        name="j-worker-0",
        namespace="ns",
        labels={MANAGED_LABEL: "true"},
        selector=selector,
        ports=[{"name": "p", "port": 1}],
        owner=OWNER,
    )
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "j-worker-0",
            "namespace": "ns",
            "labels": {MANAGED_LABEL: "true"},
            "ownerReferences": [OWNER],
        },
        "spec": {"clusterIP": "None", "selector": selector, "ports": [{"name": "p", "port": 1}]},
    }


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        pytest.param([{"name": "p", "containerPort": 7}], 7, id="found by name"),
        pytest.param([{"name": "q", "containerPort": 7}], None, id="other names do not count"),
        pytest.param(None, None, id="no ports"),
    ],
)
def test_container_port_by_name(ports: list[Obj] | None, expected: int | None) -> None:
    assert container_port({"ports": ports} if ports else {}, "p") == expected


# --------------------------------------------------------------------------- spec edits


@pytest.mark.parametrize(
    ("user", "ours", "defaults", "expected"),
    [
        pytest.param(None, [("A", "1")], [], [("A", "1")], id="no user env: ours only"),
        pytest.param(
            [{"name": "RANK", "value": "9"}, {"name": "KEEP", "value": "k"}],
            [("RANK", "0")],
            [],
            [("KEEP", "k"), ("RANK", "0")],
            id="ours override by name, the user's others are kept",
        ),
        pytest.param(
            [{"name": "D", "value": "user"}],
            [],
            [("D", "ours"), ("E", "ours")],
            [("D", "user"), ("E", "ours")],
            id="defaults only fill names the user did not set",
        ),
    ],
)
def test_env_merge(
    user: list[Obj] | None,
    ours: list[tuple[str, str]],
    defaults: list[tuple[str, str]],
    expected: list[tuple[str, str]],
) -> None:
    container: Obj = {"name": "c"} if user is None else {"name": "c", "env": user}
    before = copy.deepcopy(container)
    merged = with_env(container, ours, defaults=defaults)
    assert [(e["name"], e["value"]) for e in merged["env"]] == expected
    assert container == before


def test_env_merge_keeps_value_from_entries_of_the_user() -> None:
    ref = {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    merged = with_env({"env": [ref]}, [("A", "1")])
    assert merged["env"][0] == ref


@pytest.mark.parametrize(
    ("user", "ops", "expected"),
    [
        pytest.param(None, (("pool", "gpu"),), {"pool": "gpu"}, id="added"),
        pytest.param({"zone": "a"}, (("pool", "gpu"),), {"zone": "a", "pool": "gpu"}, id="merged"),
        pytest.param({"pool": "cpu"}, (("pool", "gpu"),), {"pool": "gpu"}, id="operator wins"),
        pytest.param({"zone": "a"}, (), {"zone": "a"}, id="no operator selector: unchanged"),
    ],
)
def test_node_selector_merge(
    user: dict[str, str] | None, ops: tuple[tuple[str, str], ...], expected: dict[str, str]
) -> None:
    spec: Obj = {} if user is None else {"nodeSelector": user}
    before = copy.deepcopy(spec)
    assert with_node_selector(spec, ops).get("nodeSelector") == expected
    assert spec == before


LATTICE_TERM = {
    "labelSelector": {"matchExpressions": [{"key": MANAGED_LABEL, "operator": "Exists"}]},
    "topologyKey": "kubernetes.io/hostname",
}


@pytest.mark.parametrize(
    ("affinity", "expected_terms"),
    [
        pytest.param(None, [LATTICE_TERM], id="no affinity: our term only"),
        pytest.param(
            {
                "nodeAffinity": {"x": 1},
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]
                },
            },
            [{"topologyKey": "zone"}, LATTICE_TERM],
            id="the user's terms are kept",
        ),
    ],
)
def test_exclusive_node_anti_affinity(affinity: Obj | None, expected_terms: list[Obj]) -> None:
    spec: Obj = {} if affinity is None else {"affinity": affinity}
    before = copy.deepcopy(spec)
    result = with_exclusive_node(spec)
    anti = result["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"] == expected_terms
    if affinity is not None:
        assert result["affinity"]["nodeAffinity"] == {"x": 1}
    assert spec == before


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param("ExitCode", "Never", id="ExitCode runs as Never (the operator recreates)"),
        pytest.param("OnFailure", "OnFailure", id="OnFailure as is"),
        pytest.param("Always", "Always", id="Always as is"),
        pytest.param("Never", "Never", id="Never as is"),
    ],
)
def test_pod_restart_policy(policy: str, expected: str) -> None:
    assert pod_restart_policy(policy) == expected


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("resource", "quantity", "units"),
    [
        pytest.param("nvidia.com/gpu", 2, 2, id="integer"),
        pytest.param("nvidia.com/gpu", "4", 4, id="string integer"),
        pytest.param("cpu", "500m", 500, id="cpu in millicores"),
        pytest.param("cpu", 2, 2000, id="whole cpus in millicores"),
        pytest.param("memory", "1Gi", 1024**3, id="binary suffix"),
        pytest.param("memory", "1k", 1000, id="decimal suffix"),
        pytest.param("x", "1e3", 1000, id="exponent"),
        pytest.param("x", "1E", 10**18, id="E is exa"),
        pytest.param("x", "1.5", 2, id="rounded up"),
    ],
)
def test_quantity_units(resource: str, quantity: object, units: int) -> None:
    assert quantity_units(resource, quantity) == units


@pytest.mark.parametrize("quantity", ["", "abc", "1Q", "1e", "--1"])
def test_malformed_quantities_raise(quantity: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        quantity_units("x", quantity)


GPU = "nvidia.com/gpu"


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("raw", "disrupted"),
    [
        pytest.param(raw_pod(reason="Evicted"), True, id="evicted"),
        pytest.param(raw_pod(disruption="PreemptionByScheduler"), True, id="disruption target"),
        pytest.param(raw_pod(reason="DeadlineExceeded"), False, id="other pod reasons"),
        pytest.param(raw_pod(statuses=[terminated("trainingjob", 137)]), False, id="137 alone"),
    ],
)
def test_is_disrupted(raw: Obj, disrupted: bool) -> None:
    assert is_disrupted(pod_info(raw)) is disrupted


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        pytest.param(1, False, id="1 permanent"),
        pytest.param(127, False, id="127 permanent"),
        pytest.param(128, True, id="128 retryable"),
        pytest.param(137, True, id="137 SIGKILL retryable"),
        pytest.param(255, True, id="255 retryable"),
    ],
)
def test_retryable_exit_codes(code: int, retryable: bool) -> None:
    assert is_retryable_exit_code(code) is retryable


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        pytest.param([terminated("trainingjob", 3)], 3, id="the named container"),
        pytest.param(
            [terminated("trainingjob", 0), terminated("sidecar", 2)],
            2,
            id="a failed sidecar explains a clean main container",
        ),
        pytest.param(
            [terminated("sidecar", 5), terminated("trainingjob", 1)], 1, id="the named one first"
        ),
        pytest.param([terminated("trainingjob", 0)], 0, id="only a clean exit"),
        pytest.param(
            [{"name": "trainingjob", "state": {"waiting": {"reason": "X"}}}], None, id="no exit"
        ),
        pytest.param([], None, id="no statuses"),
    ],
)
def test_exit_code(statuses: list[Obj], code: int | None) -> None:
    assert exit_code(pod_info(raw_pod(statuses=statuses)), "trainingjob") == code


@pytest.mark.parametrize(
    ("raw", "policy", "recreate"),
    [
        pytest.param(raw_pod(reason="Evicted"), "Never", True, id="Never: evicted is recreated"),
        pytest.param(
            raw_pod(disruption="DeletionByTaintManager"), "Never", True, id="Never: disrupted"
        ),
        pytest.param(
            raw_pod(statuses=[terminated("trainingjob", 137)]), "Never", False, id="Never: 137"
        ),
        pytest.param(
            raw_pod(statuses=[terminated("trainingjob", 137)]), "ExitCode", True, id="ExitCode 137"
        ),
        pytest.param(
            raw_pod(statuses=[terminated("trainingjob", 2)]), "ExitCode", False, id="ExitCode 2"
        ),
        pytest.param(raw_pod(), "ExitCode", True, id="ExitCode without a code"),
        pytest.param(raw_pod(), "OnFailure", True, id="OnFailure: pod-level failure"),
        pytest.param(raw_pod(), "Always", True, id="Always: pod-level failure"),
    ],
)
def test_must_recreate(raw: Obj, policy: str, recreate: bool) -> None:
    view = pod_info(raw)
    assert must_recreate(view, policy, exit_code(view, "trainingjob")) is recreate


class Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    min_size: int
    items: list[int] = []


def test_validation_problems_use_camel_case_paths_and_indexes() -> None:
    with pytest.raises(ValidationError) as info:
        Model.model_validate({"items": [1, "x"]})
    assert validation_problems(info.value) == [
        Problem("minSize", "Field required"),
        Problem(
            "items[1]", "Input should be a valid integer, unable to parse string as an integer"
        ),
    ]


def test_quantity_problems_name_each_malformed_quantity() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {GPU: "1"}}},
            {"resources": {"requests": {GPU: "x"}, "limits": {GPU: "y", "cpu": "z"}}},
        ],
        "initContainers": [{"resources": {"requests": {"memory": "1Qi"}}}],
        "resources": {"limits": {"cpu": "?"}},
        "overhead": {"memory": "lots", "cpu": "-1"},
    }
    assert quantity_problems(spec, field="s") == [
        Problem(f"s.containers[1].resources.requests[{GPU}]", "must be a quantity, got 'x'"),
        Problem(f"s.containers[1].resources.limits[{GPU}]", "must be a quantity, got 'y'"),
        Problem("s.containers[1].resources.limits[cpu]", "must be a quantity, got 'z'"),
        Problem("s.initContainers[0].resources.requests[memory]", "must be a quantity, got '1Qi'"),
        Problem("s.resources.limits[cpu]", "must be a quantity, got '?'"),
        Problem("s.overhead[memory]", "must be a quantity, got 'lots'"),
        Problem("s.overhead[cpu]", "must be greater than or equal to 0, got '-1'"),
    ]


@pytest.mark.parametrize(
    ("spec", "field", "why"),
    [
        pytest.param({"containers": [3]}, "s.containers[0]", "must be an object", id="container"),
        pytest.param(
            {"containers": [{"resources": 1}]},
            "s.containers[0].resources",
            "must be an object",
            id="resources that is not an object",
        ),
        pytest.param(
            {"containers": [{"resources": {"limits": ["x"]}}]},
            "s.containers[0].resources.limits",
            "must be an object",
            id="limits not an object",
        ),
        pytest.param({"initContainers": {}}, "s.initContainers", "must be a list", id="not a list"),
    ],
)
def test_quantity_problems_name_malformed_parts_instead_of_crashing(
    spec: Obj, field: str, why: str
) -> None:
    assert quantity_problems(spec, field="s") == [Problem(field, why)]
