"""Resource quantities of pod templates as the scheduler counts them.

Contract (pure): ``quantity_units`` reads a Kubernetes quantity as integer units, rounded up,
``cpu`` in millicores (``lattice.primitives.quantity``'s ``resource_units``);
``quantity_problems`` names each malformed or negative quantity of a pod spec (every resource
of every container and init container, ``requests`` and ``limits``, the pod-level
``resources`` and ``overhead``) and each part that is not an object where one must be, so that
the effective request (``lattice.primitives.requests.pod_requests``) of a spec without problems
computes, and is what the apiserver will accept in the pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice.frameworks.base import Problem
from lattice.primitives.quantity import resource_units as quantity_units

__all__ = ["quantity_problems", "quantity_units"]


def _entries(value: Any, *, field: str, problems: list[Problem]) -> Mapping[str, Any]:
    """``value`` as an object: ``{}`` when it is absent, and when it is not an object (with a
    problem added to ``problems``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(Problem(field, "must be an object"))
        return {}
    return value


def _list_problems(values: Any, *, field: str) -> list[Problem]:
    """``values`` (a ``{resource: quantity}`` map) checked quantity by quantity."""
    problems: list[Problem] = []
    for name, value in _entries(values, field=field, problems=problems).items():
        try:
            units = quantity_units(str(name), value)
        except ValueError:
            problems.append(Problem(f"{field}[{name}]", f"must be a quantity, got {value!r}"))
            continue
        if units < 0:
            why = f"must be greater than or equal to 0, got {value!r}"
            problems.append(Problem(f"{field}[{name}]", why))
    return problems


def _requirements_problems(resources: Any, *, field: str) -> list[Problem]:
    problems: list[Problem] = []
    entries = _entries(resources, field=field, problems=problems)
    for kind in ("requests", "limits"):
        problems += _list_problems(entries.get(kind), field=f"{field}.{kind}")
    return problems


def quantity_problems(spec: Mapping[str, Any], *, field: str) -> list[Problem]:
    """A problem per malformed quantity (or part) of pod spec ``spec`` at path ``field``."""
    problems: list[Problem] = []
    for group in ("containers", "initContainers"):
        containers = spec.get(group)
        if containers is None:
            continue
        if not isinstance(containers, list):
            problems.append(Problem(f"{field}.{group}", "must be a list"))
            continue
        for i, container in enumerate(containers):
            where = f"{field}.{group}[{i}]"
            if not isinstance(container, Mapping):
                problems.append(Problem(where, "must be an object"))
                continue
            problems += _requirements_problems(
                container.get("resources"), field=f"{where}.resources"
            )
    problems += _requirements_problems(spec.get("resources"), field=f"{field}.resources")
    problems += _list_problems(spec.get("overhead"), field=f"{field}.overhead")
    return problems
