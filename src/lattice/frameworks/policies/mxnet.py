"""The MXNet policy: ``MX_CONFIG`` and the ``DMLC_*`` parameter-server environment, as
training-operator v1.7 wires an MXJob's scheduler, servers and workers.

Contract (pure):
- ``cluster_spec``: the pod-independent part of ``MX_CONFIG``: ``cluster`` (per replica type in
  lower case, sorted, its pods' ``{url, port}``) and ``labels`` (per type, its tuner-server key).
- ``mx_env(cluster, replica_type, index)``: every variable of one pod: ``MX_CONFIG`` (Go-marshalled
  JSON with the pod's ``task {type, index}``), ``DMLC_PS_ROOT_PORT``/``DMLC_PS_ROOT_URI`` (the
  first scheduler, or 0/""), ``DMLC_NUM_SERVER``, ``DMLC_NUM_WORKER``, ``DMLC_ROLE`` (the type in
  lower case), ``DMLC_USE_KUBERNETES=1``, and for workers ``DMLC_WORKER_ID=<index>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lattice.api.constants import REPLICA_SCHEDULER, REPLICA_SERVER, REPLICA_WORKER
from lattice.frameworks.manifests import go_json
from lattice.primitives.objects import Obj

__all__ = ["ReplicaHosts", "cluster_spec", "mx_env"]


@dataclass(frozen=True, slots=True)
class ReplicaHosts:
    """One replica type's pods as MXNet addresses them."""

    replica_type: str
    hosts: tuple[str, ...]
    port: int
    tuner_key: str = ""


def cluster_spec(replicas: Sequence[ReplicaHosts]) -> Obj:
    cluster: Obj = {}
    labels: Obj = {}
    for r in sorted(replicas, key=lambda r: r.replica_type.lower()):
        cluster[r.replica_type.lower()] = [{"url": h, "port": r.port} for h in r.hosts]
        labels[r.replica_type.lower()] = r.tuner_key
    return {"cluster": cluster, "labels": labels}


def mx_env(shared: Obj, replica_type: str, index: int) -> list[tuple[str, str]]:
    """Every variable of pod ``index`` of ``replica_type``; ``shared`` is ``cluster_spec``."""
    cluster = shared["cluster"]
    root = (cluster.get(REPLICA_SCHEDULER.lower()) or [{"url": "", "port": 0}])[0]
    task = {"type": replica_type.lower(), "index": index}
    env = [
        ("MX_CONFIG", go_json({**shared, "task": task})),
        ("DMLC_PS_ROOT_PORT", str(root["port"])),
        ("DMLC_PS_ROOT_URI", root["url"]),
        ("DMLC_NUM_SERVER", str(len(cluster.get(REPLICA_SERVER.lower(), ())))),
        ("DMLC_NUM_WORKER", str(len(cluster.get(REPLICA_WORKER.lower(), ())))),
        ("DMLC_ROLE", replica_type.lower()),
        ("DMLC_USE_KUBERNETES", "1"),
    ]
    if replica_type == REPLICA_WORKER:
        env.append(("DMLC_WORKER_ID", str(index)))
    return env
