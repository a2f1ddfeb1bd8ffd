"""``kubectl lattice`` reads through ``kubectl get --raw`` and imports no operator dependency.

A stand-in ``kubectl`` (a shell script) records its arguments and answers like the real one:
JSON on success, ``Error from server (Reason): message`` and exit 1 on an API error.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lattice.api import constants
from lattice.kubectl.transport import (
    EVENTS,
    PRIORITY_CLASSES,
    ApiError,
    Forbidden,
    KubectlReader,
    NotFound,
    error_from_stderr,
    resource_path,
)


def fake_kubectl(tmp_path: Path, *, stdout: str = "", stderr: str = "", code: int = 0) -> Path:
    script = tmp_path / "kubectl"
    (tmp_path / "out").write_text(stdout)
    (tmp_path / "err").write_text(stderr)
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{tmp_path}/argv"\n'
        f'cat "{tmp_path}/out"; cat "{tmp_path}/err" >&2; exit {code}\n'
    )
    script.chmod(0o755)
    return script


def test_paths_of_namespaced_cluster_and_core_resources() -> None:
    tj = constants.TRAININGJOB
    assert resource_path(tj) == "/apis/breezeml.ai/v1/trainingjobs"
    assert (
        resource_path(tj, namespace="ml", name="a")
        == "/apis/breezeml.ai/v1/namespaces/ml/trainingjobs/a"
    )
    assert (
        resource_path(PRIORITY_CLASSES, namespace="ml")
        == "/apis/scheduling.k8s.io/v1/priorityclasses"
    )
    core = constants.Resource(group="", version="v1", kind="Pod", plural="pods")
    assert resource_path(core, namespace="x") == "/api/v1/namespaces/x/pods"


def test_a_list_passes_kubeconfig_context_and_query(tmp_path: Path) -> None:
    kubectl = fake_kubectl(tmp_path, stdout=json.dumps({"items": [{"a": 1}]}))
    reader = KubectlReader(kubeconfig="/k/config", context="dev", kubectl=str(kubectl))
    page = asyncio.run(
        reader.list(EVENTS, namespace="ml", field_selector="regarding.name=w", limit=500,
                    continue_token="tok")
    )  # fmt: skip
    assert page == {"items": [{"a": 1}]}
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv == [
        "--kubeconfig", "/k/config", "--context", "dev", "get", "--raw",
        "/apis/events.k8s.io/v1/namespaces/ml/events"
        "?fieldSelector=regarding.name%3Dw&limit=500&continue=tok",
    ]  # fmt: skip


def test_kubectl_errors_become_typed_errors(tmp_path: Path) -> None:
    missing = "Error from server (NotFound): the server could not find the requested resource\n"
    reader = KubectlReader(kubectl=str(fake_kubectl(tmp_path, stderr=missing, code=1)))
    with pytest.raises(NotFound, match="could not find"):
        asyncio.run(reader.get(constants.MXJOB, "x", namespace="ml"))
    assert (tmp_path / "argv").read_text().splitlines() == [
        "get", "--raw", "/apis/kubeflow.org/v1/namespaces/ml/mxjobs/x"
    ]  # fmt: skip
    assert isinstance(error_from_stderr("Error from server (Forbidden): no"), Forbidden)
    other = error_from_stderr("error: You must be logged in to the server (Unauthorized)")
    assert type(other) is ApiError
    assert "logged in" in str(other)
    with pytest.raises(ApiError, match="cannot run"):
        asyncio.run(KubectlReader(kubectl=str(tmp_path / "absent")).get(EVENTS, "e"))


def test_importing_the_plugin_loads_no_operator_dependency() -> None:
    code = (
        "import sys, lattice.kubectl, lattice.kubectl.commands\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    loaded = set(subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split())  # fmt: skip
    heavy = {"kubernetes_asyncio", "kubernetes", "aiohttp", "prometheus_client", "structlog"}
    assert not {m.split(".")[0] for m in loaded} & heavy
    assert "lattice.kube" not in loaded
    assert not any(m.startswith(("lattice.kube.", "lattice.runtime")) for m in loaded)
