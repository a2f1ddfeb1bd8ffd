# Lattice developer entry points. Two commands matter to a newcomer: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CP := hack/controlplane
export LATTICE_CLUSTER_DIR ?= $(CURDIR)/.cluster

.PHONY: venv lock lint unit integration test controlplane helm cluster-up cluster-down demo crds docs clean

# The venv installs exactly requirements-dev.lock (every file checked against its sha256), then
# the package itself without build isolation (its build backend is in the lock too): the same
# bytes on every machine and in CI. pip alone does it; no other tool is needed.
venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml requirements-dev.lock
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 required"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --require-hashes --no-deps -r requirements-dev.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

# Regenerate requirements{,-build,-dev}.lock from pyproject.toml (after changing a dependency).
lock: venv
	hack/lock.sh

lint: venv
	$(BIN)/ruff check src tests bench hack
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

unit: venv
	$(BIN)/pytest tests/unit -q

controlplane:
	$(CP)/build.sh all

# helm for the chart tests (lint, template | apply --dry-run=server), cached like the control plane.
helm:
	$(CP)/build.sh helm

integration: venv controlplane helm
	$(BIN)/pytest tests/integration tests/e2e -q

# The whole suite: lint, then every tier in one pytest run. The control plane is built if the
# cache is empty, started by the session fixture, and stopped afterwards.
test: venv lint controlplane helm
	LATTICE_REQUIRE_INTEGRATION=1 $(BIN)/pytest tests -q -p no:cacheprovider

cluster-up: venv
	$(CP)/cluster-up.sh

cluster-down:
	$(CP)/cluster-down.sh

crds: venv
	$(BIN)/lattice crds --output deploy/crds
	cp deploy/crds/*_*.yaml deploy/helm/lattice-operator/crds/

# docs/api-reference.md and docs/configuration.md are generated; unit tests check they are fresh.
docs: venv
	$(BIN)/python -m lattice.api.docs --output docs/api-reference.md
	$(BIN)/python -m lattice.docs_config --output docs/configuration.md

demo: venv
	hack/demo.sh

clean: cluster-down
	rm -rf $(VENV) .cluster .mypy_cache .ruff_cache .pytest_cache
