"""Durations as every Lattice command line and setting spells them: one parser for all.

Contract:
- ``parse_duration(value)`` accepts seconds as a number (``30``, ``2.5``, or the same as a
  string) or a Go duration (``30s``, ``5m``, ``1h30m``, ``250ms``, ``-1s``; also ``d`` and ``w``),
  parsed by durationpy, the parser the Kubernetes Python client uses, and returns a
  ``timedelta``. Anything else (an unknown unit, a missing unit after a non-zero number in a
  compound, NaN or infinity, a bool) raises ``ValueError`` saying what is accepted.
- ``parse_seconds`` is the same, in float seconds. Callers check the range (``>= 0``...).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

import durationpy

__all__ = ["ACCEPTED", "parse_duration", "parse_seconds"]

#: Go's grammar (``time.ParseDuration``) plus days and weeks; durationpy alone would also
#: accept text between the parts (``1h 30m``, ``1h,30m``), which Go rejects.
_GO = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h|d|w))+")
#: How the error message describes the accepted forms.
ACCEPTED = "seconds (30, 2.5) or a Go duration (30s, 5m, 1h30m, 250ms)"


def parse_duration(value: object) -> timedelta:
    """``value`` as a ``timedelta`` (see the module docstring)."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            if _GO.fullmatch(text) is None:
                raise ValueError(f"invalid duration {value!r}: use {ACCEPTED}") from None
            try:
                return durationpy.from_str(text)
            except ValueError:
                raise ValueError(f"invalid duration {value!r}: out of range") from None
    else:
        raise ValueError(f"invalid duration {value!r}: use {ACCEPTED}")
    if not math.isfinite(seconds):
        raise ValueError(f"invalid duration {value!r}: must be finite")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"invalid duration {value!r}: out of range") from None


def parse_seconds(value: object) -> float:
    """``value`` in seconds (see :func:`parse_duration`)."""
    return parse_duration(value).total_seconds()
