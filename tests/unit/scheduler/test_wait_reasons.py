"""Every job the scheduler holds back carries a stable code and a sentence (the core's rule).

One row per code: a snapshot, the job asked about, the code and a fragment of the message.
Then the properties: every waiting candidate has a code (never blank, however far back in the
queue), a running job has none, and the code names the cause of a preemption.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from lattice.scheduler.core import (
    PodDemand,
    Preempted,
    PreemptionCause,
    SchedulerConfig,
    Snapshot,
    Strategy,
    WaitReason,
    resources,
    schedule,
)
from lattice.scheduler.core.types import NodeView
from tests.unit.scheduler.builders import T0, at, job, snap

W = WaitReason
FIFO = Strategy.BEST_EFFORT_FIFO

CASES: list[tuple[str, Snapshot, str, WaitReason | None, str]] = [
    (
        "running clears",
        snap(job("a").gang(2).running(2), nodes=(4,)),
        "a",
        None,
        "",
    ),
    (
        "too few free units",
        snap(job("big").gang(4).running(4), job("a").gang(2).waiting(), nodes=(4,)),
        "a",
        W.INSUFFICIENT_CAPACITY,
        "needs 2 units, 0 free",
    ),
    (
        "free units on the wrong nodes",
        snap(
            replace(job("x").gang(2).units(2).running(2).build(), placement=("node-0", "node-1")),
            job("a").gang(1).units(3).waiting(),
            nodes=(4, 4),
            strategy=FIFO,
        ),
        "a",
        W.FRAGMENTED,
        "needs 3 units, 4 free",
    ),
    (
        "behind the StrictFIFO head",
        snap(
            job("big").gang(4).running(4),
            job("head").gang(2).waiting().queued(at(1)),
            job("a").gang(1).waiting().queued(at(2)),
            nodes=(4,),
        ),
        "a",
        W.BLOCKED_BY_STRICT_FIFO,
        "behind ns/head",
    ),
    (
        "more than the cluster",
        snap(job("a").gang(9).waiting(), nodes=(4, 4)),
        "a",
        W.EXCEEDS_CLUSTER_CAPACITY,
        "the cluster has 8",
    ),
    (
        "suspended",
        snap(job("a").gang(1).waiting().suspended(), nodes=(4,)),
        "a",
        W.SUSPENDED,
        "Suspended",
    ),
    (
        "requeued for pods pending",
        snap(
            job("a").gang(1).running(1).pending(at(0)),
            nodes=(4,),
        ),
        "a",
        W.PODS_PENDING_TIMEOUT,
        "pods pending for 10m0s",
    ),
    (
        "still cooling down",
        snap(job("a").gang(1).cooling(at(30)), nodes=(4,)),
        "a",
        W.PODS_PENDING_TIMEOUT,
        "Cooling down until",
    ),
    (
        "stopped for a higher priority",
        snap(
            job("low").gang(4).running(4).prio(0),
            job("high").gang(4).waiting().prio(5).queued(at(1)),
            nodes=(4,),
        ),
        "low",
        W.PREEMPTED,
        "Preempted by ns/high (priority 5) at 2026-01-01T00:10:00Z; needs 4 units, 0 free",
    ),
    (
        "invalid",
        snap(job("a").min(3).max(2).waiting(), nodes=(4,)),
        "a",
        W.INVALID_SPEC,
        "max_size 2 < min_size 3",
    ),
    (
        "finished: left alone",
        snap(job("a").gang(1).running(1).finished(), nodes=(4,)),
        "a",
        None,
        "",
    ),
    (
        "a stage the scheduler does not own: left alone",
        snap(job("a").gang(1).stage("Failed"), nodes=(4,)),
        "a",
        None,
        "",
    ),
]


@pytest.mark.parametrize(
    ("snapshot", "name", "code", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_each_code_has_its_rule(
    snapshot: Snapshot, name: str, code: WaitReason | None, message: str
) -> None:
    plan = schedule(snapshot, at(10))
    d = plan[f"TrainingJob/ns/{name}"]
    assert d.wait_reason == code
    assert message in d.wait_message
    if code is None:
        assert d.wait_message == ""


def test_every_code_is_covered_by_a_row_but_queued_and_the_requeue_limit() -> None:
    covered = {case[3] for case in CASES}
    assert set(WaitReason) - covered == {W.QUEUED, W.REQUEUE_LIMIT_EXCEEDED}


def test_the_requeue_limit_code_marks_a_job_the_pass_failed() -> None:
    from lattice.scheduler.core.state import JobState
    from lattice.scheduler.core.types import Stage
    from lattice.scheduler.core.waitreason import classify

    s = JobState(job("a").gang(1).running(1).build())
    s.stage, s.size, s.reason = Stage.FAILED, 0, "requeued 3 times (limit 2)"
    assert classify(s) == (W.REQUEUE_LIMIT_EXCEEDED, "requeued 3 times (limit 2)")
    # Once persisted, the stage is passed through: its reason is left as it is.
    s = JobState(job("a").gang(1).stage(Stage.FAILED).build())
    assert classify(s) == (None, "")


def test_a_candidate_not_tried_is_queued() -> None:
    from lattice.scheduler.core.state import JobState
    from lattice.scheduler.core.waitreason import classify

    s = JobState(job("a").gang(1).waiting().build())
    assert classify(s)[0] == W.QUEUED


def test_the_message_never_names_the_position() -> None:
    jobs = [job("big").gang(4).running(4)]
    jobs += [job(f"w{i:02d}").gang(2).waiting().queued(at(seconds=i)) for i in range(30)]
    plan = schedule(snap(*jobs, nodes=(4,), strategy=FIFO), at(10))
    messages = {plan[f"TrainingJob/ns/w{i:02d}"].wait_message for i in range(30)}
    assert messages == {"needs 2 units, 0 free"}


@pytest.mark.parametrize("strategy", list(Strategy))
def test_no_waiting_candidate_is_ever_blank_however_far_back(strategy: Strategy) -> None:
    jobs = [job("big").gang(3).running(3).prio(2)]
    jobs += [
        job(f"w{i:03d}").gang(1 + i % 3).waiting().queued(at(seconds=i)).prio(i % 2)
        for i in range(300)
    ]
    plan = schedule(snap(*jobs, nodes=(4,), strategy=strategy), at(10))
    for d in plan.decisions.values():
        if d.stage == "Waiting":
            assert d.wait_reason is not None, d.key
            assert d.wait_message, d.key
            assert d.wait_reason not in (W.QUEUED, W.PREEMPTED)
        else:
            assert d.wait_reason is None
    tail = plan["TrainingJob/ns/w299"]
    assert tail.queue_position is not None
    assert tail.queue_position > 100


def test_per_pod_demands_name_the_binding_constraint() -> None:
    def demand(gpus: int) -> PodDemand:
        return PodDemand(requests=resources({"nvidia.com/gpu": gpus}), units=gpus)

    nodes: tuple[NodeView, ...] = (NodeView("n0", 4, free=resources({"nvidia.com/gpu": 4})),)
    held = replace(
        job("x").gang(1).units(2).running(1).build(), replica_demand=demand(2), placement=("n0",)
    )
    view = replace(job("a").gang(1).units(4).waiting().build(), replica_demand=demand(4))
    config = SchedulerConfig(strategy=FIFO)
    plan = schedule(Snapshot(nodes=nodes, jobs=(held, view), config=config), T0)
    d = plan[view.key]
    assert d.wait_reason == W.INSUFFICIENT_CAPACITY
    assert d.wait_message.startswith("needs 4 units; no node eligible has 4 nvidia.com/gpu")
    # Two nodes with 2 free each: enough in total, on no single node.
    nodes = tuple(NodeView(f"n{i}", 4, free=resources({"nvidia.com/gpu": 4})) for i in range(2))
    held = replace(held, min_size=2, max_size=2, current_size=2, placement=("n0", "n1"))
    plan = schedule(Snapshot(nodes=nodes, jobs=(held, view), config=config), T0)
    assert plan[view.key].wait_reason == W.FRAGMENTED


@pytest.mark.parametrize(
    ("victim", "winner", "config", "cause"),
    [
        (
            job("v").gang(4).running(4).prio(0).preemptible(),
            job("w").gang(4).waiting().prio(3).queued(at(1)),
            SchedulerConfig(strategy=FIFO),
            PreemptionCause.HIGHER_PRIORITY,
        ),
        (
            job("v").gang(4).running(4).preemptible().service(40_000, at(0)).admitted(at(0)),
            job("w").gang(4).waiting().queued(at(1)),
            SchedulerConfig(strategy=Strategy.LEAST_ATTAINED_SERVICE, slowdown_limit=1e9),
            PreemptionCause.LEAST_ATTAINED_SERVICE,
        ),
        (
            job("v").min(1).max(4).running(4).queued(at(2)).resized(None),
            job("w").gang(4).waiting().queued(at(1)),
            SchedulerConfig(strategy=FIFO),
            PreemptionCause.EARLIER_IN_QUEUE,
        ),
    ],
)
def test_a_preemption_names_why_the_winner_ranks_first(
    victim: object, winner: object, config: SchedulerConfig, cause: PreemptionCause
) -> None:
    plan = schedule(snap(victim, winner, nodes=(4,), config=config), at(10))  # type: ignore[arg-type]
    d = plan["TrainingJob/ns/v"]
    (event,) = [e for e in d.events if isinstance(e, Preempted)]
    assert event.cause == cause
    assert d.wait_reason == W.PREEMPTED
    assert d.wait_message.startswith("Preempted by ns/w")


def test_the_preempted_code_lasts_one_pass_then_the_blocker_is_named() -> None:
    from lattice.scheduler.core import apply

    s = snap(
        job("low").gang(4).running(4).prio(0),
        job("high").gang(4).waiting().prio(5).queued(at(1)),
        nodes=(4,),
    )
    first = schedule(s, at(10))
    assert first["TrainingJob/ns/low"].wait_reason == W.PREEMPTED
    second = schedule(apply(s, first), at(10) + timedelta(seconds=1))
    assert second["TrainingJob/ns/low"].wait_reason == W.INSUFFICIENT_CAPACITY
    assert second["TrainingJob/ns/low"].wait_message == "needs 4 units, 0 free"


@pytest.mark.parametrize(
    ("victim", "beneficiary", "cause"),
    [
        pytest.param((0, 1, 0), (5, 1, 10), "HigherPriority", id="higher priority first"),
        pytest.param((0, 1, 0), (0, 0, 10), "LeastAttainedService", id="band 0 beats band 1"),
        pytest.param((0, 1, 0), (0, 1, 10), "LeastAttainedService", id="queued later, less served"),
        pytest.param((0, 1, 10), (0, 1, 0), "EarlierInQueue", id="queued earlier: its wait"),
        pytest.param((0, 0, 10), (0, 0, 0), "EarlierInQueue", id="FIFO order"),
    ],
)
def test_the_preemption_cause_is_the_first_criterion_the_beneficiary_wins(
    victim: tuple[int, int, int], beneficiary: tuple[int, int, int], cause: str
) -> None:
    from lattice.scheduler.core.state import JobState
    from lattice.scheduler.core.waitreason import preemption_cause

    def state(name: str, spec: tuple[int, int, int]) -> JobState:
        prio, rank, queued = spec
        s = JobState(job(name).gang(1).prio(prio).queued(at(queued)).build())
        s.rank = rank
        return s

    assert preemption_cause(state("v", victim), state("b", beneficiary)) == cause
