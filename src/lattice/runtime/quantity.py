"""Resource quantities as integers, and a pod's effective scheduling request.

Contract:
- ``resource_units(name, quantity)`` turns a Kubernetes quantity into an ``int``: ``cpu`` in
  millicores, everything else (memory and ephemeral-storage in bytes, ``pods``, extended
  resources such as ``nvidia.com/gpu``) in whole units, rounding up as the scheduler does.
  It is ``lattice.primitives.quantity.resource_units`` (re-exported here), the one quantity
  system, which the job plugins use too.
- ``pod_requests(spec)`` is kube-scheduler's effective request (``component-helpers``
  ``resource.PodRequests``): the sum over containers plus restartable init containers
  (sidecars), raised to the peak of any ordinary init container running beside the sidecars
  started before it, plus ``spec.overhead``; pod-level ``spec.resources.requests`` win for the
  resources they name. A container with limits but no request for a resource counts its limit
  (the apiserver's defaulting). Zero entries are dropped; the result is sorted by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice.primitives.quantity import resource_units

__all__ = ["ResourceList", "pod_requests", "resource_list", "resource_units"]

#: ``((resource, units), ...)`` sorted by resource name.
ResourceList = tuple[tuple[str, int], ...]


def resource_list(raw: Mapping[str, Any] | None) -> dict[str, int]:
    """A ``{resource: quantity}`` map (requests, limits, allocatable) in integer units."""
    if not raw:
        return {}
    return {name: resource_units(name, q) for name, q in raw.items()}


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    merged = {**limits, **requests} if limits else requests
    return resource_list(merged)


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
        _add(total, _container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        req = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, req)
            _add(sidecars, req)
            running = dict(sidecars)
        else:
            running = dict(req)
            _add(running, sidecars)
        _raise_to(init_peak, running)
    _raise_to(total, init_peak)
    pod_level = resource_list((spec.get("resources") or {}).get("requests"))
    total.update(pod_level)
    _add(total, resource_list(spec.get("overhead")))
    return tuple(sorted((name, n) for name, n in total.items() if n))
