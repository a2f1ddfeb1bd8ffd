"""Edits of a pod spec every kind applies: env, placement, restart policy.

Contract (pure; the spec or container is copied before anything changes):
- ``with_env`` sets our variables by name (replacing the user's value for those names), adds the
  ``defaults`` the user did not set, and keeps every other user variable in its order.
- ``with_node_selector`` merges the operator's node selector into ``nodeSelector``; on a key both
  set, the operator wins, so pods land only in the pool the scheduler counted.
- ``with_exclusive_node`` adds a required pod anti-affinity on ``MANAGED_LABEL`` (Exists) over
  ``kubernetes.io/hostname``: in node mode one Lattice replica takes a whole node. The user's
  affinity terms are kept. ``with_placement`` is ``with_node_selector`` plus, for an
  ``exclusive`` pod in node mode (a TrainingJob worker: ``demands.pod_demand``),
  ``with_exclusive_node``; no other pod (launchers, MXNet schedulers and servers, initializers,
  other kinds' workers) gets the anti-affinity.
- ``pod_restart_policy``: a replica's restart policy as the pod's (ExitCode runs as Never: the
  reconciler recreates).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lattice.frameworks.base import MANAGED_LABEL, OperatorContext
from lattice.primitives.objects import Obj

__all__ = [
    "HOSTNAME_TOPOLOGY_KEY",
    "pod_restart_policy",
    "with_env",
    "with_exclusive_node",
    "with_node_selector",
    "with_placement",
]


HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"


def with_env(
    container: Mapping[str, Any],
    ours: Sequence[tuple[str, str]],
    *,
    defaults: Sequence[tuple[str, str]] = (),
) -> Obj:
    """A copy of ``container`` whose ``env`` has ``ours`` set and ``defaults`` filled in.

    The user's entries for names in ``ours`` are dropped (ours are appended in order after the
    user's other variables); ``defaults`` are appended only for names the user did not set.
    """
    result = copy.deepcopy(dict(container))
    forced = {name for name, _ in ours}
    user = [e for e in result.get("env") or () if e.get("name") not in forced]
    present = {e.get("name") for e in user}
    env = user + [{"name": n, "value": v} for n, v in ours]
    env += [{"name": n, "value": v} for n, v in defaults if n not in present and n not in forced]
    result["env"] = env
    return result


def with_node_selector(spec: Mapping[str, Any], selector: Iterable[tuple[str, str]]) -> Obj:
    """A copy of ``spec`` whose ``nodeSelector`` also has ``selector`` (operator wins)."""
    result = dict(spec)
    pairs = dict(selector)
    if pairs:
        result["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **pairs}
    return result


def with_exclusive_node(spec: Mapping[str, Any]) -> Obj:
    """A copy of ``spec`` that refuses nodes already running a Lattice-managed pod."""
    result = dict(spec)
    affinity = copy.deepcopy(dict(spec.get("affinity") or {}))
    anti = affinity.setdefault("podAntiAffinity", {})
    terms = anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
    terms.append(
        {
            "labelSelector": {"matchExpressions": [{"key": MANAGED_LABEL, "operator": "Exists"}]},
            "topologyKey": HOSTNAME_TOPOLOGY_KEY,
        }
    )
    result["affinity"] = affinity
    return result


def pod_restart_policy(policy: str) -> str:
    """The pod ``restartPolicy`` for a replica policy: ExitCode is run as Never (we recreate)."""
    return "Never" if policy == "ExitCode" else policy


def with_placement(
    spec: Mapping[str, Any], ctx: OperatorContext, *, exclusive: bool = False
) -> Obj:
    """The operator's node selector, and for an exclusive pod in node mode a whole node."""
    result = with_node_selector(spec, ctx.node_selector)
    return with_exclusive_node(result) if exclusive and ctx.node_mode else result
