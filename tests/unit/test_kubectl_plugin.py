"""``kubectl lattice`` on raw objects: rows, scheduler order, the queue table, ``explain``.

The reads run against an in-memory client (lists, gets, a 404 for uninstalled kinds), so every
rule is checked without a cluster; ``tests/e2e/test_kubectl_plugin.py`` runs it through kubectl.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from lattice import kube
from lattice.frameworks.base import OperatorContext
from lattice.kubectl import commands
from lattice.kubectl.render import (
    QUEUE_HEADER,
    SCHEDULER_REASONS,
    explain_text,
    queue_table,
    verdict,
)
from lattice.kubectl.rows import (
    JOB_KINDS,
    JobRow,
    context_namespace,
    job_row,
    kubeconfig_paths,
    operator_context,
    queue_order,
    resolve_kind,
)
from lattice.kubectl.transport import EVENTS, PRIORITY_CLASSES
from lattice.primitives.objects import Obj
from tests.support.kubectl_reader import MemoryReader
from tests.support.memory_client import MemoryClient

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
CTX = OperatorContext()


def trainingjob(
    name: str,
    *,
    ns: str = "ml",
    priority: int = 0,
    min_size: int = 1,
    max_size: int = 1,
    status: Obj | None = None,
) -> Obj:
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
        "spec": {
            "minSize": min_size,
            "maxSize": max_size,
            "priority": priority,
            "replicaSpecs": {
                "template": {"spec": {"containers": [{"name": "trainingjob", "image": "x"}]}}
            },
        },
        "status": status or {},
    }


def mpijob(name: str, *, ns: str = "ml", annotations: Obj | None = None, **spec: Any) -> Obj:
    pod = {"spec": {"containers": [{"name": "c", "image": "x"}]}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod},
                "Worker": {"replicas": 2, "template": pod},
            },
            **spec,
        },
        "status": {"lattice": {"stage": "Waiting", "queuePosition": 3}},
    }


def row(name: str, **fields: Any) -> JobRow:
    values: dict[str, Any] = {"kind": "TrainingJob", "namespace": "ml", "name": name}
    values.update(fields)
    return JobRow(**values)


# --------------------------------------------------------------------------- rows


def test_trainingjob_row_reads_the_status_block_and_the_plugin_demand() -> None:
    status = {
        "stage": "Waiting",
        "currentSize": 0,
        "queuePosition": 2,
        "queuedTime": "2026-01-01T11:58:30Z",
        "lastDecision": "Waiting at position 2: needs 4 units, 0 free",
    }
    r = job_row(
        resolve_kind("trainingjob"),
        trainingjob("w", priority=7, min_size=2, max_size=4, status=status),
        CTX,
    )
    assert (r.kind, r.ref, r.uid) == ("TrainingJob", "ml/w", "uid-w")
    assert (r.priority, r.min_size, r.max_size, r.size) == (7, 2, 4, 0)
    assert (r.stage, r.position) == ("Waiting", 2)
    assert r.queued_time == datetime(2026, 1, 1, 11, 58, 30, tzinfo=UTC)
    assert r.last_decision.startswith("Waiting at position 2")


def test_kubeflow_kinds_read_status_lattice_and_priority_from_annotation_or_class() -> None:
    kind = resolve_kind("mpijob")
    by_annotation = job_row(
        kind, mpijob("a", annotations={"lattice.breezeml.ai/priority": "5"}), CTX
    )
    assert (by_annotation.priority, by_annotation.min_size, by_annotation.max_size) == (5, 3, 3)
    assert (by_annotation.stage, by_annotation.position) == ("Waiting", 3)
    ctx = operator_context(
        [
            {"metadata": {"name": "high"}, "value": 1000},
            {"metadata": {"name": "low"}, "value": -5, "globalDefault": True},
        ],
        {},
    )
    by_class = mpijob("b", runPolicy={"schedulingPolicy": {"priorityClass": "high"}})
    assert job_row(kind, by_class, ctx).priority == 1000
    assert job_row(kind, mpijob("c"), ctx).priority == -5  # the globalDefault class


def test_operator_context_takes_the_lowest_global_default() -> None:
    ctx = operator_context(
        [
            {"metadata": {"name": "a"}, "value": 10, "globalDefault": True},
            {"metadata": {"name": "b"}, "value": 3, "globalDefault": True},
            {"metadata": {"name": "broken"}, "value": "x"},
        ],
        {"ClusterTrainingRuntime//torch": {}},
    )
    assert ctx.priority_classes == {"a": 10, "b": 3}
    assert ctx.default_priority == 3
    assert "ClusterTrainingRuntime//torch" in ctx.runtimes


def test_an_invalid_job_keeps_its_status_but_has_no_priority_or_sizes() -> None:
    obj = trainingjob("bad", status={"stage": "Wrong", "reason": "InvalidSpec", "message": "m"})
    obj["spec"]["replicaSpecs"]["template"]["spec"]["containers"][0]["name"] = "other"
    r = job_row(resolve_kind("tj"), obj, CTX)
    assert (r.priority, r.min_size, r.max_size) == (None, None, None)
    assert r.invalid
    assert (r.stage, r.reason, r.message) == ("Wrong", "InvalidSpec", "m")
    assert "0/-/-" in queue_table([r], NOW)


def test_a_job_managed_by_another_controller_says_so() -> None:
    obj = mpijob("mk", runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    obj["status"] = {}
    r = job_row(resolve_kind("mpijobs"), obj, CTX)
    assert r.managed_by == "kueue.x-k8s.io/multikueue"
    assert "managed by kueue.x-k8s.io/multikueue" in queue_table([r], NOW)
    assert "neither schedules nor runs it" in verdict(r, NOW)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("trainingjob", "TrainingJob"),
        ("TrainingJobs", "TrainingJob"),
        ("tj", "TrainingJob"),
        ("trainingjobs.breezeml.ai", "TrainingJob"),
        ("mpij", "MPIJob"),
        ("mxjob", "MXJob"),
        ("trainjob", "TrainJob"),
        ("tjob", "TrainJob"),
        ("trainjobs.trainer.kubeflow.org", "TrainJob"),
    ],
)
def test_resolve_kind_accepts_what_kubectl_accepts(name: str, kind: str) -> None:
    assert resolve_kind(name).kind == kind


def test_resolve_kind_names_the_known_kinds() -> None:
    with pytest.raises(ValueError, match="TrainingJob, MPIJob, MXJob, TrainJob"):
        resolve_kind("pytorchjob")


# --------------------------------------------------------------------------- order


def test_queue_order_is_running_then_position_then_priority_queued_time_and_name() -> None:
    t = datetime(2026, 1, 1, 10, tzinfo=UTC)
    rows = [
        row("late-low", priority=0, queued_time=t.replace(hour=11)),
        row("run-low", stage="Running", priority=0, queued_time=t),
        row("run-high", stage="Running", priority=5, queued_time=t.replace(hour=11)),
        row("p2", position=2, priority=0),
        row("never-queued", priority=0),
        row("early-low", priority=0, queued_time=t),
        row("high", priority=9, queued_time=t.replace(hour=11)),
        row("p1", position=1, priority=-3),
        row("b-tie", priority=0, queued_time=t, namespace="a"),
    ]
    order = [r.name for r in queue_order(rows)]
    assert order == [
        *("run-high", "run-low", "p1", "p2"),
        *("high", "b-tie", "early-low", "late-low", "never-queued"),
    ]


def test_equal_positions_from_other_operators_break_ties_by_priority_and_name() -> None:
    rows = [row("b", position=1), row("a", position=1), row("c", position=1, priority=4)]
    assert [r.name for r in queue_order(rows)] == ["c", "a", "b"]


# --------------------------------------------------------------------------- table


def test_queue_table_columns_and_waiting_time() -> None:
    rows = [
        row(
            "r",
            position=1,
            priority=5,
            stage="Running",
            size=4,
            min_size=4,
            max_size=4,
            queued_time=datetime(2026, 1, 1, 10, tzinfo=UTC),
            last_decision="Admitted with 4 (min 4, max 4)",
        ),
        row(
            "w",
            position=2,
            priority=0,
            stage="Waiting",
            min_size=2,
            max_size=4,
            queued_time=datetime(2026, 1, 1, 10, 58, 55, tzinfo=UTC),
            last_decision="Waiting at position 2: needs 2 units, 0 free",
        ),
        row("n", kind="MXJob", namespace="other", priority=0),
    ]
    lines = queue_table(rows, NOW).splitlines()
    assert lines[0].split() == [w for h in QUEUE_HEADER for w in h.split()]
    assert lines[1].split()[:7] == ["1", "TrainingJob", "ml/r", "5", "Running", "4/4/4", "-"]
    assert lines[2].split()[:7] == ["2", "TrainingJob", "ml/w", "0", "Waiting", "0/2/4", "1h1m5s"]
    assert lines[2].endswith("Waiting at position 2: needs 2 units, 0 free")
    assert lines[3].split() == ["-", "MXJob", "other/n", "0", "New", "0/-/-", "-", "-"]
    # Columns line up: every column starts where its header starts.
    start = lines[0].index("STAGE")
    assert all(line[start:].startswith(("STAGE", "Running", "Waiting", "New")) for line in lines)
    assert all(line == line.rstrip() for line in lines)


# --------------------------------------------------------------------------- explain


def test_verdicts_per_stage() -> None:
    cooldown = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)
    assert verdict(row("a", stage="Waiting", last_decision="Waiting at position 3: x"), NOW) == (
        "Waiting at position 3: x"
    )
    preempted = verdict(row("a", stage="Waiting", position=2, last_decision="Preempted by b"), NOW)
    assert preempted == (
        "Waiting at position 2; last decision: Preempted by b. "
        "It keeps its queued time, so it resumes ahead of later jobs."
    )
    blocked = "Waiting at position 4 behind ml/x (StrictFIFO)"
    assert verdict(row("a", stage="Waiting", last_decision=blocked), NOW) == (
        f"{blocked}. StrictFIFO admits no job past the first one that does not fit."
    )
    short = "Waiting at position 2: needs 2 units, 0 free"
    assert verdict(row("a", stage="Waiting", last_decision=short), NOW).startswith(
        f"{short}. It starts when running jobs finish"
    )
    never = "needs 9 units; the cluster has 8"
    assert "cannot start as is" in verdict(row("a", stage="Waiting", last_decision=never), NOW)
    empty = (
        "cannot be placed even on an empty cluster: no node matching pool=a has 8 nvidia.com/gpu"
        " free (2 nodes match; largest free 4)"
    )
    unplaceable = verdict(row("a", stage="Waiting", position=1, last_decision=empty), NOW)
    assert unplaceable == (
        f"Waiting at position 1; last decision: {empty}. No node could take its pods even with no"
        " other Lattice job running: change its requests, node selectors or tolerations, or add"
        " matching nodes."
    )
    pool = "Waiting at position 1: no node matching pool=a has 4 nvidia.com/gpu free (2 nodes"
    pool += " match; largest free 0)"
    assert verdict(row("a", stage="Waiting", last_decision=pool), NOW) == (
        f"{pool}. It starts when running jobs finish, shrink or are preempted."
    )
    assert "suspended" in verdict(row("a", stage="Waiting", last_decision="Suspended"), NOW)
    cool = verdict(row("a", stage="RequeueCooldown", cooldown_time=cooldown, requeue_count=2), NOW)
    assert "requeued (2 time(s))" in cool
    assert "2026-01-01T12:05:00Z (in 5m0s)" in cool
    assert "has not decided" in verdict(row("a"), NOW)
    wrong = verdict(row("a", stage="Wrong", reason="InvalidSpec", message="bad name"), NOW)
    assert wrong == (
        "It is invalid and will not be scheduled until its spec is fixed (InvalidSpec): bad name"
    )
    assert "finished" in verdict(row("a", stage="Completed"), NOW)
    limit = "requeued 2 times for pods that could not start (limit 2); pending again for 5m0s"
    failed = verdict(row("a", stage="Failed", reason="RequeueLimitExceeded", message=limit), NOW)
    assert failed.startswith(f"It failed (RequeueLimitExceeded): {limit}. The scheduler no longer")
    assert "RequeueLimitExceeded" in SCHEDULER_REASONS, "explain lists it with the scheduler's"


def test_explain_text_lists_fields_the_jobs_ahead_and_events_newest_last() -> None:
    w = row(
        "w",
        stage="Waiting",
        position=3,
        priority=0,
        min_size=2,
        max_size=2,
        queued_time=datetime(2026, 1, 1, 11, 59, tzinfo=UTC),
        last_decision="Waiting at position 3: needs 2 units, 0 free",
    )
    ahead = [row("r1", position=1, stage="Running"), row("r2", position=2, stage="Waiting")]
    events: list[Obj] = [
        {
            "type": "Normal",
            "reason": "SuccessfulCreatePod",
            "note": "Created pod w-worker-0",
            "eventTime": "2026-01-01T11:59:55.000000Z",
        },
        {
            "type": "Normal",
            "reason": "Queued",
            "note": "Queued",
            "eventTime": "2026-01-01T11:59:00.000000Z",
        },
        {
            "type": "Warning",
            "reason": "Preempted",
            "note": "Preempted by ml/x (priority 9)",
            "eventTime": "2026-01-01T11:59:30.000000Z",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T11:59:50.000000Z"},
            "reportingController": "lattice.breezeml.ai/operator",
        },
    ]
    text = explain_text(w, ahead=ahead, events=events, now=NOW)
    assert "Stage:         Waiting" in text
    assert "Position:      3" in text
    assert "Queued:        2026-01-01T11:59:00Z (waiting 1m0s)" in text
    assert "Why: Waiting at position 3: needs 2 units, 0 free" in text
    assert "Ahead of it (2, all namespaces):" in text
    assert text.index("ml/r1") < text.index("ml/r2")
    # The scheduler's view and its own events come first, whatever the other events' times.
    order = [
        "Scheduler:",
        "Last decision: Waiting at position 3",
        "Why:",
        "Scheduler events (2, newest last):",
        "Ahead of it",
        "Details:\n",
        "Other events (1, newest last):",
    ]
    assert [text.index(marker) for marker in order] == sorted(text.index(m) for m in order)
    event_lines = text.split("Scheduler events (2, newest last):\n")[1].splitlines()
    assert event_lines[1].split() == ["1m0s", "Normal", "Queued", "Queued"]
    assert event_lines[2].split()[:4] == ["10s", "(x3)", "Warning", "Preempted"]
    other = text.split("Other events (1, newest last):\n")[1].splitlines()
    assert other[1].split()[:3] == ["5s", "Normal", "SuccessfulCreatePod"]


def test_explain_shows_the_newest_events_of_each_source_up_to_the_limit() -> None:
    def event(reason: str, second: int) -> Obj:
        return {
            "reason": reason,
            "note": f"{reason} {second}",
            "eventTime": f"2026-01-01T11:58:{second:02d}Z",
        }

    scheduler = [event("Preempted", s) for s in range(10)]
    pods = [event("SuccessfulCreatePod", s) for s in range(10, 50)]
    text = explain_text(
        row("w", stage="Waiting"), ahead=[], events=scheduler + pods, now=NOW, limit=5
    )
    assert "Scheduler events (5, 5 older not shown, newest last):" in text
    assert "Other events (5, 35 older not shown, newest last):" in text
    assert "Preempted 9" in text
    assert "Preempted 4" not in text
    assert "SuccessfulCreatePod 49" in text
    assert "SuccessfulCreatePod 44" not in text


def test_explain_shows_only_the_closest_jobs_ahead() -> None:
    w = row("w", stage="Waiting", position=30)
    ahead = [row(f"j{i:02d}", position=i, stage="Running") for i in range(1, 30)]
    text = explain_text(w, ahead=ahead, events=[], now=NOW)
    assert "(9 further ahead not shown)" in text
    assert "ml/j09" not in text
    assert "ml/j10" in text
    assert "ml/j29" in text
    assert "Scheduler events (0, newest last):\n  <none>" in text
    assert "Other events (0, newest last):\n  <none>" in text


def test_explain_of_a_running_job_lists_nothing_ahead() -> None:
    text = explain_text(row("r", stage="Running", position=1, size=2), ahead=[], events=[], now=NOW)
    assert "Ahead of it" not in text
    assert "Why: It runs with size 2" in text


# --------------------------------------------------------------------------- kubeconfig


def test_context_namespace_merges_files_like_kubectl() -> None:
    first = {"current-context": "dev", "contexts": [{"name": "dev", "context": {}}]}
    second = {
        "current-context": "prod",
        "contexts": [
            {"name": "dev", "context": {"namespace": "ignored"}},
            {"name": "prod", "context": {"namespace": "ml"}},
        ],
    }
    assert context_namespace([first, second], None) == "default"
    assert context_namespace([first, second], "prod") == "ml"
    assert context_namespace([second], None) == "ml"
    assert context_namespace([], None) == "default"


def test_kubeconfig_paths_prefer_the_flag_then_the_environment() -> None:
    assert kubeconfig_paths("/a", {"KUBECONFIG": "/b"}, "/home/u") == ["/a"]
    assert kubeconfig_paths(None, {"KUBECONFIG": "/b:/c:"}, "/home/u") == ["/b", "/c"]
    assert kubeconfig_paths(None, {}, "/home/u") == ["/home/u/.kube/config"]


# --------------------------------------------------------------------------- reads


def FakeClient(
    objects: Mapping[str, list[Obj]],
    *,
    missing: frozenset[str] = frozenset(),
    forbidden_all_namespaces: bool = False,
) -> MemoryReader:
    """The objects on the in-memory API server, by plural, read as ``kubectl get --raw`` reads
    them, in pages of one (to exercise the continue token); kinds in ``missing`` answer 404,
    and with ``forbidden_all_namespaces`` listing a namespaced kind across namespaces 403."""
    memory = MemoryClient(page_size=1)
    known = {r.plural: r for r in (*(k.resource for k in JOB_KINDS), EVENTS, PRIORITY_CLASSES)}
    for plural, objs in objects.items():
        memory.seed(known[plural], *objs)
    for plural in missing:
        gone = kube.NotFound(404, "NotFound", "the server could not find the requested resource")
        memory.fail("*", gone, plural=plural, times=None)
    if forbidden_all_namespaces:
        refused = kube.Forbidden(403, "Forbidden", "cannot list at the cluster scope")
        memory.fail("list", refused, all_namespaces=True, times=None)
    return MemoryReader(memory)


def _cluster() -> dict[str, list[Obj]]:
    running = {"stage": "Running", "currentSize": 4, "lastDecision": "Grown"}
    waiting = {
        "stage": "Waiting",
        "currentSize": 0,
        "queuePosition": 2,
        "queuedTime": "2026-01-01T11:59:00Z",
        "lastDecision": "Waiting at position 2: needs 2 units, 0 free",
    }
    first = dict(waiting, queuePosition=1, queuedTime="2026-01-01T11:58:00Z")
    other = dict(waiting, queuePosition=3)
    return {
        "trainingjobs": [
            trainingjob("w", min_size=2, max_size=2, status=waiting),
            trainingjob("r", priority=5, min_size=4, max_size=4, status=running),
            trainingjob("first", min_size=2, max_size=2, status=first),
            trainingjob("elsewhere", ns="other", status=other),
        ],
        "mpijobs": [mpijob("m")],
        "events": [
            {
                "metadata": {"name": "e2", "namespace": "ml"},
                "regarding": {"kind": "TrainingJob", "name": "w", "uid": "uid-w"},
                "reason": "Queued",
                "note": "Queued",
                "eventTime": "2026-01-01T11:59:00.000000Z",
            },
            {
                "metadata": {"name": "e1", "namespace": "ml"},
                "regarding": {"kind": "TrainingJob", "name": "w", "uid": "old-incarnation"},
                "reason": "Preempted",
                "note": "from a deleted job of the same name",
                "eventTime": "2026-01-01T10:00:00.000000Z",
            },
        ],
    }


def test_queue_lists_every_installed_kind_in_order_and_skips_missing_crds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = FakeClient(_cluster(), missing=frozenset({"mxjobs", "trainjobs"}))
    assert asyncio.run(commands.queue(client, namespace="ml", now=NOW)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    names = [line.split()[2] for line in out.splitlines()[1:]]
    assert names == ["ml/r", "ml/first", "ml/w", "ml/m"]
    assert out.splitlines()[4].split()[:6] == ["3", "MPIJob", "ml/m", "0", "Waiting", "0/3/3"]


def test_queue_warns_about_a_kind_it_may_not_list(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient(_cluster(), forbidden_all_namespaces=True)
    assert asyncio.run(commands.queue(client, namespace=None, now=NOW)) == 1
    _, err = capsys.readouterr()
    assert "warning: cannot list trainingjobs" in err


def test_explain_reads_the_job_the_jobs_ahead_and_its_own_events(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = FakeClient(_cluster())
    code = asyncio.run(commands.explain(client, job="tj/w", namespace="ml", now=NOW))
    out = capsys.readouterr().out
    assert code == 0
    assert "Why: Waiting at position 2: needs 2 units, 0 free" in out
    assert "Ahead of it (1, all namespaces):" in out
    assert "ml/first" in out
    assert "ml/r " not in out  # running jobs hold capacity; they are not in the queue
    assert "other/elsewhere" not in out
    assert "Queued" in out
    assert "deleted job of the same name" not in out
    selectors = {c.field_selector for c in client.memory.calls if c.plural == "events"}
    assert selectors == {"regarding.kind=TrainingJob,regarding.name=w"}


def test_explain_falls_back_to_the_namespace_when_the_cluster_is_forbidden(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = FakeClient(_cluster(), forbidden_all_namespaces=True)
    assert asyncio.run(commands.explain(client, job="trainingjob/w", namespace="ml", now=NOW)) == 0
    assert "Ahead of it (1, namespace ml only):" in capsys.readouterr().out


def test_explain_errors(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient(_cluster())
    assert asyncio.run(commands.explain(client, job="tj/nope", namespace="ml", now=NOW)) == 1
    assert 'trainingjobs "nope" not found in namespace ml' in capsys.readouterr().err
    assert asyncio.run(commands.explain(client, job="w", namespace="ml", now=NOW)) == 2
    assert asyncio.run(commands.explain(client, job="pod/w", namespace="ml", now=NOW)) == 2
    assert "unknown job kind 'pod'" in capsys.readouterr().err


def test_namespace_and_all_namespaces_exclude_each_other() -> None:
    with pytest.raises(SystemExit) as exc:
        commands.main(["queue", "-A", "-n", "ml"])
    assert exc.value.code == 2
