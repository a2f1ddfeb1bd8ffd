"""The torch policy: torchrun's environment, rendezvous and command, shared by TrainingJob
(training-operator's PyTorchJob wiring) and TrainJob (Trainer's torch plugin).

Contract (pure):
- ``nnodes``: ``PET_NNODES``, ``<min>:<max>`` for an elastic job, else the node count.
- ``rendezvous(host, port, ctx)``: ``(backend, endpoint)``: ``etcd-v2`` at
  ``RDZV_SERVICE_ENDPOINT[:RDZV_SERVICE_PORT]`` when the operator is configured with an ``etcd``
  rendezvous service (``ctx``; None: never), otherwise ``c10d`` at ``<host>:<port>`` (the first
  node hosts the store).
- ``torch_env``: every variable of the policy by name: ``MASTER_ADDR``/``MASTER_PORT``
  (torch.distributed's ``env://``), ``PET_NNODES``, ``PET_NPROC_PER_NODE`` (when given),
  ``PET_NODE_RANK`` (a value or a ``valueFrom``), ``PET_MASTER_ADDR``/``PET_MASTER_PORT``,
  ``PET_RDZV_BACKEND``/``PET_RDZV_ENDPOINT``/``PET_RDZV_ID`` (with a rendezvous) and
  ``PET_MAX_RESTARTS`` (when given). A kind ``pick``s the names it sets, in its upstream's order.
- ``DEFAULT_RESTARTS``: ``PET_MAX_RESTARTS=100``, added only where the user did not set it (a
  shrink fails the survivors' workers once, which torchrun must survive).
- ``nproc_per_node(value, resources)``: ``PET_NPROC_PER_NODE`` as Trainer v2.1-v2.3 resolve it
  over the node's resources (``resources.node_resources``): an integer passes through; ``cpu``,
  and ``auto`` on a node without a GPU resource, become the node's CPU count (at least 1, also
  when no resources are stated); ``auto`` with a GPU resource and ``gpu`` pass through, for
  torchrun to count the devices the container sees (the GPU count).
- ``torchrun_command``: the user's command run by torchrun with the flags reading the env above;
  a command that already starts torchrun (``torchrun`` or ``python -m torch.distributed.run``)
  is kept as is.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lattice.frameworks.base import OperatorContext
from lattice.frameworks.policies.resources import cpus_per_node, gpus_per_node
from lattice.primitives.objects import Obj

__all__ = [
    "DEFAULT_MAX_RESTARTS",
    "DEFAULT_RESTARTS",
    "Rendezvous",
    "nnodes",
    "nproc_per_node",
    "pick",
    "rendezvous",
    "torch_env",
    "torchrun_command",
]

#: An env value: a literal, or a ``valueFrom`` source.
Value = str | Obj

#: torchrun restarts per job, unless the user sets ``PET_MAX_RESTARTS``.
DEFAULT_MAX_RESTARTS = 100
DEFAULT_RESTARTS = ("PET_MAX_RESTARTS", str(DEFAULT_MAX_RESTARTS))

_PYTHON = re.compile(r"^python[0-9.]*$")
_TORCHRUN_FLAGS = (
    "--nnodes=$(PET_NNODES)",
    "--rdzv_backend=$(PET_RDZV_BACKEND)",
    "--rdzv_endpoint=$(PET_RDZV_ENDPOINT)",
    "--rdzv_id=$(PET_RDZV_ID)",
    "--max_restarts=$(PET_MAX_RESTARTS)",
    "--no_python",
)


@dataclass(frozen=True, slots=True)
class Rendezvous:
    """torchrun's rendezvous: ``PET_RDZV_BACKEND``, ``PET_RDZV_ENDPOINT``, ``PET_RDZV_ID``."""

    backend: str
    endpoint: str
    id: str


def nnodes(low: int, high: int, *, elastic: bool) -> str:
    return f"{low}:{high}" if elastic else str(high)


def nproc_per_node(value: int | str, resources: Mapping[str, Any]) -> str:
    text = str(value)
    if text == "cpu" or (text == "auto" and not gpus_per_node(resources)):
        return str(max(1, cpus_per_node(resources)))
    return text


def rendezvous(host: str, port: int, ctx: OperatorContext | None) -> tuple[str, str]:
    if ctx is not None and ctx.rdzv_backend in ("etcd", "etcd-v2") and ctx.rdzv_service_endpoint:
        endpoint = ctx.rdzv_service_endpoint
        if ctx.rdzv_service_port:
            endpoint += f":{ctx.rdzv_service_port}"
        return "etcd-v2", endpoint
    return "c10d", f"{host}:{port}"


def torch_env(
    *,
    nodes: str,
    node_rank: Value,
    master_addr: str,
    master_port: int,
    rdzv: Rendezvous | None,
    nproc_per_node: str | None = None,
    max_restarts: int | None = None,
) -> dict[str, Value]:
    env: dict[str, Value] = {"PET_NNODES": nodes}
    if nproc_per_node is not None:
        env["PET_NPROC_PER_NODE"] = nproc_per_node
    env["PET_NODE_RANK"] = node_rank
    env.update(PET_MASTER_ADDR=master_addr, PET_MASTER_PORT=str(master_port))
    env.update(MASTER_ADDR=master_addr, MASTER_PORT=str(master_port))
    if rdzv is not None:
        env.update(
            PET_RDZV_BACKEND=rdzv.backend, PET_RDZV_ENDPOINT=rdzv.endpoint, PET_RDZV_ID=rdzv.id
        )
    if max_restarts is not None:
        env["PET_MAX_RESTARTS"] = str(max_restarts)
    return env


def pick(env: Mapping[str, Value], names: Iterable[str]) -> list[tuple[str, Value]]:
    """The ``names`` that ``env`` has, in the order given."""
    return [(name, env[name]) for name in names if name in env]


def torchrun_command(command: Sequence[str]) -> list[str]:
    """``command`` run by torchrun (see the module docstring)."""
    cmd = [str(c) for c in command]
    if not cmd:
        return cmd
    head = posixpath.basename(cmd[0])
    if head == "torchrun":
        return cmd
    if _PYTHON.match(head):
        if cmd[1:3] in (["-m", "torch.distributed.run"], ["-m", "torch.distributed.launch"]):
            return cmd
        interpreter = cmd[0]
    else:
        interpreter = "python"
    return [interpreter, "-m", "torch.distributed.run", *_TORCHRUN_FLAGS, *cmd]
