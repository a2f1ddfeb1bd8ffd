"""Exact JCTs of tiny hand-computed traces under each policy and speedup model."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from lattice.scheduler.core import SchedulerConfig, Strategy
from lattice.sim.cli import add_arguments, main
from lattice.sim.engine import simulate
from lattice.sim.figure import render_png
from lattice.sim.metrics import format_table, measure, no_queueing, offered_load
from lattice.sim.policies import FifoAllocator, GreedyAllocator, LatticeAllocator, make_nodes
from lattice.sim.runner import run_policies
from lattice.sim.speedup import (
    AllReduce,
    Amdahl,
    LinearCapped,
    SpeedupModel,
    fit_allreduce,
    parse_speedup,
)
from lattice.sim.trace import MappingOptions, SimJob, TraceJob, map_jobs, read_trace

LINEAR = LinearCapped()


def job(  # noqa: PLR0917 (terse fixtures)
    i: int,
    submit: float,
    duration: float,
    units: int,
    lo: int,
    hi: int,
    prio: int = 0,
    model: SpeedupModel = LINEAR,
) -> SimJob:
    return SimJob(
        id=f"j{i}",
        submit=submit,
        duration=duration,
        units=units,
        min_size=lo,
        max_size=hi,
        priority=prio,
        model=model,
    )


def ckpt(j: SimJob, interval: float) -> SimJob:
    return replace(j, checkpoint=interval)


def jcts(result) -> dict[str, float | None]:  # type: ignore[no-untyped-def]
    return {j.id: j.jct for j in result.jobs}


def lattice(cap: int, **kw: object) -> LatticeAllocator:
    return LatticeAllocator(make_nodes(cap, 8), SchedulerConfig(**kw))  # type: ignore[arg-type]


# Three rigid jobs on 4 units: A(0s, 100s, 2), B(10s, 100s, 4), C(20s, 50s, 2).
RIGID = [job(0, 0, 100, 2, 2, 2), job(1, 10, 100, 4, 4, 4), job(2, 20, 50, 2, 2, 2)]


def test_fifo_backfill_lets_small_job_pass() -> None:
    r = simulate(RIGID, FifoAllocator(4, backfill=True), policy="b", capacity=4)
    # C backfills at 20 (2 free), ends 70; B starts at 100 when A ends, ends 200.
    assert jcts(r) == {"j0": 100, "j1": 190, "j2": 50}


def test_fifo_strict_blocks_behind_head() -> None:
    r = simulate(RIGID, FifoAllocator(4, backfill=False), policy="s", capacity=4)
    # B waits for A (100..200); C waits behind B: 200..250.
    assert jcts(r) == {"j0": 100, "j1": 190, "j2": 230}


def test_lattice_strict_fifo_equals_fifo_strict_for_rigid_jobs() -> None:
    r = simulate(RIGID, lattice(4, strategy=Strategy.STRICT_FIFO), policy="l", capacity=4)
    assert jcts(r) == {"j0": 100, "j1": 190, "j2": 230}
    assert all(j.resizes == 0 for j in r.jobs)


def test_lattice_best_effort_backfills_rigid_jobs() -> None:
    r = simulate(RIGID, lattice(4, strategy=Strategy.BEST_EFFORT_FIFO), policy="l", capacity=4)
    assert jcts(r) == {"j0": 100, "j1": 190, "j2": 50}


def test_lattice_elastic_shrink_and_grow_with_restart_cost() -> None:
    # A(0s, 100s at 2, work 200) elastic 1..4 on 4 units, linear; B(50s, 50s, 2 rigid).
    jobs = [job(0, 0, 100, 2, 1, 4), job(1, 50, 50, 2, 2, 2)]
    cfg = {"resize_interval": timedelta(0)}
    r = simulate(jobs, lattice(4, **cfg), policy="l", capacity=4, restart_cost=10)
    # A starts at 4: rate 4 -> at 50 done 200: finishes exactly at 50 (work 200).
    assert jcts(r) == {"j0": 50, "j1": 50}
    jobs = [job(0, 0, 200, 2, 1, 4), job(1, 50, 50, 2, 2, 2)]
    r = simulate(jobs, lattice(4, **cfg), policy="l", capacity=4, restart_cost=10)
    # A: work 400; 0..50 at 4 -> 200 done. At 50 shrinks to 2 (restart 50..60), rate 2:
    # B runs 50..100. At 100 A grows to 4 (restart 100..110): done 200 + 2*40 = 280 at 100,
    # 120 left at rate 4 -> 30 s -> finishes at 140.
    assert jcts(r) == {"j0": 140, "j1": 50}
    assert [j.resizes for j in r.jobs] == [2, 0]


def test_resize_interval_defers_growth() -> None:
    jobs = [job(0, 0, 200, 2, 1, 4), job(1, 50, 50, 2, 2, 2)]
    cfg = {"resize_interval": timedelta(seconds=100)}
    r = simulate(jobs, lattice(4, **cfg), policy="l", capacity=4, restart_cost=10)
    # Shrink at 50 is allowed (restart to 60); growth waits until 50 + 100 = 150.
    # 60..150 at rate 2 -> 200 + 180 = 380 at 150; restart 150..160; 20 left at 4 -> 165.
    assert jcts(r) == {"j0": 165, "j1": 50}


def test_lattice_las_preempts_long_job_for_new_one() -> None:
    # Rigid 4-unit jobs that checkpoint every second (so they opt in to preemption within
    # their priority); band 0 is < 100 unit-seconds. A(0s, 100s), B(10s, 10s).
    jobs = [ckpt(job(0, 0, 100, 4, 4, 4), 1.0), ckpt(job(1, 10, 10, 4, 4, 4), 1.0)]
    config = SchedulerConfig(strategy=Strategy.LEAST_ATTAINED_SERVICE, las_first_band=100.0)
    r = simulate(
        jobs, LatticeAllocator(make_nodes(4, 8), config), policy="las", capacity=4, restart_cost=5
    )
    # At 10, A has 40 unit-s (band 0), B too: FIFO within the band, B waits. At 25 A passes
    # 100 unit-s (band 1) -> B preempts it: B 25..35; A resumes at 35 (+5 s restart) with
    # 25 s of work done (checkpointed): 40..115.
    assert jcts(r) == {"j0": 115, "j1": 25}
    assert [j.resizes for j in r.jobs] == [1, 0]
    assert [(j.preemptions, j.lost) for j in r.jobs] == [(1, 0.0), (0, 0.0)]


def test_a_running_rigid_job_is_protected_by_default() -> None:
    # The same jobs without checkpoints: A keeps running, B waits for it.
    jobs = [job(0, 0, 100, 4, 4, 4), job(1, 10, 10, 4, 4, 4)]
    config = SchedulerConfig(strategy=Strategy.LEAST_ATTAINED_SERVICE, las_first_band=100.0)
    r = simulate(
        jobs, LatticeAllocator(make_nodes(4, 8), config), policy="las", capacity=4, restart_cost=5
    )
    assert jcts(r) == {"j0": 100, "j1": 100}
    assert [j.preemptions for j in r.jobs] == [0, 0]


def test_a_preempted_rigid_job_without_checkpoints_loses_all_its_work() -> None:
    # Opted in without checkpointing: A is stopped at 25 and starts over (all 400 unit-s of
    # work) at 35 + 5 s of restart: 40..140. Lost: 25 s x 4 units.
    jobs = [job(0, 0, 100, 4, 4, 4), job(1, 10, 10, 4, 4, 4)]
    config = SchedulerConfig(strategy=Strategy.LEAST_ATTAINED_SERVICE, las_first_band=100.0)
    allocator = LatticeAllocator(make_nodes(4, 8), config, preempt_rigid=True)
    r = simulate(jobs, allocator, policy="las", capacity=4, restart_cost=5)
    assert jcts(r) == {"j0": 140, "j1": 25}
    assert [(j.preemptions, j.lost) for j in r.jobs] == [(1, 100.0), (0, 0.0)]
    assert measure(r).lost_unit_hours == pytest.approx(100 / 3600)


def test_a_preempted_rigid_job_falls_back_to_its_last_checkpoint() -> None:
    # Checkpoints every 10 s of run time: stopped at 25, A keeps 20 s (its checkpoint at 20)
    # and loses 5 s: 80 s left from 40 -> 120.
    jobs = [ckpt(job(0, 0, 100, 4, 4, 4), 10.0), job(1, 10, 10, 4, 4, 4)]
    config = SchedulerConfig(strategy=Strategy.LEAST_ATTAINED_SERVICE, las_first_band=100.0)
    r = simulate(
        jobs, LatticeAllocator(make_nodes(4, 8), config), policy="las", capacity=4, restart_cost=5
    )
    assert jcts(r) == {"j0": 120, "j1": 25}
    assert [(j.preemptions, j.lost) for j in r.jobs] == [(1, 20.0), (0, 0.0)]


def test_an_elastic_job_loses_no_work_when_stopped() -> None:
    # A elastic 2..4 preempted by B (band 0, 4 units): it keeps its progress and pays 5 s.
    jobs = [job(0, 0, 100, 4, 2, 4), job(1, 10, 10, 4, 4, 4)]
    config = SchedulerConfig(strategy=Strategy.LEAST_ATTAINED_SERVICE, las_first_band=100.0)
    r = simulate(
        jobs, LatticeAllocator(make_nodes(4, 8), config), policy="las", capacity=4, restart_cost=5
    )
    assert jcts(r) == {"j0": 115, "j1": 25}
    assert [(j.preemptions, j.lost) for j in r.jobs] == [(1, 0.0), (0, 0.0)]


@pytest.mark.parametrize(
    ("limit", "expected", "resizes"),
    [(1.2, {"j0": 430, "j1": 310}, [1, 1]), (1e6, {"j0": 605, "j1": 200}, [1, 0])],
)
def test_lattice_las_promotion_bounds_the_wait_of_a_long_job(
    limit: float, expected: dict[str, float], resizes: list[int]
) -> None:
    # Rigid 4-unit jobs on 4 units that checkpoint every second; bands: < 100, < 1000, open.
    # A(0s, 400s), B(300s, 200s).
    jobs = [ckpt(job(0, 0, 400, 4, 4, 4), 1.0), ckpt(job(1, 300, 200, 4, 4, 4), 1.0)]
    config = SchedulerConfig(las_first_band=100.0, las_bands=3, slowdown_limit=limit)
    r = simulate(
        jobs, LatticeAllocator(make_nodes(4, 8), config), policy="las", capacity=4, restart_cost=5
    )
    # At 300 A has 1200 unit-s (band 2: its virtual queue time is 0 + K x 1000 / 4) and B
    # preempts it (band 0). B is in band 1 from 325, with virtual queue time 300 + K x 100 / 4.
    # With K = 1.2 that is 330, after A's 300: A resumes at 325 (+5 s restart) with 100 s left
    # -> 430; B resumes at 430 (+5 s) with 175 s left -> 610 (JCT 310). With K = 1e6, B runs
    # to 500 and A, resumed 500 (+5 s), ends at 605.
    assert jcts(r) == expected
    assert [j.resizes for j in r.jobs] == resizes


def test_lattice_original_gives_max_first_and_pauses_rest() -> None:
    # A elastic 1..4 (100 s at 2 -> work 200), B rigid 2 at 10 s for 50 s.
    jobs = [job(0, 0, 100, 2, 1, 4), job(1, 10, 50, 2, 2, 2)]
    r = simulate(jobs, GreedyAllocator(4), policy="g", capacity=4, restart_cost=0)
    # A holds 4 from 0 and finishes at 50; B waits (0 free) and runs 50..100.
    assert jcts(r) == {"j0": 50, "j1": 90}


@pytest.mark.parametrize(
    ("model", "expected"),
    [(LinearCapped(), 50.0), (LinearCapped(3), 200 / 3), (Amdahl(0.5), 100 * (4 / 3) / 1.6)],
)
def test_speedup_models_set_elastic_jct(model: SpeedupModel, expected: float) -> None:
    # One job, 100 s at 2 units, alone at 4 units: JCT = 100 * s(2) / s(4).
    jobs = [job(0, 0, 100, 2, 1, 4, model=model)]
    r = simulate(jobs, lattice(4), policy="l", capacity=4)
    assert jcts(r)["j0"] == pytest.approx(expected)
    assert no_queueing(jobs).avg_jct == pytest.approx(expected)


def test_allreduce_model_and_fit() -> None:
    m = AllReduce(app="x", compute=1.0, alpha=0.5, beta=0.5)
    assert m.speedup(1) == 1.0
    assert m.speedup(0) == 0.0
    assert m.speedup(2) == pytest.approx(2 / 2.0)
    assert m.speedup(4) == pytest.approx(4 / 2.5)
    rows = [(1, 8, 1.0, 0.0), (2, 8, 2.0, 1.0), (4, 8, 2.5, 1.5), (8, 8, 3.0, 2.0)]
    fit = fit_allreduce("x", rows)
    assert (fit.compute, fit.alpha, fit.beta) == pytest.approx((1.0, 0.5, 0.5))
    assert parse_speedup("allreduce:x", {"x": fit}) is fit
    assert parse_speedup("amdahl:0.9") == Amdahl(0.9)
    with pytest.raises(ValueError, match="unknown"):
        parse_speedup("nope")


def test_metrics_and_table() -> None:
    r = simulate(RIGID, FifoAllocator(4, backfill=True), policy="fifo-backfill", capacity=4)
    m = measure(r)
    assert m.avg_jct == pytest.approx(340 / 3)
    assert (m.p50_jct, m.p99_jct, m.makespan) == (100, 190, 200)
    # Held: 0-20: 2, 20-70: 4, 70-100: 2, 100-200: 4 -> 700 of 800 unit-s.
    assert m.utilisation == pytest.approx(700 / 800)
    # Queued (B waiting) over 10..100: held 2*10 + 4*50 + 2*30 = 280 of 360.
    assert m.queued_utilisation == pytest.approx(280 / 360)
    assert m.avg_queue_delay == pytest.approx(30)
    assert "fifo-backfill" in format_table([m])


def test_trace_readers_and_mapping(tmp_path: Path) -> None:
    philly = tmp_path / "p.csv"
    philly.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-09-26 22:24:44,10.0,4,40.0,x\n2017-09-26 22:24:39,5.0,1,5.0,x\n"
    )
    rows = read_trace(philly)
    assert [(r.submit, r.units) for r in rows] == [(0.0, 1), (5.0, 4)]
    generic = tmp_path / "g.csv"
    generic.write_text(
        "id,submit,duration,units,priority,min,max,speedup\na,100,10,2,5,1,8,amdahl:0.9\n"
    )
    (g,) = read_trace(generic)
    assert g == TraceJob(
        id="a",
        submit=0.0,
        duration=10.0,
        units=2,
        priority=5,
        min_size=1,
        max_size=8,
        speedup="amdahl:0.9",
    )
    jobs = map_jobs([*rows, g], MappingOptions(compress=5.0), capacity=6)
    assert [(j.min_size, j.max_size) for j in jobs] == [(1, 2), (2, 6), (1, 6)]
    assert jobs[1].submit == 1.0
    assert jobs[2].model == Amdahl(0.9)
    assert jobs[2].priority == 5
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="columns"):
        read_trace(tmp_path / "bad.csv")


def test_run_policies_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "g.csv"
    trace.write_text("submit,duration,units\n0,100,2\n10,100,4\n20,50,2\n")
    runs = run_policies(
        map_jobs(read_trace(trace), MappingOptions(), capacity=4), ["all"], capacity=4
    )
    names = [r.metrics.policy for r in runs]
    assert names[0] == "lattice (LeastAttainedService)"
    assert "no-queueing" in names
    assert render_png(runs).startswith(b"\x89PNG")
    p = argparse.ArgumentParser()
    add_arguments(p)
    out = tmp_path / "o.json"
    args = p.parse_args(
        ["--trace", str(trace), "--capacity", "4", "--policy", "fifo-backfill", "--json", str(out)]
    )
    assert main(args) == 0
    doc = json.loads(out.read_text())
    assert doc["policies"][0]["avg_jct"] == pytest.approx(340 / 3)
    # The load line before the table, and in the JSON: 2x100 + 4x100 + 2x50 unit-seconds at
    # the requested sizes.
    jobs = map_jobs(read_trace(trace), MappingOptions(), capacity=4)
    span = max(j.submit + j.alone() for j in jobs)
    assert doc["load"]["at_request"] == pytest.approx(700 / (4 * span))
    assert offered_load(jobs, 4).describe(4, "gpu") in capsys.readouterr().out


def test_mix_draws_fitted_applications() -> None:
    fits = {"a": AllReduce(app="a", compute=1.0, alpha=0.0, beta=0.0)}
    rows = [TraceJob(id="x", submit=0.0, duration=1.0, units=1)]
    (j,) = map_jobs(rows, MappingOptions(speedup="mix"), capacity=4, fits=fits)
    assert j.model is fits["a"]
    with pytest.raises(ValueError, match="mix"):
        map_jobs(rows, MappingOptions(speedup="mix"), capacity=4)


@pytest.mark.parametrize("limit", [2.0, 4.0, 8.0])
def test_promotion_admits_a_long_job_under_a_steady_overloading_stream(limit: float) -> None:
    # One 4-unit node. L (20,000 s on 4 units) runs alone for its first 2,000 s; then a job
    # of 3,000 s on 4 units arrives every 2,000 s, for 200,000 s: 150 % of the capacity, of
    # which band 0 (each job's first 900 s) is 45 %. Every job checkpoints, so each may be
    # preempted within the priority. Without the guard, L stops for good once it has 9,000 s
    # of service (band 2), behind every stream job in band 1; with it, L is promoted after
    # waiting `limit` times its service, goes before every stream job past band 0 (it was
    # queued first) and finishes well before the stream ends.
    stream_end = 200_000.0
    long_job = ckpt(job(0, 0, 20_000, 4, 4, 4), 1.0)
    stream = [ckpt(job(i, 2000.0 * i, 3000, 4, 4, 4), 1.0) for i in range(1, 101)]

    def finish(k: float) -> float | None:
        config = SchedulerConfig(slowdown_limit=k)
        r = simulate(
            [long_job, *stream],
            LatticeAllocator(make_nodes(4, 4), config),
            policy="las",
            capacity=4,
            restart_cost=0,
        )
        return r.jobs[0].finish

    guarded = finish(limit)
    assert guarded is not None
    assert guarded < 0.8 * stream_end
    unguarded = finish(1e12)
    assert unguarded is not None
    assert unguarded > stream_end


def test_offered_load_at_each_size_and_time_over_capacity() -> None:
    # Linear speedup: a job's work at any size is units x duration unit-seconds.
    # j0: 2 units x 100 s (min 1, max 4: alone 50 s); j1 at 25 s: 2 x 50 (min 2, max 2).
    jobs = [job(0, 0, 100, 2, 1, 4), job(1, 25, 50, 2, 2, 2)]
    load = offered_load(jobs, capacity=4)
    # Span: 0 to the last no-queueing finish (j1 at 25 + 50 = 75); work 300 unit-seconds at
    # every size under linear speedup.
    assert load.at_min == load.at_request == load.at_max == pytest.approx(300 / (4 * 75))
    # At max from arrival, 4 + 2 units are held from 25 to 50: 25 of 75 s over 4 units.
    assert load.over_capacity == pytest.approx(25 / 75)
    assert "4 gpus 33% of the time" in load.describe(4, "gpu")
    assert offered_load(jobs, capacity=6).over_capacity == 0.0
    # Amdahl: a job's units at its minimum do its work in fewer unit-seconds than at its max.
    amdahl = [job(0, 0, 100, 2, 1, 4, model=Amdahl(0.5))]
    load = offered_load(amdahl, capacity=4)
    assert load.at_min < load.at_request < load.at_max
    assert offered_load([], capacity=4).at_max == 0.0
