"""Preemption on the cluster model: the release dry run, and what a victim keeps."""

from __future__ import annotations

from dataclasses import replace

from lattice.scheduler.core import NodeView
from lattice.scheduler.core.placement import Cluster
from lattice.scheduler.core.probe import ReleaseProbe
from tests.unit.scheduler.test_placement import POOL_A, job, node, plan_of, pod, running


def _frees(cluster: Cluster) -> list[list[int]]:
    return [list(row) for row in cluster.free]


def _filled(*names: str, gpus: int = 4) -> tuple[Cluster, tuple[NodeView, ...]]:
    nodes = tuple(node(n, gpus) for n in names)
    return Cluster(nodes), nodes


def test_the_probe_counts_room_on_paper_and_never_touches_the_cluster() -> None:
    cluster, _ = _filled("n0", "n1")
    three = pod(3)
    for name in ("n0", "n1"):
        assert cluster.reserve(name, three)
    before = _frees(cluster)
    gang = [pod(4), pod(4)]
    probe = ReleaseProbe(cluster, gang, frozenset())
    assert not probe.enough()
    assert probe.room == {pod(4): 0}
    probe.add([("n0", three)])
    assert probe.room == {pod(4): 1}
    assert not probe.enough()
    assert probe.fits_after("n0")
    assert not probe.fits_after("n1")
    probe.add([("n1", three)])
    assert probe.enough()
    assert _frees(cluster) == before


def test_only_short_demands_are_scarce_and_only_their_nodes_are_usable() -> None:
    nodes = (node("a0", 4, pool="a"), node("b0", 4, pool="b"))
    cluster = Cluster(nodes)
    assert cluster.reserve("a0", pod(4))
    small, big = pod(1), pod(4, where=POOL_A)
    probe = ReleaseProbe(cluster, [small, big], frozenset())
    assert list(probe.scarce) == [big]  # the small pod fits on b0 already
    assert probe.usable("a0")
    assert not probe.usable("b0")


def test_a_victim_keeps_what_the_gang_does_not_need_in_index_order() -> None:
    nodes = (node("a0", 4, pool="a"), node("b0", 4, pool="b"), node("b1", 4, pool="b"))
    # Pods 0 and 1 on pool b, pod 2 (growth) on a0: the gang needs a0 only.
    victim = running(job("victim", 1, pod(4), max_size=3), ("b0", "b1", "a0"))
    urgent = job("urgent", 1, pod(4, where=POOL_A), priority=10)
    got = plan_of(victim, urgent, nodes=nodes)
    assert got["urgent"][:3] == ("Running", 1, ("a0",))
    assert got["victim"][:3] == ("Running", 2, ("b0", "b1"))


def test_a_victim_stops_at_its_first_pod_that_no_longer_fits() -> None:
    nodes = (node("a0", 4, pool="a"), node("b0", 4, pool="b"), node("b1", 4, pool="b"))
    # Pod 1 is on a0: once the gang has it, pod 2 on b1 goes too (pods stay in index order).
    victim = running(job("victim", 1, pod(4), max_size=3), ("b0", "a0", "b1"))
    victim = replace(victim, last_resize_time=None)
    urgent = job("urgent", 1, pod(4, where=POOL_A), priority=10)
    got = plan_of(victim, urgent, nodes=nodes)
    assert got["urgent"][:3] == ("Running", 1, ("a0",))
    stage, size, placement, _ = got["victim"]
    assert stage == "Running"
    assert placement[0] == "b0"  # running pods never move
    assert "a0" not in placement
    assert size == len(placement)


def test_a_gang_that_cannot_fit_even_preempting_leaves_everyone_in_place() -> None:
    nodes = (node("a0", 4, pool="a"), node("b0", 4, pool="b"))
    holder = running(job("holder", 1, pod(4), max_size=2), ("a0", "b0"))
    huge = job("huge", 3, pod(4, where=POOL_A), priority=10)
    got = plan_of(holder, huge, nodes=nodes)
    assert got["huge"][:2] == ("Waiting", 0)
    assert got["holder"][:3] == ("Running", 2, ("a0", "b0"))
