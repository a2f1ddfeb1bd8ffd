"""Children the apiserver refuses to create (issue 26, item 2): the admission-refusal matrix.

Each case runs a job ``bad`` (4 GPUs, the whole node) whose pod the apiserver refuses, then a
job ``good`` that waits behind it for the node. For every cause (a missing PriorityClass, a
missing ServiceAccount, an exceeded ResourceQuota: 403 from admission; a pod name already taken
by an object no job controls, or by another job's pod: 409) the test asserts:

1. within seconds, ``bad`` shows ``Created=False``/``ChildCreateRefused`` carrying the
   apiserver's own words, and ``kubectl lattice explain`` shows them;
2. after ``--child-refusal-timeout`` ``bad`` is requeued (``RequeueCooldown``, a ``Requeued``
   event naming the refusal), it releases the node, and ``good`` is admitted and runs;
3. the taken name is never adopted: the foreign object keeps its owner, and the other job gets
   a ``ChildNameClash`` event;
4. the operator logs one structured line per refusal and no traceback.

Then: an MPIJob whose workers are refused never creates its launcher and never succeeds (a gang
never starts partially); a pod the apiserver rejects as invalid (422) makes the job ``Wrong``
with the apiserver's message; a 2^40 priority annotation makes an MPIJob ``Wrong`` naming the
field and the 1e9 cap; deleting a namespace with a running job logs no traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_kubectl_plugin import kubectl_lattice
from tests.e2e.test_mpijob import Watch
from tests.e2e.test_trainingjob_scheduling import GPU, World
from tests.support.apply import apply_and_wait
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for

TIMEOUT = 60.0
REFUSAL_TIMEOUT = 6
FLAGS = (f"--scheduling-unit={GPU}", "--resize-interval=0", "--cooldown-base=600")
Setup = Callable[[Cluster, str, dict[str, Any]], str]


@pytest.fixture(autouse=True)
def _short_refusal_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--child-refusal-timeout`` through its environment variable, which the operator
    fixture passes on (an operator without the setting ignores it)."""
    monkeypatch.setenv("LATTICE_CHILD_REFUSAL_TIMEOUT", str(REFUSAL_TIMEOUT))


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["replicaSpecs"]["template"]["spec"]
    return spec


def _missing_priority_class(cluster: Cluster, ns: str, bad: dict[str, Any]) -> str:
    _pod_spec(bad)["priorityClassName"] = "lattice-test-no-such-class"
    return "no PriorityClass with name lattice-test-no-such-class was found"


def _missing_service_account(cluster: Cluster, ns: str, bad: dict[str, Any]) -> str:
    _pod_spec(bad)["serviceAccountName"] = "no-such-account"
    return 'serviceaccount "no-such-account" not found'


def _quota_exceeded(cluster: Cluster, ns: str, bad: dict[str, Any]) -> str:
    """A quota of 2 GPUs: ``bad`` (4) exceeds it, ``good`` (2) fits. The local control plane
    runs no quota controller, so the test writes the quota's status as that controller would."""
    hard = {f"requests.{GPU}": "2"}
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpus"},
            "spec": {"hard": hard},
        },
        namespace=ns,
    )
    status = {"status": {"hard": hard, "used": {f"requests.{GPU}": "0"}}}
    cluster.kubectl(
        "patch",
        "resourcequota",
        "gpus",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    return "exceeded quota: gpus"


def _name_taken_by_no_one(cluster: Cluster, ns: str, bad: dict[str, Any]) -> str:
    cluster.apply(_bare_pod("bad-worker-0"), namespace=ns)
    return "Pod 'bad-worker-0' already exists and has no controller"


def _name_taken_by_another_job(cluster: Cluster, ns: str, bad: dict[str, Any]) -> str:
    """An MPIJob ``bad`` (1 GPU worker) owns ``bad-worker-0`` first; the TrainingJob ``bad``
    (3 GPUs) wants the same pod name."""
    cluster.apply(_mpijob("bad", worker_gpus=1), namespace=ns)
    wait_for(
        lambda: _owner_kind(cluster, ns, "bad-worker-0"),
        lambda kind: kind == "MPIJob",
        timeout=TIMEOUT,
        what="the MPIJob's worker bad-worker-0",
    )
    _pod_spec(bad)["containers"][0]["resources"] = {"requests": {GPU: "3"}, "limits": {GPU: "3"}}
    return "Pod 'bad-worker-0' already exists and is controlled by MPIJob"


CASES: dict[str, tuple[Setup, int]] = {
    # case -> (setup, GPUs of ``good``)
    "missing-priorityclass": (_missing_priority_class, 4),
    "missing-serviceaccount": (_missing_service_account, 4),
    "quota-exceeded": (_quota_exceeded, 2),
    "name-taken-by-no-one": (_name_taken_by_no_one, 4),
    "name-taken-by-another-job": (_name_taken_by_another_job, 3),
}


def _bare_pod(name: str) -> dict[str, Any]:
    """A pod no controller owns, which no node will take (it stays Pending)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"lattice.test/no-such-node": "true"},
            "containers": [{"name": "c", "image": "example.com/other:1"}],
        },
    }


def _mpijob(
    name: str, *, worker_gpus: int, worker_spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    def template(container: str, gpus: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        resources = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}} if gpus else {}
        spec = {"containers": [{"name": container, "image": "mpi:1", "resources": resources}]}
        return {"spec": {**spec, **(extra or {})}}

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template("launcher", 0)},
                "Worker": {"replicas": 1, "template": template("worker", worker_gpus, worker_spec)},
            }
        },
    }


def _owner_kind(cluster: Cluster, ns: str, pod: str) -> str | None:
    if not cluster.exists("pod", pod, "-n", ns):
        return None
    refs = cluster.get_json("pod", pod, "-n", ns)["metadata"].get("ownerReferences") or []
    return next((str(r.get("kind")) for r in refs if r.get("controller")), "")


def _events(
    cluster: Cluster, ns: str, *, kind: str, name: str, reason: str
) -> list[dict[str, Any]]:
    items = cluster.get_json("events.v1.events.k8s.io", "-n", ns)["items"]
    return [
        e
        for e in items
        if (e.get("regarding") or {}).get("name") == name
        and (e.get("regarding") or {}).get("kind") == kind
        and e.get("reason") == reason
    ]


def _created(world: World, name: str) -> dict[str, Any]:
    job = world.jobs().get(name) or {}
    conditions = ((job.get("status") or {}).get("execStatus") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Created"), {})


def _assert_quiet(op: OperatorProcess) -> None:
    log = op.logs(tail=None)
    assert "Traceback" not in log, "a traceback for an expected API error"
    assert "reconcile.error" not in log, "a refusal failed the reconcile"


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_child_is_shown_then_releases_the_capacity(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any, case: str
) -> None:
    setup, good_gpus = CASES[case]
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        bad = trainingjob("bad", gpus=4)
        words = setup(crds_installed, namespace, bad)
        world.apply(bad)
        refused = wait_for(
            lambda: _created(world, "bad"),
            lambda c: c.get("reason") == "ChildCreateRefused",
            timeout=20,
            what="bad shows ChildCreateRefused",
        )
        assert refused["status"] == "False"
        assert words in refused["message"], refused
        world.apply(trainingjob("good", gpus=good_gpus))
        explain = kubectl_lattice(crds_installed, "explain", "trainingjob/bad", "-n", namespace)
        assert words in explain, explain

        status = wait_for(
            lambda: dict(world.jobs()["bad"].get("status") or {}),
            lambda s: s.get("stage") == "RequeueCooldown",
            timeout=TIMEOUT,
            what="bad is requeued",
        )
        assert status["currentSize"] == 0
        assert "the apiserver refused its children" in status["lastDecision"]
        assert words in status["lastDecision"]
        world.expect({"good": 1}, what="good gets the capacity bad released")
        requeued = wait_for(
            lambda: _events(
                crds_installed, namespace, kind="TrainingJob", name="bad", reason="Requeued"
            ),
            timeout=20,
            what="a Requeued event about bad",
        )
        assert words in requeued[-1]["note"]
        explain = kubectl_lattice(crds_installed, "explain", "trainingjob/bad", "-n", namespace)
        assert "refused its children" in explain, explain

        if case.startswith("name-taken"):
            owner = "MPIJob" if case == "name-taken-by-another-job" else ""
            assert _owner_kind(crds_installed, namespace, "bad-worker-0") == owner, "adopted"
        if case == "name-taken-by-another-job":
            clash = wait_for(
                lambda: _events(
                    crds_installed, namespace, kind="MPIJob", name="bad", reason="ChildNameClash"
                ),
                timeout=20,
                what="a ChildNameClash event on the MPIJob",
            )
            assert "TrainingJob" in clash[0]["note"]
        assert "child.create_refused" in op.logs(tail=None)
        _assert_quiet(op)


def test_an_mpijob_whose_workers_are_refused_never_starts_its_launcher(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    jobs = Watch(crds_installed, namespace, "jobs.batch")
    try:
        with explained(op):
            manifest = _mpijob("gang", worker_gpus=1, worker_spec={"serviceAccountName": "nobody"})
            manifest["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 2
            crds_installed.apply(manifest, namespace=namespace)

            def lattice() -> dict[str, Any]:
                obj = crds_installed.get_json("mpijob", "gang", "-n", namespace)
                return dict((obj.get("status") or {}).get("lattice") or {})

            wait_for(
                lattice,
                lambda s: s.get("stage") == "RequeueCooldown",
                timeout=TIMEOUT,
                what="the refused gang is requeued",
            )
            obj = crds_installed.get_json("mpijob", "gang", "-n", namespace)
            conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
            assert conditions.get("Succeeded", {}).get("status") != "True", conditions
            assert "gang-launcher" not in jobs.names(), "the launcher started without workers"
            assert not crds_installed.exists("job", "gang-launcher", "-n", namespace)
            _assert_quiet(op)
    finally:
        jobs.stop()


def test_a_pod_the_apiserver_rejects_as_invalid_makes_the_job_wrong(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        bad = trainingjob("bad", gpus=4)
        _pod_spec(bad)["containers"][0]["env"] = [{"name": "A", "valueFrom": {}}]
        status = apply_and_wait(
            crds_installed,
            bad,
            namespace=namespace,
            until=lambda s: s.get("stage") in ("Wrong", "Completed"),
            timeout=TIMEOUT,
            what="bad is given up",
        )
        assert status["stage"] == "Wrong", status
        assert status.get("reason") == "InvalidSpec"
        assert "the apiserver refused Pod bad-worker-0" in status.get("message", ""), status
        world.apply(trainingjob("good", gpus=4))
        world.expect({"good": 1}, what="good runs on the capacity bad never kept")
        _assert_quiet(op)


def test_a_priority_beyond_the_cap_is_refused_naming_the_field(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    with explained(op):
        manifest = _mpijob("huge", worker_gpus=1)
        manifest["metadata"]["annotations"] = {"lattice.breezeml.ai/priority": str(2**40)}
        status = apply_and_wait(
            crds_installed,
            manifest,
            namespace=namespace,
            until=lambda s: (s.get("lattice") or {}).get("stage") == "Wrong",
            timeout=TIMEOUT,
            what="huge is Wrong",
        )
        message = status["lattice"]["message"]
        assert "metadata.annotations[lattice.breezeml.ai/priority]" in message, message
        assert "1000000000" in message, message
        assert not crds_installed.exists("pods", "huge-worker-0", "-n", namespace)


def test_deleting_a_namespace_with_a_running_job_logs_no_traceback(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    world = World(crds_installed, namespace)
    with explained(op):
        world.apply(trainingjob("doomed", min_size=2, max_size=2))
        world.expect({"doomed": 2}, what="doomed runs")
        crds_installed.kubectl("delete", "namespace", namespace, "--wait=false")
        wait_for(
            lambda: crds_installed.exists("namespace", namespace),
            lambda present: not present,
            timeout=120,
            what=f"namespace {namespace} is gone",
        )
        _assert_quiet(op)
