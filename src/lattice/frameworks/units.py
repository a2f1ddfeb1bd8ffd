"""Resource units of pods as the scheduler counts them.

Contract (pure): ``quantity_units`` reads a Kubernetes quantity as integer units, rounded up,
``cpu`` in millicores (``lattice.primitives.quantity``'s ``resource_units``); ``container_units``
one resource over containers, a container's ``requests`` falling back to its ``limits`` (the
apiserver defaults requests from limits); ``unit_problems`` names each malformed quantity of the
scheduling unit in a template's containers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lattice.frameworks.base import Problem
from lattice.primitives.quantity import resource_units as quantity_units

__all__ = ["container_units", "quantity_units", "unit_problems"]

Obj = dict[str, Any]


def container_units(containers: Iterable[Mapping[str, Any]], resource: str) -> int:
    """Sum of ``resource`` over containers: ``requests``, else ``limits``, else 0."""
    total = 0
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if resource in requests:
            total += quantity_units(resource, requests[resource])
        elif resource in limits:
            total += quantity_units(resource, limits[resource])
    return total


def unit_problems(containers: Sequence[Any], resource: str, *, field: str) -> list[Problem]:
    """A problem per malformed ``resource`` quantity in ``field[i].resources.{requests,limits}``."""
    problems: list[Problem] = []
    for i, container in enumerate(containers):
        if not isinstance(container, Mapping):
            problems.append(Problem(f"{field}[{i}]", "must be an object"))
            continue
        resources = container.get("resources") or {}
        if not isinstance(resources, Mapping):
            problems.append(Problem(f"{field}[{i}].resources", "must be an object"))
            continue
        for kind in ("requests", "limits"):
            values = resources.get(kind) or {}
            if not isinstance(values, Mapping):
                problems.append(Problem(f"{field}[{i}].resources.{kind}", "must be an object"))
                continue
            value = values.get(resource)
            if value is None:
                continue
            try:
                quantity_units(resource, value)
            except ValueError:
                where = f"{field}[{i}].resources.{kind}[{resource}]"
                problems.append(Problem(where, f"must be a quantity, got {value!r}"))
    return problems
