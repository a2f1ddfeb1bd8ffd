"""The scheduler loop's constructor groups: what it reads, what it uses, how it is tuned.

Contract: plain frozen values, validated on construction (a bad tuning value raises
``ValueError`` naming the field and the rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lattice.clock import Clock
from lattice.kube import KubeClient
from lattice.primitives.objects import Obj
from lattice.runtime.events import EventRecorder
from lattice.runtime.informer import Informer
from lattice.runtime.metrics import Metrics
from lattice.runtime.projections import ForeignPodUsage, NodeInfo, PodInfo
from lattice.scheduler.loop.context import ContextSource

__all__ = ["LoopServices", "LoopSources", "LoopTuning"]


@dataclass(frozen=True, slots=True)
class LoopSources:
    """The informer caches a pass reads."""

    #: Kind -> its job informer (every enabled kind).
    jobs: Mapping[str, Informer[Obj]]
    pods: Informer[PodInfo]
    foreign_pods: Informer[ForeignPodUsage]
    nodes: Informer[NodeInfo]
    #: Our ConfigMaps, where ``PinsInputs`` plugins keep the inputs a started job runs with.
    pins: Informer[Obj] | None = None


@dataclass(frozen=True, slots=True)
class LoopServices:
    """What the loop uses: the API client, the clock, metrics, events, the plugins' context."""

    client: KubeClient
    clock: Clock
    metrics: Metrics
    recorder: EventRecorder
    context: ContextSource


@dataclass(frozen=True, slots=True)
class LoopTuning:
    """The loop's knobs (seconds unless noted)."""

    #: Status writes in flight at most, across passes.
    concurrency: int = 16
    #: How old a requeueTime that only starts the pending clock gets before it is written.
    requeue_write_delay: float = 60.0
    #: How often position-only changes are written (a round).
    position_interval: float = 10.0
    #: The next pass after a failed write or pass.
    retry_delay: float = 1.0
    #: A pass at least this often (None: only on triggers and timers).
    resync_period: float | None = 300.0
    #: The next pass starts no sooner than this many times the last pass's duration after it.
    pass_gap: float = 1.0
    #: Run the pure core in the loop's own thread (False: on the event loop).
    decide_in_thread: bool = True

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.pass_gap < 0:
            raise ValueError("pass_gap must not be negative")
