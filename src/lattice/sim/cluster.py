"""The simulated cluster: pools of nodes with resource vectors, labels and taints, and what each
simulated job's pods request and where they may run.

Contract:
- A :class:`Pool` is ``count`` identical nodes: a capacity vector (:data:`Resources`, ``pods``
  defaulting to 110), labels (every node also carries ``pool=<name>`` unless the labels set
  ``pool``) and taints. Nodes are named ``<pool>-<i>`` (``node-<i>`` for the homogeneous
  cluster), in pool order.
- A :class:`ClusterModel` is the pools plus the *unit resource* (the resource a trace's units
  count, ``nvidia.com/gpu`` by default; ``cpu`` counts whole cores) and the ``cpu``/``memory``
  each unit of a job asks for. A job's replica (one unit, as the simulator sizes jobs in unit
  replicas) requests one unit of the unit resource, ``cpu_per_unit`` and ``memory_per_unit``
  (unless the unit is that resource) and one ``pods`` slot. Its constraint is the job's
  ``node_selector`` and ``tolerations``, plus what the ExtendedResourceToleration admission
  plugin adds: an ``Exists``/``NoSchedule`` toleration for each extended resource requested.
- :func:`homogeneous` is the cluster ``lattice simulate`` ran on before pools: ``capacity``
  units on nodes of ``units_per_node`` (the last one may be smaller), each node's cpu and
  memory exactly its units times the per-unit requests, so the unit resource alone decides fit
  and every policy's result equals the unit-only model's.
- :meth:`ClusterModel.nodes` gives the core's :class:`NodeView` values (``free_units`` = the
  node's whole units of the unit resource); :meth:`ClusterModel.pool_units` gives the
  baselines' view: per pool, its total units and whether a job may use it (its selector and
  tolerations admit the pool's nodes, and an empty node holds one replica).
- :func:`parse_pool` reads ``--pool`` (``"NAME COUNT RES=QTY... [label:K=V] [taint:K[=V]:EFFECT]"``,
  tokens split on spaces or commas); :func:`pools_from_json` reads ``--pools`` (a JSON list of
  ``{"name", "count", "resources", "labels", "taints": [{"key", "value", "effect"}]}``). Bad
  input raises ``ValueError`` naming the pool, the field and the rule.
- :func:`assign_pools` gives a seeded ``fraction`` of the jobs without a selector a
  ``pool=<name>`` node selector, the pool drawn among those with at least the job's
  ``min_size`` units (a job no pool can hold stays unpinned), weighted by their units.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lattice.primitives.quantity import resource_units
from lattice.scheduler.core import (
    Constraint,
    NodeView,
    PodDemand,
    Resources,
    Taint,
    Toleration,
    resources,
)
from lattice.sim.trace import SimJob

__all__ = [
    "DEFAULT_CPU_PER_UNIT",
    "DEFAULT_MEMORY_PER_UNIT",
    "GPU",
    "ClusterModel",
    "Pool",
    "assign_pools",
    "homogeneous",
    "is_extended",
    "parse_pool",
    "pools_from_json",
]

GPU = "nvidia.com/gpu"
#: What one unit of a job asks for besides the unit itself (millicores, bytes).
DEFAULT_CPU_PER_UNIT = 4000
DEFAULT_MEMORY_PER_UNIT = 32 * 1024**3
_DEFAULT_PODS = 110
_EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
_STANDARD = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


def is_extended(name: str) -> bool:
    """Whether ``name`` is an extended resource (the ExtendedResourceToleration plugin's rule)."""
    return (
        name not in _STANDARD
        and not name.startswith(("hugepages-", "requests."))
        and not name.startswith("kubernetes.io/")
        and "/" in name
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """``count`` identical nodes (see the module contract)."""

    name: str
    count: int
    capacity: Resources
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()

    def node_labels(self) -> tuple[tuple[str, str], ...]:
        labels = dict(self.labels)
        labels.setdefault("pool", self.name)
        return tuple(sorted(labels.items()))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterModel:
    """Pools, the unit resource and the per-unit requests of a job (see the module contract)."""

    pools: tuple[Pool, ...]
    unit_resource: str = GPU
    cpu_per_unit: int = DEFAULT_CPU_PER_UNIT
    memory_per_unit: int = DEFAULT_MEMORY_PER_UNIT
    #: Node names ``node-<i>`` over every pool (the homogeneous cluster's, as before pools).
    plain_names: bool = False

    @property
    def unit_quantity(self) -> int:
        """One unit in the resource's integer quantity (1000 for ``cpu``, else 1)."""
        return resource_units(self.unit_resource, 1)

    def units_of(self, capacity: Resources) -> int:
        return dict(capacity).get(self.unit_resource, 0) // self.unit_quantity

    @property
    def capacity(self) -> int:
        """Total units of the unit resource over every node."""
        return sum(p.count * self.units_of(p.capacity) for p in self.pools)

    def nodes(self) -> tuple[NodeView, ...]:
        out: list[NodeView] = []
        for pool in self.pools:
            labels = pool.node_labels()
            units = self.units_of(pool.capacity)
            for i in range(pool.count):
                name = f"node-{len(out):04d}" if self.plain_names else f"{pool.name}-{i:04d}"
                out.append(
                    NodeView(name, units, free=pool.capacity, labels=labels, taints=pool.taints)
                )
        return tuple(out)

    def requests(self) -> Resources:
        """What one replica (one unit) of a job requests."""
        unit = self.unit_resource
        extra = {"cpu": self.cpu_per_unit, "memory": self.memory_per_unit, "pods": 1}
        extra = {k: v for k, v in extra.items() if k != unit}
        return resources({**extra, unit: self.unit_quantity})

    def demand(self, job: SimJob) -> PodDemand:
        """The :class:`PodDemand` of one replica of ``job``."""
        requests = self.requests()
        implied = tuple(
            Toleration(key=name, operator="Exists", effect="NoSchedule")
            for name, _ in requests
            if is_extended(name)
        )
        constraint = Constraint(
            node_selector=job.node_selector, tolerations=(*job.tolerations, *implied)
        )
        return PodDemand(requests=requests, constraint=constraint, units=1)

    def holds_a_replica(self, pool: Pool) -> bool:
        """Whether one of ``pool``'s nodes, empty, has room for one replica."""
        have = dict(pool.capacity)
        return all(have.get(name, 0) >= qty for name, qty in self.requests())

    def pool_units(self) -> list[tuple[int, Callable[[SimJob], bool]]]:
        """Per pool: its units, and whether a job's replicas may run there (the baselines)."""
        return [
            (
                pool.count * self.units_of(pool.capacity),
                self._admits(pool, self.holds_a_replica(pool)),
            )
            for pool in self.pools
        ]

    def _admits(self, pool: Pool, roomy: bool) -> Callable[[SimJob], bool]:
        labels = dict(pool.node_labels())

        def admits(job: SimJob) -> bool:
            return roomy and self.demand(job).constraint.admits(
                name=f"{pool.name}-0000", labels=labels, taints=pool.taints
            )

        return admits


def _node_vector(units: int, *, unit_resource: str, cpu: int, memory: int) -> Resources:
    base = {"cpu": cpu * units, "memory": memory * units, "pods": max(_DEFAULT_PODS, units)}
    base[unit_resource] = units * resource_units(unit_resource, 1)
    return resources(base)


def homogeneous(
    capacity: int,
    units_per_node: int,
    *,
    unit_resource: str = GPU,
    cpu_per_unit: int = DEFAULT_CPU_PER_UNIT,
    memory_per_unit: int = DEFAULT_MEMORY_PER_UNIT,
) -> ClusterModel:
    """``capacity`` units on nodes of ``units_per_node`` (see the module contract)."""
    if capacity <= 0 or units_per_node <= 0:
        raise ValueError("capacity and units per node must be > 0")
    full, rest = divmod(capacity, units_per_node)
    pools = [
        Pool(
            name="node",
            count=count,
            capacity=_node_vector(
                units, unit_resource=unit_resource, cpu=cpu_per_unit, memory=memory_per_unit
            ),
        )
        for count, units in ((full, units_per_node), (1 if rest else 0, rest))
    ]
    return ClusterModel(
        pools=tuple(p for p in pools if p.count),
        unit_resource=unit_resource,
        cpu_per_unit=cpu_per_unit,
        memory_per_unit=memory_per_unit,
        plain_names=True,
    )


def _taint(raw: str, where: str) -> Taint:
    head, sep, effect = raw.rpartition(":")
    if not sep or effect not in _EFFECTS:
        raise ValueError(f"{where}: taint {raw!r} must be KEY[=VALUE]:{'|'.join(_EFFECTS)}")
    key, _, value = head.partition("=")
    if not key:
        raise ValueError(f"{where}: taint {raw!r} needs a key")
    return Taint(key=key, value=value, effect=effect)


def _pool(
    *,
    name: str,
    count: object,
    capacity: Mapping[str, object],
    labels: Mapping[str, str],
    taints: Sequence[Taint],
    where: str,
) -> Pool:
    if not name or "/" in name:
        raise ValueError(f"{where}: the pool name must be non-empty, without '/'")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"{where}: count must be a positive integer, not {count!r}")
    vector: dict[str, int] = {"pods": _DEFAULT_PODS}
    for res, qty in capacity.items():
        try:
            vector[res] = resource_units(res, qty)
        except ValueError as exc:
            raise ValueError(f"{where}: resource {res}: {exc}") from None
    return Pool(
        name=name,
        count=count,
        capacity=resources(vector),
        labels=tuple(sorted(labels.items())),
        taints=tuple(taints),
    )


def parse_pool(spec: str) -> Pool:
    """One ``--pool`` value (see the module contract)."""
    where = f"--pool {spec!r}"
    tokens = spec.replace(",", " ").split()
    if len(tokens) < 2:
        raise ValueError(f"{where}: need NAME COUNT and at least one RESOURCE=QUANTITY")
    name, count_raw, *rest = tokens
    if not count_raw.isdigit():
        raise ValueError(f"{where}: count must be a positive integer, not {count_raw!r}")
    capacity: dict[str, object] = {}
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    for token in rest:
        kind, sep, body = token.partition(":")
        if sep and kind == "label":
            key, eq, value = body.partition("=")
            if not key or not eq:
                raise ValueError(f"{where}: label {body!r} must be KEY=VALUE")
            labels[key] = value
        elif sep and kind == "taint":
            taints.append(_taint(body, where))
        else:
            res, eq, qty = token.partition("=")
            if not res or not eq:
                raise ValueError(f"{where}: {token!r} must be RESOURCE=QUANTITY, label:, taint:")
            capacity[res] = qty
    return _pool(
        name=name,
        count=int(count_raw),
        capacity=capacity,
        labels=labels,
        taints=taints,
        where=where,
    )


def pools_from_json(doc: Any, *, source: str) -> tuple[Pool, ...]:
    """Pools from a parsed ``--pools`` JSON document (see the module contract)."""
    if not isinstance(doc, list) or not doc:
        raise ValueError(f"{source}: must be a non-empty JSON list of pools")
    pools: list[Pool] = []
    for i, item in enumerate(doc):
        where = f"{source}: pool [{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: must be an object")
        unknown = set(item) - {"name", "count", "resources", "labels", "taints"}
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        capacity, labels = item.get("resources") or {}, item.get("labels") or {}
        if not isinstance(capacity, dict) or not isinstance(labels, dict):
            raise ValueError(f"{where}: resources and labels must be objects")
        taints = []
        for t in item.get("taints") or []:
            if not isinstance(t, dict) or t.get("effect") not in _EFFECTS or not t.get("key"):
                raise ValueError(f"{where}: a taint needs a key and an effect in {_EFFECTS}")
            taints.append(Taint(key=t["key"], value=str(t.get("value", "")), effect=t["effect"]))
        name = item.get("name")
        pools.append(
            _pool(
                name=name if isinstance(name, str) else "",
                count=item.get("count"),
                capacity=capacity,
                labels={str(k): str(v) for k, v in labels.items()},
                taints=taints,
                where=f"{where} ({name})",
            )
        )
    return tuple(pools)


def assign_pools(
    jobs: Sequence[SimJob], cluster: ClusterModel, *, fraction: float, seed: int
) -> list[SimJob]:
    """``jobs`` with a seeded ``fraction`` pinned to a pool (see the module contract)."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"--pool-affinity {fraction} must be between 0 and 1")
    weights: dict[str, int] = {}  # by the value of the nodes' ``pool`` label
    for pool in cluster.pools:
        label = dict(pool.node_labels())["pool"]
        weights[label] = weights.get(label, 0) + pool.count * cluster.units_of(pool.capacity)
    names = sorted(n for n, w in weights.items() if w > 0)
    if not fraction or not names:
        return list(jobs)
    rng = random.Random(seed + 2)  # its own stream: the mapping's draws stay put
    out: list[SimJob] = []
    for job in jobs:
        drawn, point = rng.random() < fraction, rng.random()  # two draws per job, always
        eligible = [n for n in names if weights[n] >= job.min_size]
        if not drawn or job.node_selector or not eligible:
            out.append(job)
            continue
        point *= sum(weights[n] for n in eligible)
        label = eligible[-1]
        for name in eligible:
            point -= weights[name]
            if point < 0:
                label = name
                break
        out.append(replace(job, node_selector=(("pool", label),)))
    return out
