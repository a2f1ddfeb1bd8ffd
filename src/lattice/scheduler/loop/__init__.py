"""The scheduler loop: snapshot the informer caches, run the pure core, persist the plan.

Contract: :class:`SchedulerLoop` is the only impure part of scheduling. It reads the caches
(never the API), calls ``lattice.scheduler.core.schedule``, and writes each job's scheduler
block through the status subresource, as that block's one writer (kind reconcilers turn
``currentSize`` into pods). This package's names below are its public API (the controllers and
the composition root import nothing else from it). Inside: ``runner`` (the pass, in numbered
steps), ``triggers``, ``collect`` and ``memo`` (view collection), ``policy`` (the pure write
policy), ``terminal`` (a finished job's block), ``writer`` (status patches, read-your-writes,
events), ``ranking`` (the resize band), ``snapshot``, ``nodes`` and ``placement`` (the pure
translation between cached objects and core values), ``context`` (the plugins'
``OperatorContext`` and the core's ``SchedulerConfig`` from ``Settings``) and ``options`` (the
constructor groups).
"""

from __future__ import annotations

from lattice.primitives.times import parse_opt_time as parse_time
from lattice.scheduler.loop.context import (
    ContextSource,
    parse_node_selector,
    read_node_selector,
    scheduler_config,
)
from lattice.scheduler.loop.nodes import covered, node_schedulable, node_views
from lattice.scheduler.loop.options import LoopServices, LoopSources, LoopTuning
from lattice.scheduler.loop.placement import Naming
from lattice.scheduler.loop.ranking import RESIZE_BAND, URGENT_FOR
from lattice.scheduler.loop.runner import STAGE_LABELS, SchedulerLoop
from lattice.scheduler.loop.snapshot import (
    Invalid,
    format_time,
    is_finished,
    job_view,
    status_fields,
    utc_now,
)

__all__ = [
    "RESIZE_BAND",
    "STAGE_LABELS",
    "URGENT_FOR",
    "ContextSource",
    "Invalid",
    "LoopServices",
    "LoopSources",
    "LoopTuning",
    "Naming",
    "SchedulerLoop",
    "covered",
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
    "utc_now",
]
