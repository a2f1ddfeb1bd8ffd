"""The simulated cluster: pools, node vectors, job demands, and the flags that describe them."""

from __future__ import annotations

from pathlib import Path

import pytest

from lattice.scheduler.core import NodeView, PodDemand, Taint, Toleration, resources
from lattice.sim.cluster import (
    ClusterModel,
    Pool,
    assign_pools,
    homogeneous,
    parse_pool,
    pools_from_json,
)
from lattice.sim.speedup import LinearCapped
from lattice.sim.trace import MappingOptions, SimJob, map_jobs, read_trace

GI = 1024**3


def sim_job(i: int, *, units: int = 1, selector: tuple[tuple[str, str], ...] = ()) -> SimJob:
    return SimJob(
        id=f"j{i}",
        submit=0.0,
        duration=1.0,
        units=units,
        min_size=units,
        max_size=units,
        priority=0,
        model=LinearCapped(),
        node_selector=selector,
    )


def test_a_pool_spec_reads_resources_labels_and_taints() -> None:
    pool = parse_pool(
        "a100 3 nvidia.com/gpu=8 cpu=96 memory=1Ti label:zone=z1,"
        "taint:nvidia.com/gpu=present:NoSchedule taint:dedicated:NoExecute"
    )
    assert pool == Pool(
        name="a100",
        count=3,
        capacity=resources({"cpu": 96_000, "memory": 1024 * GI, "nvidia.com/gpu": 8, "pods": 110}),
        labels=(("zone", "z1"),),
        taints=(
            Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule"),
            Taint(key="dedicated", effect="NoExecute"),
        ),
    )
    assert pool.node_labels() == (("pool", "a100"), ("zone", "z1"))
    relabelled = parse_pool("a 1 cpu=1 pods=8 label:pool=x")
    assert relabelled.node_labels() == (("pool", "x"),)
    assert dict(relabelled.capacity)["pods"] == 8


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("a", "need NAME COUNT"),
        ("a x cpu=1", "count must be a positive integer, not 'x'"),
        ("a 0 cpu=1", "count must be a positive integer, not 0"),
        ("a 1 cpu", "'cpu' must be RESOURCE=QUANTITY"),
        ("a 1 cpu=lots", "resource cpu: invalid quantity 'lots'"),
        ("a 1 cpu=1 taint:k=v:Sometimes", "taint 'k=v:Sometimes' must be KEY[=VALUE]:"),
        ("a 1 cpu=1 label:k", "label 'k' must be KEY=VALUE"),
    ],
)
def test_a_bad_pool_spec_names_the_pool_and_the_rule(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match="--pool") as info:
        parse_pool(spec)
    assert message in str(info.value)


def test_pools_from_json_and_their_errors() -> None:
    doc = [
        {"name": "cpu", "count": 2, "resources": {"cpu": "64", "memory": "256Gi"}},
        {
            "name": "gpu",
            "count": 1,
            "resources": {"nvidia.com/gpu": 4},
            "labels": {"tier": "fast"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        },
    ]
    cpu, gpu = pools_from_json(doc, source="p.json")
    assert (cpu.count, dict(cpu.capacity)["memory"]) == (2, 256 * GI)
    assert gpu.taints == (Taint(key="nvidia.com/gpu", effect="NoSchedule"),)
    assert gpu.labels == (("tier", "fast"),)
    with pytest.raises(ValueError, match=r"p.json: must be a non-empty JSON list"):
        pools_from_json({}, source="p.json")
    with pytest.raises(ValueError, match=r"pool \[0\]: unknown field\(s\) size"):
        pools_from_json([{"name": "a", "count": 1, "size": 3}], source="p.json")
    with pytest.raises(ValueError, match=r"pool \[0\]: a taint needs a key and an effect"):
        pools_from_json([{"name": "a", "count": 1, "taints": [{"key": "k"}]}], source="p.json")
    with pytest.raises(ValueError, match=r"\(a\): count must be a positive integer"):
        pools_from_json([{"name": "a", "count": "2"}], source="p.json")


def test_the_homogeneous_cluster_is_the_unit_model_with_proportional_vectors() -> None:
    cluster = homogeneous(20, 8)
    nodes = cluster.nodes()
    assert [(n.name, n.free_units) for n in nodes] == [
        ("node-0000", 8),
        ("node-0001", 8),
        ("node-0002", 4),
    ]
    assert cluster.capacity == 20
    last = dict(nodes[-1].free)
    assert last == {"cpu": 4 * 4000, "memory": 4 * 32 * GI, "nvidia.com/gpu": 4, "pods": 110}
    # One replica asks for exactly a unit's share of the node: the unit alone decides fit.
    demand = cluster.demand(sim_job(0))
    assert dict(demand.requests) == {"cpu": 4000, "memory": 32 * GI, "nvidia.com/gpu": 1, "pods": 1}
    assert demand.units == 1
    with pytest.raises(ValueError, match="must be > 0"):
        homogeneous(0, 8)


def test_a_replica_tolerates_taints_of_the_extended_resources_it_requests() -> None:
    tainted = NodeView(
        "g", 8, labels=(("pool", "g"),), taints=(Taint(key="nvidia.com/gpu", value="present"),)
    )
    dedicated = NodeView("d", 8, labels=(("pool", "d"),), taints=(Taint(key="dedicated"),))
    cluster = homogeneous(8, 8)
    anywhere = cluster.demand(sim_job(0)).constraint
    assert anywhere.admits(name=tainted.name, labels=dict(tainted.labels), taints=tainted.taints)
    assert not anywhere.admits(
        name=dedicated.name, labels=dict(dedicated.labels), taints=dedicated.taints
    )
    pinned = cluster.demand(sim_job(1, selector=(("pool", "d"),))).constraint
    assert not pinned.admits(name="g", labels=dict(tainted.labels), taints=())
    assert pinned.node_selector == (("pool", "d"),)
    # Counting CPU cores: the replica asks for one core and no extended resource.
    cores = ClusterModel(pools=(), unit_resource="cpu", memory_per_unit=GI)
    cpu_demand = cores.demand(sim_job(2))
    assert cpu_demand == PodDemand(
        requests=resources({"cpu": 1000, "memory": GI, "pods": 1}),
        constraint=cpu_demand.constraint,
        units=1,
    )
    assert cpu_demand.constraint.tolerations == ()


def test_pool_affinity_pins_a_seeded_share_weighted_by_units() -> None:
    cluster = ClusterModel(
        pools=(
            parse_pool("big 3 nvidia.com/gpu=8"),
            parse_pool("small 1 nvidia.com/gpu=8"),
            parse_pool("cpu 5 cpu=64"),
        )
    )
    jobs = [sim_job(i) for i in range(400)]
    keep = sim_job(999, selector=(("zone", "z"),))
    assert assign_pools([*jobs, keep], cluster, fraction=0.0, seed=1) == [*jobs, keep]
    pinned = assign_pools([*jobs, keep], cluster, fraction=1.0, seed=1)
    assert pinned[-1] == keep
    counts = {"big": 0, "small": 0}
    for job in pinned[:-1]:
        ((key, value),) = job.node_selector
        assert key == "pool"
        counts[value] += 1
    assert 2 * counts["small"] < counts["big"]  # 24 units against 8; no GPU-less pool
    big_job = sim_job(7, units=12)  # only pool "big" (24 units) can hold it
    assert {
        j.node_selector for j in assign_pools([big_job] * 50, cluster, fraction=1.0, seed=3)
    } == {(("pool", "big"),)}
    huge = sim_job(8, units=25)
    assert assign_pools([huge], cluster, fraction=1.0, seed=1) == [huge]
    half = assign_pools(jobs, cluster, fraction=0.5, seed=1)
    assert 120 < sum(1 for j in half if j.node_selector) < 280
    assert half == assign_pools(jobs, cluster, fraction=0.5, seed=1)
    with pytest.raises(ValueError, match=r"--pool-affinity 1\.5 must be between 0 and 1"):
        assign_pools(jobs, cluster, fraction=1.5, seed=1)


def test_a_generic_trace_carries_selectors_and_tolerations(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "submit,duration,units,pool,selector,tolerations\n"
        '0,10,2,a,"zone=z1,pool=b","dedicated:NoSchedule,team=ml"\n'
        "5,10,1,,,\n"
    )
    first, second = map_jobs(read_trace(path), MappingOptions(), capacity=8)
    assert first.node_selector == (("pool", "a"), ("zone", "z1"))
    assert first.tolerations == (
        Toleration(key="dedicated", operator="Exists", effect="NoSchedule"),
        Toleration(key="team", operator="Equal", value="ml"),
    )
    assert (second.node_selector, second.tolerations) == ((), ())
    path.write_text("submit,duration,units,selector\n0,10,2,zone\n")
    with pytest.raises(ValueError, match="row 1: selector 'zone' must be KEY=VALUE"):
        read_trace(path)
    path.write_text("submit,duration,units,tolerations\n0,10,2,k:Never\n")
    with pytest.raises(ValueError, match="row 1: toleration 'k:Never' must be"):
        read_trace(path)
