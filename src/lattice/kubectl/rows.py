"""What ``kubectl lattice`` knows of one job, derived purely from its raw object.

Contract:
- ``JOB_KINDS`` lists every kind the scheduler orders; ``resolve_kind`` accepts what kubectl
  accepts for a CRD (kind, plural, singular, short name, each optionally ``.<group>``).
- ``job_row(kind, obj, ctx)`` reads the scheduler block at the plugin's ``scheduling_path``
  (``status`` for TrainingJob, ``status.lattice`` for the Kubeflow kinds) and takes priority and
  min/max from the plugin's ``parse`` + ``demand`` (``None`` when the job does not parse), and
  from the reconciler's block at ``exec_path`` the child-creation refusal in force, if any
  (``lattice.frameworks.refusals``). It recomputes nothing the scheduler decides.
- ``queue_order`` is the scheduler order as persisted: running jobs first (the scheduler gives
  positions to waiting jobs only, as Kueue does), then the waiting jobs by ``queuePosition``,
  then the rest; ties and each group by priority (desc), ``queuedTime`` (unset last),
  namespace/name, kind.
- ``with_positions`` completes ``queuePosition``: the scheduler persists it for the first
  ``SHOWN_POSITIONS`` waiting jobs only; every other waiting candidate (valid, not suspended,
  queued, not managed elsewhere) gets the next positions in the core's own order
  (:func:`lattice.scheduler.core.order.order_key`: priority, LAS rank and virtual queue time
  under ``LeastAttainedService``, else ``queuedTime``, to the microsecond, incumbency, creation
  time, namespace/name, kind) and ``computed=True``.
- ``operator_context`` builds the plugins' :class:`OperatorContext` from listed PriorityClasses
  and runtimes as the operator does; ``context_namespace`` finds a kubeconfig context's namespace.

Pure: dicts in, values out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from lattice.api import Stage, constants
from lattice.api.constants import Resource
from lattice.api.crd import DESCRIPTORS
from lattice.frameworks.base import InvalidJob, JobPlugin, OperatorContext, managed_elsewhere
from lattice.frameworks.refusals import refusal_of
from lattice.frameworks.registry import plugin_for
from lattice.primitives.paths import get_path
from lattice.primitives.times import parse_opt_time
from lattice.scheduler.core.order import (
    NOT_RUNNING,
    OrderKey,
    las_band,
    las_position,
)
from lattice.scheduler.core.types import SchedulerConfig, Strategy, job_key

__all__ = [
    "JOB_KINDS",
    "JobKind",
    "JobRow",
    "context_namespace",
    "job_row",
    "kubeconfig_paths",
    "operator_context",
    "queue_order",
    "resolve_kind",
    "text",
    "with_positions",
]

FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class JobKind:
    """One job kind: its REST resource, the names kubectl accepts for it, and its plugin."""

    resource: Resource
    aliases: frozenset[str]
    plugin: JobPlugin[Any] | None

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def scheduling_path(self) -> tuple[str, ...]:
        """Where the scheduler block lives; Kubeflow kinds without a plugin yet: status.lattice."""
        return self.plugin.scheduling_path if self.plugin is not None else ("status", "lattice")

    @property
    def exec_path(self) -> tuple[str, ...]:
        """Where the reconciler's conditions live (Kubeflow kinds without a plugin: status)."""
        return self.plugin.exec_path if self.plugin is not None else ("status",)


def _job_kind(res: constants.Resource) -> JobKind:
    names = {res.kind.lower(), res.plural}
    for d in DESCRIPTORS:
        if d.resource == res:
            names |= {d.singular, *d.short_names}
    names |= {f"{n}.{res.group}" for n in list(names)}
    try:
        plugin: JobPlugin[Any] | None = plugin_for(res.kind)
    except KeyError:
        plugin = None
    return JobKind(resource=res, aliases=frozenset(names), plugin=plugin)


#: Every kind the scheduler orders, in the order rows of equal rank print.
JOB_KINDS: tuple[JobKind, ...] = tuple(
    _job_kind(r)
    for r in (constants.TRAININGJOB, constants.MPIJOB, constants.MXJOB, constants.TRAINJOB)
)
_KIND_RANK = {k.kind: i for i, k in enumerate(JOB_KINDS)}


def resolve_kind(name: str) -> JobKind:
    """The kind called ``name``; ``ValueError`` naming the known kinds otherwise."""
    wanted = name.strip().lower()
    for kind in JOB_KINDS:
        if wanted in kind.aliases:
            return kind
    known = ", ".join(k.kind for k in JOB_KINDS)
    raise ValueError(f"unknown job kind {name!r}; known: {known}")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRow:
    """One job as the plugin shows it. ``priority``/``min_size``/``max_size`` are ``None`` when
    the job does not parse (``invalid`` says why); ``managed_by`` names a foreign controller."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    priority: int | None = None
    stage: str = ""
    size: int = 0
    min_size: int | None = None
    max_size: int | None = None
    position: int | None = None
    queued_time: datetime | None = None
    #: When the job last entered Waiting (``waitingSince``; older blocks have none).
    waiting_since: datetime | None = None
    cooldown_time: datetime | None = None
    requeue_count: int = 0
    last_decision: str = ""
    reason: str = ""
    message: str = ""
    invalid: str = ""
    managed_by: str = ""
    creation_time: datetime | None = None
    admitted_time: datetime | None = None
    attained_service: float = 0.0
    full_units: int = 0
    suspended: bool = False
    computed: bool = False
    #: The apiserver refuses to create children of the job (``ChildCreateRefused``): its words.
    refused: str = ""
    refused_since: datetime | None = None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def waiting(self) -> bool:
        return self.stage == Stage.WAITING

    @property
    def wait_start(self) -> datetime | None:
        """When the current wait began: ``waitingSince``, else ``queuedTime`` (a preempted job
        keeps its older queuedTime, so this is the truthful one when the scheduler wrote it)."""
        return self.waiting_since or self.queued_time


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text(value: Any) -> str:
    """``value`` if it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def _managed_by(obj: Mapping[str, Any]) -> str:
    if not managed_elsewhere(obj):
        return ""
    spec = obj.get("spec") or {}
    return text((spec.get("runPolicy") or {}).get("managedBy")) or text(spec.get("managedBy"))


def job_row(kind: JobKind, obj: Mapping[str, Any], ctx: OperatorContext) -> JobRow:
    """The row of one raw job object of ``kind``."""
    meta = obj.get("metadata") or {}
    state: Any = obj
    for step in kind.scheduling_path:
        state = state.get(step) if isinstance(state, Mapping) else None
    state = state if isinstance(state, Mapping) else {}
    refusal = refusal_of(get_path(obj, kind.exec_path))
    priority = min_size = max_size = None
    invalid = ""
    suspended = False
    full_units = 0
    if kind.plugin is not None:
        try:
            demand = kind.plugin.demand(kind.plugin.parse(obj, ctx), ctx)
            priority, min_size, max_size = demand.priority, demand.min_size, demand.max_size
            full_units = sum(demand.fixed_pods) + demand.replica_units * (
                max_size - len(demand.fixed_pods)
            )
            suspended = demand.suspended
        except InvalidJob as exc:
            invalid = str(exc)
        except Exception as exc:  # a job no plugin can read must not hide the rest of the queue
            invalid = f"{type(exc).__name__}: {exc}"
    return JobRow(
        kind=kind.kind,
        namespace=text(meta.get("namespace")),
        name=text(meta.get("name")),
        uid=text(meta.get("uid")),
        priority=priority,
        stage=text(state.get("stage")),
        size=_int(state.get("currentSize")) or 0,
        min_size=min_size,
        max_size=max_size,
        position=_int(state.get("queuePosition")),
        queued_time=parse_opt_time(state.get("queuedTime")),
        waiting_since=parse_opt_time(state.get("waitingSince")),
        cooldown_time=parse_opt_time(state.get("cooldownTime")),
        requeue_count=_int(state.get("requeueCount")) or 0,
        last_decision=text(state.get("lastDecision")),
        reason=text(state.get("reason")),
        message=text(state.get("message")),
        invalid=invalid,
        managed_by=_managed_by(obj),
        creation_time=parse_opt_time(meta.get("creationTimestamp")),
        admitted_time=parse_opt_time(state.get("admittedTime")),
        attained_service=_number(state.get("attainedService")),
        full_units=full_units,
        suspended=suspended,
        refused=refusal.message if refusal is not None else "",
        refused_since=refusal.since if refusal is not None else None,
    )


def _number(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else 0.0


def _candidate(r: JobRow) -> bool:
    """Whether the scheduler gives ``r`` a queue position (core rule 1: a valid, unsuspended
    job waiting with a queued time)."""
    return (
        r.waiting
        and r.priority is not None
        and not r.suspended
        and not r.managed_by
        and r.queued_time is not None
    )


def _order_key(r: JobRow, *, now: datetime, config: SchedulerConfig) -> OrderKey:
    """The core's ``order_key`` of a waiting job, from its row."""
    queued = r.queued_time or FAR_FUTURE
    rank = 0
    if config.strategy == Strategy.LEAST_ATTAINED_SERVICE:
        band = las_band(r.attained_service, config)
        rank, queued = las_position(
            band=band, queued_time=queued, units=r.full_units, config=config
        )
    return (
        -(r.priority or 0),
        rank,
        queued,
        NOT_RUNNING,
        r.creation_time or _EPOCH,
        r.namespace,
        r.name,
        job_key(kind=r.kind, namespace=r.namespace, name=r.name),
    )


def with_positions(
    rows: Iterable[JobRow], *, now: datetime, config: SchedulerConfig | None = None
) -> list[JobRow]:
    """``rows`` with a computed ``position`` for every waiting candidate the scheduler did not
    number (see the module docstring); the others unchanged, in the order given."""
    cfg = config or SchedulerConfig()
    out = list(rows)
    shown = [r.position for r in out if r.position is not None]
    tail = [i for i, r in enumerate(out) if r.position is None and _candidate(r)]
    tail.sort(key=lambda i: _order_key(out[i], now=now, config=cfg))
    start = max(shown, default=0)
    for offset, i in enumerate(tail, start=1):
        out[i] = replace(out[i], position=start + offset, computed=True)
    return out


def queue_order(rows: Iterable[JobRow]) -> list[JobRow]:
    """Scheduler order (see the module docstring)."""

    def key(r: JobRow) -> tuple[Any, ...]:
        rest = (-(r.priority or 0), r.queued_time or FAR_FUTURE, r.namespace, r.name)
        group = 1 if r.position is not None else 0 if r.stage == Stage.RUNNING else 2
        return (group, r.position or 0, *rest, _KIND_RANK.get(r.kind, 99))

    return sorted(rows, key=key)


def operator_context(
    priority_classes: Iterable[Mapping[str, Any]], runtimes: Mapping[str, Mapping[str, Any]]
) -> OperatorContext:
    """PriorityClass name -> value (the lowest ``globalDefault`` value is the default) and the
    runtimes keyed ``<kind>/<namespace>/<name>``, as the operator's ``ContextSource`` builds
    them."""
    values: dict[str, int] = {}
    defaults: list[int] = []
    for pc in priority_classes:
        name, value = text((pc.get("metadata") or {}).get("name")), _int(pc.get("value"))
        if name and value is not None:
            values[name] = value
            if pc.get("globalDefault") is True:
                defaults.append(value)
    return OperatorContext(
        priority_classes=values, default_priority=min(defaults, default=0), runtimes=runtimes
    )


def kubeconfig_paths(flag: str | None, environ: Mapping[str, str], home: str) -> list[str]:
    """The kubeconfig files in kubectl's order: the flag, else ``$KUBECONFIG`` (a path list),
    else ``<home>/.kube/config``."""
    raw = flag or environ.get("KUBECONFIG") or os.path.join(home, ".kube", "config")
    return [os.path.expanduser(p) for p in raw.split(os.pathsep) if p]


def context_namespace(configs: Sequence[Mapping[str, Any]], context: str | None) -> str:
    """The namespace of ``context`` (else the current context), merging kubeconfig files like
    kubectl (the first file that sets a value wins); ``default`` when none is set."""
    current = context
    for cfg in configs:
        current = current or text(cfg.get("current-context")) or None
    for cfg in configs:
        for entry in cfg.get("contexts") or []:
            if isinstance(entry, Mapping) and entry.get("name") == current:
                return text((entry.get("context") or {}).get("namespace")) or "default"
    return "default"
