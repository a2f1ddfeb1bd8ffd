"""The light ``kubectl-lattice`` distribution packages the plugin's whole import closure.

``plugins/kubectl-lattice/pyproject.toml`` lists the source paths it copies from ``src/``; every
module that ``kubectl-lattice`` imports must be among them, and every third-party package it
imports must come with its two dependencies (pydantic, PyYAML).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import lattice

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugins" / "kubectl-lattice"
#: Top-level modules that ``pydantic`` and ``PyYAML`` install (with their own dependencies).
LIGHT = {"pydantic", "pydantic_core", "annotated_types", "typing_extensions",
         "typing_inspection", "yaml", "_yaml"}  # fmt: skip


def _closure() -> dict[str, str]:
    code = (  # only what the import adds (not what site.py loaded at start-up)
        "import sys\n"
        "before = set(sys.modules)\n"
        "import lattice.kubectl.commands\n"
        "for n, m in sorted(sys.modules.items()):\n"
        "    if n not in before:\n"
        "        print(n, getattr(m, '__file__', None) or '-')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return dict(line.split(" ", 1) for line in out.stdout.splitlines())


def test_every_imported_lattice_module_is_packaged() -> None:
    config = tomllib.loads((PLUGIN / "pyproject.toml").read_text())
    included = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    sources = [(PLUGIN / src).resolve() for src in included]
    assert all(s.exists() for s in sources), "every included path exists"
    src = Path(lattice.__file__).resolve().parent
    for target, dest in included.items():
        assert (PLUGIN / target).resolve().relative_to(src.parent) == Path(dest)
    modules = {n: f for n, f in _closure().items() if n == "lattice" or n.startswith("lattice.")}
    assert "lattice.kubectl.transport" in modules
    for name, file in modules.items():
        path = Path(file).resolve()
        assert any(path == s or s in path.parents for s in sources), f"{name} is not packaged"


def test_it_needs_only_pydantic_and_pyyaml() -> None:
    config = tomllib.loads((PLUGIN / "pyproject.toml").read_text())
    deps = {
        d.split(">")[0].split("=")[0].split("<")[0].strip()
        for d in config["project"]["dependencies"]
    }
    assert deps == {"pydantic", "PyYAML"}
    assert config["project"]["scripts"] == {"kubectl-lattice": "lattice.kubectl:main"}
    third = {
        n.split(".")[0]
        for n, f in _closure().items()
        if not n.startswith("lattice") and "site-packages" in f
    }
    assert third <= LIGHT, f"imports beyond pydantic and PyYAML: {sorted(third - LIGHT)}"
