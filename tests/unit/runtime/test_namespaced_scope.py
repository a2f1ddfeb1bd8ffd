"""With ``--namespaces`` nothing the operator lists or watches needs cluster-wide rights.

Every informer ``lattice run`` starts is checked: a namespaced resource is listed and watched
per watched namespace (one reflector each), and the only cluster-wide ones are the
cluster-scoped objects the namespace-scoped install mode grants (deploy/namespaced): Nodes,
PriorityClasses and ClusterTrainingRuntimes. tests/e2e/test_rbac_incluster.py runs the operator
under exactly those rights.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from lattice.app import Operator
from lattice.clock import FakeClock
from lattice.config import Settings

CLUSTER_SCOPED = {"nodes", "priorityclasses", "clustertrainingruntimes"}


def scopes(settings: Settings) -> dict[str, set[str | None]]:
    client: Any = object()  # nothing is listed before serve()
    op = Operator(settings, client, clock=FakeClock(), registry=CollectorRegistry())
    out: dict[str, set[str | None]] = {}
    for informer in op.informers.informers:
        out.setdefault(informer.name, set()).update(r.namespace for r in informer.reflectors)
    return out


def test_with_namespaces_every_namespaced_list_and_watch_is_per_namespace() -> None:
    got = scopes(Settings(namespaces=("team-a", "team-b")))
    cluster_wide = {name for name, namespaces in got.items() if None in namespaces}
    assert {name.split(":")[0] for name in cluster_wide} == CLUSTER_SCOPED
    for name, namespaces in got.items():
        if name not in cluster_wide:
            assert namespaces == {"team-a", "team-b"}, name
    assert {n for n in got if n.startswith("pods:")} == {"pods:pod_info", "pods:foreign_pod_usage"}


def test_without_namespaces_everything_is_cluster_wide() -> None:
    got = scopes(Settings())
    assert all(namespaces == {None} for namespaces in got.values())
