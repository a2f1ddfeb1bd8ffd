"""``schedule(snapshot, now) -> Plan``: the pure, deterministic, kind-agnostic scheduler pass.

No I/O, no clock (``now`` is an argument), no randomness; unordered inputs are sorted first,
so shuffling ``snapshot.nodes`` or ``snapshot.jobs`` never changes the plan. The policy:

1. *Candidates* are jobs in ``Waiting`` or ``Running`` that are not finished, not suspended
   and valid. A new job (stage ``""``) becomes ``Waiting`` with ``submit_time`` (if unset) and
   ``queued_time`` = now; a ``Waiting``/``Running`` job without ``queued_time`` is queued at
   now; a ``RequeueCooldown`` job whose ``cooldown_time`` <= now becomes ``Waiting`` with a new
   ``queued_time`` = now. Suspended jobs get size 0, stage ``Waiting``, ``queued_time`` None
   (requeued at a fresh time once unsuspended). Finished jobs and stages the scheduler does not
   own (``Completed``, ``Wrong``, anything else) pass through untouched with size 0. A view that
   cannot be scheduled (``JobView.problem()``, e.g. min > max) becomes ``Wrong`` with size 0.
2. Candidates are ordered by :mod:`lattice.scheduler.core.order`: priority desc, rank
   (protected running jobs first, then the LAS rank), queued_time, incumbency (running jobs by
   ``admitted_time``, then the rest), creation_time, namespace/name: a total order.
   ``admitted_time`` = now when a job is admitted from 0, None when it stops. A running job
   with ``min_size == max_size`` that has not opted in (``preemptible_within_priority``) is
   *protected*: it goes first within its priority, so only a higher priority stops it.
   ``LeastAttainedService`` bands grow exponentially with attained service. Band 0 goes first;
   every job past it is ordered by its virtual queue time, ``queued_time`` plus
   ``slowdown_limit`` times its band's service in full-size seconds (the starvation guard).
3. *Admission* walks that order and places each job's minimum on nodes, all or nothing
   (:mod:`~lattice.scheduler.core.placement`); a running job keeps its persisted placement
   (:mod:`~lattice.scheduler.core.room`); one that does not fit may preempt (rule 5).
   ``StrictFIFO`` stops at the first job whose minimum does not fit; the others skip it. A
   job that does not fit even on the empty cluster never blocks; a waiting job's reason names
   the binding constraint.
   Each candidate left waiting gets a 1-based ``queue_position`` among the waiting candidates,
   in this order; admitted jobs have none (as Kueue shows positions of pending workloads only,
   so a running job's status does not change whenever the queue behind it moves).
4. Each admitted job gets its minimum; spare capacity then grows the admitted jobs toward
   their target size in the same order, replica by replica while a replica fits on a node.
5. A running job that is not admitted gets size 0 and goes back to ``Waiting`` keeping its
   ``queued_time``; victims are therefore always later in the order (lower priority, or equal
   priority and not protected, and queued later or, under LAS, of a higher rank). An elastic
   job later in the order loses its growth (shrinks towards its minimum) before any minimum is
   refused, so it shrinks rather than stops wherever shrinking frees enough. Events name the
   beneficiary: the earliest job in order that was newly admitted or grew (taking units) in
   this pass.
6. Churn control: a ``Running`` job's target is ``max_size`` only when its last resize is at
   least ``resize_interval`` ago (or it never resized, or the interval is 0); otherwise its
   current size (clamped to [min, max]), so it is not shrunk merely because it may not grow.
   A job admitted from 0 targets ``max_size``. ``last_resize_time`` = now whenever the size
   changes.
7. Pending timeout: for a ``Running`` job with ``pending_since`` set, ``requeue_time`` =
   ``requeue_time or pending_since``; once now - requeue_time >= ``pending_timeout`` the job
   is requeued (:mod:`~lattice.scheduler.core.requeue`): ``RequeueCooldown``, size 0,
   ``requeue_count`` += 1, a doubling cooldown (capacity released in this pass), or stage
   ``Failed`` past ``requeue_limit``; so is one whose ``refused_since`` (children refused
   by the apiserver) is ``child_refusal_timeout`` old. ``requeue_time``: None unless a pod pends.
8. Attained service: a ``Running`` job accrues units_in_use(current_size) * (now -
   service_updated_at) unit-seconds and ``service_updated_at`` = now; a job admitted now gets
   ``service_updated_at`` = now. Service is never reset.
9. Idempotence: ``schedule(apply(s, schedule(s, now)), now)`` changes nothing and emits no
   events; the same inputs always give the same plan.

``Plan.next_wakeup`` is the earliest time after now at which an unchanged snapshot could get
another plan: a cooldown ending, a pending timeout or refusal expiring, a deferred growth becoming
allowed (only when a replica would fit) or a running job's LAS band change.

Cost: *quiet* waiting jobs (:mod:`~lattice.scheduler.core.quiet`) stay sorted from pass to pass
(:mod:`~lattice.scheduler.core.backlog`, which takes ``snapshot.changes`` when given); runs of
them whose gang cannot find room are left waiting at once, and their decisions are built only
when read; so are the decisions of the other jobs (their changed fields are known at once). A
running view's order key is memoised while its band and queue time stay. The plan is the same.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from datetime import datetime
from operator import attrgetter, itemgetter

from lattice.scheduler.core.backlog import backlog, caching
from lattice.scheduler.core.effects import next_wakeup, settle
from lattice.scheduler.core.leftover import Left, from_entry, left_items
from lattice.scheduler.core.model import PodDemand
from lattice.scheduler.core.order import (
    NOT_RUNNING,
    OrderKey,
    full_units,
    incumbency,
    is_protected,
    las_band,
    las_position,
    order_key,
)
from lattice.scheduler.core.plan import Decision, Deferred, Plan
from lattice.scheduler.core.quiet import Entry, LazyDecisions
from lattice.scheduler.core.reserved import empty, reserved
from lattice.scheduler.core.room import (
    Holders,
    make_room,
    min_demands,
    place_missing,
    release_from,
)
from lattice.scheduler.core.state import JobState, changed_fields, to_decision
from lattice.scheduler.core.steps import cooldown_for, grow, prepare
from lattice.scheduler.core.types import JobView, SchedulerConfig, Snapshot, Stage, Strategy

__all__ = ["cooldown_for", "schedule"]

_NEVER = NOT_RUNNING
_RUNNING = Stage.RUNNING  # bound once: an enum member's lookup is slow
# id(view) -> (view, config, LAS band, queue time, rank, order key): a job's order key depends
# on nothing else (views are immutable, so a hit is exact).
_KEYS: dict[int, tuple[JobView, SchedulerConfig, int, datetime, int, OrderKey]] = {}
_first = itemgetter(0)
_Shape = tuple[PodDemand, ...]
_NONE: frozenset[int] = frozenset()
# A gang and the nodes it may not use.
_Memo = tuple[_Shape, frozenset[int]]


class _Pass:
    """The working data of one :func:`schedule` call."""

    def __init__(self, snapshot: Snapshot, now: datetime) -> None:
        self.now = now
        self.config = config = snapshot.config
        self.jobs = jobs = snapshot.jobs
        self.las = config.strategy == Strategy.LEAST_ATTAINED_SERVICE
        self.strict = config.strategy == Strategy.STRICT_FIFO
        # The quiet jobs in order (kept across passes), and the others' working states.
        self.q, others = backlog(jobs, config, now, snapshot.changes)
        self.full = [JobState(view) for view in others]
        # Candidates that are not quiet, by order key (a heap).
        self.heap: list[tuple[OrderKey, JobState]] = []
        self.nodes, self.limit = snapshot.nodes, 8 * len(jobs) + 4096  # memo sizes
        self.empty = self.free = empty(snapshot.nodes, limit=self.limit)  # see candidates()
        self.total = sum(max(0, node.free_units) for node in snapshot.nodes)
        self.fits_empty: dict[_Shape, bool] = {}
        # Gangs that found no room (placing or preempting) at a release generation: they
        # cannot find any until something is released again.
        self.failed: dict[_Memo, int] = {}
        self.hopeless: set[tuple[_Shape, frozenset[int], int]] = set()
        self.holding: list[JobState] = []
        self.holders = Holders(())
        self.explained: dict[_Memo, tuple[str, bool]] = {}
        self.ordered: list[JobState] = []
        self.left: list[Left] = []
        self.admitted_entries: list[Entry] = []
        self.from_entries: list[JobState] = []
        self.candidate_states: list[JobState] = []
        self.protected: list[tuple[OrderKey, JobState]] = []
        self.pinned: set[JobState] = set()
        self.blocker: JobView | None = None
        self.waiting = 0

    def candidates(self) -> None:
        """Rules 1, 7, 8 and the order keys (rule 2) of every job that is not quiet."""
        now, config, memo = self.now, self.config, _KEYS
        if len(memo) > self.limit:
            memo.clear()
        for s in self.full:
            if not prepare(s, now=now, config=config):
                continue
            v = s.view
            at = s.queued or now
            band = las_band(s.attained, config) if self.las else 0
            hit = memo.get(id(v))
            if (
                hit is not None
                and hit[0] is v
                and hit[1] is config
                and hit[2] == band
                and hit[3] is at
            ):
                s.band, s.rank, key = band, hit[4], hit[5]
            else:
                queued = at
                if self.las:
                    s.band = band
                    s.rank, at = las_position(
                        band=band, queued_time=at, units=full_units(v), config=config
                    )
                key = order_key(v, queued_time=at, rank=s.rank)
                memo[id(v)] = (v, config, band, queued, s.rank, key)
            s.key = key
            self.heap.append((key, s))
            self.candidate_states.append(s)
            if s.held:
                self.holding.append(s)
                if is_protected(v):
                    self.protected.append((key, s))
        grace = config.refusal_grace
        self.free = reserved(self.nodes, self.holding, now=now, grace=grace, limit=self.limit)
        self.holding.sort(key=attrgetter("key"))
        self.holders = Holders(self.holding)

    def admit(self) -> None:
        """Rule 3, walking the order.

        Protected jobs (rule 5) that the walk would stop are placed first within their
        priority, and the walk is redone; the order itself does not change.
        """
        heapq.heapify(self.heap)
        if not self.protected:  # nothing to pin: one walk
            self._walk([])
            return
        heap, free = list(self.heap), self.free.copy()
        saved = [(s, list(s.placed)) for s in self.holding]
        pins: list[tuple[OrderKey, JobState]] = []
        while True:
            self._walk(pins)
            stopped = [
                (k, s)
                for k, s in self.protected
                if not s.admitted and not s.victim and (k, s) not in pins
            ]
            if not stopped:
                return
            pins = sorted([*pins, *stopped], key=_first)
            self.heap, self.free = list(heap), free.copy()
            self.ordered, self.left, self.admitted_entries, self.from_entries = [], [], [], []
            self.blocker, self.waiting = None, 0
            self.failed, self.hopeless = {}, set()
            for s in self.candidate_states:
                s.placed, s.victim = [], False
            for s, placed in saved:
                s.placed = list(placed)
            self.holders = Holders(self.holding)
            for s in self.pinned:
                s.admitted = False
                s.size = s.view.current_size
            for s in self.candidate_states:
                s.admitted, s.size, s.position = False, s.view.current_size, None
                s.unfittable, s.blocker, s.free_at_check = False, None, 0

    def _walk(self, pins: list[tuple[OrderKey, JobState]]) -> None:
        """Merge the candidates' heap with the backlog in order; runs of quiet jobs that
        nothing can change (their class is hopeless, or failed since the last release) are
        left waiting at once."""
        heap, keys, classes = self.heap, self.q.keys, self.q.classes
        waiting_pins = list(pins)
        self.pinned = set()
        pending = len(self.candidate_states)
        # Each class's next key, and the classes set aside for a failure that may be stale.
        todo = [(c.keys[0], i) for i, c in enumerate(classes) if c.keys]
        heapq.heapify(todo)
        aside: list[int] = []
        at, end = 0, len(keys)
        while pending or self.blocker is None:
            for ck, ci in [(classes[ci].keys, ci) for ci in aside] if at < end else ():
                if (j := bisect_left(ck, keys[at])) < len(ck):
                    heapq.heappush(todo, (ck[j], ci))
            aside = []
            first: OrderKey | None = heap[0][0] if heap else None
            if at < end and (first is None or keys[at] < first):
                first = keys[at]
            if first is None:
                break
            if waiting_pins and waiting_pins[0][0][0] <= first[0]:
                self._pin(waiting_pins.pop(0)[1])
                continue
            lim: tuple[object, ...] | None = heap[0][0] if heap else None
            if waiting_pins and (lim is None or (waiting_pins[0][0][0],) < lim):
                lim = (waiting_pins[0][0][0],)  # before every key of the pin's priority
            found = self._next_entry(todo, lim, aside)
            stop = lim if found is None else found[0]
            upto = end if stop is None else bisect_left(keys, stop, at)
            self._leave(at, upto)
            at = upto
            if found is not None:
                key, ci = found
                self._admit_entry(self.q.entries[at], key, at)
                at += 1
                ck = classes[ci].keys
                j = bisect_left(ck, key) + 1
                if j < len(ck):
                    heapq.heappush(todo, (ck[j], ci))
            elif heap and stop is heap[0][0]:
                pending -= self._step(heapq.heappop(heap))
        self._leave(at, end)

    def _next_entry(
        self, todo: list[tuple[OrderKey, int]], lim: tuple[object, ...] | None, aside: list[int]
    ) -> tuple[OrderKey, int] | None:
        """The first quiet job before ``lim`` that the walk must try (``todo``: each class's
        next key); classes it skips that a release may revive go ``aside``."""
        skip = caching()
        while todo and (lim is None or todo[0][0] < lim):
            key, ci = heapq.heappop(todo)
            c = self.q.classes[ci]
            if not skip:
                return key, ci
            if self.blocker is not None:
                continue
            hopeless = c.hopeless in self.hopeless
            if hopeless or self.failed.get(c.memo) == self.holders.gen:
                if self.strict and self._fits_empty(c.shape):
                    return key, ci  # left waiting, it blocks: not skipped
                if not hopeless:
                    aside.append(ci)
                continue
            return key, ci
        return None

    def _step(self, item: tuple[OrderKey, JobState]) -> int:
        """One candidate that is not quiet; 1 when it is done, 0 when it was stopped."""
        key, x = item
        if x not in self.pinned and not self._try_state(x):
            if key[3] != NOT_RUNNING:
                # Stopped: it ranks as a job holding nothing (criterion 4), as it will in
                # the next pass, so it waits (and blocks) from there.
                release_from(x, self.free, 0)
                self.holders.gen += 1
                x.key = (*key[:3], NOT_RUNNING, *key[4:])
                heapq.heappush(self.heap, (x.key, x))
                return 0
            self._wait_state(x)
        self.ordered.append(x)
        return 1

    def _leave(self, start: int, stop: int, free_at: int | None = None) -> None:
        """Quiet jobs ``start`` to ``stop`` of the backlog are left waiting, in order."""
        if stop > start:
            if free_at is None:
                free_at = 0 if self.blocker is not None else self.free.unit_free()
            self.left.append((start, stop, self.waiting, free_at, self.blocker))
            self.waiting += stop - start

    def _pin(self, s: JobState) -> None:
        """Place a protected job's minimum ahead of the rest of its priority."""
        s.min_shape = min_demands(s)
        if place_missing(s, self.free, s.view.min_size, self.holders):
            self.pinned.add(s)
            self._admitted(s)

    def _try_state(self, s: JobState) -> bool:
        """Admit ``s`` if its minimum is placed, fits, or fits by preempting (rule 5)."""
        s.min_shape = min_demands(s)
        if self.blocker is None:
            s.free_at_check = self.free.unit_free()
            placed, size = s.placed, s.view.min_size
            if len(placed) >= size and all(placed[:size]) and size:  # its minimum is placed
                self._admitted(s)
                return True
            if self._place(s, s.min_shape):
                self._admitted(s)
                return True
        return False

    def _place(self, s: JobState, shape: _Shape) -> bool:
        """Place the missing minimum of ``s``, preempting if need be (remembering failures)."""
        size = s.view.min_size
        memo = (shape, s.exclude) if not s.placed else None
        if memo is not None:
            if self.failed.get(memo) == self.holders.gen:
                return False
            if (shape, s.exclude, s.view.priority) in self.hopeless:
                return False
        if place_missing(s, self.free, size, self.holders):
            return True
        if make_room(s, self.holders, self.free):
            self.holders.gen += 1
            return True
        if memo is not None:
            self.failed[memo] = self.holders.gen
            # Free room plus what later jobs could give up never grows along the walk (a
            # release moves a pod between the two): no room even preempting, none later.
            self.hopeless.add((shape, s.exclude, s.view.priority))
        return False

    def _wait_state(self, s: JobState) -> None:
        self.waiting += 1
        s.position = self.waiting
        if not self._fits_empty(s.min_shape):
            s.unfittable = True
        elif self.blocker is not None:
            s.blocker = self.blocker
        elif self.strict:
            self.blocker = s.view

    def _admit_entry(self, e: Entry, key: OrderKey, i: int) -> None:
        free_at = 0
        if self.blocker is None:
            free_at = self.free.unit_free()
            memo = (e.shape, _NONE)
            s = None
            hopeless = (e.shape, _NONE, e.view.priority) in self.hopeless
            if not hopeless and self.failed.get(memo) != self.holders.gen:
                s = from_entry(e, key)
                if not self._place(s, e.shape):
                    s = None
            if s is not None:
                s.free_at_check = free_at
                self.ordered.append(s)
                self.admitted_entries.append(e)
                self.from_entries.append(s)
                self._admitted(s)
                return
        self._leave(i, i + 1, free_at)
        if self.blocker is None and self.strict and self._fits_empty(e.shape):
            self.blocker = e.view

    def _admitted(self, s: JobState) -> None:
        s.admitted = True
        s.size = s.view.min_size

    def _fits_empty(self, shape: _Shape) -> bool:
        known = self.fits_empty.get(shape)
        if known is None:
            known = self.fits_empty[shape] = self.empty.fits_all(shape)
        return known

    def explain(self, s: JobState) -> None:
        """The binding constraint of a waiting job with per-pod demands (rule 3's reason), and
        whether the free totals would hold its minimum (then it is fragmented)."""
        v = s.view
        if not v.fixed_demands and v.replica_demand is None:
            return
        shape, memo = s.min_shape, (s.min_shape, s.exclude)
        known = self.explained.get(memo)
        if known is None:
            c = self.empty if s.unfittable else self.free
            known = self.explained[memo] = (c.explain(shape, s.exclude), c.covers(shape))
        s.detail, s.fragmented = known

    def rest(self) -> dict[str, Decision]:
        """Decisions of the quiet jobs left waiting, as settle() expects them (rule 3's
        position and reason)."""
        states: list[JobState] = []
        for e, key, pos, free_at, blocker in left_items(self.left, self.q):
            s = from_entry(e, key)
            s.position, s.free_at_check = pos, free_at
            if not self._fits_empty(e.shape):
                s.unfittable = True
            elif blocker is not None:
                s.blocker = blocker
            self.explain(s)
            states.append(s)
        settle(states, now=self.now, config=self.config, capacity=self.total)
        return {s.view.key: to_decision(s) for s in states}

    def final_order(self) -> tuple[str, ...]:
        """The order as the next pass will see it: jobs admitted or stopped in this pass take
        their new incumbency (rule 2), so that an applied plan rescheduled keeps its order."""
        keyed: list[tuple[OrderKey, str]] = []
        for s in self.ordered:
            running = s.stage == _RUNNING and s.size > 0
            admitted = incumbency(running=running, admitted_time=s.since)
            rank, at = 0, s.queued or _NEVER
            if self.las:
                rank, at = las_position(
                    band=s.band, queued_time=at, units=full_units(s.view), config=self.config
                )
            key = order_key(s.view, queued_time=at, rank=rank, admitted=admitted)
            keyed.append((key, s.view.key))
        keyed += [(item[1], item[0].view.key) for item in left_items(self.left, self.q)]
        keyed.sort(key=_first)
        return tuple(k for _, k in keyed)

    def wakeup(self) -> datetime | None:
        """Rule 9's ``next_wakeup``: the candidates' own (a quiet job's key never changes)."""
        return next_wakeup([*self.full, *self.from_entries], now=self.now, config=self.config)


def schedule(snapshot: Snapshot, now: datetime) -> Plan:
    """Run one scheduling pass; see the module docstring for the rules."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    p = _Pass(snapshot, now)
    p.candidates()
    p.admit()
    grow(p.ordered, free=p.free, now=now, config=p.config, holders=p.holders)
    for s in p.ordered:
        if not s.admitted:
            p.explain(s)
    settle(p.ordered, now=now, config=p.config, capacity=p.total)
    touched = {s.view.key: s for s in p.full}
    touched.update((s.view.key, s) for s in p.from_entries)
    p.q.admitted = [id(e.view) for e in p.admitted_entries]
    jobs = p.jobs
    changed = {k: changed_fields(s) for k, s in touched.items()}
    return Plan(
        decisions=LazyDecisions(
            changed,
            count=len(jobs),
            keys=lambda: sorted(v.key for v in jobs),
            build_one=lambda key: to_decision(touched[key], changed[key]),
            build_rest=p.rest,
        ),
        deferred_order=Deferred(p.final_order),
        next_wakeup=p.wakeup(),
        capacity_total=p.total,
        capacity_used=sum(s.view.units_at(s.size) for s in p.ordered if s.admitted),
    )
