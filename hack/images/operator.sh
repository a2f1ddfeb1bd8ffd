#!/usr/bin/env bash
# Builds the operator's image from the repository's Dockerfile with buildah, offline, and pushes it.
#
#   operator.sh                  build (or find in the cache) the image; print its local name
#   operator.sh --push [DEST]    ... and push it: DEST is a registry image reference; by default
#                                the running real-node cluster's mirror, under both names that
#                                deploy/ and the chart use (ghcr.io/breezeml/lattice-operator
#                                :latest and :<the chart's appVersion>)
#   operator.sh --archive FILE   ... and write a docker-archive tarball carrying both names, for
#                                `kind load image-archive FILE` or `minikube image load FILE`
#
# How: buildah (Debian package), daemonless (--isolation chroot; its storage under the cache, so
# no daemon and no host-wide state), and nothing fetched by the build:
#   - the base image is ours, not docker.io's python:3.11-slim: a Debian bookworm rootfs from
#     mmdebstrap with python3 (3.11) and pip (PEP 668's EXTERNALLY-MANAGED marker dropped: this
#     rootfs is an image's Python, as python:3.11-slim's is), passed as the Dockerfile's BASE_IMAGE;
#   - every wheel the Dockerfile installs (requirements-build.lock, requirements.lock) is fetched
#     on the host by `pip download --require-hashes` into the cache and bind-mounted read-only
#     into the build, which installs with PIP_NO_INDEX and PIP_FIND_LINKS: the lock files' hashes
#     are still checked, and nothing in the build reaches a network.
# Cached by content: the image is tagged with a hash of its recipe (the build function, the
# Dockerfile, pyproject, README, the lock files, the source tree and the base), and the base with
# a hash of its own recipe, so a warm rebuild of an unchanged tree is a lookup (and buildah's
# layer cache keeps a changed source tree from reinstalling the wheels); pushing an image the
# registry has is a no-op.
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# rootfs, MIRROR and SUITE (bookworm)
# shellcheck source=hack/images/lib.sh
source "$here/lib.sh"
CACHE=${LATTICE_IMAGE_CACHE:-$HOME/.cache/lattice/images}
REPO_NAME=ghcr.io/breezeml/lattice-operator
APP_VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$repo/deploy/helm/lattice-operator/Chart.yaml")
NAMES=("$REPO_NAME:latest" "$REPO_NAME:$APP_VERSION")
LOCAL=localhost/lattice-operator
BASE=localhost/lattice-python
PKGS_BASE=python3,python3-pip,ca-certificates
log() { printf '[image] %s\n' "$*" >&2; }

# overlay where the cache's filesystem supports it (ext4, xfs ...); LATTICE_BUILDAH_DRIVER=vfs
# elsewhere (slower: every layer is a full copy).
DRIVER=${LATTICE_BUILDAH_DRIVER:-overlay}
B=(buildah --root "$CACHE/buildah/$DRIVER" --runroot "$CACHE/buildah/run-$DRIVER" --storage-driver "$DRIVER")
mkdir -p "$CACHE/buildah" "$CACHE/apt" "$CACHE/wheels/operator"
work=$(mktemp -d "${TMPDIR:-/tmp}/lattice-image.XXXX")
trap 'rm -rf "$work"' EXIT

has_image() { "${B[@]}" inspect --type image "$1" >/dev/null 2>&1; }
hash_of() { # files or directories -> a short content hash
  find "$@" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum \
    | sed "s| $repo/| |" | sha256sum | cut -c1-16
}

# The base: python3 and pip from Debian $SUITE, as one layer.
build_base() {
  local tag
  tag=$(printf '%s\n' "$PKGS_BASE" "$SUITE" "$(declare -f build_base rootfs)" | sha256sum | cut -c1-16)
  if ! has_image "$BASE:$tag"; then
    log "base $BASE:$tag: mmdebstrap $SUITE ($PKGS_BASE)"
    rootfs "$PKGS_BASE" "$work/rootfs.tar" \
      --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
      --customize-hook='ln -sf python3 "$1"/usr/bin/python'
    local c; c=$("${B[@]}" from --pull-never scratch)
    "${B[@]}" add --quiet "$c" "$work/rootfs.tar" / >/dev/null
    "${B[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env LANG=C.UTF-8 --cmd python3 --created-by "mmdebstrap $SUITE $PKGS_BASE" "$c"
    "${B[@]}" commit --quiet --rm "$c" "$BASE:$tag" >/dev/null
    rm -f "$work/rootfs.tar"
  fi
  echo "$BASE:$tag"
}

# The wheels of both lock files, for CPython 3.11 on x86_64 glibc (bookworm has glibc 2.36).
fetch_wheels() {
  local d=$CACHE/wheels/operator stamp
  stamp=$d/.locked-$(hash_of "$repo/requirements.lock" "$repo/requirements-build.lock")
  [ -f "$stamp" ] && return
  log "wheels: pip download of requirements.lock and requirements-build.lock"
  # Every manylinux tag up to glibc 2.36, spelled out: older pips do not expand the newest one.
  local lock plat=(--platform manylinux1_x86_64 --platform manylinux2010_x86_64
                   --platform manylinux2014_x86_64) v
  for v in $(seq 5 36); do plat+=(--platform "manylinux_2_${v}_x86_64"); done
  for lock in requirements-build.lock requirements.lock; do
    python3 -m pip download -q --disable-pip-version-check --require-hashes --no-deps \
      --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 \
      "${plat[@]}" -d "$d" -r "$repo/$lock"
  done
  touch "$stamp"
}

build_operator() {
  local base=$1 tag
  tag=$(printf '%s %s\n%s\n' "$base" "$(hash_of "$repo/Dockerfile" "$repo/.dockerignore" "$repo/pyproject.toml" \
    "$repo/README.md" "$repo"/requirements*.lock "$repo/src")" "$(declare -f build_operator)" | sha256sum | cut -c1-16)
  if ! has_image "$LOCAL:$tag"; then
    log "operator $LOCAL:$tag: buildah bud (chroot isolation, pip with no index)"
    "${B[@]}" bud --quiet --isolation chroot --pull-never --layers \
      --build-arg "BASE_IMAGE=$base" --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/wheels \
      --volume "$CACHE/wheels/operator:/wheels:ro" \
      -f "$repo/Dockerfile" -t "$LOCAL:$tag" "$repo" >/dev/null
  fi
  echo "$LOCAL:$tag"
}

push=0 dest="" archive=""
while [ $# -gt 0 ]; do
  case $1 in
    --push) push=1; if [ $# -gt 1 ] && [[ $2 != --* ]]; then dest=$2; shift; fi ;;
    --archive) archive=$2; shift ;;
    *) echo "usage: $0 [--push [DEST]] [--archive FILE]" >&2; exit 2 ;;
  esac
  shift
done
start=$SECONDS
fetch_wheels
base=$(build_base)
img=$(build_operator "$base")
"${B[@]}" tag "$img" "${NAMES[@]}"
log "built $img (${NAMES[*]}) in $((SECONDS - start))s"
if [ -n "$archive" ]; then
  rm -f "$archive"
  skopeo copy --quiet --additional-tag "${NAMES[1]}" \
    "containers-storage:[$DRIVER@$CACHE/buildah/$DRIVER+$CACHE/buildah/run-$DRIVER]$img" \
    "docker-archive:$archive:${NAMES[0]}"
  log "wrote $archive (${NAMES[*]})"
fi
if [ $push = 1 ]; then
  if [ -n "$dest" ]; then
    "${B[@]}" push --quiet --retry 2 "$img" "docker://$dest"
    log "pushed $dest"
  else
    eval "$(LATTICE_API_PORT=${LATTICE_API_PORT:-26443} "$repo/hack/controlplane/real-nodes.sh" env)"
    curl -sf --max-time 2 "http://$LATTICE_REGISTRY/v2/" >/dev/null \
      || { log "no registry mirror at $LATTICE_REGISTRY: start real nodes first (LATTICE_REAL_NODES=2 make cluster-up)"; exit 1; }
    for name in "${NAMES[@]}"; do
      # The mirror serves one flat namespace: the registry host of the name is dropped.
      "${B[@]}" push --quiet --tls-verify=false --retry 2 "$img" "docker://$LATTICE_REGISTRY/${name#*/}"
      log "pushed $name to $LATTICE_REGISTRY"
    done
  fi
fi
echo "$img"
