"""A pod's binding to one node, written as a required node affinity on the node's name.

Contract (pure; inputs are never mutated, outputs share nothing mutable with them):

- ``bind_spec(spec, node)``: a copy of the pod ``spec`` that kube-scheduler may only put on
  ``node``, while still running every one of its own checks (resources, taints, the user's
  selectors). As the DaemonSet controller binds its pods
  (``ReplaceDaemonSetPodNodeNameNodeAffinity`` in kubernetes ``pkg/controller/daemon/util``),
  the binding is a ``matchFields`` requirement ``metadata.name In [node]`` in the required node
  affinity's ``nodeSelectorTerms``. Unlike the DaemonSet controller, which replaces the terms,
  the user's terms are kept: the requirement is added to EVERY term (terms are ORed, the
  requirements of one term ANDed), so the pod may land only on ``node`` and only if ``node``
  satisfies one of the user's terms. A term with no requirement matches no node
  (kube-scheduler's rule) and is left as it is, so binding never widens what a term allows.
  With no term at all, one term holding the requirement is added. The rest of the affinity
  (preferred terms, pod (anti-)affinity) is kept. Binding twice to the same node adds nothing.
- ``extended_tolerations(spec)``: what the ExtendedResourceToleration admission plugin adds to
  a pod: for each extended resource the pod requests (a name with a ``/`` outside the
  ``kubernetes.io`` domain, and not ``requests.*``), an ``Exists`` toleration of that key with
  effect ``NoSchedule``, unless one equal is already there. ``bind_spec`` adds them too, so
  that the pod tolerates what the scheduler counted whether or not the plugin is enabled
  (GPU pools are commonly tainted ``nvidia.com/gpu=present:NoSchedule``).
- ``bound_node(spec)``: the node a spec is bound to (the single value of the first
  ``matchFields`` requirement ``metadata.name In [...]`` of its required terms), or None.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lattice.primitives.objects import Obj
from lattice.primitives.requests import pod_requests

__all__ = [
    "NODE_NAME_FIELD",
    "bind_spec",
    "bound_node",
    "extended_tolerations",
    "is_extended_resource",
    "node_requirement",
]

NODE_NAME_FIELD = "metadata.name"
"""The node field a ``matchFields`` requirement may name (the only one Kubernetes supports)."""


def node_requirement(node: str) -> Obj:
    """The ``matchFields`` requirement that selects ``node`` by name."""
    return {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}


def _terms(spec: Mapping[str, Any]) -> list[Any]:
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, Mapping)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    return list(terms) if isinstance(terms, list) else []


def _empty(term: Mapping[str, Any]) -> bool:
    return not term.get("matchExpressions") and not term.get("matchFields")


def _bound_term(term: Mapping[str, Any], node: str) -> Obj:
    out = dict(term)
    if _empty(term):
        return out
    wanted = node_requirement(node)
    fields = list(term.get("matchFields") or ())
    if wanted not in fields:
        fields.append(wanted)
    out["matchFields"] = fields
    return out


def bind_spec(spec: Mapping[str, Any], node: str) -> Obj:
    """A deep copy of the pod ``spec`` bound to ``node`` (see the module docstring)."""
    if not node:
        raise ValueError("bind_spec: node must be a non-empty node name")
    out: Obj = copy.deepcopy(dict(spec))
    terms = [t for t in _terms(out) if isinstance(t, Mapping)]
    if terms:
        bound = [_bound_term(t, node) for t in terms]
    else:
        bound = [{"matchFields": [node_requirement(node)]}]
    affinity = out.get("affinity")
    affinity = dict(affinity) if isinstance(affinity, Mapping) else {}
    node_affinity = affinity.get("nodeAffinity")
    node_affinity = dict(node_affinity) if isinstance(node_affinity, Mapping) else {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = dict(required) if isinstance(required, Mapping) else {}
    required["nodeSelectorTerms"] = bound
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    out["affinity"] = affinity
    added = extended_tolerations(out)
    if added:
        out["tolerations"] = [*(out.get("tolerations") or ()), *added]
    return out


def is_extended_resource(name: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName``: domain-qualified, not ``kubernetes.io``."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def extended_tolerations(spec: Mapping[str, Any]) -> list[Obj]:
    """The tolerations the ExtendedResourceToleration plugin would add to ``spec``."""
    have = [t for t in spec.get("tolerations") or () if isinstance(t, Mapping)]
    out: list[Obj] = []
    try:
        requested = dict(pod_requests(spec))
    except (TypeError, ValueError, AttributeError):
        return out
    for name in sorted(requested):
        if requested[name] <= 0 or not is_extended_resource(name):
            continue
        toleration = {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        if toleration not in have:
            out.append(toleration)
    return out


def bound_node(spec: Mapping[str, Any]) -> str | None:
    """The node ``spec`` is bound to by a ``metadata.name In [node]`` requirement, or None."""
    for term in _terms(spec):
        if not isinstance(term, Mapping):
            continue
        for req in term.get("matchFields") or ():
            if (
                isinstance(req, Mapping)
                and req.get("key") == NODE_NAME_FIELD
                and req.get("operator") == "In"
                and isinstance(req.get("values"), list)
                and len(req["values"]) == 1
            ):
                return str(req["values"][0])
    return None
