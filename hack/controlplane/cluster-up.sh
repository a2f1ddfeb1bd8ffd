#!/usr/bin/env bash
# Starts the local control plane on loopback only:
#   etcd, kube-apiserver (RBAC on), kube-controller-manager (garbage collector, namespace, job,
#   serviceaccount, deployment/replicaset, ttl-after-finished controllers), kube-scheduler, and a
#   kwok controller that manages every node annotated kwok.x-k8s.io/node=fake. The node-lifecycle
#   controller is not run (kwok nodes send no heartbeats), so the TaintNodesByCondition admission
#   plugin is off: nothing would ever remove its not-ready taint.
# Writes $LATTICE_CLUSTER_DIR/kubeconfig (default: <repo>/.cluster/kubeconfig), waits for /readyz,
# then creates the fake nodes (LATTICE_NODES_ARGS, passed to nodes.py; default 8 nodes x 8 GPUs).
# With LATTICE_REAL_NODES=N (> 0) it also starts N real kubelet nodes, a registry mirror and
# CoreDNS (real-nodes.sh), and gives the control plane what they need.
# Idempotent: if the apiserver recorded in the cluster dir is alive and ready, it only reports.
# Tear down with cluster-down.sh, which stops only the processes recorded here.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
RUN=${LATTICE_CLUSTER_DIR:-$repo/.cluster}
ETCD_PORT=${LATTICE_ETCD_PORT:-23790}
API_PORT=${LATTICE_API_PORT:-26443}
start_ns=$(date +%s%N)
# shellcheck source=/dev/null
source "$here/versions.env"

REAL_NODES=${LATTICE_REAL_NODES:-0}
# Build (or find in the cache) the binaries, then put them first on PATH.
"$here/build.sh" all >&2
if [ "$REAL_NODES" -gt 0 ]; then "$here/build.sh" real >&2; fi
while read -r d; do PATH="$d:$PATH"; done < <("$here/build.sh" paths)
export PATH

P=$RUN/pki
KCFG=$RUN/kubeconfig
mkdir -p "$RUN/log" "$P"
curl_api() { curl -sf --max-time 2 --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "https://127.0.0.1:$API_PORT$1"; }
alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

if alive kube-apiserver && curl_api /readyz >/dev/null 2>&1; then
  if [ "$REAL_NODES" -gt 0 ]; then
    # Real nodes need the control plane's real-node flags: only a cluster started with them
    # can take them on (the missing pieces are started; running ones are left alone).
    if [ ! -f "$RUN/real-nodes-enabled" ]; then
      echo "the running control plane was started without LATTICE_REAL_NODES: cluster-down first" >&2
      exit 1
    fi
    LATTICE_API_PORT=$API_PORT "$here/real-nodes.sh" up
  fi
  echo "control plane already running: export KUBECONFIG=$KCFG" >&2
  exit 0
fi
"$here/cluster-down.sh" >/dev/null 2>&1 || true
rm -f "$RUN/real-nodes-enabled"

# --- PKI: a CA, the serving cert, an admin client cert (system:masters), the SA signing key.
if [ ! -f "$P/admin.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=lattice-local-ca" \
    -keyout "$P/ca.key" -out "$P/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$P/apiserver.key" -out "$P/apiserver.csr" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=lattice-admin" -keyout "$P/admin.key" -out "$P/admin.csr" 2>/dev/null
  openssl x509 -req -in "$P/admin.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 3650 \
    -out "$P/admin.crt" -extfile <(printf "extendedKeyUsage=clientAuth") 2>/dev/null
  openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
  openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
fi
# The serving cert names 10.96.0.1, the `kubernetes` Service's ClusterIP: in-cluster clients (the
# operator's Deployment on real nodes) connect to that address (real-nodes.sh forwards it here).
# It is made here, and remade (same CA and key) if an older cluster dir's cert lacks that IP.
if ! openssl x509 -in "$P/apiserver.crt" -noout -ext subjectAltName 2>/dev/null | grep -q 'IP Address:10.96.0.1'; then
  openssl x509 -req -in "$P/apiserver.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 3650 \
    -out "$P/apiserver.crt" -extfile <(printf "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth") 2>/dev/null
fi

cat >"$KCFG" <<KC
apiVersion: v1
kind: Config
clusters:
- name: lattice-local
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$P/ca.crt"}
users:
- name: lattice-admin
  user: {client-certificate: "$P/admin.crt", client-key: "$P/admin.key"}
contexts:
- name: lattice-local
  context: {cluster: lattice-local, user: lattice-admin}
current-context: lattice-local
KC

# --- etcd: loopback, no fsync (test data only), fresh data dir every start.
rm -rf "$RUN/etcd"
etcd --name=lattice --data-dir="$RUN/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster="lattice=http://127.0.0.1:$((ETCD_PORT + 1))" --listen-metrics-urls="" \
  --unsafe-no-fsync=true --quota-backend-bytes=4294967296 --auto-compaction-mode=periodic --auto-compaction-retention=5m \
  --log-level=warn >"$RUN/log/etcd.log" 2>&1 &
echo $! >"$RUN/etcd.pid"
for _ in $(seq 100); do curl -sf --max-time 1 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null && break; sleep 0.2; done

# Real nodes need more of the control plane: the apiserver reaches kubelets (logs, exec) by their
# InternalIP; pods mount kube-root-ca.crt (root-ca-cert-publisher); CoreDNS answers from
# EndpointSlices (endpointslice controller); pods of a deleted node go away (pod GC). The kwok
# tiers do without them, so they are added only when real nodes are asked for.
# Pods reach the apiserver through the `kubernetes` Service, which real-nodes.sh forwards to the
# host bridge's address: so with real nodes it listens on every address, not loopback only.
api_extra=() kcm_extra="" bind=127.0.0.1
if [ "$REAL_NODES" -gt 0 ]; then
  api_extra=(--kubelet-preferred-address-types=InternalIP)
  bind=0.0.0.0
  kcm_extra=",root-ca-certificate-publisher-controller,pod-garbage-collector-controller,endpointslice-controller"
fi

# --- kube-apiserver
kube-apiserver "${api_extra[@]}" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address="$bind" --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
  --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" --client-ca-file="$P/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$P/sa.pub" \
  --service-account-signing-key-file="$P/sa.key" --service-cluster-ip-range=10.96.0.0/16 \
  --authorization-mode=Node,RBAC --allow-privileged=true \
  --disable-admission-plugins=TaintNodesByCondition \
  --endpoint-reconciler-type=none --enable-priority-and-fairness=false --profiling=false \
  --max-requests-inflight=1000 --max-mutating-requests-inflight=500 \
  >"$RUN/log/kube-apiserver.log" 2>&1 &
echo $! >"$RUN/kube-apiserver.pid"
ready=0
for _ in $(seq 240); do
  if curl_api /readyz >/dev/null 2>&1; then ready=1; break; fi
  alive kube-apiserver || break
  sleep 0.25
done
if [ $ready = 0 ]; then echo "kube-apiserver did not become ready; see $RUN/log/kube-apiserver.log" >&2; tail -20 "$RUN/log/kube-apiserver.log" >&2; exit 1; fi

# --- kube-controller-manager: only the controllers a training operator relies on.
kube-controller-manager --kubeconfig="$KCFG" \
  --authentication-kubeconfig="$KCFG" --authorization-kubeconfig="$KCFG" \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port="$((API_PORT + 1))" \
  --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" --use-service-account-credentials=false \
  --kube-api-qps=500 --kube-api-burst=1000 --concurrent-gc-syncs=10 \
  --controllers=garbage-collector-controller,namespace-controller,job-controller,ttl-after-finished-controller,serviceaccount-controller,serviceaccount-token-controller,deployment-controller,replicaset-controller$kcm_extra \
  >"$RUN/log/kube-controller-manager.log" 2>&1 &
echo $! >"$RUN/kube-controller-manager.pid"

# --- kube-scheduler
kube-scheduler --kubeconfig="$KCFG" --leader-elect=false \
  --authentication-kubeconfig="$KCFG" --authorization-kubeconfig="$KCFG" \
  --bind-address=127.0.0.1 --secure-port="$((API_PORT + 2))" \
  >"$RUN/log/kube-scheduler.log" 2>&1 &
echo $! >"$RUN/kube-scheduler.pid"

# --- kwok: kwok's own node/pod stages read from the module cache (never committed), plus ours.
K=$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage
if [ ! -d "$K" ]; then (cd "$(mktemp -d)" && go mod download "sigs.k8s.io/kwok@v$KWOK_VERSION" >/dev/null); fi
{
  for f in node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    cat "$K/$f"; echo '---'
  done
  cat "$here/kwok/lattice-stages.yaml"
} >"$RUN/kwok-stages.yaml"
kwok --kubeconfig="$KCFG" --config="$RUN/kwok-stages.yaml" \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --cidr=10.244.0.0/16 --node-ip=10.1.0.1 --server-address="" \
  >"$RUN/log/kwok.log" 2>&1 &
echo $! >"$RUN/kwok.pid"

# default namespace exists once the apiserver's bootstrap controllers ran
for _ in $(seq 120); do kubectl --kubeconfig "$KCFG" get ns default >/dev/null 2>&1 && break; sleep 0.25; done

if [ "${LATTICE_NODES_ARGS-unset}" != "" ]; then
  # shellcheck disable=SC2086
  python3 "$here/nodes.py" ${LATTICE_NODES_ARGS:---count 8 --gpus 8} | kubectl --kubeconfig "$KCFG" apply -f - >/dev/null
fi

# --- real kubelet nodes, their containerds, the registry mirror and CoreDNS (LATTICE_REAL_NODES).
if [ "$REAL_NODES" -gt 0 ]; then
  touch "$RUN/real-nodes-enabled"
  LATTICE_API_PORT=$API_PORT "$here/real-nodes.sh" up
fi

ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
printf 'control plane ready in %d.%03ds (kube-apiserver %s); export KUBECONFIG=%s\n' \
  $((ms / 1000)) $((ms % 1000)) "$(kube-apiserver --version | awk '{print $2}')" "$KCFG" >&2
