"""Shared builders of the objects tests and benches feed the operator: jobs, pods and nodes.

Contract:
- ``trainingjob`` is a user's TrainingJob manifest: one ``trainingjob`` container asking for
  ``gpus`` ``nvidia.com/gpu`` (requests = limits; none when ``gpus`` is 0), the given elastic
  range and priority. The e2e tests and the load bench submit exactly this.
- ``pod`` is a raw pod as the apiserver stores it after scheduling (node, phase, Ready), with the
  training-operator labels and a controller ownerReference when it belongs to a job.
- ``node`` is a raw node with ``gpus`` allocatable GPUs (``None``: no GPU resource), Ready
  unless told otherwise, optional taints and labels.
- ``FakePod``/``FakeContainer`` are ``lattice.frameworks.base.PodView``/``ContainerView``
  values for the plugins' pure status rules, without any raw object behind them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice.primitives.objects import Obj

__all__ = ["GPU", "FakeContainer", "FakePod", "node", "pod", "trainingjob"]

GPU = "nvidia.com/gpu"


def trainingjob(
    name: str,
    *,
    min_size: int = 1,
    max_size: int = 1,
    priority: int = 0,
    gpus: int = 1,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    pod_annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
) -> Obj:
    """A TrainingJob manifest (see the module docstring); ``annotations`` go on the job,
    ``pod_annotations`` on its pod template."""
    resources = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}} if gpus else {}
    pod_spec: Obj = {
        "containers": [
            {
                "name": "trainingjob",
                "image": "example.com/train:1",
                "command": ["python", "main.py"],
                "resources": resources,
            }
        ]
    }
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if affinity:
        pod_spec["affinity"] = dict(affinity)
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    template: Obj = {"spec": pod_spec}
    if pod_annotations:
        template["metadata"] = {"annotations": dict(pod_annotations)}
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": meta,
        "spec": {
            "minSize": min_size,
            "maxSize": max_size,
            "priority": priority,
            "replicaSpecs": {"template": template},
        },
    }


def pod(
    name: str,
    *,
    namespace: str = "ns",
    job: str | None = None,
    kind: str = "TrainingJob",
    replica_type: str = "worker",
    index: int = 0,
    node_name: str | None = "node-0",
    phase: str = "Running",
    requests: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """A raw pod; a child of ``kind``/``job`` when ``job`` is given (see the module docstring)."""
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if job is not None:
        meta["labels"].update(
            {
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/replica-type": replica_type,
                "training.kubeflow.org/replica-index": str(index),
                "training.kubeflow.org/operator-name": "lattice",
                "lattice.breezeml.ai/managed": "true",
            }
        )
        meta["ownerReferences"] = [
            {
                "apiVersion": "breezeml.ai/v1",
                "kind": kind,
                "name": job,
                "uid": f"uid-{job}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    spec: Obj = {"containers": [{"name": "main", "resources": {"requests": dict(requests or {})}}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    ready = "True" if phase == "Running" else "False"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]},
    }


def node(
    name: str,
    *,
    gpus: int | None = 8,
    ready: bool = True,
    unschedulable: bool = False,
    taints: Sequence[tuple[str, str]] = (),
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """A raw node (see the module docstring); ``taints`` are (key, effect) pairs."""
    allocatable: Obj = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    if gpus is not None:
        allocatable[GPU] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "unschedulable": unschedulable,
            "taints": [{"key": k, "effect": e} for k, e in taints],
        },
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@dataclass(frozen=True, slots=True)
class FakeContainer:
    """A ``ContainerView``: one container's state and exit codes."""

    name: str = "main"
    restart_count: int = 0
    state: str = "running"
    reason: str | None = None
    exit_code: int | None = None
    last_exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class FakePod:
    """A ``PodView``: what the plugins' status rules read of one child pod."""

    name: str
    phase: str
    reason: str | None = None
    disruption: str | None = None
    ready: bool = False
    node_name: str | None = None
    replica_type: str | None = None
    replica_index: int | None = None
    containers: tuple[FakeContainer, ...] = ()
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
