"""The composition root of ``lattice run``.

It wires, in this order:
1. the kube client (from a kubeconfig or the in-cluster service account), with the client-side
   QPS/burst limiter and the request metrics;
2. one shared informer per watched resource: the enabled job kinds, the runtime kinds and
   PriorityClasses (whole objects minus ``managedFields`` and the last-applied annotation, with
   shared strings: ``slim_object``), Nodes (slim), our own Pods (slim, selected by our label),
   every other bound Pod (only node and requested units), our Services (metadata only:
   ``ObjectInfo``, selected by our label), and our ConfigMaps, Secrets and batch Jobs (raw
   without ``managedFields``; plugins read their contents);
3. the probes and metrics server, served by every replica; ``/readyz`` turns 200 once every
   informer has synced, and 503 again while a list/watch fails for longer than
   ``--watch-failure-timeout``;
4. leader election (optional): only the leader runs controllers and the scheduler;
5. graceful shutdown on SIGTERM/SIGINT: stop taking work, drain in-flight reconciles within
   ``shutdown_timeout``, release the lease, exit 0.

With ``--namespaces`` every namespaced list/watch is per namespace (nothing needs cluster-wide
rights but Nodes, PriorityClasses and ClusterTrainingRuntimes: ``deploy/namespaced``).

Per-kind reconcilers and the scheduler loop register through ``Operator.add_runnable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import structlog
from prometheus_client import REGISTRY, CollectorRegistry

from lattice.clock import Clock, RealClock
from lattice.config import Settings
from lattice.controllers.job import JobReconciler, kube_resource
from lattice.frameworks.base import MANAGED_LABEL, JobPlugin, ReadsRuntimes
from lattice.frameworks.registry import PLUGINS
from lattice.kube import KubeClient, Resource
from lattice.kube.client import connect
from lattice.kube.impersonation import KubeconfigError, who_am_i
from lattice.kube.resources import (
    BATCH_JOBS,
    CONFIGMAPS,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    PVCS,
    SECRETS,
    SERVICES,
)
from lattice.primitives.objects import Obj
from lattice.runtime.controller import Controller
from lattice.runtime.events import EventRecorder
from lattice.runtime.expectations import Expectations
from lattice.runtime.informer import Informer, InformerFactory
from lattice.runtime.leader import LeaderElector
from lattice.runtime.metrics import Metrics
from lattice.runtime.projections import (
    FOREIGN_POD_FIELD_SELECTOR,
    OWNER_INDEX,
    POD_INDEXES,
    foreign_pod_usage,
    node_info,
    object_info,
    object_owner_index,
    pod_info,
    raw_owner_index,
    slim_object,
    strip_managed_fields,
)
from lattice.runtime.ratelimit import RateLimitingQueue
from lattice.runtime.server import ProbeServer
from lattice.scheduler.loop import (
    RESIZE_BAND,
    ContextSource,
    LoopServices,
    LoopSources,
    SchedulerLoop,
    scheduler_config,
)

__all__ = ["JOB_RESOURCES", "MANAGED_LABEL", "Operator", "run"]

log = structlog.get_logger(__name__)

#: Each plugin's custom resource, by kind (the registry names the kinds, not this module).
JOB_RESOURCES: dict[str, Resource] = {p.resource.kind: kube_resource(p) for p in PLUGINS}
RUNTIME_RESOURCES: tuple[Resource, ...] = (
    Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime"),
    Resource(
        "trainer.kubeflow.org",
        "v1alpha1",
        "clustertrainingruntimes",
        "ClusterTrainingRuntime",
        namespaced=False,
    ),
)

Runnable = Callable[[], Coroutine[Any, Any, None]]


class Operator:
    """The running process: client, informers, server, and leader-only runnables."""

    def __init__(
        self,
        settings: Settings,
        client: KubeClient,
        *,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        events_client: KubeClient | None = None,
    ) -> None:
        """``events_client`` posts the Events (default: ``client``); ``lattice run`` gives it a
        rate limiter of its own, as client-go's event broadcaster has its own clientset."""
        self.settings = settings
        self.client = client
        self.clock = clock or RealClock()
        self.metrics = Metrics(registry if registry is not None else REGISTRY)
        self.informers = InformerFactory(
            client, clock=self.clock, metrics=_InformerMetrics(self.metrics)
        )
        self.stop = asyncio.Event()
        self._runnables: list[tuple[str, Runnable]] = []
        ns = list(settings.namespaces) or None
        self.jobs = {
            kind: self.informers.informer(
                JOB_RESOURCES[kind], transform=slim_object, transform_name="slim", namespaces=ns
            )
            for kind in settings.enabled_kinds
        }
        self.runtimes = [
            self.informers.informer(
                res,
                transform=slim_object,
                transform_name="slim",
                namespaces=ns if res.namespaced else None,
            )
            for res in RUNTIME_RESOURCES
        ]
        self.priority_classes = self.informers.informer(
            PRIORITY_CLASSES, transform=slim_object, transform_name="slim"
        )
        self.nodes = self.informers.informer(NODES, transform=node_info)
        self.pods = self.informers.informer(
            PODS,
            transform=pod_info,
            namespaces=ns,
            label_selector=MANAGED_LABEL,
            indexes=POD_INDEXES,
        )
        self.foreign_pods = self.informers.informer(
            PODS,
            transform=foreign_pod_usage,
            namespaces=ns,
            label_selector=f"!{MANAGED_LABEL}",
            field_selector=FOREIGN_POD_FIELD_SELECTOR,
        )
        self.services = self.informers.informer(
            SERVICES,
            transform=object_info,
            namespaces=ns,
            label_selector=MANAGED_LABEL,
            indexes={OWNER_INDEX: object_owner_index},
        )
        # Other children (MPI hostfile ConfigMaps, ssh Secrets, launcher Jobs, a TrainJob's
        # volumeClaimPolicies claims), ours by label.
        self.children = {
            res.kind: (
                res,
                self.informers.informer(
                    res,
                    transform=strip_managed_fields,
                    transform_name="raw-slim",
                    namespaces=ns,
                    label_selector=MANAGED_LABEL,
                    indexes={OWNER_INDEX: raw_owner_index},
                ),
            )
            for res in (CONFIGMAPS, SECRETS, BATCH_JOBS, PVCS)
        }
        self.recorder = EventRecorder(
            events_client if events_client is not None else client,
            clock=self.clock,
            controller="lattice.breezeml.ai/operator",
            instance=settings.pod_name or socket.gethostname(),
            on_drop=self.metrics.events_dropped.inc,
        )
        self.context = ContextSource(
            settings, priority_classes=self.priority_classes, runtimes=self.runtimes
        )
        self.expectations = Expectations(self.clock)
        self.controllers: dict[str, Controller] = {}
        plugins = {p.resource.kind: p for p in PLUGINS if p.resource.kind in self.jobs}
        for kind, plugin in plugins.items():
            reconciler = JobReconciler(
                plugin=plugin,
                client=client,
                clock=self.clock,
                jobs=self.jobs[kind],
                pods=self.pods,
                services=self.services,
                context=self.context,
                expectations=self.expectations,
                recorder=self.recorder,
                metrics=self.metrics,
                others=self.children,
            )
            name = kind.lower()
            queue = RateLimitingQueue[str](
                self.clock,
                name=name,
                metrics=self.metrics.queue(name),
                priority=self._job_priority(kind),
            )
            controller = Controller(
                name=name,
                reconciler=reconciler,
                queue=queue,
                workers=settings.workers,
                metrics=self.metrics,
                clock=self.clock,
                # One more worker, for resizes only: a backlog of bookkeeping (the Created
                # conditions of a burst of arrivals) can hold every other worker.
                reserved=1,
                reserved_from=RESIZE_BAND,
            )
            reconciler.watch(controller.enqueue)
            self.controllers[kind] = controller
            self.add_runnable(name, controller.run)
        self.scheduler = SchedulerLoop(
            plugins=plugins,
            sources=LoopSources(
                jobs={k: self.jobs[k] for k in plugins},
                pods=self.pods,
                foreign_pods=self.foreign_pods,
                nodes=self.nodes,
                pins=self.children["ConfigMap"][1],
            ),
            services=LoopServices(
                client=client,
                clock=self.clock,
                metrics=self.metrics,
                recorder=self.recorder,
                context=self.context,
            ),
            config=scheduler_config(settings),
        )
        self.add_runnable("scheduler", self.scheduler.run)
        self.add_runnable("events", self._run_recorder)
        self._watch_runtimes(plugins)

    def _job_priority(self, kind: str) -> Callable[[str], int]:
        """Reconciles run in job priority order (as the scheduler last saw it), so a
        high-priority job's pods are not created behind a backlog of lower ones."""

        def priority(key: str) -> int:
            return self.scheduler.priority_of(kind, key)

        return priority

    def _watch_runtimes(self, plugins: Mapping[str, JobPlugin[Any]]) -> None:
        """A runtime added, changed or deleted re-enqueues the jobs naming it, of every kind whose
        plugin ``ReadsRuntimes`` (a job waiting for its runtime starts once it exists:
        level-triggered), and wakes the scheduler, which skips jobs whose runtime is not ready."""
        for kind, plugin in plugins.items():
            if isinstance(plugin, ReadsRuntimes):
                handler = self._runtime_handler(plugin, self.controllers[kind], self.jobs[kind])
                for informer in self.runtimes:
                    informer.add_handler(handler)

    def _runtime_handler(
        self, plugin: ReadsRuntimes, controller: Controller, jobs: Informer[Obj]
    ) -> Callable[[str, Obj | None, Obj | None], None]:
        def on_runtime(event: str, old: Obj | None, new: Obj | None) -> None:
            del event
            runtime = new if new is not None else old
            if runtime is None:
                return
            for key, job in jobs.store.items():
                if plugin.names_runtime(job, runtime):
                    controller.enqueue(key)
            self.scheduler.trigger()

        return on_runtime

    async def _run_recorder(self) -> None:
        self.recorder.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.recorder.stop()

    def add_runnable(self, name: str, runnable: Runnable) -> None:
        """Register work that runs only while this replica leads."""
        self._runnables.append((name, runnable))

    @property
    def ready(self) -> bool:
        return not self.unready()

    def unready(self) -> list[str]:
        """Why ``/readyz`` answers 503: caches not synced, or watches failing too long."""
        reasons = [f"{i.name}: not synced" for i in self.informers.informers if not i.has_synced]
        return reasons + self.informers.failing(longer_than=self.settings.watch_failure_timeout)

    async def _lead(self) -> None:
        log.info("operator.leading", runnables=[n for n, _ in self._runnables])
        await self.informers.wait_synced()
        tasks = [asyncio.create_task(r(), name=n) for n, r in self._runnables]
        stop_wait = asyncio.create_task(self.stop.wait())
        try:
            await asyncio.wait({stop_wait, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            # Stop taking work; let in-flight reconciles finish within the bound.
            await asyncio.gather(
                *(
                    c.shutdown(timeout=self.settings.shutdown_timeout)
                    for c in self.controllers.values()
                ),
                return_exceptions=True,
            )
        finally:
            stop_wait.cancel()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, stop_wait, return_exceptions=True)

    async def serve(self) -> int:
        """Run until ``stop`` is set; returns the process exit code."""
        s = self.settings
        server = ProbeServer(
            registry=self.metrics.registry,
            unready=self.unready,
            clock=self.clock,
            metrics_addr=s.metrics_addr,
            probe_addr=s.probe_addr,
        )
        await server.start()
        log.info("operator.serving", addresses=server.bound, kinds=list(s.enabled_kinds))
        self.informers.start()
        code = 0
        # A standby exports 0, and a process without leader election leads from the start.
        self.metrics.leader.labels(s.leader_election_id).set(0 if s.leader_elect else 1)
        try:
            if s.leader_elect:
                identity = s.pod_name or f"{socket.gethostname()}_{os.getpid()}"
                elector = LeaderElector(
                    self.client,
                    clock=self.clock,
                    name=s.leader_election_id,
                    namespace=s.leader_election_namespace or s.pod_namespace or "default",
                    identity=identity,
                    lease_duration=s.lease_duration,
                    renew_deadline=s.renew_deadline,
                    retry_period=s.retry_period,
                    on_change=lambda v: self.metrics.leader.labels(s.leader_election_id).set(
                        int(v)
                    ),
                )
                graceful = await elector.run(self._lead, stop=self.stop)
                code = 0 if graceful else 1
            else:
                await self._lead()
        finally:
            await self.informers.stop()
            await server.stop()
        return code


class _InformerMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def relisted(self, informer: str, reason: str) -> None:
        self._m.informer_relists.labels(informer, reason).inc()

    def watch_ended(self, informer: str, reason: str) -> None:
        self._m.informer_watch_ended.labels(informer, reason).inc()

    def event_applied(self, informer: str, event_type: str) -> None:
        self._m.informer_events.labels(informer, event_type).inc()

    def synced(self, informer: str, value: bool) -> None:
        self._m.informer_synced.labels(informer).set(int(value))


async def run(settings: Settings) -> int:
    """``lattice run``: build the operator, serve until SIGTERM, drain, exit."""
    clock = RealClock()
    metrics_holder: list[Metrics] = []

    class _Observer:
        def observe(self, *, verb: str, resource: str, code: int, seconds: float) -> None:
            if metrics_holder:
                metrics_holder[0].observe(verb=verb, resource=resource, code=code, seconds=seconds)

        def throttled(self, *, verb: str, seconds: float) -> None:
            if metrics_holder:
                metrics_holder[0].throttled(verb=verb, seconds=seconds)

    try:
        client = await connect(
            kubeconfig=settings.kubeconfig,
            context=settings.context,
            token_path=os.path.join(settings.service_account_dir, "token"),
            ca_path=os.path.join(settings.service_account_dir, "ca.crt"),
            qps=settings.qps,
            burst=settings.burst,
            clock=clock,
            observer=_Observer(),
        )
    except KubeconfigError as exc:
        log.error("operator.bad_kubeconfig", error=str(exc))
        return 2
    identity = await who_am_i(client)
    log.info(
        "operator.identity",
        user=(identity or {}).get("username", "<unknown>"),
        groups=(identity or {}).get("groups", []),
        impersonating=client.impersonation.user if client.impersonation else None,
    )
    op = Operator(settings, client, clock=clock, events_client=client.with_own_limit())
    metrics_holder.append(op.metrics)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, op.stop.set)
    try:
        return await op.serve()
    finally:
        with contextlib.suppress(Exception):
            await client.close()
