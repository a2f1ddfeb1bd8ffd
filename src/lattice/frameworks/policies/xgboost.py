"""The XGBoost policy: the ``DMLC_*`` environment of XGBoost's collective (Rabit) tracker, as
Trainer's XGBoost plugin (v2.2-v2.3) sets it on the trainer container.

Contract (pure):
- ``workers(nodes=, gpus=)``: ``DMLC_NUM_WORKER``: one worker per GPU of a node (``gpus`` from
  ``resources.gpus_per_node``), one per node without a GPU, times the node count.
- ``xgboost_env(tracker=, port=, task_id=, workers=)``: by name, in Trainer's order:
  ``DMLC_TRACKER_URI`` (the first node's host, which runs the tracker), ``DMLC_TRACKER_PORT``,
  ``DMLC_TASK_ID`` (a value or a ``valueFrom``: the pod's completion index) and
  ``DMLC_NUM_WORKER``.
- ``RESERVED_ENV``: the names above, sorted; a TrainJob's ``trainer.env`` must not set them.
- ``PORT``: the tracker's container port (Trainer's trainer port, 29500).
"""

from __future__ import annotations

from lattice.primitives.objects import Obj

__all__ = ["PORT", "RESERVED_ENV", "workers", "xgboost_env"]

#: An env value: a literal, or a ``valueFrom`` source.
Value = str | Obj

PORT = 29500
RESERVED_ENV = ("DMLC_NUM_WORKER", "DMLC_TASK_ID", "DMLC_TRACKER_PORT", "DMLC_TRACKER_URI")


def workers(*, nodes: int, gpus: int) -> int:
    return nodes * max(gpus, 1)


def xgboost_env(*, tracker: str, port: int, task_id: Value, workers: int) -> dict[str, Value]:
    return {
        "DMLC_TRACKER_URI": tracker,
        "DMLC_TRACKER_PORT": str(port),
        "DMLC_TASK_ID": task_id,
        "DMLC_NUM_WORKER": str(workers),
    }
