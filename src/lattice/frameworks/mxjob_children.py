"""MXJob's children as training-operator v1.7 builds them: per replica type (Scheduler,
Server, Worker, TunerTracker, TunerServer, Tuner) its pods and one headless Service per pod, with
the MXNet policy (``lattice.frameworks.policies.mxnet``) applied.

Contract (pure; the rules in full are in ``lattice.frameworks.mxjob``):
- ``replica_types``: the job's replica types in the canonical order; ``replicas_of`` a type's
  replica count.
- ``defaulted_containers``: the template's containers with ``mxjob-port: 9091`` added to the
  ``mxnet`` container (``mxnet_index``; the first when none is named so) when missing, as
  v1.7's defaulting does; ``mxnet_port`` that port.
- ``mx_config``: ``MX_CONFIG`` of one pod; ``children``: every pod and Service at any size > 0.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from lattice.api.constants import (
    LABEL_JOB_NAME,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    MX_REPLICA_TYPES,
    MXJOB,
    REPLICA_SERVER,
)
from lattice.api.mxjob import MXJob, MXReplicaSpec
from lattice.frameworks.base import MANAGED_LABEL, Children, OperatorContext
from lattice.frameworks.manifests import headless_service, pod_manifest, template_containers
from lattice.frameworks.naming import child_name, job_owner, replica_labels
from lattice.frameworks.podspec import pod_restart_policy, with_env, with_placement
from lattice.frameworks.policies import mxnet
from lattice.primitives.objects import Obj

__all__ = [
    "CONTAINER_NAME",
    "DEFAULT_PORT",
    "OPERATOR_NAME",
    "PORT_NAME",
    "TUNER_SERVER_KEY",
    "children",
    "defaulted_containers",
    "mx_config",
    "mxnet_index",
    "mxnet_port",
    "replica_types",
    "replicas_of",
]

#: ``training.kubeflow.org/operator-name`` of MXJob children (v1.7's controller name).
OPERATOR_NAME = "mxjob-controller"
CONTAINER_NAME = "mxnet"
PORT_NAME = "mxjob-port"
DEFAULT_PORT = 9091
#: Template annotation copied into ``MX_CONFIG.labels`` (TVM auto-tuning).
TUNER_SERVER_KEY = "tuner-server-key"


def replica_types(job: MXJob) -> list[tuple[str, MXReplicaSpec]]:
    """The job's replica types in the canonical order."""
    specs = job.spec.mx_replica_specs
    return [(t, specs[t]) for t in MX_REPLICA_TYPES if t in specs]


def replicas_of(spec: MXReplicaSpec) -> int:
    return spec.replicas or 0


def mxnet_index(containers: Sequence[Mapping[str, Any]]) -> int:
    """Index of the ``mxnet`` container (0 when none: where v1.7 defaults the port)."""
    for i, container in enumerate(containers):
        if container.get("name") == CONTAINER_NAME:
            return i
    return 0


def defaulted_containers(spec: MXReplicaSpec) -> list[Obj]:
    """The template's containers with ``mxjob-port: 9091`` added to ``mxnet`` when missing."""
    containers = copy.deepcopy(template_containers(spec.template))
    if not containers:
        return containers
    main = containers[mxnet_index(containers)]
    ports = list(main.get("ports") or ())
    if not any(p.get("name") == PORT_NAME for p in ports):
        main["ports"] = [*ports, {"name": PORT_NAME, "containerPort": DEFAULT_PORT}]
    return containers


def mxnet_port(spec: MXReplicaSpec) -> int:
    containers = defaulted_containers(spec)
    for port in containers[mxnet_index(containers)].get("ports") or ():
        if port.get("name") == PORT_NAME:
            return int(port["containerPort"])
    return DEFAULT_PORT  # unreachable after defaulting


def mx_config(job: MXJob, replica_type: str, index: int) -> Obj:
    """``MX_CONFIG`` of pod ``index`` of ``replica_type`` (serialise with ``manifests.go_json``)."""
    return {**_cluster_spec(job), "task": {"type": replica_type.lower(), "index": index}}


def _cluster_spec(job: MXJob) -> Obj:
    """The pod-independent part of ``MX_CONFIG`` (``mxnet.cluster_spec``)."""
    name = job.metadata.name or ""
    replicas = []
    for rtype, spec in replica_types(job):
        annotations = (spec.template.get("metadata") or {}).get("annotations") or {}
        hosts = tuple(child_name(name, rtype, i) for i in range(replicas_of(spec)))
        key = str(annotations.get(TUNER_SERVER_KEY, ""))
        replicas.append(mxnet.ReplicaHosts(rtype, hosts, mxnet_port(spec), key))
    return mxnet.cluster_spec(replicas)


def children(job: MXJob, *, size: int, ctx: OperatorContext) -> Children:
    """Every pod and Service at ``size`` (none at 0; see ``lattice.frameworks.mxjob``)."""
    if size <= 0:
        return Children()
    name, namespace = job.metadata.name or "", job.metadata.namespace
    owner = job_owner(MXJOB, job.metadata)
    shared = _cluster_spec(job)
    pods: list[Obj] = []
    services: list[Obj] = []
    for rtype, spec in replica_types(job):
        containers = defaulted_containers(spec)
        ports: dict[str, int] = {}
        for port in containers[mxnet_index(containers)].get("ports") or ():
            if isinstance(port.get("containerPort"), int):
                ports[str(port.get("name") or "")] = port["containerPort"]
        service_ports = [{"name": n, "port": p} if n else {"port": p} for n, p in ports.items()]
        base = dict(spec.template.get("spec") or {})
        policy = spec.restart_policy.value if spec.restart_policy else "Never"
        base["restartPolicy"] = pod_restart_policy(policy)
        base = with_placement(base, ctx)
        for index in range(replicas_of(spec)):
            pod_name = child_name(name, rtype, index)
            env = mxnet.mx_env(shared, rtype, index)
            labels = replica_labels(
                job_name=name,
                replica_type=rtype,
                index=index,
                operator_name=OPERATOR_NAME,
                master=rtype == REPLICA_SERVER,
            )
            pod_spec = {**base, "containers": [with_env(c, env) for c in containers]}
            pods.append(
                pod_manifest(
                    name=pod_name,
                    namespace=namespace,
                    template=spec.template,
                    labels=labels,
                    owner=owner,
                    spec=pod_spec,
                )
            )
            selector = {
                LABEL_OPERATOR_NAME: OPERATOR_NAME,
                LABEL_JOB_NAME: name,
                LABEL_REPLICA_TYPE: rtype.lower(),
                LABEL_REPLICA_INDEX: str(index),
            }
            services.append(
                headless_service(
                    name=pod_name,
                    namespace=namespace,
                    labels={**selector, MANAGED_LABEL: "true"},
                    selector=selector,
                    ports=service_ports,
                    owner=owner,
                )
            )
    return Children(pods=tuple(pods), services=tuple(services))
