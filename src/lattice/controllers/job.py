"""The generic job reconciler: one class serves every kind, given the kind's plugin.

Contract (level-triggered; the key is ``namespace/name``; each step's policy is in its module):
1. Read the job from the informer cache, never from an event. Gone: forget its expectations.
   Being deleted, or ``managedBy`` another controller: nothing to do.
2. Parse (``parse``): an :class:`InvalidJob` marks an unfinished job invalid
   (``conditions.mark_invalid``: ``Created=False``/``<Kind>FailedValidation`` naming each field
   and rule; not terminal: the scheduler holds it at stage ``Wrong`` meanwhile). The parse is
   a function of the object, so every reconcile judges it again, and a fixed spec is picked up.
   A :class:`JobNotReady` (a TrainJob's runtime is missing or
   unusable) leaves an unfinished job unstarted with ``Created=False`` and one Warning event per
   change; the next reconcile (runtime events re-enqueue the job) starts it once the input
   resolves.
3. A finished job (Succeeded or Failed condition) is cleaned up per ``cleanPodPolicy`` and
   deleted ``ttlSecondsAfterFinished`` after its completion (``finished``). A job the
   scheduler failed for its requeue limit (stage ``Failed``) gets its ``Failed`` condition
   (``conditions.mark_requeue_limit``) and, once that is written, loses every pod and Service
   at once, as a job past its deadline or backoffLimit does.
4. An invalid job's live pods are stopped once its status is written (its pods hold capacity
   until they are gone). One judged invalid after its parse (its children cannot be built, or
   the apiserver refused one as malformed) waits for a new spec: it is held while its
   ``metadata.generation`` is the one judged (remembered in memory; after a restart it is
   tried once more). A job the scheduler alone found Wrong (its own checks) is held too. A job
   whose expectations are unsatisfied waits for the cache.
5. Otherwise (``_active``): apply the kind's status rules to the live pods
   (``plugin.progress``) and the failure policy (``failure``: recreations, deadline,
   backoffLimit); finish the job, or recreate the pods the rules name and make the children match
   ``desired_children`` at ``currentSize`` (``rounds``), bound to the scheduler's placement
   (``placement``: pods named in it go to their node, the others wait; a live pod bound
   elsewhere is deleted and recreated). ``currentSize`` and the placement are the scheduler's
   decision; this reconciler never picks a size or a node. Conditions: ``conditions``.
6. Status is written once (``write``): the reconciler's own block only (the scheduler is the
   one writer of the scheduling block), without a resourceVersion precondition, only if it
   changed, plus once before deleting pods to recreate or stop them; a reconcile works from the
   object its last write returned until the cache shows that write (``jobstatus.ReadBack``);
   events and counters follow the write that carries them. Failed child
   creates or deletes raise :class:`ChildSyncError` after the write (a retry with backoff);
   creates the apiserver refused as malformed, and plugin errors, make the job invalid. Creates
   refused for a cause outside the manifest (403 admission or RBAC, 409 name clash) set
   ``Created=False``/``ChildCreateRefused`` with the apiserver's message
   (``conditions.child_refusals``) and requeue the key with a growing delay
   (:func:`refusal_retry`), never raise: the scheduler requeues the job when the refusal
   lasts (``lattice.frameworks.refusals``). A create that finds the namespace being deleted,
   or a status write that finds the job deleted (404), ends the reconcile with nothing more
   written or retried.

7. After the status write, a plugin that ``IgnoresFields`` gets one Warning Event
   ``IgnoredField`` per ignored field the job sets (naming its path and why), once per
   ``metadata.generation`` of an unfinished job (remembered in memory: after a restart they are
   emitted once more).

Conditions follow Kubeflow: ``Created``, ``Running``, ``Restarting``, ``Succeeded``,
``Failed`` (and ``Suspended``), reasons ``<Kind><Condition>``; messages come from the plugin's
``messages`` (``lattice.frameworks.base.Messages``). A plugin that ``RendersStatus`` (TrainJob)
stores its own status shape: the reconciler works on the Kubeflow reading of it
(``read_status``), adds the kind's observed fields (``observed_status``) and stores
``render_status`` of the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from lattice.clock import Clock
from lattice.controllers.children import ChildSync
from lattice.controllers.conditions import (
    child_refusals,
    mark_created,
    mark_finished,
    mark_invalid,
    mark_not_ready,
    mark_requeue_limit,
    mark_restarting,
    mark_running,
    preemption,
    suspension,
)
from lattice.controllers.failure import judge
from lattice.controllers.finished import Cleanup
from lattice.controllers.jobstatus import ReadBack, Step
from lattice.controllers.owned import OwnedChildren
from lattice.controllers.parse import (
    PLUGIN_BUGS,
    parse_job,
    pinned_input,
    rejected,
    unbuildable,
)
from lattice.controllers.placement import (
    bind_children,
    misplaced,
    placeable_names,
    placement_of,
)
from lattice.controllers.rounds import ChildRounds, desired_children
from lattice.controllers.watch import child_handler, job_handler, projected_child, raw_child
from lattice.controllers.write import JobGone, StatusWrite, counter_families
from lattice.frameworks.base import (
    IgnoresFields,
    InvalidJob,
    JobNotReady,
    JobPlugin,
    OperatorContext,
    RendersStatus,
    managed_elsewhere,
    messages_of,
)
from lattice.frameworks.refusals import invalid_of, refusal_of
from lattice.kube import KubeClient
from lattice.kube.resources import Resource
from lattice.primitives.objects import Obj
from lattice.primitives.times import format_time, normalize_time, parse_opt_time
from lattice.runtime.controller import Result
from lattice.runtime.events import EventRecorder, ObjectRef
from lattice.runtime.expectations import Expectations
from lattice.runtime.informer import Informer
from lattice.runtime.metrics import FRAMEWORKS, Metrics
from lattice.runtime.projections import ObjectInfo, PodInfo
from lattice.scheduler.core import Stage

__all__ = [
    "IGNORED_FIELD",
    "ChildSyncError",
    "ContextProvider",
    "JobReconciler",
    "kube_resource",
    "refusal_retry",
]

_EXPECTATION_RECHECK = 30.0
#: Reason of the Warning Event naming a field the job sets and Lattice ignores.
IGNORED_FIELD = "IgnoredField"
#: Bounds of the delay before a refused create is tried again.
_REFUSAL_RETRY = (1.0, 30.0)


def refusal_retry(elapsed: float) -> float:
    """Seconds before retrying creates refused for ``elapsed`` seconds so far: half of that,
    within ``_REFUSAL_RETRY`` (1 s at first, then a doubling, at most 30 s)."""
    low, high = _REFUSAL_RETRY
    return min(high, max(low, elapsed / 2))


class ChildSyncError(Exception):
    """Some child creates or deletes of a reconcile failed; the harness retries with backoff."""

    def __init__(self, errors: list[str]) -> None:
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        super().__init__("; ".join(errors[:3]) + more)
        self.errors = list(errors)


class ContextProvider(Protocol):
    def current(self) -> OperatorContext: ...


def kube_resource(plugin: JobPlugin[Any]) -> Resource:
    """The REST descriptor of the plugin's custom resource."""
    r = plugin.resource
    return Resource(r.group, r.version, r.plural, r.kind, r.namespaced)


class JobReconciler:
    """Reconciles the jobs of one kind."""

    def __init__(
        self,
        *,
        plugin: JobPlugin[Any],
        client: KubeClient,
        clock: Clock,
        jobs: Informer[Obj],
        pods: Informer[PodInfo],
        services: Informer[ObjectInfo],
        context: ContextProvider,
        expectations: Expectations,
        recorder: EventRecorder,
        metrics: Metrics,
        others: Mapping[str, tuple[Resource, Informer[Obj]]] | None = None,
    ) -> None:
        self.plugin = plugin
        self.kind = plugin.resource.kind
        self._read_back = ReadBack(plugin)
        self._clock = clock
        self._jobs = jobs
        self._context = context
        self._exp = expectations
        self._metrics = metrics
        self._framework = FRAMEWORKS.get(self.kind, self.kind.lower())
        self._words = messages_of(plugin)
        #: key -> (uid, generation) of each job last judged invalid after its parse.
        self._judged: dict[str, tuple[str, object]] = {}
        #: key -> (uid, generation) of each job whose ignored fields were last announced.
        self._warned: dict[str, tuple[str, object]] = {}
        self._recorder = recorder
        self._ignores = isinstance(plugin, IgnoresFields)  # once: a Protocol check is slow
        res = kube_resource(plugin)
        sync = ChildSync(client=client, expectations=expectations, recorder=recorder)
        self._owned = OwnedChildren(
            kind=self.kind, pods=pods, services=services, others=others or {}
        )
        self._cleanup = Cleanup(owned=self._owned, sync=sync, client=client, resource=res)
        self._rounds = ChildRounds(owned=self._owned, sync=sync, client=client)
        families = counter_families(metrics, self._framework, plugin)
        self._status = StatusWrite(
            plugin=plugin,
            resource=res,
            client=client,
            recorder=recorder,
            families=families,
            read_back=self._read_back,
        )

    def watch(self, enqueue: Callable[[str], None]) -> None:
        """Register the informer handlers that enqueue this kind's job keys (``watch``)."""
        owned, kind, exp = self._owned, self.kind, self._exp
        self._jobs.add_handler(
            job_handler(plugin=self.plugin, on_deleted=self._deleted, enqueue=enqueue)
        )
        for what, informer in (("pods", owned.pod_informer), ("services", owned.service_informer)):
            informer.add_handler(
                child_handler(
                    kind=kind, what=what, read=projected_child, expectations=exp, enqueue=enqueue
                )
            )
        for child_kind, (_, raw) in owned.other_informers.items():
            raw.add_handler(
                child_handler(
                    kind=kind, what=child_kind, read=raw_child, expectations=exp, enqueue=enqueue
                )
            )

    def _deleted(self, ns: str, name: str) -> None:
        self._exp.delete(self._owned.exp_key(ns, name, "pods"))
        self._exp.delete(self._owned.exp_key(ns, name, "services"))
        self._metrics.jobs_deleted.labels(ns, self._framework).inc()

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result:
        try:
            return await self._reconcile(key)
        except JobGone:
            return Result()  # deleted since the cache read it: its delete event forgets it

    async def _reconcile(self, key: str) -> Result:
        ns, _, name = key.partition("/")
        obj = self._jobs.store.get(key)
        if obj is None:
            self._read_back.forget(key)
            self._judged.pop(key, None)
            self._warned.pop(key, None)
            for what in self._owned.what_kinds:
                self._exp.delete(self._owned.exp_key(ns, name, what))
            return Result()
        obj = self._read_back.current(key, obj)
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp") or managed_elsewhere(obj):
            return Result()
        ref = ObjectRef(
            self.plugin.resource.api_version, self.kind, ns, name, str(meta.get("uid", ""))
        )
        now, ctx = normalize_time(self._clock.now()), self._context.current()
        step = Step(obj, self.plugin, now, ref)
        pinned = pinned_input(self.plugin, obj, lambda: self._owned.others(ref))
        try:
            job = parse_job(self.plugin, obj, ctx, pinned)
        except InvalidJob as exc:
            if step.finished:
                return Result()
            return await self._wrong(step, exc, judged=False)
        except JobNotReady as exc:
            if not step.finished:
                mark_not_ready(step, exc)
                await self._status.write(step)
            return Result()
        try:
            if step.finished:
                requeue = await self._cleanup.finished(step, self.plugin.run_policy(job))
            elif (held := self._held(step, meta)) is not None:
                return held
            elif step.sched.get("stage") == Stage.FAILED:
                # The scheduler's requeue limit: failed, and stopped as the run policy's limits
                # stop a job (the scheduler released its capacity; its pods never all started).
                mark_requeue_limit(step, self._words)
                await self._status.write(step)
                live = [p for p in self._owned.pods(ref) if p.deletion_timestamp is None]
                await self._cleanup.stop_all(step, live)
                requeue = None
            else:
                requeue = await self._active(step, job, ctx, pinned)
        except PLUGIN_BUGS as exc:
            return await self._wrong(Step(obj, self.plugin, now, ref), unbuildable(exc))
        if step.gone:
            return Result()  # the namespace is being deleted, and the job with it
        if step.rejected:
            return await self._wrong(step, rejected(step.rejected))
        await self._status.write(step)
        if not step.finished:
            self._announce_ignored(key, step.ref, meta.get("generation"), job)
        if step.errors:
            # A failed create leaves no watch event behind and a failed delete changes nothing:
            # without this, a job whose pod create failed once waits for an unrelated event.
            raise ChildSyncError(step.errors)
        if step.refused and (refusal := refusal_of(step.exec)) is not None:
            retry = refusal_retry((now - refusal.since).total_seconds())
            requeue = retry if requeue is None else min(requeue, retry)
        return Result(requeue_after=requeue) if requeue is not None else Result()

    def _announce_ignored(self, key: str, ref: ObjectRef, generation: object, job: Any) -> None:
        """The ``IgnoredField`` Warning Events, once per generation (module contract, 7)."""
        if not self._ignores or not isinstance(self.plugin, IgnoresFields):
            return
        if self._warned.get(key) == (ref.uid, generation):
            return
        self._warned[key] = (ref.uid, generation)
        for path, why in self.plugin.ignored_fields(job):
            self._recorder.record(ref, type="Warning", reason=IGNORED_FIELD, note=f"{path}: {why}")

    def _held(self, step: Step, meta: Mapping[str, Any]) -> Result | None:
        """Why an unfinished job is not acted on now (None: it is)."""
        ref = step.ref
        invalid = invalid_of(step.exec) is not None
        if step.sched.get("stage") == "Wrong" and not invalid:
            return Result()  # the scheduler's own checks found it Wrong
        judged = self._judged.get(f"{ref.namespace}/{ref.name}")
        if invalid and judged == (ref.uid, meta.get("generation")):
            return Result()  # the spec judged invalid after its parse has not changed
        keys = (self._owned.exp_key(ref.namespace, ref.name, k) for k in self._owned.what_kinds)
        if not all(self._exp.satisfied(k) for k in keys):
            return Result(requeue_after=_EXPECTATION_RECHECK)
        return None

    async def _wrong(self, step: Step, exc: InvalidJob, *, judged: bool = True) -> Result:
        """Mark the job invalid and stop its pods; ``judged``: found after its parse (held
        until its generation changes)."""
        ref = step.ref
        if judged:
            generation = (step.obj.get("metadata") or {}).get("generation")
            self._judged[f"{ref.namespace}/{ref.name}"] = (ref.uid, generation)
        mark_invalid(step, self.kind, exc)
        await self._status.write(step)
        # Its pods are stopped: they hold capacity the scheduler counts until they are gone.
        live = [p for p in self._owned.pods(step.ref) if p.deletion_timestamp is None]
        if live:
            await self._cleanup.stop_all(step, live)
            if step.errors:
                raise ChildSyncError(step.errors)
        return Result()

    async def _active(
        self, step: Step, job: Any, ctx: OperatorContext, pinned: Obj | None
    ) -> float | None:
        plugin, words, ref = self.plugin, self._words, step.ref
        raw_size = step.sched.get("currentSize")
        size = raw_size if isinstance(raw_size, int) and raw_size > 0 else 0
        pods = self._owned.pods(ref)
        live = [p for p in pods if p.deletion_timestamp is None]
        others = self._owned.others(ref)
        progress = plugin.progress(job, size=size, pods=live, others=others)
        demand = plugin.demand(job, ctx)
        mark_created(step, words)
        # Our own record that this job got pods (written with them): a job the scheduler moves
        # to Waiting while it still shows one was started, and so preempted, whether or not its
        # Running condition made it to the apiserver first.
        had_pods = step.exec.get("startTime") is not None
        if size == 0:
            # A job holding no pods (waiting, suspended, preempted) has not started: its deadline
            # runs again from zero once it gets pods back, as Kubeflow resets startTime on resume.
            step.exec.pop("startTime", None)
        # A kind that stores no startTime (TrainJob) counts from the scheduler's admission.
        started = parse_opt_time(step.exec.get("startTime"))
        admitted = parse_opt_time(step.sched.get("admittedTime")) if size > 0 else None
        start = started or admitted
        verdict = judge(
            step,
            progress=progress,
            policy=plugin.run_policy(job),
            words=words,
            live=live,
            start=start,
        )
        if isinstance(plugin, RendersStatus):
            step.exec.update(
                plugin.observed_status(job, size=size, pods=live, suspended=demand.suspended)
            )
        if verdict.failed is not None or progress.succeeded:
            mark_finished(step, words, failed=verdict.failed, reason=verdict.reason)
            step.exec["replicaStatuses"] = verdict.statuses
            step.exec["completionTime"] = format_time(step.now)
            if verdict.stop:
                await self._status.write(step)
                await self._cleanup.stop_all(step, live)
            return None
        suspension(step, words, suspended=demand.suspended)
        step.exec["replicaStatuses"] = verdict.statuses
        if verdict.recreated:
            mark_restarting(step, words, verdict.recreated)
            await self._status.write(step)
            await self._cleanup.delete_pods(step, [p.name for p in verdict.recreated])
        placement = placement_of(step.sched)
        recreated = {p.name for p in verdict.recreated}
        if moved := [n for n in misplaced(live, placement) if n not in recreated]:
            await self._cleanup.delete_pods(step, moved)
        children = bind_children(
            desired_children(
                plugin, job, step=step, size=size, live=live, others=others, ctx=ctx, pinned=pinned
            ),
            placement,
            existing={*(p.name for p in pods), *(k.partition("/")[2] for k in others)},
            placeable=placeable_names(demand),
        )
        keep = frozenset(progress.recreate)
        await self._rounds.apply(step, children, pods=pods, others=others, keep=keep)
        child_refusals(step, words, step.refused)
        if size > 0 and started is None:
            step.exec["startTime"] = format_time(step.now)
        if progress.running and not progress.recreate and not demand.suspended:
            mark_running(step, words)
        preemption(
            step,
            kind=self.kind,
            shows=plugin.preempted_condition,
            size=size,
            suspended=demand.suspended,
            had_pods=had_pods,
        )
        return verdict.requeue
