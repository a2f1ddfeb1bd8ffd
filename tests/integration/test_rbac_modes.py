"""Every right each install mode grants the operator is the documented one, no more, no less.

The manifests of both modes are rendered as a user installs them (``kubectl kustomize deploy/``
and ``deploy/namespaced``; ``helm template`` with ``rbac.scope`` cluster and namespaced). The
operator ServiceAccount's effective grants are computed from the bindings that name it, as
(API group, resource, verb, scope) with scope ``cluster``, ``operator namespace`` or ``watched
namespaces``, and compared, both ways, with the tables of docs/operations.md ("Blast radius of
each install mode"). Needs the kubectl and helm that ``hack/controlplane/build.sh`` builds, not a
running cluster, except the server dry run of the namespaced mode.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import CONTROLPLANE, REPO, Cluster

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "lattice-operator"
DOCS = REPO / "docs" / "operations.md"
SA = "lattice-operator"
Grant = tuple[str, str, str, str]  # group, resource, verb, scope
Docs = list[dict[str, Any]]
Render = Callable[..., str]
TABLES = {"cluster": "**Cluster mode**", "namespaced": "**Namespace-scoped mode**"}


@pytest.fixture(scope="module")
def tool() -> Render:
    dirs = subprocess.run(
        [str(CONTROLPLANE / "build.sh"), "paths"], capture_output=True, text=True, check=True
    ).stdout.split()

    def run(name: str, *args: str) -> str:
        exe = next((Path(d) / name for d in dirs if (Path(d) / name).is_file()), None)
        if exe is None:
            pytest.fail(f"{name} is not built: run hack/controlplane/build.sh", pytrace=False)
        proc = subprocess.run(
            [str(exe), *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, f"{name} {' '.join(args)}:\n{proc.stderr}"
        return proc.stdout

    return run


def _docs(text: str) -> Docs:
    return [d for d in yaml.safe_load_all(text) if d]


def rendered(tool: Render, mode: str, source: str) -> Docs:
    if source == "kustomize":
        return _docs(
            tool(
                "kubectl", "kustomize", str(DEPLOY if mode == "cluster" else DEPLOY / "namespaced")
            )
        )
    args = [
        "template",
        "operator",
        str(CHART),
        "-n",
        "lattice-system",
        "--set",
        f"rbac.scope={mode}",
    ]
    if mode == "namespaced":
        args += ["--set", "monitorNamespace=team-a\\,team-b"]
    return _docs(tool("helm", *args))


def watched_namespaces(docs: Docs) -> set[str]:
    """The namespaces the Deployment tells the operator to watch (empty: all)."""
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    env = {
        e["name"]: e.get("value", "")
        for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    raw = env.get("LATTICE_NAMESPACES") or env.get("MONITOR_NAMESPACE") or ""
    return {part.strip() for part in raw.split(",") if part.strip()}


def grants(docs: Docs) -> tuple[set[Grant], dict[str, set[Grant]]]:
    """The operator ServiceAccount's grants, and those of each watched namespace apart."""
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    home = deploy["metadata"]["namespace"]
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d.get("rules") or []
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    out: set[Grant] = set()
    per_ns: dict[str, set[Grant]] = {}
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = binding.get("subjects") or []
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == SA and s["namespace"] == home
            for s in subjects
        ):
            continue
        ref = binding["roleRef"]
        ns = binding["metadata"].get("namespace")
        rules = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        if binding["kind"] == "ClusterRoleBinding":
            scope = "cluster"
        elif ns == home:
            scope = "operator namespace"
        else:
            scope = "watched namespaces"
        for rule in rules:
            assert not rule.get("resourceNames"), "the tables have no resourceNames column"
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    for verb in rule["verbs"]:
                        grant = (group, res, verb, scope)
                        out.add(grant)
                        if scope == "watched namespaces":
                            per_ns.setdefault(ns, set()).add(grant)
    return out, per_ns


def documented(mode: str) -> set[Grant]:
    """The rows of the mode's table in docs/operations.md, expanded."""
    text = DOCS.read_text()
    start = text.index(TABLES[mode])
    lines = text[start:].splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("| API group |"))
    out: set[Grant] = set()
    for line in lines[head + 2 :]:
        if not line.startswith("|"):
            break
        group, resources, verbs, scope, _why = (c.strip() for c in line.strip("|").split("|"))
        for res in re.split(r",\s*", resources):
            for verb in re.split(r",\s*", verbs):
                out.add(("" if group == "core" else group, res, verb, scope))
    assert out, f"no table after {TABLES[mode]}"
    return out


def difference(actual: set[Grant], docs: set[Grant]) -> dict[str, list[Grant]]:
    return {
        k: v
        for k, v in (
            ("granted but not documented", sorted(actual - docs)),
            ("documented but not granted", sorted(docs - actual)),
        )
        if v
    }


@pytest.mark.parametrize("source", ["kustomize", "helm"])
@pytest.mark.parametrize("mode", ["cluster", "namespaced"])
def test_the_grants_are_exactly_the_documented_table(tool: Render, mode: str, source: str) -> None:
    docs = rendered(tool, mode, source)
    actual, per_ns = grants(docs)
    assert difference(actual, documented(mode)) == {}
    if mode == "namespaced":
        watched = watched_namespaces(docs)
        assert watched, "namespaced mode runs the operator with --namespaces"
        assert set(per_ns) == watched, "a Role in exactly the namespaces it watches"
        for ns, got in per_ns.items():
            expected = {g for g in actual if g[3] == "watched namespaces"}
            assert got == expected, f"{ns} lacks {expected - got}"
        cluster_wide = {(g, r) for g, r, _, scope in actual if scope == "cluster"}
        assert cluster_wide == {
            ("", "nodes"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("trainer.kubeflow.org", "clustertrainingruntimes"),
        }


def test_one_grant_more_or_less_is_caught() -> None:
    docs = documented("namespaced")
    extra = ("", "secrets", "update", "watched namespaces")
    assert difference(docs | {extra}, docs) == {"granted but not documented": [extra]}
    missing = ("", "pods", "delete", "watched namespaces")
    assert difference(docs - {missing}, docs) == {"documented but not granted": [missing]}
    widened = ("", "secrets", "list", "cluster")
    assert "granted but not documented" in difference(docs | {widened}, docs)


def test_the_namespaced_mode_has_no_cluster_wide_read_of_namespaced_objects() -> None:
    cluster_rows = {r for _, r, _, scope in documented("namespaced") if scope == "cluster"}
    assert cluster_rows == {"nodes", "priorityclasses", "clustertrainingruntimes"}


def test_the_namespaced_mode_applies_with_a_server_dry_run(tool: Render, cluster: Cluster) -> None:
    """Both renderings of the namespaced mode are valid objects for a real apiserver."""
    cluster.kubectl("apply", "-f", str(DEPLOY / "manager" / "namespace.yaml"))
    for name in ("team-a", "team-b"):
        if not cluster.exists("namespace", name):
            cluster.kubectl("create", "namespace", name)
    for source in ("kustomize", "helm"):
        docs = rendered(tool, "namespaced", source)
        proc = subprocess.run(
            ["kubectl", "apply", "--dry-run=server", "-f", "-"],
            input="\n---\n".join(yaml.safe_dump(d) for d in docs),
            capture_output=True,
            text=True,
            env=cluster.env,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, f"{source}: {proc.stderr}"
        assert "role.rbac.authorization.k8s.io/lattice-operator" in proc.stdout, proc.stdout
