"""A ``QueueMetrics`` (``lattice.runtime.workqueue``) that records every call, for assertions."""

from __future__ import annotations

__all__ = ["RecordingQueueMetrics"]


class RecordingQueueMetrics:
    """Remembers what the queue reported: counts for counters, lists for observations."""

    def __init__(self) -> None:
        self.adds = 0
        self.depths: list[int] = []
        self.latencies: list[float] = []
        self.work: list[float] = []
        self.retries = 0
        self.unfinished_calls: list[tuple[float, float]] = []

    def add(self) -> None:
        self.adds += 1

    def depth(self, n: int) -> None:
        self.depths.append(n)

    def get(self, latency_s: float) -> None:
        self.latencies.append(latency_s)

    def done(self, work_s: float) -> None:
        self.work.append(work_s)

    def retry(self) -> None:
        self.retries += 1

    def unfinished(self, unfinished_s: float, longest_s: float) -> None:
        self.unfinished_calls.append((unfinished_s, longest_s))
