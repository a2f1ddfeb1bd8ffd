"""Gangs with fixed pods, per-node fragmentation, and Least-Attained-Service ordering."""

from __future__ import annotations

import pytest

from lattice.scheduler.core import SchedulerConfig, Strategy, las_band
from tests.unit.scheduler.builders import Case, at, check, job, snap

LAS = Strategy.LEAST_ATTAINED_SERVICE

GANGS = [
    pytest.param(
        Case(
            snapshot=snap(job("m", kind="MPIJob").fixed(0).units(1).gang(5).new(), nodes=(4,)),
            want={"m": ("Running", 5)},
            events={"m": ["Queued", "Admitted with 5 (min 5, max 5)"]},
        ),
        id="MPIJob gang: a 0-GPU launcher and 4 one-GPU workers fit on 4 GPUs",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("m", kind="MPIJob").fixed(0).units(1).gang(5).new(), nodes=(3,)),
            want={"m": ("Waiting", 0)},
            reasons={"m": "needs 4 units; the cluster has 3"},
        ),
        id="MPIJob gang needing 4 GPUs waits on a 3-GPU cluster",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("x", kind="MXJob").fixed(0, 1, 1).units(2).gang(5).new(), nodes=(4, 2)
            ),
            want={"x": ("Running", 5)},
        ),
        id="MXJob gang: scheduler 0 + two 1-unit servers + two 2-unit workers fill 4+2",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("x", kind="MXJob").fixed(0, 3, 3).units(2).gang(4).new(), nodes=(4, 4)
            ),
            want={"x": ("Waiting", 0)},
            reasons={"x": "needs 8 units; the cluster has 8 but no node placement fits"},
        ),
        id="fixed pods of 3 units leave no node for a 2-unit worker",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("g").units(4).gang(1).new(), nodes=(2, 2)),
            want={"g": ("Waiting", 0)},
            reasons={"g": "needs 4 units; the cluster has 4 but no node placement fits"},
        ),
        id="one 4-GPU replica does not fit on two nodes with 2 free each",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("g").units(2).gang(2).new(), nodes=(2, 2)),
            want={"g": ("Running", 2)},
        ),
        id="two 2-GPU replicas fit on two nodes with 2 free each",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").units(3).gang(2).running(2),
                job("b").units(2).gang(1).new(),
                job("c").gang(1).new().created(at(1)),
            ),
            want={"a": ("Running", 2), "b": ("Waiting", 0), "c": ("Waiting", 0)},
            reasons={
                "b": "needs 2 units, 2 free but fragmented across nodes",
                "c": "behind ns/b (StrictFIFO)",
            },
        ),
        id="fragmentation left by running jobs blocks a gang that fits in total",
    ),
    pytest.param(
        Case(
            snapshot=snap(job("e").units(3).min(1).max(4).new(), nodes=(4, 4)),
            want={"e": ("Running", 2)},
        ),
        id="an elastic job grows only by whole replicas that fit on a node",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("m", kind="MPIJob").fixed(0).units(1).gang(5).running(5),
                job("h", kind="MPIJob").fixed(0).units(1).gang(5).prio(3).new(),
                nodes=(4, 2),
            ),
            want={"m": ("Waiting", 0), "h": ("Running", 5)},
            events={"m": ["Preempted by ns/h (priority 3)"]},
        ),
        id="a gang is preempted as a whole, never shrunk",
    ),
]

# TABLE_CONFIG: bands start at 3600 and 36000 unit-seconds; slowdown_limit is 0.5: a job in band 1
# or above is ordered by its queued time plus half its band's lower bound over its units at full
# size (its virtual queue time). at(n) is n minutes after T0, when the table's jobs are queued by
# default.
LAS_CASES = [
    pytest.param(
        Case(
            snapshot=snap(
                job("x").gang(8).waiting().service(7200),
                job("y").gang(8).waiting().queued(at(1)),
                strategy=LAS,
            ),
            now=at(2),
            want={"x": ("Waiting", 0), "y": ("Running", 8)},
            order=["y", "x"],
        ),
        id="LAS: less attained service goes first within a priority",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("x").gang(8).prio(1).waiting().service(1e9),
                job("y").gang(8).waiting().queued(at(1)),
                strategy=LAS,
            ),
            now=at(2),
            want={"x": ("Running", 8), "y": ("Waiting", 0)},
            order=["x", "y"],
        ),
        id="LAS: priority dominates the band",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("x").gang(8).waiting().service(50_000),
                job("y").gang(8).waiting().queued(at(40)).service(7200),
                strategy=LAS,
            ),
            now=at(60),
            want={"x": ("Running", 8), "y": ("Waiting", 0)},
            order=["x", "y"],
            fields={"x": {"attained_service": 50_000.0, "service_updated_at": at(60)}},
        ),
        id="LAS: past band 0 the virtual queue time orders: x (queued at 0, band 2: + 0.5 x "
        "36,000 / 8 s = 37.5 min) goes before y (queued at 40 min, band 1: + 3.75 min); its "
        "service is kept",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("x").gang(8).waiting().service(7200),
                job("z").gang(8).new(),
                strategy=LAS,
            ),
            now=at(60),
            want={"x": ("Waiting", 0), "z": ("Running", 8)},
            order=["z", "x"],
        ),
        id="LAS: band 0 still goes before an aged job",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(8).waiting().service(50_000),
                job("b").gang(8).waiting().queued(at(5)).service(7200),
                strategy=LAS,
            ),
            now=at(90),
            want={"a": ("Waiting", 0), "b": ("Running", 8)},
            order=["b", "a"],
        ),
        id="LAS: a less served job queued later goes first while its virtual queue time is "
        "earlier (5 + 3.75 min before 0 + 37.5 min), however long both have waited",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").gang(8).waiting().service(50_000),
                job("b").gang(8).waiting().queued(at(5)).service(7200),
                strategy=LAS,
                slowdown_limit=0.0,
            ),
            now=at(90),
            want={"a": ("Running", 8), "b": ("Waiting", 0)},
            order=["a", "b"],
        ),
        id="LAS: with slowdown_limit 0, jobs past band 0 are first come first served",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("x").gang(8).waiting().service(7200).resized(at(30)),
                job("y").gang(8).waiting().queued(at(1)).service(4000),
                strategy=LAS,
            ),
            now=at(60),
            want={"x": ("Running", 8), "y": ("Waiting", 0)},
            order=["x", "y"],
        ),
        id="LAS: age counts from queued_time, which a preemption keeps, not from the last stop",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("r").min(4).max(8).running(8).service(50_000, at(60)),
                job("w").gang(8).waiting().queued(at(40)).service(4000),
                strategy=LAS,
            ),
            now=at(60),
            want={"r": ("Running", 8), "w": ("Waiting", 0)},
            order=["r", "w"],
        ),
        id="LAS: a running elastic job whose virtual queue time is earlier (37.5 min) is not "
        "preempted by a job of a lower band queued later (40 + 3.75 min)",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(8).running(2).service(30_000, at(30)),
                job("b").gang(3).waiting().queued(at(10)).service(12_000),
                strategy=LAS,
            ),
            now=at(60),
            want={"a": ("Running", 5), "b": ("Running", 3)},
            order=["a", "b"],
            events={"a": ["Grown 2\u21925"]},
        ),
        id="LAS: a later job that fits in what is left gets its minimum before an earlier job "
        "grows past its own",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("a").min(2).max(8).running(2).service(30_000, at(30)),
                job("b").gang(4).waiting().queued(at(10)).service(12_000),
                strategy=LAS,
            ),
            now=at(30),
            want={"a": ("Running", 4), "b": ("Running", 4)},
            order=["a", "b"],
        ),
        id="LAS: a later job gets its minimum before an earlier job grows",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("r").min(4).max(8).running(8).service(50_000, at(0)),
                job("w").gang(8).new(),
                strategy=LAS,
            ),
            now=at(1),
            want={"r": ("Waiting", 0), "w": ("Running", 8)},
            events={"r": ["Preempted by ns/w (priority 0)"]},
            fields={"r": {"attained_service": 50_000 + 8 * 60.0}},
        ),
        id="LAS: a less served arrival preempts a more served elastic job of equal priority "
        "(rule change: r was a rigid gang, which is now protected)",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("r").gang(8).running(8).service(50_000, at(0)),
                job("w").gang(8).new(),
                strategy=LAS,
            ),
            now=at(1),
            want={"r": ("Running", 8), "w": ("Waiting", 0)},
            order=["w", "r"],
        ),
        id="LAS: a running rigid gang is protected from a less served job of equal priority "
        "that goes before it in the order",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("r").gang(8).running(8).service(50_000, at(0)).preemptible(),
                job("w").gang(8).new(),
                strategy=LAS,
            ),
            now=at(1),
            want={"r": ("Waiting", 0), "w": ("Running", 8)},
            events={"r": ["Preempted by ns/w (priority 0)"]},
        ),
        id="LAS: a rigid gang that opted in (it checkpoints) is preempted within its priority",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("r").gang(8).running(8).service(50_000, at(0)),
                job("w").gang(8).prio(1).new(),
                strategy=LAS,
            ),
            now=at(1),
            want={"r": ("Waiting", 0), "w": ("Running", 8)},
            events={"r": ["Preempted by ns/w (priority 1)"]},
        ),
        id="a higher priority always preempts, a protected rigid gang too",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("x").gang(8).waiting().service(7200),
                job("y").gang(8).prio(5).running(8).service(1e9, at(1)),
                strategy=LAS,
            ),
            now=at(1),
            want={"x": ("Waiting", 0), "y": ("Running", 8)},
            wakeup=None,
        ),
        id="LAS: a waiting job's place never changes with the clock, so it sets no wakeup",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("y").gang(8).running(8).service(4000, at(1)),
                strategy=LAS,
            ),
            now=at(1),
            want={"y": ("Running", 8)},
            wakeup=at(67, seconds=40),
        ),
        id="LAS: a running job's virtual queue time moves only when it reaches its next band "
        "(36,000 - 4,000 unit-seconds at 8 units: 66m40s), the next wakeup",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("y").gang(8).running(8).service(3000, at(1)),
                strategy=LAS,
            ),
            now=at(1),
            want={"y": ("Running", 8)},
            wakeup=at(1, seconds=75),
        ),
        id="LAS: the next wakeup is a running job reaching its next band",
    ),
    pytest.param(
        Case(
            snapshot=snap(
                job("y").gang(8).running(8).service(400_000, at(500)),
                strategy=LAS,
            ),
            now=at(500),
            want={"y": ("Running", 8)},
            wakeup=None,
        ),
        id="LAS: a running job in the last band has no timer",
    ),
]


@pytest.mark.parametrize("case", GANGS)
def test_gangs_and_fragmentation(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", LAS_CASES)
def test_least_attained_service(case: Case) -> None:
    check(case)


@pytest.mark.parametrize(
    ("service", "band"),
    [(0, 0), (3599.9, 0), (3600, 1), (35_999, 1), (36_000, 2), (360_000, 3), (1e15, 3)],
)
def test_las_bands_grow_exponentially(service: float, band: int) -> None:
    assert las_band(service, SchedulerConfig()) == band
