"""``lattice run --kubeconfig`` acts as the kubeconfig's user says, impersonation included.

The admin's kubeconfig gets ``as: system:serviceaccount:<ns>:norights``, a ServiceAccount bound
to nothing. kubectl with that kubeconfig is refused; so is the operator: the apiserver
authenticates it as ``norights`` (its ``operator.identity`` line), every list is forbidden
(``reflector.denied`` with the apiserver's message, no traceback), ``/readyz`` stays 503 naming
the refusal, and a TrainingJob applied by the admin gets no status and no pod. Without the
``as`` field the same operator would act as the admin. A kubeconfig with ``as-groups`` but no
``as`` is refused at start, naming the field.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import LATTICE, OperatorProcess, Pool
from tests.e2e.test_apiserver_outage import plain_logs, probe
from tests.e2e.test_trainingjob_scheduling import GPU, World
from tests.support.builders import trainingjob
from tests.support.cluster import Cluster
from tests.support.wait import wait_for


def impersonating(cluster: Cluster, path: Path, **fields: Any) -> Path:
    """The admin kubeconfig with impersonation ``fields`` on its user."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"][0]["user"].update(fields)
    path.write_text(yaml.safe_dump(config))
    return path


def test_an_impersonated_user_without_rights_is_denied_like_kubectl(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any, tmp_path: Path
) -> None:
    cluster = crds_installed
    pool.add(count=1, gpus=4)
    cluster.kubectl("create", "serviceaccount", "norights", "-n", namespace)
    user = f"system:serviceaccount:{namespace}:norights"
    kubeconfig = impersonating(cluster, tmp_path / "as-norights", **{"as": user})

    kubectl = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "get", "trainingjobs", "-n", namespace],
        capture_output=True,
        text=True,
        env=cluster.env,
        check=False,
    )
    assert kubectl.returncode != 0
    assert "forbidden" in kubectl.stderr, kubectl.stderr
    assert user in kubectl.stderr, kubectl.stderr

    op: OperatorProcess = operator("--kubeconfig", str(kubeconfig), f"--scheduling-unit={GPU}")
    world = World(cluster, namespace)
    world.apply(trainingjob("a", min_size=1, max_size=1))
    try:
        logs = wait_for(
            lambda: plain_logs(op),
            lambda text: "reflector.denied" in text and "trainingjobs" in text,
            timeout=30,
            what="the operator's lists are refused",
        )
        assert f"user={user}" in logs, "the apiserver authenticated it as the impersonated user"
        assert f'User "{user}" cannot list resource' in logs
        assert "Traceback" not in logs, "a refusal is reported, not crashed on"
        code, body = probe(op, "/readyz")
        assert code == 503
        assert "not synced" in body, body
        assert op.popen is not None
        assert op.popen.poll() is None, "it keeps trying: RBAC may be granted later"
        job = world.jobs()["a"]
        assert not job.get("status"), "nothing was written with the admin's rights"
        assert world.pods() == {}
    except AssertionError:
        print(op.logs())
        raise


def test_groups_without_a_user_refuse_to_start_naming_the_field(
    crds_installed: Cluster, tmp_path: Path
) -> None:
    kubeconfig = impersonating(crds_installed, tmp_path / "groups-only", **{"as-groups": ["a"]})
    proc = subprocess.run(
        [LATTICE, "run", "--kubeconfig", str(kubeconfig), "--log-format", "console"],
        capture_output=True,
        text=True,
        env=crds_installed.env,
        timeout=60,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "as-groups set without `as`" in out, out
    assert "Traceback" not in out
