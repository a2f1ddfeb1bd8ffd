"""Kubernetes resource quantities as integer units: the one quantity system.

Contract:
- ``parse_quantity`` reads the ``resource.Quantity`` grammar of apimachinery: a signed decimal
  number (``1``, ``1.5``, ``.5``, ``1.``) followed by at most one of a binary-SI suffix
  (``Ki Mi Gi Ti Pi Ei``), a decimal-SI suffix (``n u m k M G T P E``) or a decimal exponent
  (``e3``, ``E-2``). Numbers (``int``, ``float``) are read through ``str``. Anything else raises
  ``ValueError`` naming the quantity, as does a value of more than 40 digits.
- ``resource_units(name, quantity)`` is kube-scheduler's accounting: ``cpu`` in millicores
  (``MilliValue``), every other resource (memory and ephemeral-storage in bytes, ``pods``,
  extended resources such as ``nvidia.com/gpu``) in whole units (``Value``), both rounded up.
  Results are cached, since the same few strings repeat on every pod.
"""

from __future__ import annotations

import functools
import re
from decimal import ROUND_CEILING, Decimal, DecimalException

__all__ = ["parse_quantity", "resource_units"]

_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suf>[KMGTPE]i|[numkMGTPE]))?$"
)
#: Far above any real quantity (int64 holds 19 digits), far below Decimal's overflow.
_MAX_DIGITS = 40
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


def parse_quantity(quantity: object) -> Decimal:
    """``"500m"`` -> 0.5, ``"1Gi"`` -> 1073741824, ``2`` -> 2; ``ValueError`` when malformed."""
    text = str(quantity).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"invalid quantity {quantity!r}")
    try:
        value = Decimal(match["num"])
        if match["exp"]:
            value = value.scaleb(int(match["exp"][1:]))
        if match["suf"]:
            value *= _SUFFIX[match["suf"]]
    except DecimalException as exc:
        raise ValueError(f"invalid quantity {quantity!r}") from exc
    if value.adjusted() > _MAX_DIGITS:
        raise ValueError(f"invalid quantity {quantity!r}: too large")
    return value


@functools.lru_cache(maxsize=4096)
def _units(name: str, text: str) -> int:
    value = parse_quantity(text)
    if name == "cpu":
        value *= 1000
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def resource_units(name: str, quantity: object) -> int:
    """``("cpu", "500m")`` -> 500; ``("memory", "1Gi")`` -> 1073741824; ``("x/gpu", 8)`` -> 8.

    Raises ``ValueError`` on a malformed quantity.
    """
    return _units(name, str(quantity))
