"""GPU nodes and their DaemonSet pods as the apiserver stores them (a mixin of ``MemWorld``).

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from lattice.primitives.objects import Obj
from schedload.common import GPU
from schedload.objects import fields_v1, managed, ts

__all__ = ["NodeObjects"]


class NodeObjects:
    """``node(n)`` and ``daemon_pod(n)`` of a world whose times are relative to ``now``."""

    now: datetime
    gpus: int

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
