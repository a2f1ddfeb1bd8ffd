"""The generic job reconciler: one class serves every kind, given the kind's plugin.

Contract (level-triggered; the key is ``namespace/name``):
1. Read the job from the informer cache, never from an event. Gone: forget its expectations.
2. ``plugin.parse``: an :class:`InvalidJob` sets stage ``Wrong`` (reason ``InvalidSpec``, the
   problems in the message) and a ``Failed`` condition ``<Kind>FailedValidation``; the
   scheduler never sees the job.
3. A finished job (Succeeded or Failed condition) keeps stage ``Completed`` and size 0, has its
   pods cleaned per ``cleanPodPolicy`` (All: every pod; Running: pods still Pending or Running;
   None: none; Services go with pods unless None), and is deleted ``ttlSecondsAfterFinished``
   after its completion time.
4. Otherwise, once the job's expectations are satisfied: apply the kind's status rules to the
   live pods (``plugin.progress``), fail the job for ``activeDeadlineSeconds`` (from
   ``startTime``) or ``backoffLimit`` (container restarts), recreate the pods the rules name,
   and make the children match ``plugin.children(job, size=currentSize)``: missing indices are
   created, the highest extra indices deleted, nothing else restarted. ``currentSize`` is the
   scheduler's decision; this reconciler never picks a size.
5. Status is written once, through the status subresource with a merge patch and the cached
   resourceVersion, only if it changed; a 409 becomes a quiet requeue (the harness). Events
   about the status are recorded after the write.

Conditions follow Kubeflow: ``Created``, ``Running``, ``Restarting``, ``Succeeded``,
``Failed`` (and ``Suspended``), reasons ``<Kind><Condition>``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Protocol

import structlog

from lattice.api.base import normalize_time
from lattice.clock import Clock
from lattice.controllers.children import ChildSync, Existing
from lattice.controllers.generated import fill_generated
from lattice.controllers.jobstatus import (
    PREEMPTED,
    Step,
    condition_reason,
    condition_true,
    controller_ref,
    fmt,
    parse_opt_time,
    put_condition,
    replica_statuses,
    with_nulls,
    with_path,
)
from lattice.frameworks.base import (
    Children,
    InvalidJob,
    JobPlugin,
    OperatorContext,
    managed_elsewhere,
)
from lattice.kube import KubeClient, NotFound
from lattice.kube.resources import PODS, SERVICES, Resource
from lattice.runtime.controller import Result, TerminalError
from lattice.runtime.events import EventRecorder, ObjectRef
from lattice.runtime.expectations import Expectations
from lattice.runtime.informer import Informer
from lattice.runtime.metrics import FRAMEWORKS, Metrics
from lattice.runtime.projections import OWNER_INDEX, PodInfo, owner_key
from lattice.runtime.status import StatusWriter

__all__ = ["ContextProvider", "JobReconciler", "kube_resource"]

log = structlog.get_logger(__name__)
Obj = dict[str, Any]
_EXPECTATION_RECHECK = 30.0


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
        services: Informer[Obj],
        context: ContextProvider,
        expectations: Expectations,
        recorder: EventRecorder,
        metrics: Metrics,
        others: Mapping[str, tuple[Resource, Informer[Obj]]] | None = None,
    ) -> None:
        self.plugin = plugin
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
        self._services.add_handler(raw_handler("services"))
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
            for what in ("pods", "services", *self._others):
                self._exp.delete(self._exp_key(ns, name, what))
            return Result()
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp") or managed_elsewhere(obj):
            return Result()
        uid = str(meta.get("uid", ""))
        ref = ObjectRef(self.plugin.resource.api_version, self.kind, ns, name, uid)
        now = normalize_time(self._clock.now())
        ctx = self._context.current()
        step = Step(obj, self.plugin, now, ref)
        try:
            job = self.plugin.parse(obj, ctx)
        except InvalidJob as exc:
            self._mark_wrong(step, exc)
            return await self._finish(step, ref, obj)

        if step.finished:
            requeue = await self._finished(step, job)
        elif step.sched.get("stage") == "Wrong":
            return Result()
        else:
            kinds = ("pods", "services", *self._others)
            if not all(self._exp.satisfied(self._exp_key(ns, name, k)) for k in kinds):
                return Result(requeue_after=_EXPECTATION_RECHECK)
            requeue = await self._active(step, job, ctx)
        result = await self._finish(step, ref, obj)
        return Result(requeue_after=requeue) if requeue is not None else result

    async def _finish(self, step: Step, ref: ObjectRef, obj: Obj) -> Result:
        old = obj.get("status") or {}
        new = old
        # The shorter path first: Kubeflow kinds keep the scheduler block inside the exec one.
        for path, block in sorted(
            ((self.plugin.exec_path, step.exec), (self.plugin.scheduling_path, step.sched)),
            key=lambda pb: len(pb[0]),
        ):
            new = with_path(new, path, block)
        meta = obj.get("metadata") or {}
        written = await self._writer.write(
            self._res,
            namespace=ref.namespace,
            name=ref.name,
            resource_version=str(meta.get("resourceVersion", "")),
            old=old,
            new=new,
        )
        if written is not None:
            for type_, reason, note in step.events:
                self._recorder.record(ref, type=type_, reason=reason, note=note)
            for counter in step.counters:
                counter.labels(ref.namespace, self._framework).inc()
        return Result()

    def _mark_wrong(self, step: Step, exc: InvalidJob) -> None:
        message = f"invalid {self.kind}: {exc}"
        step.sched.update(stage="Wrong", currentSize=0, reason="InvalidSpec", message=message)
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
            step.counters.append(self._metrics.jobs_failed)

    async def _finished(self, step: Step, job: Any) -> float | None:
        ref = step.ref
        ns, name, uid = ref.namespace, ref.name, ref.uid
        step.sched.update(stage="Completed", currentSize=0)
        completion = parse_opt_time(step.exec.get("completionTime")) or parse_opt_time(
            step.sched.get("completionTime")
        )
        if completion is None:
            completion = step.now
        step.exec.setdefault("completionTime", fmt(completion))
        step.sched.setdefault("completionTime", fmt(completion))
        policy = self.plugin.run_policy(job)
        pods = self._owned_pods(ns, name, uid)
        if policy.clean_pod_policy != "None":
            doomed = [
                p.name
                for p in pods
                if p.deletion_timestamp is None
                and (policy.clean_pod_policy == "All" or p.phase in ("Pending", "Running"))
            ]
            await self._children.delete_all(
                job=ref, exp_key=self._exp_key(ns, name, "pods"), res=PODS, names=doomed
            )
            services = [
                e.name for e in self._owned_services(ns, name, uid).values() if not e.deleting
            ]
            await self._children.delete_all(
                job=ref, exp_key=self._exp_key(ns, name, "services"), res=SERVICES, names=services
            )
        if policy.ttl_seconds_after_finished is None:
            return None
        expire = completion + timedelta(seconds=policy.ttl_seconds_after_finished)
        if step.now >= expire:
            with contextlib.suppress(NotFound):
                await self._client.delete(self._res, name, namespace=ns, uid=uid)
            log.info("job.ttl_deleted", ttl=policy.ttl_seconds_after_finished)
            return None
        return (expire - step.now).total_seconds()

    async def _active(self, step: Step, job: Any, ctx: OperatorContext) -> float | None:
        ref = step.ref
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
            step.condition("Created", True, f"{kind}Created", f"{kind} {ns}/{name} is created.")
            step.counters.append(self._metrics.jobs_created)
        requeue: float | None = None
        failed, reason = progress.failed, progress.failed_reason or f"{kind}Failed"
        start = parse_opt_time(step.exec.get("startTime"))
        deadline = policy.active_deadline_seconds
        if failed is None and deadline is not None and start is not None:
            left = (start + timedelta(seconds=deadline) - now).total_seconds()
            if left <= 0:
                failed, reason = (
                    f"{kind} {ns}/{name} has failed because it was active longer than "
                    "specified deadline",
                    "DeadlineExceeded",
                )
            else:
                requeue = left
        restarts = sum(c.restart_count for p in live for c in p.containers)
        if failed is None and policy.backoff_limit is not None and restarts > policy.backoff_limit:
            failed, reason = (
                f"{kind} {ns}/{name} has failed because it has reached the specified backoff limit",
                "BackoffLimitExceeded",
            )
        if failed is not None or progress.succeeded:
            if failed is not None:
                step.condition("Failed", True, reason, failed)
                step.events.append(("Warning", reason, failed))
                step.counters.append(self._metrics.jobs_failed)
            else:
                msg = f"{kind} {ns}/{name} successfully completed."
                step.condition("Succeeded", True, f"{kind}Succeeded", msg)
                step.events.append(("Normal", f"{kind}Succeeded", msg))
                step.counters.append(self._metrics.jobs_successful)
            step.exec["replicaStatuses"] = replica_statuses(progress)
            step.sched.update(stage="Completed", currentSize=0, completionTime=fmt(now))
            step.exec["completionTime"] = fmt(now)
            return None

        self._suspension(step, demand.suspended, ns, name)
        if progress.recreate:
            await self._children.delete_all(
                job=ref,
                exp_key=self._exp_key(ns, name, "pods"),
                res=PODS,
                names=list(progress.recreate),
            )
            msg = (
                f"{kind} {ns}/{name} is restarting because {len(progress.recreate)} pod(s) failed."
            )
            step.condition("Restarting", True, f"{kind}Restarting", msg)
            step.events.append(("Warning", f"{kind}Restarting", msg))
            step.counters.append(self._metrics.jobs_restarted)
        children = self.plugin.children(job, size=size, ctx=ctx)
        existing = {
            p.name: Existing(p.name, True, p.deletion_timestamp is not None, p.replica_index or 0)
            for p in pods
        }
        await self._children.sync(
            job=ref,
            exp_key=self._exp_key(ns, name, "pods"),
            res=PODS,
            desired=children.pods,
            existing=existing,
            keep=frozenset(progress.recreate),
        )
        await self._children.sync(
            job=ref,
            exp_key=self._exp_key(ns, name, "services"),
            res=SERVICES,
            desired=children.services,
            existing=self._owned_services(ns, name, uid),
        )
        await self._sync_others(ref, children, others)
        if size > 0 and start is None:
            step.exec["startTime"] = fmt(now)
        if progress.running and not progress.recreate:
            step.condition("Running", True, f"{kind}Running", f"{kind} {ns}/{name} is running.")
        self._preemption(step, size=size, suspended=demand.suspended)
        step.exec["replicaStatuses"] = replica_statuses(progress)
        return requeue

    def _preemption(self, step: Step, *, size: int, suspended: bool) -> None:
        """Show that the scheduler stopped (or resumed) a job that had started."""
        kind, ref = self.kind, step.ref
        preempted = condition_reason(step.exec, "Suspended") == PREEMPTED
        if size == 0 and not suspended and condition_true(step.exec, "Running"):
            msg = f"{kind} {ref.namespace}/{ref.name} holds no replicas: waiting for the scheduler."
            if self.plugin.preempted_condition == "Suspended":
                step.condition("Suspended", True, PREEMPTED, msg)
            step.condition("Running", False, f"{kind}Waiting", msg)
        elif size > 0 and preempted:
            msg = f"{kind} {ref.namespace}/{ref.name} is resumed by the scheduler."
            step.condition("Suspended", False, f"{kind}Resumed", msg)

    def _suspension(self, step: Step, suspended: bool, ns: str, name: str) -> None:
        kind = self.kind
        user_suspended = condition_reason(step.exec, "Suspended") == f"{kind}Suspended"
        if suspended and not user_suspended:
            msg = f"{kind} {ns}/{name} is suspended."
            step.condition("Suspended", True, f"{kind}Suspended", msg)
            step.exec.pop("startTime", None)
            step.events.append(("Normal", f"{kind}Suspended", msg))
        elif not suspended and user_suspended and condition_true(step.exec, "Suspended"):
            msg = f"{kind} {ns}/{name} is resumed."
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

    async def _sync_others(self, ref: ObjectRef, children: Children, others: Obj) -> None:
        desired = {"ConfigMap": children.config_maps, "Secret": children.secrets}
        desired["Job"] = children.jobs
        for child_kind, wanted in desired.items():
            manifests = wanted
            if child_kind not in self._others:
                if manifests:
                    raise TerminalError(f"{self.kind} wants {child_kind}s, which are not watched")
                continue
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
            await self._children.sync(
                job=ref,
                exp_key=self._exp_key(ref.namespace, ref.name, child_kind),
                res=res,
                desired=manifests,
                existing=existing,
            )
            if child_kind != "ConfigMap":
                continue
            for manifest in manifests:
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
        out: dict[str, Existing] = {}
        for obj in self._services.store.by_index(OWNER_INDEX, owner_key(self.kind, ns, name)):
            meta = obj.get("metadata") or {}
            ref = controller_ref(meta)
            if ref is None or ref.get("uid") != uid:
                continue
            labels = meta.get("labels") or {}
            raw = str(labels.get("training.kubeflow.org/replica-index", ""))
            svc = str(meta.get("name", ""))
            out[svc] = Existing(
                svc, True, bool(meta.get("deletionTimestamp")), int(raw) if raw.isdigit() else 0
            )
        return out
