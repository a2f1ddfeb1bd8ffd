"""The lower bound on average JCT: exact on cases worked by hand, and never above a schedule the
simulator actually ran."""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.sim.bound import hull_lines, lower_bound
from lattice.sim.cli import add_arguments, main
from lattice.sim.runner import run_policies
from lattice.sim.speedup import AllReduce, Amdahl, LinearCapped, SpeedupModel
from lattice.sim.trace import SimJob

HOUR = 3600.0
AMDAHL = Amdahl(p=0.95)


def _job(
    name: str, *, submit: float = 0.0, hours: float = 10.0, size: int = 4, lo: int = 4, hi: int = 4
) -> SimJob:
    return SimJob(
        id=name,
        submit=submit,
        duration=hours * HOUR,
        units=size,
        min_size=lo,
        max_size=hi,
        priority=0,
        model=AMDAHL,
    )


def test_a_job_alone_is_bounded_by_its_time_alone() -> None:
    # Progress at the full rate, counted at each slot's start: the program's mean time of
    # progress is (d - slot) / 2, and the job finishes d / 2 after it. The no-queueing bound,
    # the job's time alone, is then the larger.
    bound = lower_bound([_job("a")], 4, slot=HOUR, keep=0.0)
    assert bound.program == pytest.approx(10 * HOUR - HOUR / 2)
    assert bound.avg_jct == bound.no_queueing == pytest.approx(10 * HOUR)
    assert bound.jobs_in_program == 1


def test_two_gangs_that_each_fill_the_cluster_are_bounded_by_queueing_one_behind_the_other() -> (
    None
):
    # The best schedule runs one, then the other: JCTs d and 2d, average 1.5d. The bound sees
    # the capacity (it is above d, the bound without it) and never passes 1.5d; it is within a
    # slot of it.
    jobs = [_job("a"), _job("b")]
    bound = lower_bound(jobs, 4, slot=HOUR, keep=0.0)
    assert 15 * HOUR - HOUR <= bound.avg_jct == bound.program <= 15 * HOUR
    alone = lower_bound(jobs, 8, slot=HOUR, keep=0.0)
    assert alone.program == pytest.approx(10 * HOUR - HOUR / 2), "room for both: no queueing"


def test_a_curve_that_falls_before_the_max_is_bounded_at_its_fastest_size() -> None:
    # Two units are slower than one here (S(2) = 2/3): the job is fastest alone at 1, in an
    # hour, not at its maximum, in 1.5 hours; the simulator runs it in the hour.
    falls = AllReduce(app="a", compute=1.0, alpha=1.0, beta=1.0)
    job = SimJob(
        id="f", submit=0, duration=HOUR, units=1, min_size=1, max_size=2, priority=0, model=falls
    )
    assert job.alone() == pytest.approx(1.5 * HOUR)
    bound = lower_bound([job], 4, slot=HOUR / 4, keep=0.0)
    assert bound.avg_jct == bound.no_queueing == pytest.approx(HOUR)
    (run,) = run_policies([job], ["fifo-backfill"], capacity=4, timeline=False)
    assert bound.avg_jct <= run.metrics.avg_jct


def test_jobs_shorter_than_keep_are_charged_their_time_alone() -> None:
    jobs = [_job("a"), _job("b"), _job("c", hours=1.0)]
    bound = lower_bound(jobs, 4, slot=HOUR, keep=100 * HOUR)
    assert bound.jobs_in_program == 0
    assert bound.avg_jct == bound.program == pytest.approx(bound.no_queueing)
    assert bound.no_queueing == pytest.approx(7 * HOUR)
    some = lower_bound(jobs, 4, slot=HOUR, keep=5 * HOUR)
    assert some.jobs_in_program == 2
    assert some.avg_jct > bound.avg_jct, "the two long gangs still queue behind each other"


@dataclass(frozen=True)
class _Dip:
    """A measured-looking curve that is not concave: 2 units are slower than 1."""

    def speedup(self, n: int) -> float:
        return {1: 1.0, 2: 0.8, 3: 2.4, 4: 2.6}.get(n, 0.0)


@pytest.mark.parametrize("model", [AMDAHL, _Dip()], ids=["amdahl", "not concave"])
@pytest.mark.parametrize("lines", [2, 3, 5])
def test_every_hull_line_lies_above_every_size_the_job_can_run_at(
    model: SpeedupModel, lines: int
) -> None:
    job = SimJob(
        id="j", submit=0, duration=HOUR, units=2, min_size=1, max_size=4, priority=0, model=model
    )
    found = hull_lines(job, lines=lines)
    assert 2 <= len(found) <= lines
    for slope, intercept in found:
        assert intercept >= 0, "idle time may make no progress"
        for g in range(1, 5):
            assert slope * g + intercept >= model.speedup(g) - 1e-12
    slope, intercept = found[-1]
    assert slope * 4 + intercept == pytest.approx(model.speedup(4))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_bound_is_never_above_a_schedule_the_simulator_ran(seed: int) -> None:
    rng = random.Random(seed)
    jobs = []
    for i in range(40):
        units = rng.choice([1, 2, 4, 8])
        jobs.append(
            SimJob(
                id=f"j{i:02}",
                submit=rng.uniform(0, 48) * HOUR,
                duration=rng.expovariate(1 / 8) * HOUR + 60,
                units=units,
                min_size=max(1, units // 2),
                max_size=units * 2,
                priority=0,
                model=AMDAHL,
            )
        )
    runs = run_policies(jobs, ["lattice", "fifo-backfill"], capacity=16, timeline=False)
    best = min(r.metrics.avg_jct for r in runs)
    bound = lower_bound(jobs, 16, slot=HOUR / 4, keep=0.0)
    assert bound.avg_jct <= best
    assert bound.program > bound.no_queueing, "16 units are too few for 40 jobs at max size"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": 0}, "capacity must be at least 1"),
        ({"slot": 0.0}, "slot and horizon must be positive"),
        ({"lines": 1}, "lines at least 2"),
    ],
)
def test_bad_arguments_are_refused_with_the_rule(kwargs: dict[str, float], message: str) -> None:
    capacity = int(kwargs.pop("capacity", 4))
    with pytest.raises(ValueError, match=message):
        lower_bound([_job("a")], capacity, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no jobs"):
        lower_bound([], 4)


def test_the_cli_prints_the_bound_against_backfill_and_records_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("submit,duration,units\n0,36000,4\n0,36000,4\n60,3600,2\n")
    out = tmp_path / "o.json"
    p = argparse.ArgumentParser()
    add_arguments(p)
    argv = ["--trace", str(trace), "--capacity", "4", "--policy", "fifo-backfill"]
    argv += ["--json", str(out), "--lower-bound", "--bound-slot", "30m", "--bound-keep", "0"]
    assert main(p.parse_args(argv)) == 0
    printed = capfd.readouterr().out
    doc = json.loads(out.read_text())
    bound, backfill = doc["lower_bound"], doc["policies"][0]["avg_jct"]
    assert bound["jobs_in_program"] == 3
    assert bound["slot"] == 1800
    assert bound["no_queueing"] < bound["avg_jct"] <= backfill
    ratio = bound["avg_jct"] / backfill
    assert f"below {bound['avg_jct'] / 3600:.2f}h ({ratio:.2f}x fifo-backfill's)" in printed
    assert f"alone at its fastest size from arrival: {bound['no_queueing'] / 3600:.2f}h" in printed
    assert "HiGHS" not in printed, "the solver's banner stays off stdout"


_MODELS = st.one_of(
    st.builds(Amdahl, p=st.floats(0.5, 1.0)),
    st.builds(LinearCapped, cap=st.one_of(st.none(), st.floats(1.0, 6.0))),
    st.builds(
        AllReduce,
        app=st.just("a"),
        compute=st.floats(0.5, 2.0),
        alpha=st.floats(0.0, 1.0),
        beta=st.floats(0.0, 1.0),
    ),
)


@st.composite
def _traces(draw: st.DrawFn) -> tuple[list[SimJob], int]:
    capacity = draw(st.sampled_from([4, 8]))
    jobs = []
    for i in range(draw(st.integers(1, 12))):
        units = draw(st.sampled_from([1, 2, 4]))
        rigid = draw(st.booleans())
        lo = units if rigid else draw(st.integers(1, units))
        hi = units if rigid else draw(st.integers(units, capacity))
        jobs.append(
            SimJob(
                id=f"j{i:02}",
                submit=draw(st.floats(0, 24)) * HOUR,
                duration=draw(st.floats(0.1, 20)) * HOUR,
                units=units,
                min_size=lo,
                max_size=hi,
                priority=draw(st.sampled_from([0, 10])),
                model=draw(_MODELS),
            )
        )
    return jobs, capacity


@settings(max_examples=60, deadline=None)
@given(_traces(), st.sampled_from([HOUR / 4, HOUR, 3 * HOUR]), st.sampled_from([0.0, 2 * HOUR]))
def test_no_simulated_schedule_beats_the_bound(
    trace: tuple[list[SimJob], int], slot: float, keep: float
) -> None:
    # Rigid and elastic jobs, priorities, linear, Amdahl and all-reduce curves: whatever the
    # policy, the simulated average JCT is at least the bound.
    jobs, capacity = trace
    policies = ["lattice", "fifo-backfill", "fifo-strict", "lattice-original"]
    runs = run_policies(jobs, policies, capacity=capacity, timeline=False)
    bound = lower_bound(jobs, capacity, slot=slot, keep=keep)
    assert bound.avg_jct >= bound.no_queueing
    for run in runs:
        assert bound.avg_jct <= run.metrics.avg_jct * (1 + 1e-9), run.metrics.policy
