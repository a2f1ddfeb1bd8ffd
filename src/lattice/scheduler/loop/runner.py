"""The scheduler loop: the thin impure shell that feeds the pure core and persists its plan.

Contract:
- **A pass** (:meth:`SchedulerLoop.run_once`) runs five numbered, individually timed steps (as
  Kueue's scheduler cycle does); their durations are logged with each pass (``scheduler.pass``
  at info level for a pass that wrote, ``scheduler.steps`` at debug level always):
  1. *snapshot*: every job's view, read from the informer caches through the scheduler's own
     writes (:mod:`.collect`, :mod:`.memo`, :mod:`.writer`), then every node's free resources
     (:mod:`.nodes`: allocatable minus the live pods no placement of those views covers);
  2. *decide*: ``schedule(snapshot, now)`` with ``now`` in UTC to the microsecond, in a thread
     of the loop's own (``decide_in_thread``): the core is pure and the snapshot immutable, so
     the event loop serves responses, watch events and reconciles meanwhile;
  3. *choose*: the jobs whose block to write, from the pure write policy (:mod:`.policy`),
     plus the finished jobs whose block does not show it yet (:mod:`.terminal`); the resize
     band is updated (:mod:`.ranking`);
  4. *write*: each chosen job's complete scheduler block (``snapshot.status_fields``, the
     terminal fields over it) is started as a merge patch without a resourceVersion
     precondition (:mod:`.writer`: the scheduler is the one writer of its block), highest rank
     first;
  5. *observe*: metrics (the queue gauges of :mod:`.outcomes`; what a written decision counts
     for is recorded once its write succeeded).
  Only status is written: the kind reconcilers turn ``currentSize`` into pods.
- **Passes do not wait for their writes** (:meth:`run`): a pass ends once its writes are
  started; a job whose write is in flight is read as written. The next pass starts no sooner
  than ``pass_gap`` times the last pass's duration after it, so passes take at most
  ``1 / (1 + pass_gap)`` of the event loop (half by default) and the reconcilers keep the rest.
- **When** (:mod:`.triggers`): informer triggers, coalesced; plus the plan's ``next_wakeup``,
  a deferred write falling due, the retry timer (``retry_delay`` after a failed write or pass)
  and a ``resync_period`` safety net.
- **Metrics**: pass duration, ``lattice_jobs{kind,stage}`` for every (enabled kind, stage)
  each pass (stage "" shows as ``New``), capacity total/used, pending and admitted jobs per
  kind and namespace; the writer's per write, with the admission wait, preemptions, evictions
  and resizes of each written decision (:mod:`.outcomes`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import structlog

from lattice.frameworks.base import JobPlugin
from lattice.scheduler.core import Plan, SchedulerConfig, Snapshot, Stage, schedule
from lattice.scheduler.loop.collect import Collected, Collector, Entry, stage_label
from lattice.scheduler.loop.nodes import node_views
from lattice.scheduler.loop.options import LoopServices, LoopSources, LoopTuning
from lattice.scheduler.loop.outcomes import QueueGauges, outcome_of, record
from lattice.scheduler.loop.policy import Candidate, WriteTiming, choose_writes
from lattice.scheduler.loop.ranking import Ranking
from lattice.scheduler.loop.snapshot import status_fields, utc_now
from lattice.scheduler.loop.terminal import INVALID_SPEC
from lattice.scheduler.loop.triggers import Triggers
from lattice.scheduler.loop.writer import Writer

__all__ = ["STAGE_LABELS", "SchedulerLoop"]

log = structlog.get_logger(__name__)

#: ``lattice_jobs`` stage label values set every pass ("" is shown as ``New``).
STAGE_LABELS: tuple[str, ...] = (
    "New",
    Stage.WAITING,
    Stage.RUNNING,
    Stage.REQUEUE_COOLDOWN,
    Stage.COMPLETED,
    Stage.WRONG,
    Stage.FAILED,
    "Cancelled",
)


class _Steps:
    """The numbered steps of a pass and their durations (``clock.monotonic()`` laps)."""

    def __init__(self, loop: SchedulerLoop) -> None:
        self._clock = loop.services.clock
        self.started = self._last = self._clock.monotonic()
        self.seconds: dict[str, float] = {}

    def lap(self, name: str) -> float:
        now = self._clock.monotonic()
        self.seconds[f"{len(self.seconds) + 1}-{name}"] = round(now - self._last, 6)
        self._last = now
        return now


class SchedulerLoop:
    """Runs scheduler passes over the informer caches when something relevant changes."""

    def __init__(
        self,
        *,
        plugins: Mapping[str, JobPlugin[Any]],
        sources: LoopSources,
        services: LoopServices,
        config: SchedulerConfig,
        tuning: LoopTuning | None = None,
    ) -> None:
        missing = [kind for kind in plugins if kind not in sources.jobs]
        if missing:
            raise ValueError(f"no job informer for kinds {missing}")
        self.plugins = dict(plugins)
        self.sources = sources
        self.services = services
        self.config = config
        self.tuning = tuning = tuning or LoopTuning()
        #: Run ``schedule`` in the loop's own thread (see :meth:`_decide`); False: on the loop.
        self.decide_in_thread = tuning.decide_in_thread
        self._timing = WriteTiming(
            requeue_write_delay=timedelta(seconds=tuning.requeue_write_delay),
            position_interval=timedelta(seconds=tuning.position_interval),
        )
        self._triggers = Triggers(services.clock)
        self._writer = Writer(
            client=services.client,
            clock=services.clock,
            metrics=services.metrics,
            recorder=services.recorder,
            concurrency=tuning.concurrency,
            on_failure=self._retry_soon,
        )
        self._collector = Collector(
            plugins=self.plugins,
            jobs=sources.jobs,
            pods=sources.pods,
            pins=sources.pins,
            current=self._writer.current,
        )
        self._ranking = Ranking(services.clock, live_pods=self._collector.live_pods)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        #: When position-only changes were last written (a round), or None.
        self._positions_written: datetime | None = None
        #: The next pass starts no earlier than this (clock.monotonic()), see ``pass_gap``.
        self._hold_until: float | None = None
        self._wakeup: datetime | None = None
        self._retry_at: float | None = None
        self._last_pass: float | None = None
        self._stage_labels: set[tuple[str, str]] = {
            (kind, stage) for kind in self.plugins for stage in STAGE_LABELS
        }
        services.metrics.init_kinds(self.plugins)
        self._gauges = QueueGauges(services.metrics)
        #: Passes run so far and the last plan (for tests and debugging).
        self.passes = 0
        self.last_plan: Plan | None = None

    # --- for the controllers and tests ---------------------------------------------------------

    def priority_of(self, kind: str, key: str) -> int:
        """The rank of job ``namespace/name`` of ``kind`` for ordering reconciles: its priority
        as the last pass saw it (0 for a job no pass has parsed yet), in the resize band while
        a resize waits for its pods (see :mod:`.ranking`)."""
        namespace, _, name = key.partition("/")
        found = self._collector.memo.priority(kind, namespace, name)
        return self._ranking.priority_of(kind, key, 0 if found is None else found)

    def trigger(self) -> None:
        """Ask for a pass soon. Never blocks; any number of calls before it starts yield one."""
        self._triggers.fire()

    @property
    def pending(self) -> bool:
        """Whether a pass has been asked for and not started yet."""
        return self._triggers.pending

    @property
    def idle(self) -> bool:
        """Whether :meth:`run` is parked, waiting for a trigger or a timer."""
        return self._triggers.idle

    @property
    def writing(self) -> int:
        """How many status writes are in flight (started or waiting for the gate)."""
        return self._writer.writing

    # --- running -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Register the handlers and run passes until cancelled."""
        s = self.sources
        removers = self._triggers.register(
            plugins=self.plugins,
            jobs=s.jobs,
            pods=s.pods,
            foreign_pods=s.foreign_pods,
            nodes=s.nodes,
        )
        self.trigger()
        log.info("scheduler.started", kinds=list(self.plugins), strategy=self.config.strategy)
        clock = self.services.clock
        try:
            while True:
                await self._triggers.wait(self._timeout)
                if self._hold_until is not None:
                    hold = self._hold_until - clock.monotonic()
                    if hold > 0:
                        await clock.sleep(hold)
                self._triggers.take()
                try:
                    await self.run_once(wait=False)
                except Exception:
                    log.exception("scheduler.pass_failed")
                    self._retry_at = clock.monotonic() + self.tuning.retry_delay
        finally:
            for remove in removers:
                remove()
            await self._writer.close()
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None

    def _retry_soon(self) -> None:
        """A write failed: run another pass ``retry_delay`` from now."""
        self._retry_at = self.services.clock.monotonic() + self.tuning.retry_delay
        self._triggers.rearm()

    def _timeout(self) -> float | None:
        """Seconds until the earliest timer (plan wakeup, retry, resync); None: no timer."""
        clock = self.services.clock
        timeouts: list[float] = []
        if self._wakeup is not None:
            timeouts.append((self._wakeup - clock.now()).total_seconds())
        if self._retry_at is not None:
            timeouts.append(self._retry_at - clock.monotonic())
        resync = self.tuning.resync_period
        if resync is not None and self._last_pass is not None:
            timeouts.append(self._last_pass + resync - clock.monotonic())
        return min(timeouts) if timeouts else None

    # --- one pass ------------------------------------------------------------------------------

    async def run_once(self, *, wait: bool = True) -> Plan:
        """One pass (see the contract); returns the plan.

        With ``wait`` the pass returns once its writes are done (and their events recorded);
        without, it returns as soon as they are started (:meth:`run` does that)."""
        steps = _Steps(self)
        self._retry_at = None
        now = utc_now(self.services.clock.now())
        # 1. snapshot
        ctx = self.services.context.current()
        s = self.sources
        collected = self._collector.collect(ctx)
        nodes = node_views(
            s.nodes.store.list(),
            ctx=ctx,
            foreign=s.foreign_pods.store.list(),
            pods=s.pods.store.list(),
            placed=collected.placed,
        )
        entries = collected.entries
        self._writer.retain({*entries, *(e.key for e in collected.ended)})
        snapshot = Snapshot(
            nodes=nodes, jobs=tuple(e.view for e in entries.values()), config=self.config
        )
        steps.lap("snapshot")
        # 2. decide
        plan = await self._decide(snapshot, now)
        steps.lap("decide")
        # 3. choose
        self._ranking.note(plan, {key: e.view for key, e in entries.items()})
        choice = choose_writes(
            plan,
            {k: Candidate(e.view, e.memo.block, e.memo.terminal) for k, e in entries.items()},
            now=now,
            positions_written=self._positions_written,
            timing=self._timing,
        )
        self._positions_written = choice.positions_written
        # Highest priority first (a shrunk job at its beneficiary's, just before it): the gate
        # admits writes in this order, so an urgent grant is not written behind a pass's worth
        # of bookkeeping, and an operator killed between the writes leaves capacity released
        # but not yet granted, never granted twice. (Their reconciles run victims first too:
        # see ``priority_of``.)
        todo = sorted(
            (entries[key] for key in choice.write),
            key=lambda e: (
                -self._ranking.rank(e.key, e.view.priority),
                not self._ranking.is_shrunk(e.key),
            ),
        )
        steps.lap("choose")
        # 4. write
        tasks = [self._launch(e, plan, now) for e in todo]
        tasks += [self._writer.launch(e.target(), e.memo.terminal or {}) for e in collected.ended]
        wakeups = [t for t in (choice.wakeup, plan.next_wakeup) if t is not None]
        self._wakeup = min(wakeups, default=None)
        self.passes += 1
        self.last_plan = plan
        decided = self.services.clock.monotonic()
        self._hold_until = decided + (decided - steps.started) * self.tuning.pass_gap
        failed = 0
        if wait and tasks:
            failed = sum(1 for ok in await asyncio.gather(*tasks) if not ok)
        steps.lap("write")
        # 5. observe
        ended = self._observe(plan, collected, steps=steps)
        self._last_pass = ended
        log.debug("scheduler.steps", passes=self.passes, **steps.seconds)
        (log.info if tasks else log.debug)(
            "scheduler.pass",
            passes=self.passes,
            jobs=len(entries),
            invalid=collected.invalid,
            written=len(tasks) - failed,
            failed=failed,
            seconds=round(ended - steps.started, 6),
            steps=steps.seconds,
        )
        return plan

    async def _decide(self, snapshot: Snapshot, now: datetime) -> Plan:
        """``schedule(snapshot, now)``, in the loop's own thread when ``decide_in_thread``.

        Nothing the core reads changes meanwhile; what the loop changes (writes in flight
        finishing) is read back by the next pass."""
        if not self.decide_in_thread:
            return schedule(snapshot, now)
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="lattice-schedule"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, schedule, snapshot, now)

    def _launch(self, entry: Entry, plan: Plan, now: datetime) -> asyncio.Task[bool]:
        """Start writing ``entry``'s block after ``plan`` (terminal fields over the decision's)."""
        view = entry.view
        decision = plan[view.key]
        fields = status_fields(
            decision, view=view, previous=entry.memo.block, now=now, naming=entry.memo.naming
        )
        if entry.memo.terminal is not None:
            fields.update(entry.memo.terminal)
        elif entry.memo.block.get("reason") == INVALID_SPEC:
            fields.update(reason=None, message=None)  # judged valid again
        log.debug(
            "scheduler.write",
            job=view.key,
            changed=sorted(k for k, v in fields.items() if entry.memo.block.get(k) != v),
        )
        rank = self._ranking.rank(entry.key, view.priority)
        outcome = outcome_of(decision, view=view, block=entry.memo.block, now=now)
        written = (
            None if outcome is None else functools.partial(record, self.services.metrics, outcome)
        )
        return self._writer.launch(
            entry.target(), fields, events=decision.events, rank=rank, on_written=written
        )

    def _observe(self, plan: Plan, collected: Collected, *, steps: _Steps) -> float:
        stages = collected.stages
        for key, entry in collected.entries.items():
            terminal = entry.memo.terminal
            stage = terminal["stage"] if terminal is not None else plan[key].stage
            stages[entry.kind, stage_label(stage)] += 1
        m = self.services.metrics
        self._stage_labels.update(stages)
        for kind, stage in self._stage_labels:
            m.jobs.labels(kind, stage).set(stages.get((kind, stage), 0))
        self._gauges.update(
            (e.view, plan[key]) for key, e in collected.entries.items() if e.memo.terminal is None
        )
        m.capacity.labels("total").set(plan.capacity_total)
        m.capacity.labels("used").set(plan.capacity_used)
        ended = steps.lap("observe")
        m.pass_duration.observe(ended - steps.started)
        return ended
