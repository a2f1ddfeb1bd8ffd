"""The MPIJob plugin: parse, demand (gang, units, priority order), run policy, the exact children
of the mpi-operator ``pi`` example (launcher Job, workers, Service, hostfile ConfigMap, ssh
Secret), per-implementation env and hostfile, and the status rules that follow the launcher.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.api.constants import MPIJOB
from lattice.api.mpijob import MPIJob
from lattice.frameworks.base import (
    MANAGED_LABEL,
    Children,
    InvalidJob,
    ObservesChildren,
    OperatorContext,
    Progress,
    ReplicaCounts,
    RunPolicyView,
    managed_elsewhere,
    messages_of,
)
from lattice.frameworks.mpijob import (
    MPIJobMessages,
    MPIJobPlugin,
    discover_hosts,
    hostfile,
    workers_ready,
)
from lattice.frameworks.registry import PLUGINS, plugin_for
from lattice.primitives.objects import Obj
from lattice.runtime.projections import pod_info
from lattice.scheduler.core.model import Toleration
from tests.support.builders import FakePod

PLUGIN = MPIJobPlugin()
GPU = "nvidia.com/gpu"
NODE = OperatorContext()
GPU_CTX = OperatorContext(scheduling_unit=GPU)
PI = Path(__file__).parents[3] / "examples" / "mpijob" / "pi.yaml"
OWNER = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "name": "pi",
    "uid": "uid-pi",
    "controller": True,
    "blockOwnerDeletion": True,
}
SSH_VOLUME = {
    "name": "ssh-auth",
    "secret": {
        "secretName": "pi-ssh",
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa"},
            {"key": "ssh-publickey", "path": "id_rsa.pub"},
            {"key": "ssh-publickey", "path": "authorized_keys"},
        ],
    },
}
SPECS = "spec.mpiReplicaSpecs"


def pi(**spec: Any) -> Obj:
    """The upstream ``pi`` example in namespace ``ns``, with ``spec`` fields merged in."""
    obj: Obj = yaml.safe_load(PI.read_text())
    obj["metadata"].update(namespace="ns", uid="uid-pi")
    obj["spec"].update(spec)
    return obj


def replica(obj: Obj, rtype: str) -> Obj:
    spec: Obj = obj["spec"]["mpiReplicaSpecs"][rtype]
    return spec


def parse(obj: Obj, ctx: OperatorContext = NODE) -> MPIJob:
    return PLUGIN.parse(obj, ctx)


def children(obj: Obj, ctx: OperatorContext = NODE, size: int = 3) -> Children:
    return PLUGIN.children(parse(obj, ctx), size=size, ctx=ctx)


def env_of(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or ()}


# --------------------------------------------------------------------------- identity / parse


def test_resource_status_paths_and_registry_order() -> None:
    assert PLUGIN.resource == MPIJOB
    assert PLUGIN.scheduling_path == ("status", "lattice")
    assert PLUGIN.exec_path == ("status",)
    assert PLUGIN.preempted_condition == "Suspended"
    assert [p.resource.kind for p in PLUGINS] == ["TrainingJob", "MPIJob", "MXJob", "TrainJob"]
    assert isinstance(plugin_for("MPIJob"), MPIJobPlugin)


def test_the_pi_example_parses_with_upstream_defaults() -> None:
    job = parse(pi())
    launcher, worker = job.spec.launcher, job.spec.worker
    assert launcher is not None
    assert worker is not None
    assert (launcher.replicas, launcher.restart_policy, worker.replicas) == (1, "OnFailure", 2)
    assert worker.restart_policy == "Never"
    assert job.spec.mpi_implementation == "OpenMPI"
    assert job.spec.launcher_creation_policy == "AtStartup"


def with_replica(rtype: str, **fields: Any) -> Obj:
    obj = pi()
    replica(obj, rtype).update(fields)
    return obj


def without_worker() -> Obj:
    obj = pi()
    del obj["spec"]["mpiReplicaSpecs"]["Worker"]
    return obj


@pytest.mark.parametrize(
    ("obj", "ctx", "problems"),
    [
        pytest.param(
            {
                **pi(),
                "metadata": {"name": "pi", "annotations": {"lattice.breezeml.ai/priority": "high"}},
            },
            NODE,
            ["metadata.annotations[lattice.breezeml.ai/priority]: must be an integer, got 'high'"],
            id="priority annotation that is not an integer",
        ),
        pytest.param(
            {
                **pi(),
                "metadata": {
                    "name": "pi",
                    "annotations": {"lattice.breezeml.ai/priority": "-2000001"},
                },
            },
            NODE,
            [
                "metadata.annotations[lattice.breezeml.ai/priority]: must be between -1000000 "
                "and 1000000000, got -2000001"
            ],
            id="priority annotation below TrainingJob's floor (issue 26)",
        ),
        pytest.param(
            pi(mpiReplicaSpecs={"Worker": replica(pi(), "Worker")}),
            NODE,
            [f"{SPECS}.Launcher: must have Launcher replica spec"],
            id="no launcher",
        ),
        pytest.param(
            pi(mpiReplicaSpecs={"Launcher": replica(pi(), "Launcher"), "Server": {}}),
            NODE,
            [f"{SPECS}: unknown replica type 'Server': only Launcher and Worker are allowed"],
            id="unknown replica type",
        ),
        pytest.param(
            with_replica("Launcher", replicas=2),
            NODE,
            [f"{SPECS}.Launcher.replicas: must be 1, got 2"],
            id="two launchers",
        ),
        pytest.param(
            with_replica("Worker", replicas=0),
            NODE,
            [f"{SPECS}.Worker.replicas: must be greater than or equal to 1, got 0"],
            id="a worker spec with zero replicas",
        ),
        pytest.param(
            with_replica("Worker", restartPolicy="ExitCode"),
            NODE,
            [f'{SPECS}.Worker.restartPolicy: must be "Never" or "OnFailure", got \'ExitCode\''],
            id="ExitCode is not an MPI restart policy",
        ),
        pytest.param(
            with_replica("Launcher", template={"spec": {"containers": []}}),
            NODE,
            [f"{SPECS}.Launcher.template.spec.containers: must define at least one container"],
            id="a template without containers",
        ),
        pytest.param(
            pi(sshAuthMountPath=""),
            NODE,
            ["spec.sshAuthMountPath: must have a mount path for SSH keys"],
            id="empty ssh mount path",
        ),
        pytest.param(
            {**pi(), "metadata": {"name": "p" * 55}},
            NODE,
            [
                f"metadata.name: pods and the Service cannot be created: '{'p' * 55}-worker-1' "
                "is not a DNS-1035 label (lower-case letters, digits and '-', starting with a "
                "letter, at most 63)"
            ],
            id="the last worker's hostname is too long",
        ),
        pytest.param(
            with_replica(
                "Worker",
                template={
                    "spec": {"containers": [{"name": "w", "resources": {"limits": {GPU: "x"}}}]}
                },
            ),
            GPU_CTX,
            [
                f"{SPECS}.Worker.template.spec.containers[0].resources.limits[{GPU}]: "
                "must be a quantity, got 'x'"
            ],
            id="malformed unit quantity",
        ),
        pytest.param(
            pi(slotsPerWorker=0),
            NODE,
            ["spec.slotsPerWorker: Input should be greater than or equal to 1"],
            id="schema error with its camelCase path",
        ),
    ],
)
def test_invalid_jobs_name_each_field(obj: Obj, ctx: OperatorContext, problems: list[str]) -> None:
    with pytest.raises(InvalidJob) as info:
        parse(obj, ctx)
    assert [str(p) for p in info.value.problems] == problems


def test_a_launcher_only_job_is_valid() -> None:
    job = parse(without_worker())
    assert PLUGIN.demand(job, NODE).min_size == 1


@pytest.mark.parametrize(
    ("managed_by", "other"),
    [
        pytest.param(None, False, id="unset: ours"),
        pytest.param("kubeflow.org/mpi-operator", False, id="mpi-operator: ours"),
        pytest.param("kueue.x-k8s.io/multikueue", True, id="MultiKueue: skipped"),
        pytest.param("example.com/other", True, id="any other controller: skipped"),
        pytest.param("", False, id="empty: ours"),
    ],
)
def test_managed_by_other(managed_by: str | None, other: bool) -> None:
    obj = pi(runPolicy={} if managed_by is None else {"managedBy": managed_by})
    parse(obj)  # a job managed elsewhere is still a valid job
    assert managed_elsewhere(obj) is other  # the reconciler's and the scheduler's rule


# --------------------------------------------------------------------------- demand


def gpus(n: int) -> Obj:
    return {"limits": {GPU: n}}


@pytest.mark.parametrize(
    ("launcher_resources", "worker_resources", "as_worker", "ctx", "fixed", "units"),
    [
        pytest.param(gpus(0), gpus(4), False, NODE, (0,), 1, id="node mode: a worker per unit"),
        pytest.param(gpus(0), gpus(4), True, NODE, (1,), 1, id="node mode: a worker launcher"),
        pytest.param({}, gpus(4), False, GPU_CTX, (0,), 4, id="a cpu launcher holds no gpu"),
        pytest.param(gpus(1), gpus(4), False, GPU_CTX, (1,), 4, id="a launcher asking for gpus"),
        pytest.param({}, gpus(2), True, GPU_CTX, (0,), 2, id="a worker launcher asking none"),
        pytest.param(gpus(2), gpus(2), True, GPU_CTX, (2,), 2, id="worker launcher's request"),
        pytest.param({}, {}, False, GPU_CTX, (0,), 0, id="a cpu-only job holds no gpu"),
    ],
)
def test_gang_demand_and_units(
    *,
    launcher_resources: Obj,
    worker_resources: Obj,
    as_worker: bool,
    ctx: OperatorContext,
    fixed: tuple[int, ...],
    units: int,
) -> None:
    obj = pi(runLauncherAsWorker=as_worker)
    replica(obj, "Launcher")["template"]["spec"]["containers"][0]["resources"] = launcher_resources
    replica(obj, "Worker")["template"]["spec"]["containers"][0]["resources"] = worker_resources
    demand = PLUGIN.demand(parse(obj, ctx), ctx)
    assert (demand.min_size, demand.max_size) == (3, 3)
    assert (demand.fixed_pods, demand.replica_units) == (fixed, units)
    assert demand.replica_demand is not None
    assert tuple(d.units for d in demand.fixed_demands) == fixed
    assert demand.replica_demand.units == units
    assert not demand.replica_demand.exclusive
    assert not demand.fixed_demands[0].exclusive


def test_demand_names_the_launcher_job_and_the_workers() -> None:
    obj = pi()
    replica(obj, "Launcher")["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "1Gi"}
    }
    replica(obj, "Worker")["template"]["spec"]["containers"][0]["resources"] = gpus(4)
    replica(obj, "Worker")["template"]["spec"]["tolerations"] = [
        {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
    ]
    ctx = OperatorContext(scheduling_unit=GPU, node_selector=(("pool", "a"),))
    job = parse(obj, ctx)
    demand = PLUGIN.demand(job, ctx)
    kids = PLUGIN.children(job, size=demand.max_size, ctx=ctx)
    assert demand.fixed_names == (kids.jobs[0]["metadata"]["name"],) == ("pi-launcher",)
    assert demand.replica_prefix == "pi-worker-"
    workers = [p["metadata"]["name"] for p in kids.pods]
    assert workers == [f"{demand.replica_prefix}{i}" for i in range(demand.max_size - 1)]
    launcher, worker = demand.fixed_demands[0], demand.replica_demand
    assert worker is not None
    assert launcher.requests == (("cpu", 500), ("memory", 2**30), ("pods", 1))
    assert worker.requests == ((GPU, 4), ("pods", 1))
    assert launcher.constraint.node_selector == worker.constraint.node_selector == (("pool", "a"),)
    assert launcher.constraint.tolerations == ()
    assert worker.constraint.tolerations == (Toleration(GPU, "Exists", "", "NoSchedule"),)


PRIORITIES = OperatorContext(priority_classes={"high": 1000, "low": 10}, default_priority=5)


def prioritised(
    *,
    policy_class: str | None = None,
    worker_class: str | None = None,
    launcher_class: str | None = None,
    annotation: str | None = None,
    worker: bool = True,
) -> Obj:
    obj = pi() if worker else without_worker()
    if policy_class:
        obj["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": policy_class}
    if worker_class and worker:
        replica(obj, "Worker")["template"]["spec"]["priorityClassName"] = worker_class
    if launcher_class:
        replica(obj, "Launcher")["template"]["spec"]["priorityClassName"] = launcher_class
    if annotation:
        obj["metadata"]["annotations"] = {"lattice.breezeml.ai/priority": annotation}
    return obj


@pytest.mark.parametrize(
    ("obj", "ctx", "priority"),
    [
        pytest.param(
            prioritised(policy_class="high", worker_class="low", annotation="7"),
            PRIORITIES,
            1000,
            id="schedulingPolicy.priorityClass first",
        ),
        pytest.param(
            prioritised(worker_class="low", launcher_class="high", annotation="7"),
            PRIORITIES,
            10,
            id="then the workers' priorityClassName",
        ),
        pytest.param(
            prioritised(launcher_class="high", worker=False),
            PRIORITIES,
            1000,
            id="the launcher's class when there are no workers",
        ),
        pytest.param(
            prioritised(policy_class="unknown", annotation="-3"),
            PRIORITIES,
            -3,
            id="an unknown class is skipped, then the annotation",
        ),
        pytest.param(prioritised(), PRIORITIES, 5, id="then the default PriorityClass"),
        pytest.param(prioritised(), NODE, 0, id="else 0"),
    ],
)
def test_priority_order(obj: Obj, ctx: OperatorContext, priority: int) -> None:
    assert PLUGIN.demand(parse(obj, ctx), ctx).priority == priority


def test_demand_carries_suspension() -> None:
    assert PLUGIN.demand(parse(pi(runPolicy={"suspend": True})), NODE).suspended is True
    assert PLUGIN.demand(parse(pi()), NODE).suspended is False


def test_run_policy_leaves_ttl_deadline_and_backoff_to_the_launcher_job() -> None:
    policy = {"ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": 600, "backoffLimit": 2}
    job = parse(pi(runPolicy={"cleanPodPolicy": "All", **policy}))
    # cleanPodPolicy cleans only the workers: the Service stays (mpi-operator cleanUpWorkerPods).
    assert PLUGIN.run_policy(job) == RunPolicyView(clean_pod_policy="All", service_cleanup="None")
    assert PLUGIN.run_policy(parse(pi(runPolicy={}))) == RunPolicyView(
        clean_pod_policy="None", service_cleanup="None"
    )
    launcher = children(pi(runPolicy=policy)).jobs[0]["spec"]
    assert (launcher["ttlSecondsAfterFinished"], launcher["activeDeadlineSeconds"]) == (60, 600)
    assert launcher["backoffLimit"] == 2


# --------------------------------------------------------------------------- children: pi


def test_size_zero_is_the_suspended_set() -> None:
    """What mpi-operator keeps while an MPIJob is suspended: no worker pod, the launcher Job
    suspended."""
    kids = children(pi(), size=0)
    assert kids.pods == ()
    assert [s["metadata"]["name"] for s in kids.services] == ["pi"]
    assert [c["metadata"]["name"] for c in kids.config_maps] == ["pi-config"]
    assert [s["metadata"]["name"] for s in kids.secrets] == ["pi-ssh"]
    assert [j["metadata"]["name"] for j in kids.jobs] == ["pi-launcher"]
    assert kids.jobs[0]["spec"]["suspend"] is True
    assert "suspend" not in children(pi(), size=3).jobs[0]["spec"]


def test_pi_worker_pods() -> None:
    kids = children(pi(), GPU_CTX)
    assert [p["metadata"]["name"] for p in kids.pods] == ["pi-worker-0", "pi-worker-1"]
    assert kids.pods[1] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pi-worker-1",
            "namespace": "ns",
            "labels": {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "worker",
                "training.kubeflow.org/replica-index": "1",
                MANAGED_LABEL: "true",
            },
            "ownerReferences": [OWNER],
        },
        "spec": {
            "containers": [
                {
                    "image": "mpioperator/mpi-pi:openmpi",
                    "name": "mpi-worker",
                    "securityContext": {"runAsUser": 1000},
                    "command": ["/usr/sbin/sshd"],
                    "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
                    "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
                    "env": [{"name": "K_MPI_JOB_ROLE", "value": "worker"}],
                    "volumeMounts": [{"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"}],
                }
            ],
            "hostname": "pi-worker-1",
            "subdomain": "pi",
            "restartPolicy": "Never",
            "dnsConfig": {"searches": ["pi.ns.svc.cluster.local"]},
            "volumes": [SSH_VOLUME],
        },
    }


def test_pi_launcher_job() -> None:
    (launcher,) = children(pi(), GPU_CTX).jobs
    assert launcher == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pi-launcher",
            "namespace": "ns",
            "labels": {"app": "pi", MANAGED_LABEL: "true"},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "ttlSecondsAfterFinished": 60,
            "template": {
                "metadata": {
                    "labels": {
                        "training.kubeflow.org/operator-name": "mpi-operator",
                        "training.kubeflow.org/job-name": "pi",
                        "training.kubeflow.org/job-role": "launcher",
                        MANAGED_LABEL: "true",
                    },
                    "ownerReferences": [OWNER],
                },
                "spec": {
                    "containers": [
                        {
                            "image": "mpioperator/mpi-pi:openmpi",
                            "name": "mpi-launcher",
                            "securityContext": {"runAsUser": 1000},
                            "command": ["mpirun"],
                            "args": ["-n", "2", "/home/mpiuser/pi"],
                            "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
                            "env": [
                                {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
                                {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                                {
                                    "name": "OMPI_MCA_orte_default_hostfile",
                                    "value": "/etc/mpi/hostfile",
                                },
                                {
                                    "name": "OMPI_MCA_plm_rsh_args",
                                    "value": "-o ConnectionAttempts=10",
                                },
                                {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
                                {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
                                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
                            ],
                            "volumeMounts": [
                                {"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
                                {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
                            ],
                        }
                    ],
                    "hostname": "pi-launcher",
                    "subdomain": "pi",
                    "restartPolicy": "OnFailure",
                    "volumes": [
                        SSH_VOLUME,
                        {
                            "name": "mpi-job-config",
                            "configMap": {
                                "name": "pi-config",
                                "items": [
                                    {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                                    {
                                        "key": "discover_hosts.sh",
                                        "path": "discover_hosts.sh",
                                        "mode": 0o555,
                                    },
                                ],
                            },
                        },
                    ],
                },
            },
            "podReplacementPolicy": "Failed",
        },
    }


def test_pi_service_config_map_and_ssh_secret() -> None:
    kids = children(pi(), GPU_CTX)
    meta = {
        "namespace": "ns",
        "labels": {"app": "pi", MANAGED_LABEL: "true"},
        "ownerReferences": [OWNER],
    }
    assert kids.services == (
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "pi", **meta},
            "spec": {
                "clusterIP": "None",
                "selector": {
                    "training.kubeflow.org/operator-name": "mpi-operator",
                    "training.kubeflow.org/job-name": "pi",
                },
            },
        },
    )
    assert kids.config_maps == (
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "pi-config", **meta},
            "data": {
                "hostfile": "pi-worker-0.pi.ns.svc slots=1\npi-worker-1.pi.ns.svc slots=1\n",
                "discover_hosts.sh": (
                    "#!/bin/sh\necho pi-worker-0.pi.ns.svc\necho pi-worker-1.pi.ns.svc\n"
                ),
            },
        },
    )
    assert kids.secrets == (
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "pi-ssh",
                "namespace": "ns",
                "labels": {"app": "pi", MANAGED_LABEL: "true"},
                "annotations": {"lattice.breezeml.ai/generate": "ssh-keypair"},
                "ownerReferences": [OWNER],
            },
            "type": "kubernetes.io/ssh-auth",
            "data": {"ssh-privatekey": "", "ssh-publickey": ""},
        },
    )


# --------------------------------------------------------------------------- implementations


@pytest.mark.parametrize(
    ("implementation", "slots", "as_worker", "lines", "env"),
    [
        pytest.param(
            "OpenMPI",
            4,
            False,
            ["pi-worker-0.pi.ns.svc slots=4", "pi-worker-1.pi.ns.svc slots=4"],
            {
                "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                "OMPI_MCA_orte_set_default_slots": "4",
                "NVIDIA_VISIBLE_DEVICES": "",
                "NVIDIA_DRIVER_CAPABILITIES": "",
            },
            id="OpenMPI",
        ),
        pytest.param(
            "Intel",
            2,
            False,
            ["pi-worker-0.pi.ns.svc:2", "pi-worker-1.pi.ns.svc:2"],
            {
                "I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10",
                "I_MPI_PERHOST": "2",
                "NVIDIA_VISIBLE_DEVICES": "",
                "NVIDIA_DRIVER_CAPABILITIES": "",
            },
            id="Intel",
        ),
        pytest.param(
            "MPICH",
            1,
            True,
            ["pi-launcher.pi.ns.svc:1", "pi-worker-0.pi.ns.svc:1", "pi-worker-1.pi.ns.svc:1"],
            {
                "HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                "HYDRA_LAUNCH_EXTRA_ARGS": "-o ConnectionAttempts=10",
            },
            id="MPICH with the launcher as a worker: launcher listed first, GPUs kept",
        ),
    ],
)
def test_hostfile_and_launcher_env_per_implementation(
    implementation: str, slots: int, as_worker: bool, lines: list[str], env: dict[str, str]
) -> None:
    obj = pi(mpiImplementation=implementation, slotsPerWorker=slots, runLauncherAsWorker=as_worker)
    kids = children(obj)
    assert kids.config_maps[0]["data"]["hostfile"] == "".join(f"{line}\n" for line in lines)
    launcher = kids.jobs[0]["spec"]["template"]["spec"]["containers"][0]
    assert env_of(launcher) == {"K_MPI_JOB_ROLE": "launcher", **env}


def test_hostfile_with_a_cluster_domain_and_discover_hosts_from_running_workers() -> None:
    job = parse(pi(runLauncherAsWorker=True))
    assert hostfile(job, cluster_domain="cluster.local").splitlines() == [
        "pi-launcher.pi.ns.svc.cluster.local slots=1",
        "pi-worker-0.pi.ns.svc.cluster.local slots=1",
        "pi-worker-1.pi.ns.svc.cluster.local slots=1",
    ]
    script = discover_hosts(job, ["pi-worker-10", "pi-worker-2"])
    assert script == (
        "#!/bin/sh\necho pi-launcher.pi.ns.svc\n"
        "echo pi-worker-10.pi.ns.svc\necho pi-worker-2.pi.ns.svc\n"
    )
    assert discover_hosts(parse(pi()), []) == "#!/bin/sh\n"


def test_run_launcher_as_worker_shifts_worker_indexes_and_publishes_not_ready() -> None:
    kids = children(pi(runLauncherAsWorker=True))
    indexes = [p["metadata"]["labels"]["training.kubeflow.org/replica-index"] for p in kids.pods]
    assert indexes == ["1", "2"]
    labels = kids.jobs[0]["spec"]["template"]["metadata"]["labels"]
    assert labels["training.kubeflow.org/replica-index"] == "0"
    assert kids.services[0]["spec"]["publishNotReadyAddresses"] is True


def test_pod_template_details_are_kept_and_completed() -> None:
    obj = pi(sshAuthMountPath="/root/.ssh")
    worker = replica(obj, "Worker")["template"]
    worker["metadata"] = {"labels": {"team": "a"}, "annotations": {"note": "x"}}
    worker["spec"].update(
        hostNetwork=True,
        dnsConfig={"searches": ["corp.example"], "options": [{"name": "ndots", "value": "2"}]},
        volumes=[{"name": "data", "emptyDir": {}}],
        restartPolicy="Always",
    )
    container = worker["spec"]["containers"][0]
    del container["command"], container["args"]
    container["env"] = [{"name": "A", "value": "1"}, {"name": "K_MPI_JOB_ROLE", "value": "x"}]
    container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    pod = children(obj).pods[0]
    assert pod["metadata"]["labels"]["team"] == "a"
    assert pod["metadata"]["annotations"] == {"note": "x"}
    spec = pod["spec"]
    assert (spec["dnsPolicy"], spec["restartPolicy"]) == ("ClusterFirstWithHostNet", "Never")
    assert spec["dnsConfig"] == {
        "searches": ["corp.example", "pi.ns.svc.cluster.local"],
        "options": [{"name": "ndots", "value": "2"}],
    }
    main = spec["containers"][0]
    assert main["command"] == ["/usr/sbin/sshd", "-De"]
    assert main["env"] == [
        {"name": "A", "value": "1"},
        {"name": "K_MPI_JOB_ROLE", "value": "worker"},
    ]
    assert main["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "ssh-auth", "mountPath": "/root/.ssh"},
    ]
    assert [v["name"] for v in spec["volumes"]] == ["data", "ssh-auth"]
    assert spec["volumes"][1]["secret"]["defaultMode"] == 0o600


def test_node_selector_on_every_pod_and_no_pod_takes_a_whole_node() -> None:
    ctx = OperatorContext(node_selector=(("pool", "gpu"),))
    for context in (ctx, GPU_CTX):
        kids = children(pi(), context)
        specs = [p["spec"] for p in kids.pods] + [kids.jobs[0]["spec"]["template"]["spec"]]
        for spec in specs:
            assert spec.get("nodeSelector", {}) == dict(context.node_selector)
            assert "affinity" not in spec  # only TrainingJob workers are exclusive


def test_children_never_mutate_the_job_and_share_nothing() -> None:
    obj = pi()
    job = parse(obj)
    before = job.model_dump()
    kids = PLUGIN.children(job, size=3, ctx=NODE)
    assert job.model_dump() == before
    kids.pods[0]["spec"]["containers"][0]["env"].append({"name": "X"})
    kids.pods[0]["spec"]["volumes"].append({"name": "Y"})
    again = PLUGIN.children(job, size=3, ctx=NODE)
    assert again.pods[1]["spec"]["containers"][0]["env"] == [
        {"name": "K_MPI_JOB_ROLE", "value": "worker"}
    ]
    assert again.pods[0] != kids.pods[0]


def test_wait_for_workers_ready_still_creates_the_launcher_at_startup() -> None:
    kids = children(pi(launcherCreationPolicy="WaitForWorkersReady"))
    assert [j["metadata"]["name"] for j in kids.jobs] == ["pi-launcher"]


# --------------------------------------------------------------------------- progress

DELETED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def worker(
    index: int,
    phase: str = "Running",
    *,
    reason: str | None = None,
    deleted: bool = False,
    ready: bool | None = None,
) -> FakePod:
    return FakePod(
        name=f"pi-worker-{index}",
        phase=phase,
        reason=reason,
        ready=phase == "Running" if ready is None else ready,
        replica_index=index,
        deletion_timestamp=DELETED_AT if deleted else None,
    )


def launcher(*conditions: Obj, deleting: bool = False, **status: Any) -> dict[str, Obj]:
    meta: Obj = {"name": "pi-launcher"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {**status, "conditions": list(conditions)} if conditions else status
    return {"Job/pi-launcher": {"metadata": meta, "status": status}}


def cond(type_: str, reason: str = "", message: str = "", status: str = "True") -> Obj:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def counts(*, launcher: ReplicaCounts | None = None, **worker: int) -> dict[str, ReplicaCounts]:
    out = {"Worker": ReplicaCounts(**worker)}
    if launcher is not None:
        out["Launcher"] = launcher
    return out


RUNNING = [worker(0), worker(1)]
EVICTED = "MPIJobEvicted"


@pytest.mark.parametrize(
    ("size", "pods", "others", "expected"),
    [
        pytest.param(
            0,
            RUNNING,
            launcher(cond("Failed", "BackoffLimitExceeded")),
            Progress(replicas=counts()),
            id="size 0: leftovers of a preempted job say nothing",
        ),
        pytest.param(
            3,
            [worker(0, "Pending"), worker(1, "Pending")],
            {},
            Progress(replicas=counts()),
            id="workers pending and no launcher yet",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(active=1, ready=0),
            Progress(replicas=counts(active=2, launcher=ReplicaCounts())),
            id="launcher pod not ready yet: not running",
        ),
        pytest.param(
            3,
            [worker(0), worker(1, "Pending")],
            launcher(active=1, ready=1),
            Progress(replicas=counts(active=1, launcher=ReplicaCounts(active=1))),
            id="a worker still pending: not running",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(active=1, ready=1),
            Progress(replicas=counts(active=2, launcher=ReplicaCounts(active=1)), running=True),
            id="launcher ready and every worker running",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(active=1),
            Progress(replicas=counts(active=2, launcher=ReplicaCounts(active=1)), running=True),
            id="without status.ready the launcher's active count is used",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(cond("Complete"), succeeded=1),
            Progress(
                replicas=counts(active=2, launcher=ReplicaCounts(succeeded=1)), succeeded=True
            ),
            id="launcher Complete: succeeded",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(cond("Complete", status="False"), active=1, ready=1),
            Progress(replicas=counts(active=2, launcher=ReplicaCounts(active=1)), running=True),
            id="a condition that is not True is ignored",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(
                cond(
                    "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
                ),
                failed=7,
            ),
            Progress(
                replicas=counts(active=2, launcher=ReplicaCounts(failed=7)),
                failed="Job has reached the specified backoff limit",
                failed_reason="BackoffLimitExceeded",
            ),
            id="launcher Failed: its reason and message",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(
                cond("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
            ),
            Progress(
                replicas=counts(active=2, launcher=ReplicaCounts()),
                failed="Job was active longer than specified deadline",
                failed_reason="DeadlineExceeded",
            ),
            id="activeDeadlineSeconds: the launcher Job's message",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(cond("Failed")),
            Progress(
                replicas=counts(active=2, launcher=ReplicaCounts()),
                failed="MPIJob ns/pi has failed",
                failed_reason="MPIJobFailed",
            ),
            id="launcher Failed without a reason",
        ),
        pytest.param(
            3,
            [worker(0), worker(1, "Failed", reason="Evicted")],
            launcher(cond("Failed", "BackoffLimitExceeded", "x")),
            Progress(
                replicas=counts(active=1, failed=1, launcher=ReplicaCounts()),
                failed="1/2 workers are evicted",
                failed_reason=EVICTED,
            ),
            id="an evicted worker fails the job, before the launcher's failure",
        ),
        pytest.param(
            3,
            [worker(0), worker(1, "Failed", reason="Evicted", deleted=True)],
            launcher(active=1, ready=1),
            Progress(replicas=counts(active=1, launcher=ReplicaCounts(active=1))),
            id="a pod we are deleting (preemption) is not an eviction",
        ),
        pytest.param(
            3,
            [worker(0), worker(1, "Failed")],
            launcher(active=1, ready=1),
            Progress(replicas=counts(active=1, failed=1, launcher=ReplicaCounts(active=1))),
            id="a failed worker is left to mpirun: neither failure nor restart",
        ),
        pytest.param(
            3,
            RUNNING,
            launcher(cond("Failed", "BackoffLimitExceeded"), deleting=True),
            Progress(replicas=counts(active=2)),
            id="a launcher Job being deleted is ignored",
        ),
        pytest.param(
            3,
            [*RUNNING, FakePod(name="pi-worker-2", phase="Failed", reason="Evicted")],
            launcher(active=1, ready=1),
            Progress(replicas=counts(active=2, launcher=ReplicaCounts(active=1)), running=True),
            id="pods that are not desired workers are ignored",
        ),
    ],
)
def test_progress(
    size: int, pods: list[FakePod], others: dict[str, Obj], expected: Progress
) -> None:
    assert PLUGIN.progress(parse(pi()), size=size, pods=pods, others=others) == expected


def test_workers_ready_gates_wait_for_workers_ready() -> None:
    job = parse(pi())
    assert workers_ready(job, [worker(0), worker(1)])
    assert not workers_ready(job, [worker(0), worker(1, ready=False)])
    assert not workers_ready(job, [worker(0)])
    assert not workers_ready(job, [worker(0), worker(1, deleted=True)])
    assert workers_ready(parse(without_worker()), [])


def test_progress_reads_the_informer_projection_of_real_pods() -> None:
    raw = copy.deepcopy(list(children(pi()).pods))
    raw[0]["status"] = {"phase": "Running"}
    raw[1]["status"] = {"phase": "Failed", "reason": "Evicted"}
    pods = [pod_info(p) for p in raw]
    assert [(p.name, p.replica_index) for p in pods] == [("pi-worker-0", 0), ("pi-worker-1", 1)]
    progress = PLUGIN.progress(parse(pi()), size=3, pods=pods, others={})
    assert progress.failed == "1/2 workers are evicted"
    assert progress.failed_reason == EVICTED


# --------------------------------------------------------------------------- observed children


def observed(
    obj: Obj, pods: list[FakePod], others: dict[str, Obj] | None = None, size: int = 3
) -> Children:
    job = parse(obj)
    desired = PLUGIN.children(job, size=size, ctx=NODE)
    return PLUGIN.observed_children(job, desired, pods=pods, others=others or {})


def test_plugin_observes_children() -> None:
    assert isinstance(PLUGIN, ObservesChildren)


def test_discover_hosts_lists_only_the_running_workers() -> None:
    kids = observed(pi(), [worker(1), worker(0, "Pending"), worker(2)])
    data = kids.config_maps[0]["data"]
    assert data["discover_hosts.sh"] == "#!/bin/sh\necho pi-worker-1.pi.ns.svc\n"
    assert data["hostfile"] == hostfile(parse(pi())), "the hostfile names every worker"
    assert [j["metadata"]["name"] for j in kids.jobs] == ["pi-launcher"], "AtStartup"
    assert children(pi()).config_maps[0]["data"]["discover_hosts.sh"].count("echo") == 2


def test_discover_hosts_with_the_launcher_as_worker() -> None:
    kids = observed(pi(runLauncherAsWorker=True), [worker(0, deleted=True)])
    assert kids.config_maps[0]["data"]["discover_hosts.sh"] == (
        "#!/bin/sh\necho pi-launcher.pi.ns.svc\n"
    )


def test_wait_for_workers_ready_holds_the_launcher_until_every_worker_is_ready() -> None:
    obj = pi(launcherCreationPolicy="WaitForWorkersReady")
    assert observed(obj, []).jobs == ()
    assert observed(obj, [worker(0), worker(1, ready=False)]).jobs == ()
    ready = observed(obj, [worker(0), worker(1)])
    assert [j["metadata"]["name"] for j in ready.jobs] == ["pi-launcher"]
    assert ready.jobs == children(obj).jobs


def test_an_existing_launcher_is_kept_when_a_worker_turns_unready() -> None:
    obj = pi(launcherCreationPolicy="WaitForWorkersReady")
    kids = observed(obj, [worker(0), worker(1, ready=False)], others=launcher(active=1))
    assert [j["metadata"]["name"] for j in kids.jobs] == ["pi-launcher"]


def test_observed_children_at_size_zero_is_nothing_before_the_job_started() -> None:
    assert observed(pi(), [worker(0)], size=0) == Children()


def test_observed_children_at_size_zero_keep_what_exists_suspended() -> None:
    kids = observed(pi(), [], others=launcher(active=1), size=0)
    assert [j["metadata"]["name"] for j in kids.jobs] == ["pi-launcher"]
    assert kids.jobs[0]["spec"]["suspend"] is True
    assert (len(kids.services), len(kids.config_maps), len(kids.secrets)) == (1, 1, 1)
    assert kids.config_maps[0]["data"]["discover_hosts.sh"] == "#!/bin/sh\n"
    started = {"ConfigMap/pi-config": {"metadata": {"name": "pi-config"}}}
    kept = observed(pi(), [], others=started, size=0)
    assert kept.jobs == (), "a launcher Job that does not exist is not created while suspended"
    assert len(kept.secrets) == 1


def test_a_suspended_launcher_stays_suspended_until_every_worker_exists() -> None:
    suspended = launcher()
    suspended["Job/pi-launcher"]["spec"] = {"suspend": True}
    held = observed(pi(), [worker(0)], others=suspended)
    assert held.jobs[0]["spec"]["suspend"] is True
    resumed = observed(pi(), [worker(0), worker(1)], others=suspended)
    assert "suspend" not in resumed.jobs[0]["spec"]


def test_mpi_operator_wording() -> None:
    words = messages_of(PLUGIN)
    assert isinstance(words, MPIJobMessages)
    assert words.created("ns", "pi") == "MPIJob ns/pi is created."
    assert words.created_event is True
    assert words.running("ns", "pi") == "MPIJob ns/pi is running."
    assert words.running_event("ns", "pi") == "MPIJob ns/pi is running"
    assert words.succeeded("ns", "pi") == "MPIJob ns/pi successfully completed."
    assert (words.suspended("ns", "pi"), words.resumed("ns", "pi")) == (
        "MPIJob suspended",
        "MPIJob resumed",
    )
    assert words.suspended_running("ns", "pi") == "MPIJob ns/pi is suspended."
    assert words.failed_event_type == "Warning"
