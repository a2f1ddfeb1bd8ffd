"""The explicit, ordered registry of job-kind plugins.

Contract: ``PLUGINS`` lists one plugin per kind in a fixed order (no import side effects, no map
iteration order games); ``plugin_for(kind)`` looks one up and raises ``KeyError`` naming the
known kinds. The order is the order reconcilers start and the order kinds print in metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice.frameworks.base import JobPlugin
from lattice.frameworks.mpijob import MPIJobPlugin
from lattice.frameworks.mxjob import MXJobPlugin
from lattice.frameworks.trainingjob import TrainingJobPlugin
from lattice.frameworks.trainjob import TrainJobPlugin

__all__ = ["PLUGINS", "plugin_for"]

PLUGINS: tuple[JobPlugin[Any], ...] = (
    TrainingJobPlugin(),
    MPIJobPlugin(),
    MXJobPlugin(),
    TrainJobPlugin(),
)

_BY_KIND: Mapping[str, JobPlugin[Any]] = {p.resource.kind: p for p in PLUGINS}


def plugin_for(kind: str) -> JobPlugin[Any]:
    """The plugin serving ``kind``."""
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise KeyError(f"no plugin for kind {kind!r}; known: {', '.join(_BY_KIND)}") from None
