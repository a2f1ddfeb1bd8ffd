"""Pure translation between the informer caches and the scheduler core's values.

Contract (no I/O, no clock, no logging; every function is deterministic in its arguments):

- Times: the scheduler's status times are RFC 3339 strings at microsecond precision, as
  ``metav1.MicroTime`` writes them (``%Y-%m-%dT%H:%M:%S.%fZ``), so that jobs arriving within
  the same second keep their arrival order. ``lattice.primitives.times.parse_opt_time`` reads
  any RFC 3339 string to an aware UTC datetime (unparseable -> ``None``); :func:`format_time`
  writes one. The loop calls the core with :func:`utc_now` (``now`` in UTC, microseconds
  kept): what is persisted is then exactly what was decided, and a restarted operator
  reproduces it.
- Nodes: :mod:`~lattice.scheduler.loop.nodes`.
- :func:`read_job` / :func:`job_view`: parse through the plugin (``InvalidJob`` ->
  :class:`Invalid`, which the loop does not schedule: the kind reconciler records the
  invalid-spec condition (``refusals.invalid_of``), from which the loop writes stage Wrong;
  ``JobNotReady``, e.g. a TrainJob whose
  runtime does not exist yet, is skipped likewise while the reconciler shows it waiting); the
  scheduler state is read at ``plugin.scheduling_path`` (missing fields take the ``JobView``
  defaults).
  ``finished``: stage Completed, Failed or Cancelled, the invalid-spec condition or a True
  ``Succeeded``/``Failed``/``Complete`` condition in the ``conditions`` list at
  ``plugin.exec_path``, or a deletion in progress (a job being deleted holds nothing). Stage
  Wrong alone is not finished: such a job (fixed since, or found Wrong by the core's own
  checks) is read as a new one and judged again. Demand (priority, sizes, units, per-pod
  demands, suspended)
  comes from ``plugin.demand``, and so does the :class:`Naming` of the job's pods (fixed pods
  by ``Demand.fixed_names``, replica ``i`` as ``replica_prefix + i``). ``placement``: the
  persisted ``placement`` map (child name -> node) read by those names for pods
  ``0 .. currentSize - 1`` (``""`` for a name it lacks; empty without a map or at size 0).
  From the pods (:func:`with_pods`, read only while stage is Running): ``pending_since``, the
  earliest time a live, undeleted pod of the job was reported ``PodScheduled=False`` reason
  ``Unschedulable`` (image pulls and container creation do not count), and ``refused_nodes``.
  ``refused_since``/``refused_message``: the reconciler's ``ChildCreateRefused`` condition
  (``lattice.frameworks.refusals``), when the apiserver refuses the job's children.
- :func:`status_fields` is the inverse: the complete scheduler block (camelCase wire names of
  ``lattice.api.common.SchedulingStatus``) persisting a ``Decision``; ``None`` values are written
  as JSON null, which a merge patch turns into a removal. ``queuePosition`` is shown for the
  first :data:`SHOWN_POSITIONS` waiting jobs only (:func:`shown_position`): a job further back
  has none, so that one admission does not rewrite thousands of statuses. ``lastExecTime``
  becomes ``now`` when the size goes from 0 to more, and is carried over otherwise.
  ``placement`` is ``Decision.placement`` as ``{child name: node}`` (null when no pod is placed,
  e.g. at size 0), the scheduler being its one writer.
  ``priority``, ``minSize`` and ``maxSize`` are the view's (the plugin's reading of the spec,
  shown by the kinds' printer columns).
  ``reason``/``message`` are the decision's ``wait_reason`` and ``wait_message`` (both null for
  a running job; absent from the fields, so left as they are, for a job whose stage the pass
  does not own); ``waitingSince`` is :func:`waiting_since`.
  The fields of a finished job come from :mod:`~lattice.scheduler.loop.terminal`.
  :func:`status_patch` nests it at the plugin's path for a merge patch.
- Trigger relevance: an informer update matters to the scheduler only when the object's
  signature changes. :func:`job_signature`: uid, spec, labels, annotations, whether it is
  finished and its child refusal (so the scheduler's own status writes are not a change); pods
  and nodes:
  :mod:`~lattice.scheduler.loop.nodes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from lattice.api.constants import ANNOTATION_CHECKPOINTING
from lattice.frameworks.base import (
    InvalidJob,
    JobNotReady,
    JobPlugin,
    OperatorContext,
    PinsInputs,
)
from lattice.frameworks.refusals import invalid_of, refusal_of
from lattice.primitives.paths import get_path
from lattice.primitives.times import format_micro_time, parse_opt_time
from lattice.runtime.projections import PodInfo
from lattice.scheduler.core import (
    Constraint,
    Decision,
    JobView,
    PodDemand,
    Stage,
    job_key,
    resources,
)
from lattice.scheduler.loop.placement import (
    Naming,
    never_deleting,
    placement_map,
    read_placement,
    with_pods,
)

__all__ = [
    "FINISHED_STAGES",
    "SHOWN_POSITIONS",
    "TERMINAL_CONDITIONS",
    "Invalid",
    "JobRead",
    "format_time",
    "is_finished",
    "job_signature",
    "job_view",
    "read_job",
    "shown_position",
    "status_fields",
    "status_patch",
    "utc_now",
    "waiting_since",
    "with_status",
]

#: How many waiting jobs get a persisted ``queuePosition``: the head of the queue, as Kueue's
#: ClusterQueue status listed its first ``maxCount`` (default 10) pending workloads. Each shown
#: position costs a status write whenever it moves; with 100 shown, a busy queue spent a
#: quarter of the scheduler's writes on positions alone (docs/performance.md).
SHOWN_POSITIONS = 10
FINISHED_STAGES: frozenset[str] = frozenset(
    {Stage.COMPLETED, Stage.WRONG, Stage.FAILED, "Cancelled"}
)
TERMINAL_CONDITIONS: frozenset[str] = frozenset({"Succeeded", "Failed", "Complete"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- time


def format_time(value: datetime | None) -> str | None:
    """``%Y-%m-%dT%H:%M:%S.%fZ`` in UTC (a ``MicroTime``); ``None`` stays ``None``."""
    return None if value is None else format_micro_time(value)


def utc_now(now: datetime) -> datetime:
    """``now`` in UTC, to the microsecond (what a status time holds)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now.astimezone(UTC)


# --------------------------------------------------------------------------- jobs


@dataclass(frozen=True, slots=True)
class Invalid:
    """A job its plugin cannot parse: the scheduler skips it (the reconciler marks it Wrong)."""

    key: str
    message: str


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def is_finished(obj: Mapping[str, Any], plugin: JobPlugin[Any]) -> bool:
    """Finished stage, a terminal exec condition, or a deletion in progress."""
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return True
    block = get_path(obj, plugin.exec_path)
    if invalid_of(block) is not None:
        return True  # judged invalid: it holds nothing until its spec is fixed
    stage = get_path(obj, plugin.scheduling_path).get("stage")
    if stage in FINISHED_STAGES and stage != Stage.WRONG:
        return True
    conditions = block.get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, Mapping)
        and c.get("type") in TERMINAL_CONDITIONS
        and c.get("status") == "True"
        for c in conditions
    )


class JobRead(NamedTuple):
    """One job as :func:`read_job` reads it: its view (no pod observations yet) and naming."""

    view: JobView
    naming: Naming


def read_job(
    kind: str,
    plugin: JobPlugin[Any],
    obj: Mapping[str, Any],
    ctx: OperatorContext,
    *,
    pinned: Mapping[str, Any] | None = None,
) -> JobRead | Invalid:
    """The core's view of one cached job object before any pod is observed, with the names its
    pods run under, or :class:`Invalid`. Depends only on the object, the pin and ``ctx``, so a
    loop may memoise it per object version (:func:`with_pods` adds the pod observations).

    The plugin's parse and demand are the costly part (docs/performance.md)."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "")
    key = job_key(kind=kind, namespace=namespace, name=name)
    try:
        if pinned is not None and isinstance(plugin, PinsInputs):
            parsed = plugin.parse_pinned(obj, pinned, ctx)
        else:
            parsed = plugin.parse(obj, ctx)
        demand = plugin.demand(parsed, ctx)
    except (InvalidJob, JobNotReady) as exc:  # not ready (a missing runtime): skipped likewise
        return Invalid(key=key, message=str(exc))
    except Exception as exc:  # a plugin bug on odd input must never stop the whole pass
        return Invalid(key=key, message=f"cannot read the job: {type(exc).__name__}: {exc}")
    naming = Naming(demand.fixed_names, demand.replica_prefix)
    state = get_path(obj, plugin.scheduling_path)
    stage = state.get("stage")
    stage = stage if isinstance(stage, str) else ""
    finished = is_finished(obj, plugin)
    if stage == Stage.WRONG and not finished:
        stage = Stage.NEW  # no longer judged invalid: judged again, as a new job
    size = _int(state.get("currentSize"))
    refusal = refusal_of(get_path(obj, plugin.exec_path))
    view = JobView(
        key=key,
        kind=kind,
        namespace=namespace,
        name=name,
        creation_time=parse_opt_time(meta.get("creationTimestamp")) or _EPOCH,
        priority=demand.priority,
        min_size=demand.min_size,
        max_size=demand.max_size,
        fixed_pods=demand.fixed_pods,
        replica_units=demand.replica_units,
        stage=stage,
        current_size=size,
        submit_time=parse_opt_time(state.get("submitTime")),
        queued_time=parse_opt_time(state.get("queuedTime")),
        requeue_time=parse_opt_time(state.get("requeueTime")),
        cooldown_time=parse_opt_time(state.get("cooldownTime")),
        requeue_count=_int(state.get("requeueCount")),
        last_resize_time=parse_opt_time(state.get("lastResizeTime")),
        attained_service=_float(state.get("attainedService")),
        service_updated_at=parse_opt_time(state.get("serviceUpdatedTime")),
        admitted_time=parse_opt_time(state.get("admittedTime")),
        suspended=demand.suspended,
        finished=finished,
        preemptible_within_priority=demand.preemptible_within_priority
        or (meta.get("annotations") or {}).get(ANNOTATION_CHECKPOINTING) == "true",
        fixed_demands=demand.fixed_demands or _from_units(demand.fixed_pods, ctx),
        replica_demand=demand.replica_demand or _from_units((demand.replica_units,), ctx)[0],
        placement=read_placement(state, naming, size),
        refused_since=None if refusal is None else refusal.since,
        refused_message="" if refusal is None else refusal.message,
    )
    return JobRead(view, naming)


def _from_units(units: Sequence[int], ctx: OperatorContext) -> tuple[PodDemand, ...]:
    """Per-pod demands for a plugin that gives only units: each pod asks for its units of the
    scheduling unit (node mode: a whole node) and one pod slot, anywhere the operator's node
    selector allows."""
    where = Constraint(node_selector=tuple(ctx.node_selector))
    if ctx.node_mode:
        return tuple(
            PodDemand(requests=resources({"pods": 1}), constraint=where, units=u, exclusive=u > 0)
            for u in units
        )
    return tuple(
        PodDemand(
            requests=resources({ctx.scheduling_unit: u, "pods": 1}), constraint=where, units=u
        )
        for u in units
    )


def job_view(
    kind: str,
    plugin: JobPlugin[Any],
    obj: Mapping[str, Any],
    pods: Iterable[PodInfo],
    ctx: OperatorContext,
    *,
    pinned: Mapping[str, Any] | None = None,
    deleting_on: Callable[[str], bool] = never_deleting,
) -> JobView | Invalid:
    """:func:`read_job` with the observations of ``pods`` (:func:`with_pods`).

    ``pinned`` is the job's pin ConfigMap (``PinsInputs``): a started job is sized from the
    inputs it started with, as the reconciler runs it, not from a runtime edited since.
    """
    read = read_job(kind, plugin, obj, ctx, pinned=pinned)
    if isinstance(read, Invalid):
        return read
    view, naming = read
    observe = not view.placement
    return with_pods(view, list(pods), naming=naming, deleting_on=deleting_on, observe=observe)


# --------------------------------------------------------------------------- status


def status_fields(
    decision: Decision,
    *,
    view: JobView,
    previous: Mapping[str, Any],
    now: datetime,
    naming: Naming | None = None,
) -> dict[str, Any]:
    """Every scheduler field of the status block after ``decision`` (camelCase, nulls kept)."""
    started = view.current_size == 0 and decision.size > 0
    fields: dict[str, Any] = {
        "stage": str(decision.stage),
        "currentSize": decision.size,
        "submitTime": format_time(decision.submit_time),
        "queuedTime": format_time(decision.queued_time),
        "requeueTime": format_time(decision.requeue_time),
        "cooldownTime": format_time(decision.cooldown_time),
        "queuePosition": shown_position(decision),
        "requeueCount": decision.requeue_count,
        "attainedService": decision.attained_service,
        "serviceUpdatedTime": format_time(decision.service_updated_at),
        "lastExecTime": format_time(now) if started else previous.get("lastExecTime"),
        "lastResizeTime": format_time(decision.last_resize_time),
        "admittedTime": format_time(decision.admitted_time),
        "lastDecision": decision.reason,
        "placement": _placement_patch(
            placement_map(decision, naming or Naming()), previous.get("placement")
        ),
        "priority": view.priority,
        "minSize": view.min_size,
        "maxSize": view.max_size,
        "waitingSince": waiting_since(decision, view=view, previous=previous, now=now),
    }
    code = decision.wait_reason
    if code is not None or decision.stage == Stage.RUNNING:
        fields["reason"] = None if code is None else str(code)
        fields["message"] = decision.wait_message or None
    return fields


def waiting_since(
    decision: Decision, *, view: JobView, previous: Mapping[str, Any], now: datetime
) -> str | None:
    """``waitingSince`` after ``decision``: kept while the job waits as a candidate, ``now``
    when it enters waiting (new, stopped, cooldown over, resumed), ``None`` otherwise. A block
    written before the field existed counts the wait from ``queuedTime``."""
    if decision.stage != Stage.WAITING or decision.queued_time is None:
        return None
    if decision.wait_reason is None:  # finished, left as it is
        return None
    if view.stage == Stage.WAITING and view.current_size == 0 and view.queued_time is not None:
        kept = previous.get("waitingSince")
        return kept if isinstance(kept, str) else format_time(view.queued_time)
    return format_time(now)


def _placement_patch(new: dict[str, str] | None, old: Any) -> dict[str, str | None] | None:
    """``new`` as a merge patch over ``old``: a merge patch merges maps, so every name that
    is no longer placed is sent as null (or the whole map, when nothing is placed)."""
    if new is None or not isinstance(old, Mapping):
        return None if new is None else dict(new)
    patch: dict[str, str | None] = {k: None for k in old if k not in new}
    patch.update(new)
    return patch


def shown_position(decision: Decision) -> int | None:
    """The ``queuePosition`` persisted for ``decision``: its position if among the first
    :data:`SHOWN_POSITIONS`, else ``None``."""
    position = decision.queue_position
    return position if position is not None and position <= SHOWN_POSITIONS else None


def status_patch(
    path: Sequence[str], fields: Mapping[str, Any], *, resource_version: str | None = None
) -> dict[str, Any]:
    """The merge-patch body writing ``fields`` at ``path``; guarded by ``resource_version``
    when one is given (the scheduler gives none: it is the one writer of its fields)."""
    body: dict[str, Any] = dict(fields)
    for step in reversed(path):
        body = {step: body}
    if resource_version is not None:
        body["metadata"] = {"resourceVersion": resource_version}
    return body


def with_status(
    obj: Mapping[str, Any], path: Sequence[str], fields: Mapping[str, Any], *, version: str
) -> dict[str, Any]:
    """``obj`` as :func:`status_patch` of ``fields`` at ``path`` will leave it (a null removes
    the field, as merge patch does), with ``metadata.resourceVersion`` set to ``version``.
    Shares every untouched branch with ``obj``, which is left as it was."""

    def merged(node: Mapping[str, Any], depth: int) -> dict[str, Any]:
        out = dict(node)
        if depth == len(path):
            for key, value in fields.items():
                if value is None:
                    out.pop(key, None)
                elif isinstance(value, dict):  # a map merged key by key, as merge patch does
                    merged_map = {**(out.get(key) or {}), **value}
                    out[key] = {k: v for k, v in merged_map.items() if v is not None}
                else:
                    out[key] = value
            return out
        child = out.get(path[depth])
        out[path[depth]] = merged(child if isinstance(child, Mapping) else {}, depth + 1)
        return out

    out = merged(obj, 0)
    out["metadata"] = {**(obj.get("metadata") or {}), "resourceVersion": version}
    return out


# --------------------------------------------------------------------------- triggers


def job_signature(obj: Mapping[str, Any], plugin: JobPlugin[Any]) -> tuple[Any, ...]:
    """What of a job object a scheduling pass depends on, besides the scheduler's own fields."""
    meta = obj.get("metadata") or {}
    return (
        meta.get("uid"),
        meta.get("labels"),
        meta.get("annotations"),
        obj.get("spec"),
        is_finished(obj, plugin),
        refusal_of(get_path(obj, plugin.exec_path)),
    )
