"""Reading a cached job through its plugin, and the errors that make a job ``Wrong``.

Contract:
- ``parse_job``: ``plugin.parse``, or, for a plugin that ``PinsInputs`` whose pin ConfigMap
  exists (``pinned``), ``parse_pinned`` over it: the pin is kept as observed, so editing the
  input never changes a started job. It raises :class:`InvalidJob` (the job is Wrong) or
  :class:`JobNotReady` (the job waits, unstarted); any other exception is odd input the plugin
  did not foresee and becomes an ``InvalidJob`` naming it (the job is Wrong, not the operator).
- ``pinned_input``: the observed pin ConfigMap of the job (None: none, or no such capability).
- ``unbuildable``: a plugin error while building children or status (``PLUGIN_BUGS``) as an
  ``InvalidJob``: the plugins are pure, so the same input fails on every retry.
- ``rejected``: creates the apiserver refused as malformed, as an ``InvalidJob``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from lattice.frameworks.base import (
    InvalidJob,
    JobNotReady,
    JobPlugin,
    OperatorContext,
    PinsInputs,
    Problem,
)
from lattice.primitives.objects import Obj

__all__ = ["PLUGIN_BUGS", "parse_job", "pinned_input", "rejected", "unbuildable"]

log = structlog.get_logger(__name__)

#: Exceptions a pure plugin raises on input it cannot build from (retrying cannot help).
PLUGIN_BUGS = (AttributeError, TypeError, KeyError, ValueError, IndexError)


def pinned_input(
    plugin: JobPlugin[Any], obj: Mapping[str, Any], others: Callable[[], Mapping[str, Obj]]
) -> Obj | None:
    """``others()`` reads the job's owned other children (only for a plugin that pins)."""
    if not isinstance(plugin, PinsInputs):
        return None
    return others().get(f"ConfigMap/{plugin.pinned_name(obj)}")


def parse_job(
    plugin: JobPlugin[Any], obj: Mapping[str, Any], ctx: OperatorContext, pinned: Obj | None
) -> Any:
    try:
        if pinned is not None and isinstance(plugin, PinsInputs):
            return plugin.parse_pinned(obj, pinned, ctx)
        return plugin.parse(obj, ctx)
    except (InvalidJob, JobNotReady):
        raise
    except Exception as exc:
        log.warning("job.unreadable", error=repr(exc), exc_info=True)
        problem = Problem("(object)", f"cannot be read: {type(exc).__name__}: {exc}")
        raise InvalidJob([problem]) from exc


def unbuildable(exc: Exception) -> InvalidJob:
    log.warning("job.unbuildable", error=repr(exc), exc_info=True)
    return InvalidJob([Problem("(object)", f"cannot be built: {type(exc).__name__}: {exc}")])


def rejected(refused: Sequence[str]) -> InvalidJob:
    return InvalidJob([Problem("spec", f"the apiserver refused {r}") for r in refused])
