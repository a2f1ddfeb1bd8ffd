"""Constants and setup printing shared by the scheduler-load bench's sections.

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

from _support import REPO

from lattice.clock import RealClock
from lattice.kube.resources import Resource

__all__ = [
    "CLASS_LABEL",
    "GPU",
    "MANAGED",
    "METRICS_TIMEOUT",
    "PRIORITIES",
    "TRAININGJOBS",
    "git_rev",
    "print_setup",
    "write_text",
]


CLASS_LABEL = "lattice.bench/class"
MANAGED = "lattice.breezeml.ai/managed"
GPU = "nvidia.com/gpu"
PRIORITIES = {"high": 1000, "mid": 100, "low": 0}
TRAININGJOBS = Resource("breezeml.ai", "v1", "trainingjobs", "TrainingJob")
METRICS_TIMEOUT = 10.0  # seconds for a scrape of the operator's /metrics (a busy operator)


def git_rev() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def print_setup(extra: str) -> None:
    load = os.getloadavg()
    print(
        f"date {RealClock().now().isoformat(timespec='seconds')}; nproc {os.cpu_count()}; "
        f"python {platform.python_version()}; lattice git {git_rev()}; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(f"command: {' '.join(sys.argv)}")
    print(extra)


def write_text(path: Path, text: str) -> None:
    path.write_text(text)
