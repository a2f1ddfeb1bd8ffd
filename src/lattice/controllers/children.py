"""Create and delete a job's children idempotently, guarded by expectations.

Contract:
- ``ChildSync.sync`` makes the children of one resource (Pods, or Services, ...) match the
  desired manifests by **name**: it creates each desired name that does not exist, and deletes
  each owned, non-deleting child whose name is not desired, highest replica index first.
  An existing child is never updated or restarted (Lattice never restarts a running replica to
  resize: growing creates the missing indices, shrinking deletes the top ones).
- Expectations are recorded *before* each call and lowered when the call fails, so a stale cache
  can neither duplicate nor lose a child (``lattice.runtime.expectations``).
- ``AlreadyExists`` on create: success when the object is ours (a cache lag). Otherwise the
  name is taken (a clash): a Warning event ``ErrResourceExists`` on our job (as mpi-operator
  does), a Warning event ``ChildNameClash`` on the object's controller when it has one (the
  other job), and a *refusal*; the object is never adopted. ``NotFound`` on delete is success.
- What a refused create becomes (one structured log line each, never a traceback):
  ``refused`` (403 from admission or RBAC, 409 name clash: the cause is outside the job and may
  go away; the reconciler shows it as ``Created=False``/``ChildCreateRefused`` and the scheduler
  requeues the job when it lasts), ``rejected`` (400/422: the manifest is invalid, the job is
  Wrong), ``gone`` (403 "namespace is being terminated", 404 namespace not found: the job goes
  with its namespace; nothing is retried). Other failures (5xx, timeouts) are ``errors``, never
  raised; the job reconciler raises after writing the status, so the key is retried with
  backoff (a failed create leaves no watch event that would re-enqueue the job).
- Events (``SuccessfulCreate<Kind>``, ``FailedCreate<Kind>``, ``SuccessfulDelete<Kind>``,
  ``FailedDelete<Kind>``) are recorded after each call, never before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from lattice.frameworks.refusals import NAME_CLASH
from lattice.kube import AlreadyExists, ApiError, KubeClient, NotFound
from lattice.kube.resources import Resource
from lattice.primitives.objects import Obj
from lattice.runtime.events import EventRecorder, ObjectRef
from lattice.runtime.expectations import Expectations

__all__ = ["ChildSync", "Existing", "SyncOutcome", "namespace_gone"]

log = structlog.get_logger(__name__)
_PARALLEL = 32
#: The apiserver's words for a create in a namespace being deleted (NamespaceLifecycle).
_TERMINATING = "because it is being terminated"


@dataclass(frozen=True, slots=True)
class Existing:
    """An observed child: ``owned`` when its controller ownerReference has the job's UID."""

    name: str
    owned: bool
    deleting: bool
    index: int


@dataclass(slots=True)
class SyncOutcome:
    """What one sync did."""

    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: Creates the apiserver refused as malformed (400/422): retrying the same manifest cannot
    #: help, so the job is marked Wrong with the server's message instead.
    rejected: list[str] = field(default_factory=list)
    #: Creates refused for a cause outside the manifest (403, 409 clash), with the apiserver's
    #: message: the job shows ``ChildCreateRefused`` and is retried.
    refused: list[str] = field(default_factory=list)
    #: A create found the namespace being deleted or gone: nothing is retried.
    gone: bool = False


def namespace_gone(exc: BaseException) -> bool:
    """Whether a failed create says the namespace is being deleted, or does not exist."""
    if not isinstance(exc, ApiError):
        return False
    if exc.status == 403:
        return _TERMINATING in exc.message
    if exc.status == 404:
        details = exc.body.get("details")
        kind = details.get("kind") if isinstance(details, Mapping) else None
        return kind == "namespaces"
    return False


def _index_of(manifest: Obj) -> int:
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    raw = labels.get("training.kubeflow.org/replica-index", "")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildSync:
    """The create/delete half of a job reconcile, for one child resource."""

    client: KubeClient
    expectations: Expectations
    recorder: EventRecorder

    async def sync(
        self,
        *,
        job: ObjectRef,
        exp_key: str,
        res: Resource,
        desired: Sequence[Obj],
        existing: Mapping[str, Existing],
        keep: frozenset[str] = frozenset(),
    ) -> SyncOutcome:
        """Create missing desired children; delete owned extras (except ``keep``)."""
        out = SyncOutcome()
        wanted = {m["metadata"]["name"]: m for m in desired}
        to_create = [m for n, m in wanted.items() if n not in existing]
        to_delete = sorted(
            (
                e
                for n, e in existing.items()
                if n not in wanted and n not in keep and e.owned and not e.deleting
            ),
            key=lambda e: (-e.index, e.name),
        )
        if to_create:
            self.expectations.expect_creations(exp_key, [m["metadata"]["name"] for m in to_create])
            await _bounded([self._create(job, exp_key, res, m, out) for m in to_create], _PARALLEL)
        if to_delete:
            self.expectations.expect_deletions(exp_key, [e.name for e in to_delete])
            await _bounded([self._delete(job, exp_key, res, e.name, out) for e in to_delete], 8)
        return out

    async def delete_all(
        self,
        *,
        job: ObjectRef,
        exp_key: str,
        res: Resource,
        names: Sequence[str],
    ) -> SyncOutcome:
        """Delete the named children (clean-up of a finished job)."""
        out = SyncOutcome()
        if names:
            self.expectations.expect_deletions(exp_key, names)
            await _bounded([self._delete(job, exp_key, res, n, out) for n in names], _PARALLEL)
        return out

    async def _create(
        self, job: ObjectRef, exp_key: str, res: Resource, manifest: Obj, out: SyncOutcome
    ) -> None:
        name = manifest["metadata"]["name"]
        try:
            await self.client.create(res, manifest, namespace=job.namespace)
        except AlreadyExists:
            self.expectations.creation_failed(exp_key, name)
            await self._taken(job, res, name, out)
            return
        except Exception as exc:
            self.expectations.creation_failed(exp_key, name)
            self._failed_create(job, res, name, exc, out)
            return
        out.created.append(name)
        self._record(job, verb="Create", res=res, note=f"Created {res.kind.lower()}: {name}")

    def _failed_create(
        self, job: ObjectRef, res: Resource, name: str, exc: Exception, out: SyncOutcome
    ) -> None:
        """Sort a failed create (see the module contract)."""
        if namespace_gone(exc):
            out.gone = True
            log.info("child.create_namespace_gone", child=f"{res.kind}/{name}", error=str(exc))
            return
        self._record(job, verb="Create", res=res, note=f"{name}: {exc}", failed=True)
        status = exc.status if isinstance(exc, ApiError) else None
        message = exc.message if isinstance(exc, ApiError) else str(exc)
        if status in (400, 422):
            out.rejected.append(f"{res.kind} {name}: {message}")
        elif status in (403, 409):
            out.refused.append(f"{res.kind} {name}: {message}")
        else:
            out.errors.append(f"create {res.kind} {name}: {exc}")
            return
        log.warning(
            "child.create_refused", child=f"{res.kind}/{name}", status=status, message=message
        )

    async def _taken(self, job: ObjectRef, res: Resource, name: str, out: SyncOutcome) -> None:
        """A create met an existing object: ours (a cache lag), or a clash (never adopted)."""
        try:
            current = await self.client.get(res, name, namespace=job.namespace)
        except Exception as exc:
            # Reported like a failed create (the reconcile is retried), not raised: raising
            # would leave this sync's other creates running after the reconcile returned.
            out.errors.append(f"get existing {res.kind} {name}: {exc}")
            return
        refs = (current.get("metadata") or {}).get("ownerReferences") or ()
        if any(r.get("uid") == job.uid and r.get("controller") for r in refs):
            return
        owner = next((r for r in refs if isinstance(r, Mapping) and r.get("controller")), None)
        if owner is None:
            held_by = "has no controller"
        else:
            held_by = f"is controlled by {owner.get('kind')} {job.namespace}/{owner.get('name')}"
        message = f"{res.kind} {name!r} already exists and {held_by}; it is not adopted"
        self.recorder.record(job, type="Warning", reason="ErrResourceExists", note=message)
        if owner is not None:
            other = ObjectRef(
                str(owner.get("apiVersion") or ""),
                str(owner.get("kind") or ""),
                job.namespace,
                str(owner.get("name") or ""),
                str(owner.get("uid") or ""),
            )
            note = f"{job.kind} {job.namespace}/{job.name} also wants {res.kind} {name!r}"
            self.recorder.record(other, type="Warning", reason=NAME_CLASH, note=note)
        out.refused.append(f"{res.kind} {name}: {message}")
        log.warning("child.create_refused", child=f"{res.kind}/{name}", status=409, message=message)

    async def _delete(
        self, job: ObjectRef, exp_key: str, res: Resource, name: str, out: SyncOutcome
    ) -> None:
        try:
            await self.client.delete(res, name, namespace=job.namespace)
        except NotFound:
            self.expectations.deletion_failed(exp_key, name)
            return
        except Exception as exc:
            self.expectations.deletion_failed(exp_key, name)
            self._record(job, verb="Delete", res=res, note=f"{name}: {exc}", failed=True)
            out.errors.append(f"delete {res.kind} {name}: {exc}")
            return
        out.deleted.append(name)
        self._record(job, verb="Delete", res=res, note=f"Deleted {res.kind.lower()}: {name}")

    def _record(
        self, job: ObjectRef, *, verb: str, res: Resource, note: str, failed: bool = False
    ) -> None:
        """The ``Successful<Verb><Kind>`` (Normal) or ``Failed<Verb><Kind>`` (Warning) Event."""
        if failed:
            self.recorder.record(job, type="Warning", reason=f"Failed{verb}{res.kind}", note=note)
        else:
            self.recorder.record(
                job, type="Normal", reason=f"Successful{verb}{res.kind}", note=note
            )


async def _bounded(coros: Sequence[Any], limit: int) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(coro: Any) -> None:
        async with sem:
            await coro

    await asyncio.gather(*(one(c) for c in coros))


def index_of(manifest: Obj) -> int:
    """The replica index label of a manifest (-1 when absent)."""
    return _index_of(manifest)
