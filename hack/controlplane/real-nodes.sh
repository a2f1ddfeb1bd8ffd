#!/usr/bin/env bash
# Real kubelet nodes next to the local control plane: `real-nodes.sh up` (called by cluster-up.sh
# when LATTICE_REAL_NODES > 0) and `real-nodes.sh down` (called by cluster-down.sh).
#
# What `up` starts, all recorded under $LATTICE_CLUSTER_DIR/real/ so that `down` stops exactly that:
#   - a host bridge <prefix>h with $NET.0.1/24, on which the cluster's own services listen:
#       an OCI registry (distribution) on $NET.0.1:$LATTICE_REGISTRY_PORT, the mirror of
#       docker.io, ghcr.io, nvcr.io and registry.k8s.io for every node's containerd;
#       CoreDNS on $NET.0.1:53 (kubernetes plugin, cluster.local, no forwarding anywhere);
#   - the `kubernetes` Service's address for pods: an iptables DNAT of 10.96.0.1:443 to the
#     apiserver on $NET.0.1 (kube-proxy's job; there is no kube-proxy), so that in-cluster
#     clients such as the operator's Deployment work;
#   - per node i (named real-<i>): a bridge <prefix><i> with $NET.<i+1>.1/24 (the node IP and
#     the pods' gateway), its own containerd (root, state, socket, CNI config), and a kubelet
#     with its own root dir and cgroup root. Every bridge is on the host, so pod-to-pod traffic
#     between nodes is routed by the host over the bridges' connected routes (IP forwarding on).
#   - nodes get LATTICE_REAL_NODE_GPUS (default 4) simulated nvidia.com/gpu in their capacity, so
#     that upstream manifests which request GPUs schedule unchanged; containers get no device.
#
# The defaults derive from LATTICE_API_PORT so that two clusters on one machine do not clash:
#   LATTICE_REAL_NET           (default 10.<200 + (API_PORT/1000) % 50>, e.g. 10.226 for 26443)
#   LATTICE_REAL_BRIDGE_PREFIX (default lat<API_PORT>, bridge names <prefix>h, <prefix>0, ...)
#   LATTICE_REGISTRY_PORT      (default 5000, on the host bridge address)
#
# Requires root and the Debian packages containerd, runc and containernetworking-plugins
# (hack/install-deps.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
RUN=${LATTICE_CLUSTER_DIR:-$repo/.cluster}
API_PORT=${LATTICE_API_PORT:-26443}
N=${LATTICE_REAL_NODES:-0}
NET=${LATTICE_REAL_NET:-10.$((200 + (API_PORT / 1000) % 50))}
BR=${LATTICE_REAL_BRIDGE_PREFIX:-lat$API_PORT}
REG_PORT=${LATTICE_REGISTRY_PORT:-5000}
GPUS=${LATTICE_REAL_NODE_GPUS:-4}
R=$RUN/real
KCFG=$RUN/kubeconfig
HOST_IP=$NET.0.1
CGROOT=lattice$API_PORT
PAUSE_IMAGE=registry.k8s.io/pause:3.10

log() { printf '[real-nodes] %s\n' "$*" >&2; }
alive() { [ -f "$R/$1.pid" ] && kill -0 "$(cat "$R/$1.pid")" 2>/dev/null; }
node_ip() { echo "$NET.$(($1 + 1)).1"; }
kc() { kubectl --kubeconfig "$KCFG" "$@"; }

ensure_bridge() { # name cidr
  if ! ip link show "$1" >/dev/null 2>&1; then
    ip link add "$1" type bridge
    echo "$1" >>"$R/bridges"
  fi
  ip addr replace "$2" dev "$1"
  ip link set "$1" up
}

# The v1 controllers that the kubelets' cgroup roots live in (cgroupfs driver).
cgroup_dirs() { # root-name
  local c
  for c in /sys/fs/cgroup/*/; do
    [ "$(stat -fc %T "$c")" = cgroupfs ] || continue
    echo "${c%/}/$1"
  done
}

ensure_cgroup_root() { # name
  local d
  for d in $(cgroup_dirs "$1"); do
    mkdir -p "$d"
    if [ -f "$d/cpuset.cpus" ] && [ -z "$(cat "$d/cpuset.cpus")" ]; then
      cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems"
    fi
  done
}

write_containerd_config() { # i dir
  local i=$1 d=$2 reg
  mkdir -p "$d/net.d" "$d/certs.d"
  for reg in docker.io ghcr.io nvcr.io registry.k8s.io "$HOST_IP:$REG_PORT"; do
    mkdir -p "$d/certs.d/$reg"
    # The server is the local mirror itself: if an image is missing, the pull fails here and
    # nothing is ever asked of the internet.
    cat >"$d/certs.d/$reg/hosts.toml" <<EOF
server = "http://$HOST_IP:$REG_PORT"
[host."http://$HOST_IP:$REG_PORT"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
  done
  cat >"$d/config.toml" <<EOF
version = 2
root = "$d/root"
state = "$d/state"
[grpc]
  address = "$d/containerd.sock"
[ttrpc]
  address = "$d/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  stream_server_address = "$(node_ip "$i")"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$d/certs.d"
EOF
  cat >"$d/net.d/10-lattice.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$BR$i",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BR$i", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$d/ipam",
        "ranges": [[{"subnet": "$NET.$((i + 1)).0/24", "rangeStart": "$NET.$((i + 1)).10",
                     "gateway": "$(node_ip "$i")"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

write_kubelet_config() { # i dir
  local i=$1 d=$2 ip; ip=$(node_ip "$i")
  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /$CGROOT-$i
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$RUN/real/node-$i/containerd/containerd.sock
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
clusterDNS: ["$HOST_IP"]
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: $ip
healthzPort: 10248
tlsCertFile: $d/kubelet.crt
tlsPrivateKeyFile: $d/kubelet.key
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
serializeImagePulls: false
maxPods: 50
shutdownGracePeriod: 0s
podLogsDir: $d/pod-logs
EOF
}

start_registry() {
  alive registry && return
  # The registry's storage outlives the cluster ($RUN/registry): pushed images stay for the next
  # cluster-up, and `make images` pushes only what is missing.
  mkdir -p "$RUN/registry"
  cat >"$R/registry.yml" <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $RUN/registry}
  delete: {enabled: true}
http:
  addr: $HOST_IP:$REG_PORT
EOF
  OTEL_TRACES_EXPORTER=none registry serve "$R/registry.yml" >"$RUN/log/registry.log" 2>&1 &
  echo $! >"$R/registry.pid"
  for _ in $(seq 100); do curl -sf --max-time 1 "http://$HOST_IP:$REG_PORT/v2/" >/dev/null && return; sleep 0.1; done
  log "registry did not answer; see $RUN/log/registry.log"; tail -5 "$RUN/log/registry.log" >&2; exit 1
}

# The `kubernetes` Service (10.96.0.1:443) for pods, as kube-proxy would make it: pods of our
# bridges that connect to it reach the apiserver on the host bridge's address (it listens on every
# address when real nodes run). Only this cluster's bridges match, so two clusters do not clash.
API_SVC_RULE=(PREROUTING -i "$BR+" -d 10.96.0.1/32 -p tcp --dport 443 -j DNAT
              --to-destination "$HOST_IP:$API_PORT")
forward_api() {
  iptables -t nat -C "${API_SVC_RULE[@]}" 2>/dev/null || iptables -t nat -A "${API_SVC_RULE[@]}"
  touch "$R/api-forward"
}

start_coredns() {
  alive coredns && return
  # cluster.local (and reverse lookups) from the API; every other name is NXDOMAIN at once:
  # nothing is forwarded anywhere. No cache and TTL 0: a pod that just became Ready resolves at
  # once (MPICH's hydra proxies look the launcher up once, the moment it starts them).
  cat >"$R/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind $HOST_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $KCFG lattice-local
        pods insecure
        ttl 0
    }
}
.:53 {
    bind $HOST_IP
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
  coredns -conf "$R/Corefile" >"$RUN/log/coredns.log" 2>&1 &
  echo $! >"$R/coredns.pid"
}

start_node() { # i
  local i=$1 name=real-$1 d=$R/node-$1 ip; ip=$(node_ip "$1")
  mkdir -p "$d/containerd" "$d/kubelet"
  ensure_bridge "$BR$i" "$ip/24"
  ensure_cgroup_root "$CGROOT-$i"
  echo "$CGROOT-$i" >>"$R/cgroups"
  write_containerd_config "$i" "$d/containerd"
  if ! alive "containerd-$i"; then
    containerd --config "$d/containerd/config.toml" >"$RUN/log/containerd-$i.log" 2>&1 &
    echo $! >"$R/containerd-$i.pid"
  fi
  if [ ! -f "$d/kubelet.crt" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$name" -keyout "$d/kubelet.key" \
      -out "$d/kubelet.crt" -addext "subjectAltName=IP:$ip,DNS:$name" 2>/dev/null
  fi
  write_kubelet_config "$i" "$d"
  for _ in $(seq 100); do [ -S "$d/containerd/containerd.sock" ] && break; sleep 0.1; done
  if ! alive "kubelet-$i"; then
    kubelet --config="$d/kubelet.yaml" --kubeconfig="$KCFG" --root-dir="$d/kubelet" \
      --cert-dir="$d/pki" --hostname-override="$name" --node-ip="$ip" \
      --node-labels="lattice.breezeml.ai/node-type=real" \
      >"$RUN/log/kubelet-$i.log" 2>&1 &
    echo $! >"$R/kubelet-$i.pid"
  fi
}

up() {
  [ "$N" -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || { log "real nodes need root"; exit 1; }
  local missing=() b
  for b in containerd runc /usr/lib/cni/bridge; do command -v "$b" >/dev/null || missing+=("$b"); done
  if [ ${#missing[@]} -gt 0 ]; then log "missing: ${missing[*]} (run hack/install-deps.sh)"; exit 1; fi
  mkdir -p "$R" "$RUN/log"
  : >>"$R/bridges"; : >>"$R/cgroups"
  if [ ! -f "$R/ip_forward.orig" ]; then cat /proc/sys/net/ipv4/ip_forward >"$R/ip_forward.orig"; fi
  echo 1 >/proc/sys/net/ipv4/ip_forward
  ensure_bridge "${BR}h" "$HOST_IP/24"
  forward_api
  start_registry
  # Every sandbox needs the pause image, so it is in the mirror before any kubelet starts.
  LATTICE_API_PORT=$API_PORT "$repo/hack/images/build.sh" --push pause
  start_coredns
  local i
  for ((i = 0; i < N; i++)); do start_node "$i"; done
  # Ready, then the simulated GPUs (a status patch, as for any extended resource without a plugin).
  local deadline=$((SECONDS + ${LATTICE_REAL_NODES_TIMEOUT:-120})) name
  for ((i = 0; i < N; i++)); do
    name=real-$i
    until [ "$(kc get node "$name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
      if ((SECONDS > deadline)) || ! alive "kubelet-$i"; then
        log "node $name not Ready; see $RUN/log/kubelet-$i.log and containerd-$i.log"
        tail -20 "$RUN/log/kubelet-$i.log" >&2; exit 1
      fi
      sleep 0.5
    done
    if [ "$GPUS" -gt 0 ]; then
      kc patch node "$name" --subresource=status --type=merge \
        -p "{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"$GPUS\"}}}" >/dev/null
    fi
  done
  log "$N real node(s) Ready; registry http://$HOST_IP:$REG_PORT, DNS $HOST_IP"
}

# Stops what `up` recorded: pods first (through the kubelet, so CNI releases their addresses and
# network namespaces), then kubelets, containerds, leftover container processes in our cgroup
# roots, our mounts, cgroups and bridges.
down() {
  [ -d "$R" ] || return 0
  set +e  # best effort: every step runs even if an earlier one found nothing to do
  local i f pid
  if [ -f "$KCFG" ] && ls "$R"/kubelet-*.pid >/dev/null 2>&1; then
    for f in "$R"/kubelet-*.pid; do
      i=${f##*/kubelet-}; i=${i%.pid}
      kc delete pods -A --field-selector "spec.nodeName=real-$i" --grace-period=0 --force \
        --wait=false --request-timeout=5s >/dev/null 2>&1 || true
    done
    local deadline=$((SECONDS + 30))
    for f in "$R"/node-*/containerd/containerd.sock; do
      [ -S "$f" ] || continue
      while [ -n "$(ctr -a "$f" -n k8s.io tasks ls -q 2>/dev/null)" ] && ((SECONDS < deadline)); do sleep 0.5; done
    done
  fi
  for f in "$R"/kubelet-*.pid "$R"/containerd-*.pid "$R"/coredns.pid "$R"/registry.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  # Shims of our containerds, then anything still in our cgroup roots.
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $R/" || true); do kill -9 "$pid" 2>/dev/null || true; done
  local cg d
  if [ -f "$R/cgroups" ]; then
    for cg in $(sort -u "$R/cgroups"); do
      for d in $(cgroup_dirs "$cg"); do
        [ -d "$d" ] || continue
        find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      done
    done
  fi
  # Network namespaces that our containerds created and did not release.
  grep -rhos '/var/run/netns/cni-[0-9a-f-]*' "$R"/node-*/containerd/root/io.containerd.grpc.v1.cri/sandboxes \
    2>/dev/null | sort -u | while read -r ns; do ip netns delete "${ns##*/}" 2>/dev/null; done
  # Our mounts (overlay rootfs, shm, kubelet volumes), deepest first.
  awk -v p="$R/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  if [ -f "$R/cgroups" ]; then
    for cg in $(sort -u "$R/cgroups"); do
      for d in $(cgroup_dirs "$cg"); do
        [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      done
    done
  fi
  if [ -f "$R/api-forward" ]; then
    while iptables -t nat -D "${API_SVC_RULE[@]}" 2>/dev/null; do :; done
  fi
  if [ -f "$R/bridges" ]; then
    for b in $(sort -u "$R/bridges"); do ip link delete "$b" 2>/dev/null || true; done
  fi
  # IP forwarding goes back to what it was, unless another cluster's real nodes still use it.
  if [ -f "$R/ip_forward.orig" ] && ! ip -o link show type bridge | grep -q ' lat[0-9]'; then
    cat "$R/ip_forward.orig" >/proc/sys/net/ipv4/ip_forward
  fi
  rm -rf "$R"
  log "real nodes stopped"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  # For hack/images/build.sh and the tests: where the mirror and DNS of this cluster listen.
  env) printf 'LATTICE_REGISTRY=%s\nLATTICE_DNS=%s\nLATTICE_REAL_NET=%s\n' "$HOST_IP:$REG_PORT" "$HOST_IP" "$NET" ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
