"""``kubectl lattice`` numbers every waiting job exactly as the scheduler core would.

The scheduler persists ``queuePosition`` for the first ten waiting jobs only; the plugin
computes the rest. These tests run the real core (``schedule`` on a cluster with no free
capacity, so every candidate waits and gets a position) and check that the plugin's numbers,
from the same persisted fields, are the core's: priority, LAS rank, ``queuedTime`` to the
microsecond, creation time, namespace/name.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.kubectl import commands
from lattice.kubectl.render import queue_document, queue_table
from lattice.kubectl.rows import JobRow, queue_order, with_positions
from lattice.scheduler.core import schedule
from lattice.scheduler.core.types import JobView, SchedulerConfig, Snapshot, Strategy, job_key
from tests.unit.test_kubectl_plugin import FakeClient, trainingjob

NOW = datetime(2026, 1, 10, tzinfo=UTC)
BASE = datetime(2026, 1, 1, tzinfo=UTC)


def _view(i: int, spec: tuple[int, int, int, int, int]) -> JobView:
    priority, queued_us, created_s, service, ns = spec
    name = f"j{i:03d}"
    namespace = f"ns{ns}"
    return JobView(
        key=job_key(kind="TrainingJob", namespace=namespace, name=name),
        kind="TrainingJob",
        namespace=namespace,
        name=name,
        creation_time=BASE + timedelta(seconds=created_s),
        priority=priority,
        stage="Waiting",
        queued_time=BASE + timedelta(microseconds=queued_us),
        attained_service=float(service),
    )


def _row(view: JobView, position: int | None = None) -> JobRow:
    return JobRow(
        kind=view.kind,
        namespace=view.namespace,
        name=view.name,
        priority=view.priority,
        stage="Waiting",
        min_size=1,
        max_size=1,
        position=position,
        queued_time=view.queued_time,
        creation_time=view.creation_time,
        attained_service=view.attained_service,
        full_units=view.units_at(view.max_size),
    )


JOBS = st.lists(
    st.tuples(
        st.integers(0, 2),  # priority: many ties
        st.integers(0, 3),  # queuedTime: microseconds apart, many ties
        st.integers(0, 2),  # creation time: ties too
        st.sampled_from([0, 4_000, 40_000, 400_000]),  # attained service: LAS bands 0..3
        st.integers(0, 1),  # namespace
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(jobs=JOBS, strategy=st.sampled_from(list(Strategy)), aged=st.booleans())
def test_computed_positions_are_the_cores(
    jobs: list[tuple[int, int, int, int, int]], strategy: Strategy, aged: bool
) -> None:
    # aged: a slowdown limit every served job has passed, so LAS promotes as the core does
    config = SchedulerConfig(strategy=strategy, slowdown_limit=0.01 if aged else 1e9)
    views = [_view(i, spec) for i, spec in enumerate(jobs)]
    plan = schedule(Snapshot(nodes=(), jobs=tuple(views), config=config), NOW)
    core = {v.name: plan[v.key].queue_position for v in views}
    assert sorted(core.values()) == list(range(1, len(views) + 1))  # type: ignore[type-var]

    # Nothing persisted: the plugin numbers every job.
    computed = with_positions([_row(v) for v in views], now=NOW, config=config)
    assert {r.name: r.position for r in computed} == core
    assert all(r.computed for r in computed)

    # The first ten persisted, as the scheduler writes them: the plugin numbers the rest.
    persisted = [_row(v, core[v.name] if (core[v.name] or 99) <= 10 else None) for v in views]
    completed = with_positions(persisted, now=NOW, config=config)
    assert {r.name: r.position for r in completed} == core
    assert [r.computed for r in completed] == [(core[v.name] or 0) > 10 for v in views]


def test_only_waiting_candidates_are_numbered() -> None:
    queued = BASE
    rows = [
        JobRow(kind="TrainingJob", namespace="a", name="run", stage="Running", priority=0),
        JobRow(kind="TrainingJob", namespace="a", name="w", stage="Waiting", priority=0,
               queued_time=queued),
        JobRow(kind="TrainingJob", namespace="a", name="susp", stage="Waiting", priority=9,
               queued_time=queued, suspended=True),
        JobRow(kind="TrainingJob", namespace="a", name="bad", stage="Waiting", queued_time=queued),
        JobRow(kind="MPIJob", namespace="a", name="foreign", stage="Waiting", priority=9,
               queued_time=queued, managed_by="kubeflow.org/mpi-operator"),
        JobRow(kind="TrainingJob", namespace="a", name="new", stage="", priority=9),
    ]  # fmt: skip
    numbered = {r.name: r.position for r in with_positions(rows, now=NOW)}
    assert numbered == {
        "run": None, "w": 1, "susp": None, "bad": None, "foreign": None, "new": None
    }  # fmt: skip


def test_queue_document_json_and_yaml_carry_the_rows_in_order() -> None:
    rows = queue_order(
        with_positions(
            [
                JobRow(
                    kind="TrainingJob",
                    namespace="a",
                    name="late",
                    stage="Waiting",
                    priority=1,
                    queued_time=BASE + timedelta(hours=1),
                    min_size=1,
                    max_size=2,
                ),
                JobRow(
                    kind="MPIJob",
                    namespace="a",
                    name="head",
                    stage="Waiting",
                    priority=1,
                    position=1,
                    queued_time=BASE,
                    last_decision="Waiting at position 1",
                ),
                JobRow(
                    kind="TrainingJob",
                    namespace="a",
                    name="run",
                    stage="Running",
                    size=2,
                    priority=5,
                ),
            ],
            now=NOW,
        )
    )
    doc = json.loads(queue_document(rows, now=NOW, fmt="json"))
    assert doc == yaml.safe_load(queue_document(rows, now=NOW, fmt="yaml"))
    items = doc["items"]
    assert [(i["name"], i["position"], i["positionComputed"]) for i in items] == [
        ("run", None, False),
        ("head", 1, False),
        ("late", 2, True),
    ]
    late = items[2]
    assert late["queuedTime"] == "2026-01-01T01:00:00Z"
    assert late["waitingSeconds"] == int((NOW - BASE - timedelta(hours=1)).total_seconds())
    assert (late["minSize"], late["maxSize"], late["lastDecision"]) == (1, 2, None)
    assert items[0]["waitingSeconds"] is None
    assert items[1]["lastDecision"] == "Waiting at position 1"


# --------------------------------------------------------------------------- through the reads


def _waiting(position: int | None, queued: str) -> dict[str, object]:
    status: dict[str, object] = {"stage": "Waiting", "queuedTime": queued}
    if position is not None:
        status["queuePosition"] = position
    return status


def _objects() -> dict[str, list[dict[str, object]]]:
    return {
        "trainingjobs": [
            trainingjob("head", ns="a", status=_waiting(1, "2026-01-01T00:00:00Z")),
            trainingjob("early", ns="b", status=_waiting(None, "2026-01-01T00:00:01Z")),
            trainingjob("late", ns="a", status=_waiting(None, "2026-01-01T00:00:02Z")),
        ]
    }


def test_queue_of_one_namespace_numbers_its_jobs_in_the_cluster_wide_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = FakeClient(_objects())
    assert asyncio.run(commands.queue(client, namespace="a", now=NOW, output="json")) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    # b/early is queued before a/late: a/late is third in the cluster, not second.
    assert [(i["name"], i["position"], i["positionComputed"]) for i in items] == [
        ("head", 1, False),
        ("late", 3, True),
    ]


def test_without_the_cluster_view_only_persisted_positions_are_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = FakeClient(_objects(), forbidden_all_namespaces=True)
    assert asyncio.run(commands.queue(client, namespace="a", now=NOW, output="yaml")) == 0
    captured = capsys.readouterr()
    items = yaml.safe_load(captured.out)["items"]
    assert [(i["name"], i["position"]) for i in items] == [("head", 1), ("late", None)]
    assert "not numbered" in captured.err


def test_explain_gives_a_job_past_the_persisted_ten_its_computed_position(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = FakeClient(_objects())
    assert asyncio.run(commands.explain(client, job="tj/late", namespace="a", now=NOW)) == 0
    out = capsys.readouterr().out
    assert "Position:      3 (computed by kubectl lattice in the scheduler's order)" in out
    assert "Ahead of it (2, all namespaces):" in out
    assert "b/early" in out


def test_the_wait_of_a_preempted_job_counts_from_waiting_since() -> None:
    """A preempted job keeps its older queuedTime; its wait began when it was stopped."""
    stopped = BASE + timedelta(hours=5)
    row = JobRow(
        kind="TrainingJob",
        namespace="a",
        name="preempted",
        stage="Waiting",
        priority=0,
        queued_time=BASE,
        waiting_since=stopped,
        reason="InsufficientCapacity",
    )
    legacy = replace(row, name="legacy", waiting_since=None)
    doc = json.loads(queue_document([row, legacy], now=NOW, fmt="json"))["items"]
    assert doc[0]["waitingSince"] == "2026-01-01T05:00:00Z"
    assert doc[0]["waitingSeconds"] == int((NOW - stopped).total_seconds())
    assert doc[0]["reason"] == "InsufficientCapacity"
    assert doc[1]["waitingSince"] is None
    assert doc[1]["waitingSeconds"] == int((NOW - BASE).total_seconds())
    table = queue_table([row], NOW)
    assert "211h0m0s" in table  # 8 days 19 hours since it was stopped, not 9 days
