"""The controller runtime's two writers against the real kube-apiserver.

``EventRecorder`` posts events.k8s.io/v1 Events the apiserver accepts (its strict v1 validation:
DNS-subdomain names, a 1024-byte note, the namespace rule for cluster-scoped objects), folds a
repeat within the dedupe window into the first event's ``series``, and never blocks ``record``:
when the apiserver is slow the bounded queue fills and further events are dropped and counted.

``StatusWriter`` changes only the status subresource of a TrainingJob, with a merge patch guarded
by ``metadata.resourceVersion``: an unchanged status costs no request, a stale resourceVersion is
the apiserver's own 409 (``Conflict``), and a removed key is sent as ``null`` and disappears.

Every test works in its own namespace; nothing here sleeps: the recorder is flushed (``stop``
waits for its queue to drain) and then the apiserver is read with a consistent LIST.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest
import yaml
from prometheus_client import CollectorRegistry

from lattice.api import constants
from lattice.clock import FakeClock, RealClock
from lattice.kube import Conflict, KubeClient, PatchType
from lattice.kube.client import RestClient, connect
from lattice.kube.resources import CONFIGMAPS, EVENTS, NAMESPACES, Resource
from lattice.primitives.objects import Obj
from lattice.primitives.times import format_micro_time as micro_time
from lattice.runtime.events import EventRecorder, ObjectRef
from lattice.runtime.metrics import Metrics
from lattice.runtime.status import StatusWriter
from tests.support.cluster import REPO, Cluster

TRAININGJOBS = Resource(constants.GROUP_BREEZEML, "v1", "trainingjobs", "TrainingJob")
CONTROLLER = "lattice.breezeml.ai/test-controller"
INSTANCE = "test-instance-0"


class Requests:
    """The client's request observer: every request's verb and resource, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def observe(self, *, verb: str, resource: str, code: int, seconds: float) -> None:
        del seconds
        self.seen.append((verb, resource, code))

    def throttled(self, *, verb: str, seconds: float) -> None:
        del verb, seconds

    def since(self, mark: int) -> list[tuple[str, str, int]]:
        return self.seen[mark:]


class Spy:
    """A ``KubeClient`` around the real one that records PATCH bodies and can hold CREATEs.

    ``hold()`` makes every create wait (after announcing itself on ``create_started``) until
    ``release()``: an apiserver that is as slow as the test wants, without any timer.
    """

    def __init__(self, inner: RestClient) -> None:
        self._inner = inner
        self.patches: list[tuple[str, Any, str | None]] = []
        self._gate = asyncio.Event()
        self._gate.set()
        self.create_started = asyncio.Event()

    def hold(self) -> None:
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    async def create(self, res: Resource, body: Obj, *, namespace: str | None = None) -> Obj:
        self.create_started.set()
        await self._gate.wait()
        return await self._inner.create(res, body, namespace=namespace)

    async def patch(
        self,
        res: Resource,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        field_manager: str | None = None,
        force: bool = False,
    ) -> Obj:
        self.patches.append((name, copy.deepcopy(body), subresource))
        return await self._inner.patch(
            res,
            name,
            body,
            namespace=namespace,
            subresource=subresource,
            patch_type=patch_type,
            field_manager=field_manager,
            force=force,
        )

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)


@pytest.fixture
def requests() -> Requests:
    return Requests()


@pytest.fixture
async def client(cluster: Cluster, requests: Requests) -> AsyncIterator[RestClient]:
    c = await connect(kubeconfig=str(cluster.kubeconfig), observer=requests)
    yield c
    await c.close()


@pytest.fixture
def spy(client: RestClient) -> Spy:
    return Spy(client)


async def make_configmap(client: RestClient, namespace: str) -> Obj:
    body = {"metadata": {"name": f"cm-{uuid.uuid4().hex[:6]}"}, "data": {"k": "v"}}
    return await client.create(CONFIGMAPS, body, namespace=namespace)


def ref(obj: Obj) -> ObjectRef:
    meta = obj["metadata"]
    return ObjectRef(
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta["uid"],
    )


async def events_about(client: RestClient, namespace: str, uid: str) -> list[Obj]:
    """Every events.k8s.io/v1 Event in ``namespace`` whose ``regarding.uid`` is ``uid``."""
    page = await client.list(EVENTS, namespace=namespace)
    found = [e for e in page["items"] if e.get("regarding", {}).get("uid") == uid]
    return sorted(found, key=lambda e: (e["eventTime"], e["metadata"]["name"]))


class Drops:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def recorder(
    client: KubeClient | Spy,
    *,
    clock: RealClock | FakeClock | None = None,
    on_drop: Any = None,
    capacity: int = 4096,
    dedupe_window: float = 600.0,
) -> EventRecorder:
    rec = EventRecorder(
        cast(KubeClient, client),
        clock=clock or RealClock(),
        controller=CONTROLLER,
        instance=INSTANCE,
        capacity=capacity,
        dedupe_window=dedupe_window,
        on_drop=on_drop,
    )
    rec.start()
    return rec


# --- EventRecorder ------------------------------------------------------------------------------


async def test_recorded_events_reach_the_apiserver_describing_the_object(
    namespace: str, client: RestClient
) -> None:
    cm = await make_configmap(client, namespace)
    drops = Drops()
    rec = recorder(client, on_drop=drops)
    rec.record(ref(cm), type="Normal", reason="Created", note="created the thing")
    rec.record(ref(cm), type="Warning", reason="Failed", note="the thing broke", action="Sync")
    await rec.stop()

    assert drops.count == 0
    events = await events_about(client, namespace, cm["metadata"]["uid"])
    assert [(e["type"], e["reason"], e["note"], e["action"]) for e in events] == [
        ("Normal", "Created", "created the thing", "Reconcile"),
        ("Warning", "Failed", "the thing broke", "Sync"),
    ]
    for event in events:
        assert event["regarding"] == {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "namespace": namespace,
            "name": cm["metadata"]["name"],
            "uid": cm["metadata"]["uid"],
        }
        assert event["reportingController"] == CONTROLLER
        assert event["reportingInstance"] == INSTANCE
        assert event["metadata"]["namespace"] == namespace
        assert event["metadata"]["name"].startswith(f"{cm['metadata']['name']}.")  # client-go
        assert "series" not in event
    assert len({e["metadata"]["name"] for e in events}) == 2


async def test_an_event_about_a_trainingjob_after_its_status_write(
    crds_installed: Cluster, namespace: str, client: RestClient
) -> None:
    job = await make_trainingjob(client, namespace)
    written = await StatusWriter(client).write(
        TRAININGJOBS,
        namespace=namespace,
        name=job["metadata"]["name"],
        resource_version=job["metadata"]["resourceVersion"],
        old={},
        new={"stage": "Waiting"},
    )
    assert written is not None
    rec = recorder(client)
    rec.record(ref(written), type="Normal", reason="Queued", note="waiting for 2 workers")
    await rec.stop()

    [event] = await events_about(client, namespace, job["metadata"]["uid"])
    assert event["regarding"]["apiVersion"] == "breezeml.ai/v1"
    assert event["regarding"]["kind"] == "TrainingJob"
    assert event["regarding"]["name"] == job["metadata"]["name"]
    assert (event["reason"], event["note"]) == ("Queued", "waiting for 2 workers")


async def test_repeats_within_the_window_aggregate_into_one_event_series(
    namespace: str, client: RestClient
) -> None:
    cm = await make_configmap(client, namespace)
    clock = FakeClock(start=RealClock().now().replace(microsecond=0))
    drops = Drops()
    rec = recorder(client, clock=clock, on_drop=drops, dedupe_window=600)
    times = []
    for _ in range(3):
        times.append(clock.now())
        rec.record(ref(cm), type="Warning", reason="BackOff", note="pull failed")
        await clock.advance(10)
    rec.record(ref(cm), type="Warning", reason="BackOff", note="a different note")
    await rec.flush()

    events = await events_about(client, namespace, cm["metadata"]["uid"])
    by_note = {e["note"]: e for e in events}
    assert sorted(by_note) == ["a different note", "pull failed"]
    repeated = by_note["pull failed"]
    assert repeated["series"] == {"count": 3, "lastObservedTime": micro_time(times[2])}
    assert repeated["eventTime"] == micro_time(times[0])  # the first occurrence
    assert "series" not in by_note["a different note"]

    # once the window (measured from the first occurrence) is over, a repeat starts a new event
    await clock.advance(600)
    rec.record(ref(cm), type="Warning", reason="BackOff", note="pull failed")
    await rec.stop()
    assert drops.count == 0
    again = [
        e
        for e in await events_about(client, namespace, cm["metadata"]["uid"])
        if e["note"] == "pull failed"
    ]
    assert len(again) == 2
    assert again[0]["series"]["count"] == 3
    assert "series" not in again[1]
    assert again[1]["eventTime"] == micro_time(clock.now())


async def test_a_repeat_of_a_deleted_event_creates_a_new_one(
    namespace: str, client: RestClient
) -> None:
    cm = await make_configmap(client, namespace)
    drops = Drops()
    rec = recorder(client, on_drop=drops)
    rec.record(ref(cm), type="Normal", reason="Synced", note="in sync")
    await rec.flush()
    [first] = await events_about(client, namespace, cm["metadata"]["uid"])
    await client.delete(EVENTS, first["metadata"]["name"], namespace=namespace)  # TTL, or a user

    rec.record(ref(cm), type="Normal", reason="Synced", note="in sync")
    await rec.stop()
    [second] = await events_about(client, namespace, cm["metadata"]["uid"])
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert "series" not in second
    assert drops.count == 0


async def test_notes_are_cut_to_the_apiservers_1024_byte_limit(
    namespace: str, client: RestClient
) -> None:
    cm = await make_configmap(client, namespace)
    drops = Drops()
    rec = recorder(client, on_drop=drops)
    rec.record(ref(cm), type="Warning", reason="Ascii", note="x" * 3000)
    rec.record(ref(cm), type="Warning", reason="TwoByte", note="é" * 1000)  # 2000 bytes
    rec.record(ref(cm), type="Warning", reason="ThreeByte", note="a" + "€" * 400)  # 1201 bytes
    await rec.stop()

    assert drops.count == 0, "the apiserver refused an event"
    notes = {
        e["reason"]: e["note"] for e in await events_about(client, namespace, cm["metadata"]["uid"])
    }
    assert notes["Ascii"] == "x" * 1024
    assert notes["TwoByte"] == "é" * 512
    assert notes["ThreeByte"] == "a" + "€" * 341  # 1 + 1023 bytes: no half character
    assert all(len(n.encode()) <= 1024 for n in notes.values())


async def test_an_event_about_a_cluster_scoped_object_goes_to_default(
    namespace: str, client: RestClient
) -> None:
    ns_obj = await client.get(NAMESPACES, namespace)
    uid = ns_obj["metadata"]["uid"]
    drops = Drops()
    rec = recorder(client, on_drop=drops)
    rec.record(ref(ns_obj), type="Normal", reason="Observed", note="namespace seen")
    await rec.stop()
    try:
        assert drops.count == 0
        [event] = await events_about(client, "default", uid)
        assert event["regarding"]["kind"] == "Namespace"
        assert event["regarding"].get("namespace", "") == ""
        assert event["reason"] == "Observed"
    finally:
        for event in await events_about(client, "default", uid):
            await client.delete(EVENTS, event["metadata"]["name"], namespace="default")


async def test_record_never_blocks_while_the_apiserver_is_slow(
    namespace: str, client: RestClient, spy: Spy
) -> None:
    cm = await make_configmap(client, namespace)
    metrics = Metrics(CollectorRegistry())
    rec = recorder(spy, on_drop=metrics.events_dropped.inc, capacity=3)
    spy.hold()
    rec.record(ref(cm), type="Normal", reason="R0", note="in flight")
    await asyncio.wait_for(spy.create_started.wait(), 10)  # the sender is stuck on R0

    for i in range(1, 6):  # synchronous calls: returning at all is "never blocks"
        rec.record(ref(cm), type="Normal", reason=f"R{i}", note="queued")
    dropped = metrics.registry.get_sample_value("lattice_events_dropped_total")
    assert dropped == 2  # R4 and R5: the queue holds R1..R3

    spy.release()
    await rec.stop()
    reasons = [e["reason"] for e in await events_about(client, namespace, cm["metadata"]["uid"])]
    assert sorted(reasons) == ["R0", "R1", "R2", "R3"]
    assert metrics.registry.get_sample_value("lattice_events_dropped_total") == 2


async def test_stop_gives_up_on_a_stuck_apiserver_and_counts_what_it_abandons(
    namespace: str, client: RestClient, spy: Spy
) -> None:
    cm = await make_configmap(client, namespace)
    drops = Drops()
    rec = recorder(spy, on_drop=drops)
    spy.hold()
    rec.record(ref(cm), type="Normal", reason="Stuck", note="in flight")
    await asyncio.wait_for(spy.create_started.wait(), 10)
    rec.record(ref(cm), type="Normal", reason="Queued", note="behind it")
    await asyncio.wait_for(rec.stop(timeout=0.05), 10)  # returns instead of hanging
    assert drops.count == 2  # the one in flight and the one queued behind it
    spy.release()
    assert await events_about(client, namespace, cm["metadata"]["uid"]) == []


# --- StatusWriter -------------------------------------------------------------------------------


async def make_trainingjob(client: RestClient, namespace: str) -> Obj:
    body = yaml.safe_load((REPO / "examples" / "trainingjob" / "simple.yaml").read_text())
    body["metadata"] = {
        "name": f"tj-{uuid.uuid4().hex[:6]}",
        "labels": {"team": "vision"},
        "annotations": {"note": "kept"},
    }
    return await client.create(TRAININGJOBS, body, namespace=namespace)


async def test_a_status_write_changes_the_status_subresource_and_nothing_else(
    crds_installed: Cluster, namespace: str, client: RestClient, spy: Spy
) -> None:
    job = await make_trainingjob(client, namespace)
    name = job["metadata"]["name"]
    status = {
        "stage": "Waiting",
        "currentSize": 0,
        "reason": "Queued",
        "message": "waiting for capacity",
        "submitTime": "2026-01-01T00:00:00Z",
    }
    written = await StatusWriter(cast(KubeClient, spy)).write(
        TRAININGJOBS,
        namespace=namespace,
        name=name,
        resource_version=job["metadata"]["resourceVersion"],
        old={},
        new=status,
    )
    assert written is not None
    assert written["status"] == status
    assert spy.patches == [
        (
            name,
            {"metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}, "status": status},
            "status",
        )
    ]

    fresh = await client.get(TRAININGJOBS, name, namespace=namespace)
    assert fresh["status"] == status
    assert fresh["spec"] == job["spec"]
    assert fresh["metadata"]["generation"] == job["metadata"]["generation"]  # spec untouched
    assert fresh["metadata"]["labels"] == {"team": "vision"}
    assert fresh["metadata"]["annotations"] == {"note": "kept"}
    assert fresh["metadata"]["uid"] == job["metadata"]["uid"]
    assert fresh["metadata"]["resourceVersion"] != job["metadata"]["resourceVersion"]
    assert fresh["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    "new",
    [
        pytest.param({"stage": "Waiting", "currentSize": 0}, id="identical"),
        pytest.param({"currentSize": 0, "stage": "Waiting"}, id="same keys in another order"),
        pytest.param({"stage": "Waiting", "currentSize": 0, "reason": None}, id="null == absent"),
    ],
)
async def test_an_unchanged_status_returns_none_and_sends_no_request(
    crds_installed: Cluster,
    namespace: str,
    client: RestClient,
    requests: Requests,
    new: Obj,
) -> None:
    job = await make_trainingjob(client, namespace)
    name = job["metadata"]["name"]
    writer = StatusWriter(client)
    first = await writer.write(
        TRAININGJOBS,
        namespace=namespace,
        name=name,
        resource_version=job["metadata"]["resourceVersion"],
        old={},
        new={"stage": "Waiting", "currentSize": 0},
    )
    assert first is not None
    rv = first["metadata"]["resourceVersion"]

    mark = len(requests.seen)
    again = await writer.write(
        TRAININGJOBS,
        namespace=namespace,
        name=name,
        resource_version=rv,
        old=first["status"],
        new=new,
    )
    assert again is None
    assert requests.since(mark) == []
    fresh = await client.get(TRAININGJOBS, name, namespace=namespace)
    assert fresh["metadata"]["resourceVersion"] == rv


async def test_a_stale_resource_version_is_the_apiservers_conflict(
    crds_installed: Cluster, namespace: str, client: RestClient
) -> None:
    job = await make_trainingjob(client, namespace)
    name = job["metadata"]["name"]
    stale_rv = job["metadata"]["resourceVersion"]
    # someone else updates the object after our cache read it
    bumped = await client.patch(
        TRAININGJOBS, name, {"metadata": {"labels": {"by": "someone-else"}}}, namespace=namespace
    )
    assert bumped["metadata"]["resourceVersion"] != stale_rv
    writer = StatusWriter(client)

    with pytest.raises(Conflict) as caught:
        await writer.write(
            TRAININGJOBS,
            namespace=namespace,
            name=name,
            resource_version=stale_rv,
            old={},
            new={"stage": "Running"},
        )
    assert caught.value.status == 409
    fresh = await client.get(TRAININGJOBS, name, namespace=namespace)
    assert "status" not in fresh or "stage" not in fresh["status"]
    assert fresh["metadata"]["resourceVersion"] == bumped["metadata"]["resourceVersion"]

    # the requeued reconcile reads the new RV and succeeds
    written = await writer.write(
        TRAININGJOBS,
        namespace=namespace,
        name=name,
        resource_version=fresh["metadata"]["resourceVersion"],
        old=fresh.get("status") or {},
        new={"stage": "Running"},
    )
    assert written is not None
    assert written["status"]["stage"] == "Running"


async def test_a_removed_key_is_sent_as_null_and_disappears(
    crds_installed: Cluster, namespace: str, client: RestClient, spy: Spy
) -> None:
    job = await make_trainingjob(client, namespace)
    name = job["metadata"]["name"]
    writer = StatusWriter(cast(KubeClient, spy))
    condition = {"type": "Created", "status": "True", "reason": "Created", "message": "ok"}
    old = {
        "stage": "Waiting",
        "reason": "Queued",
        "message": "waiting for capacity",
        "execStatus": {
            "conditions": [condition],
            "lastReconcileTime": "2026-01-01T00:00:00Z",
        },
    }
    first = await writer.write(
        TRAININGJOBS,
        namespace=namespace,
        name=name,
        resource_version=job["metadata"]["resourceVersion"],
        old={},
        new=old,
    )
    assert first is not None
    assert first["status"] == old

    new = {"stage": "Running", "execStatus": {"conditions": [condition]}}
    second = await writer.write(
        TRAININGJOBS,
        namespace=namespace,
        name=name,
        resource_version=first["metadata"]["resourceVersion"],
        old=first["status"],
        new=new,
    )
    assert second is not None
    _, body, subresource = spy.patches[-1]
    assert subresource == "status"
    assert body["status"] == {
        "stage": "Running",
        "reason": None,
        "message": None,
        "execStatus": {"lastReconcileTime": None},
    }
    assert second["status"] == new
    fresh = await client.get(TRAININGJOBS, name, namespace=namespace)
    assert fresh["status"] == new
    assert "reason" not in fresh["status"]
    assert "lastReconcileTime" not in fresh["status"]["execStatus"]


def test_micro_time_is_utc_with_six_fractional_digits() -> None:
    t = datetime(2026, 3, 4, 5, 6, 7, 89, tzinfo=UTC)
    assert micro_time(t) == "2026-03-04T05:06:07.000089Z"
    assert micro_time(t.replace(tzinfo=None)) == "2026-03-04T05:06:07.000089Z"  # naive = UTC
    east = t.astimezone(timezone(timedelta(hours=2)))
    assert micro_time(east) == "2026-03-04T05:06:07.000089Z"
