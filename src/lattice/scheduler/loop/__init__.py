"""The scheduler loop: snapshot the informer caches, run the pure core, persist the plan.

Contract: :class:`SchedulerLoop` is the only impure part of scheduling. It reads the caches
(never the API), calls ``lattice.scheduler.core.schedule`` with a whole-second ``now``, and
writes each job's scheduler block through the status subresource (kind reconcilers turn
``currentSize`` into pods). :mod:`~lattice.scheduler.loop.snapshot` holds the pure translation
between cached objects and core values; :mod:`~lattice.scheduler.loop.context` builds the
plugins' ``OperatorContext`` and the core's ``SchedulerConfig`` from ``Settings``.
"""

from __future__ import annotations

from lattice.scheduler.loop.context import (
    ContextSource,
    parse_node_selector,
    read_node_selector,
    scheduler_config,
)
from lattice.scheduler.loop.runner import RESIZE_BAND, STAGE_LABELS, SchedulerLoop
from lattice.scheduler.loop.snapshot import (
    Invalid,
    format_time,
    is_finished,
    job_view,
    node_schedulable,
    node_views,
    parse_time,
    status_fields,
    takes_capacity,
    utc_now,
)

__all__ = [
    "RESIZE_BAND",
    "STAGE_LABELS",
    "ContextSource",
    "Invalid",
    "SchedulerLoop",
    "format_time",
    "is_finished",
    "job_view",
    "node_schedulable",
    "node_views",
    "parse_node_selector",
    "parse_time",
    "read_node_selector",
    "scheduler_config",
    "status_fields",
    "takes_capacity",
    "utc_now",
]
