"""The lock files pin, with hashes, a resolution that satisfies pyproject.toml.

``make lock`` (hack/lock.sh) writes them; ``make venv`` (so CI) installs requirements-dev.lock and
the image installs requirements-build.lock and requirements.lock, all with ``--require-hashes``.
When a dependency changes in pyproject.toml, these tests fail until the locks are regenerated.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
_PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^ ;\\]+)(?:\s*;\s*([^\\]+?))?\s*\\?$")

Pins = dict[str, tuple[str, int, str]]


def _pins(name: str) -> Pins:
    """canonical name -> (version, number of hashes, marker) of one lock file, for the pins whose
    marker holds on this interpreter (a universal lock may pin a package once per Python
    version, as ``numpy ; python_full_version < '3.12'`` and ``>= '3.12'``)."""
    pins: Pins = {}
    current = ""
    for line in (ROOT / name).read_text().splitlines():
        match = _PIN.match(line)
        if match:
            marker = (match[3] or "").strip()
            current = canonicalize_name(match[1])
            if marker and not Marker(marker).evaluate():
                current = ""
                continue
            assert current not in pins, f"{name}: {current} pinned twice"
            pins[current] = (match[2], 0, marker)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, hashes, marker = pins[current]
            pins[current] = (version, hashes + 1, marker)
    return pins


def _satisfied(requirements: list[str], pins: Pins, where: str) -> None:
    for raw in requirements:
        req = Requirement(raw)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{where}: {req.name} is not pinned; run `make lock`"
        version = pins[name][0]
        assert req.specifier.contains(version, prereleases=True), (
            f"{where}: {req.name}=={version} does not satisfy {req.specifier}; run `make lock`"
        )


@pytest.mark.parametrize(
    "lock", ["requirements.lock", "requirements-build.lock", "requirements-dev.lock"]
)
def test_every_pin_has_hashes_and_a_valid_marker(lock: str) -> None:
    pins = _pins(lock)
    assert pins
    for name, (_, hashes, marker) in pins.items():
        assert hashes >= 1, f"{lock}: {name} has no hash"
        if marker:
            Marker(marker)  # parses


def test_the_runtime_lock_satisfies_the_dependencies() -> None:
    _satisfied(PYPROJECT["project"]["dependencies"], _pins("requirements.lock"), "requirements")


def test_the_build_lock_satisfies_the_build_backend() -> None:
    _satisfied(PYPROJECT["build-system"]["requires"], _pins("requirements-build.lock"), "build")


def test_the_dev_lock_holds_everything_at_the_same_versions() -> None:
    dev = _pins("requirements-dev.lock")
    project = PYPROJECT["project"]
    _satisfied(project["dependencies"] + project["optional-dependencies"]["dev"], dev, "dev")
    _satisfied(PYPROJECT["build-system"]["requires"], dev, "dev")
    for lock in ("requirements.lock", "requirements-build.lock"):
        for name, (version, _, _) in _pins(lock).items():
            assert dev[name][0] == version, f"{name}: {lock} has {version}, dev {dev[name][0]}"


def test_the_image_and_the_venv_install_the_locks_with_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes --no-deps -r requirements-build.lock" in dockerfile
    assert "--require-hashes --no-deps -r /tmp/requirements.lock" in dockerfile
    assert "--no-build-isolation" in dockerfile
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes --no-deps -r requirements-dev.lock" in makefile
    assert "--no-deps --no-build-isolation -e ." in makefile
