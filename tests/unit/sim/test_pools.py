"""Simulated jobs on pools of nodes: the baselines, the core's allocator, and the flags."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from lattice.scheduler.core import NodeView, PodDemand, SchedulerConfig, Snapshot, Stage
from lattice.scheduler.core import schedule as core_schedule
from lattice.scheduler.core.plan import Plan
from lattice.sim import policies
from lattice.sim.cli import add_arguments, main
from lattice.sim.cluster import ClusterModel, homogeneous, parse_pool
from lattice.sim.engine import SimResult, simulate
from lattice.sim.policies import FifoAllocator, GreedyAllocator, LatticeAllocator, PoolUnits
from lattice.sim.speedup import LinearCapped
from lattice.sim.trace import MappingOptions, SimJob, map_jobs, read_trace

# Two 4-GPU pools, the second tainted as GKE taints GPU nodes (tolerated by every GPU pod).
TWO_POOLS = ClusterModel(
    pools=(
        parse_pool("a 1 nvidia.com/gpu=4 cpu=16 memory=128Gi"),
        parse_pool("b 1 nvidia.com/gpu=4 cpu=16 memory=128Gi taint:nvidia.com/gpu=x:NoSchedule"),
    )
)


def sim_job(i: int, submit: float, duration: float, units: int, pool: str | None = None) -> SimJob:
    return SimJob(
        id=f"j{i}",
        submit=submit,
        duration=duration,
        units=units,
        min_size=units,
        max_size=units,
        priority=0,
        model=LinearCapped(),
        node_selector=(("pool", pool),) if pool else (),
    )


def jcts(result: SimResult) -> dict[str, float | None]:
    return {j.id: j.jct for j in result.jobs}


# A fills pool a; B wants pool a too; C goes anywhere.
PINNED = [sim_job(0, 0, 100, 4, "a"), sim_job(1, 10, 50, 2, "a"), sim_job(2, 20, 50, 2)]


def test_fifo_backfill_counts_units_per_pool() -> None:
    allocator = FifoAllocator(PoolUnits(TWO_POOLS.pool_units()), backfill=True)
    r = simulate(PINNED, allocator, policy="f", capacity=8)
    # B waits for A although pool b has 4 free; C backfills on pool b at 20.
    assert jcts(r) == {"j0": 100, "j1": 140, "j2": 50}
    one_pool = simulate(PINNED, FifoAllocator(8, backfill=True), policy="f", capacity=8)
    assert jcts(one_pool) == {"j0": 100, "j1": 50, "j2": 50}


def test_greedy_gives_a_pinned_job_only_its_pool() -> None:
    jobs = [replace(PINNED[0], min_size=1, max_size=8), PINNED[1]]
    r = simulate(jobs, GreedyAllocator(PoolUnits(TWO_POOLS.pool_units())), policy="g", capacity=8)
    # A may only use pool a (4 units, not its max of 8): 400 unit-s at 4 -> 100 s.
    assert jcts(r) == {"j0": 100, "j1": 140}


def test_a_pool_no_replica_fits_is_not_counted() -> None:
    small = ClusterModel(pools=(parse_pool("tiny 2 nvidia.com/gpu=4 cpu=1 memory=1Gi"),))
    (units, admits) = small.pool_units()[0]
    assert units == 8
    assert not admits(sim_job(0, 0, 1, 1))  # a replica asks for 4 cores and 32Gi


def test_the_default_cluster_gives_the_unit_models_results() -> None:
    # The same trace on nodes given only free units and unit-only jobs, and on the homogeneous
    # cluster's resource vectors with per-replica requests.
    jobs = [sim_job(i, 15.0 * i, 60.0 + 10 * (i % 5), 1 + i % 8) for i in range(30)]
    jobs = [replace(j, min_size=max(1, j.units // 2), max_size=j.units * 2) for j in jobs]
    plain = tuple(NodeView(f"node-{i:04d}", 8) for i in range(3))
    unit_only = LatticeAllocator(plain, SchedulerConfig(), demand=lambda job: PodDemand.of_units(1))
    cluster = homogeneous(24, 8)
    vectors = LatticeAllocator(cluster.nodes(), SchedulerConfig(), demand=cluster.demand)
    before = simulate(jobs, unit_only, policy="l", capacity=24)
    after = simulate(jobs, vectors, policy="l", capacity=24)
    assert before.jobs == after.jobs
    assert [j.resizes for j in after.jobs] != [0] * len(jobs)  # the run did resize jobs


def test_the_allocator_carries_each_placement_into_the_next_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    passes: list[tuple[Snapshot, Plan]] = []

    def recording(snapshot: Snapshot, now: datetime) -> Plan:
        plan = core_schedule(snapshot, now)
        passes.append((snapshot, plan))
        return plan

    monkeypatch.setattr(policies, "schedule", recording)
    cluster = homogeneous(16, 8)
    allocator = LatticeAllocator(cluster.nodes(), SchedulerConfig(), demand=cluster.demand)
    jobs = [sim_job(0, 0, 100, 4), sim_job(1, 10, 100, 4)]
    simulate(jobs, allocator, policy="l", capacity=16)
    (first, plan), (second, _) = passes[:2]
    assert first.nodes == cluster.nodes()
    placed = plan["TrainingJob/sim/j0"].placement
    assert len(placed) == 4
    assert set(placed) <= {"node-0000", "node-0001"}
    (j0,) = (j for j in second.jobs if j.name == "j0")
    assert (j0.stage, j0.current_size, j0.placement) == (Stage.RUNNING, 4, placed)
    assert j0.replica_demand == cluster.demand(jobs[0])
    (j1,) = (j for j in second.jobs if j.name == "j1")
    assert j1.placement == ()  # arrived: nothing placed yet
    later = [j for snap, _ in passes[1:] for j in snap.jobs if j.name == "j0"]
    assert later
    assert {j.placement for j in later} == {placed}  # running pods never move


def test_the_core_keeps_a_pinned_job_waiting_while_its_pool_is_full() -> None:
    allocator = LatticeAllocator(TWO_POOLS.nodes(), SchedulerConfig(), demand=TWO_POOLS.demand)
    r = simulate(PINNED, allocator, policy="l", capacity=8, restart_cost=0)
    # As fifo-backfill: B waits for pool a, C runs on the tainted pool b (tolerated).
    assert jcts(r) == {"j0": 100, "j1": 140, "j2": 50}


def test_the_core_leaves_an_untolerated_pool_alone() -> None:
    cluster = ClusterModel(
        pools=(
            parse_pool("a 1 nvidia.com/gpu=4 cpu=16 memory=128Gi"),
            parse_pool(
                "infra 1 nvidia.com/gpu=4 cpu=16 memory=128Gi taint:dedicated=infra:NoSchedule"
            ),
        )
    )
    allocator = LatticeAllocator(cluster.nodes(), SchedulerConfig(), demand=cluster.demand)
    jobs = [sim_job(0, 0, 100, 4), sim_job(1, 10, 50, 4)]
    r = simulate(jobs, allocator, policy="l", capacity=8, restart_cost=0)
    assert jcts(r) == {"j0": 100, "j1": 140}


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_the_cli_runs_on_pools_and_records_them(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("submit,duration,units,pool\n0,100,4,a\n10,50,2,a\n20,50,2,\n")
    pools = tmp_path / "pools.json"
    gpus = {"nvidia.com/gpu": 4, "cpu": 16, "memory": "128Gi"}
    pools.write_text(json.dumps([{"name": "b", "count": 1, "resources": gpus}]))
    out = tmp_path / "o.json"
    args = _args(
        "--trace",
        str(trace),
        "--pool",
        "a 1 nvidia.com/gpu=4 cpu=16 memory=128Gi",
        "--pools",
        str(pools),
        "--policy",
        "fifo-backfill",
        "--json",
        str(out),
    )
    assert main(args) == 0
    doc = json.loads(out.read_text())
    assert doc["capacity"] == 8
    assert [(p["name"], p["labels"], p["resources"]["nvidia.com/gpu"]) for p in doc["pools"]] == [
        ("a", {"pool": "a"}, 4),
        ("b", {"pool": "b"}, 4),
    ]
    per_job = {j["id"]: (j["start"], j["finish"]) for j in doc["policies"][0]["per_job"]}
    assert per_job == {"job-00000": (0, 100), "job-00001": (100, 150), "job-00002": (20, 70)}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pool", "a 1 nvidia.com/gpu=4", "--capacity", "8"], "drop --capacity and --nodes"),
        (["--pool", "a 1 cpu=4"], "the pools have no nvidia.com/gpu"),
        (["--pool", "a 1 nvidia.com/gpu=4 cpu=2"], "no pool's node holds one replica (cpu=4000"),
        (["--pool", "a 1 nvidia.com/gpu=4 cpu=4 memory=32Gi", "--pool-affinity", "2"], "2.0 must"),
    ],
)
def test_the_cli_rejects_a_bad_cluster_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("submit,duration,units\n0,100,4\n")
    assert main(_args("--trace", str(trace), *argv)) == 2
    assert message in capsys.readouterr().err


def test_a_pools_file_that_is_not_json_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("submit,duration,units\n0,100,4\n")
    pools = tmp_path / "pools.json"
    pools.write_text("[{name: a}]")
    assert main(_args("--trace", str(trace), "--pools", str(pools))) == 2
    assert f"--pools {pools}: not JSON" in capsys.readouterr().err


def test_a_bad_pool_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _args("--trace", "t", "--pool", "a many cpu=1")
    assert "count must be a positive integer, not 'many'" in capsys.readouterr().err
    assert _args("--trace", "t", "--cpu-per-unit", "500m").cpu_per_unit == 500


def test_a_cpu_unit_cluster_runs_cpu_only_jobs(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("submit,duration,units\n0,100,8\n")
    rows = map_jobs(read_trace(trace), MappingOptions(), capacity=16)
    cluster = ClusterModel(pools=(parse_pool("c 2 cpu=8 memory=64Gi"),), unit_resource="cpu")
    assert cluster.capacity == 16
    allocator = LatticeAllocator(cluster.nodes(), SchedulerConfig(), demand=cluster.demand)
    r = simulate(rows, allocator, policy="l", capacity=16)
    assert r.jobs[0].finish is not None
