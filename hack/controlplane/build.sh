#!/usr/bin/env bash
# Builds the local control plane from the Go module proxy and caches the binaries outside the repo.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (k8s.io/kubernetes, via the
#       wrapper module in hack/controlplane/k8s: it replaces the v0.0.0 staging requirements with
#       the published v0.MINOR.PATCH tags, the workaround from kubernetes#79384)
#   etcd   (go.etcd.io/etcd/server/v3, via the wrapper module in hack/controlplane/etcd)
#   kwok   (plain `go install`, no replace lines)
#   helm   (plain `go install`; only with `build.sh helm`)
#   kubelet (same wrapper module as the control plane; only with `build.sh real`)
#   coredns (github.com/coredns/coredns, plain `go install`: its default plugin set includes
#            kubernetes; only with `build.sh real`)
#   registry (github.com/distribution/distribution/v3/cmd/registry, plain `go install`; only with
#            `build.sh real`)
#   prometheus (github.com/prometheus/prometheus/cmd/prometheus, plain `go install`, without the
#            builtinassets tag: the HTTP API and scraping, no web UI; with `build.sh real` or
#            `build.sh prometheus`; the real tier's in-cluster test scrapes the operator with it)
#
# Binaries land in $LATTICE_BIN_CACHE/<component>-<version>/ (default ~/.cache/lattice/bin).
# Anything already present is skipped, so a warm cache costs nothing.
#
# Why 1.34.7: it is within kubectl's supported skew of the 1.34 kubectl we build alongside, and it
# compiles with the machine's Go 1.26 (measured: see README). The server must report its real
# version, so the version ldflags that hack/lib/version.sh would set are set here too.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=/dev/null
source "$here/versions.env"
CACHE=${LATTICE_BIN_CACHE:-$HOME/.cache/lattice/bin}
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod"
GO_BUILD_P=${GO_BUILD_P:-2}

log() { printf '[build] %s\n' "$*" >&2; }

k8s_dir=$CACHE/kubernetes-v$KUBE_VERSION
etcd_dir=$CACHE/etcd-v$ETCD_VERSION
kwok_dir=$CACHE/kwok-v$KWOK_VERSION
helm_dir=$CACHE/helm-v$HELM_VERSION
kubelet_dir=$CACHE/kubelet-v$KUBE_VERSION
coredns_dir=$CACHE/coredns-v$COREDNS_VERSION
registry_dir=$CACHE/registry-v$REGISTRY_VERSION
prometheus_dir=$CACHE/prometheus-v$PROMETHEUS_VERSION

k8s_ldflags() {
  local minor=${KUBE_VERSION#1.}; minor=${minor%%.*}
  local ld="-s -w" p date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  printf '%s' "$ld"
}

build_k8s() {
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl) missing=0 b
  for b in "${bins[@]}"; do [ -x "$k8s_dir/$b" ] || missing=1; done
  if [ $missing = 0 ]; then log "kubernetes v$KUBE_VERSION cached in $k8s_dir"; return; fi
  local work; work=$(mktemp -d)
  cp "$here/k8s/go.mod" "$here/k8s/go.sum" "$work/"
  local ld; ld=$(k8s_ldflags)
  mkdir -p "$k8s_dir.tmp"
  log "building kubernetes v$KUBE_VERSION (cold: tens of minutes on 2 cores)"
  (cd "$work" && go build -p "$GO_BUILD_P" -trimpath -ldflags "$ld" -o "$k8s_dir.tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  rm -rf "$work" "$k8s_dir"; mv "$k8s_dir.tmp" "$k8s_dir"
  "$k8s_dir/kube-apiserver" --version >&2
}

build_etcd() {
  if [ -x "$etcd_dir/etcd" ]; then log "etcd v$ETCD_VERSION cached"; return; fi
  local work; work=$(mktemp -d)
  cp "$here/etcd/go.mod" "$here/etcd/go.sum" "$work/"
  mkdir -p "$etcd_dir.tmp"
  log "building etcd v$ETCD_VERSION"
  (cd "$work" && go build -p "$GO_BUILD_P" -trimpath -ldflags "-s -w" -o "$etcd_dir.tmp/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$work" "$etcd_dir"; mv "$etcd_dir.tmp" "$etcd_dir"
  "$etcd_dir/etcd" --version >&2
}

build_kwok() {
  if [ -x "$kwok_dir/kwok" ]; then log "kwok v$KWOK_VERSION cached"; return; fi
  mkdir -p "$kwok_dir.tmp"
  log "building kwok v$KWOK_VERSION"
  GOFLAGS="" GOBIN="$kwok_dir.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  rm -rf "$kwok_dir"; mv "$kwok_dir.tmp" "$kwok_dir"
}

build_helm() {
  if [ -x "$helm_dir/helm" ]; then log "helm v$HELM_VERSION cached"; return; fi
  local minor=${KUBE_VERSION#1.}; minor=${minor%%.*}
  mkdir -p "$helm_dir.tmp"
  log "building helm v$HELM_VERSION"
  GOFLAGS="" GOBIN="$helm_dir.tmp" go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  rm -rf "$helm_dir"; mv "$helm_dir.tmp" "$helm_dir"
}

# The kubelet of real nodes: the same wrapper module and version ldflags as the control plane.
build_kubelet() {
  if [ -x "$kubelet_dir/kubelet" ]; then log "kubelet v$KUBE_VERSION cached"; return; fi
  local work; work=$(mktemp -d)
  cp "$here/k8s/go.mod" "$here/k8s/go.sum" "$work/"
  mkdir -p "$kubelet_dir.tmp"
  log "building kubelet v$KUBE_VERSION"
  (cd "$work" && go build -p "$GO_BUILD_P" -trimpath -ldflags "$(k8s_ldflags)" -o "$kubelet_dir.tmp/" \
      k8s.io/kubernetes/cmd/kubelet)
  rm -rf "$work" "$kubelet_dir"; mv "$kubelet_dir.tmp" "$kubelet_dir"
  "$kubelet_dir/kubelet" --version >&2
}

# Cluster DNS for real nodes. CoreDNS's go.mod has no replace lines, so `go install` works.
build_coredns() {
  if [ -x "$coredns_dir/coredns" ]; then log "coredns v$COREDNS_VERSION cached"; return; fi
  mkdir -p "$coredns_dir.tmp"
  log "building coredns v$COREDNS_VERSION"
  GOFLAGS="" GOBIN="$coredns_dir.tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/coredns/coredns@v$COREDNS_VERSION"
  rm -rf "$coredns_dir"; mv "$coredns_dir.tmp" "$coredns_dir"
}

# The OCI registry that mirrors docker.io, ghcr.io and nvcr.io for real nodes.
build_registry() {
  if [ -x "$registry_dir/registry" ]; then log "registry v$REGISTRY_VERSION cached"; return; fi
  mkdir -p "$registry_dir.tmp"
  log "building registry (distribution) v$REGISTRY_VERSION"
  GOFLAGS="" GOBIN="$registry_dir.tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/distribution/distribution/v3/cmd/registry@v$REGISTRY_VERSION"
  rm -rf "$registry_dir"; mv "$registry_dir.tmp" "$registry_dir"
}

# Prometheus for the real tier's in-cluster test. Its Go module is v0.3xx (the 3.x release line);
# without -tags builtinassets the web UI is not embedded, which the HTTP API does not need.
build_prometheus() {
  if [ -x "$prometheus_dir/prometheus" ]; then log "prometheus v$PROMETHEUS_VERSION cached"; return; fi
  mkdir -p "$prometheus_dir.tmp"
  log "building prometheus v$PROMETHEUS_VERSION"
  GOFLAGS="" GOBIN="$prometheus_dir.tmp" go install -trimpath -ldflags "-s -w \
    -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" \
    "github.com/prometheus/prometheus/cmd/prometheus@v$PROMETHEUS_VERSION"
  rm -rf "$prometheus_dir"; mv "$prometheus_dir.tmp" "$prometheus_dir"
  "$prometheus_dir/prometheus" --version >&2
}

# Prints the directories holding the binaries, one per line (for PATH).
print_paths() { printf '%s\n' "$k8s_dir" "$etcd_dir" "$kwok_dir" "$helm_dir" "$kubelet_dir" "$coredns_dir" "$registry_dir" \
  "$prometheus_dir"; }

case "${1:-all}" in
  all) build_etcd; build_kwok; build_k8s ;;
  k8s) build_k8s ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  helm) build_helm ;;
  kubelet) build_kubelet ;;
  coredns) build_coredns ;;
  registry) build_registry ;;
  real) build_kubelet; build_coredns; build_registry; build_prometheus ;;
  prometheus) build_prometheus ;;
  paths) print_paths ;;
  *) echo "usage: $0 [all|k8s|etcd|kwok|helm|kubelet|coredns|registry|prometheus|real|paths]" >&2; exit 2 ;;
esac
