"""The MXJob plugin: parse, demand (gang, units, priority order), run policy, the exact pods and
Services of the training-operator dist and BytePS examples (names, labels, ``MX_CONFIG`` and
``DMLC_*`` env), and the v1.7 status rules (lead replica, ExitCode restarts, failures).
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.api.constants import MXJOB
from lattice.api.mxjob import MXJob
from lattice.frameworks.base import (
    MANAGED_LABEL,
    Children,
    InvalidJob,
    OperatorContext,
    Progress,
    ReplicaCounts,
    RunPolicyView,
    managed_elsewhere,
    messages_of,
)
from lattice.frameworks.manifests import go_json
from lattice.frameworks.mxjob import MXJobMessages, MXJobPlugin, mx_config
from lattice.frameworks.registry import plugin_for
from lattice.primitives.objects import Obj
from lattice.runtime.projections import pod_info
from tests.support.builders import FakeContainer, FakePod

PLUGIN = MXJobPlugin()
GPU = "nvidia.com/gpu"
NODE = OperatorContext()
GPU_CTX = OperatorContext(scheduling_unit=GPU)
EXAMPLES = Path(__file__).parents[3] / "examples" / "mxjob"
OWNER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "MXJob",
    "name": "mxnet-job",
    "uid": "uid-mx",
    "controller": True,
    "blockOwnerDeletion": True,
}
SPECS = "spec.mxReplicaSpecs"


def example(name: str, **spec: Any) -> Obj:
    obj: Obj = yaml.safe_load((EXAMPLES / name).read_text())
    obj["metadata"].update(namespace="ns", uid="uid-mx")
    obj["spec"].update(spec)
    return obj


def dist(**spec: Any) -> Obj:
    return example("mxjob-dist.yaml", **spec)


def byteps(**spec: Any) -> Obj:
    return example("mxjob-byteps.yaml", **spec)


def replica(obj: Obj, rtype: str) -> Obj:
    spec: Obj = obj["spec"]["mxReplicaSpecs"][rtype]
    return spec


def container(obj: Obj, rtype: str, index: int = 0) -> Obj:
    main: Obj = replica(obj, rtype)["template"]["spec"]["containers"][index]
    return main


def manifest(name: str = "tune", **replicas: Obj) -> Obj:
    """A minimal MXJob with the given replica specs (each gets an ``mxnet`` container)."""
    specs = {
        t: {"template": {"spec": {"containers": [{"name": "mxnet", "image": "img"}]}}, **r}
        for t, r in replicas.items()
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": name, "namespace": "ns", "uid": "uid-t"},
        "spec": {"mxReplicaSpecs": specs},
    }


def parse(obj: Obj, ctx: OperatorContext = NODE) -> MXJob:
    return PLUGIN.parse(obj, ctx)


def children(obj: Obj, ctx: OperatorContext = NODE, size: int = 99) -> Children:
    return PLUGIN.children(parse(obj, ctx), size=size, ctx=ctx)


def env_of(pod: Obj, index: int = 0) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][index]["env"]}


# --------------------------------------------------------------------------- identity / parse


def test_resource_and_status_paths() -> None:
    assert PLUGIN.resource == MXJOB
    assert PLUGIN.scheduling_path == ("status", "lattice")
    assert PLUGIN.exec_path == ("status",)
    assert PLUGIN.preempted_condition == "Suspended"
    assert isinstance(plugin_for("MXJob"), MXJobPlugin)


@pytest.mark.parametrize("name", ["mxjob-dist.yaml", "mxjob-byteps.yaml"])
def test_the_examples_parse(name: str) -> None:
    job = parse(example(name), GPU_CTX)
    assert list(job.spec.mx_replica_specs) == ["Scheduler", "Server", "Worker"]


def annotated(value: str) -> Obj:
    obj = dist()
    obj["metadata"]["annotations"] = {"lattice.breezeml.ai/priority": value}
    return obj


def broken(rtype: str, **fields: Any) -> Obj:
    obj = dist()
    container(obj, rtype).update(fields)
    return obj


def renamed(name: str) -> Obj:
    obj = dist()
    obj["metadata"]["name"] = name
    return obj


CONTAINERS = f"{SPECS}.Scheduler.template.spec.containers"


@pytest.mark.parametrize(
    ("obj", "ctx", "problems"),
    [
        pytest.param(
            broken("Scheduler", name="main"),
            NODE,
            [
                f'{CONTAINERS}: must have a container named "mxnet": it gets the mxjob-port '
                "port and the MX_CONFIG and DMLC_* variables"
            ],
            id="no container named mxnet",
        ),
        pytest.param(
            broken("Scheduler", ports=[{"name": "mxjob-port"}]),
            NODE,
            [
                f'{CONTAINERS}[0].ports[0].containerPort: the port named "mxjob-port" of the '
                '"mxnet" container must be a port number (1-65535): the other replicas reach '
                "this one on it, got None"
            ],
            id="mxjob-port without a number",
        ),
        pytest.param(
            broken("Scheduler", ports=[{"name": "mxjob-port", "containerPort": 70000}]),
            NODE,
            [
                f'{CONTAINERS}[0].ports[0].containerPort: the port named "mxjob-port" of the '
                '"mxnet" container must be a port number (1-65535): the other replicas reach '
                "this one on it, got 70000"
            ],
            id="mxjob-port out of range",
        ),
        pytest.param(
            broken("Scheduler", image=""),
            NODE,
            [f"{CONTAINERS}[0].image: required"],
            id="a container without an image",
        ),
        pytest.param(
            manifest(Scheduler={"replicas": 2}, Worker={}),
            NODE,
            [f"{SPECS}.Scheduler.replicas: must be at most 1 (one scheduler), got 2"],
            id="two schedulers",
        ),
        pytest.param(
            manifest(Worker={}, worker={}),
            NODE,
            [
                f"{SPECS}: names a replica type twice (keys are matched ignoring case): "
                + "Worker, worker"
            ],
            id="a replica type named twice in two letter cases",
        ),
        pytest.param(
            manifest(Worker={"replicas": 0}),
            NODE,
            [f"{SPECS}: must ask for at least one replica in all"],
            id="no replica at all",
        ),
        pytest.param(
            manifest(Worker={"template": {"spec": {"containers": []}}}),
            NODE,
            [f"{SPECS}.Worker.template.spec.containers: must define at least one container"],
            id="a template without containers",
        ),
        pytest.param(
            renamed("MXNet"),
            NODE,
            [
                "metadata.name: must be a DNS-1035 label (lower-case letters, digits and '-', "
                "starting with a letter): it names the pods' Services, got 'MXNet'"
            ],
            id="name not usable as a Service name",
        ),
        pytest.param(
            renamed("m" * 52),
            NODE,
            [
                f"metadata.name: too long: Service '{'m' * 52}-scheduler-0' would exceed 63 "
                "characters"
            ],
            id="name too long for the longest Service",
        ),
        pytest.param(
            annotated("1.5"),
            NODE,
            ["metadata.annotations[lattice.breezeml.ai/priority]: must be an integer, got '1.5'"],
            id="priority annotation that is not an integer",
        ),
        pytest.param(
            broken("Worker", resources={"limits": {GPU: "many"}}),
            GPU_CTX,
            [
                f"{SPECS}.Worker.template.spec.containers[0].resources.limits[{GPU}]: must be a "
                "quantity, got 'many'"
            ],
            id="malformed unit quantity",
        ),
        pytest.param(
            dist(jobMode="MXSomething"),
            NODE,
            ["spec.jobMode: Input should be 'MXTrain' or 'MXTune'"],
            id="schema error with its camelCase path",
        ),
    ],
)
def test_invalid_jobs_name_each_field(obj: Obj, ctx: OperatorContext, problems: list[str]) -> None:
    with pytest.raises(InvalidJob) as info:
        parse(obj, ctx)
    assert [str(p) for p in info.value.problems] == problems


def test_a_missing_mxjob_port_is_defaulted_not_refused() -> None:
    job = parse(byteps())
    assert mx_config(job, "Scheduler", 0)["cluster"]["scheduler"] == [
        {"url": "byteps-mxnet-job-scheduler-0", "port": 9091}
    ]


@pytest.mark.parametrize(
    ("managed_by", "other"),
    [
        pytest.param(None, False, id="unset: ours"),
        pytest.param("kubeflow.org/training-operator", False, id="training-operator: ours"),
        pytest.param("kueue.x-k8s.io/multikueue", True, id="MultiKueue: skipped"),
        pytest.param("example.com/other", True, id="any other controller: skipped"),
    ],
)
def test_managed_by_other(managed_by: str | None, other: bool) -> None:
    obj = dist(runPolicy={} if managed_by is None else {"managedBy": managed_by})
    parse(obj)  # a job managed elsewhere is still a valid job
    assert managed_elsewhere(obj) is other  # the reconciler's and the scheduler's rule


# --------------------------------------------------------------------------- demand


def with_gpus(obj: Obj, **per_type: int) -> Obj:
    for rtype, n in per_type.items():
        container(obj, rtype)["resources"] = {"limits": {GPU: n}}
    return obj


@pytest.mark.parametrize(
    ("obj", "ctx", "size", "fixed", "units"),
    [
        pytest.param(dist(), NODE, 3, (0, 0), 1, id="dist, node mode: a unit per worker"),
        pytest.param(dist(), GPU_CTX, 3, (0, 0), 1, id="dist in gpus: the worker's 1"),
        pytest.param(byteps(), GPU_CTX, 5, (0, 0, 0), 8, id="byteps: 2 x 8-gpu workers"),
        pytest.param(
            with_gpus(byteps(), Scheduler=1, Server=2),
            GPU_CTX,
            5,
            (1, 2, 2),
            8,
            id="non-worker pods requesting gpus are fixed pods",
        ),
        pytest.param(
            manifest(Scheduler={}, Server={"replicas": 2}),
            GPU_CTX,
            3,
            (0, 0, 0),
            0,
            id="no workers: every pod is fixed",
        ),
        pytest.param(
            with_gpus(dist(), Worker=0),
            GPU_CTX,
            3,
            (0, 0),
            0,
            id="a worker asking for none holds no gpu",
        ),
    ],
)
def test_gang_demand_and_units(
    obj: Obj, ctx: OperatorContext, size: int, fixed: tuple[int, ...], units: int
) -> None:
    demand = PLUGIN.demand(parse(obj, ctx), ctx)
    assert (demand.min_size, demand.max_size) == (size, size)
    assert (demand.fixed_pods, demand.replica_units) == (fixed, units)
    assert tuple(d.units for d in demand.fixed_demands) == fixed
    assert demand.suspended is False


def test_demand_names_every_pod_as_its_child() -> None:
    job = parse(with_gpus(byteps(), Server=2), GPU_CTX)
    demand = PLUGIN.demand(job, GPU_CTX)
    pods = [p["metadata"]["name"] for p in PLUGIN.children(job, size=5, ctx=GPU_CTX).pods]
    workers = [
        f"{demand.replica_prefix}{i}" for i in range(demand.max_size - len(demand.fixed_names))
    ]
    assert sorted(pods) == sorted([*demand.fixed_names, *workers])
    assert demand.replica_prefix.endswith("-worker-")
    servers = [n for n in demand.fixed_names if "-server-" in n]
    for name, pod in zip(demand.fixed_names, demand.fixed_demands, strict=True):
        assert pod.units == (2 if name in servers else 0)
        assert not pod.exclusive
    assert demand.replica_demand is not None
    assert demand.replica_demand.units == 8


PRIORITIES = OperatorContext(priority_classes={"high": 1000, "low": 10}, default_priority=5)


def prioritised(
    obj: Obj, *, policy: str | None = None, annotation: str | None = None, **classes: str
) -> Obj:
    if policy:
        obj["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": policy}}
    for rtype, name in classes.items():
        replica(obj, rtype)["template"]["spec"]["priorityClassName"] = name
    if annotation:
        obj["metadata"]["annotations"] = {"lattice.breezeml.ai/priority": annotation}
    return obj


@pytest.mark.parametrize(
    ("obj", "ctx", "priority"),
    [
        pytest.param(
            prioritised(dist(), policy="low", annotation="7", Worker="high"),
            PRIORITIES,
            10,
            id="schedulingPolicy.priorityClass first",
        ),
        pytest.param(
            prioritised(dist(), annotation="7", Scheduler="low", Worker="high"),
            PRIORITIES,
            1000,
            id="then the Worker template's class",
        ),
        pytest.param(
            prioritised(dist(), annotation="7", Scheduler="low"),
            PRIORITIES,
            10,
            id="then another replica type's class",
        ),
        pytest.param(
            prioritised(dist(), annotation="+7", Worker="missing"),
            PRIORITIES,
            7,
            id="unknown classes are skipped: the annotation",
        ),
        pytest.param(dist(), PRIORITIES, 5, id="then the default PriorityClass"),
        pytest.param(dist(), NODE, 0, id="else 0"),
    ],
)
def test_priority_order(obj: Obj, ctx: OperatorContext, priority: int) -> None:
    assert PLUGIN.demand(parse(obj, ctx), ctx).priority == priority


def test_run_policy_and_suspension() -> None:
    policy = {
        "cleanPodPolicy": "All",
        "ttlSecondsAfterFinished": 60,
        "activeDeadlineSeconds": 600,
        "backoffLimit": 3,
        "suspend": True,
    }
    job = parse(dist(runPolicy=policy))
    assert PLUGIN.run_policy(job) == RunPolicyView(
        clean_pod_policy="All",
        ttl_seconds_after_finished=60,
        active_deadline_seconds=600,
        backoff_limit=3,
        service_cleanup="WithPods",
    )
    assert PLUGIN.demand(job, NODE).suspended is True
    assert PLUGIN.run_policy(parse(dist())) == RunPolicyView(
        clean_pod_policy="None", service_cleanup="WithPods"
    )


# --------------------------------------------------------------------------- children


DIST_CONFIG = (
    '{"cluster":{"scheduler":[{"url":"mxnet-job-scheduler-0","port":9991}],'
    '"server":[{"url":"mxnet-job-server-0","port":9991}],'
    '"worker":[{"url":"mxnet-job-worker-0","port":9991}]},'
    '"labels":{"scheduler":"","server":"","worker":""},'
    '"task":{"type":"%s","index":0}}'
)


def dist_env(role: str) -> list[Obj]:
    env = [
        {"name": "MX_CONFIG", "value": DIST_CONFIG % role},
        {"name": "DMLC_PS_ROOT_PORT", "value": "9991"},
        {"name": "DMLC_PS_ROOT_URI", "value": "mxnet-job-scheduler-0"},
        {"name": "DMLC_NUM_SERVER", "value": "1"},
        {"name": "DMLC_NUM_WORKER", "value": "1"},
        {"name": "DMLC_ROLE", "value": role},
        {"name": "DMLC_USE_KUBERNETES", "value": "1"},
    ]
    if role == "worker":
        env.append({"name": "DMLC_WORKER_ID", "value": "0"})
    return env


def labels(rtype: str, *, master: bool = False) -> dict[str, str]:
    out = {
        "training.kubeflow.org/operator-name": "mxjob-controller",
        "training.kubeflow.org/job-name": "mxnet-job",
        "training.kubeflow.org/replica-type": rtype,
        "training.kubeflow.org/replica-index": "0",
        MANAGED_LABEL: "true",
    }
    if master:
        out["training.kubeflow.org/job-role"] = "master"
    return out


def test_size_zero_has_no_children() -> None:
    assert children(dist(), size=0) == Children()


def test_dist_example_pods() -> None:
    kids = children(dist(), GPU_CTX)
    names = ["mxnet-job-scheduler-0", "mxnet-job-server-0", "mxnet-job-worker-0"]
    assert [p["metadata"]["name"] for p in kids.pods] == names
    for pod, role in zip(kids.pods, ("scheduler", "server", "worker"), strict=True):
        assert pod["metadata"]["labels"] == labels(role, master=role == "server")
        assert pod["metadata"]["ownerReferences"] == [OWNER]
        assert pod["metadata"]["namespace"] == "ns"
        assert pod["spec"]["containers"][0]["env"] == dist_env(role)
        assert json.loads(env_of(pod)["MX_CONFIG"])["task"] == {"type": role, "index": 0}
    assert kids.pods[2] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "mxnet-job-worker-0",
            "namespace": "ns",
            "labels": labels("worker"),
            "ownerReferences": [OWNER],
        },
        "spec": {
            "containers": [
                {
                    "name": "mxnet",
                    "image": "mxjob/mxnet:gpu",
                    "command": ["python"],
                    "args": [
                        "/incubator-mxnet/example/image-classification/train_mnist.py",
                        "--num-epochs",
                        "10",
                        "--num-layers",
                        "2",
                        "--kv-store",
                        "dist_device_sync",
                        "--gpus",
                        "0",
                    ],
                    "resources": {"limits": {GPU: 1}},
                    "ports": [{"containerPort": 9991, "name": "mxjob-port"}],
                    "env": dist_env("worker"),
                }
            ],
            "restartPolicy": "Never",
        },
    }


def test_dist_example_services() -> None:
    kids = children(dist(), GPU_CTX)
    assert [s["metadata"]["name"] for s in kids.services] == [
        "mxnet-job-scheduler-0",
        "mxnet-job-server-0",
        "mxnet-job-worker-0",
    ]
    selector = {k: v for k, v in labels("server").items() if k != MANAGED_LABEL}
    assert kids.services[1] == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "mxnet-job-server-0",
            "namespace": "ns",
            "labels": labels("server"),
            "ownerReferences": [OWNER],
        },
        "spec": {
            "clusterIP": "None",
            "selector": selector,
            "ports": [{"name": "mxjob-port", "port": 9991}],
        },
    }


def test_byteps_example_defaults_the_port_and_numbers_workers() -> None:
    kids = children(byteps(), GPU_CTX)
    assert [p["metadata"]["name"] for p in kids.pods] == [
        "byteps-mxnet-job-scheduler-0",
        "byteps-mxnet-job-server-0",
        "byteps-mxnet-job-server-1",
        "byteps-mxnet-job-worker-0",
        "byteps-mxnet-job-worker-1",
    ]
    worker1 = kids.pods[4]
    main = worker1["spec"]["containers"][0]
    assert main["ports"] == [{"name": "mxjob-port", "containerPort": 9091}]
    assert main["volumeMounts"] == [{"mountPath": "/dev/shm", "name": "dshm"}]
    assert worker1["spec"]["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    env = env_of(worker1)
    assert {k: v for k, v in env.items() if k != "MX_CONFIG"} == {
        "DMLC_PS_ROOT_PORT": "9091",
        "DMLC_PS_ROOT_URI": "byteps-mxnet-job-scheduler-0",
        "DMLC_NUM_SERVER": "2",
        "DMLC_NUM_WORKER": "2",
        "DMLC_ROLE": "worker",
        "DMLC_USE_KUBERNETES": "1",
        "DMLC_WORKER_ID": "1",
    }
    assert json.loads(env["MX_CONFIG"]) == {
        "cluster": {
            "scheduler": [{"url": "byteps-mxnet-job-scheduler-0", "port": 9091}],
            "server": [
                {"url": "byteps-mxnet-job-server-0", "port": 9091},
                {"url": "byteps-mxnet-job-server-1", "port": 9091},
            ],
            "worker": [
                {"url": "byteps-mxnet-job-worker-0", "port": 9091},
                {"url": "byteps-mxnet-job-worker-1", "port": 9091},
            ],
        },
        "labels": {"scheduler": "", "server": "", "worker": ""},
        "task": {"type": "worker", "index": 1},
    }
    assert "DMLC_WORKER_ID" not in env_of(kids.pods[2])
    assert kids.services[2]["spec"]["ports"] == [{"name": "mxjob-port", "port": 9091}]


def test_mx_tune_config_labels_and_absent_scheduler() -> None:
    obj = manifest(TunerTracker={}, TunerServer={"replicas": 2}, Tuner={})
    obj["spec"]["jobMode"] = "MXTune"
    server = replica(obj, "TunerServer")["template"]
    server["metadata"] = {"annotations": {"tuner-server-key": "<key&1>"}}
    kids = children(obj)
    assert [p["metadata"]["name"] for p in kids.pods] == [
        "tune-tunertracker-0",
        "tune-tunerserver-0",
        "tune-tunerserver-1",
        "tune-tuner-0",
    ]
    env = env_of(kids.pods[2])
    assert env["MX_CONFIG"] == (
        '{"cluster":{"tuner":[{"url":"tune-tuner-0","port":9091}],'
        '"tunerserver":[{"url":"tune-tunerserver-0","port":9091},'
        '{"url":"tune-tunerserver-1","port":9091}],'
        '"tunertracker":[{"url":"tune-tunertracker-0","port":9091}]},'
        '"labels":{"tuner":"","tunerserver":"\\u003ckey\\u00261\\u003e","tunertracker":""},'
        '"task":{"type":"tunerserver","index":1}}'
    )
    assert (env["DMLC_PS_ROOT_PORT"], env["DMLC_PS_ROOT_URI"]) == ("0", "")
    assert (env["DMLC_NUM_SERVER"], env["DMLC_NUM_WORKER"], env["DMLC_ROLE"]) == (
        "0",
        "0",
        "tunerserver",
    )
    assert kids.pods[1]["metadata"]["annotations"] == {"tuner-server-key": "<key&1>"}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param({"b": 1, "a": [True, None]}, '{"b":1,"a":[true,null]}', id="order kept"),
        pytest.param("<&>", '"\\u003c\\u0026\\u003e"', id="html characters escaped"),
        pytest.param("é\u2028", '"é\\u2028"', id="utf-8 kept, line separator escaped"),
    ],
)
def test_go_json(value: object, text: str) -> None:
    assert go_json(value) == text


def test_every_container_gets_the_env_and_user_env_is_kept() -> None:
    obj = dist()
    worker = replica(obj, "Worker")["template"]["spec"]
    worker["containers"][0]["env"] = [
        {"name": "A", "value": "1"},
        {"name": "DMLC_ROLE", "value": "x"},
    ]
    worker["containers"].append({"name": "sidecar", "image": "side"})
    pod = children(obj).pods[2]
    main, sidecar = pod["spec"]["containers"]
    assert [e["name"] for e in main["env"]][:2] == ["A", "MX_CONFIG"]
    assert env_of(pod)["DMLC_ROLE"] == "worker"
    assert [e["name"] for e in sidecar["env"]] == [e["name"] for e in dist_env("worker")]
    assert "ports" not in sidecar


@pytest.mark.parametrize(
    ("policy", "pod_policy"),
    [("ExitCode", "Never"), ("OnFailure", "OnFailure"), ("Always", "Always"), ("Never", "Never")],
)
def test_restart_policy(policy: str, pod_policy: str) -> None:
    obj = dist()
    replica(obj, "Worker")["restartPolicy"] = policy
    replica(obj, "Worker")["template"]["spec"]["restartPolicy"] = "Always"
    assert children(obj).pods[2]["spec"]["restartPolicy"] == pod_policy


def test_node_selector_on_every_pod_and_no_pod_takes_a_whole_node() -> None:
    ctx = OperatorContext(node_selector=(("pool", "gpu"),))
    for pod in children(dist(), ctx).pods:
        assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
        assert "affinity" not in pod["spec"]  # only TrainingJob workers are exclusive
    assert all("affinity" not in p["spec"] for p in children(dist(), GPU_CTX).pods)


def test_children_never_mutate_the_job() -> None:
    job = parse(byteps())
    before = job.model_dump()
    kids = PLUGIN.children(job, size=5, ctx=NODE)
    kids.pods[0]["spec"]["containers"][0]["ports"].append({"name": "x"})
    assert job.model_dump() == before
    assert PLUGIN.children(job, size=5, ctx=NODE).pods[0]["spec"]["containers"][0]["ports"] == [
        {"name": "mxjob-port", "containerPort": 9091}
    ]


# --------------------------------------------------------------------------- progress

DELETED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def pod(
    rtype: str,
    index: int = 0,
    phase: str = "Running",
    *,
    code: int | None = None,
    deleted: bool = False,
) -> FakePod:
    """Pod ``index`` of ``rtype`` (lower case) of job ``mxnet-job``."""
    state = "terminated" if code is not None else "running" if phase == "Running" else "waiting"
    return FakePod(
        name=f"mxnet-job-{rtype}-{index}",
        phase=phase,
        replica_type=rtype,
        replica_index=index,
        containers=(FakeContainer(name="mxnet", state=state, exit_code=code),),
        deletion_timestamp=DELETED_AT if deleted else None,
    )


def counts(**per_type: tuple[int, int, int]) -> dict[str, ReplicaCounts]:
    """Counts of ``Scheduler``, ``Server`` and ``Worker``: (active, succeeded, failed)."""
    out = {t: ReplicaCounts() for t in ("Scheduler", "Server", "Worker")}
    for rtype, (active, succeeded, failed) in per_type.items():
        out[rtype] = ReplicaCounts(active=active, succeeded=succeeded, failed=failed)
    return out


ALL_RUNNING = [pod("scheduler"), pod("server"), pod("worker")]
FAILED = "MXJobFailed"


def failed_message(n: int, rtype: str) -> str:
    return f"mxjob mxnet-job is failed because {n} {rtype} replica(s) failed."


@pytest.mark.parametrize(
    ("policy", "size", "pods", "expected"),
    [
        pytest.param("Never", 0, ALL_RUNNING, Progress(replicas=counts()), id="size 0"),
        pytest.param(
            "Never",
            3,
            [pod("scheduler", phase="Pending"), pod("server"), pod("worker")],
            Progress(replicas=counts(Server=(1, 0, 0), Worker=(1, 0, 0))),
            id="pending pods are not active; the scheduler is not running",
        ),
        pytest.param(
            "Never",
            3,
            [pod("scheduler"), pod("server", phase="Pending"), pod("worker", phase="Pending")],
            Progress(replicas=counts(Scheduler=(1, 0, 0)), running=True),
            id="a running scheduler makes the job running",
        ),
        pytest.param(
            "Never",
            3,
            [pod("scheduler", phase="Succeeded", code=0), pod("server"), pod("worker")],
            Progress(
                replicas=counts(Scheduler=(0, 1, 0), Server=(1, 0, 0), Worker=(1, 0, 0)),
                succeeded=True,
            ),
            id="the scheduler succeeding ends the job",
        ),
        pytest.param(
            "Never",
            3,
            [pod("scheduler"), pod("server"), pod("worker", phase="Succeeded", code=0)],
            Progress(
                replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 1, 0)),
                running=True,
            ),
            id="a worker succeeding does not",
        ),
        pytest.param(
            "Never",
            3,
            [pod("scheduler"), pod("server"), pod("worker", phase="Failed", code=1)],
            Progress(
                replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 0, 1)),
                failed=failed_message(1, "Worker"),
                failed_reason=FAILED,
            ),
            id="Never: a worker exiting 1 fails the job",
        ),
        pytest.param(
            "Never",
            3,
            [
                pod("scheduler", phase="Succeeded", code=0),
                pod("server"),
                pod("worker", phase="Failed", code=137),
            ],
            Progress(
                replicas=counts(Scheduler=(0, 1, 0), Server=(1, 0, 0), Worker=(0, 0, 1)),
                failed=failed_message(1, "Worker"),
                failed_reason=FAILED,
            ),
            id="Never: any failure, even 137, wins over the scheduler's success",
        ),
        pytest.param(
            "ExitCode",
            3,
            [pod("scheduler"), pod("server"), pod("worker", phase="Failed", code=137)],
            Progress(
                replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 0, 1)),
                running=True,
                restarting=True,
                recreate=("mxnet-job-worker-0",),
            ),
            id="ExitCode: 137 recreates the pod",
        ),
        pytest.param(
            "ExitCode",
            3,
            [pod("scheduler"), pod("server"), pod("worker", phase="Failed", code=130)],
            Progress(
                replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 0, 1)),
                running=True,
                restarting=True,
                recreate=("mxnet-job-worker-0",),
            ),
            id="ExitCode: 130 (SIGINT) is retryable: recreates the pod",
        ),
        pytest.param(
            "ExitCode",
            3,
            [pod("scheduler"), pod("server"), pod("worker", phase="Failed", code=1)],
            Progress(
                replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 0, 1)),
                failed=failed_message(1, "Worker"),
                failed_reason=FAILED,
            ),
            id="ExitCode: 1 is permanent: fails the job (v1.7 leaves it Restarting)",
        ),
        pytest.param(
            "ExitCode",
            3,
            [
                pod("scheduler"),
                pod("server"),
                FakePod("mxnet-job-worker-0", "Failed", replica_type="worker", replica_index=0),
            ],
            Progress(
                replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 0, 1)),
                running=True,
                restarting=True,
                recreate=("mxnet-job-worker-0",),
            ),
            id="ExitCode: no exit code (evicted before start) recreates the pod",
        ),
        pytest.param(
            "ExitCode",
            3,
            [pod("scheduler"), pod("server"), pod("worker", phase="Failed", code=127)],
            Progress(
                replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 0, 1)),
                failed=failed_message(1, "Worker"),
                failed_reason=FAILED,
            ),
            id="ExitCode: 1-127 fail the job",
        ),
        pytest.param(
            "OnFailure",
            3,
            [pod("scheduler"), pod("server"), pod("worker", phase="Failed", code=2)],
            Progress(
                replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 0, 1)),
                failed=failed_message(1, "Worker"),
                failed_reason=FAILED,
            ),
            id="OnFailure: a pod the kubelet gave up on fails the job",
        ),
        pytest.param(
            "Never",
            3,
            [
                pod("scheduler"),
                pod("server"),
                pod("worker", phase="Failed", code=1, deleted=True),
                pod("worker", 1, "Failed", code=1),
            ],
            Progress(replicas=counts(Scheduler=(1, 0, 0), Server=(1, 0, 0)), running=True),
            id="deleted pods and indexes beyond the replicas are ignored",
        ),
    ],
)
def test_progress(policy: str, size: int, pods: list[FakePod], expected: Progress) -> None:
    obj = dist()
    for rtype in ("Scheduler", "Server", "Worker"):
        replica(obj, rtype)["restartPolicy"] = policy
    assert PLUGIN.progress(parse(obj), size=size, pods=pods, others={}) == expected


def test_failures_of_several_types_name_the_first_type() -> None:
    pods = [
        pod("scheduler"),
        pod("server", phase="Failed", code=1),
        pod("worker", phase="Failed", code=1),
    ]
    progress = PLUGIN.progress(parse(dist()), size=3, pods=pods, others={})
    assert progress.failed == failed_message(1, "Server")


SINGLE = manifest("mxnet-job", Worker={})
TUNE = manifest("mxnet-job", TunerTracker={}, Tuner={"replicas": 2})


@pytest.mark.parametrize(
    ("obj", "pods", "running", "succeeded"),
    [
        pytest.param(SINGLE, [pod("worker")], True, False, id="single worker: running"),
        pytest.param(
            SINGLE, [pod("worker", phase="Succeeded", code=0)], False, True, id="single worker done"
        ),
        pytest.param(
            TUNE,
            [pod("tunertracker"), pod("tuner"), pod("tuner", 1, "Pending")],
            False,
            False,
            id="no lead: running only when every pod runs",
        ),
        pytest.param(
            TUNE,
            [pod("tunertracker"), pod("tuner"), pod("tuner", 1)],
            True,
            False,
            id="no lead: every pod running",
        ),
        pytest.param(
            TUNE,
            [
                pod("tunertracker", phase="Succeeded"),
                pod("tuner", phase="Succeeded"),
                pod("tuner", 1),
            ],
            False,
            False,
            id="no lead: not done while a pod runs",
        ),
        pytest.param(
            TUNE,
            [pod(t, i, "Succeeded") for t, i in (("tunertracker", 0), ("tuner", 0), ("tuner", 1))],
            False,
            True,
            id="no lead: done when every pod succeeded",
        ),
    ],
)
def test_lead_replica(obj: Obj, pods: list[FakePod], running: bool, succeeded: bool) -> None:
    progress = PLUGIN.progress(parse(obj), size=9, pods=pods, others={})
    assert (progress.running, progress.succeeded) == (running, succeeded)


def test_progress_reads_the_informer_projection_of_real_pods() -> None:
    obj = dist()
    replica(obj, "Worker")["restartPolicy"] = "ExitCode"
    raw = copy.deepcopy(list(children(obj).pods))
    raw[0]["status"] = {"phase": "Running"}
    raw[1]["status"] = {"phase": "Running"}
    raw[2]["status"] = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "mxnet", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
        ],
    }
    progress = PLUGIN.progress(parse(obj), size=3, pods=[pod_info(p) for p in raw], others={})
    assert progress.replicas == counts(Scheduler=(1, 0, 0), Server=(1, 0, 0), Worker=(0, 0, 1))
    assert (progress.running, progress.recreate) == (True, ("mxnet-job-worker-0",))


def test_exit_code_policy_reads_only_the_mxnet_container() -> None:
    obj = dist()
    replica(obj, "Worker")["restartPolicy"] = "ExitCode"
    sidecar_failed = FakePod(
        "mxnet-job-worker-0",
        "Failed",
        replica_type="worker",
        replica_index=0,
        containers=(
            FakeContainer(name="mxnet", state="running"),
            FakeContainer(name="sidecar", state="terminated", exit_code=1),
        ),
    )
    pods = [pod("scheduler"), pod("server"), sidecar_failed]
    progress = PLUGIN.progress(parse(obj), size=3, pods=pods, others={})
    assert (progress.failed, progress.recreate) == (None, ("mxnet-job-worker-0",))


# --------------------------------------------------------------------------- wording


def test_training_operator_v1_7_wording() -> None:
    words = messages_of(PLUGIN)
    assert isinstance(words, MXJobMessages)
    assert words.created("ns", "mxnet-job") == "MXJob mxnet-job is created."
    assert words.running("ns", "mxnet-job") == "MXJob mxnet-job is running."
    assert words.succeeded("ns", "mxnet-job") == "MXJob mxnet-job is successfully completed."
    assert words.suspended("ns", "mxnet-job") == "MXJob mxnet-job is suspended."
    assert words.resumed("ns", "mxnet-job") == "MXJob mxnet-job is resumed."
    assert words.backoff_exceeded("ns", "mxnet-job") == (
        FAILED,
        "Job mxnet-job has failed because it has reached the specified backoff limit",
    )
    assert words.deadline_exceeded("ns", "mxnet-job") == (
        FAILED,
        "Job mxnet-job has failed because it was active longer than specified deadline",
    )
    assert words.failed_event_type == "Normal"
    assert words.created_event is False
    assert words.running_event("ns", "mxnet-job") is None


def test_restart_wording_names_the_first_type_and_its_count() -> None:
    words = messages_of(PLUGIN)
    recreated = [pod("worker", 1, "Failed", code=137), pod("server", 0, "Failed", code=137)]
    recreated.append(pod("worker", 0, "Failed", code=139))
    assert words.restarting("ns", "mxnet-job", recreated) == (
        "mxjob mxnet-job is restarting because 1 Server replica(s) failed."
    )
    assert words.restarting("ns", "mxnet-job", recreated[::2]) == (
        "mxjob mxnet-job is restarting because 2 Worker replica(s) failed."
    )


def test_exited_with_code_reads_the_mxnet_container() -> None:
    words = messages_of(PLUGIN)
    assert words.exited("ns", pod("worker", 1, "Failed", code=137)) == (
        "Pod: ns.mxnet-job-worker-1 exited with code 137"
    )
    assert words.exited("ns", pod("worker", 1, "Failed")) is None
