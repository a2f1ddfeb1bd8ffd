"""The memory section's world: TrainingJobs, their pods and Services, as the apiserver stores them.

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from _support import (
    JOB_LABEL,
)

from lattice.clock import RealClock
from lattice.primitives.objects import Obj
from schedload.common import GPU, PRIORITIES
from schedload.nodes import NodeObjects
from schedload.objects import fields_v1, managed, ts
from tests.support.builders import trainingjob

__all__ = ["MemWorld"]


@dataclass
class MemWorld(NodeObjects):
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
