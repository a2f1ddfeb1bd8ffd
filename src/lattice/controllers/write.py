"""The one status write of a reconcile, and the events and counters that follow it.

Contract:
- ``StatusWrite.write`` writes the reconciler's own block only, at the plugin's ``exec_path``
  (a plugin that ``RendersStatus`` stores ``render_status`` of the working block; the scheduler
  is the one writer of ``scheduling_path``, and writes a finished job's stage from the
  conditions written here), through the status subresource with a merge patch without a
  resourceVersion precondition, only if it changed (``lattice.runtime.status``). The returned
  object is handed to ``read_back`` (``jobstatus.ReadBack``), so that the next reconcile works
  from it until the cache shows the write.
- It is called once at the end of a reconcile, and before deleting pods (to recreate them, or to
  stop a job past its deadline or backoffLimit), so what those deletes count is persisted first.
- A write that finds the job gone (404: deleted since the cache read it) raises
  :class:`JobGone`; nothing is recorded or counted, and the reconcile ends (the delete event
  that follows forgets the job).
- Only after a write that happened are the step's events recorded and its counters counted;
  both lists are cleared either way. Counted: ``training_operator_jobs_{created,successful,
  failed,restarted}_total{job_namespace,framework}`` for every kind, and the upstream families
  the plugin names in ``counted_by`` (``CountsJobs``): ``mpi-operator`` is
  ``mpi_operator_jobs_{created,successful,failed}_total``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lattice.controllers.conditions import CREATED, FAILED, RESTARTED, SUCCESSFUL
from lattice.controllers.jobstatus import ReadBack, Step, get_path, status_after
from lattice.frameworks.base import CountsJobs, JobPlugin, RendersStatus
from lattice.kube import KubeClient, NotFound
from lattice.kube.resources import Resource
from lattice.runtime.events import EventRecorder
from lattice.runtime.metrics import Metrics
from lattice.runtime.status import StatusWriter

__all__ = ["JobGone", "StatusWrite", "counter_families"]

Count = Callable[[str], None]


class JobGone(Exception):
    """The job was deleted between the cache read and its status write."""


def counter_families(
    metrics: Metrics, framework: str, plugin: JobPlugin[Any]
) -> dict[str, list[Count]]:
    """Per counted event, the increments (see the module docstring)."""

    def labelled(counter: Any) -> Count:
        return lambda ns: counter.labels(ns, framework).inc()

    def plain(counter: Any) -> Count:
        return lambda ns: counter.inc()

    upstream: dict[str, dict[str, Any]] = {
        "mpi-operator": {
            CREATED: metrics.mpi_jobs_created,
            SUCCESSFUL: metrics.mpi_jobs_successful,
            FAILED: metrics.mpi_jobs_failed,
        },
    }
    families: dict[str, list[Count]] = {
        CREATED: [labelled(metrics.jobs_created)],
        SUCCESSFUL: [labelled(metrics.jobs_successful)],
        FAILED: [labelled(metrics.jobs_failed)],
        RESTARTED: [labelled(metrics.jobs_restarted)],
    }
    for family in plugin.counted_by if isinstance(plugin, CountsJobs) else ():
        if family not in upstream:
            known = ", ".join(upstream)
            raise ValueError(f"counted_by: unknown metric family {family!r} (known: {known})")
        for what, counter in upstream[family].items():
            families[what].append(plain(counter))
    return families


class StatusWrite:
    """Writes a step's status for one kind's plugin."""

    def __init__(
        self,
        *,
        plugin: JobPlugin[Any],
        resource: Resource,
        client: KubeClient,
        recorder: EventRecorder,
        families: dict[str, list[Count]],
        read_back: ReadBack,
    ) -> None:
        self._plugin = plugin
        self._read_back = read_back
        self._res = resource
        self._writer = StatusWriter(client)
        self._recorder = recorder
        self._families = families

    async def write(self, step: Step) -> None:
        plugin, ref, obj = self._plugin, step.ref, step.obj
        old = obj.get("status") or {}
        meta = obj.get("metadata") or {}
        exec_block = step.exec
        if isinstance(plugin, RendersStatus):
            generation = meta.get("generation")
            exec_block = plugin.render_status(
                step.exec,
                stored=get_path(obj, plugin.exec_path),
                generation=generation if isinstance(generation, int) else None,
                now=step.now,
            )
        try:
            written = await self._writer.write(
                self._res,
                namespace=ref.namespace,
                name=ref.name,
                resource_version=None,
                old=old,
                new=status_after(obj, plugin, exec_block),
            )
        except NotFound as exc:
            step.events.clear()
            step.counters.clear()
            raise JobGone(f"{ref.namespace}/{ref.name}") from exc
        if written is not None:
            step.obj = written
            self._read_back.wrote(f"{ref.namespace}/{ref.name}", written)
            for type_, reason, note in step.events:
                self._recorder.record(ref, type=type_, reason=reason, note=note)
            for what in step.counters:
                for family in self._families.get(what, ()):
                    family(ref.namespace)
        step.events.clear()
        step.counters.clear()
