"""TrainingJob lifecycle end to end: what a user sees with ``kubectl`` while the operator runs.

The operator runs as a real process (GPU mode, ``--resize-interval=0``) on a small kwok pool.
Pods finish when the test (standing in for the workload) gives them the kwok annotations
``kwok.lattice.breezeml.ai/exit-code`` and ``run-for``: in the pod template, or on one running
pod with ``kubectl annotate`` to finish only that worker.

1. An invalid spec (first container not named ``trainingjob``) is ``Wrong``/``InvalidSpec`` with
   a ``Created=False``/``TrainingJobFailedValidation`` condition, a Warning event and no pods.
2. A worker exiting 1 fails the job (``TrainingJobFailed``, naming the pod and the code); the
   freed GPUs start a waiting job.
3. ``cleanPodPolicy``: ``None`` keeps every pod and Service; ``Running`` deletes only the pods
   still running (and the Services). ``All`` is covered by the scheduling tests.
4. ``ttlSecondsAfterFinished`` deletes the finished job about that long after completion.
5. ``activeDeadlineSeconds`` fails a job that runs too long (``DeadlineExceeded``).
6. Scheduler events (Admitted, Shrunk, Preempted), the ``Position`` column, the scheduler's
   timestamps, the workers' env and their headless Services.
7. ``runPolicy.suspend``: no pods while suspended, pods once resumed.
8. The operator's ``/metrics`` after scheduling.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from lattice.clock import RealClock
from lattice.primitives.times import parse_time
from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_trainingjob_scheduling import GPU, STEP_TIMEOUT, World
from tests.support.apply import apply_and_wait
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

EXIT_CODE = "kwok.lattice.breezeml.ai/exit-code"
RUN_FOR = "kwok.lattice.breezeml.ai/run-for"
GPU_FLAGS = (f"--scheduling-unit={GPU}", "--resize-interval=0")


# --- helpers -----------------------------------------------------------------------------------


def with_run_policy(manifest: dict[str, Any], **policy: Any) -> dict[str, Any]:
    manifest["spec"]["runPolicy"] = policy
    return manifest


def finishing(code: int, after: str = "0s") -> dict[str, str]:
    """Pod annotations that make kwok finish a Running pod with ``code`` after ``after``."""
    return {EXIT_CODE: str(code), RUN_FOR: after}


def status_of(world: World, name: str) -> dict[str, Any]:
    """The job's status ({} while unset or when the job does not exist)."""
    job = world.jobs().get(name)
    return dict((job or {}).get("status") or {})


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (status.get("execStatus") or {}).get("conditions") or []}


def wait_status(
    world: World,
    name: str,
    until: Callable[[dict[str, Any]], bool],
    *,
    what: str,
    timeout: float = STEP_TIMEOUT,
) -> dict[str, Any]:
    return wait_for(lambda: status_of(world, name), until, timeout=timeout, what=what)


def finished(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda s: (
        s.get("stage") == "Completed" and conditions(s).get(kind, {}).get("status") == "True"
    )


def events_about(world: World, name: str) -> list[dict[str, Any]]:
    """events.k8s.io/v1 events whose ``regarding`` is the job ``name``."""
    items = world.cluster.get_json("events.v1.events.k8s.io", "-n", world.ns)["items"]
    return [
        e
        for e in items
        if (e.get("regarding") or {}).get("kind") == "TrainingJob"
        and (e.get("regarding") or {}).get("name") == name
    ]


def wait_event(world: World, name: str, reason: str) -> dict[str, Any]:
    """The first event with ``reason`` about job ``name``, once it exists."""
    found = wait_for(
        lambda: [e for e in events_about(world, name) if e.get("reason") == reason],
        timeout=STEP_TIMEOUT,
        what=f"a {reason} event about {name}",
    )
    return found[0]


def live_pods(world: World, job: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in world.pods().get(job, [])}


def phases(world: World, job: str) -> dict[str, str]:
    return {n: (p.get("status") or {}).get("phase", "") for n, p in live_pods(world, job).items()}


def services(world: World, job: str) -> dict[str, dict[str, Any]]:
    items = world.cluster.get_json(
        "services", "-n", world.ns, "-l", f"training.kubeflow.org/job-name={job}"
    )["items"]
    return {s["metadata"]["name"]: s for s in items if not s["metadata"].get("deletionTimestamp")}


def finish_pod(world: World, pod: str, code: int) -> None:
    """Let one running worker exit with ``code`` now (the workload, not the operator)."""
    world.cluster.kubectl(
        "annotate",
        "pod",
        pod,
        "-n",
        world.ns,
        f"{EXIT_CODE}={code}",
        f"{RUN_FOR}=0s",
        "--overwrite",
    )


def metrics_of(op: OperatorProcess) -> str:
    addr = op.args[op.args.index("--metrics-addr") + 1]
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text page: (name, labels) -> value."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name, frozenset(s.labels.items())] = s.value
    return out


def sample(
    all_samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    return all_samples.get((name, frozenset(labels.items())))


# --- 1. invalid spec ---------------------------------------------------------------------------


def test_invalid_container_name_is_wrong(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*GPU_FLAGS)
    world = World(crds_installed, namespace)
    job = trainingjob("bad", min_size=1, max_size=2)
    job["spec"]["replicaSpecs"]["template"]["spec"]["containers"][0]["name"] = "main"
    with explained(op):
        status = apply_and_wait(
            world.cluster,
            job,
            namespace=namespace,
            until=lambda s: s.get("stage") == "Wrong",
            what="bad is marked Wrong",
        )
        assert status["reason"] == "InvalidSpec"
        field = "spec.replicaSpecs.template.spec.containers[0].name"
        assert field in status["message"], status["message"]
        assert 'must be "trainingjob", got "main"' in status["message"], status["message"]
        assert status.get("currentSize", 0) == 0
        conds = conditions(status)
        assert "Failed" not in conds, "invalid is not failed: a fixed spec is judged again"
        invalid = conds["Created"]
        assert (invalid["status"], invalid["reason"]) == ("False", "TrainingJobFailedValidation")
        assert field in invalid["message"]

        event = wait_event(world, "bad", "TrainingJobFailedValidation")
        assert event["type"] == "Warning"
        assert field in event["note"]

        table = world.cluster.kubectl("get", "tj", "bad", "-n", namespace)
        assert re.search(r"^bad\s+Wrong\s", table, re.MULTILINE), table
        assert live_pods(world, "bad") == {}
        assert services(world, "bad") == {}
        assert not [e for e in events_about(world, "bad") if e.get("reason") == "Admitted"]


# --- 2. failure --------------------------------------------------------------------------------


def test_worker_exit_code_fails_job_and_frees_capacity(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*GPU_FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        # The scheduler's decision, before the pods run (their 4 s have not started yet).
        apply_and_wait(
            world.cluster,
            trainingjob("crash", min_size=4, max_size=4, pod_annotations=finishing(1, "4s")),
            namespace=namespace,
            until=lambda s: (s.get("stage"), s.get("currentSize")) == ("Running", 4),
            what="crash is admitted with 4",
        )
        apply_and_wait(
            world.cluster,
            trainingjob("later", min_size=2, max_size=4),
            namespace=namespace,
            until=lambda s: s.get("stage") == "Waiting",
            what="later waits behind crash",
        )

        status = wait_status(world, "crash", finished("Failed"), what="crash fails")
        failed = conditions(status)["Failed"]
        assert failed["reason"] == "TrainingJobFailed"
        assert re.fullmatch(
            r"worker pod crash-worker-[0-3] exited with code 1 \(restartPolicy Never\)",
            failed["message"],
        ), failed["message"]
        assert status["currentSize"] == 0
        assert status.get("completionTime")
        assert "Succeeded" not in conditions(status)
        event = wait_event(world, "crash", "TrainingJobFailed")
        assert event["type"] == "Warning"
        assert event["note"] == failed["message"]

        world.expect({"later": 4}, what="later takes the GPUs crash freed")


# --- 3. cleanPodPolicy -------------------------------------------------------------------------


def test_clean_pod_policy_none_and_running(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    """Two 2-worker jobs; worker 0 of each succeeds while worker 1 keeps running."""
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*GPU_FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        world.apply(
            with_run_policy(trainingjob("keep", min_size=2, max_size=2), cleanPodPolicy="None")
        )
        world.apply(
            with_run_policy(trainingjob("some", min_size=2, max_size=2), cleanPodPolicy="Running")
        )
        world.expect({"keep": 2, "some": 2}, what="keep and some run 2 workers each")
        assert set(services(world, "keep")) == {"keep-worker-0", "keep-worker-1"}

        finish_pod(world, "keep-worker-0", 0)
        finish_pod(world, "some-worker-0", 0)
        for job in ("keep", "some"):
            wait_status(world, job, finished("Succeeded"), what=f"{job} succeeds")

        # Running: the still-running worker 1 and the Services go, the Succeeded worker 0 stays.
        wait_for(
            lambda: (phases(world, "some"), sorted(services(world, "some"))),
            lambda seen: seen == ({"some-worker-0": "Succeeded"}, []),
            timeout=STEP_TIMEOUT,
            what="cleanPodPolicy Running deletes some-worker-1 and the Services only",
        )
        # None: both pods and both Services stay. keep finished in the same moment as some, and
        # the same operator has just cleaned some up, so keep's finished-job pass has run too.
        assert phases(world, "keep") == {
            "keep-worker-0": "Succeeded",
            "keep-worker-1": "Running",
        }
        assert sorted(services(world, "keep")) == ["keep-worker-0", "keep-worker-1"]
        wait_status(world, "keep", lambda s: s.get("stage") == "Completed", what="keep Completed")


# --- 4. ttlSecondsAfterFinished ----------------------------------------------------------------


def test_ttl_deletes_finished_job(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*GPU_FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        brief = with_run_policy(
            trainingjob("brief", min_size=1, max_size=1, pod_annotations=finishing(0, "1s")),
            ttlSecondsAfterFinished=2,
        )
        status = apply_and_wait(
            world.cluster,
            brief,
            namespace=namespace,
            until=finished("Succeeded"),
            what="brief completes",
        )
        completed = parse_time(status["completionTime"])
        wait_for(
            lambda: "brief" in world.jobs(),
            lambda present: not present,
            timeout=15,
            interval=0.1,
            what="the TTL deletes brief",
        )
        gone_after = (RealClock().now() - completed).total_seconds()
        # completionTime is truncated to the second: deletion is due at completionTime + 2 s.
        assert 1.9 <= gone_after <= 8.0, f"deleted {gone_after:.1f}s after completion"


# --- 5. activeDeadlineSeconds ------------------------------------------------------------------


def test_active_deadline_fails_job(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*GPU_FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        world.apply(
            with_run_policy(trainingjob("slow", min_size=2, max_size=2), activeDeadlineSeconds=3)
        )
        world.expect({"slow": 2}, what="slow runs")
        started = parse_time(status_of(world, "slow")["execStatus"]["startTime"])
        status = wait_status(world, "slow", finished("Failed"), what="slow hits its deadline")
        failed = conditions(status)["Failed"]
        assert failed["reason"] == "DeadlineExceeded"
        assert "active longer than specified deadline" in failed["message"]
        assert status["currentSize"] == 0
        ran = (parse_time(status["completionTime"]) - started).total_seconds()
        assert 3 <= ran <= 10, f"failed {ran}s after start"
        assert wait_event(world, "slow", "DeadlineExceeded")["type"] == "Warning"
        wait_for(lambda: live_pods(world, "slow"), lambda p: p == {}, what="pods cleaned (All)")


# --- 6. events, status, env, Services ----------------------------------------------------------


def test_scheduler_events_status_env_and_services(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    """On 4 GPUs: A (2..4) gets 4; B (2..4) shrinks A to 2; D (4..4, prio 10) preempts both."""
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*GPU_FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        world.apply(trainingjob("a", min_size=2, max_size=4))
        world.expect({"a": 4}, what="a is admitted with 4")
        assert wait_event(world, "a", "Admitted")["note"] == "Admitted with 4 (min 2, max 4)"

        status = status_of(world, "a")
        for stamp in ("submitTime", "queuedTime", "lastExecTime"):
            assert status.get(stamp), f"{stamp} missing from {status}"
        assert parse_time(status["submitTime"]) <= parse_time(status["lastExecTime"])
        assert conditions(status)["Running"]["status"] == "True"

        job_uid = world.jobs()["a"]["metadata"]["uid"]
        for i, (name, pod) in enumerate(sorted(live_pods(world, "a").items())):
            assert name == f"a-worker-{i}"
            container = pod["spec"]["containers"][0]
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            assert env["WORLD_SIZE"] == "4"
            assert env["RANK"] == str(i)
            assert env["MASTER_ADDR"] == "a-worker-0"
            assert env["PET_NNODES"] == "2:4"
        svcs = services(world, "a")
        assert sorted(svcs) == [f"a-worker-{i}" for i in range(4)]
        for svc in svcs.values():
            assert svc["spec"]["clusterIP"] == "None"
            owners = [
                o for o in svc["metadata"].get("ownerReferences") or [] if o.get("controller")
            ]
            assert len(owners) == 1, svc["metadata"]
            assert (owners[0]["kind"], owners[0]["name"], owners[0]["uid"]) == (
                "TrainingJob",
                "a",
                job_uid,
            )

        world.apply(trainingjob("b", min_size=2, max_size=4))
        world.expect({"a": 2, "b": 2}, what="b shrinks a to 2")
        shrunk = wait_event(world, "a", "Shrunk")
        assert shrunk["note"].startswith("Shrunk 4\u21922"), shrunk["note"]
        assert f"{namespace}/b" in shrunk["note"], shrunk["note"]

        world.apply(trainingjob("d", min_size=4, max_size=4, priority=10))
        world.expect({"d": 4}, waiting=("a", "b"), what="d preempts a and b")
        for victim in ("a", "b"):
            event = wait_event(world, victim, "Preempted")
            assert event["note"] == f"Preempted by {namespace}/d (priority 10)", event["note"]
            assert event["type"] == "Warning"
            running = wait_status(
                world,
                victim,
                lambda s: conditions(s).get("Running", {}).get("status") == "False",
                what=f"{victim} shows Running=False",
            )
            assert conditions(running)["Running"]["reason"] == "TrainingJobWaiting"

        b_position = wait_status(
            world, "b", lambda s: isinstance(s.get("queuePosition"), int), what="b has a position"
        )["queuePosition"]
        table = world.cluster.kubectl("get", "tj", "-o", "wide", "-n", namespace)
        header, *rows = table.splitlines()
        assert "POSITION" in header.split(), table
        column = header.split().index("POSITION")
        row = next(r.split() for r in rows if r.split()[0] == "b")
        assert row[1] == "Waiting", table
        assert row[column] == str(b_position), table


# --- 7. suspend --------------------------------------------------------------------------------


def test_suspend_and_resume(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*GPU_FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        status = apply_and_wait(
            world.cluster,
            with_run_policy(trainingjob("nap", min_size=2, max_size=2), suspend=True),
            namespace=namespace,
            until=lambda s: (
                s.get("stage") == "Waiting"
                and conditions(s).get("Suspended", {}).get("status") == "True"
            ),
            what="nap is Waiting and Suspended",
        )
        assert conditions(status)["Suspended"]["reason"] == "TrainingJobSuspended"
        assert status.get("lastDecision") == "Suspended", status
        assert status.get("currentSize", 0) == 0
        assert live_pods(world, "nap") == {}

        world.cluster.kubectl(
            "patch",
            "tj",
            "nap",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"runPolicy":{"suspend":false}}}',
        )
        world.expect({"nap": 2}, what="nap runs once resumed")
        status = wait_status(
            world,
            "nap",
            lambda s: conditions(s).get("Suspended", {}).get("status") == "False",
            what="the Suspended condition turns False",
        )
        assert conditions(status)["Suspended"]["reason"] == "TrainingJobResumed"


# --- 8. metrics --------------------------------------------------------------------------------


def test_metrics_after_scheduling(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=2, gpus=4)
    op: OperatorProcess = operator(*GPU_FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        world.apply(trainingjob("m", min_size=2, max_size=4))
        world.expect({"m": 4}, what="m runs 4 workers")

        def scraped() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
            try:
                return samples(metrics_of(op))
            except OSError:
                return {}

        def ready(s: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> bool:
            created = sample(
                s,
                "training_operator_jobs_created_total",
                job_namespace=namespace,
                framework="pytorch",
            )
            running = sample(s, "lattice_jobs", kind="TrainingJob", stage="Running")
            return bool(created) and running == 1

        s = wait_for(scraped, ready, timeout=STEP_TIMEOUT, what="metrics after scheduling")
        assert (sample(s, "lattice_scheduler_pass_duration_seconds_count") or 0) > 0
        assert (sample(s, "lattice_scheduler_decisions_total", type="Admitted") or 0) > 0
        assert sample(s, "lattice_capacity_units", state="total") == 8
        assert sample(s, "lattice_capacity_units", state="used") == 4
        assert (
            sample(
                s,
                "training_operator_jobs_created_total",
                job_namespace=namespace,
                framework="pytorch",
            )
            == 1
        )
