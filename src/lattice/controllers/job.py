"""The generic job reconciler: one class serves every kind, given the kind's plugin.

Contract (level-triggered; the key is ``namespace/name``):
1. Read the job from the informer cache, never from an event. Gone: forget its expectations.
2. ``plugin.parse``: an :class:`InvalidJob` sets a ``Failed`` condition
   ``<Kind>FailedValidation`` (the problems in the message), from which the scheduler writes
   stage ``Wrong`` (reason ``InvalidSpec``); the scheduler never schedules the job. A
   :class:`JobNotReady` (a TrainJob's runtime is missing or unusable) leaves the job unstarted
   with ``Created=False`` (the exception's reason and message) and one Warning event per
   change; the scheduler skips it too, and the next reconcile (runtime events re-enqueue the
   job) starts it once the input resolves. A plugin
   that ``PinsInputs`` is parsed from its pin ConfigMap once that exists: the pin is created
   with the job's first pods and kept as observed, so editing the input never changes it.
3. A finished job (Succeeded or Failed condition; the scheduler shows it ``Completed``) has its
   pods cleaned per ``cleanPodPolicy`` (All: every pod; Running: pods still Pending or Running;
   None: none; Services per the kind's ``service_cleanup``), and is deleted
   ``ttlSecondsAfterFinished`` after its completion time. A job failed for its deadline or
   backoffLimit has every pod and Service deleted at once, whatever the policy (as
   training-operator stops such a job).
4. Otherwise, once the job's expectations are satisfied: apply the kind's status rules to the
   live pods (``plugin.progress``); fail the job for ``activeDeadlineSeconds`` or
   ``backoffLimit``; recreate the pods the rules name; and make the children match
   ``plugin.children(job, size=currentSize)``, refined by ``observed_children`` when the plugin
   has that capability (the MPI launcher gate, the Running-workers script): missing indices are
   created, the highest extra indices deleted, nothing else restarted. ``currentSize`` is the
   scheduler's decision; this reconciler never picks a size. A plugin that ``StagesChildren``
   (TrainJob initializers) has the result staged: staged pods first, the sized ones once they
   all Succeeded, Succeeded staged pods kept at size 0.
   - ``activeDeadlineSeconds`` counts from ``startTime``, which is set when the job gets pods and
     cleared while it holds none (suspended, waiting or preempted), so the deadline restarts on
     resume as Kubeflow's does.
   - ``backoffLimit`` (kinds whose ``run_policy`` has one): the job fails when the failures
     charged to it exceed the limit. Charged: every pod failure (one per failed pod, the
     recreated ones included) plus the container restarts of the live pods (OnFailure/Always).
     Never charged: pods Kubernetes evicted or preempted, and pods the scheduler deleted. The
     failures are persisted in ``replicaStatuses[<type>].failed``, which for these kinds counts
     like a batch Job's ``status.failed`` (see ``jobstatus.charged_statuses``), and written
     *before* the failed pods are deleted for recreation. Upstream counts container restarts
     and a new failure once its in-memory requeue count reaches the limit; a persisted count
     survives operator restarts and makes ``backoffLimit: N`` mean N recreations, as for a
     batch Job.
5. Status is written through the status subresource with a merge patch of the reconciler's
   own block only (``exec_path``; the scheduler is the one writer of ``scheduling_path``, and
   writes a finished job's stage from the conditions written here), without a resourceVersion
   precondition, only if it changed (once per reconcile, plus once before a recreation). A
   reconcile works from the object its last write returned until the cache shows that write
   (``jobstatus.ReadBack``). Events and metrics about the status are recorded after the write
   that carries it.

Conditions follow Kubeflow: ``Created``, ``Running``, ``Restarting``, ``Succeeded``,
``Failed`` (and ``Suspended``), reasons ``<Kind><Condition>``; messages come from the plugin's
``messages`` (``lattice.frameworks.base.Messages``). A job the scheduler stops shows
``Suspended=True`` with reason ``Preempted`` (or ``Running=False``/``<Kind>Waiting``, per
``preempted_condition``); the user's ``suspend`` gives ``<Kind>Suspended`` and ``Running=False``.
A plugin that ``RendersStatus`` (TrainJob) stores its own status shape: the reconciler works on
the Kubeflow reading of it (``read_status``), adds the kind's observed fields
(``observed_status``, e.g. ``jobsStatus``) and stores ``render_status`` of the result.
Counted: ``training_operator_jobs_{created,successful,failed,restarted,deleted}_total`` with the
kind's framework label, and ``mpi_operator_jobs_{created,successful,failed}_total`` for MPIJob.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Coroutine, Mapping
from datetime import timedelta
from typing import Any, Protocol

import structlog

from lattice.api.base import normalize_time
from lattice.clock import Clock
from lattice.controllers.children import ChildSync, Existing, SyncOutcome
from lattice.controllers.generated import fill_generated
from lattice.controllers.jobstatus import (
    PREEMPTED,
    ReadBack,
    Step,
    charged_statuses,
    condition_reason,
    condition_true,
    controller_ref,
    fmt,
    get_path,
    parse_opt_time,
    put_condition,
    reconcile_signature,
    replica_statuses,
    status_after,
    with_nulls,
)
from lattice.frameworks.base import (
    Children,
    InvalidJob,
    JobNotReady,
    JobPlugin,
    ObservesChildren,
    OperatorContext,
    PinsInputs,
    Problem,
    RendersStatus,
    StagesChildren,
    managed_elsewhere,
    messages_of,
)
from lattice.kube import KubeClient, NotFound
from lattice.kube.resources import PODS, SERVICES, Resource
from lattice.runtime.controller import Result, TerminalError
from lattice.runtime.events import EventRecorder, ObjectRef
from lattice.runtime.expectations import Expectations
from lattice.runtime.informer import Informer
from lattice.runtime.metrics import FRAMEWORKS, Metrics
from lattice.runtime.projections import OWNER_INDEX, ObjectInfo, PodInfo, owner_key
from lattice.runtime.status import StatusWriter

__all__ = ["ChildSyncError", "ContextProvider", "JobReconciler", "kube_resource"]

log = structlog.get_logger(__name__)
Obj = dict[str, Any]
_EXPECTATION_RECHECK = 30.0

#: What a reconcile counts (``Step.counters``), mapped to metric families by ``_counter_families``.
CREATED, SUCCESSFUL, FAILED, RESTARTED = "created", "successful", "failed", "restarted"


def _counter_families(metrics: Metrics, framework: str) -> dict[str, list[Callable[[str], None]]]:
    """Per counted event, the increments: ``training_operator_jobs_*_total{job_namespace,
    framework}`` for every kind, and mpi-operator's unlabelled ``mpi_operator_jobs_*_total`` for
    MPIJob (framework ``mpi``), as each upstream operator counts its own jobs."""

    def labelled(counter: Any) -> Callable[[str], None]:
        return lambda ns: counter.labels(ns, framework).inc()

    def plain(counter: Any) -> Callable[[str], None]:
        return lambda ns: counter.inc()

    families: dict[str, list[Callable[[str], None]]] = {
        CREATED: [labelled(metrics.jobs_created)],
        SUCCESSFUL: [labelled(metrics.jobs_successful)],
        FAILED: [labelled(metrics.jobs_failed)],
        RESTARTED: [labelled(metrics.jobs_restarted)],
    }
    if framework == FRAMEWORKS["MPIJob"]:
        families[CREATED].append(plain(metrics.mpi_jobs_created))
        families[SUCCESSFUL].append(plain(metrics.mpi_jobs_successful))
        families[FAILED].append(plain(metrics.mpi_jobs_failed))
    return families


_PLUGIN_BUGS = (AttributeError, TypeError, KeyError, ValueError, IndexError)


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
        self._read_back = ReadBack(plugin)
        #: Other child kinds (``"ConfigMap"``, ``"Secret"``, ``"Job"``): REST descriptor + cache.
        self._others = dict(others or {})
        self.kind = plugin.resource.kind
        self._res = kube_resource(plugin)
        self._client = client
        self._clock = clock
        self._jobs = jobs
        self._pods = pods
        self._services = services
        self._context = context
        self._exp = expectations
        self._recorder = recorder
        self._metrics = metrics
        self._writer = StatusWriter(client)
        self._children = ChildSync(client=client, expectations=expectations, recorder=recorder)
        self._framework = FRAMEWORKS.get(self.kind, self.kind.lower())
        self._words = messages_of(plugin)
        self._families = _counter_families(metrics, self._framework)

    # -- wiring ---------------------------------------------------------------------------------

    def watch(self, enqueue: Callable[[str], None]) -> None:
        """Register the informer handlers that enqueue this kind's job keys."""

        def on_job(event: str, old: Obj | None, new: Obj | None) -> None:
            obj = new if new is not None else old
            if obj is None:
                return
            meta = obj.get("metadata") or {}
            ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
            if event == "DELETED":
                self._exp.delete(self._exp_key(ns, name, "pods"))
                self._exp.delete(self._exp_key(ns, name, "services"))
                self._metrics.jobs_deleted.labels(ns, self._framework).inc()
            elif (
                old is not None
                and new is not None
                and reconcile_signature(old, self.plugin) == reconcile_signature(new, self.plugin)
            ):
                return  # only the scheduler's bookkeeping changed (queue position, times, ...)
            enqueue(f"{ns}/{name}")

        def on_pod(event: str, old: PodInfo | None, new: PodInfo | None) -> None:
            pod = new if new is not None else old
            if pod is None or pod.owner is None or pod.owner.kind != self.kind:
                return
            key = self._exp_key(pod.namespace, pod.owner.name, "pods")
            self._observe(
                key,
                event,
                pod.name,
                old_deleting=bool(old and old.deletion_timestamp),
                new_deleting=bool(new and new.deletion_timestamp),
            )
            enqueue(f"{pod.namespace}/{pod.owner.name}")

        def on_service(event: str, old: ObjectInfo | None, new: ObjectInfo | None) -> None:
            svc = new if new is not None else old
            if svc is None or svc.owner is None or svc.owner.kind != self.kind:
                return
            self._observe(
                self._exp_key(svc.namespace, svc.owner.name, "services"),
                event,
                svc.name,
                old_deleting=bool(old and old.deletion_timestamp),
                new_deleting=bool(new and new.deletion_timestamp),
            )
            enqueue(f"{svc.namespace}/{svc.owner.name}")

        def raw_handler(what: str) -> Callable[[str, Obj | None, Obj | None], None]:
            def on_child(event: str, old: Obj | None, new: Obj | None) -> None:
                obj = new if new is not None else old
                if obj is None:
                    return
                meta = obj.get("metadata") or {}
                ref = controller_ref(meta)
                if ref is None or ref.get("kind") != self.kind:
                    return
                ns = str(meta.get("namespace", ""))
                new_meta = (new or {}).get("metadata") or {}
                self._observe(
                    self._exp_key(ns, str(ref.get("name")), what),
                    event,
                    str(meta.get("name")),
                    old_deleting=bool(((old or {}).get("metadata") or {}).get("deletionTimestamp")),
                    new_deleting=bool(new_meta.get("deletionTimestamp")),
                )
                enqueue(f"{ns}/{ref.get('name')}")

            return on_child

        self._jobs.add_handler(on_job)
        self._pods.add_handler(on_pod)
        self._services.add_handler(on_service)
        for child_kind, (_, informer) in self._others.items():
            informer.add_handler(raw_handler(child_kind))

    def _observe(
        self, key: str, event: str, name: str, *, old_deleting: bool, new_deleting: bool
    ) -> None:
        if event == "ADDED":
            self._exp.observed_creation(key, name)
        if event == "DELETED" or (new_deleting and not old_deleting):
            self._exp.observed_deletion(key, name)

    def _exp_key(self, ns: str, name: str, what: str) -> str:
        return f"{self.kind}/{ns}/{name}/{what}"

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result:
        ns, _, name = key.partition("/")
        obj = self._jobs.store.get(key)
        if obj is None:
            self._read_back.forget(key)
            for what in ("pods", "services", *self._others):
                self._exp.delete(self._exp_key(ns, name, what))
            return Result()
        obj = self._read_back.current(key, obj)
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp") or managed_elsewhere(obj):
            return Result()
        uid = str(meta.get("uid", ""))
        ref = ObjectRef(self.plugin.resource.api_version, self.kind, ns, name, uid)
        now = normalize_time(self._clock.now())
        ctx = self._context.current()
        step = Step(obj, self.plugin, now, ref)
        pinned: Obj | None = None
        if isinstance(self.plugin, PinsInputs):
            pin_name = self.plugin.pinned_name(obj)
            pinned = self._owned_others(ns, name, uid).get(f"ConfigMap/{pin_name}")
        try:
            if pinned is not None and isinstance(self.plugin, PinsInputs):
                job = self.plugin.parse_pinned(obj, pinned, ctx)
            else:
                job = self.plugin.parse(obj, ctx)
        except InvalidJob as exc:
            self._mark_wrong(step, exc)
            await self._write(step)
            return Result()
        except JobNotReady as exc:
            if not step.finished:
                self._mark_not_ready(step, exc)
                await self._write(step)
            return Result()
        except Exception as exc:  # odd input a plugin did not foresee: the job is Wrong, not us
            log.warning("job.unreadable", error=repr(exc), exc_info=True)
            problem = Problem("(object)", f"cannot be read: {type(exc).__name__}: {exc}")
            self._mark_wrong(step, InvalidJob([problem]))
            await self._write(step)
            return Result()

        try:
            if step.finished:
                requeue = await self._finished(step, job)
            elif step.sched.get("stage") == "Wrong":
                return Result()
            else:
                kinds = ("pods", "services", *self._others)
                if not all(self._exp.satisfied(self._exp_key(ns, name, k)) for k in kinds):
                    return Result(requeue_after=_EXPECTATION_RECHECK)
                requeue = await self._active(step, job, ctx, pinned)
        except _PLUGIN_BUGS as exc:
            # The plugins are pure: an exception on this input recurs on every retry. The job
            # is Wrong (naming the error) rather than retried forever without a condition.
            log.warning("job.unbuildable", error=repr(exc), exc_info=True)
            wrong = Step(obj, self.plugin, now, ref)
            problem = Problem("(object)", f"cannot be built: {type(exc).__name__}: {exc}")
            self._mark_wrong(wrong, InvalidJob([problem]))
            await self._write(wrong)
            return Result()
        if step.rejected:
            problems = [Problem("spec", f"the apiserver refused {r}") for r in step.rejected]
            self._mark_wrong(step, InvalidJob(problems))
            await self._write(step)
            return Result()
        await self._write(step)
        if step.errors:
            # A failed create leaves no watch event behind and a failed delete changes nothing:
            # without this, a job whose pod create failed once waits for an unrelated event.
            raise ChildSyncError(step.errors)
        return Result(requeue_after=requeue) if requeue is not None else Result()

    async def _write(self, step: Step) -> None:
        """Write the step's status (if it changed), then its events and counters.

        Called once at the end of a reconcile, and before deleting pods to recreate them, so the
        failures they count are persisted before the pods that show them are gone. Only the
        reconciler's block is written (see ``jobstatus.status_after``), with no precondition.
        """
        ref, obj = step.ref, step.obj
        old = obj.get("status") or {}
        meta = obj.get("metadata") or {}
        exec_block = step.exec
        if isinstance(self.plugin, RendersStatus):
            generation = meta.get("generation")
            exec_block = self.plugin.render_status(
                step.exec,
                stored=get_path(obj, self.plugin.exec_path),
                generation=generation if isinstance(generation, int) else None,
                now=step.now,
            )
        written = await self._writer.write(
            self._res,
            namespace=ref.namespace,
            name=ref.name,
            resource_version=None,
            old=old,
            new=status_after(obj, self.plugin, exec_block),
        )
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

    def _mark_not_ready(self, step: Step, exc: JobNotReady) -> None:
        """An input is missing (a runtime): the job waits, unstarted, with ``Created=False``
        (reason and message from ``exc``) and a Warning event when that changes."""
        before = [c for c in step.exec.get("conditions") or () if c.get("type") == "Created"]
        step.condition("Created", False, exc.reason, exc.message)
        after = [c for c in step.exec.get("conditions") or () if c.get("type") == "Created"]
        changed = [(c.get("status"), c.get("reason"), c.get("message")) for c in before] != [
            (c.get("status"), c.get("reason"), c.get("message")) for c in after
        ]
        if changed:
            step.events.append(("Warning", exc.reason, exc.message))

    def _mark_wrong(self, step: Step, exc: InvalidJob) -> None:
        message = f"invalid {self.kind}: {exc}"
        if not condition_true(step.exec, "Failed"):
            step.exec = put_condition(
                step.exec,
                type="Failed",
                status=True,
                reason=f"{self.kind}FailedValidation",
                message=message,
                now=step.now,
            )
            step.events.append(("Warning", f"{self.kind}FailedValidation", message))
            step.counters.append(FAILED)

    async def _finished(self, step: Step, job: Any) -> float | None:
        ref = step.ref
        ns, name, uid = ref.namespace, ref.name, ref.uid
        completion = parse_opt_time(step.exec.get("completionTime")) or parse_opt_time(
            step.sched.get("completionTime")
        )
        if completion is None:
            completion = step.now
        step.exec.setdefault("completionTime", fmt(completion))
        policy = self.plugin.run_policy(job)
        pods = self._owned_pods(ns, name, uid)
        if policy.clean_pod_policy != "None":
            doomed = [
                p.name
                for p in pods
                if p.deletion_timestamp is None
                and (policy.clean_pod_policy == "All" or p.phase in ("Pending", "Running"))
            ]
            out = await self._children.delete_all(
                job=ref, exp_key=self._exp_key(ns, name, "pods"), res=PODS, names=doomed
            )
            step.absorb(out)
            if policy.service_cleanup != "None":
                owned = self._owned_services(ns, name, uid)
                services = [
                    e.name
                    for e in owned.values()
                    if not e.deleting and (policy.service_cleanup == "All" or e.name in doomed)
                ]
                out = await self._children.delete_all(
                    job=ref,
                    exp_key=self._exp_key(ns, name, "services"),
                    res=SERVICES,
                    names=services,
                )
                step.absorb(out)
        if policy.ttl_seconds_after_finished is None:
            return None
        expire = completion + timedelta(seconds=policy.ttl_seconds_after_finished)
        if step.now >= expire:
            with contextlib.suppress(NotFound):
                await self._client.delete(self._res, name, namespace=ns, uid=uid)
            log.info("job.ttl_deleted", ttl=policy.ttl_seconds_after_finished)
            return None
        return (expire - step.now).total_seconds()

    async def _active(
        self, step: Step, job: Any, ctx: OperatorContext, pinned: Obj | None = None
    ) -> float | None:
        ref, words = step.ref, self._words
        ns, name, uid = ref.namespace, ref.name, ref.uid
        kind, now = self.kind, step.now
        raw_size = step.sched.get("currentSize")
        size = raw_size if isinstance(raw_size, int) and raw_size > 0 else 0
        pods = self._owned_pods(ns, name, uid)
        live = [p for p in pods if p.deletion_timestamp is None]
        others = self._owned_others(ns, name, uid)
        progress = self.plugin.progress(job, size=size, pods=live, others=others)
        policy = self.plugin.run_policy(job)
        demand = self.plugin.demand(job, ctx)
        if not condition_true(step.exec, "Created"):
            msg = words.created(ns, name)
            step.condition("Created", True, f"{kind}Created", msg)
            if words.created_event:
                step.events.append(("Normal", f"{kind}Created", msg))
            step.counters.append(CREATED)
        # Our own record that this job got pods (written with them): a job the scheduler moves
        # to Waiting while it still shows one was started, and so preempted, whether or not its
        # Running condition made it to the apiserver first.
        had_pods = step.exec.get("startTime") is not None
        if size == 0:
            # A job holding no pods (waiting, suspended, preempted) has not started: its deadline
            # runs again from zero once it gets pods back, as Kubeflow resets startTime on resume.
            step.exec.pop("startTime", None)
        doomed = frozenset(progress.recreate)
        recreated = [p for p in live if p.name in doomed]
        statuses = replica_statuses(progress)
        if policy.backoff_limit is not None:
            statuses = charged_statuses(statuses, step.exec.get("replicaStatuses"), recreated)
        requeue: float | None = None
        failed, reason = progress.failed, progress.failed_reason or f"{kind}Failed"
        start = parse_opt_time(step.exec.get("startTime"))
        deadline = policy.active_deadline_seconds
        if failed is None and deadline is not None and start is not None:
            left = (start + timedelta(seconds=deadline) - now).total_seconds()
            if left <= 0:
                reason, failed = words.deadline_exceeded(ns, name)
            else:
                requeue = left
        if failed is None and policy.backoff_limit is not None:
            restarts = sum(int(s.get("failed") or 0) for s in statuses.values())
            restarts += sum(c.restart_count for p in live for c in p.containers)
            if restarts > policy.backoff_limit:
                reason, failed = words.backoff_exceeded(ns, name)
        # Past its deadline or backoffLimit the job is stopped whatever cleanPodPolicy says
        # (training-operator deletes every pod and Service of such a job), once that is written.
        stop = failed is not None and progress.failed is None
        if isinstance(self.plugin, RendersStatus):
            step.exec.update(
                self.plugin.observed_status(job, size=size, pods=live, suspended=demand.suspended)
            )
        if failed is not None or progress.succeeded:
            never = words.never_running(ns, name)
            if never is not None and not any(
                c.get("type") == "Running" for c in step.exec.get("conditions") or ()
            ):
                step.condition("Running", False, f"{kind}Running", never)
            if failed is not None:
                step.condition("Failed", True, reason, failed)
                step.events.append((words.failed_event_type, reason, failed))
                step.counters.append(FAILED)
            else:
                msg = words.succeeded(ns, name)
                step.condition("Succeeded", True, f"{kind}Succeeded", msg)
                step.events.append(("Normal", f"{kind}Succeeded", msg))
                step.counters.append(SUCCESSFUL)
            step.exec["replicaStatuses"] = statuses
            step.exec["completionTime"] = fmt(now)
            if stop:
                await self._write(step)
                await self._stop_all(step, live)
            return None

        self._suspension(step, demand.suspended, ns, name)
        step.exec["replicaStatuses"] = statuses
        if recreated:
            for pod in recreated:
                note = words.exited(ns, pod)
                if note is not None:
                    step.events.append(("Normal", "ExitedWithCode", note))
            msg = words.restarting(ns, name, recreated)
            step.condition("Restarting", True, f"{kind}Restarting", msg)
            step.events.append(("Warning", f"{kind}Restarting", msg))
            step.counters.append(RESTARTED)
            await self._write(step)
            out = await self._children.delete_all(
                job=ref,
                exp_key=self._exp_key(ns, name, "pods"),
                res=PODS,
                names=[p.name for p in recreated],
            )
            step.absorb(out)
        children = self.plugin.children(job, size=size, ctx=ctx)
        if isinstance(self.plugin, ObservesChildren):
            children = self.plugin.observed_children(job, children, pods=live, others=others)
        if isinstance(self.plugin, StagesChildren):
            children = self.plugin.staged_children(job, children, size=size, pods=live, ctx=ctx)
        if isinstance(self.plugin, PinsInputs):
            # The pin is kept as observed once it exists; it is created when the job gets pods.
            pin = pinned
            if pin is None and size > 0:
                pin = self.plugin.pin(step.obj, ctx)
            if pin is not None:
                children = dataclasses.replace(children, config_maps=(*children.config_maps, pin))
        existing = {
            p.name: Existing(p.name, True, p.deletion_timestamp is not None, p.replica_index or 0)
            for p in pods
        }
        # Two rounds, each concurrent: first what pods consume (ConfigMaps, Secrets), then the
        # pods and Jobs themselves. Services go first only when there are batch Jobs (an MPI
        # launcher resolves its workers through them at once); pods do not need them to exist
        # (Kubeflow creates pods before Services), so otherwise they go with the pods and a
        # reconcile that starts a job costs one round trip, not two. Outcomes are absorbed in a
        # fixed order.
        self._check_watched(children)
        services = self._children.sync(
            job=ref,
            exp_key=self._exp_key(ns, name, "services"),
            res=SERVICES,
            desired=children.services,
            existing=self._owned_services(ns, name, uid),
        )
        early, late = ([services], []) if children.jobs else ([], [services])
        inputs = self._other_syncs(ref, children, others, ("ConfigMap", "Secret"))
        outs: list[SyncOutcome | None] = await asyncio.gather(
            *early,
            *inputs,
            self._refresh_config_maps(ref, children, others),
        )
        consumers = self._other_syncs(ref, children, others, ("Job",))
        outs += await asyncio.gather(
            self._children.sync(
                job=ref,
                exp_key=self._exp_key(ns, name, "pods"),
                res=PODS,
                desired=children.pods,
                existing=existing,
                keep=frozenset(progress.recreate),
            ),
            *late,
            *consumers,
        )
        for outcome in outs:
            if outcome is not None:
                step.absorb(outcome)
        if size > 0 and start is None:
            step.exec["startTime"] = fmt(now)
        if progress.running and not progress.recreate:
            was_running = condition_true(step.exec, "Running")
            step.condition("Running", True, f"{kind}Running", words.running(ns, name))
            note = words.running_event(ns, name)
            if note is not None and not was_running:
                step.events.append(("Normal", f"{kind}Running", note))
        self._preemption(step, size=size, suspended=demand.suspended, had_pods=had_pods)
        return requeue

    async def _stop_all(self, step: Step, live: list[PodInfo]) -> None:
        ref = step.ref
        ns, name = ref.namespace, ref.name
        out = await self._children.delete_all(
            job=ref,
            exp_key=self._exp_key(ns, name, "pods"),
            res=PODS,
            names=[p.name for p in live],
        )
        step.absorb(out)
        services = self._owned_services(ns, name, ref.uid)
        out = await self._children.delete_all(
            job=ref,
            exp_key=self._exp_key(ns, name, "services"),
            res=SERVICES,
            names=[e.name for e in services.values() if not e.deleting],
        )
        step.absorb(out)

    def _preemption(self, step: Step, *, size: int, suspended: bool, had_pods: bool) -> None:
        """Show that the scheduler stopped (or resumed) a job that had started: one whose
        Running condition is True, or one moved to Waiting while its ``startTime`` (set with
        its pods) was still stored. A job released for pods pending too long goes to
        RequeueCooldown instead, and is not shown as preempted."""
        kind, ref = self.kind, step.ref
        preempted = condition_reason(step.exec, "Suspended") == PREEMPTED
        started = condition_true(step.exec, "Running") or (
            had_pods and step.sched.get("stage") == "Waiting"
        )
        if size == 0 and not suspended and started:
            msg = f"{kind} {ref.namespace}/{ref.name} holds no replicas: waiting for the scheduler."
            if self.plugin.preempted_condition == "Suspended":
                step.condition("Suspended", True, PREEMPTED, msg)
            step.condition("Running", False, f"{kind}Waiting", msg)
        elif size > 0 and preempted:
            msg = f"{kind} {ref.namespace}/{ref.name} is resumed by the scheduler."
            step.condition("Suspended", False, f"{kind}Resumed", msg)

    def _suspension(self, step: Step, suspended: bool, ns: str, name: str) -> None:
        kind, words = self.kind, self._words
        user_suspended = condition_reason(step.exec, "Suspended") == f"{kind}Suspended"
        if suspended and not user_suspended:
            msg = words.suspended(ns, name)
            if condition_true(step.exec, "Running"):
                running = words.suspended_running(ns, name)
                step.condition("Running", False, f"{kind}Suspended", running)
            step.condition("Suspended", True, f"{kind}Suspended", msg)
            step.exec.pop("startTime", None)
            step.events.append(("Normal", f"{kind}Suspended", msg))
        elif not suspended and user_suspended and condition_true(step.exec, "Suspended"):
            msg = words.resumed(ns, name)
            step.condition("Suspended", False, f"{kind}Resumed", msg)
            step.events.append(("Normal", f"{kind}Resumed", msg))

    def _owned_others(self, ns: str, name: str, uid: str) -> dict[str, Obj]:
        out: dict[str, Obj] = {}
        for child_kind, (_, informer) in self._others.items():
            for obj in informer.store.by_index(OWNER_INDEX, owner_key(self.kind, ns, name)):
                meta = obj.get("metadata") or {}
                ref = controller_ref(meta)
                if ref is not None and ref.get("uid") == uid:
                    out[f"{child_kind}/{meta.get('name')}"] = obj
        return out

    def _other_syncs(
        self, ref: ObjectRef, children: Children, others: Obj, kinds: tuple[str, ...]
    ) -> list[Coroutine[Any, Any, SyncOutcome]]:
        """The create/delete syncs of the non-pod children of ``kinds``, not yet started."""
        desired = {
            "ConfigMap": children.config_maps,
            "Secret": children.secrets,
            "Job": children.jobs,
        }
        syncs: list[Coroutine[Any, Any, SyncOutcome]] = []
        for child_kind in kinds:
            manifests = desired[child_kind]
            if child_kind not in self._others:
                continue  # _check_watched: there are none
            res = self._others[child_kind][0]
            existing = {
                key.partition("/")[2]: Existing(
                    key.partition("/")[2],
                    True,
                    bool((obj.get("metadata") or {}).get("deletionTimestamp")),
                    0,
                )
                for key, obj in others.items()
                if key.startswith(f"{child_kind}/")
            }
            if child_kind == "Secret":
                manifests = tuple(
                    m if m["metadata"]["name"] in existing else fill_generated(m) for m in manifests
                )
            syncs.append(
                self._children.sync(
                    job=ref,
                    exp_key=self._exp_key(ref.namespace, ref.name, child_kind),
                    res=res,
                    desired=manifests,
                    existing=existing,
                )
            )
        return syncs

    def _check_watched(self, children: Children) -> None:
        """Refuse children of a kind this reconciler does not watch (a plugin error)."""
        wanted = {"ConfigMap": children.config_maps, "Secret": children.secrets}
        wanted["Job"] = children.jobs
        for child_kind, manifests in wanted.items():
            if manifests and child_kind not in self._others:
                raise TerminalError(f"{self.kind} wants {child_kind}s, which are not watched")

    async def _refresh_config_maps(self, ref: ObjectRef, children: Children, others: Obj) -> None:
        """Update existing ConfigMaps whose data differs from the desired (in place)."""
        if "ConfigMap" not in self._others:
            return
        res = self._others["ConfigMap"][0]
        for manifest in children.config_maps:
            current = others.get(f"ConfigMap/{manifest['metadata']['name']}")
            if current is not None and current.get("data") != manifest.get("data"):
                await self._client.patch(
                    res,
                    manifest["metadata"]["name"],
                    {"data": with_nulls(current.get("data"), manifest.get("data"))},
                    namespace=ref.namespace,
                )

    def _owned_pods(self, ns: str, name: str, uid: str) -> list[PodInfo]:
        return [
            p
            for p in self._pods.store.by_index(OWNER_INDEX, owner_key(self.kind, ns, name))
            if p.owner is not None and p.owner.uid == uid
        ]

    def _owned_services(self, ns: str, name: str, uid: str) -> dict[str, Existing]:
        return {
            svc.name: Existing(
                svc.name, True, svc.deletion_timestamp is not None, svc.replica_index or 0
            )
            for svc in self._services.store.by_index(OWNER_INDEX, owner_key(self.kind, ns, name))
            if svc.owner is not None and svc.owner.uid == uid
        }
