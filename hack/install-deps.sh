#!/usr/bin/env bash
# Installs the Debian packages that real nodes and `make images` need, skipping those present:
#   real nodes: containerd, runc, containernetworking-plugins (CNI plugins in /usr/lib/cni)
#   images:     mmdebstrap (rootfs from Debian packages), umoci (OCI layouts), skopeo (push),
#               g++, libopenmpi-dev and libmpich-dev (the MPI pi programs), gcc (the pause program)
#               buildah (`make image`: the operator's image from the Dockerfile, daemonless)
# Needs root (as CI and the real nodes do). Idempotent: a machine that has them all costs a dpkg
# query and nothing else. `apt-get update` runs only when something must be installed.
set -euo pipefail
pkgs=(containerd runc containernetworking-plugins mmdebstrap umoci skopeo buildah gcc g++ libc6-dev
      libopenmpi-dev openmpi-bin libmpich-dev mpich)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The package's own service is not ours: real nodes run their own containerd per node.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi
