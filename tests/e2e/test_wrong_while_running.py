"""Issue 26, item 1: a job that turns invalid while it runs keeps its capacity until its pods go.

The issue's case: a running TrainingJob was edited into an invalid spec, went ``Wrong`` with size
0, and the scheduler stopped counting its pods, which kept running: a newcomer was admitted on top
of them. Here the edit is one only the operator can judge (a negative cpu request; the schema
accepts any quantity): the job goes ``Wrong`` naming the field, its pods are stopped, and a
waiting job of the same size is admitted, and no node is ever over-committed by live pods while
that happens (sampled on every poll, terminating pods included).
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_crash_queue import Ledger
from tests.e2e.test_trainingjob_scheduling import GPU, STEP_TIMEOUT, World
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

_CPU = "/spec/replicaSpecs/template/spec/containers/0/resources/requests/cpu"


def test_a_job_turned_wrong_while_running_keeps_its_capacity_until_its_pods_go(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    nodes = pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(f"--scheduling-unit={GPU}", "--resize-interval=0")
    world = World(crds_installed, namespace)
    ledger = Ledger(crds_installed, namespace, nodes)
    with explained(op):
        world.apply(trainingjob("holder", min_size=4, max_size=4))
        world.expect({"holder": 4}, what="holder runs its 4 pods")
        world.apply(trainingjob("newcomer", min_size=4, max_size=4))
        world.expect({"holder": 4}, waiting=("newcomer",), what="newcomer waits behind holder")

        patch = [{"op": "add", "path": _CPU, "value": "-2"}]
        crds_installed.kubectl(
            "patch",
            "trainingjob",
            "holder",
            "-n",
            namespace,
            "--type=json",
            "-p",
            json.dumps(patch),
        )

        def state() -> tuple[str, str, int, int]:
            ledger.sample()  # over-commitment is checked on every poll
            jobs = world.jobs()
            holder = jobs["holder"].get("status") or {}
            pods = world.pods()
            running = sum(
                1
                for p in pods.get("newcomer", [])
                if (p.get("status") or {}).get("phase") == "Running"
            )
            return (
                str(holder.get("stage", "")),
                str(holder.get("message") or holder.get("lastDecision") or ""),
                len(pods.get("holder", [])),
                running,
            )

        _, message, _, _ = wait_for(
            state,
            lambda s: s[0] == "Wrong" and s[2] == 0 and s[3] == 4,
            timeout=STEP_TIMEOUT,
            interval=0.5,
            what="holder Wrong with its pods gone, newcomer running 4 pods",
        )
        assert "resources" in message, message
        assert not ledger.overcommitted, f"over-committed nodes seen: {ledger.overcommitted[:10]}"
