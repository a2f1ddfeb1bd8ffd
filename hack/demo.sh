#!/usr/bin/env bash
# `make demo`: the local control plane, 2 fake GPU nodes (4 x nvidia.com/gpu each), the CRDs and
# the operator, then the scheduler at work on four elastic TrainingJobs:
#   A (2..4) runs at 4; B (2..4) gets the other 4; C (2..4) shrinks B to 2 and runs at 2;
#   D (4..4, priority 10) preempts C and shrinks A to 2; deleting D gives A and C their GPUs back.
# The cluster stays up afterwards: `export KUBECONFIG=.cluster/kubeconfig` to explore,
# `make cluster-down` to stop it. The operator's log is in .cluster/log/demo-operator.log.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export LATTICE_CLUSTER_DIR=${LATTICE_CLUSTER_DIR:-$repo/.cluster}
LATTICE_NODES_ARGS="" hack/controlplane/cluster-up.sh
while read -r d; do PATH="$d:$PATH"; done < <(hack/controlplane/build.sh paths)
export KUBECONFIG=$LATTICE_CLUSTER_DIR/kubeconfig PATH
ns=lattice-demo
step_timeout=${LATTICE_DEMO_TIMEOUT:-90}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() {
  kubectl get tj -n "$ns" -o custom-columns='NAME:.metadata.name,STAGE:.status.stage,SIZE:.status.currentSize,MIN:.spec.minSize,MAX:.spec.maxSize,PRIORITY:.spec.priority,POSITION:.status.queuePosition'
}
# wait_sizes a=4 b=2 ...: until each job's currentSize and Running pod count equal the target.
wait_sizes() {
  local deadline=$((SECONDS + step_timeout)) pair job want size running ok
  while :; do
    ok=1
    for pair in "$@"; do
      job=${pair%%=*} want=${pair#*=}
      size=$(kubectl get tj "$job" -n "$ns" -o jsonpath='{.status.currentSize}' 2>/dev/null || true)
      running=$(kubectl get pods -n "$ns" -l "training.kubeflow.org/job-name=$job" \
        --field-selector=status.phase=Running -o name 2>/dev/null | wc -l)
      if [[ "${size:-0}" != "$want" || "$running" -ne "$want" ]]; then ok=0; fi
    done
    ((ok)) && return 0
    if ((SECONDS > deadline)); then
      echo "timed out waiting for $*" >&2
      show >&2
      tail -n 40 "$LATTICE_CLUSTER_DIR/log/demo-operator.log" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

say "2 kwok nodes with 4 simulated GPUs each"
python3 hack/controlplane/nodes.py --count 2 --gpus 4 --prefix demo-gpu \
  --label lattice.breezeml.ai/pool=demo | kubectl apply -f - >/dev/null
kubectl get nodes -l lattice.breezeml.ai/pool=demo -o custom-columns='NAME:.metadata.name,GPUS:.status.allocatable.nvidia\.com/gpu'
say "installing the CRDs"
kubectl apply -k deploy/crds >/dev/null
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
kubectl delete namespace "$ns" --ignore-not-found --wait=true >/dev/null
kubectl create namespace "$ns" >/dev/null

say "starting the operator (lattice run, GPU unit, resize interval 0)"
selector=$LATTICE_CLUSTER_DIR/demo-node-selector
echo "lattice.breezeml.ai/pool=demo" >"$selector"
mkdir -p "$LATTICE_CLUSTER_DIR/log"
.venv/bin/lattice run --kubeconfig "$KUBECONFIG" --namespaces "$ns" \
  --scheduling-unit nvidia.com/gpu --resize-interval 0 --node-selector-path "$selector" \
  --metrics-addr 127.0.0.1:0 --probe-addr 127.0.0.1:0 --log-format console \
  >"$LATTICE_CLUSTER_DIR/log/demo-operator.log" 2>&1 &
operator=$!
trap 'kill "$operator" 2>/dev/null || true; wait "$operator" 2>/dev/null || true' EXIT

say "1. A (2..4) arrives: it takes all 4 GPUs it can use"
kubectl apply -n "$ns" -f examples/demo/tj-a.yaml
wait_sizes a=4 && show
say "2. B (2..4) arrives: the other 4 GPUs"
kubectl apply -n "$ns" -f examples/demo/tj-b.yaml
wait_sizes a=4 b=4 && show
say "3. C (2..4) arrives: B, the later job, shrinks to its minimum so C can start"
kubectl apply -n "$ns" -f examples/demo/tj-c.yaml
wait_sizes a=4 b=2 c=2 && show
say "4. D (4..4, priority 10) arrives: C is preempted, A shrinks to 2"
kubectl apply -n "$ns" -f examples/demo/tj-d.yaml
wait_sizes d=4 a=2 b=2 c=0 && show
say "5. D is deleted: A grows back to 4 and C resumes, ahead of any later arrival"
kubectl delete -n "$ns" -f examples/demo/tj-d.yaml >/dev/null
wait_sizes a=4 b=2 c=2 && show
say "what the scheduler told the users (events)"
kubectl get events.v1.events.k8s.io -n "$ns" --sort-by=.eventTime \
  -o custom-columns='OBJECT:.regarding.name,REASON:.reason,NOTE:.note' |
  grep -E 'Queued|Admitted|Grown|Shrunk|Preempted|OBJECT'
say "kubectl get pods -n $ns"
kubectl get pods -n "$ns" -o wide
echo
echo "The control plane is still running: export KUBECONFIG=$KUBECONFIG ; make cluster-down to stop."
