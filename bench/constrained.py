"""Constrained snapshots for ``bench_scheduler.py``: pools, labels, taints, multi-resource pods and
persisted placements; not a bench itself.

:func:`constrained_snapshot` turns the unconstrained bench's jobs (``bench_scheduler.make_job``,
the same kinds, sizes and priorities) into jobs whose pods carry requests and constraints, on
nodes in five pools:

- ``a100`` (30 % of the nodes) and ``v100`` (30 %): 8 GPUs, tainted
  ``nvidia.com/gpu=present:NoSchedule`` as GKE taints GPU pools; ``t4`` (15 %): 4 GPUs,
  untainted; ``cpu`` (20 %): no GPU; ``infra`` (5 %): tainted ``dedicated=infra``, which only
  2 % of the jobs tolerate. Every node has a ``zone`` label (3 zones); 20 % of the nodes are
  partly used by foreign pods (GPUs, cpu and memory), 1 % are cordoned.
- A GPU replica asks for its GPUs, 8 cores and 64 GiB per GPU and a pod slot, and tolerates
  the GPU taint (the ExtendedResourceToleration plugin); 10 % of the jobs are CPU-only (4
  cores, 16 GiB per replica, 0 units, pinned to ``pool=cpu``). Fixed pods (launchers, MXNet
  schedulers and servers) ask for 1-2 cores and 4 GiB, plus their GPU if they have one.
- Constraints: 40 % of the GPU jobs select a pool (``nodeSelector``), 20 % have a required
  node affinity (``gpu In (a100, v100)``, ``zone NotIn (z2)``), the rest none.
- After one pass is applied, every running job gets a persisted placement: the core's own
  when it gave one, else a seeded random fit honouring constraints and free capacity (up to
  64 nodes tried per pod); a running job that does not fit that way is put back to waiting.
  3 % of the running jobs are observed Pending and 0.5 % have a refused node.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from lattice.scheduler.core import (
    Constraint,
    JobView,
    NodeView,
    PodDemand,
    Requirement,
    SchedulerConfig,
    Snapshot,
    Stage,
    Strategy,
    Taint,
    Toleration,
    apply,
    resources,
    schedule,
)

__all__ = ["constrained_burst", "constrained_snapshot"]

GI = 1024**3
GPU = "nvidia.com/gpu"
GPU_TAINT = Taint(key=GPU, value="present", effect="NoSchedule")
INFRA_TAINT = Taint(key="dedicated", value="infra", effect="NoSchedule")
GPU_TOLERATION = Toleration(key=GPU, operator="Exists", effect="NoSchedule")
INFRA_TOLERATION = Toleration(key="dedicated", value="infra", effect="NoSchedule")
# name, share of nodes, GPUs, cores, GiB, taints
POOLS = (
    ("a100", 0.30, 8, 96, 1024, (GPU_TAINT,)),
    ("v100", 0.30, 8, 64, 512, (GPU_TAINT,)),
    ("t4", 0.15, 4, 32, 256, ()),
    ("cpu", 0.20, 0, 64, 256, ()),
    ("infra", 0.05, 0, 16, 64, (INFRA_TAINT,)),
)
AFFINITY = (
    (
        Requirement(key="gpu", operator="In", values=("a100", "v100")),
        Requirement(key="zone", operator="NotIn", values=("z2",)),
    ),
)


def make_nodes(rng: random.Random, count: int) -> tuple[NodeView, ...]:
    """``count`` nodes in the pools above (see the module docstring)."""
    nodes: list[NodeView] = []
    for name, share, gpus, cores, gib, taints in POOLS:
        size = round(count * share) if name != POOLS[-1][0] else count - len(nodes)
        for i in range(size):
            zone = f"z{i % 3}"
            labels: tuple[tuple[str, str], ...] = (("pool", name), ("zone", zone))
            if gpus:
                labels = (("gpu", name), *labels)
            used = rng.random() if rng.random() < 0.2 else 0.0
            free_gpus = gpus - round(gpus * used)
            free = resources(
                {
                    GPU: free_gpus,
                    "cpu": round(cores * 1000 * (1 - used)),
                    "memory": round(gib * GI * (1 - used)),
                    "pods": 110 - round(30 * used),
                }
            )
            nodes.append(
                NodeView(
                    f"{name}-{i:05d}",
                    free_gpus,
                    free=free,
                    labels=labels,
                    taints=taints,
                    schedulable=rng.random() >= 0.01,
                )
            )
    return tuple(nodes)


def _gpu_pod(units: int, constraint: Constraint) -> PodDemand:
    requests = resources({GPU: units, "cpu": 8000 * units, "memory": 64 * GI * units, "pods": 1})
    return PodDemand(requests=requests, constraint=constraint, units=units)


def constrain(rng: random.Random, view: JobView) -> JobView:
    """``view`` with pod demands and constraints (see the module docstring)."""
    extra = (INFRA_TOLERATION,) if rng.random() < 0.02 else ()
    if rng.random() < 0.1:
        cpu_only = Constraint(node_selector=(("pool", "cpu"),), tolerations=extra)
        pod = resources({"cpu": 4000, "memory": 16 * GI, "pods": 1})
        fixed = tuple(PodDemand(requests=pod, constraint=cpu_only) for _ in view.fixed_pods)
        return replace(
            view,
            fixed_pods=(0,) * len(view.fixed_pods),
            replica_units=0,
            fixed_demands=fixed,
            replica_demand=PodDemand(requests=pod, constraint=cpu_only),
        )
    tolerations = (GPU_TOLERATION, *extra)
    r = rng.random()
    if r < 0.4:
        pool = rng.choices(("a100", "v100", "t4"), weights=(3, 3, 1))[0]
        constraint = Constraint(node_selector=(("pool", pool),), tolerations=tolerations)
    elif r < 0.6:
        constraint = Constraint(terms=AFFINITY, tolerations=tolerations)
    else:
        constraint = Constraint(tolerations=tolerations)
    if view.replica_units > 4 and constraint.node_selector == (("pool", "t4"),):
        constraint = Constraint(node_selector=(("pool", "a100"),), tolerations=tolerations)
    side = resources({"cpu": rng.choice((1000, 2000)), "memory": 4 * GI, "pods": 1})
    fixed = tuple(
        _gpu_pod(units, constraint) if units else PodDemand(requests=side)
        for units in view.fixed_pods
    )
    return replace(
        view, fixed_demands=fixed, replica_demand=_gpu_pod(view.replica_units, constraint)
    )


class _Fitter:
    """Seeded random fit of pods on free capacity (placements the bench persists)."""

    def __init__(self, nodes: Sequence[NodeView], rng: random.Random) -> None:
        self.nodes = nodes
        self.free = [dict(n.free) for n in nodes]
        self.rng = rng
        self.admitted: dict[Constraint, list[int]] = {}

    def candidates(self, constraint: Constraint) -> list[int]:
        found = self.admitted.get(constraint)
        if found is None:
            found = [
                i
                for i, n in enumerate(self.nodes)
                if n.schedulable
                and constraint.admits(name=n.name, labels=dict(n.labels), taints=n.taints)
            ]
            self.admitted[constraint] = found
        return found

    def take(self, index: int, pod: PodDemand, sign: int) -> None:
        free = self.free[index]
        for name, qty in pod.requests:
            free[name] = free.get(name, 0) - sign * qty

    def place(self, view: JobView) -> tuple[str, ...] | None:
        taken: list[tuple[int, PodDemand]] = []
        for index in range(view.current_size):
            pod = view.pod_demand(index)
            options = self.candidates(pod.constraint)
            tries = self.rng.sample(options, min(64, len(options)))
            node = next(
                (i for i in tries if all(self.free[i].get(k, 0) >= q for k, q in pod.requests)),
                None,
            )
            if node is None:
                for i, p in taken:
                    self.take(i, p, -1)
                return None
            self.take(node, pod, 1)
            taken.append((node, pod))
        return tuple(self.nodes[i].name for i, _ in taken)


def _placed(snap: Snapshot, rng: random.Random, *, pending_at: datetime) -> Snapshot:
    fitter = _Fitter(snap.nodes, rng)
    jobs: list[JobView] = []
    names = {n.name: i for i, n in enumerate(snap.nodes)}
    running = [j for j in snap.jobs if j.stage == Stage.RUNNING and j.current_size]
    kept = {j.key for j in running if len(j.placement) == j.current_size and all(j.placement)}
    for job in running:  # the core's own placements first: the bench's fit goes around them
        if job.key in kept:
            for index, node in enumerate(job.placement):
                fitter.take(names[node], job.pod_demand(index), 1)
    for job in snap.jobs:
        if job.stage != Stage.RUNNING or not job.current_size or job.key in kept:
            jobs.append(job)
            continue
        placement = fitter.place(job)
        if placement is None:
            jobs.append(
                replace(job, stage=Stage.WAITING, current_size=0, admitted_time=None, placement=())
            )
            continue
        pending = pending_at if rng.random() < 0.03 else None
        refused = (placement[-1],) if rng.random() < 0.005 else ()
        jobs.append(replace(job, placement=placement, pending_since=pending, refused_nodes=refused))
    return replace(snap, jobs=tuple(jobs))


def constrained_snapshot(
    *,
    jobs: int,
    nodes: int,
    strategy: Strategy,
    seed: int,
    make_job: Callable[[random.Random, int], JobView],
    at: datetime,
    pending_at: datetime,
) -> Snapshot:
    """A constrained snapshot after one applied pass at ``at`` (see the module docstring);
    the running jobs observed Pending have been since ``pending_at``."""
    rng = random.Random(seed)
    snap = Snapshot(
        nodes=make_nodes(rng, nodes),
        jobs=tuple(constrain(rng, make_job(rng, i)) for i in range(jobs)),
        config=SchedulerConfig(strategy=strategy),
    )
    snap = apply(snap, schedule(snap, at))
    return _placed(snap, rng, pending_at=pending_at)


def constrained_burst(snap: Snapshot, count: int, *, at: datetime) -> Snapshot:
    """``count`` high-priority 8-GPU gangs pinned to ``a100`` arrive (preemption)."""
    pinned = Constraint(node_selector=(("pool", "a100"),), tolerations=(GPU_TOLERATION,))
    launcher = PodDemand(requests=resources({"cpu": 1000, "memory": 4 * GI, "pods": 1}))
    new = tuple(
        JobView(
            key=f"MPIJob/urgent/u-{i:04d}",
            kind="MPIJob",
            namespace="urgent",
            name=f"u-{i:04d}",
            creation_time=at + timedelta(seconds=i),
            priority=100,
            min_size=9,
            max_size=9,
            fixed_pods=(0,),
            replica_units=8,
            fixed_demands=(launcher,),
            replica_demand=_gpu_pod(8, pinned),
        )
        for i in range(count)
    )
    return replace(snap, jobs=snap.jobs + new)
