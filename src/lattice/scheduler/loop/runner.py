"""The scheduler loop: the thin impure shell that feeds the pure core and persists its plan.

Contract:
- **A pass** (:meth:`SchedulerLoop.run_once`): build a ``Snapshot`` from the informer caches
  (:mod:`lattice.scheduler.loop.snapshot`), run ``schedule(snapshot, now)`` with ``now`` to the
  microsecond, then write each job's scheduler block through a JSON merge patch of the status
  subresource at ``plugin.scheduling_path``, carrying ``metadata.resourceVersion``. Only status is
  written: the kind reconcilers turn ``currentSize`` into pods. Writes run concurrently, at most
  ``concurrency`` at a time across passes, let in highest (reconcile) rank first. After each
  successful write the decision's events are recorded; a ``Conflict``/``NotFound`` (or any
  other failure) skips that job and schedules another pass ``retry_delay`` seconds later.
  After a ``Conflict`` a pass also runs as soon as the cache holds a version of the job other
  than the one the write was based on (at once if it already does): someone else's write, such
  as a reconciler's conditions, passes no trigger filter, and waiting out ``retry_delay`` cost
  an arrival whose admission conflicted a second.
  ``schedule`` runs in a thread of the loop's own (``decide_in_thread``): the core is pure and
  the snapshot immutable, so the event loop serves responses, watch events and reconciles
  while it decides, instead of stalling for about half of each pass.
- **Passes do not wait for their writes** (:meth:`run`): a pass ends once its writes are
  started, so an arrival during a pass with many writes (a preemption round, a position round)
  waits for that pass's decisions, not for its requests. A job whose write is in flight is read
  as written (see read-your-writes); if a later pass changes it again, that write is chained
  behind the one in flight and based on the version it produced, and dropped if that one
  failed. The next pass starts no sooner than ``pass_gap`` times the last pass's duration after
  it, so passes take at most ``1 / (1 + pass_gap)`` of the event loop (half by default) and
  the reconcilers keep the rest.
- **What is written**: a job is patched when its decision changed persisted state other than
  accounting (``plan.changed(key, include_accounting=False)``), or when the persisted
  ``queuePosition`` differs from the one to show (``snapshot.shown_position``: the first 10
  waiting jobs). Position-only changes are written in rounds at most every
  ``position_interval`` (10 s, as Kueue refreshed its pending-workload positions every few
  seconds), from a pass the loop wakes for, so a queue that moves on every pass costs one
  write per shown job per round, not per pass (``lastDecision`` rides along with other writes
  only: the reason's wording alone never costs a write). The patch always carries every
  scheduler field, accounting included. An accounting-only change (``attainedService``,
  ``serviceUpdatedTime`` of a running job) is never written alone: it rides along with the next
  other write (flushing it every minute cost one write per running job per minute: 9,110 status
  patches for 1,000 MPIJobs in the throughput bench). Service accrues from the persisted pair at
  the persisted size, and every size change is written, so a restarted operator computes the
  same service (and the same decisions) anyway; ``attainedService`` is shown as of
  ``serviceUpdatedTime``.
  A ``requeueTime`` that only starts the pending clock (the persisted one is unset and the new
  one is the job's ``pending_since``, which the pods themselves give a restarted operator) is
  written once it is ``requeue_write_delay`` (60 s) old, from a pass the loop wakes for then, or
  earlier with any other write: pods that start within that time cost no write at all (nor
  one to clear it).
- **Read-your-writes**: the object a write in flight will leave (``with_status``), then the
  patched object it returned, stands in for the cached one while the cache still shows a
  version that write supersedes (the one it was based on, or an earlier write of ours), so a
  pass that runs before our own writes land, or before the watch delivers them, neither
  re-decides nor conflicts. Any other version in the cache (someone else wrote) wins.
- **Triggers** (informer handlers registered by :meth:`run`): any add or delete of a job, node
  or one of our pods; an update that changes the object's ``*_signature`` (see
  :mod:`~lattice.scheduler.loop.snapshot`: updates of the scheduler's own fields, node heartbeats
  and pod status noise do not trigger); a foreign pod that takes capacity (``takes_capacity``)
  appearing, changing or going. Plus the plan's ``next_wakeup``, the
  retry timer, and a ``resync_period`` safety net.
- **Coalescing**: ``trigger()`` only sets a flag. The loop waits for the flag or a timer, clears
  the flag, then runs one pass; triggers during a pass cause exactly one more pass.
- **Metrics**: pass duration (snapshot, decide, start the writes),
  ``status_writes_total{result}``, ``decisions_total{type=<event reason>}`` and
  ``preemptions_total`` (``Preempted`` events) for written decisions, ``lattice_jobs{kind,stage}``
  for every (enabled kind, stage) each pass (stage "" shows as ``New``), capacity total/used.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import structlog

from lattice.clock import Clock
from lattice.frameworks.base import JobPlugin, OperatorContext, PinsInputs, managed_elsewhere
from lattice.kube import ApiError, Conflict, KubeClient, NotFound, Resource
from lattice.runtime.events import EventRecorder, ObjectRef
from lattice.runtime.informer import Informer
from lattice.runtime.metrics import Metrics
from lattice.runtime.projections import OWNER_INDEX, ForeignPodUsage, NodeInfo, PodInfo, owner_key
from lattice.runtime.store import split_key
from lattice.scheduler.core import (
    ACCOUNTING_FIELDS,
    Decision,
    JobView,
    Plan,
    Preempted,
    SchedulerConfig,
    Snapshot,
    Stage,
    job_key,
    schedule,
)
from lattice.scheduler.loop.context import ContextSource
from lattice.scheduler.loop.snapshot import (
    Invalid,
    get_path,
    job_signature,
    job_view,
    node_signature,
    node_views,
    pod_signature,
    shown_position,
    status_fields,
    status_patch,
    takes_capacity,
    utc_now,
    with_pods,
    with_status,
)

__all__ = ["STAGE_LABELS", "SchedulerLoop"]

_REQUEUE_ONLY = frozenset({"requeue_time"})


#: A memoised job: (object, pin, version, view or None if another controller manages it,
#: scheduler block).
_Memo = tuple[
    Mapping[str, Any],
    Mapping[str, Any] | None,
    tuple[Any, ...],
    JobView | Invalid | None,
    Mapping[str, Any],
]


class _ViewMemo:
    """Each job's ``job_view`` (with its scheduler block and whether another controller manages
    it) per object. Parsing every job on every pass cost ~1 ms a job (1.2 s a pass at 1,000
    MPIJobs, with the event loop blocked), and reading the status block's times another
    ~0.13 ms (0.65 s a pass at 5,000 jobs). An entry is reused for the very same object and pin
    at once, and re-read only when the job's uid and resourceVersion, its pin's resourceVersion
    or the context change. ``pending_since``, the one part that comes from the pods, is
    recomputed every pass, for running jobs only (the others have none), so the pods of the
    thousands of waiting jobs are not even looked up."""

    def __init__(self) -> None:
        self._ctx: OperatorContext | None = None
        self._seen: set[tuple[str, str]] = set()
        #: (kind, "namespace/name") -> the memoised job
        self._memo: dict[tuple[str, str], _Memo] = {}

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
        pods: Callable[[], Sequence[PodInfo]],
        *,
        ctx: OperatorContext,
        pinned: Mapping[str, Any] | None,
    ) -> tuple[JobView | Invalid | None, Mapping[str, Any]]:
        """The memoised ``job_view`` of job ``key`` (None if another controller manages it)
        and its scheduler block (``ctx`` is the one given to :meth:`begin`)."""
        self._seen.add(key)
        hit = self._memo.get(key)
        if hit is None or hit[0] is not obj or hit[1] is not pinned:
            meta = obj.get("metadata") or {}
            pin_rv = (
                None if pinned is None else (pinned.get("metadata") or {}).get("resourceVersion")
            )
            version = (meta.get("uid"), meta.get("resourceVersion"), pinned is not None, pin_rv)
            if hit is None or hit[2] != version:
                view: JobView | Invalid | None = None
                if not managed_elsewhere(obj):
                    view = job_view(key[0], plugin, obj, pods(), ctx, pinned=pinned)
                hit = (obj, pinned, version, view, get_path(obj, plugin.scheduling_path))
                self._memo[key] = hit
                return hit[3], hit[4]
            hit = (obj, pinned, *hit[2:])
            self._memo[key] = hit
        view = hit[3]
        if isinstance(view, JobView) and view.stage == Stage.RUNNING:
            fresh = with_pods(view, pods())
            if fresh is not view:
                self._memo[key] = (*hit[:3], fresh, hit[4])
            return fresh, hit[4]
        return view, hit[4]

    def priority(self, kind: str, namespace: str, name: str) -> int | None:
        """The job's priority as of the last pass that read it; None if none did (or it is
        invalid)."""
        hit = self._memo.get((kind, f"{namespace}/{name}"))
        view = None if hit is None else hit[3]
        return view.priority if isinstance(view, JobView) else None

    def end(self) -> None:
        """Forget the jobs this pass did not see (deleted)."""
        for key in [k for k in self._memo if k not in self._seen]:
            del self._memo[key]


#: How long a job a pass resized keeps its place in the resize band (and a job it shrank its
#: beneficiary's priority) for reconciles (seconds): long enough for the watch to deliver the
#: write and a worker to take the key, even when the next passes follow at once.
URGENT_FOR = 30.0

#: Added to the reconcile rank of a job a pass resized in the last ``URGENT_FOR`` seconds, so
#: every resize ranks above all bookkeeping: PriorityClass values are 32-bit, so the bands never
#: overlap.
RESIZE_BAND = 1 << 33


def _urgency(plan: Plan, entries: Mapping[str, _Entry]) -> tuple[dict[str, int], set[str]]:
    """The jobs ``plan`` shrinks (or stops), each with the highest priority among the jobs it
    admits or grows (its own when it grows nothing: a job suspended or requeued); and the jobs
    it grows."""
    grown: set[str] = set()
    shrunk: dict[str, int] = {}
    for k, e in entries.items():
        size, held = plan[k].size, e.view.current_size
        if size > held:
            grown.add(k)
        elif size < held:
            shrunk[k] = e.view.priority
    if grown and shrunk:
        top = max(entries[k].view.priority for k in grown)
        shrunk = dict.fromkeys(shrunk, top)
    return shrunk, grown


class _Need(enum.Enum):
    """What a job's status needs after a pass."""

    NOTHING = enum.auto()
    WRITE = enum.auto()  # persisted state changed: write now
    MOVED = enum.auto()  # only the shown queuePosition changed: write with the next round


log = structlog.get_logger(__name__)

Obj = dict[str, Any]

#: ``lattice_jobs`` stage label values set every pass ("" is shown as ``New``).
STAGE_LABELS: tuple[str, ...] = (
    "New",
    Stage.WAITING,
    Stage.RUNNING,
    Stage.REQUEUE_COOLDOWN,
    Stage.COMPLETED,
    Stage.WRONG,
    "Cancelled",
)


class _Entry(NamedTuple):
    """One job of a pass, as collected (a named tuple: a pass builds one per job, and a frozen
    dataclass's ``__init__`` cost several times as much)."""

    kind: str
    plugin: JobPlugin[Any]
    resource: Resource
    obj: Mapping[str, Any]
    view: JobView
    previous: Mapping[str, Any]
    #: The cached versions ``obj`` supersedes (our writes the watch has not delivered yet).
    stale: frozenset[str]
    #: Our write in flight that ``obj`` stands for (captured before the pass decides: it may
    #: finish while the core runs in its thread), or None.
    prior: _Pending | None = None


class _Gate:
    """A semaphore whose waiters are let in highest rank first (FIFO among equal ranks), so a
    later pass's urgent write does not queue behind an earlier pass's bookkeeping."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._seq = itertools.count()
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []

    async def acquire(self, rank: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (-rank, next(self._seq), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # let in, then cancelled before it could run: pass it on
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, fut = heapq.heappop(self._waiting)
            if not fut.done():  # cancelled waiters are skipped
                fut.set_result(None)
                return
        self._free += 1


@dataclass(slots=True)
class _Pending:
    """A status write in flight: the object as it will be once written, and the cached versions
    it supersedes (grows as earlier writes of ours for the same job land)."""

    obj: Obj
    stale: set[str]
    task: asyncio.Task[bool] | None = None
    #: The resourceVersion the apiserver gave this write, once it succeeded.
    written: str | None = None


def _owned(
    by_index: Callable[[str, str], list[PodInfo]], kind: str, store_key: str
) -> Callable[[], list[PodInfo]]:
    """The lookup of the pods job ``store_key`` of ``kind`` owns, for when they are needed."""

    def pods() -> list[PodInfo]:
        namespace, name = split_key(store_key)
        return by_index(OWNER_INDEX, owner_key(kind, namespace, name))

    return pods


def _stage_label(stage: str) -> str:
    return stage or "New"


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class SchedulerLoop:
    """Runs scheduler passes over the informer caches when something relevant changes."""

    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        metrics: Metrics,
        recorder: EventRecorder,
        plugins: Mapping[str, JobPlugin[Any]],
        jobs: Mapping[str, Informer[Obj]],
        pods: Informer[PodInfo],
        foreign_pods: Informer[ForeignPodUsage],
        nodes: Informer[NodeInfo],
        context: ContextSource,
        config: SchedulerConfig,
        concurrency: int = 16,
        requeue_write_delay: float = 60.0,
        position_interval: float = 10.0,
        retry_delay: float = 1.0,
        resync_period: float | None = 300.0,
        pins: Informer[Obj] | None = None,
        pass_gap: float = 1.0,
        decide_in_thread: bool = True,
    ) -> None:
        missing = [kind for kind in plugins if kind not in jobs]
        if missing:
            raise ValueError(f"no job informer for kinds {missing}")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if pass_gap < 0:
            raise ValueError("pass_gap must not be negative")
        self._client = client
        self._clock = clock
        #: Our ConfigMaps, where ``PinsInputs`` plugins keep the inputs a started job runs with.
        self._pins = pins
        self._metrics = metrics
        self._recorder = recorder
        self._plugins = dict(plugins)
        self._jobs = dict(jobs)
        self._pods = pods
        self._foreign_pods = foreign_pods
        self._nodes = nodes
        self._context = context
        self._config = config
        self._gate = _Gate(concurrency)
        self._pass_gap = pass_gap
        #: Run ``schedule`` in the loop's own thread (see :meth:`_decide`); False: on the loop.
        self.decide_in_thread = decide_in_thread
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._requeue_delay = timedelta(seconds=requeue_write_delay)
        self._position_interval = timedelta(seconds=position_interval)
        #: When position-only changes were last written (a round), or None.
        self._positions_written: datetime | None = None
        self._retry_delay = retry_delay
        self._resync = resync_period
        # Static part of the context, for the trigger filters (unit and selector never change).
        self._static = OperatorContext(
            scheduling_unit=context.scheduling_unit, node_selector=context.node_selector
        )
        self._dirty = asyncio.Event()
        #: Set when a timer changed while :meth:`_wait` may be parked (a write failed).
        self._rearm = asyncio.Event()
        #: The next pass starts no earlier than this (clock.monotonic()), see ``pass_gap``.
        self._hold_until: float | None = None
        self._idle = False
        self._wakeup: datetime | None = None
        self._retry_at: float | None = None
        self._last_pass: float | None = None
        self._written: dict[str, tuple[frozenset[str], Obj]] = {}
        #: Each job's latest status write still in flight.
        self._pending: dict[str, _Pending] = {}
        #: Jobs (plan keys) whose last write conflicted, until the watch delivers a newer version
        #: or a later pass writes them again.
        self._conflicted: set[str] = set()
        self._tasks: set[asyncio.Task[bool]] = set()
        self._versions = itertools.count(1)
        self._views = _ViewMemo()
        #: Jobs a pass shrank in the last ``URGENT_FOR`` seconds: the priority of what it made
        #: room for (their own if nothing), until when (clock.monotonic()), and the size it
        #: gave them.
        self._urgent: dict[str, tuple[int, float, int]] = {}
        #: Jobs a pass admitted or grew in the last ``URGENT_FOR`` seconds: the size it gave
        #: them, and until when.
        self._grown: dict[str, tuple[int, float]] = {}
        self._stage_labels: set[tuple[str, str]] = {
            (kind, stage) for kind in self._plugins for stage in STAGE_LABELS
        }
        #: Passes run so far and the last plan (for tests and debugging).
        self.passes = 0
        self.last_plan: Plan | None = None

    def priority_of(self, kind: str, key: str) -> int:
        """The rank of job ``namespace/name`` of ``kind`` for ordering reconciles: its priority
        as the last pass saw it (0 for a job no pass has parsed yet).

        A job a pass resized in the last ``URGENT_FOR`` seconds ranks in the resize band, above
        every other job (``RESIZE_BAND`` plus its rank), until its live pods show the resize
        acted on (a grown job has as many as its size, a shrunk one no more): until then the
        resize is capacity lying idle, or a grant waiting for it, while every other reconcile
        (a new job's ``Created`` condition, the pod counts of a job that has its pods) is
        bookkeeping. The band ends with the pods, not with the time: the reconciles that follow
        a grant (its pods created, bound, running) must not queue ahead of the next grant.

        Within the band a job a pass shrank or preempted ranks just above the highest-priority
        job that pass admitted or grew (just above its own when it grew none): its pods must go
        before the beneficiary's can bind, and a beneficiary whose pods are created first finds
        no room, so kube-scheduler parks them and retries with backoff. Just above rather than
        level also keeps the victim of an equal-priority (LAS) preemption from queueing behind
        every new job of its priority, holding capacity that kube-scheduler then gives to
        whichever pending pod it tries first once freed, not to the job it was freed for.
        Measured on the scheduler-heavy bench: victims' deletions p95 47 s (level) -> 11 s
        (just above)."""
        namespace, _, name = key.partition("/")
        value = 0 if (found := self._views.priority(kind, namespace, name)) is None else found
        plan_key = f"{kind}/{key}"
        if self._is_urgent(plan_key):
            if self._live_pods(kind, key) > self._urgent[plan_key][2]:
                return RESIZE_BAND + self._rank(plan_key, value) + 1
            return value
        size, until = self._grown.get(plan_key, (0, 0.0))
        if until > self._clock.monotonic() and self._live_pods(kind, key) < size:
            return RESIZE_BAND + value
        return value

    def _live_pods(self, kind: str, key: str) -> int:
        """How many of job ``key``'s pods exist and are not being deleted."""
        pods = _owned(self._pods.store.by_index, kind, key)()
        return sum(1 for p in pods if p.deletion_timestamp is None)

    def _rank(self, plan_key: str, priority: int) -> int:
        """``priority``, raised to a beneficiary's while the job is in ``_urgent`` (the order of
        status writes: a beneficiary's, then its victims')."""
        return max(priority, self._urgent[plan_key][0]) if self._is_urgent(plan_key) else priority

    def _is_urgent(self, plan_key: str) -> bool:
        urgent = self._urgent.get(plan_key)
        return urgent is not None and urgent[1] > self._clock.monotonic()

    # --- triggering ----------------------------------------------------------------------------

    def trigger(self) -> None:
        """Ask for a pass soon. Never blocks; any number of calls before it starts yield one."""
        self._dirty.set()

    @property
    def pending(self) -> bool:
        """Whether a pass has been asked for and not started yet."""
        return self._dirty.is_set()

    @property
    def idle(self) -> bool:
        """Whether :meth:`run` is parked, waiting for a trigger or a timer."""
        return self._idle

    @property
    def writing(self) -> int:
        """How many status writes are in flight (started or waiting for the gate)."""
        return len(self._tasks)

    def _on_job(
        self, kind: str, plugin: JobPlugin[Any]
    ) -> Callable[[str, Obj | None, Obj | None], None]:
        def handler(event_type: str, old: Obj | None, new: Obj | None) -> None:
            if (
                old is None
                or new is None
                or job_signature(old, plugin) != job_signature(new, plugin)
            ):
                self.trigger()
            elif self._conflicted:
                meta = new.get("metadata") or {}
                key = job_key(
                    kind=kind,
                    namespace=str(meta.get("namespace") or ""),
                    name=str(meta.get("name") or ""),
                )
                if key in self._conflicted:
                    self._conflicted.discard(key)
                    self.trigger()  # the version our write conflicted with: retry on it now

        return handler

    def _on_pod(self, event_type: str, old: PodInfo | None, new: PodInfo | None) -> None:
        if old is None or new is None or pod_signature(old) != pod_signature(new):
            self.trigger()

    def _on_foreign(
        self, event_type: str, old: ForeignPodUsage | None, new: ForeignPodUsage | None
    ) -> None:
        ctx = self._static
        if any(u is not None and takes_capacity(u, ctx) for u in (old, new)):
            self.trigger()

    def _on_node(self, event_type: str, old: NodeInfo | None, new: NodeInfo | None) -> None:
        ctx = self._static
        if old is None or new is None or node_signature(old, ctx) != node_signature(new, ctx):
            self.trigger()

    def _register(self) -> list[Callable[[], None]]:
        removers = [
            self._jobs[kind].add_handler(self._on_job(kind, plugin))
            for kind, plugin in self._plugins.items()
        ]
        removers.append(self._pods.add_handler(self._on_pod))
        removers.append(self._foreign_pods.add_handler(self._on_foreign))
        removers.append(self._nodes.add_handler(self._on_node))
        return removers

    # --- running -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Register the handlers and run passes until cancelled."""
        removers = self._register()
        self.trigger()
        log.info("scheduler.started", kinds=list(self._plugins), strategy=self._config.strategy)
        try:
            while True:
                await self._wait()
                if self._hold_until is not None:
                    hold = self._hold_until - self._clock.monotonic()
                    if hold > 0:
                        await self._clock.sleep(hold)
                self._dirty.clear()
                try:
                    await self.run_once(wait=False)
                except Exception:
                    log.exception("scheduler.pass_failed")
                    self._retry_at = self._clock.monotonic() + self._retry_delay
        finally:
            for remove in removers:
                remove()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None

    def _timeout(self) -> float | None:
        """Seconds until the earliest timer (plan wakeup, retry, resync); None: no timer."""
        clock = self._clock
        timeouts: list[float] = []
        if self._wakeup is not None:
            timeouts.append((self._wakeup - clock.now()).total_seconds())
        if self._retry_at is not None:
            timeouts.append(self._retry_at - clock.monotonic())
        if self._resync is not None and self._last_pass is not None:
            timeouts.append(self._last_pass + self._resync - clock.monotonic())
        return min(timeouts) if timeouts else None

    async def _wait(self) -> None:
        """Until a trigger or a timer; a timer set meanwhile (``_rearm``) is waited for too."""
        while True:
            if self._dirty.is_set():
                return
            timeout = self._timeout()
            if timeout is not None and timeout <= 0:
                return
            self._rearm.clear()
            rearmed = asyncio.ensure_future(self._rearm.wait())
            waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._dirty.wait()), rearmed}
            timer = None if timeout is None else asyncio.ensure_future(self._clock.sleep(timeout))
            if timer is not None:
                waiters.add(timer)
            self._idle = True
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._idle = False
                for waiter in waiters:
                    waiter.cancel()
                await asyncio.gather(*waiters, return_exceptions=True)
            fired = timer is not None and timer.done() and not timer.cancelled()
            if fired or self._dirty.is_set():
                return

    # --- one pass ------------------------------------------------------------------------------

    def _current(self, plan_key: str, cached: Obj) -> tuple[Obj, frozenset[str], _Pending | None]:
        """Our last write of the object (in flight, or done) while the cache still shows an
        older version of ours.

        Returns the object to use, the versions it supersedes and the write in flight it
        stands for (or None).
        """
        rv = _rv(cached)
        pending = self._pending.get(plan_key)
        if pending is not None and rv in pending.stale:
            return pending.obj, frozenset(pending.stale), pending
        written = self._written.get(plan_key)
        if written is not None:
            stale, patched = written
            if rv in stale:
                return patched, stale, None
            del self._written[plan_key]
        return cached, frozenset((rv,)), None

    def _collect(
        self, ctx: OperatorContext, stages: Counter[tuple[str, str]]
    ) -> tuple[dict[str, _Entry], int]:
        entries: dict[str, _Entry] = {}
        invalid = 0
        by_index = self._pods.store.by_index
        self._views.begin(ctx)
        for kind, plugin in self._plugins.items():
            informer = self._jobs[kind]
            resource = informer.resource
            # Once per kind: a runtime-checkable Protocol's isinstance is slow (12 % of a pass).
            pins = isinstance(plugin, PinsInputs)
            for store_key, cached in informer.store.items():
                obj, stale, prior = self._current(f"{kind}/{store_key}", cached)
                pinned = self._pinned(plugin, obj, split_key(store_key)[0]) if pins else None
                view, previous = self._views.view(
                    (kind, store_key),
                    plugin,
                    obj,
                    _owned(by_index, kind, store_key),
                    ctx=ctx,
                    pinned=pinned,
                )
                if view is None:
                    continue  # another controller (e.g. MultiKueue) owns this job
                if isinstance(view, Invalid):
                    invalid += 1
                    stage = previous.get("stage")
                    stages[kind, _stage_label(stage if isinstance(stage, str) else "")] += 1
                    continue
                entries[view.key] = _Entry(
                    kind, plugin, resource, obj, view, previous, stale, prior
                )
        for key in [k for k in self._written if k not in entries]:
            del self._written[key]
        self._conflicted &= entries.keys()
        self._views.end()
        return entries, invalid

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

    def _needs_write(
        self, plan: Plan, entry: _Entry, now: datetime, flushes: list[datetime]
    ) -> _Need:
        """What ``entry`` needs this pass; a deferred requeueTime appends its due time to
        ``flushes``."""
        decision = plan[entry.view.key]
        if decision.changed_fields:  # most decisions change nothing: skip the set arithmetic
            state = decision.changed_fields - ACCOUNTING_FIELDS
            due = self._requeue_due(entry.view, decision) if state == _REQUEUE_ONLY else None
            if due is not None and now < due:
                flushes.append(due)
                state = frozenset()
            if state:
                return _Need.WRITE
            accounting = decision.changed_fields & ACCOUNTING_FIELDS
            if accounting and None in (entry.view.service_updated_at, decision.service_updated_at):
                return _Need.WRITE  # a running job's service clock is persisted once
        if entry.previous.get("queuePosition") != shown_position(decision):
            return _Need.MOVED
        return _Need.NOTHING

    def _requeue_due(self, view: JobView, decision: Decision) -> datetime | None:
        """When a requeueTime that only starts the pending clock must be written (see the
        contract), or ``None`` when it is not such a value."""
        start = decision.requeue_time
        if view.requeue_time is not None or start is None or start != view.pending_since:
            return None
        return start + self._requeue_delay

    async def run_once(self, *, wait: bool = True) -> Plan:
        """One pass: snapshot, decide, start the writes, record metrics; returns the plan.

        With ``wait`` the pass returns once its writes are done (and their events recorded);
        without, it returns as soon as they are started (:meth:`run` does that)."""
        started = self._clock.monotonic()
        self._retry_at = None
        now = utc_now(self._clock.now())
        ctx = self._context.current()
        stages: Counter[tuple[str, str]] = Counter()
        nodes = node_views(self._nodes.store.list(), self._foreign_pods.store.list(), ctx)
        entries, invalid = self._collect(ctx, stages)
        log.debug("scheduler.snapshot", nodes=len(nodes), jobs=len(entries), invalid=invalid)
        snapshot = Snapshot(
            nodes=nodes, jobs=tuple(e.view for e in entries.values()), config=self._config
        )
        plan = await self._decide(snapshot, now)
        self._note_urgent(plan, entries)
        flushes: list[datetime] = []
        needs = {key: self._needs_write(plan, e, now, flushes) for key, e in entries.items()}
        todo = [entries[key] for key, need in needs.items() if need is _Need.WRITE]
        moved = [entries[key] for key, need in needs.items() if need is _Need.MOVED]
        last = self._positions_written
        round_due = None if last is None else last + self._position_interval
        if round_due is None or now >= round_due:
            todo += moved
            if moved or round_due is None:  # the first pass counts as a round
                self._positions_written = now
        elif moved:
            flushes.append(round_due)
        log.debug(
            "scheduler.decided",
            now=now.isoformat(),
            writes=len(todo),
            capacity_total=plan.capacity_total,
            capacity_used=plan.capacity_used,
            next_wakeup=None if plan.next_wakeup is None else plan.next_wakeup.isoformat(),
        )
        # Highest priority first (a shrunk job at its beneficiary's, just after it): the gate
        # admits writes in this order, so an urgent grant is not written behind a pass's worth
        # of bookkeeping. (Their reconciles then run victims first: see ``priority_of``.)
        todo.sort(
            key=lambda e: (-self._rank(e.view.key, e.view.priority), e.view.key in self._urgent)
        )
        tasks = [self._launch(e, plan[e.view.key], now) for e in todo]
        for entry in entries.values():
            stages[entry.kind, _stage_label(plan[entry.view.key].stage)] += 1
        wakeups = [*flushes, *([plan.next_wakeup] if plan.next_wakeup is not None else [])]
        self._wakeup = min(wakeups, default=None)
        self.passes += 1
        self.last_plan = plan
        decided = self._clock.monotonic()
        self._hold_until = decided + (decided - started) * self._pass_gap
        failed = 0
        if wait and tasks:
            failed = sum(1 for ok in await asyncio.gather(*tasks) if not ok)
        ended = self._clock.monotonic()
        self._observe(plan, stages, seconds=ended - started)
        self._last_pass = ended
        (log.info if todo else log.debug)(
            "scheduler.pass",
            passes=self.passes,
            jobs=len(entries),
            written=len(todo) - failed,
            failed=failed,
            seconds=round(ended - started, 6),
        )
        return plan

    async def _decide(self, snapshot: Snapshot, now: datetime) -> Plan:
        """``schedule(snapshot, now)``, in the loop's own thread when ``decide_in_thread``.

        The core is pure and the snapshot immutable, so it may run while the event loop goes
        on: meanwhile responses, watch events and reconciles proceed (the GIL hands the loop a
        turn every few milliseconds) instead of waiting for the whole decision, about half of
        a pass. Nothing the core reads changes meanwhile; what the loop changes (writes in
        flight finishing) is reconciled by ``_launch``."""
        if not self.decide_in_thread:
            return schedule(snapshot, now)
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="lattice-schedule"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, schedule, snapshot, now)

    def _note_urgent(self, plan: Plan, entries: Mapping[str, _Entry]) -> None:
        """Remember the jobs ``plan`` shrinks, and the ones it grows, for ``URGENT_FOR``
        seconds; forget expired ones, and a job's shrink once a plan grows it again (and the
        other way round)."""
        clock = self._clock.monotonic()
        until = clock + URGENT_FOR
        shrunk, grown = _urgency(plan, entries)
        kept = {
            k: v
            for k, v in self._urgent.items()
            if v[1] > clock and k not in grown and k in entries
        }
        kept.update((k, (priority, until, plan[k].size)) for k, priority in shrunk.items())
        self._urgent = kept
        if grown or self._grown:
            held = {
                k: v
                for k, v in self._grown.items()
                if v[1] > clock and k not in kept and k in entries
            }
            held.update((k, (plan[k].size, until)) for k in grown)
            self._grown = held

    def _launch(self, entry: _Entry, decision: Decision, now: datetime) -> asyncio.Task[bool]:
        """Start writing ``decision`` for ``entry``; from now on passes see the job as written.

        A job whose previous write is still in flight (``entry.obj`` is that write's result)
        gets its new write chained behind it: it goes out, based on the version the previous
        one produced, only if that one succeeded."""
        key = entry.view.key
        self._conflicted.discard(key)  # this write is based on what a pass saw since
        fields = status_fields(decision, view=entry.view, previous=entry.previous, now=now)
        # The write ``entry.obj`` stands for, as the snapshot saw it: it may have finished
        # while the core ran, and left ``_pending`` (then the version it produced is stale too).
        prior = entry.prior
        stale = set(entry.stale)
        if prior is not None and prior.written is not None:
            stale.add(prior.written)
        pending = _Pending(
            obj=with_status(
                entry.obj,
                entry.plugin.scheduling_path,
                fields,
                version=f"lattice-pending-{next(self._versions)}",
            ),
            stale=stale,
        )
        rank = self._rank(key, entry.view.priority)
        task = asyncio.create_task(
            self._write(entry, decision, fields, pending=pending, prior=prior, rank=rank)
        )
        pending.task = task
        self._pending[key] = pending
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _write(
        self,
        entry: _Entry,
        decision: Decision,
        fields: Mapping[str, Any],
        *,
        pending: _Pending,
        prior: _Pending | None,
        rank: int,
    ) -> bool:
        view, plugin = entry.view, entry.plugin
        result: str | None = None  # stays None if cancelled
        try:
            if prior is None:
                based_on = _rv(entry.obj)
            else:
                assert prior.task is not None
                if not await prior.task or prior.written is None:
                    result = "dropped"
                    return False
                based_on = prior.written
            log.debug(
                "scheduler.write",
                job=view.key,
                changed=sorted(k for k, v in fields.items() if entry.previous.get(k) != v),
            )
            body = status_patch(plugin.scheduling_path, fields, resource_version=based_on)
            await self._gate.acquire(rank)
            try:
                patched = await self._client.patch(
                    entry.resource, view.name, body, namespace=view.namespace, subresource="status"
                )
            except (Conflict, NotFound) as exc:
                result = "conflict" if isinstance(exc, Conflict) else "not_found"
                log.debug("scheduler.write_skipped", job=view.key, reason=type(exc).__name__)
                if isinstance(exc, Conflict):
                    self._retry_on_newer(entry, based_on, pending)
                return False
            except ApiError as exc:
                result = "error"
                log.warning("scheduler.write_failed", job=view.key, error=str(exc))
                return False
            except Exception:
                result = "error"
                log.exception("scheduler.write_crashed", job=view.key)
                return False
            finally:
                self._gate.release()
            rv = _rv(patched) if isinstance(patched, dict) else ""
            if rv:
                pending.written = rv
                self._written[view.key] = (frozenset(pending.stale | {based_on}), patched)
                latest = self._pending.get(view.key)
                if latest is not None and latest is not pending:
                    latest.stale.add(rv)  # a later write of ours supersedes this version too
            result = "ok"
            self._emit(entry, decision)
            return True
        finally:
            if self._pending.get(view.key) is pending:
                del self._pending[view.key]
            if result is not None:
                self._metrics.status_writes.labels(result).inc()
            if result not in (None, "ok"):
                self._retry_at = self._clock.monotonic() + self._retry_delay
                self._rearm.set()

    def _retry_on_newer(self, entry: _Entry, based_on: str, pending: _Pending) -> None:
        """After a conflict, run a pass as soon as the cache holds the version someone else
        wrote (the trigger filters would ignore it: a reconciler's conditions, say), rather than
        after ``retry_delay``. A pass run earlier would decide on the same version and conflict
        again. ``retry_delay`` stays the safety net."""
        view = entry.view
        cached = self._jobs[entry.kind].store.get(f"{view.namespace}/{view.name}")
        rv = None if cached is None else _rv(cached)
        if rv is not None and rv != based_on and rv not in pending.stale:
            self.trigger()  # the watch delivered it before the 409 came back
        else:
            self._conflicted.add(view.key)

    def _emit(self, entry: _Entry, decision: Decision) -> None:
        if not decision.events:
            return
        view = entry.view
        uid = str((entry.obj.get("metadata") or {}).get("uid") or "")
        ref = ObjectRef(entry.resource.api_version, entry.kind, view.namespace, view.name, uid)
        for event in decision.events:
            self._recorder.record(ref, type=event.type, reason=event.reason, note=event.message)
            self._metrics.decisions.labels(event.reason).inc()
            if isinstance(event, Preempted) and event.beneficiary is not None:
                self._metrics.preemptions.inc()
            log.debug("scheduler.event", job=view.key, reason=event.reason, message=event.message)

    def _observe(self, plan: Plan, stages: Counter[tuple[str, str]], *, seconds: float) -> None:
        m = self._metrics
        m.pass_duration.observe(seconds)
        self._stage_labels.update(stages)
        for kind, stage in self._stage_labels:
            m.jobs.labels(kind, stage).set(stages.get((kind, stage), 0))
        m.capacity.labels("total").set(plan.capacity_total)
        m.capacity.labels("used").set(plan.capacity_used)
