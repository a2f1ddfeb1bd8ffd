"""The JAX policy: what ``jax.distributed.initialize()`` reads from the environment, as Trainer's
JAX plugin (v2.2-v2.3) sets it on the trainer container, one JAX process per pod.

Contract (pure):
- ``jax_env(processes=, process_id=, coordinator=, port=)``: by name, in Trainer's order:
  ``JAX_NUM_PROCESSES`` (the node count), ``JAX_PROCESS_ID`` (a value or a ``valueFrom``, the
  pod's completion index) and ``JAX_COORDINATOR_ADDRESS`` (``<host>:<port>``, the first node).
- ``PORT``: the coordinator's container port (Trainer's trainer port, 29500).
"""

from __future__ import annotations

from lattice.primitives.objects import Obj

__all__ = ["ENV_NAMES", "PORT", "jax_env"]

#: An env value: a literal, or a ``valueFrom`` source.
Value = str | Obj

PORT = 29500
ENV_NAMES = ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS")


def jax_env(*, processes: int, process_id: Value, coordinator: str, port: int) -> dict[str, Value]:
    return {
        "JAX_NUM_PROCESSES": str(processes),
        "JAX_PROCESS_ID": process_id,
        "JAX_COORDINATOR_ADDRESS": f"{coordinator}:{port}",
    }
