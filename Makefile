# Lattice developer entry points. Two commands matter to a newcomer: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CP := hack/controlplane
export LATTICE_CLUSTER_DIR ?= $(CURDIR)/.cluster

.PHONY: venv lock lint unit integration test controlplane helm cluster-up cluster-down demo crds docs k8s-schema upstream-manifests check-upstream clean \
	deps real-bins images real image prometheus
# LATTICE_REAL_NODES=N: real kubelet nodes for `make cluster-up` (unset or 0: kwok nodes only);
# `make real` uses 2 unless told otherwise; `make demo` uses 2 where this machine can run them.

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

# Debian packages for real nodes and images (containerd, runc, CNI plugins, mmdebstrap, umoci,
# skopeo, ...): installed when missing, needs root.
deps:
	hack/install-deps.sh

# kubelet, CoreDNS, the registry and Prometheus, cached like the control plane.
real-bins:
	$(CP)/build.sh real

# The images real nodes run, built offline and pushed into the running cluster's mirror
# (start it with `LATTICE_REAL_NODES=2 make cluster-up`).
images: deps
	hack/images/build.sh --push

# The operator's image from the Dockerfile, built offline with buildah (hack/images/operator.sh)
# and pushed into the running real-node cluster's mirror as ghcr.io/breezeml/lattice-operator:latest,
# the name deploy/ and the chart use, so `kubectl apply -k deploy/` runs it unchanged. Without a
# cluster: `hack/images/operator.sh --push REGISTRY/lattice-operator:TAG` or `--archive FILE`
# (kind, minikube; docs/operations.md).
image: deps
	hack/images/operator.sh --push

# Prometheus (github.com/prometheus/prometheus from the Go module proxy), cached like the
# control plane; the real tier's in-cluster test scrapes the operator with it.
prometheus:
	$(CP)/build.sh prometheus

# The real tier alone: a cluster with 2 real nodes (started by the session fixture, or reused).
# LATTICE_REQUIRE_INTEGRATION=1: the run fails unless a real test passed.
real: venv deps controlplane real-bins helm
	LATTICE_REAL_NODES=$${LATTICE_REAL_NODES:-2} \
	  LATTICE_REQUIRE_INTEGRATION=1 $(BIN)/pytest tests/real -q -p no:cacheprovider

# The whole suite: lint, then the unit, integration and e2e tiers in one pytest run on kwok nodes,
# then the real tier (`make real`) on a cluster of its own with 2 real kubelet nodes. The control
# plane, the kubelet/CoreDNS/registry binaries and the images are built when their caches are
# empty (the Debian packages installed when missing); each cluster is started by its session
# fixture and stopped afterwards. Each run fails unless at least one of its tests passed. The real
# tier runs even when the kwok tiers failed, so that one run reports both; either fails the target.
test: venv lint controlplane helm deps real-bins
	@rc=0; \
	LATTICE_REAL_NODES=0 LATTICE_REQUIRE_INTEGRATION=1 $(BIN)/pytest tests -q -p no:cacheprovider \
	  --ignore=tests/real || rc=$$?; \
	$(MAKE) --no-print-directory real || rc=$$?; \
	exit $$rc

cluster-up: venv
	if [ "$${LATTICE_REAL_NODES:-0}" != 0 ]; then hack/install-deps.sh && $(CP)/build.sh real; fi
	$(CP)/cluster-up.sh

cluster-down:
	$(CP)/cluster-down.sh

crds: venv
	$(BIN)/lattice crds --output deploy/crds
	cp deploy/crds/*_*.yaml deploy/helm/lattice-operator/crds/

# The Kubernetes schemas the CRDs embed (pod templates, Job specs ...), refreshed from the running
# local control plane (make cluster-up); `make crds` reads only the committed snapshot.
K8S_OPENAPI := /openapi/v3/api/v1 /openapi/v3/apis/batch/v1 /openapi/v3/apis/autoscaling/v2
k8s-schema: venv
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && i=0 && \
	for path in $(K8S_OPENAPI); do \
	  i=$$((i+1)); PATH="$$($(CP)/build.sh paths | paste -sd: -):$$PATH" \
	    kubectl --kubeconfig "$(LATTICE_CLUSTER_DIR)/kubeconfig" get --raw "$$path" > "$$tmp/$$i.json"; \
	done && $(BIN)/python -c 'import sys; from lattice.api.k8s_schema import main; sys.exit(main(sys.argv[1:]))' "$$tmp"/*.json

# The official upstream runtimes and examples for tests/upstream/test_crd_upstream.py, copied
# (never downloaded) from local git mirrors: UPSTREAM_MIRROR/<owner>+<name>[/repo].
# `make test` does not collect tests/upstream (CI has no mirrors); `make check-upstream` runs it.
UPSTREAM_MANIFESTS ?= $(CURDIR)/.upstream-manifests
upstream-manifests: venv
	@test -n "$(UPSTREAM_MIRROR)" || { echo "set UPSTREAM_MIRROR to a folder of git mirrors, <owner>+<name>[/repo]"; exit 2; }
	$(BIN)/python -m tests.upstream.upstream_manifests --mirror $(UPSTREAM_MIRROR) \
	  --output $(UPSTREAM_MANIFESTS)

check-upstream: upstream-manifests controlplane
	LATTICE_UPSTREAM_MANIFESTS=$(UPSTREAM_MANIFESTS) $(BIN)/pytest tests/upstream -q -p no:cacheprovider

# docs/api-reference.md and docs/configuration.md are generated; unit tests check they are fresh.
docs: venv
	$(BIN)/python -m lattice.api.docs --output docs/api-reference.md
	$(BIN)/python -m lattice.docs_config --output docs/configuration.md

demo: venv
	hack/demo.sh

clean: cluster-down
	rm -rf $(VENV) .cluster .mypy_cache .ruff_cache .pytest_cache
