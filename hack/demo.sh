#!/usr/bin/env bash
# `make demo`: the local control plane, 2 fake GPU nodes (4 x nvidia.com/gpu each), the CRDs and
# the operator, then the scheduler at work on four elastic TrainingJobs:
#   A (2..4) runs at 4; B (2..4) gets the other 4; C (2..4) shrinks B to 2 and runs at 2;
#   D (4..4, priority 10) preempts C and shrinks A to 2; deleting D gives A and C their GPUs back.
# Where real nodes can run (root, `make deps`), it then starts 2 real kubelet nodes too and shows
# real training: an elastic TrainingJob (torchrun, c10d, checkpoints) whose worker 0 log changes
# world size live as a priority-10 job shrinks it and, once that job ends, it grows back.
# The cluster stays up afterwards: `export KUBECONFIG=.cluster/kubeconfig` to explore,
# `make cluster-down` to stop it. The operator's log is in .cluster/log/demo-operator.log.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export LATTICE_CLUSTER_DIR=${LATTICE_CLUSTER_DIR:-$repo/.cluster}
# Real training too, where this machine can run real nodes (root, and `make deps` done), unless
# a cluster without them is already running: LATTICE_REAL_NODES=0 turns it off.
running_without_real() {
  [ -f "$LATTICE_CLUSTER_DIR/kube-apiserver.pid" ] \
    && kill -0 "$(cat "$LATTICE_CLUSTER_DIR/kube-apiserver.pid")" 2>/dev/null \
    && [ ! -f "$LATTICE_CLUSTER_DIR/real-nodes-enabled" ]
}
if [ -z "${LATTICE_REAL_NODES:-}" ] && [ "$(id -u)" = 0 ] && command -v containerd >/dev/null \
  && command -v runc >/dev/null && command -v mmdebstrap >/dev/null && ! running_without_real; then
  export LATTICE_REAL_NODES=2
fi
real=$(( ${LATTICE_REAL_NODES:-0} >= 2 ))
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
# kubectl wait fails at once on a CRD that has no status yet: retry until all are Established.
for _ in $(seq 60); do
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null 2>&1 && break
  sleep 1
done
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

if ((real)); then
  # --- Real training on the real kubelet nodes: an elastic job's world size changes live.
  rns=lattice-demo-real
  data=$LATTICE_CLUSTER_DIR/real-data/demo
  say "real nodes: building and pushing the images (cached after the first time)"
  hack/images/build.sh --push
  kubectl get nodes -l lattice.breezeml.ai/node-type=real \
    -o custom-columns='NAME:.metadata.name,IP:.status.addresses[0].address,GPUS:.status.allocatable.nvidia\.com/gpu'
  kubectl delete namespace "$rns" --ignore-not-found --wait=true >/dev/null
  kubectl create namespace "$rns" >/dev/null
  rm -rf "$data"; mkdir -p "$data/elastic" "$data/urgent"
  rselector=$LATTICE_CLUSTER_DIR/demo-real-node-selector
  echo "lattice.breezeml.ai/node-type=real" >"$rselector"
  .venv/bin/lattice run --kubeconfig "$KUBECONFIG" --namespaces "$rns" \
    --scheduling-unit nvidia.com/gpu --resize-interval 0 --node-selector-path "$rselector" \
    --metrics-addr 127.0.0.1:0 --probe-addr 127.0.0.1:0 --log-format console \
    >"$LATTICE_CLUSTER_DIR/log/demo-real-operator.log" 2>&1 &
  real_operator=$!
  trap 'kill "$operator" "$real_operator" 2>/dev/null || true; wait 2>/dev/null || true' EXIT
  tj() { # name min max priority
    local name=$1 min=$2 max=$3 prio=$4
    cat <<EOF
apiVersion: breezeml.ai/v1
kind: TrainingJob
metadata: {name: $name}
spec:
  runPolicy: {cleanPodPolicy: "None"}
  minSize: $min
  maxSize: $max
  priority: $prio
  injectLattice: true
  replicaSpecs:
    template:
      spec:
        containers:
          - name: trainingjob
            image: breezeml/lattice-resnet:1.0.1
            imagePullPolicy: Always
            command: [python]
            args: [-u, main.py]
            env: [{name: CHECKPOINT_DIR, value: /checkpoint}]
            resources: {limits: {nvidia.com/gpu: 4}}
            volumeMounts: [{name: ckpt, mountPath: /checkpoint}]
        volumes: [{name: ckpt, hostPath: {path: "$data/$name", type: Directory}}]
EOF
  }
  # follow_until WHAT: print worker 0's new log lines (rounds, and every 10th step) until WHAT:
  # "size N" (the current torchrun round has world size N and has trained 10 steps) or "done".
  seen=0  # log lines already shown, across calls
  follow_until() {
    local deadline=$((SECONDS + 240)) out last
    while ((SECONDS < deadline)); do
      out=$(kubectl logs -n "$rns" elastic-worker-0 2>/dev/null | grep -E '^(resumed|done|step=)' || true)
      if [ -n "$out" ]; then
        { sed -n "$((seen + 1)),\$p" <<<"$out" | grep -E '^(resumed|done)|^step=[0-9]*0 ' |
          sed 's/^/    elastic-worker-0 | /'; } || true
        seen=$(wc -l <<<"$out")
        last=$(grep -E '^resumed' <<<"$out" | tail -1)
        case $1 in
          done) grep -q '^done' <<<"$out" && return 0 ;;
          *) [[ $last == *"world_size=${1#size }" ]] \
            && (($(awk '/^resumed/ {n = 0; next} /^step=/ {n++} END {print n + 0}' <<<"$out") >= 10)) \
            && return 0 ;;
        esac
      fi
      sleep 1
    done
    echo "timed out waiting for $1; see $LATTICE_CLUSTER_DIR/log/demo-real-operator.log" >&2
    return 1
  }
  say "real 1. elastic job (1..2 workers, 4 GPUs each) trains with torchrun: world size 2"
  tj elastic 1 2 0 | kubectl apply -n "$rns" -f - >/dev/null
  follow_until "size 2"
  say "real 2. a priority-10 job needs a node: the elastic job shrinks and resumes from its checkpoint"
  tj urgent 1 1 10 | kubectl apply -n "$rns" -f - >/dev/null
  follow_until "size 1"
  say "real 3. the priority-10 job is told to stop and ends: the elastic job grows back to world size 2"
  touch "$data/urgent/stop"
  follow_until "size 2"
  touch "$data/elastic/stop"
  follow_until done
  kubectl wait -n "$rns" tj/elastic --for=jsonpath='{.status.stage}'=Completed --timeout=60s >/dev/null
  kubectl get tj -n "$rns" -o custom-columns='NAME:.metadata.name,STAGE:.status.stage,SIZE:.status.currentSize,PRIORITY:.spec.priority'
fi
echo
if ((!real)); then
  echo "Real training needs real nodes: as root, \`make deps\` then \`LATTICE_REAL_NODES=2 make demo\`."
fi
echo "The control plane is still running: export KUBECONFIG=$KUBECONFIG ; make cluster-down to stop."
