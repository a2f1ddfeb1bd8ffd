"""Issue 26's capacity invariant, as a property of the loop's node model and the core together.

Every live pod of ours counts against capacity on its node until it is gone, whatever its
job's stage: the core's persisted placements cover the pods of jobs that hold them, and every
other live pod (a Wrong job's, a terminating victim's, a stray) is charged to its node by
``node_views``. So a pass never puts a new pod on a node where live pods and the plan's pods
together exceed what the node has, except for the room of pods the pass itself stops: a
preemptor's pod waits for its victims to go, as with kube-scheduler's preemption.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.frameworks.base import OperatorContext
from lattice.runtime.projections import PodInfo, node_info, pod_info
from lattice.scheduler.core import JobView, PodDemand, Snapshot, Stage, resources, schedule
from lattice.scheduler.loop import node_views
from tests.unit.scheduler.builders import T0
from tests.unit.scheduler.test_loop_snapshot import node_obj, pod_obj

GPU = "nvidia.com/gpu"
CTX = OperatorContext(scheduling_unit=GPU)
NOW = T0 + timedelta(minutes=5)
NODES = ("n0", "n1", "n2", "n3")
GPUS = 8


def demand(gpus: int) -> PodDemand:
    return PodDemand(requests=resources({GPU: gpus, "cpu": 1000, "pods": 1}), units=gpus)


def view(name: str, *, size: int, gpus: int, priority: int, **kw: object) -> JobView:
    fields: dict[str, object] = {
        "key": f"TrainingJob/ns/{name}",
        "kind": "TrainingJob",
        "namespace": "ns",
        "name": name,
        "creation_time": T0,
        "priority": priority,
        "min_size": size,
        "max_size": size + 1,
        "replica_units": gpus,
        "replica_demand": demand(gpus),
    }
    fields.update(kw)
    return JobView(**fields)  # type: ignore[arg-type]


def live(name: str, node: str, gpus: int, *, deleting: bool = False) -> PodInfo:
    obj = pod_obj(
        name,
        job=name.rsplit("-", 1)[0],
        phase="Running",
        node=node,
        deleting=deleting,
        requests={GPU: str(gpus), "cpu": "1"},
    )
    return pod_info(obj)


running_jobs = st.lists(
    st.tuples(
        st.integers(1, 4),  # gpus per pod
        st.lists(st.sampled_from(NODES), min_size=1, max_size=3),  # its pods' nodes
        st.integers(0, 2),  # priority
    ),
    max_size=4,
)
strays = st.lists(  # live pods of ours that no placement covers: Wrong jobs', victims', strays
    st.tuples(st.sampled_from(NODES), st.integers(1, 6), st.booleans()), max_size=5
)
waiting_jobs = st.lists(
    st.tuples(st.integers(1, 4), st.integers(1, 8), st.integers(0, 3)), min_size=1, max_size=5
)


@settings(max_examples=300, deadline=None)
@given(running=running_jobs, stray=strays, waiting=waiting_jobs)
def test_no_new_pod_lands_where_live_pods_hold_the_room(
    running: list[tuple[int, list[str], int]],
    stray: list[tuple[str, int, bool]],
    waiting: list[tuple[int, int, int]],
) -> None:
    pods: list[PodInfo] = []
    placed: dict[tuple[str, str], str] = {}
    jobs: list[JobView] = []
    for j, (gpus, where, priority) in enumerate(running):
        name = f"run{j}"
        for i, node in enumerate(where):
            pods.append(live(f"{name}-{i}", node, gpus))
            placed[("ns", f"{name}-{i}")] = node
        jobs.append(
            replace(
                view(name, size=len(where), gpus=gpus, priority=priority),
                stage=Stage.RUNNING,
                current_size=len(where),
                placement=tuple(where),
                submit_time=T0,
                queued_time=T0,
                admitted_time=T0,
                service_updated_at=T0,
                last_resize_time=T0,
            )
        )
    for s, (node, gpus, deleting) in enumerate(stray):
        pods.append(live(f"stray{s}-0", node, gpus, deleting=deleting))
    for w, (size, gpus, priority) in enumerate(waiting):
        jobs.append(view(f"wait{w}", size=size, gpus=gpus, priority=priority))
    nodes = node_views(
        [node_info(node_obj(n, gpus=GPUS)) for n in NODES], ctx=CTX, pods=pods, placed=placed
    )
    plan = schedule(Snapshot(nodes=nodes, jobs=tuple(jobs)), NOW)

    held: dict[str, int] = defaultdict(int)  # live pods that no input placement covers
    for p in pods:
        if ("ns", p.name) not in placed:
            held[p.node_name or ""] += dict(p.requests).get(GPU, 0)
    used: dict[str, int] = defaultdict(int)
    new_on: set[str] = set()
    by_key = {j.key: j for j in jobs}
    for key, decision in plan.decisions.items():
        job = by_key[key]
        for i, node in enumerate(decision.placement):
            used[node] += job.replica_units
            if i >= len(job.placement) or job.placement[i] != node:
                new_on.add(node)
    for node in new_on:
        assert used[node] + held[node] <= GPUS, (node, used[node], held[node], plan.decisions)
