"""A burst of equal-priority jobs arriving within about a second never preempts a running job.

200 one-GPU TrainingJobs are created at once (8 ``kubectl create`` processes in parallel) onto a
pool that fits 50, named so that later-created jobs sort first by name: the case in which a
name tie-break would stop running jobs for newcomers. Jobs run for a few seconds on kwok and
succeed, so the queue drains in waves.

What is asserted, from complete watch streams (``kubectl get --watch``, started before the
burst) rather than from polls that could miss a transition:

- no job ever goes from ``Running`` with pods to anything but ``Running`` or ``Completed``;
- no pod is deleted (or marked for deletion) before it has finished (phase Succeeded/Failed);
- no ``Preempted`` or ``Shrunk`` event is recorded;
- every job completes, and each ran once (one pod, ``<job>-worker-0``, with one uid).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import OperatorProcess, Pool
from tests.e2e.test_trainingjob_scheduling import GPU, World
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

JOBS = 200
NODES, GPUS_PER_NODE = 5, 10  # fits 50 one-GPU jobs
CREATORS = 8
DRAIN_TIMEOUT = 300.0
FINISH = {"kwok.lattice.breezeml.ai/exit-code": "0", "kwok.lattice.breezeml.ai/run-for": "3s"}


class Watch:
    """``kubectl get <resource> --watch -o json`` in the background, kept as a list of objects."""

    def __init__(self, cluster: Cluster, resource: str, namespace: str, out: Path) -> None:
        self.out = out
        self._file = out.open("wb")
        self.proc = subprocess.Popen(
            [
                "kubectl",
                "get",
                resource,
                "-n",
                namespace,
                "--watch",
                "--output-watch-events",
                "-o",
                "json",
            ],
            env=cluster.env,
            stdout=self._file,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> list[dict[str, Any]]:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self._file.close()
        return list(_json_stream(self.out.read_text()))


def _json_stream(text: str) -> Iterator[dict[str, Any]]:
    decoder = json.JSONDecoder()
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return
        value, i = decoder.raw_decode(text, i)
        yield value


def _create_burst(cluster: Cluster, namespace: str, tmp: Path) -> None:
    # Created in index order; names count down, so each newcomer sorts before every earlier job.
    manifests = [
        trainingjob(f"burst-{JOBS - 1 - i:03d}", min_size=1, max_size=1, annotations=FINISH)
        for i in range(JOBS)
    ]
    files = []
    for c in range(CREATORS):
        path = tmp / f"burst-{c}.yaml"
        path.write_text(yaml.safe_dump_all(manifests[c::CREATORS]))
        files.append(path)
    with ThreadPoolExecutor(CREATORS) as pool:
        list(
            pool.map(
                lambda f: cluster.kubectl("create", "-n", namespace, "-f", str(f), timeout=120),
                files,
            )
        )


def _stage_violations(events: list[dict[str, Any]]) -> list[str]:
    """Jobs that left ``Running`` with pods for anything but ``Running`` or ``Completed``."""
    running: set[str] = set()
    bad = []
    for event in events:
        obj = event.get("object") or {}
        name = obj.get("metadata", {}).get("name", "")
        status = obj.get("status") or {}
        stage, size = status.get("stage"), int(status.get("currentSize") or 0)
        if name in running and stage not in ("Running", "Completed"):
            bad.append(f"{name}: Running -> {stage} (size {size})")
        if stage == "Running" and size > 0:
            running.add(name)
        elif stage == "Completed":
            running.discard(name)
    return bad


def _pod_violations(events: list[dict[str, Any]]) -> list[str]:
    """Pods deleted, or marked for deletion, before they finished."""
    bad = []
    for event in events:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        phase = (obj.get("status") or {}).get("phase")
        deleting = event.get("type") == "DELETED" or meta.get("deletionTimestamp")
        if deleting and phase not in ("Succeeded", "Failed"):
            bad.append(f"{meta.get('name')}: deleted in phase {phase}")
    return bad


def test_a_burst_of_equal_priority_jobs_never_preempts(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=NODES, gpus=GPUS_PER_NODE)
    op: OperatorProcess = operator(f"--scheduling-unit={GPU}", "--resize-interval=0")
    world = World(crds_installed, namespace)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        jobs_watch = Watch(crds_installed, "trainingjobs", namespace, tmp / "jobs.json")
        pods_watch = Watch(crds_installed, "pods", namespace, tmp / "pods.json")
        try:
            _create_burst(crds_installed, namespace, tmp)
            created = [
                datetime.fromisoformat(j["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
                for j in world.jobs().values()
            ]
            spread = (max(created) - min(created)).total_seconds()
            print(f"{len(created)} jobs created within {spread:.0f} s (creationTimestamp)")

            def stages() -> dict[str, int]:
                out: dict[str, int] = {}
                for job in world.jobs().values():
                    stage = str((job.get("status") or {}).get("stage", ""))
                    out[stage] = out.get(stage, 0) + 1
                return out

            wait_for(
                stages,
                lambda s: s.get("Completed", 0) == JOBS,
                timeout=DRAIN_TIMEOUT,
                interval=1.0,
                what=f"all {JOBS} jobs complete",
            )
        except AssertionError:
            print(op.logs())
            raise
        finally:
            job_events = jobs_watch.stop()
            pod_events = pods_watch.stop()

    assert job_events, "the job watch saw the burst"
    assert pod_events, "the pod watch saw the pods"
    assert _stage_violations(job_events) == []
    assert _pod_violations(pod_events) == []
    uids: dict[str, set[str]] = {}
    for e in pod_events:
        meta = (e.get("object") or {}).get("metadata") or {}
        uids.setdefault(meta.get("name", ""), set()).add(meta.get("uid", ""))
    assert set(uids) == {f"burst-{i:03d}-worker-0" for i in range(JOBS)}
    assert [name for name, seen in uids.items() if len(seen) != 1] == [], "each job ran once"
    events = crds_installed.get_json("events", "-n", namespace)["items"]
    stopped = [e for e in events if e.get("reason") in ("Preempted", "Shrunk")]
    assert stopped == []
