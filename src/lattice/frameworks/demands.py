"""Per-pod demands: what one pod of a template requests and where it may run.

Contract (pure; shared by every plugin, which says only which of its pods are workers and which
are exclusive):

- ``pod_constraint(spec, ctx)``: the pod template's ``nodeSelector`` merged with the operator's
  node selector (``ctx.node_selector``; on a key both set, the operator wins, as the pods are
  created), the required node affinity's ``nodeSelectorTerms`` (``matchExpressions`` are label
  requirements, ``matchFields`` field requirements; no required affinity: ``terms`` is None) and
  the tolerations, as a :class:`~lattice.scheduler.core.model.Constraint`.
- ``pod_demand(spec, ctx, worker=, exclusive=)``: the pod's
  :class:`~lattice.scheduler.core.model.PodDemand`: its effective requests
  (``lattice.primitives.requests.pod_requests``, kube-scheduler's rules) plus its slot
  (``pods``: 1), its constraint, its units in the scheduling unit and whether it takes a whole
  node. Units: GPU mode (the unit is a resource name), the pod's request of that resource,
  possibly 0; node mode, 1 for a worker and 0 for an auxiliary pod (a launcher, an MXNet
  scheduler or server). ``exclusive`` is honoured in node mode only.
- ``template_problems(spec, field=)``: every problem of a pod spec that would make the above
  fail or the apiserver refuse the pod: malformed quantities (``units.quantity_problems``), a
  ``nodeSelector`` that is not a map of strings, a required node affinity or a toleration that
  is malformed (not an object or list where one must be, an unknown operator, values where the
  operator takes none or none where it needs some, a ``Gt``/``Lt`` value that is not one
  integer, a ``matchFields`` key other than ``metadata.name`` or not exactly one value, an
  empty ``nodeSelectorTerms``, an ``Exists`` toleration with a value, a toleration without a key
  whose operator is not ``Exists``, an unknown effect). Each names the field and the rule.
  ``pod_constraint``/``pod_demand`` raise :class:`~lattice.frameworks.base.InvalidJob` with
  those problems (at path ``spec``) on a spec that has any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice.frameworks.base import InvalidJob, OperatorContext, Problem
from lattice.frameworks.units import quantity_problems
from lattice.primitives.binding import extended_tolerations
from lattice.primitives.requests import pod_requests
from lattice.scheduler.core.model import (
    Constraint,
    PodDemand,
    Requirement,
    Toleration,
    resources,
)

__all__ = ["pod_constraint", "pod_demand", "template_problems"]

_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_FIELD_OPERATORS = frozenset({"In", "NotIn"})
_EFFECTS = frozenset({"", "NoSchedule", "PreferNoSchedule", "NoExecute"})
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


class _Reader:
    """Reads the constraint parts of a pod spec, collecting a problem per malformed part."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.problems: list[Problem] = []

    def bad(self, where: str, why: str) -> None:
        self.problems.append(Problem(f"{self.field}.{where}", why))

    def selector(self, raw: Any) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
        ):
            self.bad("nodeSelector", "must be a map of label keys to string values")
            return {}
        return dict(raw)

    def requirement(self, raw: Any, *, where: str, field: bool) -> Requirement | None:
        if not isinstance(raw, Mapping):
            self.bad(where, "must be an object")
            return None
        key, op, values = raw.get("key"), raw.get("operator"), raw.get("values")
        if values is None:
            values = []
        if not isinstance(key, str) or not key:
            self.bad(f"{where}.key", "must be a non-empty string")
            return None
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            self.bad(f"{where}.values", "must be a list of strings")
            return None
        allowed = _FIELD_OPERATORS if field else _LABEL_OPERATORS
        if op not in allowed:
            self.bad(
                f"{where}.operator", f"must be one of {', '.join(sorted(allowed))}, got {op!r}"
            )
            return None
        if field and key != "metadata.name":
            self.bad(f"{where}.key", f"must be metadata.name (the only node field), got {key!r}")
            return None
        if field and len(values) != 1:
            self.bad(f"{where}.values", f"must hold exactly one node name for {op}")
            return None
        if op in ("In", "NotIn") and not values:
            self.bad(f"{where}.values", f"must be non-empty for {op}")
            return None
        if op in ("Exists", "DoesNotExist") and values:
            self.bad(f"{where}.values", f"must be empty for {op}")
            return None
        if op in ("Gt", "Lt") and (len(values) != 1 or not _is_int(values[0])):
            self.bad(f"{where}.values", f"must be a single integer for {op}")
            return None
        return Requirement(key=key, operator=op, values=tuple(values), field=field)

    def terms(self, affinity: Any) -> tuple[tuple[Requirement, ...], ...] | None:
        if affinity is None:
            return None
        if not isinstance(affinity, Mapping):
            self.bad("affinity", "must be an object")
            return None
        node = affinity.get("nodeAffinity")
        if node is None:
            return None
        if not isinstance(node, Mapping):
            self.bad("affinity.nodeAffinity", "must be an object")
            return None
        required = node.get(_REQUIRED)
        where = f"affinity.nodeAffinity.{_REQUIRED}"
        if required is None:
            return None
        if not isinstance(required, Mapping):
            self.bad(where, "must be an object")
            return None
        raw_terms = required.get("nodeSelectorTerms")
        if not isinstance(raw_terms, list) or not raw_terms:
            self.bad(f"{where}.nodeSelectorTerms", "must be a non-empty list of terms")
            return None
        terms: list[tuple[Requirement, ...]] = []
        for i, raw in enumerate(raw_terms):
            at = f"{where}.nodeSelectorTerms[{i}]"
            if not isinstance(raw, Mapping):
                self.bad(at, "must be an object")
                continue
            term: list[Requirement] = []
            for part, field in (("matchExpressions", False), ("matchFields", True)):
                items = raw.get(part)
                if items is None:
                    continue
                if not isinstance(items, list):
                    self.bad(f"{at}.{part}", "must be a list")
                    continue
                for j, item in enumerate(items):
                    req = self.requirement(item, where=f"{at}.{part}[{j}]", field=field)
                    if req is not None:
                        term.append(req)
            terms.append(tuple(term))
        return tuple(terms)

    def tolerations(self, raw: Any) -> tuple[Toleration, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.bad("tolerations", "must be a list")
            return ()
        out: list[Toleration] = []
        for i, item in enumerate(raw):
            where = f"tolerations[{i}]"
            if not isinstance(item, Mapping):
                self.bad(where, "must be an object")
                continue
            parts = {k: item.get(k) or "" for k in ("key", "operator", "value", "effect")}
            if not all(isinstance(v, str) for v in parts.values()):
                self.bad(where, "key, operator, value and effect must be strings")
                continue
            op = parts["operator"] or "Equal"
            if op not in ("Equal", "Exists"):
                self.bad(f"{where}.operator", f"must be Equal or Exists, got {op!r}")
            elif op == "Exists" and parts["value"]:
                self.bad(f"{where}.value", "must be empty when operator is Exists")
            elif not parts["key"] and op != "Exists":
                self.bad(f"{where}.operator", "must be Exists when the key is empty")
            elif parts["effect"] not in _EFFECTS:
                why = "must be NoSchedule, PreferNoSchedule, NoExecute or empty"
                self.bad(f"{where}.effect", f"{why}, got {parts['effect']!r}")
            else:
                out.append(Toleration(parts["key"], op, parts["value"], parts["effect"]))
        return tuple(out)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _read(spec: Mapping[str, Any], ctx: OperatorContext, field: str) -> tuple[Constraint, _Reader]:
    reader = _Reader(field)
    selector = {**reader.selector(spec.get("nodeSelector")), **dict(ctx.node_selector)}
    tolerations = reader.tolerations(spec.get("tolerations"))
    # The pod will carry these too (the admission plugin adds them; binding does as well).
    tolerations += tuple(
        Toleration(t["key"], t["operator"], "", t["effect"]) for t in extended_tolerations(spec)
    )
    constraint = Constraint(
        node_selector=tuple(sorted(selector.items())),
        terms=reader.terms(spec.get("affinity")),
        tolerations=tolerations,
    )
    return constraint, reader


def template_problems(spec: Any, *, field: str) -> list[Problem]:
    """Every problem of pod spec ``spec`` (at path ``field``) that ``pod_demand`` would hit."""
    if not isinstance(spec, Mapping):
        return [Problem(field, "must be an object")]
    _, reader = _read(spec, OperatorContext(), field)
    return quantity_problems(spec, field=field) + reader.problems


def pod_constraint(spec: Mapping[str, Any], ctx: OperatorContext) -> Constraint:
    """Where a pod of ``spec`` may run (see the module contract)."""
    constraint, reader = _read(spec, ctx, "spec")
    if reader.problems:
        raise InvalidJob(reader.problems)
    return constraint


def pod_demand(
    spec: Mapping[str, Any], ctx: OperatorContext, *, worker: bool, exclusive: bool = False
) -> PodDemand:
    """One pod of ``spec`` as the scheduler places it (see the module contract)."""
    problems = quantity_problems(spec, field="spec")
    if problems:
        raise InvalidJob(problems)
    requests = dict(pod_requests(spec))
    units = int(worker) if ctx.node_mode else requests.get(ctx.scheduling_unit, 0)
    requests["pods"] = requests.get("pods", 0) + 1
    return PodDemand(
        requests=resources(requests),
        constraint=pod_constraint(spec, ctx),
        units=units,
        exclusive=exclusive and ctx.node_mode,
    )
