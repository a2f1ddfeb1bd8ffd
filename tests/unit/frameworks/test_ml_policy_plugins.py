"""The TrainJob ML policy plugins on the children they build: JAX, XGBoost, torch
(``numProcPerNode`` resolution, ``envInjection``), MPI (slots from the GPU count,
``mpiImplementation: ""``) and Flux (installer, volumes, command, scripts, CURVE Secret), over
the official runtime shapes of ``tests/integration/manifests/runtimes.yaml`` (JAX, XGBoost,
DeepSpeed, MLX, Flux, torch).
"""

from __future__ import annotations

import base64
import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.controllers.generated import fill_generated
from lattice.frameworks.base import InvalidJob
from lattice.frameworks.policies import flux, jax, mpi, torch, xgboost
from lattice.frameworks.policies.resources import cpus_per_node, gpus_per_node, node_resources
from lattice.frameworks.trainjob import hostfile
from lattice.frameworks.trainjob_mlpolicies import ML_POLICIES
from lattice.frameworks.trainjob_plans import RuntimeNotReady
from lattice.primitives.objects import Obj
from tests.unit.frameworks.test_trainjob_plugin import (
    INDEX_REF,
    PLUGIN,
    ctx,
    env_of,
    main,
    parse,
    pods_of,
    rjob,
    runtime,
    tj,
)

MANIFESTS = Path(__file__).parents[2] / "integration" / "manifests" / "runtimes.yaml"
RUNTIMES: dict[str, Obj] = {
    doc["metadata"]["name"]: doc
    for doc in yaml.safe_load_all(MANIFESTS.read_text())
    if doc and doc.get("kind") == "ClusterTrainingRuntime"
}
GPU = "nvidia.com/gpu"


def official(name: str, **node_container: Any) -> Obj:
    """Runtime ``name`` of the manifests, its trainer ``node`` container updated."""
    rt = copy.deepcopy(RUNTIMES[name])
    for job in rt["spec"]["template"]["spec"]["replicatedJobs"]:
        labels = (job["template"].get("metadata") or {}).get("labels") or {}
        if labels.get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer":
            job["template"]["spec"]["template"]["spec"]["containers"][0].update(node_container)
    return rt


def on(rt: Obj, **trainer: Any) -> list[Obj]:
    """The pods of a TrainJob ``tj`` with ``trainer`` over ClusterTrainingRuntime ``rt``."""
    spec: Obj = {"trainer": trainer} if trainer else {}
    return pods_of(tj(rt["metadata"]["name"], **spec), ctx(rt))


def ports(container: Obj) -> list[int]:
    return [p["containerPort"] for p in container.get("ports") or ()]


def test_the_plugins_are_registered_once_each_in_order() -> None:
    assert [p.name for p in ML_POLICIES] == ["torch", "mpi", "jax", "xgboost", "flux"]


# --------------------------------------------------------------------------- JAX


def test_jax_runtime_sets_the_coordinator_env_and_port_on_every_node() -> None:
    pods = on(official("lt-jax"), numNodes=3, env=[{"name": "USER_VAR", "value": "x"}])
    assert [p["metadata"]["name"] for p in pods] == ["tj-node-0-0", "tj-node-0-1", "tj-node-0-2"]
    for pod in pods:
        container = main(pod)
        assert [e["name"] for e in container["env"]] == [
            "USER_VAR",
            "JAX_NUM_PROCESSES",
            "JAX_PROCESS_ID",
            "JAX_COORDINATOR_ADDRESS",
            "JOB_COMPLETION_INDEX",
        ]
        env = env_of(container)
        assert env["JAX_NUM_PROCESSES"] == "3"
        assert env["JAX_PROCESS_ID"] == INDEX_REF
        assert env["JAX_COORDINATOR_ADDRESS"] == "tj-node-0-0.tj:29500"
        assert ports(container) == [29500]
        assert not any(name.startswith(("PET_", "DMLC_")) for name in env)


def test_jax_coordinator_follows_the_runtime_subdomain_and_keeps_a_stated_port() -> None:
    rt = official("lt-jax", ports=[{"containerPort": 29500, "name": "coord"}])
    rt["spec"]["template"]["spec"]["network"] = {"subdomain": "mesh"}
    (pod,) = on(rt)
    assert env_of(main(pod))["JAX_COORDINATOR_ADDRESS"] == "tj-node-0-0.mesh:29500"
    assert main(pod)["ports"] == [{"containerPort": 29500, "name": "coord"}]


def test_jax_env_is_one_process_per_pod() -> None:
    assert jax.jax_env(processes=2, process_id="1", coordinator="h", port=7) == {
        "JAX_NUM_PROCESSES": "2",
        "JAX_PROCESS_ID": "1",
        "JAX_COORDINATOR_ADDRESS": "h:7",
    }


# --------------------------------------------------------------------------- XGBoost


@pytest.mark.parametrize(
    ("node", "trainer", "workers"),
    [
        pytest.param({}, {"numNodes": 2}, "2", id="CPU: one worker per node"),
        pytest.param(
            {},
            {"numNodes": 2, "resourcesPerNode": {"limits": {GPU: 4}}},
            "8",
            id="GPU: one worker per GPU",
        ),
        pytest.param(
            {"resources": {"limits": {GPU: 2}}}, {"numNodes": 3}, "6", id="the runtime's GPUs"
        ),
        pytest.param(
            {"resources": {"limits": {GPU: 2}}},
            {"numNodes": 3, "resourcesPerNode": {"requests": {"cpu": 4}}},
            "3",
            id="the TrainJob's resources replace the runtime's for the count",
        ),
    ],
)
def test_xgboost_runtime_sets_the_tracker_env_and_port(
    node: Obj, trainer: Obj, workers: str
) -> None:
    pods = on(official("lt-xgboost", **node), **trainer)
    assert len(pods) == trainer["numNodes"]
    for pod in pods:
        container = main(pod)
        env = env_of(container)
        assert [n for n in env if n.startswith("DMLC_")] == [
            "DMLC_TRACKER_URI",
            "DMLC_TRACKER_PORT",
            "DMLC_TASK_ID",
            "DMLC_NUM_WORKER",
        ]
        assert env["DMLC_TRACKER_URI"] == "tj-node-0-0.tj"
        assert env["DMLC_TRACKER_PORT"] == "29500"
        assert env["DMLC_TASK_ID"] == INDEX_REF
        assert env["DMLC_NUM_WORKER"] == workers
        assert ports(container) == [29500]


def test_xgboost_reserved_env_is_refused_naming_the_entry() -> None:
    rt = official("lt-xgboost")
    env = [{"name": "OK", "value": "1"}, {"name": "DMLC_NUM_WORKER", "value": "9"}]
    with pytest.raises(InvalidJob) as err:
        parse(tj("lt-xgboost", trainer={"env": env}), ctx(rt))
    (problem,) = err.value.problems
    assert problem.field == "spec.trainer.env[1]"
    assert "DMLC_NUM_WORKER is reserved for the XGBoost runtime" in problem.message


def test_xgboost_workers() -> None:
    assert xgboost.workers(nodes=3, gpus=0) == 3
    assert xgboost.workers(nodes=3, gpus=2) == 6


def test_dmlc_env_without_xgboost_is_the_users() -> None:
    env = [{"name": "DMLC_NUM_WORKER", "value": "9"}]
    (pod,) = on(official("lt-jax"), env=env)
    assert env_of(main(pod))["DMLC_NUM_WORKER"] == "9"


# --------------------------------------------------------------------------- torch


@pytest.mark.parametrize(
    ("node", "trainer", "expected"),
    [
        pytest.param({}, {}, "1", id="no resources: one process"),
        pytest.param({"resources": {"limits": {GPU: 8}}}, {}, "auto", id="runtime GPUs: auto"),
        pytest.param({"resources": {"requests": {"cpu": 6}}}, {}, "6", id="runtime CPUs"),
        pytest.param(
            {"resources": {"limits": {GPU: 8}}},
            {"resourcesPerNode": {"limits": {"cpu": "2500m"}}},
            "3",
            id="the TrainJob's resources replace the runtime's",
        ),
        pytest.param(
            {"resources": {"requests": {"cpu": 6}}}, {"numProcPerNode": 2}, "2", id="an integer"
        ),
    ],
)
def test_torch_nproc_per_node_auto_is_resolved_over_the_node_resources(
    node: Obj, trainer: Obj, expected: str
) -> None:
    (pod,) = on(official("lt-torch", **node), **trainer)
    assert env_of(main(pod))["PET_NPROC_PER_NODE"] == expected


def test_resources_per_node_reading() -> None:
    assert gpus_per_node({"requests": {"amd.com/GPU": "2"}, "limits": {GPU: 4}}) == 2
    assert gpus_per_node({"requests": {"cpu": 1}, "limits": {GPU: 4}}) == 4
    assert cpus_per_node({"requests": {"cpu": 0}, "limits": {"cpu": "1200m"}}) == 2
    assert cpus_per_node({}) == 0
    assert node_resources(None, {"limits": {"cpu": 1}}) == {"limits": {"cpu": 1}}
    assert node_resources({}, {"limits": {"cpu": 1}}) == {}
    assert torch.nproc_per_node("gpu", {}) == "gpu"
    assert torch.nproc_per_node("cpu", {"limits": {GPU: 2, "cpu": 3}}) == "3"


INJECTED = runtime(
    "inject",
    ml={
        "torch": {
            "envInjection": {
                "targets": [
                    {"jobName": "node", "containerNames": ["sidecar", "preflight"]},
                    {"jobName": "helper", "containerNames": ["helper"]},
                ]
            }
        }
    },
    jobs=[
        rjob(
            "node",
            "trainer",
            {"name": "node", "image": "n:1"},
            {"name": "sidecar", "image": "s:1"},
            pod={"initContainers": [{"name": "preflight", "image": "p:1"}]},
        ),
        rjob("helper", None, {"name": "helper", "image": "h:1"}, {"name": "other", "image": "o:1"}),
    ],
)
PET = ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"]


def test_torch_env_injection_targets_get_the_pet_env() -> None:
    pods = {p["metadata"]["name"]: p for p in pods_of(tj("inject"), ctx(INJECTED))}
    node, helper = pods["tj-node-0-0"]["spec"], pods["tj-helper-0-0"]["spec"]
    trainer_env = env_of(node["containers"][0])
    for container in (node["containers"][1], node["initContainers"][0], helper["containers"][0]):
        env = env_of(container)
        assert [n for n in env if n.startswith("PET_")] == PET
        assert {n: env[n] for n in PET} == {n: trainer_env[n] for n in PET}
    assert not any(n.startswith("PET_") for n in env_of(helper["containers"][1]))
    assert ports(node["containers"][1]) == []


def test_torch_env_injection_of_a_missing_container_makes_the_runtime_not_ready() -> None:
    rt = copy.deepcopy(INJECTED)
    targets = rt["spec"]["mlPolicy"]["torch"]["envInjection"]["targets"]
    targets[1]["containerNames"] = ["helper", "ghost"]
    with pytest.raises(RuntimeNotReady) as err:
        parse(tj("inject"), ctx(rt))
    assert err.value.reason == "InvalidMLPolicy"
    assert "spec.mlPolicy.torch.envInjection.targets[1]" in err.value.message
    assert "'ghost'" in err.value.message


# --------------------------------------------------------------------------- MPI


@pytest.mark.parametrize(
    ("policy", "trainer", "slots"),
    [
        pytest.param({}, {}, 1, id="default 1 without GPUs"),
        pytest.param({}, {"resourcesPerNode": {"limits": {GPU: 4}}}, 4, id="1 becomes the GPUs"),
        pytest.param({}, {"resourcesPerNode": {"limits": {GPU: 1}}}, 1, id="one GPU"),
        pytest.param(
            {"numProcPerNode": 3},
            {"resourcesPerNode": {"limits": {GPU: 4}}},
            3,
            id="a stated runtime value is kept",
        ),
        pytest.param(
            {}, {"numProcPerNode": 2, "resourcesPerNode": {"limits": {GPU: 4}}}, 2, id="TrainJob's"
        ),
        pytest.param({"mpiImplementation": ""}, {}, 1, id="empty implementation is OpenMPI"),
    ],
)
@pytest.mark.parametrize("name", ["lt-deepspeed", "lt-mlx"])
def test_mpi_slots_follow_the_gpu_count(name: str, policy: Obj, trainer: Obj, slots: int) -> None:
    rt = official(name)
    rt["spec"]["mlPolicy"]["mpi"].update(policy)
    context = ctx(rt)
    job = parse(tj(name, trainer={"numNodes": 3, **trainer}), context)
    assert job.mpi is not None
    assert job.mpi.implementation == mpi.OPENMPI
    assert hostfile(job).splitlines() == [
        f"tj-launcher-0-0.tj slots={slots}",
        f"tj-node-0-0.tj slots={slots}",
        f"tj-node-0-1.tj slots={slots}",
    ]
    pods = PLUGIN.children(job, size=PLUGIN.demand(job, context).max_size, ctx=context).pods
    launcher = next(p for p in pods if p["metadata"]["name"] == "tj-launcher-0-0")
    env = env_of(main(launcher))
    assert env["OMPI_MCA_orte_set_default_slots"] == str(slots)
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"


def test_mpi_slots_and_implementation() -> None:
    assert mpi.slots(requested=None, configured=1, gpus=8) == 8
    assert mpi.slots(requested=None, configured=2, gpus=8) == 2
    assert mpi.slots(requested=5, configured=1, gpus=8) == 5
    assert mpi.implementation("") == mpi.implementation(None) == mpi.OPENMPI
    assert mpi.implementation(mpi.INTEL) == mpi.INTEL


# --------------------------------------------------------------------------- Flux


def flux_children(rt: Obj, **trainer: Any) -> Any:
    context = ctx(rt)
    spec: Obj = {"trainer": trainer} if trainer else {}
    job = parse(tj(rt["metadata"]["name"], **spec), context)
    return PLUGIN.children(job, size=PLUGIN.demand(job, context).max_size, ctx=context)


FLUX_RT = official("lt-flux", command=["lmp", "-in"], args=["in.reaxc.hns"])


def test_flux_runtime_wires_the_installer_volumes_and_command() -> None:
    children = flux_children(FLUX_RT)
    assert [p["metadata"]["name"] for p in children.pods] == ["tj-node-0-0", "tj-node-0-1"]
    for pod in children.pods:
        spec = pod["spec"]
        (installer,) = spec["initContainers"]
        assert installer["name"] == "flux-installer"
        assert installer["image"] == "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
        assert installer["command"] == ["/bin/bash", "/etc/flux-config/init.sh"]
        mounts = [m["mountPath"] for m in installer["volumeMounts"]]
        assert mounts == ["/mnt/flux", "/etc/flux-config"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["tj-flux-entrypoint"]["configMap"] == {
            "name": "tj-flux-entrypoint",
            "defaultMode": 0o755,
        }
        curve = {"secretName": "tj-flux-curve", "defaultMode": 0o400}
        assert volumes["flux-curve"]["secret"] == curve
        assert volumes["shared-memory"]["emptyDir"] == {"medium": "Memory"}
        assert {"flux-install", "spack-install"} <= set(volumes)
        container = main(pod)
        assert container["command"] == [
            "/bin/bash",
            "/etc/flux-config/entrypoint.sh",
            "lmp -in in.reaxc.hns",
        ]
        assert "args" not in container
        assert [m["mountPath"] for m in container["volumeMounts"]] == [
            "/mnt/flux",
            "/opt/software",
            "/etc/flux-config",
            "/curve",
            "/dev/shm",
        ]
        assert not any(n.startswith(("PET_", "JAX_", "DMLC_")) for n in env_of(container))


def test_flux_scripts_and_curve_secret() -> None:
    children = flux_children(FLUX_RT, resourcesPerNode={"limits": {GPU: 2}})
    config = next(c for c in children.config_maps if c["metadata"]["name"] == "tj-flux-entrypoint")
    init, entry = config["data"]["init.sh"], config["data"]["entrypoint.sh"]
    assert "echo 'tj-node-0-[0-1]'" in init
    assert 'default_connect = "tcp://%h.tj.ns.svc.cluster.local:%p"' in init
    assert 'default_bind = "tcp://eth0:%p"' in init
    assert "default_port = 8050" in init
    assert 'queue-policy = "fcfs"' in init
    assert "flux run -N 2 -n 8 -g 2 $1" in entry
    assert "--cores=0-3 --gpu=0-1" in entry
    assert "= tj-node-0-0 ]" in entry
    bash = shutil.which("bash")
    assert bash is not None
    for script in (init, entry):
        subprocess.run([bash, "-n"], input=script, text=True, check=True)
    (secret,) = children.secrets
    assert secret["metadata"]["name"] == "tj-flux-curve"
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    filled = fill_generated(secret)
    cert = base64.b64decode(filled["data"]["curve.cert"]).decode()
    assert 'name = "tj-flux-curve"' in cert
    keys = [line.split('"')[1] for line in cert.splitlines() if "-key =" in line]
    assert [len(k) for k in keys] == [40, 40]
    assert keys[0] != keys[1]
    assert fill_generated(secret)["data"] != filled["data"]


def test_flux_settings_and_tasks_follow_the_trainjob() -> None:
    env = [
        {"name": "FLUX_VIEW_IMAGE", "value": "example.com/view:rocky"},
        {"name": "FLUX_QUEUE_POLICY", "value": "easy"},
    ]
    children = flux_children(FLUX_RT, numNodes=3, numProcPerNode=2, env=env)
    assert len(children.pods) == 3
    assert children.pods[0]["spec"]["initContainers"][0]["image"] == "example.com/view:rocky"
    config = children.config_maps[0]["data"]
    assert "flux run -N 3 -n 6 $1" in config["entrypoint.sh"]
    assert "--cores=0-1 \\" in config["entrypoint.sh"]
    assert "tj-node-0-[0-2]" in config["init.sh"]
    assert 'queue-policy = "easy"' in config["init.sh"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("auto", "must have an int value for Flux TrainJob, got 'auto'"),
        (0, "must be greater than or equal to 1 for Flux TrainJob, got 0"),
    ],
)
def test_flux_num_proc_per_node_must_be_a_positive_integer(value: Any, message: str) -> None:
    with pytest.raises(InvalidJob) as err:
        parse(tj("lt-flux", trainer={"numProcPerNode": value}), ctx(FLUX_RT))
    assert [(p.field, p.message) for p in err.value.problems] == [
        ("spec.trainer.numProcPerNode", message)
    ]


def test_flux_installer_name_is_reserved_in_the_runtime() -> None:
    rt = copy.deepcopy(FLUX_RT)
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["spec"]["initContainers"] = [{"name": "flux-installer", "image": "x"}]
    with pytest.raises(RuntimeNotReady) as err:
        parse(tj("lt-flux"), ctx(rt))
    assert err.value.reason == "InvalidRuntime"
    assert "initContainers[0].name" in err.value.message


def test_flux_pure_parts() -> None:
    assert flux.span(1) == "0"
    assert flux.span(4) == "0-3"
    assert flux.run_flags(nodes=2, tasks=1, gpus=0) == "-N 2 -n 2"
    assert flux.resource_spec(tasks=1, gpus=1) == "--cores=0 --gpu=0"
    # ZeroMQ's Z85 test vector (RFC 32): 86 4F D2 6F B5 59 F7 5B -> "HelloWorld"
    assert flux.z85(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"
    with pytest.raises(ValueError, match="multiples of 4"):
        flux.z85(b"abc")
    entry = ["/bin/bash", "/etc/flux-config/entrypoint.sh", "python x.py"]
    assert flux.command(["python", "x.py"]) == entry


def test_mpi_reserved_launcher_env_is_refused() -> None:
    env = [
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-p 2222"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": "9"},
        {"name": "OTHER", "value": "1"},
    ]
    with pytest.raises(InvalidJob) as err:
        parse(tj("lt-mlx", trainer={"env": env}), ctx(official("lt-mlx")))
    assert [(p.field, p.message) for p in err.value.problems] == [
        (
            "spec.trainer.env",
            "must not have reserved envs, invalid envs configured: "
            "[OMPI_MCA_orte_set_default_slots OMPI_MCA_plm_rsh_args]",
        )
    ]
