"""The informer handlers of a job reconciler: which events enqueue which job key.

Contract (handlers compute a key and enqueue it; they never reconcile, and they read the event
only to find the key and to feed the expectations):

- A job event enqueues the job, unless old and new have the same ``reconcile_signature`` (only
  the scheduler's bookkeeping changed). A deleted job has its pods and services expectations
  dropped and ``jobs_deleted`` counted (``on_deleted``).
- A child event (pod, Service, ConfigMap, Secret, batch Job) whose controller ownerReference is
  of the reconciler's kind records what the expectations wait for (an ``ADDED`` is an observed
  creation; a ``DELETED``, or a deletion timestamp newly set, an observed deletion) and enqueues
  the owner. Every child kind goes through the one handler, ``child_handler``, given how to read
  that kind's cached value (``projected_child`` or ``raw_child``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lattice.controllers.jobstatus import controller_ref, reconcile_signature
from lattice.frameworks.base import JobPlugin
from lattice.primitives.objects import Obj
from lattice.runtime.expectations import Expectations
from lattice.runtime.projections import ObjectInfo, PodInfo

__all__ = ["ChildRef", "child_handler", "job_handler", "projected_child", "raw_child"]

T = TypeVar("T")
Handler = Callable[[str, T | None, T | None], None]


@dataclass(frozen=True, slots=True)
class ChildRef:
    """What a handler reads of a child: where it is, its controller owner, whether deleting."""

    namespace: str
    name: str
    owner_kind: str | None
    owner_name: str
    deleting: bool


def projected_child(obj: PodInfo | ObjectInfo) -> ChildRef:
    """A cached pod or Service projection."""
    owner = obj.owner
    return ChildRef(
        namespace=obj.namespace,
        name=obj.name,
        owner_kind=owner.kind if owner is not None else None,
        owner_name=owner.name if owner is not None else "",
        deleting=bool(obj.deletion_timestamp),
    )


def raw_child(obj: Obj) -> ChildRef:
    """A cached raw object (ConfigMap, Secret, batch Job)."""
    meta = obj.get("metadata") or {}
    owner = controller_ref(meta)
    return ChildRef(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name")),
        owner_kind=owner.get("kind") if owner is not None else None,
        owner_name=str(owner.get("name")) if owner is not None else "",
        deleting=bool(meta.get("deletionTimestamp")),
    )


def _latest(old: T | None, new: T | None) -> T | None:
    """The object an event is about: the new version, or the old one of a deletion."""
    return new if new is not None else old


def child_handler(
    *,
    kind: str,
    what: str,
    read: Callable[[T], ChildRef],
    expectations: Expectations,
    enqueue: Callable[[str], None],
) -> Handler[T]:
    """The handler of one child kind (``what`` names its expectations, e.g. ``"pods"``)."""

    def on_child(event: str, old: T | None, new: T | None) -> None:
        if (obj := _latest(old, new)) is None:
            return
        child = read(obj)
        if child.owner_kind != kind:
            return
        key = f"{kind}/{child.namespace}/{child.owner_name}/{what}"
        if event == "ADDED":
            expectations.observed_creation(key, child.name)
        old_deleting = old is not None and read(old).deleting
        new_deleting = new is not None and read(new).deleting
        if event == "DELETED" or (new_deleting and not old_deleting):
            expectations.observed_deletion(key, child.name)
        enqueue(f"{child.namespace}/{child.owner_name}")

    return on_child


def job_handler(
    *,
    plugin: JobPlugin[Any],
    on_deleted: Callable[[str, str], None],
    enqueue: Callable[[str], None],
) -> Handler[Obj]:
    """The handler of the jobs themselves."""

    def on_job(event: str, old: Obj | None, new: Obj | None) -> None:
        if (obj := _latest(old, new)) is None:
            return
        meta = obj.get("metadata") or {}
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if event == "DELETED":
            on_deleted(ns, name)
        elif (
            old is not None
            and new is not None
            and reconcile_signature(old, plugin) == reconcile_signature(new, plugin)
        ):
            return  # only the scheduler's bookkeeping changed (queue position, times, ...)
        enqueue(f"{ns}/{name}")

    return on_job
