"""The MPI policy: hostfile, launcher environment per implementation, and the ssh key Secret
with its volume, as mpi-operator (MPIJob) and Trainer's MPI plugin (TrainJob) wire them.

Contract (pure):
- ``implementation(name)``: the implementation a policy names; ``""`` (allowed by Trainer's
  enum) is OpenMPI, the documented default.
- ``slots(requested=, configured=, gpus=)``: slots per node (Trainer's MPI plugin): the TrainJob's
  numProcPerNode when set; else the runtime's, except that the default 1 becomes the node's GPU
  count when the node has more than one GPU. (mpi-operator's ``slotsPerWorker`` is given
  explicitly and read as is.)
- ``hostfile(hosts, slots=, implementation=)``: one line per host, ``<host> slots=<n>`` for
  OpenMPI, ``<host>:<n>`` for Intel MPI and MPICH.
- ``launcher_env(implementation, hostfile=, slots=)``: the launcher's variables by name, in
  mpi-operator's order: OpenMPI ``OMPI_MCA_orte_keep_fqdn_hostnames=true``,
  ``OMPI_MCA_orte_default_hostfile``, ``OMPI_MCA_plm_rsh_args`` (``RSH_ARGS``),
  ``OMPI_MCA_orte_set_default_slots``; Intel ``I_MPI_HYDRA_HOST_FILE``,
  ``I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS``, ``I_MPI_PERHOST``; MPICH ``HYDRA_HOST_FILE``,
  ``HYDRA_LAUNCH_EXTRA_ARGS``. A kind that lists them in another order (Trainer) picks them by
  name.
- ``ssh_auth_secret``: a ``kubernetes.io/ssh-auth`` Secret whose key material is left empty and
  marked ``lattice.breezeml.ai/generate: ssh-keypair``: plugins are pure, the reconciler fills it
  (``lattice.controllers.generated``) before creating it, once per job.
- ``ssh_volume``: the Secret volume every launcher and worker mounts: ``id_rsa`` (private key),
  ``id_rsa.pub`` and ``authorized_keys`` (public key), ``defaultMode`` when given (0600 where
  ssh insists on it, e.g. ``/root/.ssh``), and per-file modes (private, public) when given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lattice.frameworks.naming import object_meta
from lattice.primitives.objects import Obj

__all__ = [
    "ANNOTATION_GENERATE",
    "CONFIG_MOUNT_PATH",
    "GENERATE_SSH_KEYPAIR",
    "INTEL",
    "MPICH",
    "OPENMPI",
    "RSH_ARGS",
    "SSH_PRIVATE_KEY",
    "SSH_PUBLIC_KEY",
    "hostfile",
    "implementation",
    "launcher_env",
    "slots",
    "ssh_auth_secret",
    "ssh_volume",
]

OPENMPI, INTEL, MPICH = "OpenMPI", "Intel", "MPICH"
#: Where the launcher mounts the hostfile (and mpi-operator's ``discover_hosts.sh``).
CONFIG_MOUNT_PATH = "/etc/mpi"
#: ssh options of the launcher: retry while the workers' sshd comes up.
RSH_ARGS = "-o ConnectionAttempts=10"
#: Annotation on a child manifest whose content the reconciler must generate before creating it.
ANNOTATION_GENERATE = "lattice.breezeml.ai/generate"
#: ``ANNOTATION_GENERATE`` value: fill ``ssh-privatekey`` (PEM) and ``ssh-publickey``
#: (authorized_keys line) with a fresh key pair (mpi-operator: ECDSA P-521).
GENERATE_SSH_KEYPAIR = "ssh-keypair"
SSH_PRIVATE_KEY = "ssh-privatekey"
SSH_PUBLIC_KEY = "ssh-publickey"


def implementation(name: str | None) -> str:
    return name or OPENMPI


def slots(*, requested: int | None, configured: int, gpus: int) -> int:
    if requested is not None:
        return requested
    return gpus if configured == 1 and gpus > 1 else configured


def hostfile(hosts: Iterable[str], *, slots: int, implementation: str) -> str:
    line = "{} slots={}\n" if implementation == OPENMPI else "{}:{}\n"
    return "".join(line.format(host, slots) for host in hosts)


def launcher_env(implementation: str, *, hostfile: str, slots: int) -> dict[str, str]:
    if implementation == OPENMPI:
        return {
            "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_default_hostfile": hostfile,
            "OMPI_MCA_plm_rsh_args": RSH_ARGS,
            "OMPI_MCA_orte_set_default_slots": str(slots),
        }
    if implementation == INTEL:
        return {
            "I_MPI_HYDRA_HOST_FILE": hostfile,
            "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": RSH_ARGS,
            "I_MPI_PERHOST": str(slots),
        }
    return {"HYDRA_HOST_FILE": hostfile, "HYDRA_LAUNCH_EXTRA_ARGS": RSH_ARGS}


def ssh_auth_secret(
    *,
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    owner: Mapping[str, Any],
) -> Obj:
    """A ``kubernetes.io/ssh-auth`` Secret with empty keys, marked for key-pair generation."""
    marked = {ANNOTATION_GENERATE: GENERATE_SSH_KEYPAIR}
    meta = object_meta(
        name=name, namespace=namespace, labels=labels, owner=owner, annotations=marked
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "kubernetes.io/ssh-auth",
        "data": {SSH_PRIVATE_KEY: "", SSH_PUBLIC_KEY: ""},
    }


def ssh_volume(
    *,
    volume: str,
    secret: str,
    default_mode: int | None = None,
    file_modes: tuple[int, int] | None = None,
) -> Obj:
    items: list[Obj] = [
        {"key": SSH_PRIVATE_KEY, "path": "id_rsa"},
        {"key": SSH_PUBLIC_KEY, "path": "id_rsa.pub"},
        {"key": SSH_PUBLIC_KEY, "path": "authorized_keys"},
    ]
    if file_modes is not None:
        private, public = file_modes
        for item in items:
            item["mode"] = private if item["key"] == SSH_PRIVATE_KEY else public
    source: Obj = {"secretName": secret, "items": items}
    if default_mode is not None:
        source["defaultMode"] = default_mode
    return {"name": volume, "secret": source}
