"""The TrainingJob plugin: parse, demand, run policy, children (names, labels, env, torchrun
wrapping, placement) and the status rules over fake pods.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.api.constants import TRAININGJOB
from lattice.api.trainingjob import TrainingJob
from lattice.frameworks.base import (
    MANAGED_LABEL,
    Children,
    InvalidJob,
    OperatorContext,
    Problem,
    Progress,
    ReplicaCounts,
    RunPolicyView,
)
from lattice.frameworks.policies.torch import torchrun_command
from lattice.frameworks.trainingjob import TrainingJobPlugin
from lattice.primitives.objects import Obj
from lattice.runtime.projections import pod_info
from tests.support.builders import FakeContainer, FakePod

PLUGIN = TrainingJobPlugin()
GPU = "nvidia.com/gpu"
NODE = OperatorContext()
GPU_CTX = OperatorContext(scheduling_unit=GPU)
ETCD_CTX = OperatorContext(
    rdzv_backend="etcd", rdzv_service_endpoint="rdzv.lattice", rdzv_service_port="2379"
)
EXAMPLE = Path(__file__).parents[3] / "examples" / "trainingjob" / "simple.yaml"
CONTAINERS = "spec.replicaSpecs.template.spec.containers"


def manifest(
    *,
    name: str = "j",
    container: Obj | None = None,
    extra_containers: tuple[Obj, ...] = (),
    template_spec: Obj | None = None,
    replica: Obj | None = None,
    **spec: Any,
) -> Obj:
    main = container if container is not None else {"name": "trainingjob", "image": "img"}
    tspec: Obj = {**(template_spec or {}), "containers": [main, *extra_containers]}
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": "ns", "uid": "uid-1"},
        "spec": {"replicaSpecs": {**(replica or {}), "template": {"spec": tspec}}, **spec},
    }


def parse(obj: Obj, ctx: OperatorContext = NODE) -> TrainingJob:
    return PLUGIN.parse(obj, ctx)


def env_of(pod: Obj, container: int = 0) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][container]["env"]}


# --------------------------------------------------------------------------- identity / parse


def test_resource_and_status_paths() -> None:
    assert PLUGIN.resource == TRAININGJOB
    assert PLUGIN.scheduling_path == ("status",)
    assert PLUGIN.exec_path == ("status", "execStatus")


def test_the_user_guide_example_parses() -> None:
    job = parse(yaml.safe_load(EXAMPLE.read_text()), GPU_CTX)
    assert (job.spec.min_size, job.spec.max_size, job.spec.inject_lattice) == (2, 4, True)


@pytest.mark.parametrize(
    ("obj", "ctx", "problems"),
    [
        pytest.param(
            manifest(container={"name": "main", "image": "img"}),
            NODE,
            [f'{CONTAINERS}[0].name: must be "trainingjob", got "main"'],
            id="first container not named trainingjob",
        ),
        pytest.param(
            manifest(minSize=3, maxSize=2),
            NODE,
            ["spec.minSize: must be less than or equal to spec.maxSize (2), got 3"],
            id="minSize above maxSize",
        ),
        pytest.param(
            manifest(injectLattice=True),
            NODE,
            [
                f"{CONTAINERS}[0].command: required when spec.injectLattice is true: the "
                "image's own entrypoint cannot be wrapped"
            ],
            id="injectLattice without a command",
        ),
        pytest.param(
            {**manifest(), "spec": {"replicaSpecs": {"template": {"spec": {"containers": []}}}}},
            NODE,
            [f"{CONTAINERS}: must be a non-empty list of containers"],
            id="no containers",
        ),
        pytest.param(
            manifest(minSize=0),
            NODE,
            ["spec.minSize: Input should be greater than or equal to 1"],
            id="schema error with its camelCase path",
        ),
        pytest.param(
            manifest(replica={"restartPolicy": "Sometimes"}),
            NODE,
            [
                "spec.replicaSpecs.restartPolicy: Input should be 'Always', 'OnFailure', "
                "'Never' or 'ExitCode'"
            ],
            id="unknown restart policy",
        ),
        pytest.param(
            manifest(name="1job"),
            NODE,
            [
                "metadata.name: must be a DNS-1035 label (lower-case letters, digits and '-', "
                "starting with a letter): it names the workers' Services, got '1job'"
            ],
            id="name not usable as a Service name",
        ),
        pytest.param(
            manifest(name="a" * 54, maxSize=100),
            NODE,
            [
                f"metadata.name: too long: worker Service '{'a' * 54}-worker-99' would exceed "
                "63 characters"
            ],
            id="name too long for the last worker's Service",
        ),
        pytest.param(
            manifest(container={"name": "trainingjob", "resources": {"limits": {GPU: "lots"}}}),
            GPU_CTX,
            [f"{CONTAINERS}[0].resources.limits[{GPU}]: must be a quantity, got 'lots'"],
            id="malformed unit quantity",
        ),
        pytest.param(
            manifest(
                minSize=5,
                maxSize=4,
                container={"name": "x", "image": "img"},
                injectLattice=True,
            ),
            NODE,
            [
                "spec.minSize: must be less than or equal to spec.maxSize (4), got 5",
                f'{CONTAINERS}[0].name: must be "trainingjob", got "x"',
                f"{CONTAINERS}[0].command: required when spec.injectLattice is true: the "
                "image's own entrypoint cannot be wrapped",
            ],
            id="every operator rule broken is reported",
        ),
    ],
)
def test_invalid_jobs_name_each_field(obj: Obj, ctx: OperatorContext, problems: list[str]) -> None:
    with pytest.raises(InvalidJob) as info:
        parse(obj, ctx)
    assert [str(p) for p in info.value.problems] == problems
    assert all(isinstance(p, Problem) for p in info.value.problems)


def test_a_negative_gpu_count_names_the_field() -> None:
    container = {"name": "trainingjob", "image": "i", "resources": {"limits": {GPU: -1}}}
    with pytest.raises(InvalidJob) as info:
        parse(manifest(container=container), GPU_CTX)
    assert [str(p) for p in info.value.problems] == [
        f"{CONTAINERS}[0].resources.limits[{GPU}]: must be greater than or equal to 0, got -1"
    ]


@pytest.mark.parametrize("ctx", [NODE, GPU_CTX])
def test_every_quantity_and_constraint_is_checked_in_every_mode(ctx: OperatorContext) -> None:
    container = {"name": "trainingjob", "image": "i", "resources": {"limits": {"cpu": "lots"}}}
    bad = {"tolerations": [{"key": "a", "operator": "Exists", "value": "b"}]}
    with pytest.raises(InvalidJob) as info:
        parse(manifest(container=container, template_spec=bad), ctx)
    assert [str(p) for p in info.value.problems] == [
        f"{CONTAINERS}[0].resources.limits[cpu]: must be a quantity, got 'lots'",
        "spec.replicaSpecs.template.spec.tolerations[0].value: must be empty when operator "
        "is Exists",
    ]


# --------------------------------------------------------------------------- demand


def resources(requests: Obj | None = None, limits: Obj | None = None) -> Obj:
    res: Obj = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": "trainingjob", "image": "img", "resources": res}


@pytest.mark.parametrize(
    ("container", "extra", "ctx", "units"),
    [
        pytest.param(resources({GPU: 4}), (), NODE, 1, id="node mode: one unit per replica"),
        pytest.param(resources({GPU: 4}), (), GPU_CTX, 4, id="gpu requests"),
        pytest.param(resources(None, {GPU: 2}), (), GPU_CTX, 2, id="limits when no request"),
        pytest.param(
            resources({GPU: 1}),
            ({"name": "helper", "resources": {"limits": {GPU: 1}}},),
            GPU_CTX,
            2,
            id="summed over the template's containers",
        ),
        pytest.param(resources({"cpu": 1}), (), GPU_CTX, 0, id="no gpu requested: 0"),
        pytest.param(resources({GPU: 0}), (), GPU_CTX, 0, id="zero requested: 0"),
    ],
)
def test_replica_units(
    container: Obj, extra: tuple[Obj, ...], ctx: OperatorContext, units: int
) -> None:
    job = parse(manifest(container=container, extra_containers=extra), ctx)
    demand = PLUGIN.demand(job, ctx)
    assert demand.replica_units == units
    assert demand.replica_demand is not None
    assert demand.replica_demand.units == units


@pytest.mark.parametrize(("ctx", "exclusive"), [(NODE, True), (GPU_CTX, False)])
def test_workers_are_exclusive_in_node_mode_only(ctx: OperatorContext, exclusive: bool) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    job = parse(manifest(template_spec={"affinity": affinity}, maxSize=3), ctx)
    demand = PLUGIN.demand(job, ctx)
    worker = demand.replica_demand
    assert worker is not None
    assert worker.exclusive is exclusive
    assert worker.requests == (("pods", 1),)
    assert worker.constraint.describe() == "pool=a"
    assert (demand.fixed_pods, demand.fixed_demands, demand.fixed_names) == ((), (), ())
    pods = PLUGIN.children(job, size=3, ctx=ctx).pods
    assert [p["metadata"]["name"] for p in pods] == [
        f"{demand.replica_prefix}{i}" for i in range(3)
    ]
    for pod in pods:
        assert ("podAntiAffinity" in pod["spec"]["affinity"]) is exclusive


def test_demand_carries_priority_range_and_suspension() -> None:
    job = parse(manifest(priority=7, minSize=2, maxSize=5, runPolicy={"suspend": True}))
    demand = PLUGIN.demand(job, NODE)
    assert (demand.priority, demand.min_size, demand.max_size) == (7, 2, 5)
    assert demand.fixed_pods == ()
    assert demand.suspended is True
    assert PLUGIN.demand(parse(manifest()), NODE).suspended is False


@pytest.mark.parametrize(
    ("run_policy", "expected"),
    [
        pytest.param(
            {}, RunPolicyView(clean_pod_policy="All"), id="cleanPodPolicy defaults to All"
        ),
        pytest.param(
            {
                "cleanPodPolicy": "Running",
                "ttlSecondsAfterFinished": 60,
                "activeDeadlineSeconds": 600,
                "backoffLimit": 3,
            },
            RunPolicyView(
                clean_pod_policy="Running",
                ttl_seconds_after_finished=60,
                active_deadline_seconds=600,
                backoff_limit=3,
            ),
            id="every field is carried",
        ),
    ],
)
def test_run_policy(run_policy: Obj, expected: RunPolicyView) -> None:
    job = parse(manifest(runPolicy=run_policy) if run_policy else manifest())
    assert PLUGIN.run_policy(job) == expected


# --------------------------------------------------------------------------- children


def children(obj: Obj, size: int, ctx: OperatorContext = NODE) -> Children:
    return PLUGIN.children(parse(obj, ctx), size=size, ctx=ctx)


def test_size_zero_has_no_children() -> None:
    assert children(manifest(), 0) == Children()


def test_one_pod_and_one_headless_service_per_worker_named_and_owned() -> None:
    kids = children(manifest(minSize=1, maxSize=4), 3)
    names = ["j-worker-0", "j-worker-1", "j-worker-2"]
    assert [p["metadata"]["name"] for p in kids.pods] == names
    assert [s["metadata"]["name"] for s in kids.services] == names
    owner = {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "name": "j",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for obj in (*kids.pods, *kids.services):
        assert obj["metadata"]["namespace"] == "ns"
        assert obj["metadata"]["ownerReferences"] == [owner]
        assert obj["metadata"]["labels"][MANAGED_LABEL] == "true"
    assert kids.pods[1]["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "trainingjob-reconciler",
        "training.kubeflow.org/job-name": "j",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
        MANAGED_LABEL: "true",
    }
    assert kids.pods[0]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    service = kids.services[2]["spec"]
    assert service == {
        "clusterIP": "None",
        "selector": {
            "training.kubeflow.org/job-name": "j",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "2",
        },
        "ports": [{"name": "trainingjob-port", "port": 23456, "targetPort": 23456}],
    }


def common_env(endpoint: str, backend: str, port: str = "23456") -> dict[str, str]:
    return {
        "MASTER_ADDR": "j-worker-0",
        "MASTER_PORT": port,
        "PET_NNODES": "2:4",
        "PET_RDZV_ID": "uid-1",
        "PET_RDZV_BACKEND": backend,
        "PET_RDZV_ENDPOINT": endpoint,
        "PET_MAX_RESTARTS": "100",
        "LATTICE_FRAMEWORK": "pytorch",
        "LATTICE_NNODES": "2:4",
        "LATTICE_RDZV_ID": "uid-1",
        "LATTICE_CHECKPOINT_TYPE": "remote",
        "LATTICE_CHECKPOINT_CONFIG": "job_id=uid-1",
        "LATTICE_AUTOPATCH": "torch",
    }


@pytest.mark.parametrize(
    ("ctx", "container", "expected"),
    [
        pytest.param(
            NODE,
            {"name": "trainingjob"},
            common_env("j-worker-0:23456", "c10d"),
            id="c10d at worker 0 on the default port",
        ),
        pytest.param(
            NODE,
            {
                "name": "trainingjob",
                "ports": [{"name": "trainingjob-port", "containerPort": 29500}],
            },
            common_env("j-worker-0:29500", "c10d", port="29500"),
            id="c10d on the trainingjob-port",
        ),
        pytest.param(
            ETCD_CTX,
            {"name": "trainingjob"},
            {
                **common_env("rdzv.lattice:2379", "etcd-v2"),
                "LATTICE_RDZV_BACKEND": "etcd",
                "LATTICE_RDZV_CLIENT_SERVICE_HOST": "rdzv.lattice",
                "LATTICE_RDZV_CLIENT_SERVICE_PORT": "2379",
            },
            id="etcd-v2 at the rendezvous service",
        ),
        pytest.param(
            OperatorContext(rdzv_backend="etcd"),
            {"name": "trainingjob"},
            {**common_env("j-worker-0:23456", "c10d"), "LATTICE_RDZV_BACKEND": "etcd"},
            id="etcd without an endpoint falls back to c10d",
        ),
    ],
)
def test_env_per_rendezvous_backend(ctx: OperatorContext, container: Obj, expected: Obj) -> None:
    kids = children(manifest(minSize=2, maxSize=4, container=container), 3, ctx)
    for index, pod in enumerate(kids.pods):
        rank = {"WORLD_SIZE": "3", "RANK": str(index), "PET_NODE_RANK": str(index)}
        assert env_of(pod) == {**expected, **rank}


@pytest.mark.parametrize(
    ("ctx", "framework", "expected"),
    [
        pytest.param(
            OperatorContext(
                checkpoint_service_endpoint="ckpt.lattice", checkpoint_service_port="5555"
            ),
            "pytorch",
            {
                "LATTICE_CHECKPOINT_TYPE": "remote",
                "LATTICE_CHECKPOINT_CONFIG": (
                    "job_id=uid-1,ckpt_service_endpoint=ckpt.lattice,ckpt_service_port=5555"
                ),
                "LATTICE_FRAMEWORK": "pytorch",
                "LATTICE_AUTOPATCH": "torch",
            },
            id="remote checkpoint service",
        ),
        pytest.param(
            OperatorContext(checkpoint_type="local"),
            "generic",
            {
                "LATTICE_CHECKPOINT_TYPE": "local",
                "LATTICE_CHECKPOINT_CONFIG": "root=/tmp/uid-1",
                "LATTICE_FRAMEWORK": "generic",
            },
            id="local checkpoints, generic framework: no autopatch",
        ),
    ],
)
def test_lattice_addon_env(ctx: OperatorContext, framework: str, expected: Obj) -> None:
    env = env_of(children(manifest(framework=framework), 1, ctx).pods[0])
    lattice = {k: v for k, v in env.items() if k.startswith("LATTICE_") and "RDZV" not in k}
    lattice.pop("LATTICE_NNODES")
    assert lattice == expected


def test_user_env_is_kept_and_ours_override_by_name() -> None:
    container = {
        "name": "trainingjob",
        "env": [
            {"name": "RANK", "value": "42"},
            {"name": "DATA", "value": "/d"},
            {"name": "PET_MAX_RESTARTS", "value": "3"},
        ],
    }
    env = env_of(children(manifest(container=container), 2).pods[1])
    assert (env["RANK"], env["DATA"], env["PET_MAX_RESTARTS"]) == ("1", "/d", "3")


def test_only_the_trainingjob_container_gets_env_and_sidecars_are_kept() -> None:
    sidecar = {"name": "sidecar", "image": "s"}
    pod = children(manifest(extra_containers=(sidecar,)), 1).pods[0]
    assert pod["spec"]["containers"][1] == sidecar


TORCHRUN = [
    "-m",
    "torch.distributed.run",
    "--nnodes=$(PET_NNODES)",
    "--rdzv_backend=$(PET_RDZV_BACKEND)",
    "--rdzv_endpoint=$(PET_RDZV_ENDPOINT)",
    "--rdzv_id=$(PET_RDZV_ID)",
    "--max_restarts=$(PET_MAX_RESTARTS)",
    "--no_python",
]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param(["python"], ["python", *TORCHRUN, "python"], id="python"),
        pytest.param(
            ["/usr/bin/python3.11", "-u", "main.py"],
            ["/usr/bin/python3.11", *TORCHRUN, "/usr/bin/python3.11", "-u", "main.py"],
            id="the user's interpreter runs torchrun",
        ),
        pytest.param(
            ["bash", "-c", "python main.py"],
            ["python", *TORCHRUN, "bash", "-c", "python main.py"],
            id="non-python commands run as executables",
        ),
        pytest.param(["torchrun", "main.py"], ["torchrun", "main.py"], id="torchrun untouched"),
        pytest.param(
            ["python", "-m", "torch.distributed.run", "main.py"],
            ["python", "-m", "torch.distributed.run", "main.py"],
            id="python -m torch.distributed.run untouched",
        ),
    ],
)
def test_torchrun_command(command: list[str], expected: list[str]) -> None:
    assert torchrun_command(command) == expected


def test_inject_lattice_wraps_the_command_keeps_args_and_forces_never() -> None:
    obj = yaml.safe_load(EXAMPLE.read_text())
    obj["metadata"]["uid"] = "uid-1"
    obj["spec"]["replicaSpecs"]["restartPolicy"] = "OnFailure"
    kids = children(obj, 2, GPU_CTX)
    container = kids.pods[1]["spec"]["containers"][0]
    assert container["command"] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--nnodes=$(PET_NNODES)",
        "--rdzv_backend=$(PET_RDZV_BACKEND)",
        "--rdzv_endpoint=$(PET_RDZV_ENDPOINT)",
        "--rdzv_id=$(PET_RDZV_ID)",
        "--max_restarts=$(PET_MAX_RESTARTS)",
        "--no_python",
        "python",
    ]
    assert container["args"] == ["-u", "main.py"]
    assert kids.pods[1]["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize(
    ("replica", "expected"),
    [
        pytest.param({}, "Never", id="default Never"),
        pytest.param({"restartPolicy": "OnFailure"}, "OnFailure", id="OnFailure"),
        pytest.param({"restartPolicy": "ExitCode"}, "Never", id="ExitCode runs as Never"),
    ],
)
def test_restart_policy_without_injection(replica: Obj, expected: str) -> None:
    container = {"name": "trainingjob", "command": ["python", "main.py"]}
    pod = children(manifest(replica=replica, container=container), 1).pods[0]
    assert pod["spec"]["restartPolicy"] == expected
    assert pod["spec"]["containers"][0]["command"] == ["python", "main.py"]


ANTI_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [{"key": MANAGED_LABEL, "operator": "Exists"}]
                },
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


@pytest.mark.parametrize(
    ("ctx", "selector", "affinity"),
    [
        pytest.param(
            OperatorContext(node_selector=(("pool", "gpu"),)),
            {"zone": "a", "pool": "gpu"},
            ANTI_AFFINITY,
            id="node mode: selector merged and one replica per node",
        ),
        pytest.param(
            OperatorContext(scheduling_unit=GPU, node_selector=(("pool", "gpu"),)),
            {"zone": "a", "pool": "gpu"},
            None,
            id="unit mode: selector merged, replicas may share nodes",
        ),
        pytest.param(GPU_CTX, {"zone": "a"}, None, id="no operator selector"),
    ],
)
def test_placement(ctx: OperatorContext, selector: Obj, affinity: Obj | None) -> None:
    obj = manifest(template_spec={"nodeSelector": {"zone": "a"}, "schedulerName": "custom"})
    spec = children(obj, 1, ctx).pods[0]["spec"]
    assert spec["nodeSelector"] == selector
    assert spec.get("affinity") == affinity
    assert spec["schedulerName"] == "custom"


def test_children_never_mutate_the_job_and_pods_share_nothing() -> None:
    container = {
        "name": "trainingjob",
        "command": ["python"],
        "env": [{"name": "A", "value": "1"}],
        "ports": [{"name": "trainingjob-port", "containerPort": 1234}],
    }
    obj = manifest(injectLattice=True, container=container, template_spec={"affinity": {}})
    job = parse(obj)
    before = copy.deepcopy(job.model_dump())
    kids = PLUGIN.children(job, size=2, ctx=NODE)
    assert job.model_dump() == before
    kids.pods[0]["spec"]["containers"][0]["env"].clear()
    kids.pods[0]["spec"]["affinity"]["podAntiAffinity"].clear()
    assert env_of(kids.pods[1])["A"] == "1"
    assert kids.pods[1]["spec"]["affinity"] == ANTI_AFFINITY


# --------------------------------------------------------------------------- progress

DELETED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def pod(
    index: int,
    phase: str = "Running",
    *,
    code: int | None = None,
    reason: str | None = None,
    disruption: str | None = None,
    deleted: bool = False,
) -> FakePod:
    """Worker ``index`` of job ``j``; ``code`` is its trainingjob container's exit code."""
    state = "terminated" if code is not None else "running" if phase == "Running" else "waiting"
    return FakePod(
        name=f"j-worker-{index}",
        phase=phase,
        reason=reason,
        disruption=disruption,
        replica_type="worker",
        replica_index=index,
        containers=(FakeContainer(name="trainingjob", state=state, exit_code=code),),
        deletion_timestamp=DELETED_AT if deleted else None,
    )


def counts(active: int = 0, succeeded: int = 0, failed: int = 0) -> dict[str, ReplicaCounts]:
    return {"Worker": ReplicaCounts(active=active, succeeded=succeeded, failed=failed)}


FAILED = "TrainingJobFailed"


@pytest.mark.parametrize(
    ("replica", "size", "pods", "expected"),
    [
        pytest.param({}, 0, [], Progress(replicas=counts()), id="size 0: nothing to report"),
        pytest.param(
            {},
            2,
            [pod(0), pod(1, "Pending")],
            Progress(replicas=counts(active=2)),
            id="pending counts as active but the job is not running yet",
        ),
        pytest.param(
            {},
            2,
            [pod(0), pod(1)],
            Progress(replicas=counts(active=2), running=True),
            id="running when every desired worker runs",
        ),
        pytest.param(
            {},
            2,
            [pod(0), pod(1), pod(2, "Failed", code=1), pod(1, deleted=True)],
            Progress(replicas=counts(active=2), running=True),
            id="pods beyond the size and deleted pods are ignored",
        ),
        pytest.param(
            {},
            2,
            [pod(0, "Succeeded", code=0), pod(1, "Succeeded", code=0)],
            Progress(replicas=counts(succeeded=2), succeeded=True),
            id="all workers done",
        ),
        pytest.param(
            {},
            3,
            [pod(0, "Succeeded", code=0), pod(1), pod(2)],
            Progress(replicas=counts(active=2, succeeded=1), succeeded=True),
            id="worker 0 succeeding ends the job",
        ),
        pytest.param(
            {},
            2,
            [pod(0), pod(1, "Succeeded", code=0)],
            Progress(replicas=counts(active=1, succeeded=1)),
            id="another worker succeeding does not",
        ),
        pytest.param(
            {},
            2,
            [pod(0), pod(1, "Failed", code=1)],
            Progress(
                replicas=counts(active=1, failed=1),
                failed="worker pod j-worker-1 exited with code 1 (restartPolicy Never)",
                failed_reason=FAILED,
            ),
            id="Never: a failed worker fails the job",
        ),
        pytest.param(
            {},
            2,
            [pod(0, "Succeeded", code=0), pod(1, "Failed", code=2)],
            Progress(
                replicas=counts(succeeded=1, failed=1),
                failed="worker pod j-worker-1 exited with code 2 (restartPolicy Never)",
                failed_reason=FAILED,
            ),
            id="failure wins over worker 0's success",
        ),
        pytest.param(
            {},
            1,
            [
                FakePod(
                    name="j-worker-0",
                    phase="Failed",
                    reason="DeadlineExceeded",
                    replica_type="worker",
                    replica_index=0,
                )
            ],
            Progress(
                replicas=counts(failed=1),
                failed="worker pod j-worker-0 failed (DeadlineExceeded) (restartPolicy Never)",
                failed_reason=FAILED,
            ),
            id="a failure without an exit code names the pod's reason",
        ),
        pytest.param(
            {},
            2,
            [pod(0), pod(1, "Failed", code=137, reason="Evicted")],
            Progress(
                replicas=counts(active=1, failed=1), restarting=True, recreate=("j-worker-1",)
            ),
            id="Never: an evicted worker is recreated",
        ),
        pytest.param(
            {},
            2,
            [pod(0), pod(1, "Failed", code=143, disruption="PreemptionByScheduler")],
            Progress(
                replicas=counts(active=1, failed=1), restarting=True, recreate=("j-worker-1",)
            ),
            id="Never: a disrupted worker is recreated",
        ),
        pytest.param(
            {"restartPolicy": "ExitCode"},
            3,
            [pod(0), pod(1, "Failed", code=137), pod(2, "Failed", code=130)],
            Progress(
                replicas=counts(active=1, failed=2),
                restarting=True,
                recreate=("j-worker-1", "j-worker-2"),
            ),
            id="ExitCode: 128 and above are retried",
        ),
        pytest.param(
            {"restartPolicy": "ExitCode"},
            2,
            [pod(0), pod(1, "Failed", code=127)],
            Progress(
                replicas=counts(active=1, failed=1),
                failed="worker pod j-worker-1 exited with code 127 (restartPolicy ExitCode)",
                failed_reason=FAILED,
            ),
            id="ExitCode: 1 to 127 are permanent",
        ),
        pytest.param(
            {"restartPolicy": "OnFailure"},
            2,
            [pod(0), pod(1, "Failed", reason="UnexpectedAdmissionError")],
            Progress(
                replicas=counts(active=1, failed=1), restarting=True, recreate=("j-worker-1",)
            ),
            id="OnFailure: a pod-level failure is recreated",
        ),
        pytest.param(
            {"restartPolicy": "OnFailure"},
            2,
            [pod(0), pod(1)],
            Progress(replicas=counts(active=2), running=True),
            id="OnFailure: container restarts are the kubelet's, nothing to do",
        ),
    ],
)
def test_progress(replica: Obj, size: int, pods: list[FakePod], expected: Progress) -> None:
    job = parse(manifest(replica=replica, maxSize=3))
    assert PLUGIN.progress(job, size=size, pods=pods) == expected


def test_inject_lattice_judges_failures_as_never() -> None:
    container = {"name": "trainingjob", "command": ["python"]}
    job = parse(
        manifest(injectLattice=True, container=container, replica={"restartPolicy": "ExitCode"})
    )
    progress = PLUGIN.progress(job, size=1, pods=[pod(0, "Failed", code=137)])
    assert progress.failed == "worker pod j-worker-0 exited with code 137 (restartPolicy Never)"


def test_pods_of_other_replica_types_are_ignored() -> None:
    other = FakePod(name="j-launcher-0", phase="Failed", replica_type="launcher", replica_index=0)
    job = parse(manifest())
    assert PLUGIN.progress(job, size=1, pods=[pod(0), other]) == Progress(
        replicas=counts(active=1), running=True
    )


def test_progress_reads_the_informer_projection_of_real_pods() -> None:
    children_of = children(manifest(), 2)
    raw = copy.deepcopy(list(children_of.pods))
    raw[0]["status"] = {"phase": "Running"}
    raw[1]["status"] = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "trainingjob", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
        ],
    }
    progress = PLUGIN.progress(parse(manifest()), size=2, pods=[pod_info(p) for p in raw])
    assert progress.replicas == counts(active=1, failed=1)
    assert progress.failed == "worker pod j-worker-1 exited with code 3 (restartPolicy Never)"
