#!/bin/bash
# Entrypoint of the mpi-pi images, as mpi-operator's build/base/entrypoint.sh: before the launcher
# runs its command, every host of /etc/mpi/hostfile, and the launcher's own Service name, must
# resolve in DNS. mpirun (and MPICH's hydra proxies, which call back to the launcher by name) look
# each name up once and do not retry. Bounded: after 60 tries per name it goes on regardless.
resolve_host() {
  local host=$1 i
  for ((i = 0; i < 60; i++)); do
    if getent hosts "$host" >/dev/null; then
      echo "Resolved $host"
      return 0
    fi
    sleep 1
  done
  echo "Couldn't resolve $host"
}

if [ "${K_MPI_JOB_ROLE:-}" = launcher ] && [ -f /etc/mpi/hostfile ]; then
  domain=
  while read -r host _; do
    host=${host%%:*}
    [ -n "$host" ] || continue
    domain=${host#*.}
    resolve_host "$host"
  done </etc/mpi/hostfile
  # The launcher by its Service name (not the /etc/hosts entry the kubelet writes).
  if [ -n "$domain" ]; then resolve_host "$HOSTNAME.$domain"; fi
fi
exec "$@"
