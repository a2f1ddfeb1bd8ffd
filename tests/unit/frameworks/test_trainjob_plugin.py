"""The TrainJob plugin: runtime resolution (lookup, waiting outcomes, identification of the
replicatedJobs, the merge of the TrainJob over the runtime, podSpecOverrides), demand, the exact
children of upstream's torch-distributed and mpi-distributed examples (names, hostnames, labels,
PET_* env, hostfile), initializers, progress under successPolicy, and jobsStatus.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.api.constants import TRAINJOB
from lattice.frameworks.base import (
    MANAGED_LABEL,
    InvalidJob,
    OperatorContext,
    PodView,
    ReplicaCounts,
    RunPolicyView,
    managed_elsewhere,
)
from lattice.frameworks.policies.resources import node_resources
from lattice.frameworks.policies.torch import nproc_per_node
from lattice.frameworks.trainjob import (
    TrainJobPlugin,
    hostfile,
    jobs_status,
    pod_name,
)
from lattice.frameworks.trainjob_plans import ResolvedJob, RuntimeNotReady
from lattice.frameworks.trainjob_runtime import resolve, resolve_with, runtime_hash
from lattice.primitives.objects import Obj
from lattice.runtime.projections import pod_info
from tests.support.builders import FakePod

PLUGIN = TrainJobPlugin()
GPU = "nvidia.com/gpu"
EXAMPLES = Path(__file__).parents[3] / "examples" / "trainjob"
INDEX_REF = {
    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}
OWNER = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "tj",
    "uid": "uid-tj",
    "controller": True,
    "blockOwnerDeletion": True,
}


def example(name: str) -> Obj:
    loaded: Obj = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    return loaded


TORCH_RT = example("torch-distributed-runtime")
MPI_RT = example("mpi-distributed-runtime")
LOCAL_RT = example("training-runtime")


def key(runtime: Obj, namespace: str = "ns") -> str:
    kind, name = runtime["kind"], runtime["metadata"]["name"]
    return f"{kind}/{namespace if kind == 'TrainingRuntime' else ''}/{name}"


def ctx(*runtimes: Obj, unit: str = "node", **kw: Any) -> OperatorContext:
    return OperatorContext(
        scheduling_unit=unit, runtimes={key(r): r for r in runtimes or (TORCH_RT, MPI_RT)}, **kw
    )


NODE = ctx()


def from_example(name: str, **meta: Any) -> Obj:
    obj = example(name)
    obj["metadata"].update(namespace="ns", uid=f"uid-{obj['metadata']['name']}", **meta)
    return obj


def tj(runtime: str = "torch-distributed", kind: str | None = None, **spec: Any) -> Obj:
    """A TrainJob ``tj`` in ``ns`` on ``runtime``; ``spec`` fields merged in."""
    ref: Obj = {"name": runtime}
    if kind:
        ref["kind"] = kind
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ns", "uid": "uid-tj"},
        "spec": {"runtimeRef": ref, **spec},
    }


def runtime(
    name: str = "rt",
    *,
    ml: Obj | None = None,
    jobs: list[Obj] | None = None,
    kind: str = "ClusterTrainingRuntime",
    **template_spec: Any,
) -> Obj:
    """A runtime with ``mlPolicy`` ``ml`` (default torch) and ``jobs`` (default one ``node``)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"torch": {}} if ml is None else ml,
            "template": {"spec": {"replicatedJobs": jobs or [rjob("node")], **template_spec}},
        },
    }


def rjob(
    name: str,
    step: str | None = None,
    *containers: Obj,
    pod: Obj | None = None,
    **job_spec: Any,
) -> Obj:
    """A replicatedJob ``name`` (ancestor label ``step``) with ``containers`` (default one
    container named after the job) and extra pod-spec fields ``pod``."""
    labels = {"trainer.kubeflow.org/trainjob-ancestor-step": step}
    meta = {"metadata": {"labels": labels}} if step else {}
    spec = {"containers": list(containers) or [{"name": name, "image": f"{name}:1"}], **(pod or {})}
    return {"name": name, "template": {**meta, "spec": {**job_spec, "template": {"spec": spec}}}}


def parse(obj: Obj, context: OperatorContext = NODE) -> ResolvedJob:
    return PLUGIN.parse(obj, context)


def pods_of(obj: Obj, context: OperatorContext = NODE, size: int | None = None) -> list[Obj]:
    job = parse(obj, context)
    full = PLUGIN.demand(job, context).max_size if size is None else size
    return list(PLUGIN.children(job, size=full, ctx=context).pods)


def env_of(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or ()}


def main(pod: Obj) -> Obj:
    container: Obj = pod["spec"]["containers"][0]
    return container


# --------------------------------------------------------------------------- identity


def test_resource_and_status_paths() -> None:
    assert PLUGIN.resource == TRAINJOB
    assert PLUGIN.scheduling_path == ("status", "lattice")
    assert PLUGIN.exec_path == ("status",)
    assert PLUGIN.preempted_condition == "Suspended"


@pytest.mark.parametrize(
    ("managed_by", "other"),
    [
        pytest.param(None, False, id="default trainjob-controller is ours"),
        pytest.param("trainer.kubeflow.org/trainjob-controller", False, id="explicitly ours"),
        pytest.param("kueue.x-k8s.io/multikueue", True, id="multikueue manages it"),
    ],
)
def test_managed_by_other(managed_by: str | None, other: bool) -> None:
    obj = tj(**({"managedBy": managed_by} if managed_by else {}))
    parse(obj)  # a job managed elsewhere is still a valid job
    assert managed_elsewhere(obj) is other  # the reconciler's and the scheduler's rule


# --------------------------------------------------------------------------- torch example


def test_torch_example_pods_are_named_addressed_and_labelled_as_jobset_would() -> None:
    pods = pods_of(from_example("trainjob-torch"))
    name = "torch-multi-node"
    assert [p["metadata"]["name"] for p in pods] == [f"{name}-node-0-0", f"{name}-node-0-1"]
    assert [p["spec"]["hostname"] for p in pods] == [f"{name}-node-0-0", f"{name}-node-0-1"]
    assert {p["spec"]["subdomain"] for p in pods} == {name}
    second = pods[1]["metadata"]
    jobset = {
        "jobset.sigs.k8s.io/jobset-name": name,
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
        "jobset.sigs.k8s.io/global-replicas": "1",
        "jobset.sigs.k8s.io/job-index": "0",
        # sha1("ns/torch-multi-node-node-0"), as JobSet's job-key
        "jobset.sigs.k8s.io/job-key": "b2cc6768dece0c5fc26695a8e3d7624e4a14feae",
        "jobset.sigs.k8s.io/job-global-index": "0",
        "batch.kubernetes.io/job-completion-index": "1",
        # JobSet's group keys: every replicatedJob is in group "default" unless it names one.
        "jobset.sigs.k8s.io/group-name": "default",
        "jobset.sigs.k8s.io/group-replicas": "1",
        "jobset.sigs.k8s.io/job-group-index": "0",
    }
    assert second["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
        **jobset,
        "batch.kubernetes.io/job-name": f"{name}-node-0",
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/operator-name": "trainjob-controller",
        "training.kubeflow.org/replica-type": "node",
        "training.kubeflow.org/replica-index": "1",
        MANAGED_LABEL: "true",
    }
    assert second["annotations"] == jobset
    assert second["namespace"] == "ns"
    assert second["ownerReferences"] == [{**OWNER, "name": name, "uid": f"uid-{name}"}]


def test_torch_example_container_gets_overrides_pet_env_and_port() -> None:
    container = main(pods_of(from_example("trainjob-torch"))[0])
    assert container["image"] == "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
    assert container["command"][:3] == ["torchrun", "--no-python", "python3"]
    assert container["resources"] == {
        "limits": {GPU: 1},
        "requests": {"cpu": "2", "memory": "4Gi", GPU: 1},
    }
    assert container["env"] == [
        {"name": "PET_NNODES", "value": "2"},
        {"name": "PET_NPROC_PER_NODE", "value": "auto"},
        {"name": "PET_NODE_RANK", "valueFrom": INDEX_REF},
        {"name": "PET_MASTER_ADDR", "value": "torch-multi-node-node-0-0.torch-multi-node"},
        {"name": "PET_MASTER_PORT", "value": "29500"},
        {"name": "JOB_COMPLETION_INDEX", "valueFrom": INDEX_REF},
    ]
    assert container["ports"] == [{"containerPort": 29500}]


def test_torch_example_service_and_no_mpi_objects() -> None:
    job = parse(from_example("trainjob-torch"))
    children = PLUGIN.children(job, size=2, ctx=NODE)
    assert children.services == (
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "torch-multi-node",
                "namespace": "ns",
                "labels": {
                    "jobset.sigs.k8s.io/jobset-name": "torch-multi-node",
                    MANAGED_LABEL: "true",
                },
                "ownerReferences": [
                    {**OWNER, "name": "torch-multi-node", "uid": "uid-torch-multi-node"}
                ],
            },
            "spec": {
                "clusterIP": "None",
                "selector": {"jobset.sigs.k8s.io/jobset-name": "torch-multi-node"},
                "publishNotReadyAddresses": True,
            },
        },
    )
    assert (children.config_maps, children.secrets, children.jobs) == ((), (), ())
    assert PLUGIN.children(job, size=0, ctx=NODE) == type(children)()


def test_user_env_is_merged_before_the_pet_env_and_pod_template_kept() -> None:
    env = [{"name": "NCCL_DEBUG", "value": "INFO"}]
    rt = runtime(
        jobs=[
            rjob(
                "node",
                "trainer",
                {"name": "node", "env": [{"name": "A", "value": "1"}]},
                pod={"restartPolicy": "Never", "priorityClassName": "x"},
            )
        ]
    )
    pod = pods_of(tj("rt", trainer={"env": env, "numNodes": 1}), ctx(rt))[0]
    assert list(env_of(main(pod))) == [
        "A",
        "NCCL_DEBUG",
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
        "JOB_COMPLETION_INDEX",
    ]
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["priorityClassName"] == "x"


@pytest.mark.parametrize(
    ("value", "resources", "expected"),
    [
        pytest.param("auto", None, "1", id="auto without any resources is 1 CPU (v2.2+)"),
        pytest.param("auto", {"limits": {GPU: 1}}, "auto", id="auto with a GPU limit stays auto"),
        pytest.param("auto", {"requests": {"amd.com/gpu": 1}}, "auto", id="any GPU resource"),
        pytest.param(
            "auto", {"requests": {"cpu": "3"}}, "3", id="auto without a GPU is the CPU count"
        ),
        pytest.param("auto", {"limits": {"cpu": "1500m"}}, "2", id="CPU count rounds up"),
        pytest.param("auto", {"limits": {"cpu": "100m"}}, "1", id="at least one process"),
        pytest.param(
            "auto", {"requests": {"cpu": 2}, "limits": {"cpu": 8}}, "2", id="requests before limits"
        ),
        pytest.param("cpu", {"limits": {"cpu": 4}}, "4", id="cpu is the CPU limit"),
        pytest.param(
            "cpu", {"limits": {"memory": "1Gi"}}, "1", id="cpu without a CPU quantity is 1"
        ),
        pytest.param("cpu", None, "1", id="cpu without any resources is 1 (v2.1+)"),
        pytest.param("gpu", {"limits": {GPU: 2}}, "gpu", id="gpu passes through"),
        pytest.param(3, {"limits": {"cpu": 8}}, "3", id="an integer passes through"),
        pytest.param(3, {}, "3", id="an integer with empty resourcesPerNode"),
        pytest.param("auto", {}, "1", id="auto with empty resourcesPerNode is 1 CPU"),
    ],
)
def test_pet_nproc_per_node_is_derived_as_upstream(
    value: int | str, resources: Obj | None, expected: str
) -> None:
    assert nproc_per_node(value, node_resources(resources, None)) == expected
    trainer: Obj = {"numProcPerNode": value}
    if resources is not None:
        trainer["resourcesPerNode"] = resources
    assert env_of(main(pods_of(tj(trainer=trainer))[0]))["PET_NPROC_PER_NODE"] == expected


def test_runtime_num_proc_per_node_is_the_fallback() -> None:
    rt = runtime(ml={"torch": {"numProcPerNode": 4}})
    assert env_of(main(pods_of(tj("rt"), ctx(rt))[0]))["PET_NPROC_PER_NODE"] == "4"


# --------------------------------------------------------------------------- torch elastic

ELASTIC = runtime(
    "elastic", ml={"torch": {"elasticPolicy": {"minNodes": 1, "maxNodes": 4, "maxRestarts": 3}}}
)


def test_elastic_torch_is_a_range_with_c10d_rendezvous() -> None:
    context = ctx(ELASTIC)
    job = parse(tj("elastic"), context)
    demand = PLUGIN.demand(job, context)
    assert (demand.min_size, demand.max_size, demand.fixed_pods) == (1, 4, ())
    pods = pods_of(tj("elastic"), context, size=3)
    assert [p["metadata"]["name"] for p in pods] == ["tj-node-0-0", "tj-node-0-1", "tj-node-0-2"]
    assert env_of(main(pods[2])) == {
        "PET_NNODES": "1:4",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": INDEX_REF,
        "PET_MASTER_ADDR": "tj-node-0-0.tj",
        "PET_MASTER_PORT": "29500",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": "tj-node-0-0.tj:29500",
        "PET_RDZV_ID": "uid-tj",
        "PET_MAX_RESTARTS": "3",
        "JOB_COMPLETION_INDEX": INDEX_REF,
    }


def test_elastic_resizing_keeps_the_lowest_indexes() -> None:
    context = ctx(ELASTIC)
    names = [
        [p["metadata"]["name"] for p in pods_of(tj("elastic"), context, size=n)] for n in (4, 2)
    ]
    assert names[1] == names[0][:2]
    assert {
        p["metadata"]["labels"]["training.kubeflow.org/replica-index"]
        for p in pods_of(tj("elastic"), context, size=4)
    } == {"0", "1", "2", "3"}


@pytest.mark.parametrize(
    ("policy", "user_env", "expected"),
    [
        pytest.param({"minNodes": 2, "maxNodes": 4}, [], ("2:4", "100"), id="default max restarts"),
        pytest.param(
            {"maxNodes": 3},
            [{"name": "PET_MAX_RESTARTS", "value": "7"}],
            ("3:3", "7"),
            id="the user's max restarts and one bound copies the other",
        ),
        pytest.param({"minNodes": 2}, [], ("2:2", "100"), id="minNodes alone"),
    ],
)
def test_elastic_defaults(policy: Obj, user_env: list[Obj], expected: tuple[str, str]) -> None:
    rt = runtime(ml={"torch": {"elasticPolicy": policy}})
    env = env_of(main(pods_of(tj("rt", trainer={"env": user_env}), ctx(rt))[0]))
    assert (env["PET_NNODES"], env["PET_MAX_RESTARTS"]) == expected


# --------------------------------------------------------------------------- mpi example


def test_mpi_example_runs_the_launcher_as_a_node() -> None:
    obj = from_example("trainjob-mpi")
    job = parse(obj)
    children = PLUGIN.children(job, size=2, ctx=NODE)
    launcher, node = children.pods
    assert (launcher["metadata"]["name"], node["metadata"]["name"]) == (
        "mpi-pi-launcher-0-0",
        "mpi-pi-node-0-0",
    )
    assert (launcher["spec"]["hostname"], launcher["spec"]["subdomain"]) == (
        "mpi-pi-launcher-0-0",
        "mpi-pi",
    )
    assert children.config_maps[0]["metadata"]["name"] == "mpi-pi-mpi-hostfile"
    assert children.config_maps[0]["data"] == {
        "hostfile": "mpi-pi-launcher-0-0.mpi-pi slots=2\nmpi-pi-node-0-0.mpi-pi slots=2\n"
    }
    secret = children.secrets[0]
    assert (secret["metadata"]["name"], secret["type"]) == (
        "mpi-pi-mpi-ssh-auth",
        "kubernetes.io/ssh-auth",
    )
    assert secret["metadata"]["annotations"] == {"lattice.breezeml.ai/generate": "ssh-keypair"}
    assert secret["metadata"]["ownerReferences"] == [
        {**OWNER, "name": "mpi-pi", "uid": "uid-mpi-pi"}
    ]
    assert [s["metadata"]["name"] for s in children.services] == ["mpi-pi"]
    # resourcesPerNode reaches every node (the launcher runs as one), the launcher keeps mpirun
    assert main(launcher)["command"] == ["mpirun"]
    assert main(node)["command"] == ["/usr/sbin/sshd"]
    assert (
        main(launcher)["resources"]
        == main(node)["resources"]
        == {"limits": {"cpu": "1", "memory": "1Gi"}}
    )


def test_mpi_volumes_mounts_and_openmpi_env() -> None:
    launcher, node = pods_of(from_example("trainjob-mpi"))
    ssh = {
        "name": "mpi-ssh-auth",
        "secret": {
            "secretName": "mpi-pi-mpi-ssh-auth",
            "items": [
                {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
            ],
            "defaultMode": 0o400,
        },
    }
    hostfile_volume = {
        "name": "mpi-hostfile",
        "configMap": {
            "name": "mpi-pi-mpi-hostfile",
            "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
        },
    }
    assert launcher["spec"]["volumes"] == [ssh, hostfile_volume]
    assert node["spec"]["volumes"] == [ssh]
    ssh_mount = {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}
    assert main(launcher)["volumeMounts"] == [
        ssh_mount,
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    assert main(node)["volumeMounts"] == [ssh_mount]
    assert env_of(main(launcher)) == {
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "2",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
        "JOB_COMPLETION_INDEX": INDEX_REF,
    }
    assert env_of(main(node)) == {"JOB_COMPLETION_INDEX": INDEX_REF}
    assert main(node)["readinessProbe"] == {"tcpSocket": {"port": 2222}, "initialDelaySeconds": 5}


def mpi_runtime(run_launcher_as_node: bool, slots: int = 1) -> Obj:
    rt = copy.deepcopy(MPI_RT)
    rt["metadata"]["name"] = "mpi"
    rt["spec"]["mlPolicy"]["mpi"].update(
        runLauncherAsNode=run_launcher_as_node, numProcPerNode=slots
    )
    return rt


@pytest.mark.parametrize(
    ("as_node", "trainer", "pods", "hosts"),
    [
        pytest.param(
            True,
            {},
            ["launcher-0-0", "node-0-0"],
            "launcher-0-0 node-0-0",
            id="numNodes 1 still has a node job (upstream max(n-1, 1))",
        ),
        pytest.param(
            True,
            {"numNodes": 3},
            ["launcher-0-0", "node-0-0", "node-0-1"],
            "launcher-0-0 node-0-0 node-0-1",
            id="launcher plus n-1 nodes",
        ),
        pytest.param(
            False,
            {"numNodes": 2},
            ["launcher-0-0", "node-0-0", "node-0-1"],
            "node-0-0 node-0-1",
            id="a separate launcher is not in the hostfile",
        ),
    ],
)
def test_mpi_pods_and_hostfile_per_run_launcher_as_node(
    as_node: bool, trainer: Obj, pods: list[str], hosts: str
) -> None:
    rt = mpi_runtime(as_node, slots=4)
    job = parse(tj("mpi", trainer=trainer), ctx(rt))
    size = PLUGIN.demand(job, ctx(rt)).max_size
    assert [p["metadata"]["name"] for p in PLUGIN.children(job, size=size, ctx=NODE).pods] == [
        f"tj-{p}" for p in pods
    ]
    assert hostfile(job) == "".join(f"tj-{h}.tj slots=4\n" for h in hosts.split())


@pytest.mark.parametrize(
    ("as_node", "unit", "fixed", "units", "size"),
    [
        pytest.param(True, "node", (1,), 1, 2, id="node mode: launcher and node one unit each"),
        pytest.param(False, "node", (0,), 1, 3, id="node mode: a separate launcher no unit"),
        pytest.param(True, GPU, (0,), 0, 2, id="pods requesting no GPU hold none"),
        pytest.param(False, GPU, (0,), 0, 3, id="a separate launcher with no GPU costs nothing"),
    ],
)
def test_mpi_gang_demand(
    as_node: bool, unit: str, fixed: tuple[int, ...], units: int, size: int
) -> None:
    context = ctx(mpi_runtime(as_node), unit=unit)
    job = parse(tj("mpi", trainer={"numNodes": 2}), context)
    demand = PLUGIN.demand(job, context)
    pods = [p["metadata"]["name"] for p in PLUGIN.children(job, size=size, ctx=context).pods]
    replicas = [f"{demand.replica_prefix}{i}" for i in range(size - len(fixed))]
    assert pods == [*demand.fixed_names, *replicas]
    assert demand.fixed_names == ("tj-launcher-0-0",)
    assert tuple(d.units for d in demand.fixed_demands) == fixed
    assert (demand.fixed_pods, demand.replica_units, demand.min_size, demand.max_size) == (
        fixed,
        units,
        size,
        size,
    )


# --------------------------------------------------------------------------- demand


def with_classes(obj: Obj, annotation: str | None = None) -> Obj:
    if annotation is not None:
        obj["metadata"]["annotations"] = {"lattice.breezeml.ai/priority": annotation}
    return obj


CLASSY = runtime("classy", jobs=[rjob("node", "trainer", pod={"priorityClassName": "high"})])


@pytest.mark.parametrize(
    ("obj", "context", "priority"),
    [
        pytest.param(
            tj("classy"),
            ctx(CLASSY, priority_classes={"high": 1000}),
            1000,
            id="the trainer template's PriorityClass",
        ),
        pytest.param(
            with_classes(tj("classy"), "7"),
            ctx(CLASSY),
            7,
            id="an unknown class falls back to the annotation",
        ),
        pytest.param(
            with_classes(tj("classy"), "7"),
            ctx(CLASSY, priority_classes={"high": 1000}),
            1000,
            id="the class wins over the annotation",
        ),
        pytest.param(tj(), ctx(default_priority=5), 5, id="the default PriorityClass value"),
    ],
)
def test_priority_order(obj: Obj, context: OperatorContext, priority: int) -> None:
    assert PLUGIN.demand(parse(obj, context), context).priority == priority


@pytest.mark.parametrize(
    ("trainer", "unit", "size", "units"),
    [
        pytest.param({"numNodes": 2}, "node", 2, 1, id="node mode: one unit per node"),
        pytest.param(
            {"numNodes": 3, "resourcesPerNode": {"limits": {GPU: 4}}},
            GPU,
            3,
            4,
            id="resourcesPerNode GPUs",
        ),
        pytest.param({}, GPU, 1, 0, id="no GPU request holds no GPU, numNodes from the runtime"),
    ],
)
def test_torch_gang_demand(trainer: Obj, unit: str, size: int, units: int) -> None:
    context = ctx(unit=unit)
    demand = PLUGIN.demand(parse(tj(trainer=trainer), context), context)
    assert (demand.min_size, demand.max_size, demand.replica_units, demand.fixed_pods) == (
        size,
        size,
        units,
        (),
    )
    assert demand.suspended is False


def test_suspend_and_run_policy() -> None:
    job = parse(tj(suspend=True))
    assert PLUGIN.demand(job, NODE).suspended is True
    # backoffLimit is each Job's own (``trainjob_failures``), never the reconciler's; the
    # headless Service stays with the finished job, as JobSet's does.
    assert PLUGIN.run_policy(job) == RunPolicyView(
        clean_pod_policy="Running", service_cleanup="None"
    )
    rt = runtime(jobs=[rjob("node", "trainer", backoffLimit=2)])
    job = parse(tj("rt", activeDeadlineSeconds=30), ctx(rt))
    assert job.rjob("node").backoff_limit == 2
    assert PLUGIN.run_policy(job) == RunPolicyView(
        clean_pod_policy="Running", service_cleanup="None", active_deadline_seconds=30
    )


# ------------------------------------------------------------------ waiting for the runtime


@pytest.mark.parametrize(
    ("obj", "context", "reason", "message"),
    [
        pytest.param(
            tj("nope"),
            NODE,
            "ClusterTrainingRuntimeNotFound",
            'ClusterTrainingRuntime "nope" referenced by spec.runtimeRef is '
            "not found; the TrainJob starts once it exists",
            id="missing cluster runtime",
        ),
        pytest.param(
            tj("torch-local", kind="TrainingRuntime"),
            NODE,
            "TrainingRuntimeNotFound",
            'TrainingRuntime "ns/torch-local" referenced by spec.runtimeRef '
            "is not found; the TrainJob starts once it exists",
            id="missing namespaced runtime",
        ),
        pytest.param(
            tj("torch-distributed", kind="TrainingRuntime"),
            NODE,
            "RuntimeKindMismatch",
            'TrainingRuntime "ns/torch-distributed" is not found, but a ClusterTrainingRuntime of '
            "that name exists: spec.runtimeRef.kind must name the runtime's kind",
            id="kind mismatch",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(ml={"torch": {}, "mpi": {}}, jobs=[rjob("launcher"), rjob("node")])),
            "InvalidMLPolicy",
            'ClusterTrainingRuntime "rt" is invalid: spec.mlPolicy: only one of '
            "mlPolicy.torch and mlPolicy.mpi may be configured",
            id="torch and mpi together",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(ml={"numNodes": 2, "torch": {"elasticPolicy": {"maxNodes": 2}}})),
            "InvalidMLPolicy",
            'ClusterTrainingRuntime "rt" is invalid: spec.mlPolicy.numNodes: must not '
            "be set when mlPolicy.torch.elasticPolicy is configured",
            id="numNodes with elasticPolicy",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(ml={"torch": {"elasticPolicy": {"minNodes": 3, "maxNodes": 2}}})),
            "InvalidMLPolicy",
            'ClusterTrainingRuntime "rt" is invalid: '
            "spec.mlPolicy.torch.elasticPolicy.minNodes: must be at most maxNodes (2), got 3",
            id="minNodes above maxNodes",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(ml={"mpi": {"mpiImplementation": "MPICH"}})),
            "InvalidMLPolicy",
            None,
            id="an implementation v2.0.0 does not accept",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(jobs=[rjob("worker")])),
            "InvalidRuntime",
            'ClusterTrainingRuntime "rt" is invalid: spec.template.spec.replicatedJobs: '
            "no replicatedJob is labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer "
            "or named node",
            id="no trainer job",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(ml={"mpi": {}})),
            "InvalidRuntime",
            'ClusterTrainingRuntime "rt" is invalid: spec.template.spec.replicatedJobs: '
            "an mpi runtime must have a replicatedJob named launcher",
            id="mpi without a launcher",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(jobs=[rjob("node", pod={"restartPolicy": "Always"})])),
            "InvalidRuntime",
            None,
            id="restartPolicy a Job refuses",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(successPolicy={"operator": "All", "targetReplicatedJobs": ["launcher"]})),
            "InvalidRuntime",
            None,
            id="successPolicy naming no job",
        ),
        pytest.param(
            tj("rt"),
            ctx(runtime(jobs=[rjob("node", "trainer"), rjob("other", "trainer")])),
            "InvalidRuntime",
            None,
            id="two trainer jobs",
        ),
    ],
)
def test_runtime_not_ready_is_waiting_with_a_reason(
    obj: Obj, context: OperatorContext, reason: str, message: str | None
) -> None:
    with pytest.raises(RuntimeNotReady) as caught:
        parse(obj, context)
    assert caught.value.reason == reason
    assert not isinstance(caught.value, InvalidJob)
    if message is not None:
        assert caught.value.message == message == str(caught.value)


def test_the_job_starts_once_the_runtime_appears() -> None:
    obj = tj("torch-local", kind="TrainingRuntime")
    with pytest.raises(RuntimeNotReady):
        resolve(obj, NODE)
    job = resolve(obj, ctx(LOCAL_RT))
    assert (job.runtime_kind, job.runtime_name, job.runtime_hash) == (
        "TrainingRuntime",
        "torch-local",
        runtime_hash(LOCAL_RT),
    )
    assert job.labels == {"app.kubernetes.io/part-of": "lattice-examples"}


def test_resolve_with_a_recorded_runtime_and_its_kind() -> None:
    job = resolve_with(tj(), TORCH_RT, ctx=OperatorContext())
    assert job.runtime_hash == runtime_hash(TORCH_RT)
    with pytest.raises(RuntimeNotReady) as caught:
        resolve_with(tj(), LOCAL_RT, ctx=OperatorContext())
    assert caught.value.reason == "RuntimeKindMismatch"


def test_runtime_hash_is_stable_and_tracks_the_spec() -> None:
    shuffled = {
        "spec": TORCH_RT["spec"],
        "metadata": TORCH_RT["metadata"],
        "kind": TORCH_RT["kind"],
    }
    assert runtime_hash(shuffled) == runtime_hash(TORCH_RT)
    assert len(runtime_hash(TORCH_RT)) == 16
    edited = copy.deepcopy(TORCH_RT)
    edited["spec"]["mlPolicy"]["numNodes"] = 2
    assert runtime_hash(edited) != runtime_hash(TORCH_RT)
    assert runtime_hash(
        {**TORCH_RT, "metadata": {**TORCH_RT["metadata"], "resourceVersion": "9"}}
    ) == runtime_hash(TORCH_RT)


# --------------------------------------------------------------------------- invalid TrainJobs

INIT_RT = runtime(
    "init",
    jobs=[
        rjob(
            "dataset-initializer",
            "dataset-initializer",
            pod={
                "volumes": [{"name": "initializer", "persistentVolumeClaim": {"claimName": "pvc"}}]
            },
        ),
        rjob(
            "model-initializer",
            "model-initializer",
            pod={
                "volumes": [{"name": "initializer", "persistentVolumeClaim": {"claimName": "pvc"}}]
            },
        ),
        {
            **rjob(
                "node",
                "trainer",
                {"name": "node", "image": "train:1"},
                {"name": "sidecar", "image": "s:1"},
                pod={
                    "volumes": [
                        {"name": "initializer", "persistentVolumeClaim": {"claimName": "pvc"}}
                    ]
                },
            ),
            "dependsOn": [
                {"name": "dataset-initializer", "status": "Complete"},
                {"name": "model-initializer", "status": "Complete"},
            ],
        },
    ],
)
LONG = "t" * 55


@pytest.mark.parametrize(
    ("obj", "context", "problems"),
    [
        pytest.param(
            tj(
                trainer={
                    "env": [
                        {"name": "PET_NNODES", "value": "3"},
                        {"name": "PET_MASTER_ADDR", "value": "x"},
                        {"name": "OK", "value": "1"},
                    ]
                }
            ),
            NODE,
            [
                "spec.trainer.env: must not have reserved envs, invalid envs "
                "configured: [PET_MASTER_ADDR PET_NNODES]"
            ],
            id="reserved PET env",
        ),
        pytest.param(
            tj(trainer={"numProcPerNode": "four"}),
            NODE,
            [
                "spec.trainer.numProcPerNode: must be an integer or "
                "one of auto, cpu, gpu, got 'four'"
            ],
            id="torch numProcPerNode word",
        ),
        pytest.param(
            tj("mpi-distributed", trainer={"numProcPerNode": "auto"}),
            NODE,
            ["spec.trainer.numProcPerNode: must have an int value for MPI TrainJob"],
            id="mpi numProcPerNode must be an int",
        ),
        pytest.param(
            tj("elastic", trainer={"numNodes": 2}),
            ctx(ELASTIC),
            [
                "spec.trainer.numNodes: must not be set when the runtime sets "
                "mlPolicy.torch.elasticPolicy min/maxNodes"
            ],
            id="numNodes on an elastic runtime",
        ),
        pytest.param(
            {**tj(), "spec": {"runtimeRef": {"name": "x", "apiGroup": "example.com"}}},
            NODE,
            ["spec.runtimeRef.apiGroup: must be trainer.kubeflow.org, got 'example.com'"],
            id="foreign runtime apiGroup",
        ),
        pytest.param(
            with_classes(tj(), "high"),
            NODE,
            ["metadata.annotations[lattice.breezeml.ai/priority]: must be an integer, got 'high'"],
            id="priority annotation not an integer",
        ),
        pytest.param(
            tj(trainer={"resourcesPerNode": {"limits": {"cpu": "lots"}}}),
            NODE,
            ["spec.trainer.resourcesPerNode.limits[cpu]: must be a quantity, got 'lots'"],
            id="malformed resourcesPerNode",
        ),
        pytest.param(
            tj(trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": -2}}}),
            NODE,
            [
                "spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: must be greater than or "
                "equal to 0, got -2"
            ],
            id="negative resourcesPerNode (was a traceback per retry, issue 26)",
        ),
        pytest.param(
            with_classes(tj(), str(2**40)),
            NODE,
            [
                "metadata.annotations[lattice.breezeml.ai/priority]: must be between -1000000 "
                "and 1000000000, got 1099511627776"
            ],
            id="priority annotation 2^40 (issue 26)",
        ),
        pytest.param(
            tj(initializer={"dataset": {"storageUri": "hf://x"}}),
            NODE,
            [
                "spec.initializer.dataset: the runtime has no dataset-initializer "
                "replicatedJob with a dataset-initializer container"
            ],
            id="dataset initializer the runtime lacks",
        ),
        pytest.param(
            tj(podSpecOverrides=[{"targetJobs": [{"name": "launcher"}]}]),
            NODE,
            [
                "spec.podSpecOverrides[0].targetJobs: 'launcher' is "
                "not a replicatedJob of the runtime"
            ],
            id="override of a job the runtime lacks",
        ),
        pytest.param(
            tj(
                podSpecOverrides=[
                    {"targetJobs": [{"name": "node"}], "containers": [{"name": "ghost"}]}
                ]
            ),
            NODE,
            [
                "spec.podSpecOverrides[0].containers[0].name: 'ghost' is "
                "not a container of replicatedJob 'node'"
            ],
            id="override of a container the job lacks",
        ),
        pytest.param(
            tj(
                podSpecOverrides=[
                    {
                        "targetJobs": [{"name": "node"}],
                        "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}],
                    }
                ]
            ),
            NODE,
            [
                "spec.podSpecOverrides[0].containers[0].env: must not "
                "set env of the reserved node container"
            ],
            id="override env of the trainer container",
        ),
        pytest.param(
            tj(
                podSpecOverrides=[
                    {"targetJobs": [{"name": "node"}]},
                    {"targetJobs": [{"name": "node"}]},
                ]
            ),
            NODE,
            ["spec.podSpecOverrides[1].targetJobs: 'node' is targeted twice"],
            id="a job targeted twice",
        ),
        pytest.param(
            {**tj(trainer={"numNodes": 10}), "metadata": {"name": LONG, "namespace": "ns"}},
            NODE,
            [
                f"metadata.name: pod hostname '{LONG}-node-0-9' is not "
                f"a DNS label of at most 63 characters"
            ],
            id="hostname too long",
        ),
    ],
)
def test_invalid_trainjobs_name_each_field(
    obj: Obj, context: OperatorContext, problems: list[str]
) -> None:
    with pytest.raises(InvalidJob) as caught:
        parse(obj, context)
    assert [str(p) for p in caught.value.problems] == problems


def test_reserved_pet_env_is_allowed_without_torch() -> None:
    rt = runtime(ml={})
    pod = pods_of(tj("rt", trainer={"env": [{"name": "PET_NNODES", "value": "9"}]}), ctx(rt))[0]
    assert env_of(main(pod)) == {"PET_NNODES": "9", "JOB_COMPLETION_INDEX": INDEX_REF}


# ------------------------------------------------------------------ identification and merge


def test_replicated_jobs_by_ancestor_label_or_by_name() -> None:
    by_name = runtime(
        "names", jobs=[rjob("dataset-initializer"), rjob("model-initializer"), rjob("node")]
    )
    assert [(r.name, r.step) for r in parse(tj("names"), ctx(by_name)).replicated_jobs] == [
        ("dataset-initializer", "dataset-initializer"),
        ("model-initializer", "model-initializer"),
        ("node", "trainer"),
    ]
    labelled = runtime("labels", jobs=[rjob("node"), rjob("trainer-job", "trainer")])
    job = parse(tj("labels", trainer={"image": "mine:2", "numNodes": 2}), ctx(labelled))
    assert (job.trainer, job.scaled) == ("trainer-job", "trainer-job")
    assert [(r.name, r.step) for r in job.replicated_jobs] == [
        ("node", None),
        ("trainer-job", "trainer"),
    ]
    pods = PLUGIN.children(job, size=3, ctx=NODE).pods
    assert [(p["metadata"]["name"], main(p)["image"]) for p in pods] == [
        ("tj-node-0-0", "node:1"),
        ("tj-trainer-job-0-0", "mine:2"),
        ("tj-trainer-job-0-1", "mine:2"),
    ]
    assert env_of(main(pods[1]))["PET_MASTER_ADDR"] == "tj-trainer-job-0-0.tj"
    assert PLUGIN.demand(job, NODE).fixed_pods == (0,)  # an auxiliary job: no unit


def test_mpi_without_labels_overrides_the_launcher() -> None:
    rt = mpi_runtime(True)
    del rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["metadata"]
    job = parse(tj("mpi", trainer={"command": ["mpirun", "-n", "2"]}), ctx(rt))
    assert job.trainer == "launcher"
    launcher, node = PLUGIN.children(job, size=2, ctx=NODE).pods
    assert (main(launcher)["command"], main(node)["command"]) == (
        ["mpirun", "-n", "2"],
        ["/usr/sbin/sshd"],
    )


def test_pod_spec_overrides_apply_to_their_target_jobs_only() -> None:
    base = {
        "serviceAccountName": "default-sa",
        "nodeSelector": {"pool": "a", "zone": "1"},
        "tolerations": [{"key": "old", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "keep", "emptyDir": {}}],
        "initContainers": [{"name": "prep", "image": "p:1", "env": [{"name": "X", "value": "1"}]}],
        "schedulingGates": [{"name": "a"}],
    }
    side = {
        "name": "sidecar",
        "image": "s:1",
        "volumeMounts": [{"name": "data", "mountPath": "/d"}],
    }
    rt = runtime(
        jobs=[
            rjob("node", "trainer", {"name": "node", "image": "n:1"}, side, pod=base),
            rjob("aux", None, pod=base),
        ]
    )
    override = {
        "targetJobs": [{"name": "node"}],
        "serviceAccountName": "sa",
        "nodeSelector": {"zone": "2"},
        "tolerations": [{"key": "new", "operator": "Exists"}],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
            {"name": "extra", "emptyDir": {}},
        ],
        "initContainers": [
            {"name": "prep", "env": [{"name": "X", "value": "2"}, {"name": "Y", "value": "3"}]}
        ],
        "containers": [
            {
                "name": "sidecar",
                "env": [{"name": "S", "value": "1"}],
                "volumeMounts": [
                    {"name": "extra", "mountPath": "/d"},
                    {"name": "x", "mountPath": "/x"},
                ],
            }
        ],
        "schedulingGates": [{"name": "b"}],
    }
    obj = tj("rt", podSpecOverrides=[override], trainer={"numNodes": 1})
    node_pod, aux_pod = pods_of(obj, ctx(rt))
    spec = node_pod["spec"]
    assert spec["serviceAccountName"] == "sa"
    assert spec["nodeSelector"] == {"pool": "a", "zone": "2"}
    assert spec["tolerations"] == [{"key": "new", "operator": "Exists"}]
    assert spec["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
        {"name": "keep", "emptyDir": {}},
        {"name": "extra", "emptyDir": {}},
    ]
    assert spec["initContainers"][0]["env"][:2] == [
        {"name": "X", "value": "2"},
        {"name": "Y", "value": "3"},
    ]
    assert spec["containers"][1]["volumeMounts"] == [
        {"name": "extra", "mountPath": "/d"},
        {"name": "x", "mountPath": "/x"},
    ]
    assert env_of(spec["containers"][1]) == {"S": "1", "JOB_COMPLETION_INDEX": INDEX_REF}
    assert spec["schedulingGates"] == [{"name": "a"}, {"name": "b"}]
    untouched = aux_pod["spec"]
    assert (
        untouched["serviceAccountName"],
        untouched["nodeSelector"],
        untouched["schedulingGates"],
    ) == ("default-sa", {"pool": "a", "zone": "1"}, [{"name": "a"}])


def test_labels_annotations_and_network_of_the_runtime() -> None:
    rt = runtime(
        network={"subdomain": "net", "publishNotReadyAddresses": False},
        jobs=[rjob("node", "trainer", pod={})],
    )
    rt["spec"]["template"]["metadata"] = {
        "labels": {"team": "a", "x": "runtime"},
        "annotations": {"note": "r"},
    }
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "metadata"
    ] = {"labels": {"pod": "p"}, "annotations": {"pa": "1"}}
    obj = tj("rt", labels={"x": "job"}, annotations={"ja": "2"})
    job = parse(obj, ctx(rt))
    children = PLUGIN.children(job, size=1, ctx=NODE)
    meta = children.pods[0]["metadata"]
    assert {k: meta["labels"][k] for k in ("team", "x", "pod")} == {
        "team": "a",
        "x": "job",
        "pod": "p",
    }
    assert {k: meta["annotations"][k] for k in ("note", "ja", "pa")} == {
        "note": "r",
        "ja": "2",
        "pa": "1",
    }
    assert children.pods[0]["spec"]["subdomain"] == "net"
    assert env_of(main(children.pods[0]))["PET_MASTER_ADDR"] == "tj-node-0-0.net"
    service = children.services[0]
    assert (service["metadata"]["name"], service["spec"]["publishNotReadyAddresses"]) == (
        "net",
        False,
    )
    assert service["metadata"]["labels"]["team"] == "a"


def test_without_dns_hostnames_no_subdomain_and_no_service() -> None:
    rt = runtime(network={"enableDNSHostnames": False})
    children = PLUGIN.children(parse(tj("rt"), ctx(rt)), size=1, ctx=NODE)
    assert "subdomain" not in children.pods[0]["spec"]
    assert children.pods[0]["spec"]["hostname"] == "tj-node-0-0"
    assert children.services == ()


def test_node_selector_on_every_pod_including_initializers_none_exclusive() -> None:
    context = ctx(INIT_RT, node_selector=(("pool", "gpu"),))
    job = parse(tj("init"), context)
    pods = [
        *PLUGIN.children(job, size=1, ctx=context).pods,
        *PLUGIN.initializer_children(job, ctx=context).pods,
    ]
    assert len(pods) == 3
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
        assert "podAntiAffinity" not in (pod["spec"].get("affinity") or {})  # not exclusive


def test_children_never_mutate_inputs() -> None:
    obj, rt = tj("init", trainer={"env": [{"name": "A", "value": "1"}]}), copy.deepcopy(INIT_RT)
    before = (copy.deepcopy(obj), copy.deepcopy(rt))
    job = parse(obj, ctx(rt))
    first = PLUGIN.children(job, size=1, ctx=NODE)
    PLUGIN.initializer_children(job, ctx=NODE)
    first.pods[0]["spec"]["containers"][0]["env"].clear()
    assert PLUGIN.children(job, size=1, ctx=NODE) != first
    assert (obj, rt) == before


# --------------------------------------------------------------------------- initializers


def test_initializer_pods_env_and_output_mounts() -> None:
    obj = tj(
        "init",
        initializer={
            "dataset": {
                "storageUri": "hf://tatsu-lab/alpaca",
                "env": [{"name": "A", "value": "1"}],
                "secretRef": {"name": "hf"},
            },
            "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B"},
        },
    )
    job = parse(obj, ctx(INIT_RT))
    dataset, model = PLUGIN.initializer_children(job, ctx=NODE).pods
    assert (dataset["metadata"]["name"], model["metadata"]["name"]) == (
        "tj-dataset-initializer-0-0",
        "tj-model-initializer-0-0",
    )
    assert dataset["metadata"]["labels"]["jobset.sigs.k8s.io/global-replicas"] == "3"
    assert model["metadata"]["labels"]["jobset.sigs.k8s.io/job-global-index"] == "1"
    assert env_of(main(dataset)) == {
        "STORAGE_URI": "hf://tatsu-lab/alpaca",
        "A": "1",
        "JOB_COMPLETION_INDEX": INDEX_REF,
    }
    assert main(dataset)["envFrom"] == [{"secretRef": {"name": "hf"}}]
    assert main(dataset)["volumeMounts"] == [
        {"name": "initializer", "mountPath": "/workspace/dataset"}
    ]
    assert main(model)["volumeMounts"] == [{"name": "initializer", "mountPath": "/workspace/model"}]
    (node,) = PLUGIN.children(job, size=1, ctx=NODE).pods
    assert main(node)["volumeMounts"] == [
        {"name": "initializer", "mountPath": "/workspace/dataset"},
        {"name": "initializer", "mountPath": "/workspace/model"},
    ]
    assert "volumeMounts" not in node["spec"]["containers"][1]
    demand = PLUGIN.demand(job, NODE)
    assert (demand.min_size, demand.max_size, demand.fixed_pods) == (1, 1, ())


def test_a_mount_covering_the_output_path_is_kept() -> None:
    rt = copy.deepcopy(INIT_RT)
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][2]["template"]["spec"]["template"][
        "spec"
    ]
    node["containers"][0]["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace/"}]
    (pod,) = pods_of(tj("init"), ctx(rt))
    assert main(pod)["volumeMounts"] == [{"name": "initializer", "mountPath": "/workspace/"}]


def test_without_the_initializer_volume_nothing_is_mounted() -> None:
    rt = runtime(jobs=[rjob("dataset-initializer", "dataset-initializer"), rjob("node", "trainer")])
    job = parse(tj("rt"), ctx(rt))
    assert "volumeMounts" not in main(PLUGIN.initializer_children(job, ctx=NODE).pods[0])
    assert "volumeMounts" not in main(PLUGIN.children(job, size=1, ctx=NODE).pods[0])


# --------------------------------------------------------------------------- progress


def pod(
    name: str,
    phase: str = "Running",
    *,
    ready: bool = True,
    code: int | None = None,
    reason: str | None = None,
    deleting: bool = False,
    container: str = "node",
) -> PodView:
    status: Obj = {"phase": phase}
    if ready and phase == "Running":
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    if reason:
        status["reason"] = reason
    if code is not None:
        status["containerStatuses"] = [
            {"name": container, "restartCount": 0, "state": {"terminated": {"exitCode": code}}}
        ]
    meta: Obj = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return pod_info({"metadata": meta, "spec": {}, "status": status})


def progress_of(obj: Obj, context: OperatorContext, size: int, *pods: PodView) -> Any:
    return PLUGIN.progress(parse(obj, context), size=size, pods=pods, others={})


ANY_RT = runtime(
    "any",
    jobs=[rjob("node", "trainer"), rjob("eval")],
    successPolicy={"operator": "Any", "targetReplicatedJobs": ["eval", "node"]},
)
MPI2 = tj("mpi-distributed", trainer={"numNodes": 2})
FAILED = "jobset failed due to one or more job failures: "


@pytest.mark.parametrize(
    ("obj", "context", "size", "pods", "expect"),
    [
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            2,
            [pod("tj-node-0-0", "Succeeded"), pod("tj-node-0-1", "Succeeded")],
            {"succeeded": True},
            id="every trainer pod succeeded: complete",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            2,
            [pod("tj-node-0-0", "Succeeded"), pod("tj-node-0-1")],
            {"running": True},
            id="one still running: running, not complete",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            2,
            [pod("tj-node-0-0", "Pending")],
            {},
            id="pending and missing pods: not running",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            2,
            [pod("tj-node-0-0"), pod("tj-node-0-1", "Failed", code=1)],
            {"failed": FAILED + "trainer pod tj-node-0-1 (replicatedJob node) exited with code 1"},
            id="a trainer pod exiting non-zero fails the job",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            2,
            [pod("tj-node-0-0"), pod("tj-node-0-1", "Failed", reason="Evicted")],
            {"restarting": True, "recreate": ("tj-node-0-1",)},
            id="an evicted pod is recreated",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            2,
            [pod("tj-node-0-0"), pod("tj-node-0-1", "Failed", reason="DeadlineExceeded")],
            {
                "failed": FAILED
                + "trainer pod tj-node-0-1 (replicatedJob node) failed: DeadlineExceeded"
            },
            id="a pod-level failure without exit code",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            2,
            [
                pod("tj-node-0-0"),
                pod("tj-node-0-1", "Failed", code=1, deleting=True),
                pod("tj-node-0-7", "Failed", code=1),
            ],
            {},
            id="deleted and undesired pods are ignored",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            0,
            [pod("tj-node-0-0", "Failed", code=1)],
            {},
            id="size 0 reports nothing",
        ),
        pytest.param(
            MPI2,
            NODE,
            2,
            [pod("tj-launcher-0-0", "Succeeded"), pod("tj-node-0-0")],
            {"succeeded": True},
            id="mpi: the launcher succeeding completes the job",
        ),
        pytest.param(
            MPI2,
            NODE,
            2,
            [pod("tj-launcher-0-0"), pod("tj-node-0-0", "Succeeded")],
            {"running": True},
            id="mpi: a node succeeding does not",
        ),
        pytest.param(
            tj("any", trainer={"numNodes": 2}),
            ctx(ANY_RT),
            3,
            [pod("tj-node-0-0"), pod("tj-node-0-1"), pod("tj-eval-0-0", "Succeeded")],
            {"succeeded": True},
            id="successPolicy Any: one target job done",
        ),
        pytest.param(
            tj("any", trainer={"numNodes": 2}),
            ctx(ANY_RT),
            3,
            [pod("tj-node-0-0", "Succeeded"), pod("tj-node-0-1"), pod("tj-eval-0-0")],
            {"running": True},
            id="successPolicy Any: a job is done only when every index is",
        ),
        pytest.param(
            tj("init"),
            ctx(INIT_RT),
            1,
            [pod("tj-dataset-initializer-0-0", "Failed", code=2, container="dataset-initializer")],
            {
                "failed": FAILED + "dataset-initializer pod tj-dataset-initializer-0-0 "
                "(replicatedJob dataset-initializer) exited with code 2"
            },
            id="a failed initializer fails the job",
        ),
        pytest.param(
            tj("init"),
            ctx(INIT_RT),
            1,
            [pod("tj-dataset-initializer-0-0", "Succeeded"), pod("tj-model-initializer-0-0")],
            {},
            id="initializers still running",
        ),
        pytest.param(
            tj("init"),
            ctx(INIT_RT),
            1,
            [
                pod("tj-dataset-initializer-0-0", "Succeeded"),
                pod("tj-model-initializer-0-0", "Succeeded"),
                pod("tj-node-0-0", "Succeeded"),
            ],
            {"succeeded": True},
            id="default success ignores the initializers",
        ),
    ],
)
def test_progress(
    obj: Obj, context: OperatorContext, size: int, pods: list[PodView], expect: Obj
) -> None:
    progress = progress_of(obj, context, size, *pods)
    got = {
        "succeeded": progress.succeeded,
        "running": progress.running,
        "failed": progress.failed,
        "restarting": progress.restarting,
        "recreate": progress.recreate,
    }
    want = {
        "succeeded": False,
        "running": False,
        "failed": None,
        "restarting": False,
        "recreate": (),
        **expect,
    }
    assert got == want
    assert progress.failed_reason == ("FailedJobs" if progress.failed else None)


def test_success_does_not_need_the_initializer_pods_to_remain() -> None:
    progress = progress_of(tj("init"), ctx(INIT_RT), 1, pod("tj-node-0-0", "Succeeded"))
    assert progress.succeeded


def test_progress_counts_replicas_per_replicated_job() -> None:
    progress = progress_of(
        MPI2, NODE, 2, pod("tj-launcher-0-0", "Succeeded"), pod("tj-node-0-0", "Pending")
    )
    assert progress.replicas == {
        "launcher": ReplicaCounts(succeeded=1),
        "node": ReplicaCounts(active=1),
    }


def released_names(job: ResolvedJob, *pods: PodView) -> list[str]:
    size = PLUGIN.demand(job, NODE).max_size
    desired = PLUGIN.children(job, size=size, ctx=NODE)
    staged = PLUGIN.staged_children(job, desired, size=size, pods=list(pods), ctx=NODE)
    return [p["metadata"]["name"] for p in staged.pods]


def test_depends_on_complete_gates_the_trainer_on_every_initializer() -> None:
    job = parse(tj("init"), ctx(INIT_RT))
    inits = ["tj-dataset-initializer-0-0", "tj-model-initializer-0-0"]
    assert released_names(job) == inits
    one = pod("tj-dataset-initializer-0-0", "Succeeded")
    assert released_names(job, one, pod("tj-model-initializer-0-0")) == inits
    both = [one, pod("tj-model-initializer-0-0", "Succeeded")]
    assert released_names(job, *both) == [*inits, "tj-node-0-0"]


def test_without_depends_on_every_job_starts_at_once_as_jobset_does() -> None:
    rt = copy.deepcopy(INIT_RT)
    del rt["spec"]["template"]["spec"]["replicatedJobs"][2]["dependsOn"]
    job = parse(tj("init"), ctx(rt))
    assert released_names(job) == [
        "tj-dataset-initializer-0-0",
        "tj-model-initializer-0-0",
        "tj-node-0-0",
    ]


def test_depends_on_ready_counts_ready_failed_and_succeeded_jobs() -> None:
    rt = runtime(
        "ready",
        jobs=[
            rjob("node", "trainer"),
            {**rjob("sidecar-job"), "dependsOn": [{"name": "node", "status": "Ready"}]},
        ],
    )
    job = parse(tj("ready", trainer={"numNodes": 2}), ctx(rt))
    nodes = ["tj-node-0-0", "tj-node-0-1"]
    assert released_names(job) == nodes
    half = [pod("tj-node-0-0"), pod("tj-node-0-1", ready=False)]
    assert released_names(job, *half) == nodes
    ready = [pod("tj-node-0-0"), pod("tj-node-0-1", "Succeeded")]
    assert released_names(job, *ready) == [*nodes, "tj-sidecar-job-0-0"]


def test_a_started_dependant_is_kept_when_its_dependency_regresses() -> None:
    job = parse(tj("init"), ctx(INIT_RT))
    running = [pod("tj-dataset-initializer-0-0", "Succeeded"), pod("tj-node-0-0")]
    assert "tj-node-0-0" in released_names(job, *running)


def test_startup_policy_in_order_starts_each_job_once_the_one_before_is_ready() -> None:
    rt = runtime(
        "ordered",
        jobs=[rjob("launcher-ish"), rjob("node", "trainer"), rjob("tail")],
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    job = parse(tj("ordered"), ctx(rt))
    assert released_names(job) == ["tj-launcher-ish-0-0"]
    assert released_names(job, pod("tj-launcher-ish-0-0", ready=False)) == ["tj-launcher-ish-0-0"]
    first = pod("tj-launcher-ish-0-0")
    assert released_names(job, first) == ["tj-launcher-ish-0-0", "tj-node-0-0"]
    assert released_names(job, first, pod("tj-node-0-0")) == [
        "tj-launcher-ish-0-0",
        "tj-node-0-0",
        "tj-tail-0-0",
    ]


# --------------------------------------------------------------------------- jobsStatus


def status(name: str, **counts: int) -> Obj:
    return {
        "name": name,
        "ready": 0,
        "succeeded": 0,
        "failed": 0,
        "active": 0,
        "suspended": 0,
        **counts,
    }


@pytest.mark.parametrize(
    ("obj", "context", "pods", "kwargs", "expect"),
    [
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            [pod("tj-node-0-0"), pod("tj-node-0-1")],
            {},
            [status("node", ready=1, active=1)],
            id="all trainer pods running and ready",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            [pod("tj-node-0-0"), pod("tj-node-0-1", ready=False)],
            {},
            [status("node", active=1)],
            id="one not ready",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            [pod("tj-node-0-0", "Succeeded"), pod("tj-node-0-1", "Succeeded")],
            {},
            [status("node", succeeded=1)],
            id="the job succeeded",
        ),
        pytest.param(
            tj(trainer={"numNodes": 2}),
            NODE,
            [pod("tj-node-0-0"), pod("tj-node-0-1", "Failed", code=1)],
            {},
            [status("node", failed=1)],
            id="the job failed",
        ),
        pytest.param(tj(trainer={"numNodes": 2}), NODE, [], {}, [status("node")], id="no pods yet"),
        pytest.param(tj(suspend=True), NODE, [], {}, [status("node", suspended=1)], id="suspended"),
        pytest.param(
            tj(),
            NODE,
            [],
            {"suspended": True},
            [status("node", suspended=1)],
            id="preempted by the scheduler",
        ),
        pytest.param(
            MPI2,
            NODE,
            [pod("tj-launcher-0-0", "Succeeded"), pod("tj-node-0-0")],
            {},
            [status("launcher", succeeded=1), status("node", ready=1, active=1)],
            id="mpi launcher done",
        ),
        pytest.param(
            tj("init"),
            ctx(INIT_RT),
            [
                pod("tj-dataset-initializer-0-0", "Succeeded"),
                pod("tj-model-initializer-0-0", ready=False),
            ],
            {},
            [
                status("dataset-initializer", succeeded=1),
                status("model-initializer", active=1),
                status("node"),
            ],
            id="initializers in progress",
        ),
        pytest.param(
            tj("elastic"),
            ctx(ELASTIC),
            [pod("tj-node-0-0"), pod("tj-node-0-1")],
            {"size": 2},
            [status("node", ready=1, active=1)],
            id="elastic at size 2",
        ),
        pytest.param(
            tj("elastic"),
            ctx(ELASTIC),
            [pod("tj-node-0-0"), pod("tj-node-0-1")],
            {},
            [status("node", active=1)],
            id="elastic defaults to the full size",
        ),
    ],
)
def test_jobs_status(
    obj: Obj, context: OperatorContext, pods: list[PodView], kwargs: Obj, expect: list[Obj]
) -> None:
    assert jobs_status(parse(obj, context), pods, **kwargs) == expect


def test_pod_name_is_jobset_naming() -> None:
    assert pod_name(parse(tj()), "node", 0, 3) == "tj-node-0-3"


# --- reconciler capabilities: staging, the runtime pin, Trainer's status -----------------------


def test_capabilities_are_declared() -> None:
    from lattice.frameworks.base import PinsInputs, RendersStatus, StagesChildren

    assert isinstance(PLUGIN, StagesChildren)
    assert isinstance(PLUGIN, PinsInputs)
    assert isinstance(PLUGIN, RendersStatus)


def test_pin_round_trips_and_survives_runtime_edits() -> None:
    obj = tj(trainer={"numNodes": 2})
    pin = PLUGIN.pin(obj, NODE)
    assert pin is not None
    assert pin["metadata"]["name"] == PLUGIN.pinned_name(obj) == "tj-runtime"
    assert pin["metadata"]["ownerReferences"][0]["uid"] == "uid-tj"
    assert (
        pin["metadata"]["annotations"]["trainer.kubeflow.org/runtime-hash"] == pin["data"]["hash"]
    )
    edited = ctx(runtime("torch-distributed", ml={"torch": {}, "numNodes": 7}), MPI_RT)
    assert PLUGIN.parse(obj, edited).max_nodes == 2
    pinned = PLUGIN.parse_pinned(obj, pin, OperatorContext())  # the runtime is gone: still runs
    assert pinned.runtime_hash == parse(obj).runtime_hash
    assert pinned.max_nodes == 2


def test_status_reads_and_renders_trainer_conditions() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, tzinfo=UTC)
    block = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "TrainJobCreated"},
            {"type": "Running", "status": "True", "reason": "TrainJobRunning"},
            {"type": "Suspended", "status": "False", "reason": "TrainJobResumed", "message": "m"},
            {"type": "Succeeded", "status": "True", "reason": "TrainJobSucceeded", "message": "ok"},
        ],
        "jobsStatus": [{"name": "node", "active": 1, "ready": 0}],
        "replicaStatuses": {},
    }
    stored = {"conditions": [{"type": "Created", "status": "False", "reason": "X", "message": "y"}]}
    out = PLUGIN.render_status(block, stored=stored, generation=3, now=now)
    assert [(c["type"], c["status"], c["reason"]) for c in out["conditions"]] == [
        ("Suspended", "False", "Resumed"),
        ("Complete", "True", "AllJobsCompleted"),
    ]
    assert all(c["observedGeneration"] == 3 for c in out["conditions"])
    assert set(out) == {"conditions", "jobsStatus"}
    back = PLUGIN.read_status(out)
    types = {c["type"]: c for c in back["conditions"]}
    assert types["Succeeded"]["status"] == "True"
    assert types["Suspended"]["reason"] == "TrainJobResumed"
    assert types["Created"]["status"] == "True"
    assert types["Running"]["status"] == "True", "derived from an active Job"


def test_staged_children_keep_only_succeeded_initializers_at_size_zero() -> None:
    from lattice.frameworks.base import Children

    depends = [{"name": "dataset-initializer", "status": "Complete"}]
    rt = runtime(
        "init",
        jobs=[
            rjob("dataset-initializer", "dataset-initializer"),
            {**rjob("node", "trainer"), "dependsOn": depends},
        ],
    )
    job = parse(tj("init", trainer={"numNodes": 1}), ctx(rt))

    init = "tj-dataset-initializer-0-0"
    none = PLUGIN.staged_children(job, Children(), size=0, pods=[], ctx=NODE)
    assert none.pods == ()
    kept = PLUGIN.staged_children(
        job, Children(), size=0, pods=[FakePod(init, "Succeeded")], ctx=NODE
    )
    assert [p["metadata"]["name"] for p in kept.pods] == [init]
    desired = PLUGIN.children(job, size=1, ctx=NODE)
    first = PLUGIN.staged_children(job, desired, size=1, pods=[FakePod(init, "Running")], ctx=NODE)
    assert [p["metadata"]["name"] for p in first.pods] == [init]
    assert first.services == desired.services
    then = PLUGIN.staged_children(job, desired, size=1, pods=[FakePod(init, "Succeeded")], ctx=NODE)
    assert [p["metadata"]["name"] for p in then.pods] == [init, "tj-node-0-0"]
