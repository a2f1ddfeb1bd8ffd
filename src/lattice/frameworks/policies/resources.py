"""A node's resources as the ML policies read them: GPUs and CPUs per node.

Contract (pure), the reading Trainer's plugins share (v2.1 onwards):
- ``node_resources(trainjob_resources, runtime_resources)``: the TrainJob's
  ``trainer.resourcesPerNode`` when it is set, else the runtime's trainer container resources
  (``{}`` when neither). The two are never merged for this count: a TrainJob that states its
  resources states them whole for the policies.
- ``gpus_per_node``: the quantity of the first resource whose name contains ``gpu`` (any vendor,
  any case) in ``requests``, else in ``limits``; 0 without one. Whole units, rounded up.
- ``cpus_per_node``: ``cpu`` in ``requests``, else (absent or zero) in ``limits``, in whole
  CPUs rounded up; 0 without one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from lattice.primitives.objects import Obj
from lattice.primitives.quantity import resource_units

__all__ = ["cpus_per_node", "gpus_per_node", "node_resources"]


def node_resources(
    trainjob_resources: Mapping[str, Any] | None, runtime_resources: Mapping[str, Any] | None
) -> Obj:
    chosen = trainjob_resources if trainjob_resources is not None else runtime_resources
    return {k: dict(v) for k, v in (chosen or {}).items() if isinstance(v, Mapping)}


def _gpus(values: Mapping[str, Any] | None) -> int:
    for name, value in (values or {}).items():
        if "gpu" in str(name).lower():
            return resource_units(str(name), value)
    return 0


def gpus_per_node(resources: Mapping[str, Any]) -> int:
    return _gpus(resources.get("requests")) or _gpus(resources.get("limits"))


def cpus_per_node(resources: Mapping[str, Any]) -> int:
    for kind in ("requests", "limits"):
        value = (resources.get(kind) or {}).get("cpu")
        millis = resource_units("cpu", value) if value is not None else 0
        if millis:
            return math.ceil(millis / 1000)
    return 0
