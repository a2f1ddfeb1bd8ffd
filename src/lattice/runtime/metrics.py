"""Every Prometheus metric the operator exports, defined in one place.

Names follow client-go and controller-runtime (``workqueue_*``, ``controller_runtime_*``,
``rest_client_requests_total``) and Kubeflow's training-operator and mpi-operator
(``training_operator_jobs_*_total{job_namespace,framework}``, ``mpi_operator_jobs_*_total``), so
existing dashboards keep working. Lattice's own metrics carry the ``lattice_`` prefix.

``Metrics`` registers on a given registry (a fresh one per app in tests, the default one in the
process). Label sets that dashboards expect are pre-initialised to zero. The queue metrics follow
Kueue's (``kueue_admission_wait_time_seconds``, ``kueue_pending_workloads``,
``kueue_admitted_active_workloads``, ``kueue_preempted_workloads_total``,
``kueue_evicted_workloads_total``) with ``kind`` and ``namespace`` for the ClusterQueue. No
``*_created`` series are exported (``disable_created_metrics``, at import).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from lattice.scheduler.core import PreemptionCause, WaitReason

__all__ = [
    "ADMISSION_WAIT_BUCKETS",
    "EVICTION_REASONS",
    "FRAMEWORKS",
    "PREEMPTION_REASONS",
    "Metrics",
    "QueueMetricsAdapter",
]

# No ``*_created`` series: no dashboard reads them, and they double every counter's samples.
disable_created_metrics()  # type: ignore[no-untyped-call]

_RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_QUEUE_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
_PASS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: Kueue's ``kueue_admission_wait_time_seconds`` buckets, from 1 s to a day.
ADMISSION_WAIT_BUCKETS = (
    1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0,
    28800.0, 86400.0,
)  # fmt: skip
#: ``reason`` values of ``lattice_preempted_jobs_total``: every ``PreemptionCause``.
PREEMPTION_REASONS = tuple(cause.value for cause in PreemptionCause)
#: ``reason`` values of ``lattice_evicted_jobs_total`` pre-initialised (the stopping decision's
#: wait reason code; another code, e.g. InvalidSpec, appears when it happens).
EVICTION_REASONS = tuple(
    reason.value
    for reason in (
        WaitReason.PREEMPTED,
        WaitReason.PODS_PENDING_TIMEOUT,
        WaitReason.REQUEUE_LIMIT_EXCEEDED,
        WaitReason.SUSPENDED,
    )
)

#: The ``framework`` label values of training_operator_jobs_* per kind.
FRAMEWORKS: dict[str, str] = {
    "TrainingJob": "pytorch",
    "MPIJob": "mpi",
    "MXJob": "mxnet",
    "TrainJob": "trainjob",
}


class QueueMetricsAdapter:
    """The workqueue's metrics hooks, bound to one queue name."""

    def __init__(self, metrics: Metrics, name: str) -> None:
        self._m = metrics
        self._name = name
        metrics.workqueue_depth.labels(name).set(0)
        metrics.workqueue_adds.labels(name)
        metrics.workqueue_retries.labels(name)
        metrics.workqueue_unfinished.labels(name).set(0)
        metrics.workqueue_longest.labels(name).set(0)

    def add(self) -> None:
        self._m.workqueue_adds.labels(self._name).inc()

    def depth(self, n: int) -> None:
        self._m.workqueue_depth.labels(self._name).set(n)

    def get(self, latency_s: float) -> None:
        self._m.workqueue_queue_duration.labels(self._name).observe(latency_s)

    def done(self, work_s: float) -> None:
        self._m.workqueue_work_duration.labels(self._name).observe(work_s)

    def retry(self) -> None:
        self._m.workqueue_retries.labels(self._name).inc()

    def unfinished(self, unfinished_s: float, longest_s: float) -> None:
        self._m.workqueue_unfinished.labels(self._name).set(unfinished_s)
        self._m.workqueue_longest.labels(self._name).set(longest_s)


class Metrics:
    """All metric families, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        # --- client-go workqueue
        self.workqueue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", ["name"], registry=r
        )
        self.workqueue_adds = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            ["name"],
            registry=r,
        )
        self.workqueue_queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            ["name"],
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            ["name"],
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            ["name"],
            registry=r,
        )
        self.workqueue_unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed "
            "by "
            "work_duration",
            ["name"],
            registry=r,
        )
        self.workqueue_longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            ["name"],
            registry=r,
        )
        # --- controller-runtime
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=r,
        )
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=r,
        )
        self.rest_latency = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb and resource.",
            ["verb", "resource"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.rest_throttle = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb.",
            ["verb"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master.",
            ["name"],
            registry=r,
        )
        # --- Kubeflow-compatible job counters
        labels = ["job_namespace", "framework"]
        self.jobs_created = Counter(
            "training_operator_jobs_created_total",
            "Counts number of jobs created",
            labels,
            registry=r,
        )
        self.jobs_deleted = Counter(
            "training_operator_jobs_deleted_total",
            "Counts number of jobs deleted",
            labels,
            registry=r,
        )
        self.jobs_successful = Counter(
            "training_operator_jobs_successful_total",
            "Counts number of jobs successful",
            labels,
            registry=r,
        )
        self.jobs_failed = Counter(
            "training_operator_jobs_failed_total",
            "Counts number of jobs failed",
            labels,
            registry=r,
        )
        self.jobs_restarted = Counter(
            "training_operator_jobs_restarted_total",
            "Counts number of jobs restarted",
            labels,
            registry=r,
        )
        self.mpi_jobs_created = Counter(
            "mpi_operator_jobs_created_total", "Counts number of MPI jobs created", registry=r
        )
        self.mpi_jobs_successful = Counter(
            "mpi_operator_jobs_successful_total", "Counts number of MPI jobs successful", registry=r
        )
        self.mpi_jobs_failed = Counter(
            "mpi_operator_jobs_failed_total", "Counts number of MPI jobs failed", registry=r
        )
        # --- Lattice scheduler
        self.pass_duration = Histogram(
            "lattice_scheduler_pass_duration_seconds",
            "Duration of one scheduler pass (snapshot, decide, start the status writes)",
            buckets=_PASS_BUCKETS,
            registry=r,
        )
        self.status_writes = Counter(
            "lattice_scheduler_status_writes_total",
            "Scheduler status writes by result (ok, conflict, not_found, error, dropped)",
            ["result"],
            registry=r,
        )
        self.decisions = Counter(
            "lattice_scheduler_decisions_total", "Scheduler decisions by type", ["type"], registry=r
        )
        self.jobs = Gauge(
            "lattice_jobs", "Jobs by kind and scheduler stage", ["kind", "stage"], registry=r
        )
        self.capacity = Gauge(
            "lattice_capacity_units", "Scheduling units by state", ["state"], registry=r
        )
        self.preemptions = Counter(
            "lattice_preemptions_total", "Jobs stopped to make room for higher priority", registry=r
        )
        # --- Kueue-style queue metrics (``kind`` and ``namespace`` play the ClusterQueue's part)
        self.admission_wait = Histogram(
            "lattice_admission_wait_time_seconds",
            "Time from entering Waiting to admission (admission: first or resume)",
            ["kind", "namespace", "admission"],
            buckets=ADMISSION_WAIT_BUCKETS,
            registry=r,
        )
        self.pending_jobs = Gauge(
            "lattice_pending_jobs",
            "Jobs the scheduler holds back, by status (waiting, cooldown)",
            ["kind", "namespace", "status"],
            registry=r,
        )
        self.admitted_jobs = Gauge(
            "lattice_admitted_jobs",
            "Jobs the scheduler runs (stage Running, size above 0)",
            ["kind", "namespace"],
            registry=r,
        )
        self.preempted_jobs = Counter(
            "lattice_preempted_jobs_total",
            "Running jobs stopped for another job, by why that job ranks first",
            ["kind", "namespace", "reason"],
            registry=r,
        )
        self.evicted_jobs = Counter(
            "lattice_evicted_jobs_total",
            "Running jobs the scheduler stopped, by reason",
            ["kind", "namespace", "reason"],
            registry=r,
        )
        self.resizes = Counter(
            "lattice_resizes_total",
            "Size changes of running jobs, by direction (grow, shrink)",
            ["kind", "namespace", "direction"],
            registry=r,
        )
        # --- informers and events
        self.informer_relists = Counter(
            "lattice_informer_relists_total",
            "Informer relists by reason",
            ["informer", "reason"],
            registry=r,
        )
        self.informer_synced = Gauge(
            "lattice_informer_synced", "1 once the informer has listed", ["informer"], registry=r
        )
        self.informer_watch_ended = Counter(
            "lattice_informer_watch_ended_total",
            "Informer watches ended by reason (closed, 410, error, forced)",
            ["informer", "reason"],
            registry=r,
        )
        self.informer_events = Counter(
            "lattice_informer_events_total",
            "Watch events applied to informer caches by type (ADDED, MODIFIED, DELETED)",
            ["informer", "type"],
            registry=r,
        )
        self.events_dropped = Counter(
            "lattice_events_dropped_total",
            "Events not sent because the sender's queue was full, the API refused, or the "
            "recorder stopped first",
            registry=r,
        )
        for state in ("total", "used"):
            self.capacity.labels(state).set(0)
        for kind, framework in FRAMEWORKS.items():
            del kind
            for counter in (
                self.jobs_created,
                self.jobs_deleted,
                self.jobs_successful,
                self.jobs_failed,
                self.jobs_restarted,
            ):
                counter.labels("", framework)

    def init_kinds(self, kinds: Iterable[str]) -> None:
        """Pre-initialise the queue metrics' label sets of ``kinds`` (namespace ``""``), so a
        dashboard's ``sum by (reason)`` has data before the first preemption or resize."""
        for kind in kinds:
            for admission in ("first", "resume"):
                self.admission_wait.labels(kind, "", admission)
            for reason in PREEMPTION_REASONS:
                self.preempted_jobs.labels(kind, "", reason)
            for reason in EVICTION_REASONS:
                self.evicted_jobs.labels(kind, "", reason)
            for direction in ("grow", "shrink"):
                self.resizes.labels(kind, "", direction)

    def queue(self, name: str) -> QueueMetricsAdapter:
        """Hooks for the workqueue called ``name``."""
        return QueueMetricsAdapter(self, name)

    def init_controller(self, controller: str, workers: int) -> None:
        """Pre-initialise a controller's label sets, as controller-runtime does."""
        for result in ("success", "error", "requeue_after", "requeue"):
            self.reconcile_total.labels(controller, result)
        self.reconcile_errors.labels(controller)
        self.reconcile_terminal_errors.labels(controller)
        self.active_workers.labels(controller).set(0)
        self.max_concurrent.labels(controller).set(workers)

    def observe(self, *, verb: str, resource: str, code: int, seconds: float) -> None:
        """The kube client's request observer."""
        method = {
            "LIST": "GET",
            "WATCH": "GET",
            "GET": "GET",
            "CREATE": "POST",
            "PATCH": "PATCH",
            "UPDATE": "PUT",
            "DELETE": "DELETE",
        }.get(verb, verb)
        self.rest_requests.labels(str(code or "<error>"), method, "").inc()
        self.rest_latency.labels(verb, resource).observe(seconds)

    def throttled(self, *, verb: str, seconds: float) -> None:
        """The kube client's rate-limiter wait (client-go's rate limiter latency)."""
        self.rest_throttle.labels(verb).observe(seconds)
