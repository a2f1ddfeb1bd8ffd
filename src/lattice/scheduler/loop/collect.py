"""View collection: each job of a pass, read from the informer caches by name.

Contract: :meth:`Collector.collect` walks every enabled kind's job cache once per pass. Each
cached object is first replaced by what the scheduler's own writes make of it
(``Writer.current``: read-your-writes), then read through the :class:`~.memo.ViewMemo` (with the
job's pin ConfigMap for a ``PinsInputs`` plugin, when the job owns it). A job another controller
manages is left out; a job its plugin cannot read is counted ``invalid`` (in the stage it
shows) and, when its reconciler recorded its end (a ``FailedValidation`` condition), listed in
``ended`` so the loop writes its terminal stage. Every other job becomes an :class:`Entry`,
keyed by plan key (``kind/namespace/name``). :attr:`Collected.placed` maps (namespace, child
name) to the node of every pod a placement covers, over the jobs that hold pods and are not
finished (what the core accounts for itself; ``nodes.node_views`` charges every other live pod).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lattice.frameworks.base import JobPlugin, OperatorContext, PinsInputs
from lattice.kube import Resource
from lattice.primitives.keys import owner_key, split_key
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from lattice.runtime.projections import NODE_INDEX, OWNER_INDEX, PodInfo
from lattice.scheduler.core import JobView
from lattice.scheduler.loop.memo import Memo, ViewMemo
from lattice.scheduler.loop.snapshot import Invalid
from lattice.scheduler.loop.terminal import terminal_pending
from lattice.scheduler.loop.writer import Target

__all__ = ["Collected", "Collector", "Entry", "stage_label"]


def stage_label(stage: object) -> str:
    """The ``lattice_jobs`` stage label of a persisted stage ("" shows as ``New``)."""
    return stage if isinstance(stage, str) and stage else "New"


class Entry(NamedTuple):
    """One job of a pass (a named tuple: a pass builds one per job, and a frozen dataclass's
    ``__init__`` cost several times as much)."""

    kind: str
    #: The plan key (``kind/namespace/name``) and the cache key (``namespace/name``).
    key: str
    store_key: str
    resource: Resource
    path: tuple[str, ...]
    #: The object the pass read (cached, or our write read back).
    obj: Mapping[str, Any]
    memo: Memo

    @property
    def view(self) -> JobView:
        view = self.memo.view
        assert isinstance(view, JobView)
        return view

    def target(self) -> Target:
        """Where a write of this job goes."""
        namespace, name = split_key(self.store_key)
        uid = str((self.obj.get("metadata") or {}).get("uid") or "")
        return Target(self.kind, self.key, namespace, name, uid, self.resource, self.path)


@dataclass(slots=True)
class Collected:
    """What a pass collected."""

    entries: dict[str, Entry] = field(default_factory=dict)
    #: Jobs their plugin cannot read whose reconciler recorded their end.
    ended: list[Entry] = field(default_factory=list)
    invalid: int = 0
    #: (kind, stage label) -> jobs, for the invalid ones (the loop adds the rest).
    stages: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: (namespace, child name) -> node of each pod a placement covers (module contract).
    placed: dict[tuple[str, str], str] = field(default_factory=dict)


def _owned(
    by_index: Callable[[str, str], list[PodInfo]], kind: str, store_key: str
) -> Callable[[Sequence[str]], list[PodInfo]]:
    """The lookup of the pods job ``store_key`` of ``kind`` owns, and of the pods the batch Jobs
    named ``jobs`` (of the job's namespace) control, for when they are needed."""

    def pods(jobs: Sequence[str] = ()) -> list[PodInfo]:
        namespace, name = split_key(store_key)
        found = list(by_index(OWNER_INDEX, owner_key(kind, namespace, name)))
        for job in jobs:
            found += by_index(OWNER_INDEX, owner_key("Job", namespace, job))
        return found

    return pods


class Collector:
    """Reads the jobs of a pass (see the module contract)."""

    def __init__(
        self,
        *,
        plugins: Mapping[str, JobPlugin[Any]],
        jobs: Mapping[str, Informer[Obj]],
        pods: Informer[PodInfo],
        pins: Informer[Obj] | None,
        current: Callable[[str, Mapping[str, Any]], Mapping[str, Any]],
    ) -> None:
        self._plugins = dict(plugins)
        self._jobs = dict(jobs)
        self._pods = pods
        self._pins = pins
        self._current = current
        self.memo = ViewMemo()

    def collect(self, ctx: OperatorContext) -> Collected:
        out = Collected()
        by_index = self._pods.store.by_index
        deleting: dict[str, bool] = {}

        def deleting_on(node: str) -> bool:
            """Whether one of our pods bound to ``node`` is being deleted (once per pass)."""
            found = deleting.get(node)
            if found is None:
                pods = by_index(NODE_INDEX, node)
                found = deleting[node] = any(p.deletion_timestamp is not None for p in pods)
            return found

        self.memo.begin(ctx)
        for kind, plugin in self._plugins.items():
            informer = self._jobs[kind]
            resource = informer.resource
            path = tuple(plugin.scheduling_path)
            # Once per kind: a runtime-checkable Protocol's isinstance is slow (see docs).
            pins = isinstance(plugin, PinsInputs)
            for store_key, cached in informer.store.items():
                key = f"{kind}/{store_key}"  # job_key(kind, namespace, name)
                obj = self._current(key, cached)
                pinned = self._pinned(plugin, obj, split_key(store_key)[0]) if pins else None
                memo = self.memo.view(
                    (kind, store_key),
                    plugin,
                    obj,
                    _owned(by_index, kind, store_key),
                    ctx=ctx,
                    pinned=pinned,
                    deleting_on=deleting_on,
                )
                if memo.view is None:
                    continue  # another controller (e.g. MultiKueue) owns this job
                entry = Entry(kind, key, store_key, resource, path, obj, memo)
                if isinstance(memo.view, Invalid):
                    out.invalid += 1
                    out.stages[kind, stage_label(memo.block.get("stage"))] += 1
                    if memo.terminal is not None and terminal_pending(memo.block, memo.terminal):
                        out.ended.append(entry)
                    continue
                out.entries[key] = entry
                view = memo.view
                if memo.placed and view.current_size > 0 and not view.finished:
                    namespace = view.namespace
                    for child, node in memo.placed:
                        out.placed[namespace, child] = node
        self.memo.end()
        return out

    def _pinned(
        self, plugin: JobPlugin[Any], obj: Mapping[str, Any], namespace: str
    ) -> Mapping[str, Any] | None:
        if self._pins is None or not isinstance(plugin, PinsInputs):
            return None
        pin = self._pins.store.get(f"{namespace}/{plugin.pinned_name(obj)}")
        if pin is None:
            return None
        uid = (obj.get("metadata") or {}).get("uid")
        refs = (pin.get("metadata") or {}).get("ownerReferences") or ()
        owned = any(r.get("controller") and r.get("uid") == uid for r in refs)
        return pin if owned else None

    def live_pods(self, kind: str, key: str) -> int:
        """How many of job ``key``'s pods exist and are not being deleted."""
        pods = _owned(self._pods.store.by_index, kind, key)(())
        return sum(1 for p in pods if p.deletion_timestamp is None)
