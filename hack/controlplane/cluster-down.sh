#!/usr/bin/env bash
# Stops only the control-plane processes that cluster-up.sh recorded in the cluster dir, newest
# first, and removes etcd's data. Logs are kept for inspection.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
RUN=${LATTICE_CLUSTER_DIR:-$repo/.cluster}
# Real nodes first: their pods are deleted through the still-running apiserver.
if [ -d "$RUN/real" ]; then
  while read -r d; do PATH="$d:$PATH"; done < <("$here/build.sh" paths)
  export PATH
  "$here/real-nodes.sh" down
fi
for n in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
  f=$RUN/$n.pid
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$f"
done
rm -rf "$RUN/etcd"
echo "control plane stopped" >&2
