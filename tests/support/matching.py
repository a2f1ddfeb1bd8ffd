"""What a request or a selector matches, for the in-memory fake of the API seam.

Contract: ``Call`` is one request as ``MemoryClient`` records it; ``Match`` says which requests a
fault, gate or hook applies to and ``Rule`` counts down how many more it applies to.
``Version`` is one stored version of an object (JSON text, plus the namespace and labels that
selectors read); ``version_of`` makes one.
``match_labels`` takes equality-based label selectors (``k=v``, ``k==v``, ``k!=v``,
``k``, ``!k``, comma-joined: every term must hold); ``match_fields`` takes field selectors of
dotted paths (``a.b=v``, ``a.b==v``, ``a.b!=v``), a missing field reading as "". An empty or
``None`` selector matches everything.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lattice.kube.resources import Resource
from lattice.primitives.objects import Obj

__all__ = ["Call", "Hook", "Match", "Rule", "Version", "match_fields", "match_labels", "version_of"]


@dataclass(frozen=True, slots=True)
class Call:
    """One request: verb, plural, namespace ("" = none or all), name ("" for collections), a
    list's or watch's selectors, and a copy of the body a create, patch or replace sent (not
    compared: ``Call("get", "pods")`` equals any such get)."""

    verb: str
    plural: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    label_selector: str = ""
    field_selector: str = ""
    body: Any = field(default=None, compare=False)


#: A ``before`` or ``after`` hook: called with the request.
Hook = Callable[[Call], None]


@dataclass(frozen=True, slots=True)
class Match:
    """Which requests a fault, gate or hook applies to (``None``: any; ``subresource=""``: the
    main resource alone)."""

    verb: str
    plural: str | None = None
    name: str | None = None
    all_namespaces: bool | None = None
    subresource: str | None = None

    def __call__(
        self, verb: str, res: Resource, name: str, namespace: str | None, subresource: str = ""
    ) -> bool:
        return (
            self.verb in (verb, "*")
            and self.plural in (None, res.plural)
            and self.name in (None, name)
            and self.all_namespaces in (None, res.namespaced and namespace is None)
            and self.subresource in (None, subresource)
        )


@dataclass(slots=True)
class Rule:
    """A fault (``error``), gate (``gate``) or hook, for the next ``times`` matching requests
    (``None``: every one)."""

    match: Match
    times: int | None
    error: BaseException | None = None
    gate: asyncio.Event | None = None
    hook: Hook | None = None

    def take(self, rules: list[Rule]) -> None:
        if self.times is not None:
            self.times -= 1
            if self.times <= 0:
                rules.remove(self)


@dataclass(frozen=True, slots=True)
class Version:
    """One stored version of an object: what selectors read, and the object as JSON text."""

    namespace: str
    labels: dict[str, str]
    text: bytes

    def load(self) -> Obj:
        obj: Obj = json.loads(self.text)
        return obj

    def matches(self, namespace: str | None, labels: str | None, fields: str | None) -> bool:
        return (
            namespace in (None, self.namespace)
            and match_labels(self.labels, labels)
            and (not fields or match_fields(self.load(), fields))
        )


def version_of(obj: Obj) -> Version:
    """``obj`` as a stored version (its JSON text, compact)."""
    meta = obj.get("metadata") or {}
    text = json.dumps(obj, separators=(",", ":")).encode()
    return Version(str(meta.get("namespace") or ""), dict(meta.get("labels") or {}), text)


def match_labels(labels: Mapping[str, str], selector: str | None) -> bool:
    """Whether ``labels`` satisfy an equality-based label selector."""
    for raw in (selector or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for step in path.split("."):
        node = node.get(step) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def match_fields(obj: Mapping[str, Any], selector: str | None) -> bool:
    """Whether ``obj`` satisfies a field selector of dotted paths (``a.b=v``, ``a!=v``)."""
    for raw in (selector or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(obj, path) == value:
                return False
        else:
            path, value = term.replace("==", "=").split("=", 1)
            if _field(obj, path) != value:
                return False
    return True
