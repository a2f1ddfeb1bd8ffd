"""Throughput-versus-size models for elastic jobs.

Contract:
- A :class:`SpeedupModel` maps a size ``n >= 1`` (replicas of one unit each) to a throughput
  relative to one replica: ``speedup(1) == 1``; ``speedup(0) == 0``. Models are frozen values.
- :class:`LinearCapped`: ``min(n, cap)`` (``cap=None``: perfectly linear).
- :class:`Amdahl`: ``1 / ((1 - p) + p / n)`` for a parallel fraction ``0 <= p <= 1``.
- :class:`AllReduce`: a step takes ``compute`` seconds plus, from two replicas on,
  ``alpha + beta * log2(n)`` seconds of all-reduce (fixed local batch, so ``n`` replicas do
  ``n`` times the samples per step): ``speedup(n) = n * compute / (compute + sync(n))``.
  :func:`fit_allreduce` fits it to the measured step times of ``speedup/<app>/`` (the Pollux
  artifact): ``compute`` is the single-replica step time at the most-measured local batch size,
  ``alpha, beta`` a least-squares fit (clamped at 0) of the measured extra time per step.
- :func:`parse_speedup` reads ``linear``, ``linear:CAP``, ``amdahl:P`` or ``allreduce:APP``
  (``APP`` fitted from a directory given separately). Pure, except :func:`load_fits` reads CSVs.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = [
    "AllReduce",
    "Amdahl",
    "LinearCapped",
    "SpeedupModel",
    "fit_allreduce",
    "load_fits",
    "parse_speedup",
]


class SpeedupModel(Protocol):
    """Relative throughput at ``n`` replicas."""

    @property
    def name(self) -> str: ...

    def speedup(self, n: int) -> float: ...


class _Model:
    """A model's ``speedup``: none at ``n <= 0``, else ``at(n)`` (``n >= 1``)."""

    __slots__ = ()

    def speedup(self, n: int) -> float:
        return self.at(n) if n > 0 else 0.0

    def at(self, n: int) -> float:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class LinearCapped(_Model):
    """``min(n, cap)``: linear up to ``cap`` replicas, flat after."""

    cap: float | None = None

    @property
    def name(self) -> str:
        return "linear" if self.cap is None else f"linear:{self.cap:g}"

    def at(self, n: int) -> float:
        return float(n) if self.cap is None else min(float(n), self.cap)


@dataclass(frozen=True, slots=True)
class Amdahl(_Model):
    """Amdahl's law with parallel fraction ``p``."""

    p: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ValueError("Amdahl p must be in [0, 1]")

    @property
    def name(self) -> str:
        return f"amdahl:{self.p:g}"

    def at(self, n: int) -> float:
        return 1.0 / ((1.0 - self.p) + self.p / n)


@dataclass(frozen=True, slots=True)
class AllReduce(_Model):
    """Compute plus all-reduce: ``n * compute / (compute + alpha + beta * log2 n)`` for n >= 2."""

    app: str
    compute: float
    alpha: float
    beta: float

    @property
    def name(self) -> str:
        return f"allreduce:{self.app}"

    def at(self, n: int) -> float:
        if n == 1:
            return 1.0
        return n * self.compute / (self.compute + self.alpha + self.beta * math.log2(n))


def _rows(app_dir: Path) -> list[tuple[int, int, float, float]]:
    """``(replicas, local_bsz, step_time, sync_time)`` from both CSVs of one application."""
    out: list[tuple[int, int, float, float]] = []
    placements = app_dir / "placements.csv"
    if placements.exists():
        with placements.open(newline="") as f:
            for r in csv.DictReader(f):
                replicas = sum(int(c) for c in r["placement"])
                out.append(
                    (replicas, int(r["local_bsz"]), float(r["step_time"]), float(r["sync_time"]))
                )
    scalability = app_dir / "scalability.csv"
    if scalability.exists():
        with scalability.open(newline="") as f:
            for r in csv.DictReader(f):
                out.append(
                    (
                        int(r["num_replicas"]),
                        int(r["local_bsz"]),
                        float(r["step_time"]),
                        float(r["sync_time"]),
                    )
                )
    return out


def fit_allreduce(app: str, rows: list[tuple[int, int, float, float]]) -> AllReduce:
    """Fit :class:`AllReduce` to ``(replicas, local_bsz, step_time, sync_time)`` rows."""
    if not rows:
        raise ValueError(f"no step times for {app!r}")
    counts: dict[int, int] = {}
    for _, bsz, _, _ in rows:
        counts[bsz] = counts.get(bsz, 0) + 1
    bsz = min(counts, key=lambda b: (-counts[b], b))
    mine = [r for r in rows if r[1] == bsz]
    singles = sorted(r[2] for r in mine if r[0] == 1)
    if singles:
        compute = singles[len(singles) // 2]
    else:
        extra = sorted(r[2] - r[3] for r in mine)
        compute = extra[len(extra) // 2]
    points = [(math.log2(r[0]), r[2] - compute) for r in mine if r[0] >= 2]
    alpha, beta = 0.0, 0.0
    if points:
        mx = sum(x for x, _ in points) / len(points)
        my = sum(y for _, y in points) / len(points)
        sxx = sum((x - mx) ** 2 for x, _ in points)
        beta = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx > 0 else 0.0
        beta = max(0.0, beta)
        alpha = max(0.0, my - beta * mx)
    return AllReduce(app=app, compute=compute, alpha=alpha, beta=beta)


def load_fits(speedup_dir: Path) -> dict[str, AllReduce]:
    """Fit every ``<speedup_dir>/<app>/`` that holds step-time CSVs, by application name."""
    fits: dict[str, AllReduce] = {}
    if not speedup_dir.is_dir():
        return fits
    for app_dir in sorted(p for p in speedup_dir.iterdir() if p.is_dir()):
        rows = _rows(app_dir)
        if rows:
            fits[app_dir.name] = fit_allreduce(app_dir.name, rows)
    return fits


def parse_speedup(spec: str, fits: Mapping[str, AllReduce] | None = None) -> SpeedupModel:
    """``linear``, ``linear:CAP``, ``amdahl:P`` or ``allreduce:APP`` (``APP`` in ``fits``)."""
    kind, _, arg = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "linear":
        return LinearCapped(float(arg) if arg else None)
    if kind == "amdahl":
        return Amdahl(float(arg) if arg else 0.95)
    if kind == "allreduce":
        if fits is None or arg not in fits:
            known = ", ".join(sorted(fits or {})) or "none loaded"
            raise ValueError(f"unknown all-reduce application {arg!r} (known: {known})")
        return fits[arg]
    raise ValueError(f"unknown speedup model {spec!r}")
