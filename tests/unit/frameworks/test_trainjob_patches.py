"""What a TrainJob's runtimePatches (v2.2+), podTemplateOverrides (v2.1) and resourcesPerNode do
to the pods, as Trainer's strategic merge patches do it; and the JobSet failure policy's
decisions over the pods (``trainjob_failures``).
"""

from __future__ import annotations

from typing import Any

import pytest

from lattice.frameworks.base import InvalidJob, Problem
from lattice.frameworks.trainjob_patch import strategic_merge
from lattice.primitives.objects import Obj
from lattice.runtime.projections import pod_info
from tests.unit.frameworks.test_trainjob_plugin import (
    ctx,
    parse,
    pod,
    pods_of,
    progress_of,
    rjob,
    runtime,
    tj,
)

RT = runtime(
    "rt",
    jobs=[
        rjob(
            "node",
            "trainer",
            {
                "name": "node",
                "image": "train:1",
                "env": [{"name": "A", "value": "runtime"}],
                "resources": {"limits": {"cpu": "4", "memory": "8Gi"}, "requests": {"cpu": "2"}},
            },
            {"name": "sidecar", "image": "s:1"},
            pod={
                "tolerations": [{"key": "runtime", "operator": "Exists"}],
                "nodeSelector": {"pool": "a"},
                "volumes": [{"name": "data", "emptyDir": {}}],
            },
        ),
        rjob("other"),
    ],
)
CTX = ctx(RT)


def patch(manager: str, name: str, template: Obj, **meta: Obj) -> Obj:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                **({"metadata": meta} if meta else {}),
                "spec": {"replicatedJobs": [{"name": name, "template": template}]},
            }
        },
    }


def by_name(pods: list[Obj]) -> dict[str, Obj]:
    return {p["metadata"]["name"]: p for p in pods}


def test_strategic_merge_merges_keyed_lists_and_replaces_the_others() -> None:
    base = {
        "containers": [{"name": "a", "env": [{"name": "X", "value": "1"}], "args": ["1"]}],
        "tolerations": [{"key": "t"}],
        "nodeSelector": {"a": "1", "b": "2"},
    }
    change = {
        "containers": [
            {"name": "a", "env": [{"name": "Y", "value": "2"}], "args": ["2"]},
            {"name": "b"},
        ],
        "tolerations": [{"key": "u"}],
        "nodeSelector": {"b": None, "c": "3"},
    }
    assert strategic_merge(base, change) == {
        "containers": [
            {"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}
            | {"args": ["2"]},
            {"name": "b"},
        ],
        "tolerations": [{"key": "u"}],
        "nodeSelector": {"a": "1", "c": "3"},
    }
    assert base["nodeSelector"] == {"a": "1", "b": "2"}, "inputs are never changed"


def test_runtime_patches_apply_in_order_to_their_target_job_only() -> None:
    first = patch(
        "kueue.x-k8s.io/manager",
        "node",
        {
            "metadata": {"labels": {"job-level": "1"}},
            "spec": {
                "template": {
                    "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                    "spec": {
                        "nodeSelector": {"zone": "z1"},
                        "tolerations": [{"key": "gpu", "operator": "Exists"}],
                        "serviceAccountName": "trainer-sa",
                        "terminationGracePeriodSeconds": 5,
                        "imagePullSecrets": [{"name": "reg"}],
                        "securityContext": {"runAsUser": 1000},
                        "volumes": [{"name": "cache", "emptyDir": {}}],
                        "containers": [
                            {
                                "name": "sidecar",
                                "env": [{"name": "S", "value": "1"}],
                                "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                            }
                        ],
                    },
                }
            },
        },
    )
    second = patch(
        "user",
        "node",
        {"spec": {"template": {"metadata": {"labels": {"team": "b"}}}}},
        labels={"jobset-level": "yes"},
    )
    pods = by_name(pods_of(tj("rt", runtimePatches=[first, second]), CTX, size=2))
    node, other = pods["tj-node-0-0"], pods["tj-other-0-0"]
    spec = node["spec"]
    assert node["metadata"]["labels"]["team"] == "b", "the later manager wins"
    assert node["metadata"]["labels"]["job-level"] == "1"
    assert node["metadata"]["labels"]["jobset-level"] == "yes"
    assert other["metadata"]["labels"]["jobset-level"] == "yes", "JobSet-level: every pod"
    assert node["metadata"]["annotations"]["note"] == "x"
    assert spec["nodeSelector"] == {"pool": "a", "zone": "z1"}
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}], "replaced, as SMP"
    assert spec["serviceAccountName"] == "trainer-sa"
    assert spec["terminationGracePeriodSeconds"] == 5
    assert spec["imagePullSecrets"] == [{"name": "reg"}]
    assert spec["securityContext"] == {"runAsUser": 1000}
    assert [v["name"] for v in spec["volumes"]] == ["data", "cache"]
    sidecar = spec["containers"][1]
    assert sidecar["volumeMounts"] == [{"name": "cache", "mountPath": "/cache"}]
    assert {"name": "S", "value": "1"} in sidecar["env"]
    assert "team" not in other["metadata"]["labels"]
    assert other["spec"].get("serviceAccountName") is None


def test_pod_template_overrides_are_strategic_merges_later_entries_winning() -> None:
    overrides = [
        {
            "targetJobs": [{"name": "node"}, {"name": "other"}],
            "metadata": {"labels": {"v": "1"}},
            "spec": {
                "affinity": {
                    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}
                },
                "imagePullSecrets": [{"name": "reg"}],
            },
        },
        {"targetJobs": [{"name": "node"}], "metadata": {"labels": {"v": "2"}}},
    ]
    pods = by_name(pods_of(tj("rt", podTemplateOverrides=overrides), CTX, size=2))
    assert pods["tj-node-0-0"]["metadata"]["labels"]["v"] == "2"
    assert pods["tj-other-0-0"]["metadata"]["labels"]["v"] == "1"
    assert pods["tj-other-0-0"]["spec"]["imagePullSecrets"] == [{"name": "reg"}]


def test_trainer_fields_apply_after_the_patches() -> None:
    change = patch(
        "user",
        "node",
        {
            "spec": {
                "template": {"spec": {"containers": [{"name": "node", "env": [{"name": "A"}]}]}}
            }
        },
    )
    obj = tj("rt", runtimePatches=[change], trainer={"env": [{"name": "A", "value": "trainer"}]})
    node = by_name(pods_of(obj, CTX, size=2))["tj-node-0-0"]["spec"]["containers"][0]
    assert {"name": "A", "value": "trainer"} in node["env"]


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        pytest.param(
            "runtimePatches",
            [patch("user", "nope", {})],
            "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name",
            id="runtime patch",
        ),
        pytest.param(
            "podTemplateOverrides",
            [{"targetJobs": [{"name": "nope"}]}],
            "spec.podTemplateOverrides[0].targetJobs",
            id="pod template override",
        ),
    ],
)
def test_a_patch_of_a_job_the_runtime_lacks_is_invalid(field: str, value: Any, where: str) -> None:
    with pytest.raises(InvalidJob) as caught:
        parse(tj("rt", **{field: value}), CTX)
    assert list(caught.value.problems) == [
        Problem(where, "'nope' is not a replicatedJob of the runtime")
    ]


def test_resources_per_node_merge_keeping_runtime_limits() -> None:
    obj = tj("rt", trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": "2", "cpu": "8"}}})
    node = by_name(pods_of(obj, CTX, size=2))["tj-node-0-0"]["spec"]["containers"][0]
    assert node["resources"] == {
        "limits": {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "2"},
        "requests": {"cpu": "2"},
    }


# --------------------------------------------------------------------------- failure policy


def failing(policy: Obj | None, *pods: Any, restarts: int = 0, counted: int = 0) -> Any:
    rt = runtime("fp")
    if policy is not None:
        rt["spec"]["template"]["spec"]["failurePolicy"] = policy
    obj = tj("fp", trainer={"numNodes": 2})
    if restarts:
        obj["status"] = {"restarts": restarts, "restartsCountTowardsMax": counted}
    return progress_of(obj, ctx(rt), 2, *pods)


FAILED = pod("tj-node-0-1", "Failed", code=1)


def test_without_a_failure_policy_a_failed_job_fails_the_trainjob() -> None:
    got = failing(None, pod("tj-node-0-0"), FAILED)
    assert got.failed_reason == "FailedJobs"
    assert got.failed.startswith("jobset failed due to one or more job failures: ")


def test_restart_job_set_recreates_every_pod_until_max_restarts() -> None:
    got = failing({"maxRestarts": 2}, pod("tj-node-0-0"), FAILED, restarts=1, counted=1)
    assert (got.failed, got.restarting) == (None, True)
    assert set(got.recreate) == {"tj-node-0-0", "tj-node-0-1"}
    done = failing({"maxRestarts": 2}, pod("tj-node-0-0"), FAILED, restarts=3, counted=2)
    assert done.failed_reason == "ReachedMaxRestarts"


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        pytest.param({"action": "FailJobSet"}, "FailJobSetFailurePolicyAction", id="any"),
        pytest.param(
            {"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]},
            "FailJobSetFailurePolicyAction",
            id="by reason",
        ),
        pytest.param(
            {"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
            None,
            id="another reason: default restart",
        ),
        pytest.param(
            {"action": "FailJobSet", "onJobFailureMessagePatterns": ["backoff limit$"]},
            "FailJobSetFailurePolicyAction",
            id="by message",
        ),
        pytest.param(
            {"action": "FailJobSet", "targetReplicatedJobs": ["launcher"]},
            None,
            id="another job: default restart",
        ),
    ],
)
def test_the_first_matching_rule_decides(rule: Obj, reason: str | None) -> None:
    got = failing({"maxRestarts": 3, "rules": [{"name": "r", **rule}]}, pod("tj-node-0-0"), FAILED)
    assert got.failed_reason == reason
    assert got.restarting is (reason is None)


def test_container_restarts_over_backoff_limit_fail_the_job() -> None:
    rt = runtime("bl", jobs=[rjob("node", "trainer", backoffLimit=1)])
    obj = tj("bl")
    twice = pod_info(
        {
            "metadata": {"name": "tj-node-0-0", "namespace": "ns"},
            "spec": {},
            "status": {
                "phase": "Running",
                "containerStatuses": [{"name": "node", "restartCount": 2, "state": {}}],
            },
        }
    )
    got = progress_of(obj, ctx(rt), 1, twice)
    assert got.failed_reason == "FailedJobs"
    assert "restarted 2 times, over backoffLimit 1" in got.failed
