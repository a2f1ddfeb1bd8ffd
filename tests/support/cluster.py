"""Access to the local control plane for integration and end-to-end tests.

``Cluster`` wraps the kubeconfig that ``hack/controlplane/cluster-up.sh`` writes and a ``kubectl``
that matches the server (the one built next to kube-apiserver, first on PATH). Tests use it to
apply manifests exactly as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["REPO", "Cluster", "KubectlError"]

REPO = Path(__file__).resolve().parents[2]
CONTROLPLANE = REPO / "hack" / "controlplane"


class KubectlError(AssertionError):
    """kubectl exited non-zero; ``stderr`` holds the server's message."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


@dataclass
class Cluster:
    """A running local control plane."""

    kubeconfig: Path
    bin_dirs: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = os.pathsep.join([*self.bin_dirs, env.get("PATH", "")])
        self.env = env

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60
    ) -> str:
        """Run kubectl; return stdout, or raise ``KubectlError`` if ``check`` and it failed."""
        proc = subprocess.run(
            ["kubectl", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise KubectlError(list(args), proc.returncode, proc.stdout, proc.stderr)
        return proc.stdout

    def apply(self, manifest: dict[str, Any] | str | Path, *, namespace: str | None = None) -> str:
        """``kubectl apply -f`` a dict, YAML text or file."""
        ns = ["-n", namespace] if namespace else []
        if isinstance(manifest, Path):
            return self.kubectl("apply", *ns, "-f", str(manifest))
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        return self.kubectl("apply", *ns, "-f", "-", stdin=text)

    def get_json(self, *args: str) -> Any:
        """``kubectl get ... -o json`` parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def exists(self, *args: str) -> bool:
        out = self.kubectl("get", *args, "--ignore-not-found", "-o", "name", check=False)
        return bool(out.strip())

    def wait_crds_established(self, names: list[str] | None = None, *, timeout: float = 60) -> None:
        """Wait until every CRD (or those named) has ``Established=True``. ``kubectl wait``
        fails at once on a CRD the apiserver has not given a status yet, so poll instead."""
        from tests.support.wait import wait_for

        def pending() -> list[str]:
            items = self.get_json("crd")["items"]
            return [
                c["metadata"]["name"]
                for c in items
                if (names is None or c["metadata"]["name"] in names)
                and not any(
                    x.get("type") == "Established" and x.get("status") == "True"
                    for x in (c.get("status") or {}).get("conditions") or ()
                )
            ]

        wait_for(pending, lambda p: p == [], timeout=timeout, interval=0.2, what="CRDs Established")
        if names is not None:
            known = {c["metadata"]["name"] for c in self.get_json("crd")["items"]}
            missing = sorted(set(names) - known)
            assert not missing, f"CRDs not installed: {missing}"

    def create_namespace(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", name)
        return name

    def add_nodes(self, *, prefix: str, count: int, gpus: int, labels: dict[str, str]) -> list[str]:
        """Create kwok fake nodes with the given labels; returns their names."""
        args = ["--count", str(count), "--gpus", str(gpus), "--prefix", prefix]
        for k, v in labels.items():
            args += ["--label", f"{k}={v}"]
        manifest = subprocess.run(
            ["python3", str(CONTROLPLANE / "nodes.py"), *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        self.kubectl("apply", "-f", "-", stdin=manifest)
        return [f"{prefix}-{i}" for i in range(count)]
