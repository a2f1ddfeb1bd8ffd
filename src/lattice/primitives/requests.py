"""A pod's effective scheduling request, by kube-scheduler's rules: the one place it is computed.

Contract (pure, standard library only; quantities through :mod:`lattice.primitives.quantity`,
``cpu`` in millicores, everything else in whole units):

- ``resource_list(raw)``: a ``{resource: quantity}`` map (requests, limits, allocatable,
  overhead) in integer units.
- ``container_requests(container)``: one container's request per resource; a resource with a
  limit and no request counts its limit (the apiserver defaults requests from limits).
- ``pod_requests(spec)`` is component-helpers' ``resource.PodRequests`` (what the scheduler's
  NodeResourcesFit plugin compares): per resource, the sum over app containers and restartable
  init containers (sidecars, ``restartPolicy: Always``), raised to the peak of any ordinary init
  container running beside the sidecars started before it; then the pod-level
  ``spec.resources.requests`` (limits when no request) replace the result for the resources
  pod-level resources support (``cpu``, ``memory``, ``hugepages-*``); then ``spec.overhead`` is
  added. Zero entries are dropped; the result is sorted by name. It does not include the pod's
  slot (``pods``: 1), which callers add where they count slots.

Every function raises ``ValueError`` (naming the quantity) on a malformed quantity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice.primitives.quantity import resource_units

__all__ = [
    "POD_LEVEL_RESOURCES",
    "ResourceList",
    "container_requests",
    "pod_level_resource",
    "pod_requests",
    "resource_list",
]

#: ``((resource, units), ...)`` sorted by resource name.
ResourceList = tuple[tuple[str, int], ...]
#: Resources pod-level ``spec.resources`` may set (``IsSupportedPodLevelResource``), besides
#: ``hugepages-*``.
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})


def resource_list(raw: Mapping[str, Any] | None) -> dict[str, int]:
    """A ``{resource: quantity}`` map (requests, limits, allocatable) in integer units."""
    if not raw:
        return {}
    return {name: resource_units(name, q) for name, q in raw.items()}


def _requests(resources: Mapping[str, Any] | None) -> dict[str, int]:
    """``requests`` with each missing resource defaulted from ``limits``."""
    resources = resources or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    return resource_list({**limits, **requests} if limits else requests)


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """One container's request per resource (its limit where it sets no request)."""
    return _requests(container.get("resources"))


def pod_level_resource(name: str) -> bool:
    """Whether pod-level ``spec.resources`` may set ``name``."""
    return name in POD_LEVEL_RESOURCES or name.startswith("hugepages-")


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, n in more.items():
        into[name] = into.get(name, 0) + n


def _raise_to(into: dict[str, int], floor: Mapping[str, int]) -> None:
    for name, n in floor.items():
        if n > into.get(name, 0):
            into[name] = n


def pod_requests(spec: Mapping[str, Any]) -> ResourceList:
    """The pod's effective request per resource, as the scheduler accounts it."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add(total, container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        req = container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, req)
            _add(sidecars, req)
            running = dict(sidecars)
        else:
            running = dict(req)
            _add(running, sidecars)
        _raise_to(init_peak, running)
    _raise_to(total, init_peak)
    pod_level = _requests(spec.get("resources"))
    total.update((name, n) for name, n in pod_level.items() if pod_level_resource(name))
    _add(total, resource_list(spec.get("overhead")))
    return tuple(sorted((name, n) for name, n in total.items() if n))
