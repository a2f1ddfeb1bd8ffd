"""The deploy/ RBAC is sufficient and least; ``lattice run`` works in in-cluster mode.

- **Sufficient.** ``deploy/rbac`` is applied as is, and the operator authenticates as its
  ServiceAccount ``lattice-system/lattice-operator`` with a token from the TokenRequest API (a
  kubeconfig's impersonation fields would do as well: tests/e2e/test_impersonation.py).
  Impersonation (``kubectl auth can-i --as``) confirms the grants are live first. With leader
  election on a Lease in ``lattice-system`` (the namespaced Role), it runs steps 1-4 of the
  TrainingJob walk, and its own ``rest_client_requests_total`` counts no 401 or 403.
- **Least.** A copy of the ClusterRole without ``delete`` on pods, bound to another
  ServiceAccount: a job that must shrink for a newcomer never does. The operator records
  ``FailedDeletePod`` (forbidden), the job keeps all its pods, and the newcomer's pods stay Pending.
- **Namespace-scoped mode.** A ServiceAccount bound only to the ``deploy/namespaced`` rights
  (cluster-scoped reads, the job_namespace Role in the test's namespace, the leader-election
  Role) runs, with ``--namespaces``, a job and a preemption without a single 401 or 403: no list
  or watch of the operator is cluster-wide, and none needs to be.
- **In-cluster mode.** ``lattice run`` gets no kubeconfig, only ``KUBERNETES_SERVICE_HOST`` and
  ``KUBERNETES_SERVICE_PORT`` pointing at the local apiserver and a service-account directory
  (token from the TokenRequest API, the cluster CA, the namespace) named by
  ``--service-account-dir`` (in a pod it defaults to the mounted
  ``/var/run/secrets/kubernetes.io/serviceaccount``). It reconciles a job, holds the Lease, and
  exits 0 on SIGTERM.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import LATTICE, OperatorProcess, Pool, explained, free_port
from tests.e2e.test_trainingjob_scheduling import GPU, World
from tests.support.builders import trainingjob
from tests.support.cluster import REPO, Cluster
from tests.support.wait import wait_for

SYSTEM_NS = "lattice-system"
SA_NAME = "lattice-operator"
SA_USER = f"system:serviceaccount:{SYSTEM_NS}:{SA_NAME}"
RBAC = REPO / "deploy" / "rbac"


@pytest.fixture(scope="module")
def deploy_rbac(crds_installed: Cluster) -> Cluster:
    """``deploy/rbac`` applied unchanged (and its namespace from ``deploy/manager``)."""
    crds_installed.kubectl("apply", "-f", str(REPO / "deploy" / "manager" / "namespace.yaml"))
    crds_installed.kubectl("apply", "-k", str(RBAC))
    return crds_installed


def can_i(cluster: Cluster, user: str, verb: str, resource: str, namespace: str) -> bool:
    """``kubectl auth can-i`` as ``user``, through impersonation by the admin.

    ``resource`` may name a subresource after a slash (``trainingjobs.breezeml.ai/status``).
    """
    kind, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, kind, "-n", namespace, f"--as={user}"]
    if sub:
        args.append(f"--subresource={sub}")
    return cluster.kubectl(*args, check=False).strip() == "yes"


def token(cluster: Cluster, name: str, namespace: str) -> str:
    """A bound ServiceAccount token from the TokenRequest API."""
    return cluster.kubectl("create", "token", name, "-n", namespace, "--duration=1h").strip()


def _admin_cluster_entry(cluster: Cluster) -> dict[str, Any]:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    entry: dict[str, Any] = config["clusters"][0]["cluster"]
    return entry


def token_kubeconfig(cluster: Cluster, bearer: str, path: Path) -> Path:
    """A kubeconfig for the local apiserver whose only credential is ``bearer``."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "local", "cluster": _admin_cluster_entry(cluster)}],
                "users": [{"name": "sa", "user": {"token": bearer}}],
                "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    return path


def request_codes(op: OperatorProcess) -> dict[str, float]:
    """``rest_client_requests_total`` of the running operator, summed per status code."""
    addr = op.args[op.args.index("--metrics-addr") + 1]
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    codes: dict[str, float] = {}
    for m in re.finditer(r'^rest_client_requests_total\{code="(\d+)"[^}]*\} (\S+)$', text, re.M):
        codes[m.group(1)] = codes.get(m.group(1), 0.0) + float(m.group(2))
    return codes


def test_operator_runs_the_walk_as_the_deploy_service_account(
    deploy_rbac: Cluster, namespace: str, pool: Pool, operator: Any, tmp_path: Path
) -> None:
    cluster = deploy_rbac
    pool.add(count=2, gpus=4)
    grants = (
        ("list", "trainingjobs.breezeml.ai"),
        ("patch", "trainingjobs.breezeml.ai/status"),
        ("create", "pods"),
        ("delete", "pods"),
        ("create", "events.events.k8s.io"),
    )
    wait_for(
        lambda: [g for g in grants if not can_i(cluster, SA_USER, *g, namespace)],
        lambda missing: not missing,
        what=f"{SA_USER} has the deploy grants",
    )
    assert can_i(cluster, SA_USER, "update", "leases.coordination.k8s.io", SYSTEM_NS)
    # Least privilege, seen from outside: no write the code never makes.
    assert not can_i(cluster, SA_USER, "update", "pods", namespace)
    assert not can_i(cluster, SA_USER, "update", "trainingjobs.breezeml.ai", namespace)
    assert not can_i(cluster, SA_USER, "update", "trainingjobs.breezeml.ai/status", namespace)
    assert not can_i(cluster, SA_USER, "update", "secrets", namespace)
    assert not can_i(cluster, SA_USER, "get", "leases.coordination.k8s.io", namespace)

    kubeconfig = token_kubeconfig(cluster, token(cluster, SA_NAME, SYSTEM_NS), tmp_path / "sa")
    lease = f"rbac-{namespace}"
    # The fixture's own --kubeconfig (the admin's) comes first; the later one wins.
    op: OperatorProcess = operator(
        "--kubeconfig",
        str(kubeconfig),
        f"--scheduling-unit={GPU}",
        "--resize-interval=0",
        "--leader-elect",
        f"--leader-election-namespace={SYSTEM_NS}",
        f"--leader-election-id={lease}",
    )
    world = World(cluster, namespace)
    with explained(op):
        world.apply(trainingjob("a", min_size=2, max_size=4))
        world.expect({"a": 4}, what="step 1: A=4")
        world.apply(trainingjob("b", min_size=2, max_size=4))
        world.expect({"a": 4, "b": 4}, what="step 2: A=4, B=4")
        world.apply(trainingjob("c", min_size=2, max_size=4))
        world.expect({"a": 4, "b": 2, "c": 2}, what="step 3: A=4, B=2, C=2")
        world.apply(trainingjob("d", min_size=4, max_size=4, priority=10))
        world.expect(
            {"d": 4, "a": 2, "b": 2}, waiting=("c",), what="step 4: D=4, A=2, B=2, C waits"
        )
        holder = cluster.get_json("lease", lease, "-n", SYSTEM_NS)["spec"].get("holderIdentity")
        assert holder, "the operator holds its Lease in lattice-system"
        events = cluster.get_json("events.v1.events.k8s.io", "-n", namespace)["items"]
        assert {"SuccessfulCreatePod", "SuccessfulDeletePod"} <= {e["reason"] for e in events}
        codes = request_codes(op)
        assert codes.get("200", 0) > 0
        denied = {c: n for c, n in codes.items() if c in ("401", "403")}
        assert not denied, f"requests refused: {denied}"


def _without(rules: list[dict[str, Any]], *, resource: str, verb: str) -> list[dict[str, Any]]:
    out = []
    for original in rules:
        rule = dict(original)
        if rule.get("apiGroups") == [""] and rule.get("resources") == [resource]:
            assert verb in rule["verbs"], f"{resource} rule has no {verb}"
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
        out.append(rule)
    return out


@pytest.fixture
def minus_pod_delete(deploy_rbac: Cluster, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for a ServiceAccount bound to the deploy ClusterRole less pods ``delete``.

    The reduced grants are live (checked by impersonation) when it is returned.
    """
    cluster = deploy_rbac
    role = yaml.safe_load((RBAC / "cluster_role.yaml").read_text())
    name = f"lattice-minus-pod-delete-{namespace}"
    role["metadata"] = {"name": name}
    role["rules"] = _without(role["rules"], resource="pods", verb="delete")
    cluster.kubectl("create", "serviceaccount", "minus", "-n", namespace)
    cluster.apply(role)
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        name,
        f"--clusterrole={name}",
        f"--serviceaccount={namespace}:minus",
    )
    user = f"system:serviceaccount:{namespace}:minus"
    try:
        wait_for(
            lambda: can_i(cluster, user, "create", "pods", namespace),
            what="the reduced role is live",
        )
        assert not can_i(cluster, user, "delete", "pods", namespace)
        yield token_kubeconfig(cluster, token(cluster, "minus", namespace), tmp_path / "minus")
    finally:
        cluster.kubectl("delete", "clusterrolebinding", name, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "clusterrole", name, "--ignore-not-found", check=False)


def test_one_rule_less_and_a_preempted_job_never_shrinks(
    deploy_rbac: Cluster, namespace: str, pool: Pool, operator: Any, minus_pod_delete: Path
) -> None:
    cluster = deploy_rbac
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(
        "--kubeconfig", str(minus_pod_delete), f"--scheduling-unit={GPU}", "--resize-interval=0"
    )
    world = World(cluster, namespace)
    with explained(op):
        world.apply(trainingjob("a", min_size=2, max_size=4))
        world.expect({"a": 4}, what="A=4 (creating pods is still allowed)")
        world.apply(trainingjob("b", min_size=2, max_size=4))

        def refused_deletes() -> list[dict[str, Any]]:
            events = cluster.get_json("events.v1.events.k8s.io", "-n", namespace)["items"]
            return [
                e
                for e in events
                if e.get("reason") == "FailedDeletePod"
                and e["regarding"]["name"] == "a"
                and "forbidden" in e.get("note", "").lower()
            ]

        wait_for(refused_deletes, timeout=60, what="A's shrink is refused (FailedDeletePod)")
        # The scheduler cut A to 2 for B, but A cannot give its GPUs back, so B never starts.
        sizes = world.sizes()
        assert sizes["a"][1] == 2, sizes
        assert sizes["a"][2:] == (4, 4), f"A keeps all its pods: {sizes}"
        phases = [p["status"].get("phase") for p in world.pods().get("b", [])]
        assert all(ph == "Pending" for ph in phases), f"B's pods wait for GPUs: {phases}"
        assert request_codes(op).get("403", 0) > 0


def test_in_cluster_mode_reconciles_a_job(
    deploy_rbac: Cluster, namespace: str, pool: Pool, tmp_path: Path
) -> None:
    cluster = deploy_rbac
    pool.add(count=1, gpus=4)
    sa_files = tmp_path / "serviceaccount"
    sa_files.mkdir()
    (sa_files / "token").write_text(token(cluster, SA_NAME, SYSTEM_NS))
    shutil.copy(_admin_cluster_entry(cluster)["certificate-authority"], sa_files / "ca.crt")
    (sa_files / "namespace").write_text(SYSTEM_NS)

    server = _admin_cluster_entry(cluster)["server"]
    host, _, port = server.removeprefix("https://").rpartition(":")
    pod_name = f"lattice-operator-{uuid.uuid4().hex[:6]}"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "LATTICE_CONTEXT")}
    env.update(
        {
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
            "POD_NAME": pod_name,
            "POD_NAMESPACE": SYSTEM_NS,
            "PATH": cluster.env["PATH"],
            "HOME": str(tmp_path),  # no ~/.kube/config to fall back on
        }
    )
    lease = f"incluster-{namespace}"
    args = [
        "--namespaces",
        namespace,
        "--metrics-addr",
        f"127.0.0.1:{free_port()}",
        "--probe-addr",
        f"127.0.0.1:{free_port()}",
        "--node-selector-path",
        str(pool.selector_file),
        "--log-format",
        "console",
        f"--scheduling-unit={GPU}",
        "--resize-interval=0",
        "--leader-elect",
        f"--leader-election-id={lease}",
        f"--service-account-dir={sa_files}",
    ]
    op = OperatorProcess(args, env, tmp_path / "operator")
    op.starts = 1
    log = op.log_path.with_suffix(".1.log").open("wb")
    op.popen = subprocess.Popen(
        [LATTICE, "run", *args], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    world = World(cluster, namespace)
    try:
        with explained(op):
            world.apply(trainingjob("a", min_size=1, max_size=2))
            world.expect({"a": 2}, what="the in-cluster operator runs A with 2 pods")
            holder = cluster.get_json("lease", lease, "-n", SYSTEM_NS)["spec"].get("holderIdentity")
            assert holder == pod_name, "POD_NAME is the leader identity, in POD_NAMESPACE"
            assert not {c for c in request_codes(op) if c in ("401", "403")}
            assert op.popen is not None
            op.popen.terminate()
            assert op.popen.wait(timeout=40) == 0, "SIGTERM drains, releases the Lease, exits 0"
            released = cluster.get_json("lease", lease, "-n", SYSTEM_NS)["spec"]
            assert not released.get("holderIdentity"), f"the Lease is released: {released}"
    finally:
        op.stop()
        log.close()


NAMESPACED = REPO / "deploy" / "namespaced"


@pytest.fixture
def namespaced_sa(deploy_rbac: Cluster, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for a ServiceAccount bound only to the ``deploy/namespaced`` rights: its
    ClusterRole of cluster-scoped reads, the job_namespace Role in this test's namespace, and the
    leader-election Role in lattice-system, renamed so nothing else binds them.
    """
    cluster = deploy_rbac
    sa = "nsop"
    suffix = f"ns-{namespace}"
    subject = [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]
    cluster.kubectl("create", "serviceaccount", sa, "-n", namespace)
    docs: list[dict[str, Any]] = []
    for path, ns in (
        (NAMESPACED / "cluster_role.yaml", None),
        (NAMESPACED / "cluster_role_binding.yaml", None),
        (NAMESPACED / "job_namespace" / "role.yaml", namespace),
        (NAMESPACED / "leader_election_role.yaml", SYSTEM_NS),
    ):
        for doc in yaml.safe_load_all(path.read_text()):
            doc["metadata"]["name"] = f"{doc['metadata']['name']}-{suffix}"
            if ns is not None:
                doc["metadata"]["namespace"] = ns
            if "roleRef" in doc:
                doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
                doc["subjects"] = subject
            docs.append(doc)
    cluster.apply("\n---\n".join(yaml.safe_dump(d) for d in docs))
    user = f"system:serviceaccount:{namespace}:{sa}"
    try:
        wait_for(
            lambda: can_i(cluster, user, "create", "pods", namespace),
            what="the namespaced Role is live",
        )
        yield token_kubeconfig(cluster, token(cluster, sa, namespace), tmp_path / "nsop")
    finally:
        for doc in docs:
            if doc["kind"].startswith("Cluster"):
                cluster.kubectl(
                    "delete",
                    doc["kind"],
                    doc["metadata"]["name"],
                    "--ignore-not-found",
                    check=False,
                )
        for doc in docs:
            if doc["metadata"].get("namespace") == SYSTEM_NS:
                cluster.kubectl(
                    "delete",
                    doc["kind"],
                    doc["metadata"]["name"],
                    "-n",
                    SYSTEM_NS,
                    "--ignore-not-found",
                    check=False,
                )


def test_namespaced_mode_runs_a_job_with_only_the_namespaced_roles(
    deploy_rbac: Cluster, namespace: str, pool: Pool, operator: Any, namespaced_sa: Path
) -> None:
    cluster = deploy_rbac
    pool.add(count=1, gpus=4)
    user = f"system:serviceaccount:{namespace}:nsop"
    # The blast radius, seen from outside: nothing in another namespace, nothing cluster-wide
    # but the three cluster-scoped reads.
    for verb, resource, ns in (
        ("list", "secrets", "kube-system"),
        ("create", "pods", "kube-system"),
        ("list", "pods", "default"),
        ("get", "leases.coordination.k8s.io", namespace),
    ):
        assert not can_i(cluster, user, verb, resource, ns), f"{verb} {resource} in {ns}"
    for verb, resource, want in (
        ("list", "pods", "no"),
        ("list", "secrets", "no"),
        ("list", "trainingjobs.breezeml.ai", "no"),
        ("list", "nodes", "yes"),
        ("list", "priorityclasses.scheduling.k8s.io", "yes"),
    ):
        got = cluster.kubectl("auth", "can-i", verb, resource, "-A", f"--as={user}", check=False)
        assert got.strip() == want, f"cluster-wide {verb} {resource}: {got}"
    lease = f"nsop-{namespace}"
    op: OperatorProcess = operator(
        "--kubeconfig",
        str(namespaced_sa),
        f"--scheduling-unit={GPU}",
        "--resize-interval=0",
        "--leader-elect",
        f"--leader-election-namespace={SYSTEM_NS}",
        f"--leader-election-id={lease}",
    )
    world = World(cluster, namespace)
    try:
        world.apply(trainingjob("a", min_size=1, max_size=2))
        world.expect({"a": 2}, what="the namespaced operator runs A with 2 pods")
        world.apply(trainingjob("b", min_size=4, max_size=4, priority=10))
        world.expect({"b": 4}, waiting=("a",), what="B preempts A: pods deleted, Events posted")
        events = cluster.get_json("events.v1.events.k8s.io", "-n", namespace)["items"]
        assert {"SuccessfulCreatePod", "SuccessfulDeletePod"} <= {e["reason"] for e in events}
        codes = request_codes(op)
        denied = {c: n for c, n in codes.items() if c in ("401", "403")}
        assert not denied, f"a request needed more than the namespaced Roles: {denied}"
    except AssertionError:
        print(op.logs())
        raise
