"""An elastic data-parallel training loop for ``breezeml/lattice-resnet`` on real nodes.

Run by torchrun (``injectLattice: true`` wraps ``python -u main.py`` in
``python -m torch.distributed.run`` with the c10d rendezvous), once per rendezvous round: when
the operator shrinks or grows the job, torchrun restarts this program at the new world size.

Each step trains a small residual MLP on a deterministic synthetic batch, averages gradients over
the process group (gloo), and then rank 0 writes a checkpoint (model, optimizer, step) atomically.
A restarted round resumes from the last checkpoint, so a step is either committed or redone, never
lost. Rank 0 prints one line per committed step::

    step=<n> world_size=<w> rank=0 loss=<x>

and ``resumed step=<n> world_size=<w>`` when a round starts. Training ends after ``--steps``
steps, or earlier once the file ``<checkpoint dir>/stop`` exists (rank 0 decides; every rank
follows through a broadcast).

Environment: ``CHECKPOINT_DIR`` (default ``/checkpoint``, shared by every pod of the job),
``STEP_SECONDS`` (default 0.2: the simulated cost of a step).
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(x)))


def model(width: int = 32, depth: int = 2) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*(Block(width) for _ in range(depth)), nn.Linear(width, 1))


def batch(step: int, rank: int, world: int, width: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(64 // world or 1, width, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100000)
    args = parser.parse_args()
    ckpt_dir = os.environ.get("CHECKPOINT_DIR", "/checkpoint")
    step_seconds = float(os.environ.get("STEP_SECONDS", "0.2"))
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt, stop = os.path.join(ckpt_dir, "ckpt.pt"), os.path.join(ckpt_dir, "stop")

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    step = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = int(state["step"])
    if rank == 0:
        print(f"resumed step={step} world_size={world}", flush=True)

    flag = torch.zeros(1)
    while step < args.steps:
        x, y = batch(step, rank, world)
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        for p in net.parameters():
            assert p.grad is not None
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        time.sleep(step_seconds)
        step += 1
        if rank == 0:
            tmp = ckpt + ".tmp"
            torch.save(
                {"model": net.state_dict(), "optimizer": opt.state_dict(), "step": step}, tmp
            )
            os.replace(tmp, ckpt)
            print(f"step={step} world_size={world} rank=0 loss={loss.item():.5f}", flush=True)
            flag[0] = 1.0 if os.path.exists(stop) else 0.0
        dist.broadcast(flag, src=0)
        if flag[0] > 0:
            break
    if rank == 0:
        print(f"done step={step} world_size={world}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
