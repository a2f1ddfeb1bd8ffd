"""Fluent builders and helpers for the scheduler core tests.

``job("a").min(2).max(4).prio(0).running(4).queued(t0)`` reads as the sentence it builds;
``snap(...)`` wraps jobs and node capacities into a ``Snapshot``. ``ref_*`` functions are an
independent, node-by-node re-implementation of the packing contract used to check plans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from lattice.scheduler.core import (
    Decision,
    JobView,
    NodeView,
    Plan,
    SchedulerConfig,
    Snapshot,
    Stage,
    Strategy,
    schedule,
)

__all__ = [
    "T0",
    "Case",
    "JobBuilder",
    "at",
    "check",
    "decision",
    "job",
    "ref_fits",
    "ref_place",
    "ref_repack",
    "run",
    "snap",
    "state",
]

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(minutes: float = 0, *, seconds: float = 0, hours: float = 0) -> datetime:
    """``T0`` plus an offset."""
    return T0 + timedelta(hours=hours, minutes=minutes, seconds=seconds)


class JobBuilder:
    """Builds a ``JobView``; every method returns the builder."""

    def __init__(self, name: str, *, kind: str = "TrainingJob", namespace: str = "ns") -> None:
        self._f: dict[str, Any] = {
            "key": f"{kind}/{namespace}/{name}",
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "creation_time": T0,
        }

    def _set(self, **fields: Any) -> JobBuilder:
        self._f.update(fields)
        return self

    def min(self, n: int) -> JobBuilder:
        return self._set(min_size=n)

    def max(self, n: int) -> JobBuilder:
        return self._set(max_size=n)

    def gang(self, n: int) -> JobBuilder:
        return self._set(min_size=n, max_size=n)

    def prio(self, p: int) -> JobBuilder:
        return self._set(priority=p)

    def fixed(self, *units: int) -> JobBuilder:
        return self._set(fixed_pods=tuple(units))

    def units(self, u: int) -> JobBuilder:
        return self._set(replica_units=u)

    def created(self, t: datetime) -> JobBuilder:
        return self._set(creation_time=t)

    def queued(self, t: datetime | None) -> JobBuilder:
        return self._set(queued_time=t)

    def submitted(self, t: datetime) -> JobBuilder:
        return self._set(submit_time=t)

    def resized(self, t: datetime | None) -> JobBuilder:
        return self._set(last_resize_time=t)

    def admitted(self, t: datetime | None) -> JobBuilder:
        return self._set(admitted_time=t)

    def pending(self, since: datetime | None) -> JobBuilder:
        return self._set(pending_since=since)

    def requeue_at(self, t: datetime | None) -> JobBuilder:
        return self._set(requeue_time=t)

    def requeues(self, n: int) -> JobBuilder:
        return self._set(requeue_count=n)

    def service(self, unit_seconds: float, updated: datetime | None = None) -> JobBuilder:
        return self._set(attained_service=unit_seconds, service_updated_at=updated)

    def preemptible(self) -> JobBuilder:
        return self._set(preemptible_within_priority=True)

    def stage(self, stage: str) -> JobBuilder:
        return self._set(stage=stage)

    def new(self) -> JobBuilder:
        return self._set(stage=Stage.NEW, current_size=0)

    def waiting(self) -> JobBuilder:
        self._f.setdefault("queued_time", T0)
        self._f.setdefault("submit_time", self._f["queued_time"])
        return self._set(stage=Stage.WAITING, current_size=0)

    def running(self, size: int) -> JobBuilder:
        self._f.setdefault("queued_time", T0)
        self._f.setdefault("submit_time", self._f["queued_time"])
        return self._set(stage=Stage.RUNNING, current_size=size)

    def cooling(self, until: datetime, *, count: int = 1) -> JobBuilder:
        self._f.setdefault("queued_time", T0)
        return self._set(
            stage=Stage.REQUEUE_COOLDOWN, current_size=0, cooldown_time=until, requeue_count=count
        )

    def suspended(self) -> JobBuilder:
        return self._set(suspended=True)

    def finished(self) -> JobBuilder:
        return self._set(finished=True)

    def build(self) -> JobView:
        return JobView(**self._f)


def job(name: str, *, kind: str = "TrainingJob", namespace: str = "ns") -> JobBuilder:
    return JobBuilder(name, kind=kind, namespace=namespace)


#: The knobs the hand-computed tables were written against, pinned so that tuning the product's
#: defaults (from ``lattice simulate`` evidence) never silently changes what a table means.
TABLE_CONFIG = SchedulerConfig(
    strategy=Strategy.STRICT_FIFO,
    resize_interval=timedelta(seconds=60),
    slowdown_limit=0.5,
)


def snap(
    *jobs: JobBuilder | JobView,
    nodes: tuple[int, ...] = (4, 4),
    config: SchedulerConfig | None = None,
    **config_fields: Any,
) -> Snapshot:
    """A snapshot of ``jobs`` on nodes with the given free units."""
    cfg = config if config is not None else TABLE_CONFIG
    if config_fields:
        cfg = replace(cfg, **config_fields)
    return Snapshot(
        nodes=tuple(NodeView(f"node-{i}", free) for i, free in enumerate(nodes)),
        jobs=tuple(j.build() if isinstance(j, JobBuilder) else j for j in jobs),
        config=cfg,
    )


def run(snapshot: Snapshot, now: datetime = T0) -> Plan:
    return schedule(snapshot, now)


def state(plan: Plan) -> dict[str, tuple[str, int]]:
    """``{name: (stage, size)}`` of a plan, names taken from the last key segment."""
    return {key.rsplit("/", 1)[1]: (d.stage, d.size) for key, d in plan.decisions.items()}


def ref_place(free: list[int], units: int) -> bool:
    """Best fit of one pod on a per-node list: the smallest free value that holds it (a pod
    asking for nothing still needs a node)."""
    if units <= 0:
        return bool(free)
    best = -1
    for i, f in enumerate(free):
        if f >= units and (best < 0 or f < free[best]):
            best = i
    if best < 0:
        return False
    free[best] -= units
    return True


def _pods(view: JobView, replicas: int) -> list[int]:
    return sorted([*view.fixed_pods, *([view.replica_units] * replicas)], reverse=True)


def ref_fits(free: list[int], view: JobView, *, replicas: int) -> bool:
    """All-or-nothing best-fit-decreasing of the fixed pods plus ``replicas`` on a copy."""
    trial = list(free)
    if all(ref_place(trial, u) for u in _pods(view, replicas)):
        free[:] = trial
        return True
    return False


def ref_repack(snapshot: Snapshot, plan: Plan, now: datetime) -> list[int] | None:
    """Re-pack the plan's running jobs node by node, in the order rule 4 places them.

    Minimums in order, then every job's growth in order. Returns the per-node free units left,
    or ``None`` if a pod cannot be placed.
    """
    free = [max(0, n.free_units) for n in snapshot.nodes]
    views = {j.key: j for j in snapshot.jobs}
    running = [k for k in plan.order if plan[k].stage == Stage.RUNNING]
    placed = {k: views[k].min_size for k in running}

    def grow(key: str, size: int) -> bool:
        v = views[key]
        ok = all(ref_place(free, v.replica_units) for _ in range(size - placed[key]))
        placed[key] = max(placed[key], size)
        return ok

    for key in running:
        v = views[key]
        if not ref_fits(free, v, replicas=v.min_size - len(v.fixed_pods)):
            return None
    if not all(grow(key, plan[key].size) for key in running):
        return None
    return free


_UNSET: Any = object()


@dataclass(frozen=True, kw_only=True)
class Case:
    """One table row: a snapshot, a time, and what the plan must say (by job name)."""

    snapshot: Snapshot
    want: Mapping[str, tuple[str, int]]
    now: datetime = T0
    reasons: Mapping[str, str] = field(default_factory=dict)
    events: Mapping[str, Sequence[str]] = field(default_factory=dict)
    fields: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    order: Sequence[str] | None = None
    wakeup: Any = _UNSET


def decision(plan: Plan, name: str) -> Decision:
    (key,) = [k for k in plan.decisions if k.rsplit("/", 1)[1] == name]
    return plan[key]


def check(case: Case) -> Plan:
    """Run the case and assert every expectation it states."""
    plan = schedule(case.snapshot, case.now)
    assert state(plan) == dict(case.want)
    for name, text in case.reasons.items():
        assert text in decision(plan, name).reason
    for name, messages in case.events.items():
        assert [e.message for e in decision(plan, name).events] == list(messages)
    for name, expected in case.fields.items():
        d = decision(plan, name)
        assert {f: getattr(d, f) for f in expected} == dict(expected)
    if case.order is not None:
        assert [k.rsplit("/", 1)[1] for k in plan.order] == list(case.order)
    if case.wakeup is not _UNSET:
        assert plan.next_wakeup == case.wakeup
    return plan
