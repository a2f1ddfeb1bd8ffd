"""The cluster model the core places pods on: resource vectors, node constraints and taints.

Contract (pure values, standard library only; kube-scheduler's semantics, restated):
- :data:`Resources` is a request or a free amount: ``(name, quantity)`` pairs sorted by name,
  integer quantities (``cpu`` in millicores, memory in bytes, extended resources in units, and
  ``pods`` for a node's pod slots). A name a vector does not list is 0. :func:`resources`
  builds one from a mapping (non-positive quantities dropped).
- :class:`Taint` / :class:`Toleration`: only ``NoSchedule`` and ``NoExecute`` taints keep a pod
  off a node (``PreferNoSchedule`` is a preference). A toleration matches a taint when its
  effect is empty or equal, and either its operator is ``Exists`` (its key empty = every key,
  else that key) or its key and value equal the taint's (operator ``Equal``, the default).
- :class:`Requirement`: one node-selector requirement. On labels (``field=False``): ``In``,
  ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt`` (``NotIn`` and ``DoesNotExist`` hold
  when the label is absent; ``Gt``/``Lt`` compare the label and the single value as integers,
  false when either is not one). On fields (``field=True``): only ``metadata.name`` with
  ``In``/``NotIn``. An unknown operator never matches.
- :class:`Constraint`: where one pod may run. ``node_selector`` pairs must all be labels of the
  node; ``terms`` is the required node affinity's ``nodeSelectorTerms`` (``None``: no required
  affinity; otherwise the node must match at least one term, a term matching when all of its
  requirements do, and an empty term matching nothing); every ``NoSchedule``/``NoExecute``
  taint of the node must be tolerated. :meth:`Constraint.admits` checks a node;
  :meth:`Constraint.describe` names the constraint in messages (``"pool=a"``).
- :class:`PodDemand`: one pod as the core places it: its effective ``requests`` (computed by
  the caller with kube-scheduler's rules), its ``constraint``, its ``units`` in the scheduling
  unit (for attained service, events and columns only; never for fit) and ``exclusive`` (the
  pod takes a whole node: only a node holding no other Lattice pod, and no other Lattice pod
  joins it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "ANY",
    "BLOCKING_EFFECTS",
    "UNIT_RESOURCE",
    "Constraint",
    "PodDemand",
    "Requirement",
    "Resources",
    "Taint",
    "Toleration",
    "resources",
]

Resources = tuple[tuple[str, int], ...]

#: The resource that abstract units stand for when a view gives only ``free_units`` (a
#: :class:`~lattice.scheduler.core.types.NodeView`) or unit counts (a ``JobView``).
UNIT_RESOURCE = "units"
BLOCKING_EFFECTS: frozenset[str] = frozenset({"NoSchedule", "NoExecute"})


def resources(values: Mapping[str, int] | Iterable[tuple[str, int]]) -> Resources:
    """``values`` as :data:`Resources`: positive quantities only, sorted by name."""
    items = values.items() if isinstance(values, Mapping) else values
    merged: dict[str, int] = {}
    for name, quantity in items:
        merged[name] = merged.get(name, 0) + quantity
    return tuple(sorted((n, q) for n, q in merged.items() if q > 0))


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration matches ``taint`` (see the module contract)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` (``field=False``) or ``matchFields`` (``field=True``) entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        """Whether a node with ``labels`` and ``node_name`` satisfies this requirement."""
        op = self.operator
        if self.field:
            if self.key != "metadata.name":
                return False
            if op == "In":
                return node_name in self.values
            return op == "NotIn" and node_name not in self.values
        value = labels.get(self.key)
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt") and value is not None and len(self.values) == 1:
            try:
                have, bound = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > bound if op == "Gt" else have < bound
        return False

    def describe(self) -> str:
        """``key op values`` as a human reads it."""
        key = self.key
        if self.operator == "In" and len(self.values) == 1:
            return f"{key}={self.values[0]}"
        if self.operator == "NotIn" and len(self.values) == 1:
            return f"{key}!={self.values[0]}"
        if self.operator == "Exists":
            return key
        if self.operator == "DoesNotExist":
            return f"!{key}"
        if self.operator in ("Gt", "Lt") and self.values:
            return f"{key}{'>' if self.operator == 'Gt' else '<'}{self.values[0]}"
        return f"{key} {self.operator} ({','.join(self.values)})"


@dataclass(frozen=True, slots=True)
class Constraint:
    """Where one pod may run: selector, required node affinity and tolerations."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[tuple[Requirement, ...], ...] | None = None
    tolerations: tuple[Toleration, ...] = ()

    def admits(self, *, name: str, labels: Mapping[str, str], taints: Iterable[Taint] = ()) -> bool:
        """Whether a node (``name``, ``labels``, ``taints``) may run the pod."""
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return False
        terms = self.terms
        if terms is not None and not any(
            term and all(r.matches(labels, name) for r in term) for term in terms
        ):
            return False
        for taint in taints:
            if taint.effect in BLOCKING_EFFECTS and not any(
                t.tolerates(taint) for t in self.tolerations
            ):
                return False
        return True

    def describe(self) -> str:
        """The selector and affinity as ``k=v, k2`` (``""`` when the pod may go anywhere)."""
        parts = [f"{k}={v}" for k, v in self.node_selector]
        if self.terms is not None:
            alternatives = [", ".join(r.describe() for r in term) for term in self.terms]
            if len(alternatives) == 1:
                parts.append(alternatives[0])
            else:
                parts.append(" or ".join(f"({a})" for a in alternatives))
        return ", ".join(p for p in parts if p)


#: A constraint every untainted node satisfies.
ANY = Constraint()


@dataclass(frozen=True, slots=True)
class PodDemand:
    """One pod as the core places it (see the module contract)."""

    requests: Resources = ()
    constraint: Constraint = ANY
    units: int = 0
    exclusive: bool = False
    # Hashed once: the core keys dicts and counters by demand on every placement search.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = (self.requests, self.constraint, self.units, self.exclusive)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        return self._hash

    @staticmethod
    def of_units(units: int) -> PodDemand:
        """A pod asking only for ``units`` of :data:`UNIT_RESOURCE`, anywhere (one shared
        value per count)."""
        found = _OF_UNITS.get(units)
        if found is None:
            found = PodDemand(requests=resources({UNIT_RESOURCE: units}), units=max(0, units))
            if len(_OF_UNITS) < 4096:
                _OF_UNITS[units] = found
        return found


_OF_UNITS: dict[int, PodDemand] = {}
