"""The Flux policy: a Flux Framework cluster bootstrapped inside a job's node pods, as Trainer's
Flux plugin (v2.2-v2.3) wires it: an installer init container that copies a Flux "view" into a
shared volume, a broker configuration over the pods' hostnames, a ZeroMQ CURVE certificate, and
the node container's command run through an entrypoint that starts the brokers and, on the first
pod, ``flux run`` of the user's command.

Contract (pure; the facts are Trainer's, the scripts are Lattice's own):
- ``settings(env)``: ``FLUX_VIEW_IMAGE``, ``FLUX_NETWORK_DEVICE`` and ``FLUX_QUEUE_POLICY`` with
  their defaults, each replaced by a literal value of that name in ``env`` (later wins).
- ``span(size)``: Flux's idset ``0`` or ``0-<size-1>``; ``hostlist(prefix, size)``:
  ``<prefix>[<span>]``.
- ``run_flags(nodes=, tasks=, gpus=)``: ``-N <nodes> -n <tasks*nodes>``, plus ``-g <gpus>`` with
  GPUs; ``resource_spec(tasks=, gpus=)``: ``--cores=<span>`` plus ``--gpu=<span>`` with GPUs
  (``flux R encode``).
- ``broker_config``: the broker TOML: guest access, the resource file, bootstrap over CURVE on
  ``BROKER_PORT`` (8050) binding ``tcp://<device>:%p`` and connecting to
  ``tcp://%h.<domain>:%p``, the hosts, the job archive and the fluxion queue policy.
- ``init_script`` / ``entrypoint_script``: the ``init.sh`` of the installer and the
  ``entrypoint.sh`` of the node container (``bash -n`` clean).
- ``command(original)``: ``[/bin/bash, /etc/flux-config/entrypoint.sh, <original joined>]``.
- ``installer``, ``volumes``, ``node_mounts``: the init container ``flux-installer``, the pod
  volumes (the view and software emptyDirs, ``/dev/shm`` in memory, the scripts ConfigMap at
  mode 0755, the CURVE Secret at 0400) and the node container's mounts.
- ``curve_certificate(name, public=, secret=)``: the certificate text from Z85 keys; ``z85``
  encodes bytes (a multiple of 4 long).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from typing import Any

from lattice.primitives.objects import Obj

__all__ = [
    "BROKER_PORT",
    "CURVE_KEY",
    "INSTALLER",
    "broker_config",
    "command",
    "curve_certificate",
    "entrypoint_script",
    "hostlist",
    "init_script",
    "installer",
    "node_mounts",
    "resource_spec",
    "run_flags",
    "settings",
    "span",
    "volumes",
    "z85",
]

INSTALLER = "flux-installer"
BROKER_PORT = 8050
CURVE_KEY = "curve.cert"
_DEFAULTS = {
    "FLUX_VIEW_IMAGE": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
    "FLUX_NETWORK_DEVICE": "eth0",
    "FLUX_QUEUE_POLICY": "fcfs",
}
_VIEW, _SOFTWARE, _SHM, _CURVE = "flux-install", "spack-install", "shared-memory", "flux-curve"
_VIEW_PATH, _CONFIG_PATH = "/mnt/flux", "/etc/flux-config"
_ROOT = f"{_VIEW_PATH}/config"
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def settings(env: Iterable[Any]) -> dict[str, str]:
    result = dict(_DEFAULTS)
    for entry in env:
        name, value = entry.get("name"), entry.get("value")
        if name in result and isinstance(value, str):
            result[name] = value
    return result


def span(size: int) -> str:
    return "0" if size <= 1 else f"0-{size - 1}"


def hostlist(prefix: str, size: int) -> str:
    return f"{prefix}[{span(size)}]"


def run_flags(*, nodes: int, tasks: int, gpus: int) -> str:
    flags = f"-N {nodes} -n {tasks * nodes}"
    return f"{flags} -g {gpus}" if gpus > 0 else flags


def resource_spec(*, tasks: int, gpus: int) -> str:
    spec = f"--cores={span(tasks)}"
    return f"{spec} --gpu={span(gpus)}" if gpus > 0 else spec


def broker_config(*, hosts: str, domain: str, device: str, queue_policy: str) -> str:
    return "\n".join(
        [
            "[access]",
            "allow-guest-user = true",
            "allow-root-owner = true",
            "",
            "[resource]",
            f'path = "{_ROOT}/etc/flux/system/R"',
            "",
            "[bootstrap]",
            f'curve_cert = "{_ROOT}/etc/curve/{CURVE_KEY}"',
            f"default_port = {BROKER_PORT}",
            f'default_bind = "tcp://{device}:%p"',
            f'default_connect = "tcp://%h.{domain}:%p"',
            f'hosts = [{{ host = "{hosts}" }}]',
            "",
            "[archive]",
            f'dbpath = "{_ROOT}/var/lib/flux/job-archive.sqlite"',
            'period = "1m"',
            'busytimeout = "50s"',
            "",
            "[sched-fluxion-qmanager]",
            f'queue-policy = "{queue_policy}"',
            "",
        ]
    )


def init_script(*, hosts: str, broker: str) -> str:
    """The installer's script: configuration files, then the view copied to the shared volume."""
    return f"""#!/bin/bash
# Lattice: prepare Flux for this pod (runs in the {INSTALLER} init container).
set -eu
root={_ROOT}
mkdir -p "$root/etc/flux/system/cron.d" "$root/etc/flux/config" "$root/etc/curve" \\
  "$root/run/flux" "$root/var/lib/flux" "{_VIEW_PATH}/view"
echo {shlex.quote(hosts)} > "$root/etc/flux/system/hostlist"
cat > "$root/etc/flux/config/broker.toml" <<'LATTICE_BROKER'
{broker}LATTICE_BROKER
view=$(ls -d /opt/views/._view/*/ | head -n 1)
cp -R "$view". "{_VIEW_PATH}/view/"
cp -R /opt/software "{_VIEW_PATH}/"
touch "{_VIEW_PATH}/flux-installed"
"""


def entrypoint_script(*, main_host: str, resources: str, flags: str) -> str:
    """The node container's script: the first pod runs the command, the others serve."""
    return f"""#!/bin/bash
# Lattice: start a Flux broker in this pod; on {main_host} run the command under Flux.
set -u
view={_VIEW_PATH}/view
root={_ROOT}
cfg="$root/etc/flux/config"
export PATH="$PATH:$view/bin"
cp -R {_VIEW_PATH}/software/. /opt/software/
python_lib=$(find "$view/lib" -maxdepth 1 -type d -name 'python3*' | head -n 1)
export PYTHONPATH="${{PYTHONPATH:-}}:$python_lib/site-packages"
export LD_LIBRARY_PATH="${{LD_LIBRARY_PATH:-}}:$view/lib"
cp /curve/{CURVE_KEY} "$root/etc/curve/{CURVE_KEY}"
chmod 600 "$root/etc/curve/{CURVE_KEY}"
flux R encode --hosts="$(cat "$root/etc/flux/system/hostlist")" {resources} \\
  > "$root/etc/flux/system/R"
options=(-Scron.directory="$root/etc/flux/system/cron.d" -Stbon.fanout=256
  -Srundir="$root/run/flux" -Sstatedir="$root/var/lib/flux"
  -Slocal-uri="local://$root/run/flux/local" -Slog-stderr-level=0 -Slog-stderr-mode=local)
if [ "$(hostname)" = {shlex.quote(main_host)} ]; then
  if [ -z "${{1:-}}" ]; then
    exec flux broker --config-path "$cfg" "${{options[@]}}"
  fi
  # The command is split into words, as Trainer passes it to flux run.
  # shellcheck disable=SC2086
  exec flux start -o --config "$cfg" "${{options[@]}}" flux run {flags} $1
fi
until flux start -o --config "$cfg" "${{options[@]}}"; do
  echo "flux follower exited with $?; retrying in 15s"
  sleep 15
done
"""


def command(original: Sequence[str]) -> list[str]:
    return ["/bin/bash", f"{_CONFIG_PATH}/entrypoint.sh", " ".join(original).strip()]


def installer(*, image: str, config_volume: str) -> Obj:
    return {
        "name": INSTALLER,
        "image": image,
        "command": ["/bin/bash", f"{_CONFIG_PATH}/init.sh"],
        "volumeMounts": [
            {"name": _VIEW, "mountPath": _VIEW_PATH},
            {"name": config_volume, "mountPath": _CONFIG_PATH, "readOnly": True},
        ],
    }


def volumes(*, config_map: str, curve_secret: str) -> list[Obj]:
    return [
        {"name": _SOFTWARE, "emptyDir": {}},
        {"name": _VIEW, "emptyDir": {}},
        {"name": config_map, "configMap": {"name": config_map, "defaultMode": 0o755}},
        {"name": _SHM, "emptyDir": {"medium": "Memory"}},
        {"name": _CURVE, "secret": {"secretName": curve_secret, "defaultMode": 0o400}},
    ]


def node_mounts(*, config_volume: str) -> list[Obj]:
    return [
        {"name": _VIEW, "mountPath": _VIEW_PATH},
        {"name": _SOFTWARE, "mountPath": "/opt/software"},
        {"name": config_volume, "mountPath": _CONFIG_PATH, "readOnly": True},
        {"name": _CURVE, "mountPath": "/curve", "readOnly": True},
        {"name": _SHM, "mountPath": "/dev/shm", "readOnly": True},
    ]


def z85(data: bytes) -> str:
    if len(data) % 4:
        raise ValueError(f"z85 encodes multiples of 4 bytes, got {len(data)}")
    out: list[str] = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        out.extend(_Z85[(value // 85**k) % 85] for k in range(4, -1, -1))
    return "".join(out)


def curve_certificate(name: str, *, public: str, secret: str) -> str:
    return (
        "#   ZeroMQ CURVE **Secret** Certificate\n"
        "#   Made by Lattice for the Flux brokers of one job.\n\n"
        "metadata\n"
        f'    name = "{name}"\n'
        "curve\n"
        f'    public-key = "{public}"\n'
        f'    secret-key = "{secret}"\n'
    )
