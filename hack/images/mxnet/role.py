"""Entry point of the ``mxjob/mxnet`` image: one MXNet parameter-server role per pod.

MXNet 1.9.1 (the CPU wheel from PyPI) with its ps-lite transport. The role comes from the
``DMLC_*`` variables that the MXJob operator sets (``DMLC_ROLE``, ``DMLC_PS_ROOT_URI``,
``DMLC_PS_ROOT_PORT``, ``DMLC_NUM_SERVER``, ``DMLC_NUM_WORKER``):

- ``scheduler`` and ``server``: ``import mxnet`` runs the ps-lite node (MXNet starts it on import
  for those roles) and exits the process once every worker has finalized.
- ``worker``: a ``dist_sync`` kvstore; for a few rounds each worker pushes ``rank + round`` and
  pulls the merged value, which must be the sum over all workers (the server aggregates what
  every worker pushed). It prints what it pulled and exits 1 on a mismatch.
"""

from __future__ import annotations

import os
import sys


def worker(rounds: int = 5, shape: tuple[int, ...] = (4,)) -> int:
    import mxnet as mx

    kv = mx.kv.create(os.environ.get("MXNET_KVSTORE", "dist_sync"))
    rank, workers = kv.rank, kv.num_workers
    print(
        f"worker rank {rank} of {workers} connected to "
        f"{os.environ.get('DMLC_PS_ROOT_URI')}:{os.environ.get('DMLC_PS_ROOT_PORT')}",
        flush=True,
    )
    kv.init(0, mx.nd.zeros(shape))
    for r in range(rounds):
        kv.push(0, mx.nd.ones(shape) * (rank + r))
        out = mx.nd.zeros(shape)
        kv.pull(0, out=out)
        got = out.asnumpy().tolist()
        want = float(sum(k + r for k in range(workers)))
        print(f"worker rank {rank} round {r} pulled {got} expected {want}", flush=True)
        if any(abs(g - want) > 1e-6 for g in got):
            print(f"worker rank {rank}: mismatch", flush=True)
            return 1
    print(f"worker rank {rank} exchanged {rounds} rounds through the parameter server", flush=True)
    return 0


def main() -> int:
    role = os.environ.get("DMLC_ROLE", "")
    print(
        f"mxnet role {role or '(none)'}: scheduler "
        f"{os.environ.get('DMLC_PS_ROOT_URI')}:{os.environ.get('DMLC_PS_ROOT_PORT')}, "
        f"{os.environ.get('DMLC_NUM_SERVER')} server(s), {os.environ.get('DMLC_NUM_WORKER')} "
        "worker(s)",
        flush=True,
    )
    if role in ("scheduler", "server"):
        import mxnet  # noqa: F401  # runs the ps-lite node, then exits the process

        return 0
    if role == "worker":
        return worker()
    print("DMLC_ROLE must be scheduler, server or worker", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
