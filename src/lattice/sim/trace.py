"""Trace readers, and the mapping of a trace job to a simulated Lattice job.

Contract:
- :func:`read_trace` reads either format, chosen by the header:
  - *Philly condensed* (Pollux artifact): ``timestamp,duration,num_gpus[,gpu_time,cluster]``,
    ``timestamp`` as ``YYYY-MM-DD HH:MM:SS`` (UTC) or seconds;
  - *generic CSV*: ``submit`` (seconds, or an ISO-8601 time), ``duration`` (seconds at the
    requested size), ``units`` (requested units), and optional ``id``, ``priority``, ``min``,
    ``max``, ``speedup`` (a model spec, see :func:`lattice.sim.speedup.parse_speedup`),
    ``checkpoint`` (seconds between checkpoints), and where the job's pods may run: ``pool``
    (a node selector ``pool=<value>``), ``selector`` (``k=v`` pairs, comma-separated; with
    ``pool``, ``pool`` wins) and ``tolerations`` (``KEY[=VALUE][:EFFECT]``, comma-separated;
    without a value the operator is ``Exists``).
  Rows come back sorted by submit time (stable), with submit times relative to the first one.
- :func:`map_jobs` turns :class:`TraceJob` rows into :class:`SimJob` values under
  :class:`MappingOptions`: ``min = max(1, ceil(units * min_fraction))``, ``max =
  max(units, round(units * max_factor))``, both capped at ``capacity`` (values given in the
  trace win over the fractions); a deterministic priority mix (seeded); and time compression
  (submit times divided by ``compress``; durations unchanged). Speedup ``mix`` draws one fitted
  all-reduce application per job (seeded). ``rigid_fraction`` makes that share of the jobs
  (a seeded draw of its own) rigid at their requested size (min = max = units), and
  ``checkpoint`` is every job's checkpoint interval in seconds (``None``: none; a trace's
  optional ``checkpoint`` column wins). Selectors and tolerations pass through unchanged.
  Pure except the file read.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lattice.primitives.times import parse_time
from lattice.scheduler.core import Toleration
from lattice.sim.speedup import AllReduce, SpeedupModel, parse_speedup

__all__ = ["MappingOptions", "SimJob", "TraceJob", "map_jobs", "parse_priority_mix", "read_trace"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceJob:
    """One row of a trace; optional columns are ``None`` when absent."""

    id: str
    submit: float
    duration: float
    units: int
    priority: int | None = None
    min_size: int | None = None
    max_size: int | None = None
    speedup: str | None = None
    checkpoint: float | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SimJob:
    """A job as the simulator runs it: sizes in unit replicas, times in seconds."""

    id: str
    submit: float
    duration: float
    units: int
    min_size: int
    max_size: int
    priority: int
    model: SpeedupModel
    checkpoint: float | None = None
    #: Where the job's pods may run (a ``nodeSelector`` and tolerations).
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @property
    def rigid(self) -> bool:
        """Non-elastic: it runs at one size and restarts from its last checkpoint when stopped."""
        return self.min_size == self.max_size

    @property
    def work(self) -> float:
        """Work to do: ``duration * speedup(units)`` (work conservation)."""
        return self.duration * self.model.speedup(self.units)

    def alone(self) -> float:
        """JCT when running alone at ``max_size`` from submission (no restarts)."""
        return self.work / self.model.speedup(self.max_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class MappingOptions:
    """How trace jobs become Lattice jobs."""

    min_fraction: float = 0.5
    max_factor: float = 2.0
    priority_mix: tuple[tuple[int, float], ...] = ((0, 1.0),)
    compress: float = 1.0
    seed: int = 0
    speedup: str = "linear"
    limit: int | None = None
    rigid_fraction: float = 0.0
    checkpoint: float | None = None


def _time(value: str) -> float:
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        return parse_time(value).timestamp()


def _opt_int(row: Mapping[str, str | None], name: str) -> int | None:
    raw = row.get(name)
    return int(float(raw)) if raw not in (None, "") else None


def _opt_float(row: Mapping[str, str | None], name: str) -> float | None:
    raw = row.get(name)
    return float(raw) if raw not in (None, "") else None


def _selector(row: Mapping[str, str | None], where: str) -> tuple[tuple[str, str], ...]:
    pairs: dict[str, str] = {}
    for part in (row.get("selector") or "").split(","):
        if part.strip():
            key, eq, value = part.strip().partition("=")
            if not key or not eq:
                raise ValueError(f"{where}: selector {part.strip()!r} must be KEY=VALUE")
            pairs[key] = value
    pool = (row.get("pool") or "").strip()
    if pool:
        pairs["pool"] = pool
    return tuple(sorted(pairs.items()))


def _tolerations(raw: str | None, where: str) -> tuple[Toleration, ...]:
    out: list[Toleration] = []
    for part in filter(None, (p.strip() for p in (raw or "").split(","))):
        head, _, effect = part.partition(":")
        key, eq, value = head.partition("=")
        if not key or effect not in ("", "NoSchedule", "NoExecute", "PreferNoSchedule"):
            raise ValueError(f"{where}: toleration {part!r} must be KEY[=VALUE][:EFFECT]")
        operator = "Equal" if eq else "Exists"
        out.append(Toleration(key=key, operator=operator, value=value, effect=effect))
    return tuple(out)


def read_trace(path: Path, *, cluster: str | None = None) -> list[TraceJob]:
    """Read a Philly-condensed or generic CSV trace (see the module docstring).

    ``cluster`` keeps only the rows whose ``cluster`` column equals it (the Pollux artifact's
    ``philly.csv`` holds every virtual cluster in one file); job ids count the kept rows.
    """
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        fields = set(reader.fieldnames or ())
        philly = {"timestamp", "duration", "num_gpus"} <= fields
        if not philly and not {"submit", "duration", "units"} <= fields:
            raise ValueError(
                f"{path}: need columns timestamp,duration,num_gpus (Philly) or "
                "submit,duration,units (generic)"
            )
        if cluster is not None and "cluster" not in fields:
            raise ValueError(f"{path}: --cluster {cluster} needs a 'cluster' column")
        rows: list[TraceJob] = []
        kept = (r for r in reader if cluster is None or r["cluster"].strip() == cluster)
        for i, r in enumerate(kept):
            if philly:
                job = TraceJob(
                    id=f"job-{i:05d}",
                    submit=_time(r["timestamp"]),
                    duration=float(r["duration"]),
                    units=int(float(r["num_gpus"])),
                )
            else:
                job = TraceJob(
                    id=(r.get("id") or "").strip() or f"job-{i:05d}",
                    submit=_time(r["submit"]),
                    duration=float(r["duration"]),
                    units=int(float(r["units"])),
                    priority=_opt_int(r, "priority"),
                    min_size=_opt_int(r, "min"),
                    max_size=_opt_int(r, "max"),
                    speedup=(r.get("speedup") or "").strip() or None,
                    checkpoint=_opt_float(r, "checkpoint"),
                    node_selector=_selector(r, f"{path}: row {i + 1}"),
                    tolerations=_tolerations(r.get("tolerations"), f"{path}: row {i + 1}"),
                )
            if job.duration < 0 or job.units < 1:
                raise ValueError(f"{path}: job {job.id}: need duration >= 0 and units >= 1")
            rows.append(job)
    rows.sort(key=lambda j: j.submit)
    if not rows:
        return rows
    first = rows[0].submit
    return [replace(j, submit=j.submit - first) for j in rows]


def parse_priority_mix(spec: str) -> tuple[tuple[int, float], ...]:
    """``"0:0.8,10:0.2"`` -> ``((0, 0.8), (10, 0.2))`` (weights need not sum to 1)."""
    mix: list[tuple[int, float]] = []
    for part in spec.split(","):
        prio, _, weight = part.strip().partition(":")
        mix.append((int(prio), float(weight) if weight else 1.0))
    if not mix or any(w < 0 for _, w in mix) or sum(w for _, w in mix) <= 0:
        raise ValueError(f"bad priority mix {spec!r}")
    return tuple(mix)


def map_jobs(
    rows: Sequence[TraceJob],
    options: MappingOptions,
    *,
    capacity: int,
    fits: Mapping[str, AllReduce] | None = None,
) -> list[SimJob]:
    """Map trace rows to :class:`SimJob` values (see the module docstring)."""
    if options.compress <= 0:
        raise ValueError("compress must be > 0")
    if not 0 <= options.rigid_fraction <= 1:
        raise ValueError("rigid fraction must be between 0 and 1")
    if options.checkpoint is not None and options.checkpoint <= 0:
        raise ValueError("checkpoint interval must be > 0")
    rng = random.Random(options.seed)
    rigid_rng = random.Random(options.seed + 1)  # its own stream: the other draws stay put
    prios = [p for p, _ in options.priority_mix]
    weights = [w for _, w in options.priority_mix]
    apps = sorted(fits or {}) if options.speedup == "mix" else []
    if options.speedup == "mix" and not apps:
        raise ValueError("speedup 'mix' needs fitted applications (--speedup-dir)")
    default_model = parse_speedup("linear" if apps else options.speedup, fits)
    models: dict[str, SpeedupModel] = {}
    selected = rows[: options.limit] if options.limit is not None else rows
    jobs: list[SimJob] = []
    for row in selected:
        units = min(row.units, capacity)
        lo = row.min_size or max(1, math.ceil(units * options.min_fraction))
        hi = row.max_size or max(units, round(units * options.max_factor))
        lo, hi = min(lo, units, capacity), min(max(hi, units), capacity)
        if options.rigid_fraction and rigid_rng.random() < options.rigid_fraction:
            lo = hi = units
        drawn = rng.choices(prios, weights)[0]
        model = default_model
        if apps and fits is not None:
            model = fits[rng.choice(apps)]
        if row.speedup:
            model = models.get(row.speedup) or models.setdefault(
                row.speedup, parse_speedup(row.speedup, fits)
            )
        jobs.append(
            SimJob(
                id=row.id,
                submit=row.submit / options.compress,
                duration=row.duration,
                units=units,
                min_size=lo,
                max_size=hi,
                priority=row.priority if row.priority is not None else drawn,
                model=model,
                checkpoint=row.checkpoint if row.checkpoint is not None else options.checkpoint,
                node_selector=row.node_selector,
                tolerations=row.tolerations,
            )
        )
    return jobs
