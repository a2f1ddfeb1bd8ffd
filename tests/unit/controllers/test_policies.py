"""The reconciler's policy modules on their own: the watch handlers feed the expectations and
enqueue the owner for every child kind alike; the counter families come from the plugin's
``CountsJobs`` capability, never from its kind name."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from lattice.clock import FakeClock
from lattice.controllers.conditions import CREATED, FAILED, RESTARTED, SUCCESSFUL
from lattice.controllers.watch import child_handler, job_handler, raw_child
from lattice.controllers.write import counter_families
from lattice.frameworks.registry import plugin_for
from lattice.primitives.objects import Obj
from lattice.runtime.expectations import Expectations
from lattice.runtime.metrics import Metrics


def child(name: str, *, owner_kind: str = "MPIJob", deleting: bool = False) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": "ns",
        "ownerReferences": [{"kind": owner_kind, "name": "pi", "uid": "u", "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_a_child_event_feeds_the_expectations_and_enqueues_its_owner() -> None:
    exp = Expectations(FakeClock())
    key = "MPIJob/ns/pi/ConfigMap"
    exp.expect_creations(key, ["pi-config"])
    exp.expect_deletions(key, ["pi-old"])
    enqueued: list[str] = []
    handler = child_handler(
        kind="MPIJob", what="ConfigMap", read=raw_child, expectations=exp, enqueue=enqueued.append
    )
    handler("ADDED", None, child("pi-config"))
    assert not exp.satisfied(key), "the deletion is still expected"
    handler("MODIFIED", child("pi-old"), child("pi-old", deleting=True))
    assert exp.satisfied(key)
    assert enqueued == ["ns/pi", "ns/pi"]


def test_a_child_of_another_kind_or_without_owner_is_ignored() -> None:
    exp = Expectations(FakeClock())
    enqueued: list[str] = []
    handler = child_handler(
        kind="MPIJob", what="Secret", read=raw_child, expectations=exp, enqueue=enqueued.append
    )
    handler("ADDED", None, child("x", owner_kind="MXJob"))
    handler("ADDED", None, {"metadata": {"name": "y", "namespace": "ns"}})
    handler("DELETED", None, None)
    assert enqueued == []


def test_a_job_update_that_changes_only_scheduler_bookkeeping_enqueues_nothing() -> None:
    deleted: list[tuple[str, str]] = []
    enqueued: list[str] = []
    plugin = plugin_for("TrainingJob")
    handler = job_handler(
        plugin=plugin, on_deleted=lambda ns, n: deleted.append((ns, n)), enqueue=enqueued.append
    )
    old: Obj = {"metadata": {"name": "a", "namespace": "ns"}, "status": {"queuePosition": 1}}
    new: Obj = {"metadata": {"name": "a", "namespace": "ns"}, "status": {"queuePosition": 2}}
    handler("MODIFIED", old, new)
    assert enqueued == []
    handler("MODIFIED", old, {**new, "spec": {"maxSize": 3}})
    handler("DELETED", new, None)
    assert enqueued == ["ns/a", "ns/a"]
    assert deleted == [("ns", "a")]


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels or None)
    return value or 0.0


@pytest.mark.parametrize(
    ("kind", "framework", "mpi_counted"),
    [
        pytest.param("MPIJob", "mpi", 1.0, id="MPIJob counts in mpi-operator's family too"),
        pytest.param("TrainingJob", "pytorch", 0.0, id="others count in training-operator's only"),
    ],
)
def test_counter_families_follow_the_plugins_counted_by(
    kind: str, framework: str, mpi_counted: float
) -> None:
    metrics = Metrics(CollectorRegistry())
    families = counter_families(metrics, framework, plugin_for(kind))
    assert set(families) == {CREATED, SUCCESSFUL, FAILED, RESTARTED}
    for count in families[CREATED]:
        count("ns")
    labels = {"job_namespace": "ns", "framework": framework}
    assert sample(metrics, "training_operator_jobs_created_total", **labels) == 1.0
    assert sample(metrics, "mpi_operator_jobs_created_total") == mpi_counted


def test_an_unknown_counter_family_is_refused_by_name() -> None:
    class Plugin:
        counted_by = ("volcano",)

    metrics = Metrics(CollectorRegistry())
    with pytest.raises(ValueError, match="counted_by: unknown metric family 'volcano'"):
        counter_families(metrics, "x", Plugin())  # type: ignore[arg-type]
