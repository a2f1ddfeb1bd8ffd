"""Shared e2e fixtures: an isolated node pool and the operator as a real process.

Every test gets its own kwok nodes, labelled ``lattice.test/pool=<id>``, and runs its operator
with a node-selector file naming that label and ``--namespaces`` set to its namespace, so tests
never see each other's capacity or jobs even on a shared control plane.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import REPO, Cluster

LATTICE = str(REPO / ".venv" / "bin" / "lattice")
POOL_LABEL = "lattice.test/pool"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Pool:
    """Fake nodes of one test and the selector file that names them."""

    cluster: Cluster
    pool_id: str
    selector_file: Path
    nodes: list[str] = field(default_factory=list)

    def add(self, *, count: int, gpus: int) -> list[str]:
        prefix = f"{self.pool_id}-n{len(self.nodes)}"
        names = self.cluster.add_nodes(
            prefix=prefix, count=count, gpus=gpus, labels={POOL_LABEL: self.pool_id}
        )
        self.nodes.extend(names)
        return names


@pytest.fixture
def pool(crds_installed: Cluster, tmp_path: Path) -> Iterator[Pool]:
    pool_id = f"p{uuid.uuid4().hex[:8]}"
    selector = tmp_path / "node-selector"
    selector.write_text(f"# nodes of this test only\n{POOL_LABEL}={pool_id}\n")
    p = Pool(crds_installed, pool_id, selector)
    yield p
    if p.nodes:
        crds_installed.kubectl(
            "delete", "node", "-l", f"{POOL_LABEL}={pool_id}", "--wait=false", check=False
        )


@dataclass
class OperatorProcess:
    """``lattice run`` started with fixed arguments; ``restart`` reuses them."""

    args: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        self.starts += 1
        log = self.log_path.with_suffix(f".{self.starts}.log").open("wb")
        self.popen = subprocess.Popen(
            [LATTICE, "run", *self.args], env=self.env, stdout=log, stderr=subprocess.STDOUT
        )

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=30)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=30)

    def logs(self, *, tail: int | None = 6000) -> str:
        """Each start's log, its last ``tail`` characters (``None``: all of it)."""
        parts = []
        for i in range(1, self.starts + 1):
            path = self.log_path.with_suffix(f".{i}.log")
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace")
                parts.append(text if tail is None else text[-tail:])
        return "\n".join(parts)


@contextlib.contextmanager
def explained(*ops: OperatorProcess) -> Iterator[None]:
    """On any failure inside, print the log of each operator process, then re-raise.

    The one way e2e tests show what the operator did when an assertion (or a wait) fails."""
    try:
        yield
    except BaseException:
        for op in ops:
            pid = op.popen.pid if op.popen else None
            print(f"--- operator log (pid {pid}, {op.starts} start(s), last 6000 chars each)")
            print(op.logs())
        raise


@pytest.fixture
def operator(crds_installed: Cluster, namespace: str, pool: Pool, tmp_path: Path) -> Iterator[Any]:
    """``operator(*flags)`` starts the operator for this test's namespace and pool."""
    procs: list[OperatorProcess] = []

    def start(*flags: str) -> OperatorProcess:
        env = dict(os.environ)
        env["PATH"] = crds_installed.env["PATH"]
        args = [
            "--kubeconfig",
            str(crds_installed.kubeconfig),
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
            *flags,
        ]
        proc = OperatorProcess(args, env, tmp_path / f"operator-{len(procs)}")
        proc.start()
        procs.append(proc)
        return proc

    yield start
    for p in procs:
        p.stop()
