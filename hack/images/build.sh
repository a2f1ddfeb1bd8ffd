#!/usr/bin/env bash
# Builds the images that real nodes run, offline from Debian packages and PyPI wheels, and pushes
# them into the cluster's registry mirror under the names upstream manifests use.
#
#   build.sh [--push] [IMAGE...]     IMAGE: pause mpi-pi mpi-pi-mpich torch resnet
#                                     dataset-initializer mxnet
#                                     (default: all). --push copies them into the running mirror.
#
# How: mmdebstrap makes a Debian bookworm rootfs tarball from a package list; umoci turns it into
# a layer of an OCI image in one shared layout (~/.cache/lattice/images/oci, so layers are shared
# and stored once); small additions are further layers (`umoci insert`); `umoci config` sets the
# entrypoint, user, env and working directory; skopeo copies the result to the registry.
#
# Cached by content: each image is tagged in the layout with a hash of its recipe (this script,
# its directory under hack/images/, its package list, the hash of its base), so an unchanged
# recipe is never rebuilt, and a push of blobs the registry has is skipped by skopeo.
#
# Images (names as pushed; the mirror serves docker.io, ghcr.io, nvcr.io and registry.k8s.io):
#   pause:3.10                    registry.k8s.io/pause: a static pause program (pause/pause.c)
#   mpioperator/mpi-pi:openmpi    OpenMPI, sshd as mpiuser on 2222, /home/mpiuser/pi from source,
#                                 and upstream's entrypoint (the launcher waits for DNS names)
#   mpioperator/mpi-pi:mpich      the same with MPICH 4.2 from Debian trixie, as upstream's v0.8
#                                 images (bookworm's MPICH 4.0 can hang in MPI_Finalize, see mpi_pi)
#   pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
#                                 Debian's CPU python3-torch (1.13) with gloo, plus `torchrun`
#   breezeml/lattice-resnet:1.0.1 the torch image + /workspace/main.py (elastic, checkpointing)
#   kubeflow/trainer/dataset-initializer:latest
#                                 the torch image + an initializer that writes a local dataset
#   mxjob/mxnet:gpu               the torch image's base + MXNet 1.9.1 (CPU wheel from PyPI)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# rootfs, MIRROR and SUITE (bookworm)
# shellcheck source=hack/images/lib.sh
source "$here/lib.sh"
CACHE=${LATTICE_IMAGE_CACHE:-$HOME/.cache/lattice/images}
L=$CACHE/oci
TORCH_TAG=2.7.1-cuda12.8-cudnn9-runtime
push=0
log() { printf '[images] %s\n' "$*" >&2; }

# Debian package lists. Recommends are never installed; docs, man pages and locales are dropped.
PKGS_OPENMPI=openssh-server,openssh-client,openmpi-bin,libopenmpi3
PKGS_MPICH=openssh-server,openssh-client,mpich,libmpich12
PKGS_PY=python3,python3-torch,python3-numpy,procps,iproute2,bash

# One build at a time per cache: leftovers of an interrupted build are removed first.
rm -rf "$CACHE/tmp"
mkdir -p "$CACHE/apt" "$CACHE/tmp"
[ -d "$L" ] || umoci init --layout "$L"

# (grep without -q: an early exit would SIGPIPE umoci and, under pipefail, fail the check)
has_tag() { umoci ls --layout "$L" 2>/dev/null | grep -x "$1" >/dev/null; }

# recipe_hash PARTS...: a short content hash of the calling build function's own text, of the
# shared helpers, and of the given files, directories or strings. Editing one recipe rebuilds that
# image (and the images derived from it), nothing else.
recipe_hash() {
  {
    declare -f "${FUNCNAME[1]}" rootfs new_image derive
    local p
    for p in "$@"; do
      if [ -e "$p" ]; then find "$p" -type f -print0 | sort -z | xargs -0 sha256sum; else echo "$p"; fi
    done
  } | sha256sum | cut -c1-16
}

# new_image TAG ROOTFS.tar: an image of one layer.
new_image() {
  umoci new --image "$L:$1.tmp"
  umoci raw add-layer --image "$L:$1.tmp" "$2" --history.created_by "mmdebstrap $SUITE"
}

# derive BASE TAG: TAG starts as a copy of BASE (layers shared).
derive() { umoci tag --image "$L:$1" "$2.tmp"; }

finish() { # TAG: make the .tmp tag final
  umoci tag --image "$L:$1.tmp" "$1"
  umoci rm --image "$L:$1.tmp"
}

build_pause() {
  local tag; tag=pause-$(recipe_hash "$here/pause")
  if ! has_tag "$tag"; then
    log "pause: building $tag"
    local w; w=$(mktemp -d "$CACHE/tmp/pause.XXXX")
    gcc -Os -static -o "$w/pause" "$here/pause/pause.c"
    strip "$w/pause"
    umoci new --image "$L:$tag.tmp"
    umoci insert --image "$L:$tag.tmp" "$w/pause" /pause
    umoci config --image "$L:$tag.tmp" --config.entrypoint /pause --config.user 65535:65535
    finish "$tag"; rm -rf "$w"
  fi
  echo "$tag registry.k8s.io/pause:3.10"
}

# mpi_pi IMPL PACKAGES COMPILER SUITE: the pi image of one MPI implementation, its rootfs from
# Debian SUITE. MPICH comes from trixie (4.2.1), as in upstream's v0.8 images: bookworm's 4.0.2
# (ch4:ucx) ends MPI_Finalize with a PMI barrier in which a rank stops progressing UCX, and a peer
# still disconnecting from it then spins forever (3 of 9 runs of the pi test hung so; MPICH
# dropped the barrier in 4.2, pmodels/mpich#6596).
mpi_pi() {
  local impl=$1 pkgs=$2 cxx=$3 suite=$4 tag
  tag=mpi-pi-$impl-$(recipe_hash "$here/mpi-pi" "$pkgs" "$cxx" "$suite")
  if ! has_tag "$tag"; then
    log "mpi-pi:$impl: building $tag (mmdebstrap $suite: $impl, sshd; pi compiled with $cxx)"
    local w; w=$(mktemp -d "$CACHE/tmp/mpi.XXXX")
    # Compiled on the build machine against bookworm's -dev package; trixie's MPICH keeps the
    # ABI of libmpich.so.12 (MPICH's ABI is stable within a soname).
    "$cxx" -O2 -o "$w/pi" "$here/mpi-pi/pi.cc"
    # As mpi-operator's build/base Dockerfile: ssh on 2222 without host-key prompts or a
    # known_hosts file (the .ssh directory is a read-only Secret), sshd run as mpiuser.
    SUITE=$suite rootfs "$pkgs" "$w/rootfs.tar" \
      --customize-hook='chroot "$1" useradd -m -u 1000 -s /bin/bash mpiuser' \
      --customize-hook='mkdir -p "$1"/var/run/sshd' \
      --customize-hook='printf "Host *\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    Port 2222\n    LogLevel ERROR\n" >>"$1"/etc/ssh/ssh_config' \
      --customize-hook="upload $here/mpi-pi/sshd_config /home/mpiuser/.sshd_config" \
      --customize-hook="upload $w/pi /home/mpiuser/pi" \
      --customize-hook="upload $here/mpi-pi/entrypoint.sh /entrypoint.sh" \
      --customize-hook='chmod 755 "$1"/entrypoint.sh' \
      --customize-hook='chroot "$1" chown mpiuser:mpiuser /home/mpiuser/.sshd_config /home/mpiuser/pi' \
      --customize-hook='chmod 755 "$1"/home/mpiuser/pi' \
      --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*'
    SUITE=$suite new_image "$tag" "$w/rootfs.tar"
    umoci config --image "$L:$tag.tmp" --config.workingdir /home/mpiuser --config.user 1000 \
      --config.entrypoint /entrypoint.sh \
      --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    finish "$tag"; rm -rf "$w"
  fi
  echo "$tag docker.io/mpioperator/mpi-pi:$impl"
}
build_mpi_pi() { mpi_pi openmpi "$PKGS_OPENMPI" mpic++.openmpi bookworm; }
build_mpi_pi_mpich() { mpi_pi mpich "$PKGS_MPICH" mpicxx.mpich trixie; }

# The shared Python base: Debian's CPU torch with gloo and its c10d rendezvous, plus `torchrun`
# (a layer of its own, so that editing it does not rebuild the rootfs).
build_py_base() {
  local tag; tag=py-$(recipe_hash "$PKGS_PY")
  if ! has_tag "$tag"; then
    log "python base: building $tag (mmdebstrap: python3-torch, a CPU build)"
    local w; w=$(mktemp -d "$CACHE/tmp/py.XXXX")
    # torchrun of Debian's 1.13 under Python 3.11 fails with "'NoneType' object has no attribute
    # 'get'": Std.from_str looks "0" up by iterating the IntFlag, and 3.11 no longer yields the
    # zero member NONE. The one-line fix (look the value up directly) is applied to the package.
    rootfs "$PKGS_PY" "$w/rootfs.tar" \
      --customize-hook='sed -i "s/^            v = int(v)$/            return Std(int(v))  # lattice: Python 3.11 fix/" "$1"/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py' \
      --customize-hook='grep -q "lattice: Python 3.11 fix" "$1"/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py' \
      --customize-hook='ln -sf python3 "$1"/usr/bin/python' \
      --customize-hook='mkdir -p "$1"/workspace'
    new_image "$tag" "$w/rootfs.tar"
    umoci config --image "$L:$tag.tmp" --config.workingdir /workspace \
      --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --config.env PYTHONUNBUFFERED=1 --config.cmd /bin/bash
    finish "$tag"; rm -rf "$w"
  fi
  echo "$tag"
}

build_torch() {
  local base tag; base=$(build_py_base)
  tag=torch-$(recipe_hash "$here/python" "$base")
  if ! has_tag "$tag"; then
    log "torch: building $tag"
    # Debian's /usr/bin/torchrun (1.13) knows only the underscore spellings; ours comes first
    # on PATH. umoci keeps the file's mode, so the copy is made executable here.
    local w; w=$(mktemp -d "$CACHE/tmp/torch.XXXX")
    install -m 755 "$here/python/torchrun" "$w/torchrun"
    derive "$base" "$tag"
    umoci insert --image "$L:$tag.tmp" "$w/torchrun" /usr/local/bin/torchrun
    finish "$tag"; rm -rf "$w"
  fi
  echo "$tag docker.io/pytorch/pytorch:$TORCH_TAG"
}

build_resnet() {
  local base tag; base=$(build_torch | cut -d" " -f1)
  tag=resnet-$(recipe_hash "$here/resnet" "$base")
  if ! has_tag "$tag"; then
    log "lattice-resnet: building $tag"
    derive "$base" "$tag"
    umoci insert --image "$L:$tag.tmp" "$here/resnet/main.py" /workspace/main.py
    finish "$tag"
  fi
  echo "$tag docker.io/breezeml/lattice-resnet:1.0.1"
}

build_dataset_initializer() {
  local base tag; base=$(build_torch | cut -d" " -f1)
  tag=dsinit-$(recipe_hash "$here/dataset-initializer" "$base")
  if ! has_tag "$tag"; then
    log "dataset-initializer: building $tag"
    derive "$base" "$tag"
    umoci insert --image "$L:$tag.tmp" "$here/dataset-initializer/initialize.py" /app/initialize.py
    umoci config --image "$L:$tag.tmp" --config.entrypoint python3 --config.entrypoint /app/initialize.py \
      --clear=config.cmd
    finish "$tag"
  fi
  echo "$tag ghcr.io/kubeflow/trainer/dataset-initializer:latest"
}

MXNET_WHEELS=(mxnet==1.9.1 numpy==1.23.5 requests==2.32.3 urllib3==2.2.3 idna==3.10 charset-normalizer==3.4.0
              certifi==2024.8.30)
build_mxnet() {
  local base tag; base=$(build_torch | cut -d" " -f1)
  tag=mxnet-$(recipe_hash "$here/mxnet" "$base" "${MXNET_WHEELS[*]}")
  if ! has_tag "$tag"; then
    log "mxnet: building $tag (wheels ${MXNET_WHEELS[*]} from PyPI)"
    local w; w=$(mktemp -d "$CACHE/tmp/mx.XXXX")
    mkdir -p "$CACHE/wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux2014_x86_64 -d "$CACHE/wheels" "${MXNET_WHEELS[@]}"
    # numpy 1.23 because MXNet 1.9 uses aliases (numpy.bool) that numpy 1.24 removed.
    python3 -m pip install -q --no-deps --no-index --find-links "$CACHE/wheels" \
      --target "$w/site" "${MXNET_WHEELS[@]}"
    derive "$base" "$tag"
    umoci insert --image "$L:$tag.tmp" "$w/site" /usr/local/lib/python3.11/dist-packages
    umoci insert --image "$L:$tag.tmp" "$here/mxnet" /mxnet
    umoci config --image "$L:$tag.tmp" --config.entrypoint python3 --config.entrypoint /mxnet/role.py \
      --clear=config.cmd
    finish "$tag"; rm -rf "$w"
  fi
  echo "$tag docker.io/mxjob/mxnet:gpu"
}

# push TAG NAME: NAME's registry host is dropped: the mirror serves one flat namespace.
push_one() {
  local tag=$1 name=$2 path
  path=${name#*/}
  skopeo copy --quiet --dest-tls-verify=false --retry-times 2 "oci:$L:$tag" "docker://$REGISTRY/$path"
  log "pushed $name ($tag)"
}

args=()
for a in "$@"; do
  case $a in
    --push) push=1 ;;
    *) args+=("$a") ;;
  esac
done
[ ${#args[@]} -gt 0 ] || args=(pause mpi-pi mpi-pi-mpich torch resnet dataset-initializer mxnet)
if [ $push = 1 ]; then
  eval "$(LATTICE_API_PORT=${LATTICE_API_PORT:-26443} "$repo/hack/controlplane/real-nodes.sh" env)"
  REGISTRY=$LATTICE_REGISTRY
  curl -sf --max-time 2 "http://$REGISTRY/v2/" >/dev/null \
    || { log "no registry mirror at $REGISTRY: start real nodes first (LATTICE_REAL_NODES=2 make cluster-up)"; exit 1; }
fi
start=$SECONDS
for a in "${args[@]}"; do
  case $a in
    pause) out=$(build_pause) ;;
    mpi-pi) out=$(build_mpi_pi) ;;
    mpi-pi-mpich) out=$(build_mpi_pi_mpich) ;;
    torch) out=$(build_torch) ;;
    resnet) out=$(build_resnet) ;;
    dataset-initializer) out=$(build_dataset_initializer) ;;
    mxnet) out=$(build_mxnet) ;;
    *) log "unknown image $a"; exit 2 ;;
  esac
  # shellcheck disable=SC2086
  if [ $push = 1 ]; then push_one $out; fi
done
log "done in $((SECONDS - start))s"
