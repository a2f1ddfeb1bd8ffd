"""An elastic TrainingJob (``injectLattice: true``) on real nodes, shrunk and grown back.

The job trains with torchrun's c10d rendezvous (``PET_NNODES=1:2``) and checkpoints every step
to a directory that its pods share (``breezeml/lattice-resnet``'s ``main.py``). Each worker takes
a whole node (4 simulated GPUs). A higher-priority job then needs one node: the operator shrinks
the elastic job to 1, torchrun restarts the survivor at world size 1, and it resumes from the
checkpoint. When that job ends the elastic job grows back to 2. Worker 0's log shows each world
size in turn and a step count that only ever continues where the checkpoint left it.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import OperatorProcess
from tests.real.conftest import GPU, pod_logs
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

IMAGE = "breezeml/lattice-resnet:1.0.1"
TIMEOUT = 240.0


def trainingjob(
    name: str, *, size: tuple[int, int], priority: int, ckpt: Path, args: list[str]
) -> dict[str, Any]:
    return {
        "apiVersion": "breezeml.ai/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            # the pods stay after the job ends, so that worker 0's whole log can be read
            "runPolicy": {"cleanPodPolicy": "None"},
            "minSize": size[0],
            "maxSize": size[1],
            "priority": priority,
            "injectLattice": True,
            "replicaSpecs": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "trainingjob",
                                "image": IMAGE,
                                "imagePullPolicy": "Always",
                                "command": ["python"],
                                "args": ["-u", "main.py", *args],
                                "env": [
                                    {"name": "CHECKPOINT_DIR", "value": "/checkpoint"},
                                    {"name": "STEP_SECONDS", "value": "0.2"},
                                ],
                                "resources": {"requests": {GPU: 4}, "limits": {GPU: 4}},
                                "volumeMounts": [{"name": "ckpt", "mountPath": "/checkpoint"}],
                            }
                        ],
                        "volumes": [
                            {"name": "ckpt", "hostPath": {"path": str(ckpt), "type": "Directory"}}
                        ],
                    }
                }
            },
        },
    }


@dataclass(frozen=True)
class Event:
    """One line of main.py's rank-0 output."""

    kind: str  # "resumed", "step" or "done"
    step: int
    world: int


LINE = re.compile(r"^(resumed|done) step=(\d+) world_size=(\d+)$|^step=(\d+) world_size=(\d+) ")


def events(log: str) -> list[Event]:
    out = []
    for line in log.splitlines():
        m = LINE.match(line.strip())
        if m is None:
            continue
        if m.group(1):
            out.append(Event(m.group(1), int(m.group(2)), int(m.group(3))))
        else:
            out.append(Event("step", int(m.group(4)), int(m.group(5))))
    return out


def rounds(evs: list[Event]) -> list[int]:
    """World size of each torchrun round, in order."""
    return [e.world for e in evs if e.kind == "resumed"]


def steps_in_last_round(evs: list[Event]) -> int:
    n = 0
    for e in evs:
        n = 0 if e.kind == "resumed" else n + (e.kind == "step")
    return n


@pytest.fixture
def ckpt_root(real_cluster: Cluster, real_namespace: str) -> Iterator[Path]:
    """Host directories the jobs' pods share (every real node runs on this host)."""
    root = real_cluster.kubeconfig.parent / "real-data" / real_namespace
    (root / "elastic").mkdir(parents=True)
    (root / "urgent").mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_elastic_job_shrinks_for_a_higher_priority_job_and_grows_back_without_losing_steps(
    real_cluster: Cluster,
    real_namespace: str,
    real_operator: Callable[..., OperatorProcess],
    ckpt_root: Path,
) -> None:
    op = real_operator()
    ns = real_namespace
    worker0 = "elastic-worker-0"

    def log() -> list[Event]:
        return events(pod_logs(real_cluster, ns, worker0))

    def wait_log(until: Callable[[list[Event]], bool], what: str) -> list[Event]:
        try:
            return wait_for(log, until, timeout=TIMEOUT, interval=1, what=what)
        except AssertionError as e:
            raise AssertionError(
                f"{e}\nworker-0 log:\n{pod_logs(real_cluster, ns, worker0)[-3000:]}\n"
                f"pods:\n{real_cluster.kubectl('get', 'pods', '-n', ns, '-o', 'wide')}\n"
                f"operator:\n{op.logs()[-3000:]}"
            ) from e

    def size(name: str) -> int:
        tj = real_cluster.get_json("trainingjob", name, "-n", ns)
        return int((tj.get("status") or {}).get("currentSize") or 0)

    def stage(name: str) -> str:
        tj = real_cluster.get_json("trainingjob", name, "-n", ns)
        return str((tj.get("status") or {}).get("stage") or "")

    real_cluster.apply(
        trainingjob("elastic", size=(1, 2), priority=0, ckpt=ckpt_root / "elastic", args=[]),
        namespace=ns,
    )
    wait_log(
        lambda evs: rounds(evs)[-1:] == [2] and steps_in_last_round(evs) >= 5,
        "the elastic job to train at world size 2",
    )

    # A higher-priority job needs a whole node: the elastic job shrinks to 1 and carries on.
    real_cluster.apply(
        trainingjob("urgent", size=(1, 1), priority=10, ckpt=ckpt_root / "urgent", args=[]),
        namespace=ns,
    )
    wait_log(
        lambda evs: rounds(evs)[-1:] == [1] and steps_in_last_round(evs) >= 5,
        "the elastic job to continue at world size 1",
    )
    assert size("elastic") == 1

    # The urgent job is told to stop and ends; the elastic job grows back to 2.
    (ckpt_root / "urgent" / "stop").touch()
    wait_for(
        lambda: stage("urgent"), lambda s: s == "Completed", timeout=TIMEOUT, what="urgent to end"
    )
    evs = wait_log(
        lambda evs: rounds(evs)[-2:] == [1, 2] and steps_in_last_round(evs) >= 5,
        "the elastic job to grow back to world size 2",
    )
    assert size("elastic") == 2

    # Stop it and check the whole history: sizes 2 -> 1 -> 2, every step once, none lost.
    (ckpt_root / "elastic" / "stop").touch()
    wait_for(
        lambda: stage("elastic"),
        lambda s: s == "Completed",
        timeout=TIMEOUT,
        what="the elastic job to complete",
    )
    evs = log()
    sizes = [w for i, w in enumerate(rounds(evs)) if i == 0 or rounds(evs)[i - 1] != w]
    # (the first round may have started before both pods joined: a leading 1 is no shrink)
    assert sizes[-3:] == [2, 1, 2], evs
    assert len(sizes) <= 4, evs
    last = 0
    for e in evs:
        if e.kind == "resumed":
            # A new round starts from the checkpoint: the last printed step, or the one whose
            # checkpoint was written just before the round was stopped.
            assert last <= e.step <= last + 1, (e, last)
            last = e.step
        elif e.kind == "step":
            assert e.step == last + 1, (e, last)
            last = e.step
    assert evs[-1].kind == "done", evs[-3:]
    assert evs[-1].step == last, evs[-3:]
