"""The scheduler loop end to end over real informer stores, the in-memory API server and a fake
clock.

The server (``MemoryClient``) applies the loop's status patches (it sends no resourceVersion:
it is the one writer of its block); each request yields once, as a real one takes a while. The
test plays the job watch for everyone else's writes (it fills the informers directly); unless
told otherwise, the loop's own writes come back through the server's watch stream. Nothing here
sleeps: time moves with ``FakeClock.advance`` and waits are conditions with deadlines.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from lattice.clock import FakeClock
from lattice.config import Settings
from lattice.frameworks.base import OperatorContext
from lattice.kube import Conflict, Resource
from lattice.kube.resources import NODES, PODS, PRIORITY_CLASSES
from lattice.primitives.keys import object_key
from lattice.primitives.objects import Obj
from lattice.runtime.events import ObjectRef
from lattice.runtime.informer import Informer
from lattice.runtime.metrics import Metrics
from lattice.runtime.projections import (
    POD_INDEXES,
    foreign_pod_usage,
    keep_raw,
    node_info,
    pod_info,
)
from lattice.scheduler.core import Plan, SchedulerConfig, Strategy
from lattice.scheduler.loop import (
    RESIZE_BAND,
    URGENT_FOR,
    ContextSource,
    LoopServices,
    LoopSources,
    LoopTuning,
    SchedulerLoop,
    runner,
)
from lattice.scheduler.loop.snapshot import SHOWN_POSITIONS
from tests.support.aio import settle
from tests.support.fake_apiserver import running
from tests.support.memory_client import Call, MemoryClient
from tests.support.wait import wait_for_async
from tests.unit.scheduler.test_loop_snapshot import (
    FakePlugin,
    foreign_obj,
    job_obj,
    node_obj,
    pod_obj,
    ts,
)

CONFLICT = Conflict(409, "Conflict", "the object has been modified")


def status_only(call: Call) -> None:
    """What every status write of the loop must be."""
    assert call.subresource == "status"
    assert list(call.body) == ["status"], "the loop patches only status, unconditionally"


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def record(
        self, regarding: ObjectRef, *, type: str, reason: str, note: str, action: str = ""
    ) -> None:
        self.events.append((regarding.name, type, reason, note))

    def reasons(self, name: str) -> list[str]:
        return [reason for job, _, reason, _ in self.events if job == name]


class Harness:
    """Informers filled directly, a ``MemoryClient``, a ``FakeClock`` and the loop under test."""

    def __init__(
        self,
        *,
        unit: str = "nvidia.com/gpu",
        config: SchedulerConfig | None = None,
        plugins: Iterable[FakePlugin] = (),
        echo: bool = True,
        client: MemoryClient | None = None,
        clock: FakeClock | None = None,
        **loop_kwargs: Any,
    ) -> None:
        self.clock = clock or FakeClock()
        self.client = client or MemoryClient(clock=self.clock, yields=True)
        self.client.before("patch", status_only)
        self.plugins = {p.resource.kind: p for p in (list(plugins) or [FakePlugin()])}
        self.jobs: dict[str, Informer[Obj]] = {}
        for kind, plugin in self.plugins.items():
            self.jobs[kind] = self._informer(plugin.kube_resource, keep_raw)
        self.pods = self._informer(PODS, pod_info, indexes=POD_INDEXES)
        self.foreign = self._informer(PODS, foreign_pod_usage)
        self.nodes = self._informer(NODES, node_info)
        self.priority_classes: Informer[Obj] = self._informer(PRIORITY_CLASSES, keep_raw)
        self.recorder = FakeRecorder()
        self.registry = CollectorRegistry()
        loop_kwargs.setdefault("resync_period", None)
        self.loop = SchedulerLoop(
            plugins=self.plugins,
            sources=LoopSources(
                jobs=self.jobs, pods=self.pods, foreign_pods=self.foreign, nodes=self.nodes
            ),
            services=LoopServices(
                client=self.client,
                clock=self.clock,
                metrics=Metrics(self.registry),
                recorder=self.recorder,  # type: ignore[arg-type]
                context=ContextSource(
                    Settings(scheduling_unit=unit), priority_classes=self.priority_classes
                ),
            ),
            # The loop's tests were written against FIFO; LAS (the default) adds band timers.
            config=config or SchedulerConfig(strategy=Strategy.STRICT_FIFO),
            tuning=LoopTuning(**loop_kwargs),
        )
        # A restarted operator lists what the server holds.
        for kind, plugin in self.plugins.items():
            for obj in self.client.items(plugin.kube_resource):
                self.jobs[kind].on_event("ADDED", obj)
        if echo:
            since = self.client.resource_version
            for kind, plugin in self.plugins.items():
                watch = self._echo(plugin.kube_resource, self.jobs[kind], since)
                asyncio.get_running_loop().create_task(watch, name=f"echo:{kind}")

    async def _echo(self, res: Resource, informer: Informer[Obj], since: str) -> None:
        """The job watch, for what the informer has not seen: the loop's own writes (the test
        delivers everyone else's itself, as the watch would)."""
        async for event in self.client.watch(res, resource_version=since, timeout_seconds=0):
            cached = informer.store.get(object_key(event.object))
            if cached is None:
                fresh = event.type != "DELETED"
            else:
                rv = event.object["metadata"]["resourceVersion"]
                fresh = int(rv) > int(cached["metadata"]["resourceVersion"])
            if fresh:
                informer.on_event(event.type, event.object)

    def _informer(self, resource: Resource, transform: Any, **kw: Any) -> Informer[Any]:
        return Informer(self.client, resource, transform=transform, clock=self.clock, **kw)

    def resource(self, kind: str = "FakeJob") -> Resource:
        return self.plugins[kind].kube_resource

    @property
    def patches(self) -> list[tuple[str, str, Obj]]:
        """The status patches the server applied: (kind, name, body), in the order stored."""
        kinds = {p.kube_resource.plural: kind for kind, p in self.plugins.items()}
        return [(kinds[c.plural], c.name, c.body) for c in self.client.served if c.verb == "patch"]

    def names(self) -> list[str]:
        return [name for _, name, _ in self.patches]

    def stored(self, name: str, *, kind: str = "FakeJob") -> Obj:
        obj = self.client.stored(self.resource(kind), name, namespace="ns")
        assert obj is not None, f"{kind} ns/{name} is not on the server"
        return obj

    def add_job(self, name: str, *, kind: str = "FakeJob", **fields: Any) -> Obj:
        (obj,) = self.client.seed(self.resource(kind), job_obj(name, kind=kind, **fields))
        self.jobs[kind].on_event("ADDED", copy.deepcopy(obj))
        return obj

    def update_job(
        self, name: str, change: Callable[[Obj], None], *, kind: str = "FakeJob"
    ) -> None:
        """Someone else (a user, a reconciler) updates the job."""
        obj = self.stored(name, kind=kind)
        change(obj)
        (obj,) = self.client.seed(self.resource(kind), obj)
        self.jobs[kind].on_event("MODIFIED", obj)

    def add_nodes(self, count: int, *, gpus: int = 8) -> None:
        for i in range(count):
            self.nodes.on_event("ADDED", node_obj(f"n{i}", gpus=gpus))

    def status(self, name: str, *, plugin: FakePlugin | None = None) -> Obj:
        plugin = plugin or next(iter(self.plugins.values()))
        obj = self.stored(name, kind=plugin.resource.kind)
        block: Any = obj
        for step in plugin.scheduling_path:
            block = block.get(step) or {}
        return dict(block)

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, dict(labels or {}))


async def until(pred: Callable[[], bool], *, what: str) -> None:
    async def probe() -> bool:
        return pred()

    await wait_for_async(probe, timeout=10.0, interval=0, what=what)


async def parked(h: Harness, passes: int) -> None:
    """Until the running loop has done ``passes`` passes, its writes are done, and it waits
    for the next trigger."""
    loop = h.loop
    await until(
        lambda: loop.passes >= passes and loop.idle and not loop.pending and not loop.writing,
        what=f"{passes} passes, then idle",
    )
    await settle()  # the timer task, if any, parks in the clock's sleep


CREATED = {"type": "Created", "status": "True"}
SUCCEEDED = {"conditions": [{"type": "Succeeded", "status": "True"}], "completionTime": ts(5)}


def unchanged(plan: Plan) -> bool:
    return not plan.changed_keys(include_accounting=True)


# --------------------------------------------------------------------------- one pass


async def test_a_pass_writes_status_then_events_and_metrics() -> None:
    h = Harness()
    h.add_nodes(2)
    h.add_job("a", min=1, max=2, units=8)
    h.add_job("bad", invalid=True)
    plan = await h.loop.run_once()
    assert plan["FakeJob/ns/a"].size == 2
    assert h.names() == ["a"]  # the invalid job is left to its reconciler
    _, _, body = h.patches[0]
    now = ts(0)
    assert body == {
        "status": {
            "stage": "Running",
            "currentSize": 2,
            "submitTime": now,
            "queuedTime": now,
            "requeueTime": None,
            "cooldownTime": None,
            "queuePosition": None,
            "requeueCount": 0,
            "attainedService": 0.0,
            "serviceUpdatedTime": now,
            "lastExecTime": now,
            "lastResizeTime": now,
            "admittedTime": now,
            "lastDecision": "Admitted with 2 (min 1, max 2)",
            "placement": {"0": "n0", "1": "n1"},
            "priority": 0,
            "minSize": 1,
            "maxSize": 2,
            "waitingSince": None,
            "reason": None,
            "message": None,
        }
    }
    assert h.status("a")["stage"] == "Running"
    assert h.recorder.events == [
        ("a", "Normal", "Queued", "Queued"),
        ("a", "Normal", "Admitted", "Admitted with 2 (min 1, max 2)"),
    ]
    assert h.metric("lattice_capacity_units", {"state": "total"}) == 16
    assert h.metric("lattice_capacity_units", {"state": "used"}) == 16
    assert h.metric("lattice_jobs", {"kind": "FakeJob", "stage": "Running"}) == 1
    assert h.metric("lattice_jobs", {"kind": "FakeJob", "stage": "New"}) == 1  # the invalid one
    assert h.metric("lattice_jobs", {"kind": "FakeJob", "stage": "Waiting"}) == 0
    assert h.metric("lattice_scheduler_decisions_total", {"type": "Admitted"}) == 1
    assert h.metric("lattice_scheduler_pass_duration_seconds_count") == 1


async def test_nested_scheduling_path_and_now_kept_to_the_microsecond() -> None:
    nested = FakePlugin("Nested", scheduling_path=("status", "lattice"))
    h = Harness(plugins=[nested])
    await h.clock.advance(1.75)
    h.add_nodes(1)
    h.add_job("a", kind="Nested")
    await h.loop.run_once()
    _, _, body = h.patches[0]
    assert list(body) == ["status"]
    assert list(body["status"]) == ["lattice"]
    assert body["status"]["lattice"]["queuedTime"] == ts(1.75)
    assert h.status("a", plugin=nested)["currentSize"] == 1


async def test_no_write_when_nothing_changed() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("a", min=1, max=1, units=8)
    h.add_job("b", min=1, max=1, units=8)
    await h.loop.run_once()
    assert sorted(h.names()) == ["a", "b"]
    assert h.status("a")["lastDecision"] == "Admitted with 1 (min 1, max 1)"
    # Later passes would only restate a's situation in other words: no write.
    for _ in range(3):
        plan = await h.loop.run_once()
        assert unchanged(plan)
    assert h.status("a")["lastDecision"] == "Admitted with 1 (min 1, max 1)"
    assert len(h.patches) == 2
    assert len(h.recorder.events) == 3  # a: Queued, Admitted; b: Queued


async def test_own_writes_are_read_back_before_the_watch_delivers_them() -> None:
    h = Harness(echo=False)
    h.add_nodes(1)
    h.add_job("a", units=8)
    await h.loop.run_once()
    assert h.names() == ["a"]
    plan = await h.loop.run_once()  # the cache still holds the original object
    assert unchanged(plan)
    assert h.names() == ["a"]
    # The watch catches up, then someone else writes: the cache is the truth again.
    obj = h.stored("a")
    h.jobs["FakeJob"].on_event("MODIFIED", copy.deepcopy(obj))
    h.update_job("a", lambda o: o["status"].update(execStatus={"conditions": []}))
    plan = await h.loop.run_once()
    assert unchanged(plan)
    assert h.names() == ["a"]


async def test_writes_are_concurrent_but_bounded() -> None:
    h = Harness(concurrency=16)
    h.add_nodes(1)
    for i in range(100):
        h.add_job(f"j{i:03d}")
    await h.loop.run_once()
    assert len(h.patches) == 100
    assert 1 < h.client.max_inflight <= 16


async def test_writes_start_in_priority_order() -> None:
    h = Harness(concurrency=1)
    h.add_nodes(1)
    for name, priority in (("a", 0), ("b", 5), ("c", -1), ("d", 5), ("e", 100)):
        h.add_job(name, priority=priority)
    await h.loop.run_once()
    assert h.names() == ["e", "b", "d", "a", "c"]


async def test_preemption_metrics_and_warning_event() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("low", units=8, priority=0)
    await h.loop.run_once()
    h.add_job("high", units=8, priority=10)
    await h.loop.run_once()
    assert h.status("low")["stage"] == "Waiting"
    assert h.status("high")["stage"] == "Running"
    assert ("low", "Warning", "Preempted", "Preempted by ns/high (priority 10)") in (
        h.recorder.events
    )
    assert h.metric("lattice_preemptions_total") == 1
    assert h.metric("lattice_scheduler_decisions_total", {"type": "Preempted"}) == 1


async def test_accounting_alone_is_never_written_but_rides_along_with_other_writes() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("a", min=2, max=2, units=4)
    await h.loop.run_once()
    await h.loop.run_once()
    assert len(h.patches) == 1
    assert h.status("a")["attainedService"] == 0.0
    await h.clock.advance(3600)
    plan = await h.loop.run_once()
    assert plan.changed("FakeJob/ns/a")  # service accrued ...
    assert not plan.changed("FakeJob/ns/a", include_accounting=False)
    assert len(h.patches) == 1  # ... but is not written alone, however old
    # Another change (the job is suspended) carries the accrued service along.
    h.update_job("a", lambda o: o["spec"].update(suspend=True))
    await h.loop.run_once()
    assert len(h.patches) == 2
    assert h.status("a")["attainedService"] == 8 * 3600.0
    assert h.status("a")["serviceUpdatedTime"] == ts(3600)


async def test_positions_are_shown_for_the_head_of_the_queue_and_written_in_rounds() -> None:
    h = Harness(position_interval=10.0)
    h.add_nodes(1)  # 8 units: one job of 8 runs at a time
    h.add_job("run", min=1, max=1, units=8)
    for i in range(SHOWN_POSITIONS + 2):
        h.add_job(f"w{i:03d}", min=1, max=1, units=8)
    await h.loop.run_once()
    assert h.status("w000")["queuePosition"] == 1
    assert h.status(f"w{SHOWN_POSITIONS - 1:03d}")["queuePosition"] == SHOWN_POSITIONS
    assert h.status(f"w{SHOWN_POSITIONS:03d}").get("queuePosition") is None  # beyond the head
    written = len(h.patches)
    # The running job finishes (its reconciler records it): w000 is admitted and every waiting
    # job moves up one place.
    h.update_job("run", lambda o: o["status"].update(execStatus=SUCCEEDED))
    await h.clock.advance(1)
    await h.loop.run_once()
    assert h.status("w000")["stage"] == "Running"
    # Written: w000 (admitted), run (finished: Completed, holding nothing) and w001, now the
    # head of the StrictFIFO queue: its reason code changes (its block, position included).
    assert len(h.patches) == written + 3, "the moves wait for the next round"
    assert (h.status("run")["stage"], h.status("run")["currentSize"]) == ("Completed", 0)
    assert h.status("w001")["reason"] == "InsufficientCapacity"
    assert h.status("w001")["queuePosition"] == 1
    assert h.status("w002")["reason"] == "BlockedByStrictFIFO"
    assert h.status("w002")["queuePosition"] == 3
    assert h.loop.last_plan is not None
    assert h.loop.last_plan["FakeJob/ns/w002"].queue_position == 2
    # The round is due 10 s after the last one: every shown job that moved is written once.
    await h.clock.advance(9)
    await h.loop.run_once()
    assert h.status("w002")["queuePosition"] == 2
    assert h.status(f"w{SHOWN_POSITIONS:03d}")["queuePosition"] == SHOWN_POSITIONS
    assert h.status(f"w{SHOWN_POSITIONS + 1:03d}").get("queuePosition") is None
    assert len(h.patches) == written + 3 + SHOWN_POSITIONS - 1


class CountingPlugin(FakePlugin):
    def __init__(self) -> None:
        super().__init__()
        self.parsed: list[str] = []

    def parse(self, obj: Mapping[str, Any], ctx: OperatorContext) -> Mapping[str, Any]:
        self.parsed.append(obj["metadata"]["name"])
        return super().parse(obj, ctx)


async def test_a_job_is_parsed_again_only_when_its_object_or_the_context_changes() -> None:
    plugin = CountingPlugin()
    h = Harness(plugins=[plugin])
    h.add_nodes(1)
    h.add_job("a")
    h.add_job("b", min=2, max=2)
    await h.loop.run_once()  # parses both, then writes both (new resourceVersions)
    await h.loop.run_once()  # our own writes: the patched objects are new versions
    plugin.parsed.clear()
    for _ in range(3):
        await h.loop.run_once()
    assert plugin.parsed == []
    h.update_job("b", lambda o: o["spec"].update(max=3))
    plan = await h.loop.run_once()
    assert plugin.parsed == ["b"]
    assert "max 3" in plan["FakeJob/ns/b"].reason  # the new demand is used
    urgent = {"metadata": {"name": "urgent", "resourceVersion": "1"}, "value": 100}
    h.priority_classes.on_event("ADDED", urgent)
    await h.loop.run_once()
    assert sorted(plugin.parsed) == ["a", "b", "b"]


async def test_priority_of_is_the_priority_the_last_pass_parsed() -> None:
    """What the operator orders its reconcile queues by (for jobs no pass resized)."""
    h = Harness()
    h.add_nodes(1)
    h.add_job("high", units=16, priority=1000)  # neither fits: both wait
    h.add_job("low", units=16, priority=-5)
    assert h.loop.priority_of("FakeJob", "ns/high") == 0  # no pass has parsed it yet
    await h.loop.run_once()
    assert h.loop.priority_of("FakeJob", "ns/high") == 1000
    assert h.loop.priority_of("FakeJob", "ns/low") == -5
    assert h.loop.priority_of("FakeJob", "ns/missing") == 0
    h.update_job("low", lambda o: o["spec"].update(priority=7))
    await h.loop.run_once()
    assert h.loop.priority_of("FakeJob", "ns/low") == 7


async def test_a_preempted_job_reconciles_just_above_its_beneficiarys_priority() -> None:
    """Its pods must go before the beneficiary's can run, so it must not wait in the queue
    behind everything of its own priority."""
    h = Harness()
    h.add_nodes(1)
    h.add_job("low", units=8, priority=0)
    h.add_job("other", units=8, priority=0)
    await h.loop.run_once()
    assert h.status("low")["stage"] == "Running"
    h.pods.on_event("ADDED", pod_obj("low-w0", job="low", phase="Running", rv="1"))
    h.add_job("high", units=8, priority=10)
    await h.loop.run_once()
    assert h.status("low")["stage"] == "Waiting"
    assert h.loop.priority_of("FakeJob", "ns/low") == RESIZE_BAND + 11
    assert h.loop.priority_of("FakeJob", "ns/high") == RESIZE_BAND + 10
    assert h.loop.priority_of("FakeJob", "ns/other") == 0  # untouched by that pass
    # The preempted job is written first, just before its beneficiary (an operator killed in
    # between leaves the capacity released, not granted twice); other (now behind the
    # preempted low, StrictFIFO) last, for its reason code changed.
    assert h.names()[-3:] == ["low", "high", "other"]
    assert h.status("other")["reason"] == "BlockedByStrictFIFO"
    await h.loop.run_once()  # the next pass (which shrinks nothing) does not reset it
    assert h.loop.priority_of("FakeJob", "ns/low") == RESIZE_BAND + 11
    # Its pod being deleted, the preemption is acted on: what follows is bookkeeping.
    h.pods.on_event(
        "MODIFIED", pod_obj("low-w0", job="low", phase="Running", deleting=True, rv="2")
    )
    assert h.loop.priority_of("FakeJob", "ns/low") == 0
    # The beneficiary has no pod yet: it keeps the band until URGENT_FOR runs out.
    await h.clock.advance(URGENT_FOR)
    assert h.loop.priority_of("FakeJob", "ns/high") == 10


async def test_a_resized_job_reconciles_ahead_of_higher_priority_bookkeeping() -> None:
    """A grant is capacity waiting for pods: it goes before a higher-priority job's
    reconcile that only writes conditions, and leaves the band once its pods exist."""
    h = Harness()
    h.add_nodes(1)
    h.add_job("busy", units=8, priority=1000)
    await h.loop.run_once()
    h.add_job("waiting", units=8, priority=500)
    h.add_job("idle", units=8, priority=5)
    await h.loop.run_once()
    assert h.status("waiting")["stage"] == "Waiting"
    assert h.loop.priority_of("FakeJob", "ns/waiting") == 500
    busy = await h.client.delete(h.resource(), "busy", namespace="ns")
    h.jobs["FakeJob"].on_event("DELETED", busy)
    await h.loop.run_once()
    assert h.status("waiting")["stage"] == "Running"
    granted = h.loop.priority_of("FakeJob", "ns/waiting")
    assert granted == RESIZE_BAND + 500
    assert granted > h.loop.priority_of("FakeJob", "ns/idle") + (1 << 32)  # any priority
    await h.clock.advance(URGENT_FOR / 2)
    await h.loop.run_once()  # a pass that changes nothing keeps it in the band
    assert h.loop.priority_of("FakeJob", "ns/waiting") == granted
    # Once its pod exists the grant is acted on: the reconciles that follow (the pod bound,
    # running) rank by priority again, behind the next grant.
    h.pods.on_event("ADDED", pod_obj("waiting-w0", job="waiting", phase="Pending", created=0))
    assert h.loop.priority_of("FakeJob", "ns/waiting") == 500


async def test_a_job_stopped_for_no_beneficiary_ranks_in_the_band_until_its_pods_go() -> None:
    """Suspended (or requeued): nothing is admitted in its place, but its pods still hold
    capacity until a reconcile deletes them."""
    h = Harness()
    h.add_nodes(1)
    h.add_job("a", units=8, priority=3)
    await h.loop.run_once()
    h.pods.on_event("ADDED", pod_obj("a-w0", job="a", phase="Running", rv="1"))
    await h.clock.advance(URGENT_FOR)
    assert h.loop.priority_of("FakeJob", "ns/a") == 3
    h.update_job("a", lambda o: o["spec"].update(suspend=True))
    await h.loop.run_once()
    assert h.status("a")["currentSize"] == 0
    assert h.loop.priority_of("FakeJob", "ns/a") == RESIZE_BAND + 4
    h.pods.on_event("MODIFIED", pod_obj("a-w0", job="a", phase="Running", deleting=True, rv="2"))
    assert h.loop.priority_of("FakeJob", "ns/a") == 3


async def test_a_grant_leaves_the_resize_band_after_urgent_for_without_pods() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("a", units=8, priority=3)
    await h.loop.run_once()
    assert h.loop.priority_of("FakeJob", "ns/a") == RESIZE_BAND + 3
    await h.clock.advance(URGENT_FOR)
    assert h.loop.priority_of("FakeJob", "ns/a") == 3


async def test_a_job_preempted_for_an_equal_priority_one_still_reconciles_ahead_of_its_peers() -> (
    None
):
    """Under LeastAttainedService a new job preempts a more-served one of the same priority:
    the victim must not queue behind every other job of that priority."""
    h = Harness(config=SchedulerConfig(strategy=Strategy.LEAST_ATTAINED_SERVICE))
    h.add_nodes(1)
    h.add_job("served", units=8, priority=0, preemptible=True)
    await h.loop.run_once()
    h.pods.on_event("ADDED", pod_obj("served-w0", job="served", phase="Running", rv="1"))
    await h.clock.advance(3600)
    h.add_job("new", units=8, priority=0)
    await h.loop.run_once()
    assert h.status("new")["stage"] == "Running"
    assert h.status("served")["stage"] == "Waiting"
    assert h.loop.priority_of("FakeJob", "ns/served") == RESIZE_BAND + 1
    assert h.loop.priority_of("FakeJob", "ns/new") == RESIZE_BAND


# --------------------------------------------------------------------------- writes in flight


async def test_a_pass_that_does_not_wait_sees_its_writes_in_flight_and_chains_the_next() -> None:
    h = Harness(echo=False)
    h.add_nodes(1)
    h.add_job("low", units=8, priority=0)
    slow = h.client.hold("patch", name="low")
    plan = await h.loop.run_once(wait=False)
    assert plan["FakeJob/ns/low"].stage == "Running"
    await settle()
    assert h.patches == []
    assert h.loop.writing == 1
    # The next pass takes the write in flight as done: nothing to decide, nothing to write.
    plan = await h.loop.run_once(wait=False)
    assert unchanged(plan)
    assert h.loop.writing == 1
    # A higher priority arrives while the admission is still in flight: the preemption is
    # decided against the admitted state, and its write waits for the admission to land.
    h.add_job("high", units=8, priority=10)
    plan = await h.loop.run_once(wait=False)
    assert plan["FakeJob/ns/low"].stage == "Waiting"
    assert plan["FakeJob/ns/high"].stage == "Running"
    await settle()
    assert h.names() == ["high"]
    slow.set()
    await until(lambda: not h.loop.writing, what="writes done")
    assert h.names() == ["high", "low", "low"]
    assert h.status("low")["stage"] == "Waiting"
    assert h.status("low")["lastExecTime"] == ts(0)  # the chained write read the first one
    assert h.recorder.reasons("low") == ["Queued", "Admitted", "Preempted"]
    assert h.metric("lattice_scheduler_status_writes_total", {"result": "ok"}) == 3
    assert h.status("low")["reason"] == "Preempted"
    # Until the watch delivers them, passes read our writes back: nothing to decide. The
    # Preempted code lasts until the next pass names low's blocker: one write, then none.
    plan = await h.loop.run_once()
    assert unchanged(plan)
    assert len(h.patches) == 4
    assert h.status("low")["reason"] == "InsufficientCapacity"
    plan = await h.loop.run_once()
    assert len(h.patches) == 4


async def test_a_failed_write_drops_the_writes_chained_behind_it_and_the_loop_retries() -> None:
    h = Harness(retry_delay=2.0)
    h.add_nodes(1)
    h.add_job("low", units=8, priority=0)
    slow = h.client.hold("patch", name="low")
    h.client.fail("patch", CONFLICT, name="low")  # the admission will conflict
    async with running(h.loop.run):
        await until(lambda: h.loop.passes == 1 and h.loop.idle, what="first pass, parked")
        assert h.loop.writing == 1
        h.add_job("high", units=8, priority=10)  # preempts low, chained behind its admission
        await until(
            lambda: h.loop.passes == 2 and h.loop.idle and h.loop.writing == 2,
            what="second pass parked, its own write done, low's two writes waiting",
        )
        assert h.names() == ["high"]
        slow.set()
        await until(lambda: h.loop.writing == 0 and h.loop.idle, what="writes done")
        assert h.names() == ["high"]
        conflicts = {"result": "conflict"}
        assert h.metric("lattice_scheduler_status_writes_total", conflicts) == 1
        assert h.metric("lattice_scheduler_status_writes_total", {"result": "dropped"}) == 1
        assert h.recorder.reasons("low") == []
        # The loop was parked when the write failed: it still wakes for the retry.
        await settle()
        assert h.clock.sleepers == 1
        assert h.loop.passes == 2
        await h.clock.advance(2)
        await parked(h, 3)
        assert h.status("low")["stage"] == "Waiting"
        assert h.status("high")["stage"] == "Running"
        assert h.recorder.reasons("low") == ["Queued"]


async def test_a_later_passs_urgent_write_overtakes_queued_bookkeeping() -> None:
    h = Harness(concurrency=1, echo=False)
    h.add_nodes(1)
    h.add_job("run", units=8, priority=0)
    for i in range(5):
        h.add_job(f"wait{i}", units=8, priority=0)
    slow = h.client.hold("patch", name="run")
    await h.loop.run_once(wait=False)  # six writes: "run" holds the gate, five queue
    await settle()
    h.add_job("high", units=8, priority=10)
    await h.loop.run_once(wait=False)
    slow.set()
    await until(lambda: not h.loop.writing, what="writes done")
    # "run" is preempted for "high": its second write, chained behind the first, ranks with
    # high's priority too, so both go ahead of the first pass's five queued writes. wait0,
    # now behind the preempted run (StrictFIFO), is written again last: its code changed.
    assert h.names() == ["run", "high", "run"] + [f"wait{i}" for i in range(5)] + ["wait0"]
    assert h.status("wait0")["reason"] == "BlockedByStrictFIFO"


async def test_a_write_that_lands_while_the_core_decides_is_still_chained_on_and_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The core runs in a thread while the event loop goes on, so a write in flight when the
    snapshot was taken may land before the pass launches its own writes."""
    h = Harness(echo=False)
    h.add_nodes(1)
    h.add_job("low", units=8, priority=0)
    first = h.client.hold("patch", name="low")
    await h.loop.run_once(wait=False)  # low's admission, in flight
    await settle()
    h.add_job("high", units=8, priority=10)
    loop = asyncio.get_running_loop()
    landed = threading.Event()
    h.client.after("patch", lambda _: landed.set(), name="low")
    second = h.client.hold("patch", name="low")
    decide = runner.schedule  # type: ignore[attr-defined]  # the loop's own binding, patched below

    def deciding(snapshot: Any, now: Any) -> Plan:
        assert threading.current_thread() is not threading.main_thread()
        loop.call_soon_threadsafe(first.set)  # the admission lands meanwhile
        assert landed.wait(10), "the admission did not land while the core decided"
        return decide(snapshot, now)

    monkeypatch.setattr(runner, "schedule", deciding)
    plan = await h.loop.run_once(wait=False)
    assert plan["FakeJob/ns/low"].stage == "Waiting"
    await until(lambda: h.names() == ["low", "high"], what="the admission, then high")
    # The preemption is based on the version the admission produced, not on the stand-in.
    admitted = h.stored("low")
    assert h.status("low")["stage"] == "Running"
    # The watch delivers the admission while the preemption is still in flight: passes read
    # the preemption back rather than re-deciding from the admitted version.
    h.jobs["FakeJob"].on_event("MODIFIED", copy.deepcopy(admitted))
    monkeypatch.setattr(runner, "schedule", decide)
    assert unchanged(await h.loop.run_once(wait=False))
    # In flight: the preemption, and (chained behind it) the next code, low's blocker.
    assert h.loop.writing == 2
    second.set()
    await until(lambda: not h.loop.writing, what="writes done")
    assert h.names() == ["low", "high", "low", "low"]
    assert h.status("low")["stage"] == "Waiting"
    assert h.status("low")["reason"] == "InsufficientCapacity"
    assert h.metric("lattice_scheduler_status_writes_total", {"result": "ok"}) == 4
    assert h.metric("lattice_scheduler_status_writes_total", {"result": "conflict"}) is None


async def test_the_core_can_run_on_the_event_loop() -> None:
    h = Harness(decide_in_thread=False)
    h.add_nodes(1)
    h.add_job("a", units=8)
    plan = await h.loop.run_once()
    assert plan["FakeJob/ns/a"].stage == "Running"
    assert h.status("a")["stage"] == "Running"


class SteppingClock(FakeClock):
    """A fake clock on which parsing a job takes ``per_parse`` seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.spent = 0.0

    def monotonic(self) -> float:
        return super().monotonic() + self.spent


class SlowPlugin(FakePlugin):
    def __init__(self, clock: SteppingClock, seconds: float) -> None:
        super().__init__()
        self._clock, self._seconds = clock, seconds

    def parse(self, obj: Mapping[str, Any], ctx: OperatorContext) -> Mapping[str, Any]:
        self._clock.spent += self._seconds
        return super().parse(obj, ctx)


async def test_the_next_pass_waits_pass_gap_times_the_last_pass() -> None:
    clock = SteppingClock()
    h = Harness(clock=clock, plugins=[SlowPlugin(clock, 2.0)], pass_gap=1.0)
    h.add_nodes(1)
    h.add_job("a")
    async with running(h.loop.run):
        await parked(h, 1)  # parsing "a" took 2 s
        h.add_nodes(2)
        await settle()
        assert h.clock.sleepers == 1  # held for the gap
        await h.clock.advance(1.9)
        assert h.loop.passes == 1
        await h.clock.advance(0.1)
        await parked(h, 2)
        assert h.loop.passes == 2


# --------------------------------------------------------------------------- restart


async def test_a_restarted_loop_reproduces_the_plan_from_persisted_status() -> None:
    config = SchedulerConfig(
        strategy=Strategy.LEAST_ATTAINED_SERVICE,
        resize_interval=timedelta(seconds=60),
        pending_timeout=timedelta(seconds=300),
        cooldown_base=timedelta(seconds=60),
        las_first_band=100.0,
    )
    pending = pod_obj("hi-w1", job="hi", phase="Pending", created=0, unschedulable_since=0)

    def restart() -> Harness:
        fresh = Harness(config=config, client=h.client.clone(), clock=h.clock)
        fresh.add_nodes(3)
        fresh.pods.on_event("ADDED", copy.deepcopy(pending))
        return fresh

    h = Harness(config=config)
    h.add_nodes(3)
    h.add_job("vip", priority=10, units=8)
    h.add_job("hi", min=1, max=2, units=8)
    h.add_job("mid", min=1, max=3, units=4)
    h.add_job("lo", min=1, max=1, units=8, preemptible=True)
    h.add_job("big", min=4, max=4, units=8)
    h.add_job("off", suspend=True)
    h.add_job("bad", invalid=True)
    h.add_job("done", status={"stage": "Completed", "currentSize": 0})
    h.add_job(
        "cool",
        units=4,
        status={
            "stage": "RequeueCooldown",
            "currentSize": 0,
            "cooldownTime": ts(120),
            "requeueCount": 1,
            "queuedTime": ts(-600),
            "submitTime": ts(-600),
        },
    )
    h.pods.on_event("ADDED", copy.deepcopy(pending))
    plans = [await h.loop.run_once() for _ in range(3)]
    # Converged, except hi's requeueTime: the pending pod gives it, so it waits for its flush.
    assert plans[-1].changed_keys(include_accounting=False) == ("FakeJob/ns/hi",)
    assert plans[-1]["FakeJob/ns/hi"].changed_fields == {"requeue_time"}
    assert h.status("hi").get("requeueTime") is None
    assert h.status("mid")["stage"] == "Waiting"

    # Restarted at the same instant: every decision is reproduced, nothing is written.
    again = restart()
    plan = await again.loop.run_once()
    assert plan.changed_keys() == ("FakeJob/ns/hi",)
    assert plan.decisions == plans[-1].decisions
    assert again.patches == []

    # Later (LAS bands moved, accounting unflushed): the running loop and a restarted one agree.
    await h.clock.advance(45)
    again = restart()
    patches, events = len(h.patches), len(h.recorder.events)
    mine = await h.loop.run_once()
    theirs = await again.loop.run_once()
    # mid (no service yet) now goes before lo and hi: lo is preempted.
    assert mine["FakeJob/ns/mid"].size == 2
    assert mine["FakeJob/ns/lo"].size == 0
    assert theirs.decisions == mine.decisions
    assert theirs.order == mine.order
    assert theirs.next_wakeup == mine.next_wakeup
    assert again.patches == h.patches[patches:]
    assert again.recorder.events == h.recorder.events[events:]

    # And right after those writes, a restart changes nothing but the same deferred field.
    plan = await restart().loop.run_once()
    assert plan.changed_keys(include_accounting=False) == ("FakeJob/ns/hi",)

    # Once the pending clock is a minute old it is persisted; then a restart changes nothing.
    await h.clock.advance(15)
    await h.loop.run_once()
    assert h.status("hi")["requeueTime"] == ts(0)
    plan = await restart().loop.run_once()
    assert not plan.changed_keys(include_accounting=False)


# --------------------------------------------------------------------------- the run loop


async def test_a_burst_of_arrivals_is_coalesced() -> None:
    h = Harness()
    h.add_nodes(1)
    async with running(h.loop.run):
        await parked(h, 1)
        for i in range(1000):
            h.add_job(f"j{i:04d}")
        await parked(h, 2)
        await settle()
        assert h.loop.passes <= 3  # the 1,000 arrivals took at most 2 passes
        assert len(set(h.names())) == 1000
        for _ in range(2):
            passes = h.loop.passes
            for _ in range(1000):
                h.loop.trigger()
            await parked(h, passes + 1)
            await settle()
            assert h.loop.passes == passes + 1


async def test_a_change_during_a_pass_causes_exactly_one_more_pass() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("a")
    added: list[str] = []

    def arrive(name: str) -> None:
        if not added:
            added.append(name)
            h.add_job("b")
            h.add_job("c")

    h.client.before("patch", lambda call: arrive(call.name))
    async with running(h.loop.run):
        await parked(h, 2)
        await settle()
        assert h.loop.passes == 2
        assert sorted(set(h.names())) == ["a", "b", "c"]


async def test_the_loop_wakes_at_the_plans_next_wakeup() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job(
        "cool",
        status={"stage": "RequeueCooldown", "cooldownTime": ts(120), "requeueCount": 1},
    )
    async with running(h.loop.run):
        await parked(h, 1)
        assert h.loop.last_plan is not None
        assert h.loop.last_plan.next_wakeup == h.clock.now() + timedelta(seconds=120)
        assert h.clock.sleepers == 1
        assert h.status("cool")["stage"] == "RequeueCooldown"
        await h.clock.advance(119)
        await settle()
        assert h.loop.passes == 1
        await h.clock.advance(1)
        await parked(h, 2)
        assert h.status("cool")["stage"] == "Running"
        assert h.recorder.reasons("cool") == ["CooldownOver", "Admitted"]


async def test_a_short_pending_costs_no_write_and_a_long_one_is_written_at_a_minute() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("quick")
    async with running(h.loop.run):
        await parked(h, 1)
        admitted = len(h.patches)
        # A pod unschedulable since now: requeueTime would be now, which the pod itself gives.
        h.pods.on_event(
            "ADDED",
            pod_obj("quick-w0", job="quick", phase="Pending", created=0, unschedulable_since=0),
        )
        await parked(h, 2)
        assert len(h.patches) == admitted
        assert h.status("quick").get("requeueTime") is None
        assert h.loop.last_plan is not None
        assert h.loop.last_plan["FakeJob/ns/quick"].requeue_time == h.clock.now()
        # It runs 30 s later: nothing was written to set the clock, so nothing to clear it.
        await h.clock.advance(30)
        h.pods.on_event(
            "MODIFIED", pod_obj("quick-w0", job="quick", phase="Running", created=0, rv="2")
        )
        await parked(h, 3)
        assert len(h.patches) == admitted
        # Unschedulable again, this time for longer: the loop wakes at the minute and writes it.
        h.pods.on_event(
            "MODIFIED",
            pod_obj(
                "quick-w0",
                job="quick",
                phase="Pending",
                created=0,
                unschedulable_since=30,
                rv="3",
            ),
        )
        await parked(h, 4)
        assert len(h.patches) == admitted
        await h.clock.advance(59)
        await settle()
        assert h.loop.passes == 4
        await h.clock.advance(1)
        await parked(h, 5)
        assert h.status("quick")["requeueTime"] == ts(30)
        assert len(h.patches) == admitted + 1


async def test_a_resync_runs_a_pass_even_without_triggers() -> None:
    h = Harness(resync_period=300.0)
    h.add_nodes(1)
    h.add_job("a")
    async with running(h.loop.run):
        await parked(h, 1)
        assert h.clock.sleepers == 1
        await h.clock.advance(299)
        await settle()
        assert h.loop.passes == 1
        await h.clock.advance(1)
        await parked(h, 2)
        assert h.loop.passes == 2


async def test_a_failed_write_skips_the_job_and_retries_it() -> None:
    h = Harness(retry_delay=1.0)
    h.add_nodes(2)
    h.add_job("a", units=8)
    h.add_job("b", units=8)
    h.client.fail("patch", CONFLICT, name="a")
    async with running(h.loop.run):
        await parked(h, 1)
        assert h.names() == ["b"]
        assert h.recorder.reasons("a") == []  # no event without a write
        assert h.clock.sleepers == 1  # the retry timer
        await h.clock.advance(1)
        await parked(h, 2)
        assert sorted(set(h.names())) == ["a", "b"]
        assert h.recorder.reasons("a") == ["Queued", "Admitted"]
        await settle()
        assert h.loop.passes == 2
        assert h.clock.sleepers == 0  # nothing left to retry, no timer


def another_writer(h: Harness, name: str) -> list[Obj]:
    """Just before the loop's next status write of ``name`` is stored, someone else (the
    reconciler) writes the job's conditions; the returned list holds that version, which the
    watch has not delivered."""
    held: list[Obj] = []

    def write(_: Call) -> None:
        if held:
            return
        obj = h.stored(name)
        obj.setdefault("status", {})["execStatus"] = {"conditions": [CREATED]}
        held.extend(h.client.seed(h.resource(), obj))

    h.client.before("patch", write, name=name)
    return held


async def test_another_writers_fields_and_ours_never_conflict_and_both_persist() -> None:
    h = Harness(echo=False)
    h.add_nodes(1)
    h.add_job("a")
    newer = another_writer(h, "a")
    await h.loop.run_once()
    assert h.names() == ["a"]
    assert h.metric("lattice_scheduler_status_writes_total", {"result": "ok"}) == 1
    stored = h.stored("a")["status"]
    assert stored["execStatus"]["conditions"] == [CREATED]
    assert stored["stage"] == "Running"
    # The watch delivers the other writer's version, older than our write: the pass reads our
    # write back instead of deciding (and writing, and announcing) the admission again.
    h.jobs["FakeJob"].on_event("MODIFIED", copy.deepcopy(newer[0]))
    assert unchanged(await h.loop.run_once())
    assert h.names() == ["a"]
    assert h.recorder.reasons("a") == ["Queued", "Admitted"]


async def test_our_fields_over_a_newer_cached_version_while_the_write_is_in_flight() -> None:
    h = Harness(echo=False)
    h.add_nodes(1)
    h.add_job("a")
    slow = h.client.hold("patch", name="a")
    await h.loop.run_once(wait=False)
    await settle()
    # Someone else's write arrives while ours is in flight: its version, our fields.
    h.update_job("a", lambda o: o.setdefault("status", {}).update(execStatus={"conditions": []}))
    assert unchanged(await h.loop.run_once(wait=False))
    slow.set()
    await until(lambda: not h.loop.writing, what="write done")
    assert h.names() == ["a"]


async def test_a_vanished_job_is_skipped_and_retried() -> None:
    h = Harness(retry_delay=5.0, echo=False)
    h.add_nodes(1)
    h.add_job("gone")
    await h.client.delete(h.resource(), "gone", namespace="ns")  # the watch has not told us yet
    async with running(h.loop.run):
        await parked(h, 1)
        assert h.names() == []
        assert h.clock.sleepers == 1  # the retry timer
        h.jobs["FakeJob"].on_event("DELETED", job_obj("gone"))
        await parked(h, 2)
        assert h.loop.last_plan is not None
        assert h.loop.last_plan.decisions == {}
        await settle()
        assert h.clock.sleepers == 0


async def test_only_relevant_changes_trigger_a_pass() -> None:
    h = Harness()
    h.nodes.on_event("ADDED", node_obj("n0"))
    h.add_job("a", min=1, max=2, units=4)
    h.pods.on_event("ADDED", pod_obj("a-w0", job="a", phase="Pending"))

    async def passes_after(change: Callable[[], object]) -> int:
        await parked(h, h.loop.passes)
        before = h.loop.passes
        change()
        await settle()
        await parked(h, before)
        return h.loop.passes - before

    async with running(h.loop.run):
        await parked(h, 1)
        # Scheduler-owned fields, heartbeats and unrelated pods do not trigger.
        assert (
            await passes_after(
                lambda: h.update_job("a", lambda o: o["status"].update(queuePosition=7))
            )
            == 0
        )
        assert await passes_after(lambda: h.nodes.on_event("MODIFIED", node_obj("n0", rv="2"))) == 0
        assert (
            await passes_after(
                lambda: h.pods.on_event(
                    "MODIFIED", pod_obj("a-w0", job="a", phase="Pending", rv="2")
                )
            )
            == 0
        )
        # What the scheduler reads does.
        relevant: list[Callable[[], object]] = [
            lambda: h.update_job("a", lambda o: o["spec"].update(max=3)),
            lambda: h.update_job("a", lambda o: o["metadata"].update(annotations={"p": "1"})),
            lambda: h.nodes.on_event("MODIFIED", node_obj("n0", ready=False, rv="3")),
            lambda: h.nodes.on_event("ADDED", node_obj("n1")),
            lambda: h.foreign.on_event("ADDED", foreign_obj("gpu", "n1", {"nvidia.com/gpu": "1"})),
            # Every foreign pod takes capacity (a pod slot, cpu, memory).
            lambda: h.foreign.on_event("ADDED", foreign_obj("dns", "n0", {"cpu": "1"})),
            lambda: h.nodes.on_event("MODIFIED", node_obj("n0", labels={"pool": "a"}, rv="4")),
            lambda: h.pods.on_event("MODIFIED", pod_obj("a-w0", job="a", phase="Running", rv="3")),
            lambda: h.pods.on_event("DELETED", pod_obj("a-w0", job="a", phase="Running")),
            lambda: h.update_job(
                "a",
                lambda o: o["status"].update(
                    execStatus={"conditions": [{"type": "Succeeded", "status": "True"}]}
                ),
            ),
            lambda: h.add_job("b"),
        ]
        for change in relevant:
            assert await passes_after(change) == 1


# --------------------------------------------------------------------------- finished jobs


async def test_a_finished_job_is_written_completed_once_from_its_reconcilers_condition() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("a", units=8)
    await h.loop.run_once()
    assert h.status("a")["currentSize"] == 1
    h.update_job("a", lambda o: o["status"].update(execStatus=SUCCEEDED))
    await h.loop.run_once()
    status = h.status("a")
    assert (status["stage"], status["currentSize"], status["completionTime"]) == (
        "Completed",
        0,
        ts(5),
    )
    assert status["execStatus"] == SUCCEEDED, "the reconciler's block is left alone"
    written = len(h.patches)
    for _ in range(2):
        assert unchanged(await h.loop.run_once())
    assert len(h.patches) == written
    assert h.metric("lattice_jobs", {"kind": "FakeJob", "stage": "Completed"}) == 1


async def test_an_invalid_job_is_written_wrong_once_its_reconciler_failed_it() -> None:
    h = Harness()
    h.add_nodes(1)
    h.add_job("bad", invalid=True)
    await h.loop.run_once()
    assert h.patches == [], "not before its reconciler says why"
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "FakeJobFailedValidation",
        "message": "invalid FakeJob: spec.invalid: must not be set",
    }
    h.update_job(
        "bad", lambda o: o.setdefault("status", {}).update(execStatus={"conditions": [failed]})
    )
    await h.loop.run_once()
    _, _, body = h.patches[0]
    assert body == {
        "status": {
            "stage": "Wrong",
            "currentSize": 0,
            "placement": None,
            "reason": "InvalidSpec",
            "message": "invalid FakeJob: spec.invalid: must not be set",
        }
    }
    await h.loop.run_once()
    assert len(h.patches) == 1
    assert h.metric("lattice_jobs", {"kind": "FakeJob", "stage": "Wrong"}) == 1
