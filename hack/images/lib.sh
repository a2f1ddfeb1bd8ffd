# shellcheck shell=bash
# Sourced by hack/images/build.sh and hack/images/operator.sh: the Debian rootfs both build on.
#
#   rootfs PKGS OUT.tar [mmdebstrap options...]: a minbase Debian $SUITE rootfs tarball of PKGS
#       from $MIRROR; recommends are never installed, docs, man pages, locales and apt lists are
#       dropped, and the .debs are cached in $CACHE/apt (shared by every image). Extra options
#       (e.g. more --customize-hook) run after these.
#
# The caller sets CACHE (and may set SUITE for one call: `SUITE=trixie rootfs ...`). A recipe
# hash that covers an image built with rootfs includes `declare -f rootfs`.
MIRROR=${LATTICE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm

rootfs() {
  local pkgs=$1 out=$2; shift 2
  mmdebstrap --quiet --variant=minbase --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook="sync-in $CACHE/apt /var/cache/apt/archives/" \
    --essential-hook="sync-out /var/cache/apt/archives $CACHE/apt" \
    --customize-hook="sync-out /var/cache/apt/archives $CACHE/apt" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/archives/*.deb' \
    --include="$pkgs" "$@" "$SUITE" "$out" "$MIRROR"
}
