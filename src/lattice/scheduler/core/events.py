"""Typed events for the scheduler decisions a user would ask about, and their messages.

Contract:
- Each event is a frozen value with a CamelCase ``reason`` (the Kubernetes event reason: its
  class's name), an event ``type`` (``Normal`` or ``Warning``) and a human ``message`` derived
  from its fields.
- Events are emitted only for changes, so re-running a pass on its own output emits none.
- Times print as RFC 3339 seconds in UTC (``2026-01-01T00:10:00Z``); durations in Go's style
  (``5m0s``), matching what ``kubectl`` users see elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from lattice.primitives.times import format_time

__all__ = [
    "Admitted",
    "CooldownOver",
    "Grown",
    "Preempted",
    "Queued",
    "Requeued",
    "SchedulerEvent",
    "Shrunk",
    "Suspended",
    "format_duration",
]


def format_duration(value: timedelta) -> str:
    """Go ``time.Duration.String()`` style: ``0s``, ``30s``, ``5m0s``, ``1h0m0s``, ``1.5s``."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, frac = divmod(rest, 1_000_000)
    sec = str(seconds) + (f".{frac:06d}".rstrip("0") if frac else "")
    if hours:
        return f"{sign}{hours}h{minutes}m{sec}s"
    if minutes:
        return f"{sign}{minutes}m{sec}s"
    return f"{sign}{sec}s"


@dataclass(frozen=True, slots=True)
class SchedulerEvent:
    """Base of every scheduler event."""

    reason: ClassVar[str] = "Scheduled"
    """The Kubernetes event reason: each public kind's class name (see ``__init_subclass__``)."""
    type: ClassVar[str] = "Normal"
    text: ClassVar[str] = ""
    """The message of a kind whose message has no fields."""

    def __init_subclass__(cls) -> None:
        if not cls.__name__.startswith("_"):
            cls.reason = cls.__name__

    @property
    def message(self) -> str:
        if not self.text:
            raise NotImplementedError
        return self.text


@dataclass(frozen=True, slots=True, kw_only=True)
class _Resized(SchedulerEvent):
    """A running job's size changed from ``old`` to ``new``."""

    old: int
    new: int

    @property
    def change(self) -> str:
        """``<reason> <old>→<new>``."""
        return f"{self.reason} {self.old}\u2192{self.new}"


@dataclass(frozen=True, slots=True)
class Queued(SchedulerEvent):
    """A new (or resumed) job entered the queue."""

    text: ClassVar[str] = "Queued"


@dataclass(frozen=True, slots=True)
class CooldownOver(SchedulerEvent):
    """A cooled-down job is queued again with a fresh queued time."""

    text: ClassVar[str] = "Cooldown over; queued again"


@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted(SchedulerEvent):
    """A job that held nothing was started."""

    size: int
    min_size: int
    max_size: int

    @property
    def message(self) -> str:
        return f"Admitted with {self.size} (min {self.min_size}, max {self.max_size})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Grown(_Resized):
    """A running job got more replicas."""

    @property
    def message(self) -> str:
        return self.change


@dataclass(frozen=True, slots=True, kw_only=True)
class Shrunk(_Resized):
    """A running job lost replicas, naming the job that took them when there is one."""

    beneficiary: str | None = None
    beneficiary_admitted: bool = True
    to_max: bool = False

    @property
    def message(self) -> str:
        head = self.change
        if self.to_max:
            return f"{head} to its max size"
        if self.beneficiary is None:
            return f"{head}: not enough capacity"
        verb = "admit" if self.beneficiary_admitted else "grow"
        return f"{head} to {verb} {self.beneficiary}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Preempted(SchedulerEvent):
    """A running job was stopped (size 0, back to Waiting with its queued time)."""

    type: ClassVar[str] = "Warning"
    old: int
    beneficiary: str | None = None
    beneficiary_priority: int = 0
    detail: str = "not enough capacity"
    #: Why the beneficiary ranks first (``waitreason.PreemptionCause``); "" without one.
    cause: str = ""

    @property
    def message(self) -> str:
        if self.beneficiary is None:
            return f"Stopped: {self.detail}"
        return f"Preempted by {self.beneficiary} (priority {self.beneficiary_priority})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Requeued(SchedulerEvent):
    """A running job's pods stayed Pending too long: it was stopped and cools down."""

    type: ClassVar[str] = "Warning"
    pending_for: timedelta
    cooldown_until: datetime
    requeue_count: int
    refused_on: tuple[str, ...] = ()
    #: The apiserver's refusal of the job's children (then ``pending_for`` is how long it lasted).
    refused_by: str = ""
    #: kube-scheduler's last word on the pending pod (its ``PodScheduled`` message), if any.
    scheduler_message: str = ""

    @property
    def message(self) -> str:
        text = self._text
        if self.scheduler_message:
            return f"{text}; last message from kube-scheduler: {self.scheduler_message}"
        return text

    @property
    def _text(self) -> str:
        if self.refused_by:
            return (
                f"Requeued: the apiserver refused its children for "
                f"{format_duration(self.pending_for)} ({self.refused_by}); "
                f"cooldown until {format_time(self.cooldown_until)}"
            )
        if self.refused_on:
            return (
                f"Requeued: kube-scheduler refused its pods on {', '.join(self.refused_on)} "
                f"and no other node fits; cooldown until {format_time(self.cooldown_until)}"
            )
        return (
            f"Requeued: pods pending for {format_duration(self.pending_for)}; "
            f"cooldown until {format_time(self.cooldown_until)}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspended(SchedulerEvent):
    """A job that held capacity was suspended and released it."""

    old: int

    @property
    def message(self) -> str:
        return f"Suspended: released size {self.old}"
