"""The operator context the plugins read, and the scheduler's policy knobs, from ``Settings``.

Contract:
- ``ContextSource(settings, priority_classes=..., runtimes=...)`` reads the node-selector file
  named by ``settings.node_selector_path`` once, at construction: one ``key=value`` pair per
  line, surrounding whitespace ignored, blank lines and lines starting with ``#`` skipped. A
  malformed line (no ``=``, an empty key, a key with whitespace, a key given twice) or an
  unreadable file raises ``ValueError`` naming the file, the line number and the rule broken.
- ``ContextSource.current()`` builds a fresh :class:`OperatorContext` from the settings and the
  informer caches as they are now: PriorityClass name -> value (the ``globalDefault`` class's
  value is ``default_priority``; with several defaults the lowest value wins, as in
  kube-apiserver's priority admission), and every cached runtime under
  ``"TrainingRuntime/<ns>/<name>"`` / ``"ClusterTrainingRuntime//<name>"`` (the kind comes from
  the informer's resource). It does no I/O and costs O(PriorityClasses + runtimes).
- ``scheduler_config(settings)`` maps the scheduling settings (seconds) onto ``SchedulerConfig``.
  The cooldowns are rounded up to whole seconds, as the seed operator counted them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from lattice.config import Settings
from lattice.frameworks.base import OperatorContext
from lattice.primitives.keys import split_key
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from lattice.scheduler.core import SchedulerConfig, Strategy

__all__ = ["ContextSource", "parse_node_selector", "read_node_selector", "scheduler_config"]


def parse_node_selector(text: str, *, source: str) -> tuple[tuple[str, str], ...]:
    """Parse ``key=value`` lines; ``source`` names the file in error messages."""
    pairs: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}:{number}"
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise ValueError(f"{where}: expected key=value, got {line!r}")
        if not key:
            raise ValueError(f"{where}: the key before '=' must not be empty")
        if any(ch.isspace() for ch in key):
            raise ValueError(f"{where}: the key {key!r} must not contain whitespace")
        if key in seen:
            raise ValueError(f"{where}: the key {key!r} is already set on line {seen[key]}")
        seen[key] = number
        pairs.append((key, value))
    return tuple(pairs)


def read_node_selector(path: str | None) -> tuple[tuple[str, str], ...]:
    """The node-selector pairs in file ``path`` (none when ``path`` is unset or empty)."""
    if not path:
        return ()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the node-selector file: {exc}") from exc
    return parse_node_selector(text, source=path)


def scheduler_config(settings: Settings) -> SchedulerConfig:
    """The core's policy knobs from the operator settings."""
    return SchedulerConfig(
        strategy=Strategy(settings.queueing_strategy),
        resize_interval=timedelta(seconds=settings.resize_interval),
        pending_timeout=timedelta(seconds=settings.pending_timeout),
        child_refusal_timeout=timedelta(seconds=settings.child_refusal_timeout),
        cooldown_base=timedelta(seconds=math.ceil(settings.cooldown_base)),
        cooldown_max=timedelta(seconds=math.ceil(settings.cooldown_max)),
        slowdown_limit=settings.slowdown_limit,
        requeue_limit=settings.requeue_limit,
    )


def _priority(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    return None


class ContextSource:
    """Builds the :class:`OperatorContext` of one pass from settings and informer caches."""

    def __init__(
        self,
        settings: Settings,
        *,
        priority_classes: Informer[Obj] | None = None,
        runtimes: Sequence[Informer[Obj]] = (),
    ) -> None:
        self._settings = settings
        self._priority_classes = priority_classes
        self._runtimes = tuple(runtimes)
        self.node_selector = read_node_selector(settings.node_selector_path)

    @property
    def scheduling_unit(self) -> str:
        return self._settings.scheduling_unit

    def priorities(self) -> tuple[dict[str, int], int]:
        """PriorityClass name -> value, and the globalDefault value (0 without one)."""
        values: dict[str, int] = {}
        defaults: list[int] = []
        if self._priority_classes is None:
            return values, 0
        for obj in self._priority_classes.store.list():
            name = str((obj.get("metadata") or {}).get("name") or "")
            value = _priority(obj.get("value"))
            if not name or value is None:
                continue
            values[name] = value
            if obj.get("globalDefault") is True:
                defaults.append(value)
        return values, min(defaults, default=0)

    def runtimes(self) -> dict[str, Mapping[str, Any]]:
        """Every cached runtime under ``"<Kind>/<namespace>/<name>"`` (namespace "" if cluster)."""
        out: dict[str, Mapping[str, Any]] = {}
        for informer in self._runtimes:
            kind = informer.resource.kind
            for key, obj in informer.store.items():
                namespace, name = split_key(key)
                out[f"{kind}/{namespace}/{name}"] = obj
        return out

    def current(self) -> OperatorContext:
        """The context as of the caches' current content."""
        s = self._settings
        priorities, default = self.priorities()
        return OperatorContext(
            scheduling_unit=s.scheduling_unit,
            node_selector=self.node_selector,
            rdzv_backend=s.rdzv_backend,
            rdzv_service_endpoint=s.rdzv_service_endpoint,
            rdzv_service_port=s.rdzv_service_port,
            checkpoint_type=s.checkpoint_type,
            checkpoint_service_endpoint=s.checkpoint_service_endpoint,
            checkpoint_service_port=s.checkpoint_service_port,
            priority_classes=priorities,
            default_priority=default,
            runtimes=self.runtimes(),
        )
