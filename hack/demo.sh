#!/usr/bin/env bash
# `make demo`: the local control plane with 8 fake GPU nodes (8 x nvidia.com/gpu each), the CRDs,
# and the example jobs applied, then what kubectl shows. The cluster stays up afterwards:
# `export KUBECONFIG=.cluster/kubeconfig` to explore, `make cluster-down` to stop it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export LATTICE_CLUSTER_DIR=${LATTICE_CLUSTER_DIR:-$repo/.cluster}
LATTICE_NODES_ARGS="--count 8 --gpus 8 --prefix kwok-gpu --label lattice.breezeml.ai/pool=demo" \
  hack/controlplane/cluster-up.sh
while read -r d; do PATH="$d:$PATH"; done < <(hack/controlplane/build.sh paths)
export KUBECONFIG=$LATTICE_CLUSTER_DIR/kubeconfig PATH

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say "nodes (kwok, simulated GPUs)"
kubectl get nodes -L lattice.breezeml.ai/pool -o custom-columns='NAME:.metadata.name,GPUS:.status.allocatable.nvidia\.com/gpu,READY:.status.conditions[?(@.type=="Ready")].status'
say "installing the CRDs"
kubectl apply -k deploy/crds
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
say "applying the examples"
kubectl apply -n demo -f examples/trainjob/torch-distributed-runtime.yaml -f examples/trainjob/mpi-distributed-runtime.yaml
for f in examples/trainingjob/*.yaml examples/mpijob/*.yaml examples/mxjob/*.yaml examples/trainjob/trainjob-*.yaml; do
  kubectl apply -n demo -f "$f"
done
say "kubectl get lattice -n demo   (every Lattice kind, through the CRD category)"
kubectl get lattice -n demo
say "kubectl get tj -n demo"
kubectl get tj -n demo -o wide
echo
echo "The control plane is still running: export KUBECONFIG=$KUBECONFIG ; make cluster-down to stop."
