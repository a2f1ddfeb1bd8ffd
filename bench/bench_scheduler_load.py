"""Scheduler-heavy load on the real control plane; operator memory at 10k jobs / 100k pods.

It prints numbers; it is never a test. Two sections (issue 9):

**load** (default; needs ``make cluster-up`` with the CRDs applied; run it under
``flock /tmp/lattice-cluster.lock``). On a fresh namespace and a fresh kwok node pool
(``--nodes`` x ``--gpus`` ``nvidia.com/gpu``), in one run:

1. *baseline*: a bare client (``lattice.kube.client``) creates ``--baseline-pods`` pods one at
   a time on the same apiserver, before the operator starts: the create latency of one pod.
2. ``lattice run --scheduling-unit nvidia.com/gpu`` (pinned with ``taskset`` to the last core when
   ``taskset`` exists and there are >= 2 cores; the control plane's PIDs from ``.cluster/*.pid``
   and this process are pinned to the other cores unless ``--no-pin-control-plane``; the
   original affinities are restored at the end).
3. *fill*: ``--fill-jobs`` low-priority elastic TrainingJobs (``--fill-min``..``--fill-max``
   one-GPU workers) until every GPU of the pool is used (``lattice_capacity_units``) and every
   granted pod exists.
4. *load*: ``--jobs`` TrainingJobs created open-loop at ``--rate``/s with mixed priorities
   (``--high-frac`` at 1000, ``--mid-frac`` at 100, the rest at 0) and elastic ranges (minSize
   1 or 2, maxSize 1x/2x/4x that); every pod asks for one GPU. Meanwhile a probe creates one bare
   pod every ``--probe-interval`` s (create latency under the same load), then runs the chain of
   three writes a job needs before it has pods (``write_chain``: the floor of create-to-pods
   latency for any operator under that load), and the bench watches
   pods and jobs. After the last arrival it waits ``--settle`` s.

Reported: scheduler passes/s and pass duration p50/p95 (delta of the operator's
``lattice_scheduler_pass_duration_seconds`` histogram over the load window; plus exact values
from the operator's ``scheduler.pass`` log lines, which it writes at info level for passes that
wrote something); per priority class, the time from a job's create request to (a) its first
``minSize`` pods and (b) all the pods of its first grant (the first ``status.currentSize`` > 0
the bench saw) existing, and (c) its first ``minSize`` pods bound to nodes (which needs the pods
of the jobs preempted for it gone), p50/p95/p99 and count; operator peak RSS (VmHWM) and CPU
seconds from /proc; jobs by stage at the end; ratios to the single-pod create latency.
``--profile-seconds`` samples the operator with py-spy (``--py-spy``) during the load and prints
the top functions.

**memory** (``--memory``; no cluster). In-process, in a child process per fill path: the real
``lattice.app.Operator`` (every informer with its real transform and indexes, the reconcilers'
handlers and queues, the event recorder, the scheduler loop), built on an in-memory fake
apiserver client that serves LIST pages (``json.loads`` of the page text, like the real client)
and WATCH streams. Objects are realistic: TrainingJobs as ``kubectl apply`` stores them
(last-applied annotation, managedFields, defaulted spec, the scheduler's and the reconciler's
status); their pods and headless Services built by the real ``TrainingJobPlugin.children`` and
completed with what the apiserver, kube-scheduler and kubelet add (uid, defaults,
kube-api-access volume, managedFields, Running status with 5 conditions); GPU nodes (~35
labels, images, conditions, managedFields) and one DaemonSet pod per node. Steps: baseline
(operator built, informers synced empty, one empty pass), then nodes+daemon pods, jobs, pods,
Services filled (``list``: ``force_relist`` of the informers, i.e. a restart at that size;
``watch``: one ADDED event per object), then a real ``SchedulerLoop.run_once`` over them, the
patched jobs delivered back as MODIFIED events, and a second pass. VmRSS/VmHWM after each step.

Usage::

    flock /tmp/lattice-cluster.lock python bench/bench_scheduler_load.py --jobs 5000 --rate 20
    python bench/bench_scheduler_load.py --memory [--mem-jobs 10000 --mem-pods 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import ctypes
import gc
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lattice.clock import RealClock, yield_now
from lattice.kube.client import KubeClient, WatchEvent, connect
from lattice.kube.errors import ApiError, NotFound
from lattice.kube.resources import NAMESPACES, PODS, Resource

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import (
    JOB_LABEL,
    REPO,
    RUN,
    Namespaces,
    Obj,
    Pinning,
    Watcher,
    apiserver_metrics,
    bare_pod,
    clock,
    create_node_pool,
    delete_node_pool,
    free_port,
    is_file,
    lattice_cmd,
    metric_samples,
    pct,
    proc_status,
    request_key,
    scrape,
    start_process,
    stop_process,
    write_selector,
)

from tests.support.builders import trainingjob
from tests.support.patches import apply_merge_patch

CLASS_LABEL = "lattice.bench/class"
MANAGED = "lattice.breezeml.ai/managed"
GPU = "nvidia.com/gpu"
PRIORITIES = {"high": 1000, "mid": 100, "low": 0}
TRAININGJOBS = Resource("breezeml.ai", "v1", "trainingjobs", "TrainingJob")
METRICS_TIMEOUT = 10.0  # seconds for a scrape of the operator's /metrics (a busy operator)


# --------------------------------------------------------------------------- small helpers


def git_rev() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def print_setup(extra: str) -> None:
    load = os.getloadavg()
    print(
        f"date {RealClock().now().isoformat(timespec='seconds')}; nproc {os.cpu_count()}; "
        f"python {platform.python_version()}; lattice git {git_rev()}; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(f"command: {' '.join(sys.argv)}")
    print(extra)


# --------------------------------------------------------------------------- the workload mix


@dataclass(frozen=True)
class Shape:
    cls: str
    priority: int
    min_size: int
    max_size: int


def shape(i: int, *, seed: int, high: float, mid: float) -> Shape:
    """Job ``i`` of the mix: its priority class and elastic range (deterministic in ``seed``)."""
    rng = random.Random(seed * 1_000_003 + i)
    r = rng.random()
    cls = "high" if r < high else "mid" if r < high + mid else "low"
    lo = rng.choice((1, 2))
    return Shape(cls, PRIORITIES[cls], lo, lo * rng.choice((1, 2, 4)))


async def write_chain(client: KubeClient, ns: str, name: str, pool: str) -> None:
    """The writes that must follow one another before a job has pods, from a bare client: the
    job's create (a one-GPU-free TrainingJob in a namespace no operator watches), its admission
    (a merge patch of its status) and a pod's create. Under load this is the floor of the
    create-to-pods latency for any operator (which also waits on watches and its own queues)."""
    body = trainingjob(name, min_size=1, max_size=1, priority=0, gpus=0)
    await client.create(TRAININGJOBS, body, namespace=ns)
    status = {"status": {"stage": "Running", "currentSize": 1}}
    await client.patch(TRAININGJOBS, name, status, namespace=ns, subresource="status")
    await client.create(PODS, bare_pod(f"{name}-worker-0", pool), namespace=ns)


# =========================================================================== memory section


def ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def fields_v1(value: Any, *, top: bool = False) -> Obj:
    """An approximate managedFields ``fieldsV1`` tree for ``value`` (set-style, like the server)."""
    if isinstance(value, dict):
        out: Obj = {} if top else {".": {}}
        for k, v in value.items():
            out[f"f:{k}"] = fields_v1(v)
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keyed: Obj = {}
        for item in value:
            if "name" in item:
                key = json.dumps({"name": item["name"]}, separators=(",", ":"))
            elif "containerPort" in item:
                key = json.dumps(
                    {"containerPort": item["containerPort"], "protocol": "TCP"},
                    separators=(",", ":"),
                )
            elif "type" in item:
                key = json.dumps({"type": item["type"]}, separators=(",", ":"))
            else:
                return {}
            keyed[f"k:{key}"] = fields_v1(item)
        return keyed
    return {}


def managed(manager: str, t: str, fields: Obj, *, subresource: str | None = None) -> Obj:
    entry: Obj = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": t,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


@dataclass
class MemWorld:
    """10k jobs / 100k pods by default: running jobs are exactly as large as the GPUs they hold.

    Running jobs get sizes from ``SIZES`` (mean 12.5 one-GPU workers, minSize = size,
    maxSize = 2 x size: nothing to shrink, no free GPU to grow into) until the pods add up to
    ``pods``; the other jobs wait (priority -1 below every running job: nothing to preempt).
    Nodes: ``pods / gpus`` nodes of ``gpus`` GPUs, all used. Times are relative to ``now`` so
    that no accounting flush is due: the first pass over a consistent world writes nothing.
    """

    jobs: int
    pods: int
    gpus: int
    namespaces: int
    seed: int
    now: datetime = field(default_factory=lambda: RealClock().now().replace(microsecond=0))
    SIZES: tuple[int, ...] = (4, 8, 16, 8, 16, 24, 8, 16)

    def __post_init__(self) -> None:
        sizes: list[int] = []
        total = 0
        while total < self.pods:
            s = min(self.SIZES[len(sizes) % len(self.SIZES)], self.pods - total)
            sizes.append(s)
            total += s
        if len(sizes) > self.jobs:
            raise SystemExit(f"{self.pods} pods need {len(sizes)} running jobs > {self.jobs}")
        self.sizes = sizes + [0] * (self.jobs - len(sizes))
        self.first_pod = [0] * self.jobs
        acc = 0
        for j, s in enumerate(self.sizes):
            self.first_pod[j] = acc
            acc += s
        self.nodes = -(-self.pods // self.gpus)
        self.running = len(sizes)
        from lattice.frameworks.base import OperatorContext
        from lattice.frameworks.trainingjob import TrainingJobPlugin

        self.plugin = TrainingJobPlugin()
        self.ctx = OperatorContext(scheduling_unit=GPU)

    # --- names and times

    def ns(self, j: int) -> str:
        return f"team-{j % self.namespaces:02d}"

    def name(self, j: int) -> str:
        return f"train-{j:05d}"

    def created(self, j: int) -> datetime:
        return self.now - timedelta(hours=3) + timedelta(seconds=j)

    def job_uid(self, j: int) -> str:
        return str(uuid.UUID(int=10**12 + j))

    # --- jobs

    def job(self, j: int) -> Obj:
        size = self.sizes[j]
        rng = random.Random(self.seed * 7919 + j)
        if size:
            cls = rng.choice(("high", "mid", "low", "low"))
            priority, lo, hi = PRIORITIES[cls], size, 2 * size
        else:
            priority, lo = -1, rng.choice((4, 8))
            hi = lo * 2
        name, ns, created = self.name(j), self.ns(j), self.created(j)
        user = trainingjob(name, min_size=lo, max_size=hi, priority=priority)
        user["metadata"]["namespace"] = ns
        user["metadata"]["labels"] = {"team": ns, "app.kubernetes.io/name": "resnet"}
        user["spec"]["replicaSpecs"]["template"]["spec"]["containers"][0]["args"] = [
            "--epochs=90",
            "--batch-size=256",
            f"--data=/datasets/imagenet/shard-{j % 64}",
        ]
        last_applied = json.dumps(user, separators=(",", ":"), sort_keys=True) + "\n"
        obj: Obj = json.loads(json.dumps(user))
        spec = obj["spec"]
        spec["runPolicy"] = {"cleanPodPolicy": "All", "suspend": False}
        spec["replicaSpecs"]["replicas"] = size or 1
        spec["replicaSpecs"]["restartPolicy"] = "Never"
        spec["injectLattice"] = False
        spec["framework"] = "pytorch"
        t_create, t_start = ts(created), ts(created + timedelta(seconds=2))
        created_cond = {
            "type": "Created",
            "status": "True",
            "reason": "TrainingJobCreated",
            "message": f"TrainingJob {name} is created.",
            "lastUpdateTime": t_create,
            "lastTransitionTime": t_create,
        }
        status: Obj
        if size:
            svc_at = self.now - timedelta(seconds=10)
            status = {
                "stage": "Running",
                "currentSize": size,
                "submitTime": ts(created + timedelta(seconds=1)),
                "queuedTime": ts(created + timedelta(seconds=1)),
                "requeueCount": 0,
                "attainedService": float(size * int((svc_at - created).total_seconds() - 2)),
                "serviceUpdatedTime": ts(svc_at),
                "lastExecTime": t_start,
                "lastResizeTime": t_start,
                "lastDecision": f"started at size {size} in [{lo}, {hi}]",
                "reason": "TrainingJobRunning",
                "message": f"TrainingJob {ns}/{name} is running.",
                "execStatus": {
                    "conditions": [
                        created_cond,
                        {
                            "type": "Running",
                            "status": "True",
                            "reason": "TrainingJobRunning",
                            "message": f"TrainingJob {ns}/{name} is running.",
                            "lastUpdateTime": t_start,
                            "lastTransitionTime": t_start,
                        },
                    ],
                    "replicaStatuses": {
                        "Worker": {
                            "active": size,
                            "selector": f"{JOB_LABEL}={name},"
                            "training.kubeflow.org/replica-type=worker",
                        }
                    },
                    "startTime": t_create,
                    "lastReconcileTime": t_start,
                },
            }
        else:
            status = {
                "stage": "Waiting",
                "currentSize": 0,
                "submitTime": ts(created + timedelta(seconds=1)),
                "queuedTime": ts(created + timedelta(seconds=1)),
                "queuePosition": j - self.running + 1,
                "requeueCount": 0,
                "attainedService": 0.0,
                "lastDecision": "waiting: not enough free units",
                "reason": "TrainingJobWaiting",
                "message": f"TrainingJob {ns}/{name} is waiting for {lo} units.",
                "execStatus": {
                    "conditions": [created_cond],
                    "replicaStatuses": {},
                    "startTime": t_create,
                    "lastReconcileTime": t_create,
                },
            }
        obj["metadata"].update(
            {
                "uid": self.job_uid(j),
                "resourceVersion": str(2_000_000 + j),
                "generation": 1,
                "creationTimestamp": t_create,
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied},
                "managedFields": [
                    {
                        **managed(
                            "kubectl-client-side-apply",
                            t_create,
                            {
                                "f:metadata": {
                                    "f:annotations": {
                                        ".": {},
                                        "f:kubectl.kubernetes.io/last-applied-configuration": {},
                                    },
                                    "f:labels": fields_v1(user["metadata"]["labels"]),
                                },
                                "f:spec": fields_v1(user["spec"]),
                            },
                        ),
                        "apiVersion": "breezeml.ai/v1",
                    },
                    {
                        **managed(
                            "lattice-operator",
                            t_start,
                            {"f:status": fields_v1(status)},
                            subresource="status",
                        ),
                        "apiVersion": "breezeml.ai/v1",
                    },
                ],
            }
        )
        obj["status"] = status
        return obj

    def job_json(self, j: int) -> str:
        return json.dumps(self.job(j), separators=(",", ":"))

    # --- children through the real plugin

    def children(self, j: int) -> tuple[list[Obj], list[Obj]]:
        size = self.sizes[j]
        if not size:
            return [], []
        parsed = self.plugin.parse(self.job(j), self.ctx)
        kids = self.plugin.children(parsed, size=size, ctx=self.ctx)
        return [dict(p) for p in kids.pods], [dict(s) for s in kids.services]

    def created_fields(self, manifest: Obj, j: int) -> Obj:
        """The operator's ``fieldsV1`` for a child of job ``j`` (before the server's defaults)."""
        return {
            "f:metadata": {
                "f:labels": fields_v1(manifest["metadata"]["labels"]),
                "f:ownerReferences": {f'k:{{"uid":"{self.job_uid(j)}"}}': {}},
            },
            "f:spec": fields_v1(manifest["spec"]),
        }

    def pod(self, manifest: Obj, g: int, j: int) -> Obj:
        """``manifest`` as the apiserver stores it once bound and running (global index ``g``)."""
        created = self.created(j) + timedelta(seconds=3)
        t0, t1 = ts(created), ts(created + timedelta(seconds=2))
        node = f"gpu-node-{g // self.gpus:05d}"
        meta = manifest["metadata"]
        fields_create = self.created_fields(manifest, j)
        meta.update(
            {
                "uid": str(uuid.UUID(int=g)),
                "resourceVersion": str(3_000_000 + g),
                "creationTimestamp": t0,
                "managedFields": [],
            }
        )
        spec = manifest["spec"]
        sa = f"kube-api-access-{g % 100000:05d}"
        for c in spec["containers"]:
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c["volumeMounts"] = [
                {
                    "name": sa,
                    "readOnly": True,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                }
            ]
        spec.update(
            {
                "volumes": [
                    {
                        "name": sa,
                        "projected": {
                            "sources": [
                                {
                                    "serviceAccountToken": {
                                        "expirationSeconds": 3607,
                                        "path": "token",
                                    }
                                },
                                {
                                    "configMap": {
                                        "name": "kube-root-ca.crt",
                                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                    }
                                },
                                {
                                    "downwardAPI": {
                                        "items": [
                                            {
                                                "path": "namespace",
                                                "fieldRef": {
                                                    "apiVersion": "v1",
                                                    "fieldPath": "metadata.namespace",
                                                },
                                            }
                                        ]
                                    }
                                },
                            ],
                            "defaultMode": 420,
                        },
                    }
                ],
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "serviceAccountName": "default",
                "serviceAccount": "default",
                "nodeName": node,
                "securityContext": {},
                "schedulerName": "default-scheduler",
                "tolerations": [
                    {
                        "key": f"node.kubernetes.io/{k}",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    }
                    for k in ("not-ready", "unreachable")
                ],
                "priority": 0,
                "enableServiceLinks": True,
                "preemptionPolicy": "PreemptLowerThan",
            }
        )
        ip = f"10.{64 + g // 65536}.{(g // 256) % 256}.{g % 256}"
        host = f"10.0.{(g // self.gpus) // 250}.{(g // self.gpus) % 250}"
        conds = [
            {"type": c, "status": "True", "lastProbeTime": None, "lastTransitionTime": t1}
            for c in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
        ] + [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
              "lastTransitionTime": t0}]  # fmt: skip
        status = {
            "phase": "Running",
            "conditions": conds,
            "hostIP": host,
            "hostIPs": [{"ip": host}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": t1,
            "containerStatuses": [
                {
                    "name": "trainingjob",
                    "state": {"running": {"startedAt": t1}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": "example.com/train:1",
                    "imageID": "example.com/train@sha256:" + f"{g:064x}",
                    "containerID": "containerd://" + f"{g * 7919:064x}",
                    "started": True,
                }
            ],
            "qosClass": "BestEffort",
        }
        manifest["status"] = status
        meta["managedFields"] = [
            managed("lattice-operator", t0, fields_create),
            managed(
                "kube-scheduler",
                t0,
                {"f:status": {"f:conditions": {'k:{"type":"PodScheduled"}': {}}}},
                subresource="status",
            ),
            managed("kubelet", t1, {"f:status": fields_v1(status)}, subresource="status"),
        ]
        return manifest

    def service(self, manifest: Obj, g: int, j: int) -> Obj:
        t0 = ts(self.created(j) + timedelta(seconds=3))
        meta = manifest["metadata"]
        fields_create = self.created_fields(manifest, j)
        meta.update(
            {
                "uid": str(uuid.UUID(int=2**64 + g)),
                "resourceVersion": str(4_000_000 + g),
                "creationTimestamp": t0,
                "managedFields": [managed("lattice-operator", t0, fields_create)],
            }
        )
        spec = manifest["spec"]
        for p in spec.get("ports") or ():
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
        spec.update(
            {
                "clusterIPs": ["None"],
                "type": "ClusterIP",
                "sessionAffinity": "None",
                "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack",
                "internalTrafficPolicy": "Cluster",
            }
        )
        manifest["status"] = {"loadBalancer": {}}
        return manifest

    def node(self, n: int) -> Obj:
        name = f"gpu-node-{n:05d}"
        t0 = ts(self.now - timedelta(days=30))
        hb = ts(self.now - timedelta(seconds=n % 40))
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "p5.48xlarge",
            "topology.kubernetes.io/region": "us-east-1",
            "topology.kubernetes.io/zone": f"us-east-1{'abcd'[n % 4]}",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.count": str(self.gpus),
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.family": "hopper",
            "nvidia.com/gpu.machine": "p5.48xlarge",
            "nvidia.com/gpu.compute.major": "9",
            "nvidia.com/gpu.compute.minor": "0",
            "nvidia.com/cuda.driver.major": "550",
            "nvidia.com/cuda.driver.minor": "90",
            "nvidia.com/cuda.driver.rev": "07",
            "nvidia.com/cuda.runtime.major": "12",
            "nvidia.com/cuda.runtime.minor": "4",
            "nvidia.com/gfd.timestamp": str(1_700_000_000 + n),
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/gpu.deploy.device-plugin": "true",
            "nvidia.com/gpu.deploy.dcgm-exporter": "true",
            "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
            "nvidia.com/gpu.deploy.container-toolkit": "true",
            "nvidia.com/gpu.deploy.driver": "pre-installed",
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "feature.node.kubernetes.io/kernel-version.full": "6.1.0-27-cloud-amd64",
            "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
            "feature.node.kubernetes.io/network-sriov.capable": "true",
            "cluster.example.com/rack": f"rack-{n // 32:04d}",
            "cluster.example.com/pool": "training",
        }
        cap = {
            "cpu": "192",
            "memory": "2113407112Ki",
            "pods": "110",
            "ephemeral-storage": "3750000000Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            GPU: str(self.gpus),
            "rdma/ib": "32",
        }
        status: Obj = {
            "capacity": cap,
            "allocatable": {**cap, "cpu": "191450m", "memory": "2104887432Ki"},
            "conditions": [
                {
                    "type": t,
                    "status": "True" if t == "Ready" else "False",
                    "lastHeartbeatTime": hb,
                    "lastTransitionTime": t0,
                    "reason": r,
                    "message": m,
                }
                for t, r, m in (
                    (
                        "MemoryPressure",
                        "KubeletHasSufficientMemory",
                        "kubelet has sufficient memory available",
                    ),
                    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    (
                        "PIDPressure",
                        "KubeletHasSufficientPID",
                        "kubelet has sufficient PID available",
                    ),
                    ("Ready", "KubeletReady", "kubelet is posting ready status"),
                )
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{n // 250}.{n % 250}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{n:032x}",
                "systemUUID": str(uuid.UUID(int=n)),
                "bootID": str(uuid.UUID(int=n + 7)),
                "kernelVersion": "6.1.0-27-cloud-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.34.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {
                    "names": [
                        f"registry.example.com/ml/image-{k}@sha256:{k * 31 + 7:064x}",
                        f"registry.example.com/ml/image-{k}:2026.{k % 12 + 1}",
                    ],
                    "sizeBytes": 1_000_000_000 + k * 12345,
                }
                for k in range(20)
            ],
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": str(uuid.UUID(int=2**80 + n)),
                "resourceVersion": str(1_000_000 + n),
                "creationTimestamp": t0,
                "labels": labels,
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    "nfd.node.kubernetes.io/feature-labels": "pci-10de.present,kernel-version.full",
                    "nvidia.com/gpu-driver-upgrade-enabled": "true",
                },
                "managedFields": [
                    managed("kubelet", t0, {"f:metadata": {"f:labels": fields_v1(labels)}}),
                    managed("kubelet", hb, {"f:status": fields_v1(status)}, subresource="status"),
                ],
            },
            "spec": {"podCIDR": f"10.{64 + n // 256}.{n % 256}.0/24", "providerID": f"aws:///{n}"},
            "status": status,
        }

    def daemon_pod(self, n: int) -> Obj:
        node = f"gpu-node-{n:05d}"
        name = f"nvidia-device-plugin-{n:05d}"
        t0 = ts(self.now - timedelta(days=30))
        spec: Obj = {
            "containers": [
                {
                    "name": "nvidia-device-plugin",
                    "image": "nvcr.io/nvidia/k8s-device-plugin:v0.16.2",
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                }
            ],
            "nodeName": node,
            "priorityClassName": "system-node-critical",
        }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "kube-system",
                "uid": str(uuid.UUID(int=2**90 + n)),
                "resourceVersion": str(900_000 + n),
                "creationTimestamp": t0,
                "labels": {"app": "nvidia-device-plugin", "controller-revision-hash": "6d4b8"},
                "managedFields": [managed("kube-controller-manager", t0, {"f:spec": {}})],
            },
            "spec": spec,
            "status": {"phase": "Running", "hostIP": f"10.0.{n // 250}.{n % 250}"},
        }

    # --- streams of JSON texts, as the apiserver would send them

    def job_texts(self) -> Iterator[str]:
        for j in range(self.jobs):
            yield self.job_json(j)

    def pod_texts(self) -> Iterator[str]:
        for j in range(self.running):
            pods, _ = self.children(j)
            for k, p in enumerate(pods):
                yield json.dumps(self.pod(p, self.first_pod[j] + k, j), separators=(",", ":"))

    def service_texts(self) -> Iterator[str]:
        for j in range(self.running):
            _, services = self.children(j)
            for k, s in enumerate(services):
                yield json.dumps(self.service(s, self.first_pod[j] + k, j), separators=(",", ":"))

    def node_texts(self) -> Iterator[str]:
        for n in range(self.nodes):
            yield json.dumps(self.node(n), separators=(",", ":"))

    def daemon_texts(self) -> Iterator[str]:
        for n in range(self.nodes):
            yield json.dumps(self.daemon_pod(n), separators=(",", ":"))


class FakeApi:
    """A ``KubeClient`` serving generated datasets by LIST pages and WATCH streams, in memory.

    A dataset is keyed by (plural, label selector); it is served only once enabled. LIST pages
    are built as JSON text and parsed with ``json.loads`` (what ``RestClient`` does); a WATCH
    stays open and, when a dataset is streamed, yields one ADDED event per object (parsed from
    its text) and later any queued MODIFIED texts. Status patches of TrainingJobs return the
    regenerated job with the patch merged (the patch carries every scheduler field), recording
    the patch so it can be delivered back as a MODIFIED event. The arguments a method does not
    use (namespaces, field selectors, resource versions...) go to ``**_``.
    """

    def __init__(self, world: MemWorld) -> None:
        self.world = world
        self.sources: dict[tuple[str, str], Callable[[], Iterator[str]]] = {
            ("trainingjobs", ""): world.job_texts,
            ("pods", MANAGED): world.pod_texts,
            ("pods", f"!{MANAGED}"): world.daemon_texts,
            ("services", MANAGED): world.service_texts,
            ("nodes", ""): world.node_texts,
        }
        self.enabled: set[tuple[str, str]] = set()
        self._cursors: dict[str, Iterator[str]] = {}
        self._streams: dict[tuple[str, str], Iterator[str]] = {}
        self._modified: dict[tuple[str, str], collections.deque[str]] = collections.defaultdict(
            collections.deque
        )
        self._wake: dict[tuple[str, str], asyncio.Event] = collections.defaultdict(asyncio.Event)
        self._rv = 10_000_000
        self.patches: list[tuple[int, str]] = []
        self.events = 0

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def stream(self, key: tuple[str, str]) -> None:
        self.enabled.add(key)
        self._streams[key] = self.sources[key]()
        self._wake[key].set()

    def deliver_patched(self) -> int:
        """Queue every recorded patch's result as a MODIFIED event on the jobs watch."""
        key = ("trainingjobs", "")
        n = 0
        for j, body in self.patches:
            obj = apply_merge_patch(self.world.job(j), json.loads(body))
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self._modified[key].append(json.dumps(obj, separators=(",", ":")))
            n += 1
        self.patches.clear()
        self._wake[key].set()
        return n

    def pending(self, key: tuple[str, str]) -> int:
        return len(self._modified[key]) + (1 if key in self._streams else 0)

    async def list(
        self,
        res: Resource,
        *,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        **_: Any,
    ) -> Obj:
        key = (res.plural, label_selector or "")
        await yield_now()
        rv = self._next_rv()
        if key not in self.enabled:
            return {"metadata": {"resourceVersion": rv}, "items": []}
        cursor = self._cursors.pop(continue_token) if continue_token else self.sources[key]()
        chunk = [text for _, text in zip(range(limit or 500), cursor, strict=False)]
        token = ""
        if len(chunk) == (limit or 500):
            token = uuid.uuid4().hex
            self._cursors[token] = cursor
        meta = json.dumps({"resourceVersion": rv, "continue": token})
        page: Obj = json.loads(f'{{"metadata":{meta},"items":[{",".join(chunk)}]}}')
        return page

    async def watch(
        self, res: Resource, *, label_selector: str | None = None, **_: Any
    ) -> AsyncIterator[WatchEvent]:
        key = (res.plural, label_selector or "")
        wake = self._wake[key]
        while True:
            queued = self._modified[key]
            while queued:
                yield WatchEvent("MODIFIED", json.loads(queued.popleft()))
            it = self._streams.get(key)
            if it is not None:
                for n, text in enumerate(it):
                    yield WatchEvent("ADDED", json.loads(text))
                    if n % 256 == 255:
                        await yield_now()
                self._streams.pop(key, None)
                continue
            wake.clear()
            await wake.wait()

    async def get(self, res: Resource, name: str, **_: Any) -> Obj:
        raise NotFound(404, "NotFound", f"{res.plural} {name} not found")

    async def create(self, res: Resource, body: Obj, **_: Any) -> Obj:
        self.events += 1
        return body

    async def patch(
        self, res: Resource, name: str, body: Any, *, subresource: str | None = None, **_: Any
    ) -> Obj:
        if res.plural != "trainingjobs" or subresource != "status":
            raise NotFound(404, "NotFound", f"{res.plural} {name}")
        j = int(name.rsplit("-", 1)[1])
        patch = dict(body)
        patch.pop("metadata", None)
        self.patches.append((j, json.dumps(patch, separators=(",", ":"))))
        obj: Obj = apply_merge_patch(self.world.job(j), patch)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        return obj

    async def replace(self, res: Resource, name: str, body: Obj, **_: Any) -> Obj:
        return body

    async def delete(self, res: Resource, name: str, **_: Any) -> Obj:
        return {}

    async def close(self) -> None:
        return None


def _filled(store: Any, key: tuple[str, str], want: int, fake: FakeApi) -> Callable[[], bool]:
    return lambda: len(store) >= want and not fake.pending(key)


async def until(cond: Callable[[], bool], period: float = 0.05) -> None:
    while True:
        if cond():
            return
        await RealClock().sleep(period)


def write_text(path: Path, text: str) -> None:
    path.write_text(text)


class WorldClock(RealClock):
    """Real sleeps and monotonic time; wall time pinned to the world's snapshot time, so the
    pass decides at the ``now`` the objects were generated for however long the fill took."""

    def __init__(self, at: datetime) -> None:
        self._at = at + timedelta(seconds=1)

    def now(self) -> datetime:
        return self._at


def malloc_trim() -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    libc.malloc_trim(0)
    return True


async def memory_child(mode: str, a: argparse.Namespace) -> None:
    """Build the operator on a FakeApi, fill it step by step, print one JSON line of RSS."""
    from prometheus_client import CollectorRegistry

    from lattice.app import Operator
    from lattice.config import Settings
    from lattice.runtime.logs import configure_logging

    configure_logging(level="warning", fmt="json")
    world = MemWorld(a.mem_jobs, a.mem_pods, a.mem_gpus, a.mem_namespaces, a.seed)
    fake = FakeApi(world)
    steps: list[Obj] = []

    def mark(label: str, started: float, **extra: Any) -> None:
        gc.collect()
        st = proc_status()
        steps.append(
            {
                "step": label,
                "rss": st["VmRSS"],
                "hwm": st["VmHWM"],
                "anon": st["RssAnon"],
                "seconds": clock.monotonic() - started,
                **extra,
            }
        )

    t = clock.monotonic()
    settings = Settings(scheduling_unit=GPU, metrics_addr="127.0.0.1:0", probe_addr="127.0.0.1:0")
    client: KubeClient = fake
    op = Operator(settings, client, clock=WorldClock(world.now), registry=CollectorRegistry())
    op.informers.start()
    op.recorder.start()
    await op.informers.wait_synced()
    await op.scheduler.run_once()
    mark("baseline: operator built, informers synced empty, one empty pass", t)

    tj = op.jobs["TrainingJob"]
    phases: list[tuple[str, list[tuple[Any, tuple[str, str], int]]]] = [
        (
            f"+ {world.nodes:,} nodes (node_info) and {world.nodes:,} DaemonSet pods (foreign)",
            [
                (op.nodes, ("nodes", ""), world.nodes),
                (op.foreign_pods, ("pods", f"!{MANAGED}"), world.nodes),
            ],
        ),
        (
            f"+ {world.jobs:,} TrainingJobs (slim_object dicts)",
            [(tj, ("trainingjobs", ""), world.jobs)],
        ),
        (f"+ {world.pods:,} pods (PodInfo)", [(op.pods, ("pods", MANAGED), world.pods)]),
        (
            f"+ {world.pods:,} headless Services (ObjectInfo)",
            [(op.services, ("services", MANAGED), world.pods)],
        ),
    ]
    for label, parts in phases:
        if label.startswith("+ ") and "Services" in label and a.mem_no_services:
            continue
        t = clock.monotonic()
        for informer, key, _ in parts:
            if mode == "list":
                fake.enabled.add(key)
                informer.force_relist()
            else:
                fake.stream(key)
        for informer, key, want in parts:
            await until(_filled(informer.store, key, want, fake))
        mark(label, t, objects=sum(w for _, _, w in parts))
    t = clock.monotonic()
    plan = await op.scheduler.run_once()
    pass1 = clock.monotonic() - t
    written = len(fake.patches)
    patch_bytes = sum(len(b) for _, b in fake.patches)
    stages = collections.Counter(str(d.stage) for d in plan.decisions.values())
    mark(
        "one scheduler pass (SchedulerLoop.run_once)",
        t,
        pass_s=round(pass1, 2),
        written=written,
        patch_bytes=patch_bytes,
        stages=dict(stages),
        capacity=[plan.capacity_used, plan.capacity_total],
    )
    t = clock.monotonic()
    delivered = fake.deliver_patched()
    key = ("trainingjobs", "")
    await until(lambda: not fake.pending(key))
    await RealClock().sleep(0.1)
    t2 = clock.monotonic()
    plan = await op.scheduler.run_once()
    pass2 = clock.monotonic() - t2
    mark(
        f"{delivered:,} patched jobs delivered as MODIFIED, second pass",
        t,
        pass_s=round(pass2, 2),
        written=len(fake.patches),
    )
    fake.patches.clear()
    t = clock.monotonic()
    if malloc_trim():
        mark("after malloc_trim(0) (not done by the operator)", t)
    sizes = {
        "job": len(world.job_json(0)),
        "pod": len(next(world.pod_texts())),
        "service": len(next(world.service_texts())),
        "node": len(world.node_texts().__next__()),
    }
    print(
        json.dumps(
            {
                "mode": mode,
                "steps": steps,
                "json_bytes": sizes,
                "stores": {
                    "jobs": len(tj.store),
                    "pods": len(op.pods.store),
                    "services": len(op.services.store),
                    "nodes": len(op.nodes.store),
                    "foreign": len(op.foreign_pods.store),
                },
                "queued_keys": op.controllers["TrainingJob"].queue.len(),
                "events_sent": fake.events,
            }
        )
    )
    await op.recorder.stop(timeout=1.0)
    await op.informers.stop()


def memory_main(a: argparse.Namespace) -> None:
    print_setup(
        "memory section: in-process, no cluster, nothing pinned; each fill path in its own "
        "child process"
    )
    world = MemWorld(a.mem_jobs, a.mem_pods, a.mem_gpus, a.mem_namespaces, a.seed)
    print(
        f"world: {a.mem_jobs:,} TrainingJobs in {a.mem_namespaces} namespaces "
        f"({world.running:,} Running with {a.mem_pods:,} one-GPU workers, "
        f"{a.mem_jobs - world.running:,} Waiting), {world.nodes:,} nodes x {a.mem_gpus} GPUs, "
        f"{world.nodes:,} DaemonSet pods, "
        + ("no Services" if a.mem_no_services else f"{a.mem_pods:,} headless Services")
    )
    results: dict[str, Obj] = {}
    for mode in a.mem_modes.split(","):
        cmd = [sys.executable, __file__, "--memory-child", mode, *child_args(a)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"[{mode}] child failed rc={proc.returncode}:\n{proc.stderr[-4000:]}")
            continue
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not results:
        return
    first = next(iter(results.values()))
    print(f"JSON bytes per object: {first['json_bytes']}; stores: {first['stores']}")
    for mode, r in results.items():
        print(
            f"\n[{mode}] fill path: "
            + (
                "force_relist() of each informer (LIST, pages of 500; a restart at that size)"
                if mode == "list"
                else "one ADDED watch event per object (the operator up while they appeared)"
            )
        )
        hdr = (
            f"{'step':<82} {'VmRSS MiB':>10} {'delta':>8} {'KiB/obj':>8} {'VmHWM MiB':>10} {'s':>7}"
        )
        print(hdr)
        print("-" * len(hdr))
        base = prev = r["steps"][0]["rss"]
        skip = ("step", "rss", "hwm", "anon", "seconds", "objects")
        for s in r["steps"]:
            extra = {k: v for k, v in s.items() if k not in skip}
            n = s.get("objects")
            per = f"{(s['rss'] - prev) * 1024 / n:>8.2f}" if n else f"{'':>8}"
            prev = s["rss"]
            print(
                f"{s['step']:<82} {s['rss']:>10,.0f} {s['rss'] - base:>+8,.0f} {per} "
                f"{s['hwm']:>10,.0f} {s['seconds']:>7.1f}" + (f"  {extra}" if extra else "")
            )
        print(f"events sent to the fake: {r['events_sent']}")
    print(f"\ngoal: operator RSS <= 500 MiB at {a.mem_jobs:,} jobs / {a.mem_pods:,} pods")


def child_args(a: argparse.Namespace) -> list[str]:
    out = [
        "--mem-jobs",
        str(a.mem_jobs),
        "--mem-pods",
        str(a.mem_pods),
        "--mem-gpus",
        str(a.mem_gpus),
        "--mem-namespaces",
        str(a.mem_namespaces),
        "--seed",
        str(a.seed),
    ]
    if a.mem_no_services:
        out.append("--mem-no-services")
    return out


# =========================================================================== load section


@dataclass
class World:
    """What the bench sees: pods' first-seen times, live pods, jobs' first grant and stage, and
    how long a job the scheduler shrank (or preempted) keeps its extra pods."""

    pod_first: dict[str, float] = field(default_factory=dict)
    pod_bound: dict[str, float] = field(default_factory=dict)  # first seen with a nodeName
    live: dict[str, str] = field(default_factory=dict)  # pod name -> job
    grant: dict[str, tuple[float, int]] = field(default_factory=dict)
    stage: dict[str, str] = field(default_factory=dict)
    cls: dict[str, str] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=dict)
    #: job -> pods not terminating / pods still in the API (terminating included)
    running_pods: dict[str, set[str]] = field(default_factory=dict)
    existing_pods: dict[str, set[str]] = field(default_factory=dict)
    #: job -> (when the bench saw its currentSize drop, the new size), until its pods follow
    shrunk: dict[str, tuple[float, int]] = field(default_factory=dict)
    gone: dict[str, tuple[float, int]] = field(default_factory=dict)
    to_terminating: list[float] = field(default_factory=list)  # shrink -> deletions issued
    to_deleted: list[float] = field(default_factory=list)  # shrink -> pods removed from the API

    def _follow(self, job: str) -> None:
        now = clock.monotonic()
        pending = self.shrunk.get(job)
        if pending is not None and len(self.running_pods.get(job, ())) <= pending[1]:
            self.to_terminating.append(now - pending[0])
            del self.shrunk[job]
            self.gone[job] = pending
        pending = self.gone.get(job)
        if pending is not None and len(self.existing_pods.get(job, ())) <= pending[1]:
            self.to_deleted.append(now - pending[0])
            del self.gone[job]

    def on_pod(self, etype: str, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        name = meta.get("name", "")
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if not job:
            return
        if etype == "DELETED" or meta.get("deletionTimestamp"):
            self.live.pop(name, None)
            self.running_pods.get(job, set()).discard(name)
            if etype == "DELETED":
                self.existing_pods.get(job, set()).discard(name)
                self._follow(job)
                return
        else:
            self.live[name] = job
            self.running_pods.setdefault(job, set()).add(name)
        self.existing_pods.setdefault(job, set()).add(name)
        self._follow(job)
        self.pod_first.setdefault(name, clock.monotonic())
        if (pod.get("spec") or {}).get("nodeName"):
            self.pod_bound.setdefault(name, clock.monotonic())

    def on_job(self, etype: str, job: Obj) -> None:
        meta = job.get("metadata") or {}
        name = meta.get("name", "")
        status = job.get("status") or {}
        if etype == "DELETED":
            return
        self.stage[name] = str(status.get("stage") or "")
        self.cls.setdefault(name, (meta.get("labels") or {}).get(CLASS_LABEL, "?"))
        size = int(status.get("currentSize") or 0)
        if size > 0 and name not in self.grant:
            self.grant[name] = (clock.monotonic(), size)
        if size < self.size.get(name, 0) and name not in self.shrunk:
            self.gone.pop(name, None)
            self.shrunk[name] = (clock.monotonic(), size)
            self._follow(name)
        self.size[name] = size


# the trainingjob workqueue's metrics parse_metrics keeps, and under which key
QUEUE_METRICS = {
    "workqueue_depth": "depth",
    "workqueue_adds_total": "adds",
    "workqueue_queue_duration_seconds_sum": "qwait_sum",
    "workqueue_queue_duration_seconds_count": "qwait_count",
    "workqueue_work_duration_seconds_sum": "work_sum",
    "workqueue_work_duration_seconds_count": "work_count",
}


def parse_metrics(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "buckets": {},
        "jobs": {},
        "capacity": {},
        "rest": collections.Counter(),
        "reconcile": collections.Counter(),
        "decisions": collections.Counter(),
        "writes": collections.Counter(),
        "lat_sum": collections.Counter(),
        "lat_count": collections.Counter(),
        "throttle_sum": collections.Counter(),
        "throttle_count": collections.Counter(),
    }
    for s in metric_samples(text):
        n, lab = s.name, s.labels
        if n == "lattice_scheduler_pass_duration_seconds_bucket":
            out["buckets"][float(lab["le"])] = s.value
        elif n == "lattice_scheduler_pass_duration_seconds_count":
            out["passes"] = s.value
        elif n == "lattice_scheduler_pass_duration_seconds_sum":
            out["pass_sum"] = s.value
        elif n == "lattice_jobs" and lab.get("kind") == "TrainingJob":
            out["jobs"][lab["stage"]] = s.value
        elif n == "lattice_capacity_units":
            out["capacity"][lab["state"]] = s.value
        elif n == "rest_client_requests_total":
            out["rest"][f"{lab['method']} {lab['code']}"] += s.value
        elif n == "controller_runtime_reconcile_total" and lab["controller"] == "trainingjob":
            out["reconcile"][lab["result"]] += s.value
        elif n == "lattice_scheduler_decisions_total":
            out["decisions"][lab["type"]] += s.value
        elif n == "lattice_preemptions_total":
            out["preemptions"] = s.value
        elif n == "lattice_events_dropped_total":
            out["events_dropped"] = s.value
        elif n == "lattice_scheduler_status_writes_total":
            out["writes"][lab["result"]] += s.value
        elif n in QUEUE_METRICS and lab["name"] == "trainingjob":
            out[QUEUE_METRICS[n]] = s.value
        elif n == "rest_client_request_duration_seconds_sum":
            out["lat_sum"][f"{lab['verb']} {lab['resource']}"] += s.value
        elif n == "rest_client_request_duration_seconds_count":
            out["lat_count"][f"{lab['verb']} {lab['resource']}"] += s.value
        elif n == "rest_client_rate_limiter_duration_seconds_sum":
            out["throttle_sum"][lab["verb"]] += s.value
        elif n == "rest_client_rate_limiter_duration_seconds_count":
            out["throttle_count"][lab["verb"]] += s.value
    return out


def count_x_mean(m0: dict[str, Any], m1: dict[str, Any], prefix: str, *, digits: int) -> list[str]:
    """``"<label> <count> x <mean> ms"`` for each label of the ``<prefix>_count`` /
    ``<prefix>_sum`` counters that grew by 10 or more from ``m0`` to ``m1``, sorted."""
    out = []
    for k, c in m1[f"{prefix}_count"].items():
        dc = c - m0[f"{prefix}_count"].get(k, 0)
        if dc >= 10:
            ds = m1[f"{prefix}_sum"][k] - m0[f"{prefix}_sum"].get(k, 0)
            out.append(f"{k} {dc:.0f} x {ds / dc * 1000:.{digits}f} ms")
    return sorted(out)


def hist_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus histogram_quantile over cumulative ``{le: count}``."""
    items = sorted(buckets.items())
    if not items or items[-1][1] <= 0:
        return float("nan")
    total = items[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in items:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 0)
        prev_le, prev_c = le, c
    return prev_le


def log_passes(path: Path, start: int, end: int) -> list[Obj]:
    """The operator's ``scheduler.pass`` lines between two byte offsets of its log."""
    out: list[Obj] = []
    with path.open("rb") as f:
        f.seek(start)
        data = f.read(max(0, end - start))
    for line in data.splitlines():
        if b"scheduler.pass" not in line:
            continue
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if rec.get("event") == "scheduler.pass":
                out.append(rec)
    return out


def apiserver_latency() -> dict[str, tuple[float, float]]:
    """Server-side ``apiserver_request_duration_seconds`` (count, sum) of writes by
    verb/resource/subresource, all clients.

    Read line by line, not with ``metric_samples``: the apiserver's metrics are megabytes, and
    ``prometheus_client``'s parser takes some 20 times longer over them (seconds, taken just before
    the load window starts)."""
    out: dict[str, tuple[float, float]] = {}
    for line in apiserver_metrics().splitlines():
        if not line.startswith("apiserver_request_duration_seconds_"):
            continue
        name, _, value = line.rpartition(" ")
        kind = name.split("{", 1)[0].rsplit("_", 1)[1]
        if kind not in ("count", "sum"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', name))
        if labels.get("verb") not in ("POST", "PATCH", "PUT", "DELETE"):
            continue
        key = request_key(labels)
        c, t = out.get(key, (0.0, 0.0))
        out[key] = (c + float(value), t) if kind == "count" else (c, t + float(value))
    return out


def cpu_of(pids: dict[str, int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError, IndexError, ValueError):
            out[name] = proc_status(pid)["cpu"]
    return out


def summarize(
    world: World,
    created: dict[str, float],
    shapes: dict[str, Shape],
    cls: str,
    end: float | None = None,
) -> dict[str, Any]:
    admitted: list[float] = []
    after: list[float] = []
    to_min: list[float] = []
    to_all: list[float] = []
    to_bound: list[float] = []
    waited: list[float] = []
    for name, t0 in created.items():
        sh = shapes[name]
        if sh.cls != cls:
            continue
        firsts = [world.pod_first.get(f"{name}-worker-{i}") for i in range(sh.min_size)]
        if all(f is not None for f in firsts):
            to_min.append(max(f for f in firsts if f is not None) - t0)
        bound = [world.pod_bound.get(f"{name}-worker-{i}") for i in range(sh.min_size)]
        if all(f is not None for f in bound):
            to_bound.append(max(f for f in bound if f is not None) - t0)
        g = world.grant.get(name)
        done = False
        if g is not None:
            admitted.append(g[0] - t0)
            alls = [world.pod_first.get(f"{name}-worker-{i}") for i in range(g[1])]
            if all(f is not None for f in alls):
                to_all.append(max(f for f in alls if f is not None) - t0)
                after.append(max(f for f in alls if f is not None) - g[0])
                done = True
        if g is not None and not done:
            waited.append((end if end is not None else clock.monotonic()) - t0)
    n = sum(1 for s in shapes.values() if s.cls == cls)
    return {
        "n": n,
        "admitted": admitted,
        "after": after,
        "min": to_min,
        "all": to_all,
        "bound": to_bound,
        "waited": waited,
    }


async def load_main(a: argparse.Namespace) -> None:
    ncpu = os.cpu_count() or 1
    taskset = shutil.which("taskset")
    pin_op = bool(taskset) and ncpu >= 2 and not a.no_pin
    op_cpu = str(ncpu - 1)
    other_cpus = f"0-{ncpu - 2}" if ncpu > 2 else "0"
    pins = Pinning(
        operator=op_cpu if pin_op else None,
        control_plane=other_cpus if pin_op and not a.no_pin_control_plane else None,
    )
    cp, pinned = pins.found, pins.pinned
    kubeconfig = str(RUN / "kubeconfig")
    client = await connect(kubeconfig=kubeconfig, qps=0)
    pool = f"s{uuid.uuid4().hex[:6]}"
    capacity = a.nodes * a.gpus
    selector = write_selector(pool)
    namespaces = Namespaces(client, pool)
    tasks: list[asyncio.Task[Any]] = []
    proc: subprocess.Popen[bytes] | None = None
    log_path = RUN / "log" / f"bench-schedload-{pool}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("wb")

    try:
        if pins.control_plane is not None:
            pins.pin()
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, {int(c) for c in range(ncpu - 1)})
        setup = f"operator pinned: {'taskset -c ' + op_cpu if pin_op else 'no'}" + (
            f"; control plane ({', '.join(f'{k}={v[0]}' for k, v in pinned.items())}) and this "
            f"bench pinned to cpus {other_cpus} (affinity before: "
            f"{sorted({v[1] for v in pinned.values()})}, restored at the end)"
            if pinned
            else "; control plane NOT pinned"
            + (f" (PIDs found: {cp})" if cp else " (no PIDs found in .cluster/)")
        )
        print_setup(setup)
        print(
            f"pool {pool}: {a.nodes} kwok nodes x {a.gpus} GPUs = {capacity} GPUs; fill "
            f"{a.fill_jobs} jobs [{a.fill_min},{a.fill_max}] prio 0; load {a.jobs} jobs at "
            f"{a.rate}/s, high {a.high_frac:.0%} (1000) / mid {a.mid_frac:.0%} (100) / low (0), "
            f"minSize 1|2, maxSize 1x|2x|4x, 1 GPU per pod; seed {a.seed}"
        )
        create_node_pool(pool, nodes=a.nodes, gpus=a.gpus)
        base_ns = await namespaces.new("base")
        idle: list[float] = []
        for i in range(a.baseline_pods):
            t = clock.monotonic()
            await client.create(PODS, bare_pod(f"idle-{i:05d}", pool), namespace=base_ns)
            idle.append(clock.monotonic() - t)
        print(
            f"baseline: single-pod create latency, idle, {len(idle)} sequential: "
            f"p50 {pct(idle, 0.5) * 1000:.1f} ms, p99 {pct(idle, 0.99) * 1000:.1f} ms"
        )
        ns = await namespaces.new("load")
        mport, pport = free_port(), free_port()
        cmd = pins.wrap(
            lattice_cmd(ns, selector, GPU, a.operator_arg, metrics_port=mport, probe_port=pport)
        )
        print(f"operator: {' '.join(cmd)}")
        proc = start_process(cmd, log)
        metrics_url = f"http://127.0.0.1:{mport}/metrics"
        world = World()
        tasks.append(asyncio.create_task(Watcher(client, PODS, ns, world.on_pod).run()))
        tasks.append(asyncio.create_task(Watcher(client, TRAININGJOBS, ns, world.on_job).run()))
        deadline = clock.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"operator exited {proc.returncode}; see {log_path}")
            with contextlib.suppress(OSError):
                if scrape(f"http://127.0.0.1:{pport}/readyz", METRICS_TIMEOUT) is not None:
                    break
            if clock.monotonic() > deadline:
                raise SystemExit("operator not ready after 60 s")
            await clock.sleep(0.5)

        # ---- fill
        gate = asyncio.Semaphore(a.concurrency)
        shapes: dict[str, Shape] = {}

        async def create_job(name: str, sh: Shape, created: dict[str, float] | None) -> None:
            body = trainingjob(
                name,
                min_size=sh.min_size,
                max_size=sh.max_size,
                priority=sh.priority,
                labels={CLASS_LABEL: sh.cls},
            )
            async with gate:
                t = clock.monotonic()
                try:
                    await client.create(TRAININGJOBS, body, namespace=ns)
                except ApiError as exc:
                    print(f"  create {name} failed: {exc}")
                    return
                if created is not None:
                    created[name] = t

        t_fill = clock.monotonic()
        fill = Shape("fill", 0, a.fill_min, a.fill_max)
        for i in range(a.fill_jobs):
            shapes[f"fill-{i:04d}"] = fill
        await asyncio.gather(*(create_job(n, s, None) for n, s in shapes.items()))
        stable_since: float | None = None
        m: dict[str, Any] = {}
        while clock.monotonic() - t_fill < a.fill_timeout:
            await clock.sleep(1.0)
            m = parse_metrics(await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT))
            used, total = m["capacity"].get("used", 0), m["capacity"].get("total", 0)
            full = total == capacity and used == total and len(world.live) >= used
            stable_since = (stable_since or clock.monotonic()) if full else None
            if stable_since is not None and clock.monotonic() - stable_since >= 3:
                break
        used, total = m.get("capacity", {}).get("used", 0), m.get("capacity", {}).get("total", 0)
        print(
            f"fill: {used:.0f}/{total:.0f} GPUs used, {len(world.live)} live pods, "
            f"after {clock.monotonic() - t_fill:.1f}s"
            + ("" if used == total == capacity else "  ** NOT FULL (fill timeout) **")
        )

        # ---- load
        created: dict[str, float] = {}
        probe: list[float] = []
        chain: list[float] = []
        samples: list[tuple[float, dict[str, Any], dict[str, float]]] = []
        stop_sampling = asyncio.Event()

        async def sampler() -> None:
            while not stop_sampling.is_set():
                with contextlib.suppress(OSError):
                    text = await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT)
                    if proc is not None and proc.poll() is None:
                        samples.append(
                            (clock.monotonic(), parse_metrics(text), proc_status(proc.pid))
                        )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop_sampling.wait(), a.sample)

        async def prober() -> None:
            i = 0
            while not stop_sampling.is_set():
                t = clock.monotonic()
                with contextlib.suppress(ApiError):
                    await client.create(PODS, bare_pod(f"probe-{i:05d}", pool), namespace=base_ns)
                    probe.append(clock.monotonic() - t)
                t = clock.monotonic()
                with contextlib.suppress(ApiError):
                    await write_chain(client, base_ns, f"chain-{i:05d}", pool)
                    chain.append(clock.monotonic() - t)
                i += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop_sampling.wait(), a.probe_interval)

        m0 = parse_metrics(await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT))
        u0 = proc_status(proc.pid)
        cp0 = cpu_of({**cp, "bench": os.getpid()})
        api0 = await asyncio.to_thread(apiserver_latency)
        off0 = log_path.stat().st_size
        t0 = clock.monotonic()
        tasks.append(asyncio.create_task(sampler()))
        tasks.append(asyncio.create_task(prober()))
        profile: asyncio.Task[str] | None = None
        if a.profile_seconds > 0:
            profile = asyncio.create_task(
                run_profile(a, proc.pid, log_path.with_suffix(".pyspy.txt"))
            )
        load_shapes = {
            f"job-{i:05d}": shape(i, seed=a.seed, high=a.high_frac, mid=a.mid_frac)
            for i in range(a.jobs)
        }
        shapes.update(load_shapes)
        creates: list[asyncio.Task[None]] = []
        behind = 0.0
        for i, (name, sh) in enumerate(load_shapes.items()):
            delay = t0 + i / a.rate - clock.monotonic()
            if delay > 0:
                await clock.sleep(delay)
            else:
                behind = max(behind, -delay)
            creates.append(asyncio.create_task(create_job(name, sh, created)))
            if proc.poll() is not None:
                break
        await asyncio.gather(*creates)
        t_arrived = clock.monotonic()
        m_arrived = parse_metrics(await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT))
        print(
            f"load: {len(created)} jobs created in {t_arrived - t0:.1f}s "
            f"({len(created) / (t_arrived - t0):.1f}/s; at most {behind:.1f}s behind schedule)"
        )
        high = [n for n in created if load_shapes[n].cls == "high"]
        settle_end = t_arrived + a.settle
        while clock.monotonic() < settle_end and proc.poll() is None:
            done = summarize(world, created, shapes, "high")
            if len(done["all"]) >= len(high):
                break
            await clock.sleep(1.0)
        t1 = clock.monotonic()
        stop_sampling.set()
        m1 = parse_metrics(await asyncio.to_thread(scrape, metrics_url, METRICS_TIMEOUT))
        u1 = proc_status(proc.pid)
        cp1 = cpu_of({**cp, "bench": os.getpid()})
        api1 = await asyncio.to_thread(apiserver_latency)
        off1 = log_path.stat().st_size
        if profile is not None:
            try:
                print(await asyncio.wait_for(profile, a.profile_seconds + 60))
            except TimeoutError:
                print("py-spy: did not finish")

        # ---- report
        report(
            a,
            world=world,
            created=created,
            shapes=shapes,
            idle=idle,
            probe=probe,
            chain=chain,
            m0=m0,
            m_arrived=m_arrived,
            m1=m1,
            u0=u0,
            u1=u1,
            t0=t0,
            t_arrived=t_arrived,
            t1=t1,
            passes_log=log_passes(log_path, off0, off1),
            samples=samples,
            others={k: v - cp0.get(k, 0.0) for k, v in cp1.items()},
            api={
                k: (c - api0.get(k, (0.0, 0.0))[0], t - api0.get(k, (0.0, 0.0))[1])
                for k, (c, t) in api1.items()
            },
        )
        stages: collections.Counter[tuple[str, str]] = collections.Counter()
        token: str | None = None
        while True:
            listed = await client.list(TRAININGJOBS, namespace=ns, limit=500, continue_token=token)
            for job in listed.get("items") or []:
                c = (job["metadata"].get("labels") or {}).get(CLASS_LABEL, "?")
                stages[c, str((job.get("status") or {}).get("stage") or "New")] += 1
            token = listed["metadata"].get("continue") or None
            if not token:
                break
        print("jobs by class and stage at the end (LIST):")
        for c in ("high", "mid", "low", "fill"):
            row = {s: n for (k, s), n in sorted(stages.items()) if k == c}
            print(f"  {c:>5}: {row}")
        print(f"operator log: {log_path}")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if proc is not None:
            stop_process(proc)
        log.close()
        await namespaces.delete()
        t = clock.monotonic()
        for name in namespaces.names:
            while clock.monotonic() - t < a.cleanup_timeout:
                try:
                    await client.get(NAMESPACES, name)
                except NotFound:
                    break
                except ApiError:
                    pass
                await clock.sleep(2.0)
            else:
                # Pods whose node is deleted stay Terminating forever (no podgc here): force them.
                left = await client.list(PODS, namespace=name)
                for pod in left.get("items") or []:
                    with contextlib.suppress(ApiError):
                        await client.delete(
                            PODS, pod["metadata"]["name"], namespace=name, grace_period_seconds=0
                        )
                print(
                    f"namespace {name} still terminating after {a.cleanup_timeout:.0f}s; "
                    f"force-deleted {len(left.get('items') or [])} pods"
                )
        print(f"cleanup: namespaces deleted in {clock.monotonic() - t:.0f}s")
        with contextlib.suppress(subprocess.CalledProcessError):
            delete_node_pool(pool)
        selector.unlink(missing_ok=True)
        pins.restore()
        await client.close()


def report(
    a: argparse.Namespace,
    *,
    world: World,
    created: dict[str, float],
    shapes: dict[str, Shape],
    idle: list[float],
    probe: list[float],
    chain: list[float],
    m0: dict[str, Any],
    m_arrived: dict[str, Any],
    m1: dict[str, Any],
    u0: dict[str, float],
    u1: dict[str, float],
    t0: float,
    t_arrived: float,
    t1: float,
    passes_log: list[Obj],
    samples: list[tuple[float, dict[str, Any], dict[str, float]]],
    others: dict[str, float],
    api: dict[str, tuple[float, float]],
) -> None:
    def passes(ma: dict[str, Any], mb: dict[str, Any], dt: float) -> str:
        n = mb.get("passes", 0) - ma.get("passes", 0)
        s = mb.get("pass_sum", 0) - ma.get("pass_sum", 0)
        b = {le: c - ma["buckets"].get(le, 0.0) for le, c in mb["buckets"].items()}
        return (
            f"{n:.0f} passes in {dt:.0f}s = {n / dt:.2f}/s, mean {s / n if n else float('nan'):.3f}"
            f"s, p50 {hist_quantile(0.5, b):.3f}s, p95 {hist_quantile(0.95, b):.3f}s "
            f"(histogram), busy {s / dt:.0%} of the time"
        )

    print("\n== scheduler passes (operator's lattice_scheduler_pass_duration_seconds)")
    print(f"  arrivals window: {passes(m0, m_arrived, t_arrived - t0)}")
    print(f"  whole window:    {passes(m0, m1, t1 - t0)}")
    if passes_log:
        secs = [float(p.get("seconds", 0)) for p in passes_log]
        jobs = [int(p.get("jobs", 0)) for p in passes_log]
        wrote = [int(p.get("written", 0)) for p in passes_log]
        failed = sum(int(p.get("failed", 0)) for p in passes_log)
        print(
            f"  log (passes that wrote; 'failed' counts only writes a pass waited for): "
            f"{len(secs)}, seconds p50 {pct(secs, 0.5):.3f} "
            f"p95 {pct(secs, 0.95):.3f} max {max(secs):.3f}; jobs per pass up to {max(jobs)}; "
            f"written per pass p50 {pct([float(w) for w in wrote], 0.5):.0f} max {max(wrote)}, "
            f"total {sum(wrote)}; failed writes {failed}"
        )
    w = {k: int(v - m0["writes"].get(k, 0)) for k, v in m1["writes"].items()}
    if w:
        print(f"  status writes by result (lattice_scheduler_status_writes_total): {w}")
    d = {k: m1["decisions"][k] - m0["decisions"].get(k, 0) for k in m1["decisions"]}
    print(f"  decisions: { {k: int(v) for k, v in d.items() if v} }, preemptions "
          f"{m1.get('preemptions', 0) - m0.get('preemptions', 0):.0f}, events dropped "
          f"{m1.get('events_dropped', 0) - m0.get('events_dropped', 0):.0f}")  # fmt: skip
    rest = {
        k: int(v - m0["rest"].get(k, 0)) for k, v in m1["rest"].items() if v - m0["rest"].get(k, 0)
    }
    print(f"  operator API requests (method code): {rest}")
    rec = {k: int(v - m0["reconcile"].get(k, 0)) for k, v in m1["reconcile"].items()}
    qn = m1.get("qwait_count", 0) - m0.get("qwait_count", 0)
    qs = m1.get("qwait_sum", 0) - m0.get("qwait_sum", 0)
    wn = m1.get("work_count", 0) - m0.get("work_count", 0)
    ws = m1.get("work_sum", 0) - m0.get("work_sum", 0)
    print(
        f"  trainingjob reconciles: {rec}; mean queue wait {qs / qn if qn else float('nan'):.2f}s,"
        f" mean reconcile {ws / wn if wn else float('nan'):.3f}s, {ws:.0f} worker-seconds in "
        f"{t1 - t0:.0f}s"
    )
    lat = count_x_mean(m0, m1, "lat", digits=0)
    print(f"  operator request latency (count x mean): {', '.join(lat)}")
    waits = count_x_mean(m0, m1, "throttle", digits=1)
    print(
        f"  operator client-side rate-limiter wait (count x mean; events have their own): "
        f"{', '.join(waits) or 'none (no limiter)'}"
    )
    srv = [
        f"{k} {c:.0f} x {t / c * 1000:.0f} ms"
        for k, (c, t) in sorted(api.items(), key=lambda kv: -kv[1][0])
        if c >= 10
    ]
    print(f"  apiserver-side write latency, all clients (count x mean): {', '.join(srv[:10])}")

    print("\n== time from create request to pods existing (bench's pod watch)")
    ref_idle = pct(idle, 0.5)
    ref_load = pct(probe, 0.5)
    print(
        f"  reference: single-pod create p50 idle {ref_idle * 1000:.1f} ms, under load "
        f"{ref_load * 1000:.1f} ms (p99 {pct(probe, 0.99) * 1000:.1f} ms, {len(probe)} probes)"
    )
    print(
        f"  floor: the chain of three writes a job needs before its pods exist (job create, status "
        f"patch, pod create; bare client, no watch), under load: p50 {pct(chain, 0.5):.2f} s, "
        f"p95 {pct(chain, 0.95):.2f} s, p99 {pct(chain, 0.99):.2f} s ({len(chain)} chains)"
    )
    hdr = (
        f"  {'class':>5} {'what':>22} {'count':>11} {'p50 s':>8} {'p95 s':>8} {'p99 s':>8} "
        f"{'max s':>8} {'p99/idle':>9} {'p99/load':>9}"
    )
    print(hdr)
    for cls in ("high", "mid", "low"):
        r = summarize(world, created, shapes, cls, end=t1)
        for what, key in (
            ("admitted (status)", "admitted"),
            ("minSize pods", "min"),
            ("all first-grant pods", "all"),
            ("admitted -> all pods", "after"),
            ("minSize pods on nodes", "bound"),
        ):
            v = r[key]
            print(
                f"  {cls:>5} {what:>22} {len(v):>5}/{r['n']:<5} {pct(v, 0.5):>8.2f} "
                f"{pct(v, 0.95):>8.2f} {pct(v, 0.99):>8.2f} {max(v, default=float('nan')):>8.2f} "
                f"{pct(v, 0.99) / ref_idle:>8.0f}x {pct(v, 0.99) / ref_load:>8.0f}x"
            )
        w = r["waited"]
        if w:
            print(
                f"  {cls:>5} {'admitted, pods missing':>22} {len(w):>5}/{r['n']:<5} at the end "
                f"(created {min(w):.0f}..{max(w):.0f}s before; not in the rows above)"
            )
        never = r["n"] - len(r["admitted"])
        if never:
            print(f"  {cls:>5} {'never admitted':>22} {never:>5}/{r['n']:<5} (still waiting)")
    print("  goal: high-priority p99 (all first-grant pods) <= 2 s")
    high = summarize(world, created, shapes, "high", end=t1)["all"]
    if high and chain:
        print(
            f"  high-priority pods / floor: p50 {pct(high, 0.5) / pct(chain, 0.5):.2f}x, "
            f"p99 {pct(high, 0.99) / pct(chain, 0.99):.2f}x"
        )
    print(
        "  'on nodes': bound by kube-scheduler, so the pods of the jobs preempted for it are gone"
    )
    for what, lags in (
        ("deletions issued", world.to_terminating),
        ("pods removed", world.to_deleted),
    ):
        print(
            f"  shrunk/preempted jobs, currentSize drop -> {what}: {len(lags)} jobs, p50 "
            f"{pct(lags, 0.5):.2f} p95 {pct(lags, 0.95):.2f} p99 {pct(lags, 0.99):.2f} "
            f"max {max(lags, default=float('nan')):.2f} s"
        )
    print(
        f"  still holding pods at the end: {len(world.shrunk)} jobs not yet deleting, "
        f"{len(world.gone)} with pods terminating"
    )

    print("\n== operator process (/proc)")
    print(
        f"  peak RSS (VmHWM) {u1['VmHWM']:.0f} MiB, RSS now {u1['VmRSS']:.0f} MiB; CPU "
        f"{u1['cpu']:.1f}s total, {u1['cpu'] - u0['cpu']:.1f}s in the load window "
        f"({(u1['cpu'] - u0['cpu']) / (t1 - t0):.0%} of one core)"
    )
    dt = t1 - t0
    print(
        "  CPU seconds of the others in the same window (% of one core): "
        + ", ".join(f"{k} {v:.0f}s ({v / dt:.0%})" for k, v in others.items())
    )
    print(
        f"  lattice_jobs at the end: { {k: int(v) for k, v in m1['jobs'].items() if v} }; "
        f"capacity {m1['capacity']}"
    )
    if samples:
        print("  timeline (s since first arrival: jobs seen, passes, depth, RSS MiB, CPU %):")
        step = max(1, len(samples) // 12)
        prev_t, prev_cpu = t0, u0["cpu"]
        for i in range(0, len(samples), step):
            t, m, u = samples[i]
            # CPU share since the previous printed row (the first row: since the window start)
            cpu = (u["cpu"] - prev_cpu) / (t - prev_t) if t - prev_t >= 1.0 else float("nan")
            prev_t, prev_cpu = t, u["cpu"]
            print(
                f"    {t - t0:6.0f}s: jobs {sum(m['jobs'].values()):.0f} "
                f"{ {k: int(v) for k, v in m['jobs'].items() if v} }, passes "
                f"{m.get('passes', 0) - m0.get('passes', 0):.0f}, depth {m.get('depth', 0):.0f}, "
                f"RSS {u['VmRSS']:.0f}, CPU {cpu:.0%}"
            )


async def run_profile(a: argparse.Namespace, pid: int, out: Path) -> str:
    """py-spy the operator for ``--profile-seconds`` after ``--profile-delay``; top functions."""
    spy = a.py_spy or shutil.which("py-spy")
    if not spy or not is_file(spy):
        return "py-spy: not found (--py-spy)"
    await clock.sleep(a.profile_delay)
    raw = out.with_suffix(".raw")
    proc = await asyncio.create_subprocess_exec(
        spy,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(a.profile_seconds),
        "--rate",
        "50",
        "--format",
        "raw",
        "--output",
        str(raw),
        "--nonblocking",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode != 0 or not raw.exists():
        return f"py-spy failed rc={proc.returncode}: {err.decode()[-500:]}"
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    frame = re.compile(r"^(.*) \((.*?):\d+\)$")
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        names = []
        for f in stack.split(";"):
            mt = frame.match(f)
            names.append(f"{mt.group(1)} ({mt.group(2).split('site-packages/')[-1]})" if mt else f)
        if names:
            own[names[-1]] += n
        for nm in set(names):
            incl[nm] += n
    lines = [
        f"py-spy: {total} non-idle samples over {a.profile_seconds}s at 50 Hz = "
        f"{total / (50 * a.profile_seconds):.0%} busy (raw stacks: {raw})"
    ]
    lines.append("  top self:")
    lines += [f"    {n / total:6.1%} {k}" for k, n in own.most_common(a.profile_top)]
    lines.append("  top inclusive:")
    lines += [f"    {n / total:6.1%} {k}" for k, n in incl.most_common(a.profile_top * 2)]
    text = "\n".join(lines)
    write_text(out, text + "\n")
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memory", action="store_true", help="run the in-process memory section")
    ap.add_argument("--memory-child", choices=["list", "watch"], help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=9)
    # load
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--fill-jobs", type=int, default=96)
    ap.add_argument("--fill-min", type=int, default=2)
    ap.add_argument("--fill-max", type=int, default=8)
    ap.add_argument("--fill-timeout", type=float, default=300.0)
    ap.add_argument("--high-frac", type=float, default=0.05)
    ap.add_argument("--mid-frac", type=float, default=0.25)
    ap.add_argument("--concurrency", type=int, default=64, help="creates in flight at most")
    ap.add_argument("--settle", type=float, default=120.0, help="wait after the last arrival")
    ap.add_argument("--baseline-pods", type=int, default=50)
    ap.add_argument("--probe-interval", type=float, default=2.0)
    ap.add_argument("--sample", type=float, default=5.0, help="metrics sampling period")
    ap.add_argument("--cleanup-timeout", type=float, default=900.0)
    ap.add_argument("--no-pin", action="store_true", help="pin nothing")
    ap.add_argument("--no-pin-control-plane", action="store_true")
    ap.add_argument("--operator-arg", action="append", default=[])
    ap.add_argument("--profile-seconds", type=int, default=0, help="py-spy the operator (0: off)")
    ap.add_argument("--profile-delay", type=float, default=30.0)
    ap.add_argument("--profile-top", type=int, default=15)
    ap.add_argument("--py-spy", default="/tmp/pyspy/bin/py-spy")
    # memory
    ap.add_argument("--mem-jobs", type=int, default=10_000)
    ap.add_argument("--mem-pods", type=int, default=100_000)
    ap.add_argument("--mem-gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--mem-namespaces", type=int, default=20)
    ap.add_argument("--mem-modes", default="list,watch")
    ap.add_argument("--mem-no-services", action="store_true")
    a = ap.parse_args()
    if a.memory_child:
        asyncio.run(memory_child(a.memory_child, a))
    elif a.memory:
        memory_main(a)
    else:
        asyncio.run(load_main(a))


if __name__ == "__main__":
    main()
