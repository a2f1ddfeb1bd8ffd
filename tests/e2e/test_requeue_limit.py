"""Issue 25, item 5, end to end: the requeue limit (``--requeue-limit``, Kueue's
``backoffLimitCount``) on kwok nodes of the local control plane.

A TrainingJob whose two workers require pod anti-affinity between themselves (a constraint the
scheduler does not model, so it places both on the only node) is refused by kube-scheduler
every time: with ``--requeue-limit=1`` it is requeued once (a ``Requeued`` event quoting
kube-scheduler), admitted again after its cooldown, refused again, and then fails: stage
``Failed`` with reason ``RequeueLimitExceeded`` and kube-scheduler's message in its status,
its ``Failed`` condition (``kubectl wait --for=condition=Failed`` returns) and a Warning event;
its pods are gone and it is never admitted again.
"""

from __future__ import annotations

from typing import Any

from lattice.primitives.objects import Obj
from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_trainingjob_scheduling import GPU, World
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

#: One refusal takes the scheduler's refusal grace (30 s) plus a pass; two of them and a cooldown.
TIMEOUT = 150.0
APART = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": "apart"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def _events(cluster: Cluster, namespace: str, reason: str) -> list[Obj]:
    items = cluster.get_json("events.v1.events.k8s.io", "-n", namespace)["items"]
    return [
        e
        for e in items
        if (e.get("regarding") or {}).get("name") == "apart" and e.get("reason") == reason
    ]


def test_a_job_kube_scheduler_always_refuses_fails_after_its_requeue_limit(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(
        f"--scheduling-unit={GPU}",
        "--resize-interval=0",
        "--pending-timeout=600",
        "--cooldown-base=1",
        "--requeue-limit=1",
    )
    world = World(crds_installed, namespace)
    with explained(op):
        world.apply(trainingjob("apart", min_size=2, max_size=2, affinity=APART))

        def status() -> Obj:
            return dict(world.jobs()["apart"].get("status") or {})

        failed = wait_for(
            status,
            lambda s: s.get("stage") == "Failed",
            timeout=TIMEOUT,
            interval=0.5,
            what="apart fails its requeue limit",
        )
        assert (failed["reason"], failed["currentSize"], failed["requeueCount"]) == (
            "RequeueLimitExceeded",
            0,
            1,
        )
        message = str(failed["message"])
        assert message.startswith("requeued 1 time for pods that could not start (limit 1)")
        assert "; last message from kube-scheduler: 0/1 nodes are available" in message
        assert "anti-affinity" in message

        requeued = _events(world.cluster, namespace, "Requeued")
        assert len(requeued) == 1, requeued
        assert "last message from kube-scheduler: 0/1 nodes are available" in requeued[0]["note"]

        # kubectl wait reads status.conditions: the TrainingJob shows its Failed condition there.
        world.cluster.kubectl(
            "wait",
            "--for=condition=Failed",
            "trainingjob/apart",
            "-n",
            namespace,
            "--timeout=60s",
            timeout=90,
        )
        conditions = {c["type"]: c for c in status().get("conditions") or ()}
        assert (conditions["Failed"]["reason"], conditions["Failed"]["message"]) == (
            "RequeueLimitExceeded",
            message,
        )
        warning = wait_for(
            lambda: _events(world.cluster, namespace, "RequeueLimitExceeded"),
            timeout=30,
            what="a RequeueLimitExceeded event about apart",
        )
        assert (warning[0]["type"], warning[0]["note"]) == ("Warning", message)
        wait_for(lambda: world.pod_names("apart"), lambda p: p == [], what="pods deleted")

        final = status()
        assert (final["stage"], final["requeueCount"], final["reason"]) == (
            "Failed",
            1,
            "RequeueLimitExceeded",
        )
        assert final.get("completionTime"), "the scheduler records when it ended"
