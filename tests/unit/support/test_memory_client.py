"""The in-memory API seam behaves as the apiserver does for what the operator relies on.

Every other unit test that uses ``tests.support.memory_client.MemoryClient`` trusts these rules;
the real apiserver's side of them is covered by the integration tier.
"""

from __future__ import annotations

import asyncio

import pytest

from lattice.clock import FakeClock
from lattice.kube import AlreadyExists, Conflict, Gone, KubeClient, NotFound, PatchType, ServerError
from lattice.kube.resources import NODES, PODS, Resource
from lattice.runtime.informer import Informer
from lattice.runtime.projections import pod_info
from tests.support.aio import settle
from tests.support.builders import node, pod, trainingjob
from tests.support.fake_apiserver import running
from tests.support.memory_client import Call, MemoryClient
from tests.support.patches import PatchTestFailed

JOBS = Resource("breezeml.ai", "v1", "trainingjobs", "TrainingJob")


async def test_create_stamps_identity_and_get_returns_copies() -> None:
    clock = FakeClock()
    client: KubeClient = MemoryClient(clock=clock)
    made = await client.create(JOBS, trainingjob("a"), namespace="ns")
    meta = made["metadata"]
    assert (meta["namespace"], meta["generation"], meta["resourceVersion"]) == ("ns", 1, "1")
    assert meta["uid"]
    assert meta["creationTimestamp"].endswith("Z")
    got = await client.get(JOBS, "a", namespace="ns")
    got["spec"]["minSize"] = 99
    assert (await client.get(JOBS, "a", namespace="ns"))["spec"]["minSize"] == 1
    with pytest.raises(AlreadyExists):
        await client.create(JOBS, trainingjob("a"), namespace="ns")
    with pytest.raises(NotFound):
        await client.get(JOBS, "a", namespace="other")


async def test_status_subresource_separates_status_from_the_rest() -> None:
    client = MemoryClient()
    await client.create(JOBS, trainingjob("a"), namespace="ns")
    main = await client.patch(
        JOBS, "a", {"spec": {"maxSize": 4}, "status": {"stage": "X"}}, namespace="ns"
    )
    assert "status" not in main, "a main-resource write leaves status alone"
    assert main["metadata"]["generation"] == 2, "a spec change bumps generation"
    status = await client.patch(
        JOBS,
        "a",
        {"spec": {"maxSize": 8}, "status": {"stage": "Running"}},
        namespace="ns",
        subresource="status",
    )
    assert status["status"] == {"stage": "Running"}
    assert status["spec"]["maxSize"] == 4, "a status write leaves spec alone"
    assert status["metadata"]["generation"] == 2
    assert int(status["metadata"]["resourceVersion"]) > int(main["metadata"]["resourceVersion"])


async def test_resource_version_preconditions_and_no_op_writes() -> None:
    client = MemoryClient()
    made = await client.create(JOBS, trainingjob("a"), namespace="ns")
    rv = made["metadata"]["resourceVersion"]
    await client.patch(JOBS, "a", {"metadata": {"labels": {"x": "1"}}}, namespace="ns")
    stale = {"metadata": {"resourceVersion": rv}, "status": {"stage": "Running"}}
    with pytest.raises(Conflict):
        await client.patch(JOBS, "a", stale, namespace="ns", subresource="status")
    current = await client.get(JOBS, "a", namespace="ns")
    with pytest.raises(Conflict):
        await client.replace(
            JOBS,
            "a",
            {**current, "metadata": {**current["metadata"], "resourceVersion": rv}},
            namespace="ns",
        )
    again = await client.patch(JOBS, "a", {"metadata": {"labels": {"x": "1"}}}, namespace="ns")
    assert again["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
    with pytest.raises(Conflict):
        await client.delete(JOBS, "a", namespace="ns", uid="someone-else")
    gone = await client.delete(JOBS, "a", namespace="ns", uid=current["metadata"]["uid"])
    assert gone["metadata"]["name"] == "a"
    with pytest.raises(NotFound):
        await client.delete(JOBS, "a", namespace="ns")


async def test_json_patch_test_op_guards_the_write() -> None:
    client = MemoryClient()
    await client.create(JOBS, trainingjob("a"), namespace="ns")
    ops = [
        {"op": "test", "path": "/spec/maxSize", "value": 1},
        {"op": "replace", "path": "/spec/maxSize", "value": 2},
    ]
    out = await client.patch(JOBS, "a", ops, namespace="ns", patch_type=PatchType.JSON)
    assert out["spec"]["maxSize"] == 2
    with pytest.raises(PatchTestFailed):
        await client.patch(JOBS, "a", ops, namespace="ns", patch_type=PatchType.JSON)


async def test_injected_faults_hit_only_their_requests() -> None:
    client = MemoryClient()
    await client.create(JOBS, trainingjob("a"), namespace="ns")
    client.fail("patch", Conflict(409, "Conflict", "injected"), plural="trainingjobs", times=2)
    client.fail("list", ServerError(500, "InternalError", "down"), all_namespaces=True, times=None)
    for _ in range(2):
        with pytest.raises(Conflict):
            await client.patch(JOBS, "a", {"spec": {"maxSize": 3}}, namespace="ns")
    assert (await client.patch(JOBS, "a", {"spec": {"maxSize": 3}}, namespace="ns"))["spec"][
        "maxSize"
    ] == 3
    assert [o["metadata"]["name"] for o in (await client.list(JOBS, namespace="ns"))["items"]] == [
        "a"
    ]
    for _ in range(2):
        with pytest.raises(ServerError):
            await client.list(JOBS)
    assert client.calls[0] == Call("create", "trainingjobs", "ns", "a")


async def test_a_fault_may_hit_one_subresource_alone() -> None:
    client = MemoryClient()
    await client.create(JOBS, trainingjob("a"), namespace="ns")
    client.fail("patch", Conflict(409, "Conflict", "injected"), subresource="status")
    client.fail("patch", ServerError(500, "InternalError", "main"), subresource="", times=None)
    with pytest.raises(ServerError):
        await client.patch(JOBS, "a", {"spec": {"maxSize": 3}}, namespace="ns")
    status = {"status": {"phase": "Running"}}
    with pytest.raises(Conflict):
        await client.patch(JOBS, "a", status, namespace="ns", subresource="status")
    out = await client.patch(JOBS, "a", status, namespace="ns", subresource="status")
    assert out["status"] == {"phase": "Running"}, "the status fault was used up"


async def test_list_filters_and_pages() -> None:
    client = MemoryClient(page_size=2)
    client.seed(PODS, *(pod(f"p{i}", job="j" if i % 2 else None, namespace="ns") for i in range(5)))
    client.seed(NODES, node("n0"), node("n1", labels={"pool": "a"}))
    first = await client.list(PODS, namespace="ns")
    assert len(first["items"]) == 2
    assert first["metadata"]["continue"]
    rest = await client.list(PODS, namespace="ns", continue_token=first["metadata"]["continue"])
    assert [p["metadata"]["name"] for p in rest["items"]] == ["p2", "p3"]
    managed = await client.list(PODS, label_selector="training.kubeflow.org/job-name=j", limit=10)
    assert [p["metadata"]["name"] for p in managed["items"]] == ["p1", "p3"]
    others = await client.list(PODS, label_selector="!training.kubeflow.org/job-name", limit=10)
    assert [p["metadata"]["name"] for p in others["items"]] == ["p0", "p2"], "page_size caps"
    token = others["metadata"]["continue"]
    last = await client.list(
        PODS, label_selector="!training.kubeflow.org/job-name", limit=10, continue_token=token
    )
    assert [p["metadata"]["name"] for p in last["items"]] == ["p4"]
    assert not last["metadata"]["continue"]
    by_field = await client.list(PODS, field_selector="metadata.name=p4")
    assert [p["metadata"]["name"] for p in by_field["items"]] == ["p4"]
    pool = await client.list(NODES, label_selector="pool=a")
    assert [n["metadata"]["name"] for n in pool["items"]] == ["n1"]


async def test_watch_streams_changes_and_410s_after_compaction() -> None:
    client = MemoryClient()
    start = (await client.list(JOBS))["metadata"]["resourceVersion"]
    seen: list[tuple[str, str]] = []

    async def follow() -> None:
        stream = client.watch(JOBS, resource_version=start, timeout_seconds=60)
        async for event in stream:
            seen.append((event.type, event.object["metadata"]["name"]))

    task = asyncio.create_task(follow())
    await client.create(JOBS, trainingjob("a"), namespace="ns")
    await client.patch(
        JOBS, "a", {"status": {"stage": "Running"}}, namespace="ns", subresource="status"
    )
    await client.delete(JOBS, "a", namespace="ns")
    await settle()
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    await client.end_watches()
    await asyncio.wait_for(task, 5)
    client.compact()
    with pytest.raises(Gone):
        async for _ in client.watch(JOBS, resource_version=start, timeout_seconds=60):
            pass


async def test_an_informer_lists_watches_and_relists_on_410() -> None:
    client = MemoryClient()
    client.seed(PODS, pod("p0", job="j", namespace="ns"))
    informer = Informer(client, PODS, transform=pod_info, clock=FakeClock())
    async with running(informer.run):
        await asyncio.wait_for(informer.wait_synced(), 5)
        assert informer.store.keys() == ["ns/p0"]
        await client.create(PODS, pod("p1", job="j"), namespace="ns")
        await settle()
        assert sorted(informer.store.keys()) == ["ns/p0", "ns/p1"]
        client.fail("watch", Gone(410, "Expired", "injected"))
        await client.delete(PODS, "p0", namespace="ns")
        await client.end_watches()
        await settle(200)
        assert sorted(informer.store.keys()) == ["ns/p1"]
        assert [c.verb for c in client.calls].count("list") >= 2, "the 410 forced a relist"


async def test_held_requests_overlap_in_flight_and_complete_in_order_served() -> None:
    client = MemoryClient(yields=True)
    client.seed(JOBS, trainingjob("a", namespace="ns"), trainingjob("b", namespace="ns"))
    gate = client.hold("patch", name="a")
    body = {"status": {"stage": "Running"}}
    slow = asyncio.create_task(client.patch(JOBS, "a", body, namespace="ns", subresource="status"))
    fast = asyncio.create_task(client.patch(JOBS, "b", body, namespace="ns", subresource="status"))
    await settle()
    assert fast.done()
    assert not slow.done()
    assert (client.inflight, client.max_inflight) == (1, 2)
    gate.set()
    await asyncio.wait_for(slow, 5)
    assert client.inflight == 0
    assert [c.name for c in client.calls] == ["a", "b"], "calls are in arrival order"
    assert [c.name for c in client.served] == ["b", "a"], "served in completion order"
    assert client.served[0].body == body
    # The hold was for one request: the next patch of a is not held.
    await asyncio.wait_for(client.patch(JOBS, "a", {"spec": {"x": 1}}, namespace="ns"), 5)


async def test_hooks_run_around_the_work_and_faults_may_be_any_exception() -> None:
    client = MemoryClient()
    client.seed(JOBS, trainingjob("a", namespace="ns"))
    seen: list[str] = []

    def another_writer(call: Call) -> None:
        seen.append(f"before {call.verb}")
        obj = client.stored(JOBS, call.name, namespace="ns")
        assert obj is not None
        obj["metadata"]["labels"] = {"by": "other"}
        client.seed(JOBS, obj)  # lands just before the request is served

    client.before("patch", another_writer, name="a")
    client.after("*", lambda call: seen.append(f"after {call.verb}"))
    client.fail("patch", KeyError("not an ApiError"), name="a")
    with pytest.raises(KeyError):
        await client.patch(JOBS, "a", {"spec": {"x": 1}}, namespace="ns")
    out = await client.patch(JOBS, "a", {"spec": {"x": 1}}, namespace="ns")
    assert out["metadata"]["labels"] == {"by": "other"}
    assert seen == ["before patch", "before patch", "after patch"], "no after on a failure"
    assert [c.verb for c in client.served] == ["patch"]


async def test_seed_replaces_and_clone_starts_a_new_history() -> None:
    client = MemoryClient()
    (first,) = client.seed(JOBS, trainingjob("a", namespace="ns"))
    start = first["metadata"]["resourceVersion"]
    changed = client.stored(JOBS, "a", namespace="ns")
    assert changed is not None
    changed["spec"]["maxSize"] = 7
    (second,) = client.seed(JOBS, changed)
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    assert client.latest(JOBS) == second["metadata"]["resourceVersion"]
    assert client.latest(PODS) == "0", "nothing changed pods"
    assert [o["spec"]["maxSize"] for o in client.items(JOBS)] == [7]
    seen: list[str] = []
    async for event in client.watch(JOBS, resource_version="0", timeout_seconds=1):
        seen.append(event.type)
        if len(seen) == 2:
            break
    assert seen == ["ADDED", "MODIFIED"]
    twin = client.clone()
    assert twin.items(JOBS) == client.items(JOBS)
    assert twin.resource_version == client.resource_version
    await twin.patch(JOBS, "a", {"spec": {"maxSize": 1}}, namespace="ns")
    assert [o["spec"]["maxSize"] for o in client.items(JOBS)] == [7], "the clone is separate"
    with pytest.raises(Gone):
        async for _ in twin.watch(JOBS, resource_version=start, timeout_seconds=1):
            pass
