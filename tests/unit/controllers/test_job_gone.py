"""A job deleted between the cache read and its status write, against the in-memory API.

The write's 404 ends the reconcile quietly: no exception (which the controller would log with a
traceback and retry), and neither the events nor the counters that follow a write.
"""

from __future__ import annotations

import asyncio

from lattice.clock import yield_now
from lattice.frameworks.trainingjob import TrainingJobPlugin
from lattice.kube import NotFound
from tests.unit.controllers.harness import NS, World
from tests.unit.controllers.test_job_reconciler import _trainingjob

TURNS = 1000


async def test_a_job_deleted_before_its_status_write_ends_the_reconcile_quietly() -> None:
    w = World(TrainingJobPlugin())
    w.apply(_trainingjob("t"), size=1)
    gate = w.client.hold("patch", plural=w.res.plural, name="t")
    task = asyncio.ensure_future(w.reconcile("t"))
    for _ in range(TURNS):
        if w.client.inflight and not task.done():
            break
        await yield_now()
    assert w.client.inflight, "the status write never started"
    await w.client.delete(w.res, "t", namespace=NS)  # kubectl delete, while the write waits
    gate.set()
    result = await task
    assert result.requeue_after is None
    patches = [c for c in w.client.calls if c.verb == "patch" and c.subresource == "status"]
    assert patches, "the reconcile tried its status write"
    assert not [c for c in w.client.served if c in patches], "and the server refused it"
    # The pod and Service creates were served and announced; what follows the write was not.
    assert w.recorder.reasons() == ["SuccessfulCreatePod", "SuccessfulCreateService"]
    created = {"job_namespace": NS, "framework": "pytorch"}
    assert w.sample("training_operator_jobs_created_total", **created) == 0


async def test_the_status_write_of_a_missing_job_is_a_404_without_the_reconciler() -> None:
    # The fault the test above relies on is the server's own, not an injected one.
    w = World(TrainingJobPlugin())
    try:
        await w.client.patch(w.res, "nobody", {"status": {}}, namespace=NS, subresource="status")
    except NotFound:
        return
    raise AssertionError("a status patch of a missing object must be a 404")
