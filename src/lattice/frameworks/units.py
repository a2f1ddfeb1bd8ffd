"""Resource units of pods as the scheduler counts them.

Contract (pure): ``quantity_units`` reads a Kubernetes quantity as integer units, rounded up,
``cpu`` in millicores (the same units as ``lattice.runtime.quantity``); ``container_units`` sums
one resource over containers, a container's ``requests`` falling back to its ``limits`` (the
apiserver defaults requests from limits); ``unit_problems`` names each malformed quantity of the
scheduling unit in a template's containers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from lattice.frameworks.base import Problem

__all__ = ["container_units", "quantity_units", "unit_problems"]

Obj = dict[str, Any]


_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suf>[KMGTPE]i|[numkMGTPE]))?$"
)
_SUFFIX: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{s: Decimal(1024**i) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)},
}


def quantity_units(resource: str, quantity: object) -> int:
    """A Kubernetes quantity as integer units, rounded up; ``cpu`` in millicores.

    ``("nvidia.com/gpu", 2)`` -> 2, ``("cpu", "500m")`` -> 500. Raises ``ValueError`` on a
    malformed quantity.
    """
    text = str(quantity).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"invalid quantity {quantity!r}")
    try:
        value = Decimal(match["num"])
        if match["exp"]:
            value = value.scaleb(int(match["exp"][1:]))
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only numbers
        raise ValueError(f"invalid quantity {quantity!r}") from exc
    if match["suf"]:
        value *= _SUFFIX[match["suf"]]
    if resource == "cpu":
        value *= 1000
    return int(value.to_integral_value(rounding=ROUND_CEILING))


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
