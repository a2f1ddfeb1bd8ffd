"""Copy the official upstream runtimes and examples out of local git mirrors, for
``test_crd_upstream.py``; nothing is downloaded and nothing is committed.

``python -m tests.upstream.upstream_manifests --mirror DIR --output DIR`` (``make
upstream-manifests``) reads ``SOURCES`` from bare git mirrors laid out as
``DIR/<owner>+<name>/repo`` (or ``DIR/<owner>+<name>`` itself), at the named tags, and writes the
files to ``OUTPUT/<owner>+<name>/<tag>/<path>``. A missing mirror or tag is an error.
``EXCLUDED`` lists upstream files that upstream's own CRDs refuse, with the reason.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EXCLUDED", "SOURCES", "Source", "copy_sources", "main"]


@dataclass(frozen=True)
class Source:
    """Files of one repository at one tag whose path matches ``pattern``."""

    repo: str
    tag: str
    pattern: str


_TRAINER = r"^(manifests/base/runtimes/.*|examples/.*)\.ya?ml$"
SOURCES = (
    *(Source("kubeflow/trainer", t, _TRAINER) for t in ("v2.0.0", "v2.1.0", "v2.2.0", "v2.3.0")),
    Source("kubeflow/mpi-operator", "v0.8.0", r"^examples/v2beta1/.*\.ya?ml$"),
    Source("kubeflow/training-operator", "v1.7.0", r"^examples/mxnet/.*\.ya?ml$"),
)

EXCLUDED = {
    "kubeflow+training-operator/v1.7.0/examples/mxnet/tune/mx_job_tune_gpu_v1.yaml": (
        "sets mxReplicaSpecs.TunerServer.label, a field training-operator v1.7's own CRD does "
        "not declare: kubectl apply refuses it there too (strict field validation)"
    ),
}


def _git_dir(mirror: Path, repo: str) -> Path:
    base = mirror / repo.replace("/", "+")
    return base / "repo" if (base / "repo").exists() else base


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True
    ).stdout


def copy_sources(mirror: Path, output: Path) -> list[Path]:
    """Copy every ``SOURCES`` file; returns the paths written."""
    written = []
    for source in SOURCES:
        git_dir = _git_dir(mirror, source.repo)
        names = _git(git_dir, "ls-tree", "-r", "--name-only", source.tag).splitlines()
        for name in (n for n in names if re.search(source.pattern, n)):
            target = output / source.repo.replace("/", "+") / source.tag / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_git(git_dir, "show", f"{source.tag}:{name}"), encoding="utf-8")
            written.append(target)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mirror", type=Path, required=True, help="directory of git mirrors")
    parser.add_argument("--output", type=Path, required=True, help="directory to write to")
    args = parser.parse_args(argv)
    written = copy_sources(args.mirror, args.output)
    print(f"copied {len(written)} files into {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
