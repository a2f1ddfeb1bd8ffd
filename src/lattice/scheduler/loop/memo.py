"""The view memo: each job's parsed ``JobView`` kept per object version across passes.

Contract: :meth:`ViewMemo.view` returns a :class:`Memo` for one job object: its ``job_view``
(``None`` when another controller manages the job, :class:`~.snapshot.Invalid` when its plugin
cannot read it), its scheduler block and its terminal fields (:mod:`.terminal`). Parsing a job
is the costly part of a pass (docs/performance.md), so an entry is reused
for the very same object and pin at once, and read again only when the job's uid or
resourceVersion, its pin's resourceVersion or the context change. ``pending_since`` and
``refused_nodes``, the parts that come from the pods (``snapshot.with_pods``), are recomputed
every pass for running jobs only (the others have none), so the pods of the thousands of
waiting jobs are not even looked up. The pods of a job are looked up with its fixed pods' names
(``pods(fixed_names)``): a fixed pod may run in a batch Job of that name (an MPIJob launcher).
A running job without a persisted placement map gets the placement its pods show
(``placement.observed_placement``), refreshed every pass likewise.
:meth:`ViewMemo.begin`/:meth:`ViewMemo.end` bracket a pass; ``end`` forgets the jobs it did
not see (deleted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lattice.frameworks.base import JobPlugin, OperatorContext, managed_elsewhere
from lattice.primitives.paths import get_path
from lattice.runtime.projections import PodInfo
from lattice.scheduler.core import JobView, Stage
from lattice.scheduler.loop.placement import Naming, with_pods
from lattice.scheduler.loop.snapshot import Invalid, read_job
from lattice.scheduler.loop.terminal import terminal_fields

__all__ = ["Memo", "ViewMemo"]


@dataclass(frozen=True, slots=True)
class Memo:
    """One memoised job, read by name."""

    #: The object (cached, or our write read back) and pin the entry was made for.
    obj: Mapping[str, Any]
    pinned: Mapping[str, Any] | None
    #: (uid, resourceVersion, pinned?, pin resourceVersion): when equal, the view still holds.
    version: tuple[Any, ...]
    #: None when another controller (e.g. MultiKueue) manages the job.
    view: JobView | Invalid | None
    #: The scheduler block at ``plugin.scheduling_path``, as persisted.
    block: Mapping[str, Any]
    #: The scheduler's fields of a finished job (:func:`.terminal.terminal_fields`), or None.
    terminal: Mapping[str, Any] | None
    #: The names the job's pods run under (for a ``JobView``; else the empty naming).
    naming: Naming = field(default_factory=Naming)
    #: ``(child name, node)`` of each pod the placement puts on a node.
    placed: tuple[tuple[str, str], ...] = ()
    #: No placement map is persisted: the placement is observed from the pods each pass.
    observe: bool = False


def _version(obj: Mapping[str, Any], pinned: Mapping[str, Any] | None) -> tuple[Any, ...]:
    meta = obj.get("metadata") or {}
    pin_rv = None if pinned is None else (pinned.get("metadata") or {}).get("resourceVersion")
    return (meta.get("uid"), meta.get("resourceVersion"), pinned is not None, pin_rv)


def _placed(view: JobView | Invalid | None, naming: Naming) -> tuple[tuple[str, str], ...]:
    if not isinstance(view, JobView) or not view.placement:
        return ()
    names = naming.names(len(view.placement))
    return tuple((name, node) for name, node in zip(names, view.placement, strict=True) if node)


class ViewMemo:
    """Each job's view per object version (see the module contract)."""

    def __init__(self) -> None:
        self._ctx: OperatorContext | None = None
        self._seen: set[tuple[str, str]] = set()
        #: (kind, "namespace/name") -> the memoised job
        self._memo: dict[tuple[str, str], Memo] = {}

    def begin(self, ctx: OperatorContext) -> None:
        """Start a pass under ``ctx`` (compared once per pass: it holds the runtimes)."""
        if ctx != self._ctx:
            self._memo.clear()
            self._ctx = ctx
        self._seen = set()

    def view(
        self,
        key: tuple[str, str],
        plugin: JobPlugin[Any],
        obj: Mapping[str, Any],
        pods: Callable[[Sequence[str]], Sequence[PodInfo]],
        *,
        ctx: OperatorContext,
        pinned: Mapping[str, Any] | None,
        deleting_on: Callable[[str], bool],
    ) -> Memo:
        """The memoised job ``key`` (``ctx`` is the one given to :meth:`begin`), with its pod
        observations fresh for a running job (``deleting_on``: ``snapshot.with_pods``)."""
        self._seen.add(key)
        hit = self._memo.get(key)
        if hit is None or hit.obj is not obj or hit.pinned is not pinned:
            version = _version(obj, pinned)
            if hit is None or hit.version != version:
                view: JobView | Invalid | None = None
                naming = Naming()
                if not managed_elsewhere(obj):
                    read = read_job(key[0], plugin, obj, ctx, pinned=pinned)
                    view = read if isinstance(read, Invalid) else read.view
                    naming = naming if isinstance(read, Invalid) else read.naming
                hit = Memo(
                    obj=obj,
                    pinned=pinned,
                    version=version,
                    view=view,
                    block=get_path(obj, plugin.scheduling_path),
                    terminal=terminal_fields(obj, plugin),
                    naming=naming,
                    placed=_placed(view, naming),
                    observe=isinstance(view, JobView) and not view.placement,
                )
            else:
                hit = replace(hit, obj=obj, pinned=pinned)
            self._memo[key] = hit
        view = hit.view
        if isinstance(view, JobView) and view.stage == Stage.RUNNING:
            naming = hit.naming
            found = pods(naming.fixed_names)
            fresh = with_pods(
                view, found, naming=naming, deleting_on=deleting_on, observe=hit.observe
            )
            if fresh is not view:
                placed = hit.placed
                if fresh.placement != view.placement:
                    placed = _placed(fresh, naming)
                hit = replace(hit, view=fresh, placed=placed)
                self._memo[key] = hit
        return hit

    def priority(self, kind: str, namespace: str, name: str) -> int | None:
        """The job's priority as of the last pass that read it; None if none did (or it is
        invalid)."""
        hit = self._memo.get((kind, f"{namespace}/{name}"))
        view = None if hit is None else hit.view
        return view.priority if isinstance(view, JobView) else None

    def end(self) -> None:
        """Forget the jobs this pass did not see (deleted)."""
        for key in [k for k in self._memo if k not in self._seen]:
            del self._memo[key]
