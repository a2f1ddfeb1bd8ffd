#!/usr/bin/env bash
# Regenerate the lock files from pyproject.toml (run by `make lock`; commit the result):
#   requirements.lock        the operator's dependencies (the image's runtime stage)
#   requirements-build.lock  the build backend (pyproject's [build-system] requires: the image's
#                            build stage, which builds the wheel without build isolation)
#   requirements-dev.lock    both, plus the dev extra (`make venv`, so CI)
# Every pin carries the sha256 of every file PyPI has for it, so `pip install --require-hashes`
# installs the same bytes on any machine; the resolution is universal (every platform, Python
# >= 3.11). uv, pinned in the dev extra, resolves; installing needs only pip.
# tests/unit/test_lock_files.py fails when a lock no longer satisfies pyproject.toml.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
UV=${UV:-.venv/bin/uv}
if [[ ! -x $UV ]]; then
  echo "lock: $UV is missing; run 'make venv' first (uv comes with the dev extra)" >&2
  exit 1
fi
build_in=build-system.requires  # a stable name: it appears in the locks' "via" comments
trap 'rm -f "$build_in"' EXIT
.venv/bin/python - "$build_in" <<'PY'
import sys, tomllib
with open("pyproject.toml", "rb") as f:
    requires = tomllib.load(f)["build-system"]["requires"]
open(sys.argv[1], "w").write("\n".join(requires) + "\n")
PY
compile() {
  "$UV" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
    --no-header --custom-compile-command "make lock" "$@"
}
compile "$build_in" -o requirements-build.lock
compile pyproject.toml -o requirements.lock
# The venv's editable install also needs what hatchling asks for editables (its
# get_requires_for_build_editable): the editables package.
echo "editables" >> "$build_in"
compile pyproject.toml "$build_in" --extra dev -o requirements-dev.lock
echo "lock: wrote requirements.lock, requirements-build.lock, requirements-dev.lock"
