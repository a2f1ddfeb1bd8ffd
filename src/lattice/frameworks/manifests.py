"""Complete child manifests from templates: pods, headless Services, container ports, and Go's
JSON for the values upstream marshals.

Contract (pure; inputs are copied, never mutated):
- ``pod_manifest``: a Pod from the template's metadata (labels and annotations kept; ours win on
  a key both set) and a prepared ``spec`` (deep-copied).
- ``headless_service`` (``clusterIP: None``): ``<name>`` resolves to the selected pods' IPs.
  ``service_ports`` mirrors a container's ports (unnamed ones named ``port-<number>``), or one
  default port.
- ``template_containers``: ``template.spec.containers`` as a list (empty when missing or
  malformed).
- ``go_json`` serialises like Go's ``encoding/json.Marshal``: compact, keys in the given order
  (sort maps yourself), ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, other text as UTF-8.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from lattice.frameworks.naming import object_meta
from lattice.primitives.objects import Obj

__all__ = [
    "container_port",
    "go_json",
    "headless_service",
    "pod_manifest",
    "service_ports",
    "template_containers",
]


def pod_manifest(
    *,
    name: str,
    namespace: str | None,
    template: Mapping[str, Any],
    labels: Mapping[str, str],
    owner: Mapping[str, Any],
    spec: Mapping[str, Any],
) -> Obj:
    """A Pod from the template's metadata (labels, annotations kept) and a prepared ``spec``.

    Our labels win over the template's on the same key; ``spec`` is deep-copied.
    """
    tmeta = template.get("metadata") or {}
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**(tmeta.get("labels") or {}), **labels}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    meta["ownerReferences"] = [dict(owner)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(spec)}


def container_port(container: Mapping[str, Any], port_name: str) -> int | None:
    """The ``containerPort`` of the port named ``port_name``, or None."""
    for port in container.get("ports") or ():
        if port.get("name") == port_name and port.get("containerPort") is not None:
            return int(port["containerPort"])
    return None


def service_ports(
    container: Mapping[str, Any], *, default_name: str, default_port: int
) -> list[Obj]:
    """Service ports mirroring the container's ports, or one ``default_name: default_port``.

    Unnamed container ports are named ``port-<number>`` (a Service with several ports needs
    names).
    """
    ports: list[Obj] = []
    for port in container.get("ports") or ():
        number = port.get("containerPort")
        if number is None:
            continue
        entry: Obj = {"name": port.get("name") or f"port-{number}", "port": int(number)}
        entry["targetPort"] = int(number)
        if port.get("protocol"):
            entry["protocol"] = port["protocol"]
        ports.append(entry)
    if not ports:
        ports.append({"name": default_name, "port": default_port, "targetPort": default_port})
    return ports


def headless_service(
    *,
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    ports: Sequence[Mapping[str, Any]],
    owner: Mapping[str, Any],
) -> Obj:
    """A headless Service (``clusterIP: None``): ``<name>`` resolves to the selected pod's IP."""
    meta = object_meta(name=name, namespace=namespace, labels=labels, owner=owner)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "selector": dict(selector),
            "ports": [dict(p) for p in ports],
        },
    }


def template_containers(template: Mapping[str, Any]) -> list[Obj]:
    """``template.spec.containers`` as a list (empty when missing or malformed)."""
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    return list(containers) if isinstance(containers, list) else []


_GO_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json(value: object) -> str:
    """``value`` as Go's ``json.Marshal`` writes it (see the module docstring)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escape in _GO_ESCAPES.items():
        text = text.replace(char, escape)
    return text
