"""Gangs the greedy orders cannot pack: the bounded search finds a placement when one exists."""

from __future__ import annotations

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.scheduler.core import Constraint, NodeView, PodDemand, Taint, Toleration, resources
from lattice.scheduler.core.placement import Cluster

GPU = "nvidia.com/gpu"
TAINT = Taint(GPU, "present", "NoSchedule")
CONSTRAINTS = [
    Constraint(),
    Constraint(tolerations=(Toleration(key=GPU, operator="Exists"),)),
    Constraint(node_selector=(("pool", "a"),)),
]


def _node(name: str, gpus: int, cpu: int, *, pool: str = "a", taint: bool = False) -> NodeView:
    free = resources({GPU: gpus, "cpu": cpu, "memory": 64, "pods": 8})
    taints = (TAINT,) if taint else ()
    return NodeView(name, gpus, free=free, labels=(("pool", pool),), taints=taints)


def _pod(cpu: int, memory: int, *, gpus: int = 0, exclusive: bool = False, c: int = 0) -> PodDemand:
    requests = resources({GPU: gpus, "cpu": cpu, "memory": memory, "pods": 1})
    return PodDemand(requests=requests, constraint=CONSTRAINTS[c], units=gpus, exclusive=exclusive)


def _valid(nodes: tuple[NodeView, ...], gang: list[PodDemand], placed: list[str]) -> bool:
    """Whether ``placed`` puts each pod of ``gang`` on a node that admits it, within every
    node's free resources, an exclusive pod alone on its node."""
    by_name = {n.name: n for n in nodes}
    used: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
    count: dict[str, int] = dict.fromkeys(by_name, 0)
    for d, name in zip(gang, placed, strict=True):
        n = by_name[name]
        if not n.schedulable or not d.constraint.admits(
            name=name, labels=dict(n.labels), taints=n.taints
        ):
            return False
        count[name] += 1
        for r, q in d.requests:
            used[name][r] = used[name].get(r, 0) + q
    for d, name in zip(gang, placed, strict=True):
        if d.exclusive and count[name] > 1:
            return False
    return all(
        q <= dict(by_name[name].free_resources()).get(r, 0)
        for name, u in used.items()
        for r, q in u.items()
    )


def test_a_gang_greedy_packing_fragments_is_placed_on_the_empty_cluster() -> None:
    # Found by test_a_plan_applied_and_rescheduled_is_stable: the GPU pods, largest first or
    # scarcest first, fill b and c (their memory with it), and the big-cpu pod then fits
    # nowhere; it fits with that pod on b or c and two GPU pods on a.
    nodes = (_node("a", 4, 4000), _node("b", 2, 16000), _node("c", 2, 16000))
    big, gpu = _pod(6000, 1), _pod(500, 32, gpus=1)
    gang = [big, gpu, gpu, gpu, gpu]
    cluster = Cluster(nodes, gang)
    placed = cluster.place_all(gang)
    assert placed is not None
    assert _valid(nodes, gang, placed)
    assert placed[0] in ("b", "c")
    k = cluster.resources.index(GPU)
    assert sum(row[k] for row in cluster.free) == 4  # the gang is placed on the cluster
    # Deterministic: the same nodes in another order give the same placement.
    assert Cluster(nodes[::-1], gang).place_all(gang) == placed


def test_a_search_that_fails_leaves_the_cluster_as_it_was() -> None:
    # Each kind has slots enough alone and the totals hold the gang, but each big pod takes
    # a GPU node's cpu (one per node), leaving room for one GPU pod there: 2 + 1 + 1 < 5.
    nodes = (_node("a", 4, 4000), _node("b", 2, 16000), _node("c", 2, 16000))
    big, gpu = _pod(9000, 1), _pod(500, 32, gpus=1)
    gang = [big, big, gpu, gpu, gpu, gpu, gpu]
    cluster = Cluster(nodes, gang)
    before = [list(row) for row in cluster.free]
    assert cluster.covers(gang)
    assert cluster.place_all(gang) is None
    assert cluster.free == before
    assert cluster.place_all(gang[:-1]) is not None


@st.composite
def cases(draw: st.DrawFn) -> tuple[tuple[NodeView, ...], list[PodDemand]]:
    nodes = tuple(
        _node(
            f"n{i}",
            gpus := draw(st.sampled_from([0, 2, 4])),
            draw(st.sampled_from([4000, 16000])),
            pool=draw(st.sampled_from(["a", "b"])),
            taint=gpus > 0 and draw(st.booleans()),
        )
        for i in range(draw(st.integers(1, 3)))
    )
    kinds = [
        _pod(
            draw(st.sampled_from([500, 2000, 6000])),
            draw(st.sampled_from([1, 8, 32])),
            gpus=draw(st.sampled_from([0, 1, 2])),
            exclusive=draw(st.integers(0, 5)) == 0,
            c=draw(st.integers(0, len(CONSTRAINTS) - 1)),
        )
        for _ in range(draw(st.integers(1, 3)))
    ]
    gang = [draw(st.sampled_from(kinds)) for _ in range(draw(st.integers(1, 5)))]
    return nodes, gang


@settings(max_examples=400, deadline=None)
@given(case=cases())
def test_place_all_finds_a_placement_whenever_one_exists(
    case: tuple[tuple[NodeView, ...], list[PodDemand]],
) -> None:
    nodes, gang = case
    names = [n.name for n in nodes]
    exists = any(_valid(nodes, gang, list(p)) for p in product(names, repeat=len(gang)))
    placed = Cluster(nodes, gang).place_all(gang)
    assert (placed is not None) == exists
    assert placed is None or _valid(nodes, gang, placed)
