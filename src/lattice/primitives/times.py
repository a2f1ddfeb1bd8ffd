"""Kubernetes timestamps: the one place that formats, parses and normalises them.

Contract:
- ``normalize_time`` gives timezone-aware UTC at whole seconds (a ``metav1.Time``);
  ``normalize_micro_time`` keeps the microseconds (a ``metav1.MicroTime``). A naive value is
  taken as UTC, never as local time.
- ``format_time`` writes ``2026-01-01T00:00:00Z``; ``format_micro_time`` writes
  ``2026-01-01T00:00:00.000000Z`` (the layout the apiserver parses for ``MicroTime``).
- ``parse_time`` reads RFC 3339 (``Z`` or a numeric offset, optional fraction) to aware UTC,
  keeping the fraction to the microsecond, and raises ``ValueError`` on anything else.
  ``parse_opt_time`` is the lenient reader of untrusted objects: an RFC 3339 string or a
  datetime becomes aware UTC; anything else (absent, empty, malformed) is ``None``.

No clock: callers pass times in.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = [
    "format_micro_time",
    "format_time",
    "normalize_micro_time",
    "normalize_time",
    "parse_opt_time",
    "parse_time",
]


def normalize_time(value: datetime) -> datetime:
    """Return ``value`` as timezone-aware UTC truncated to whole seconds (naive means UTC)."""
    return normalize_micro_time(value).replace(microsecond=0)


def normalize_micro_time(value: datetime) -> datetime:
    """Return ``value`` as timezone-aware UTC, microseconds kept (naive means UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def format_time(value: datetime) -> str:
    """Format a time the way ``metav1.Time`` does: RFC 3339, UTC, seconds, ``Z`` suffix."""
    return normalize_time(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(value: datetime) -> str:
    """Format a time the way ``metav1.MicroTime`` does: RFC 3339, UTC, six fraction digits."""
    return normalize_micro_time(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp (``Z`` or numeric offset, optional fraction) to aware UTC,
    keeping its fraction to the microsecond."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return normalize_micro_time(datetime.fromisoformat(text))


def parse_opt_time(value: object) -> datetime | None:
    """An RFC 3339 string or a datetime as aware UTC; ``None`` when absent or malformed."""
    if isinstance(value, datetime):
        return normalize_micro_time(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None
