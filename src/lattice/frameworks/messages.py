"""How a job kind words its conditions and events.

Contract: :class:`Messages` holds the defaults (TrainingJob's); a plugin may expose a
``messages`` attribute holding an instance of a subclass that overrides what its upstream words
differently. Every method is pure. ``messages_of`` picks the plugin's, or the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lattice.frameworks.base import PodView

__all__ = ["Messages", "messages_of"]


class Messages:
    """How a kind words its conditions and events; the defaults are TrainingJob's.

    A plugin may expose a ``messages`` attribute holding an instance of a subclass; every method is
    pure. ``ns``/``name`` are the job's namespace and name.
    """

    #: Event type of the ``<Kind>Failed`` (and backoff/deadline) events.
    failed_event_type = "Warning"
    #: Whether setting the Created condition also records a ``<Kind>Created`` event.
    created_event = False

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def created(self, ns: str, name: str) -> str:
        return f"{self.kind} {ns}/{name} is created."

    def running(self, ns: str, name: str) -> str:
        return f"{self.kind} {ns}/{name} is running."

    def running_event(self, ns: str, name: str) -> str | None:
        """The note of a ``<Kind>Running`` event when Running turns True (None: no event)."""
        del ns, name
        return None

    def succeeded(self, ns: str, name: str) -> str:
        return f"{self.kind} {ns}/{name} successfully completed."

    def suspended(self, ns: str, name: str) -> str:
        """Suspended=True (reason ``<Kind>Suspended``) and its event."""
        return f"{self.kind} {ns}/{name} is suspended."

    def suspended_running(self, ns: str, name: str) -> str:
        """Running=False (reason ``<Kind>Suspended``) of a job the user suspended."""
        return self.suspended(ns, name)

    def resumed(self, ns: str, name: str) -> str:
        return f"{self.kind} {ns}/{name} is resumed."

    def backoff_exceeded(self, ns: str, name: str) -> tuple[str, str]:
        """(reason, message) of the Failed condition when backoffLimit is exceeded."""
        message = f"{self.kind} {ns}/{name} has failed because it has reached the specified "
        return "BackoffLimitExceeded", message + "backoff limit"

    def deadline_exceeded(self, ns: str, name: str) -> tuple[str, str]:
        """(reason, message) of the Failed condition when activeDeadlineSeconds has passed."""
        message = f"{self.kind} {ns}/{name} has failed because it was active longer than "
        return "DeadlineExceeded", message + "specified deadline"

    def restarting(self, ns: str, name: str, recreated: Sequence[PodView]) -> str:
        """Restarting=True (reason ``<Kind>Restarting``) when ``recreated`` pods are replaced."""
        return f"{self.kind} {ns}/{name} is restarting because {len(recreated)} pod(s) failed."

    def exited(self, ns: str, pod: PodView) -> str | None:
        """The note of an ``ExitedWithCode`` event for a pod being recreated (None: no event)."""
        del ns, pod
        return None

    def never_running(self, ns: str, name: str) -> str | None:
        """The message of a ``Running=False`` condition (reason ``<Kind>Running``) added to a job
        that finishes without ever having been Running (None: no such condition)."""
        del ns, name
        return None


def messages_of(plugin: Any) -> Messages:
    """The plugin's :class:`Messages`, or the defaults for its kind."""
    found = getattr(plugin, "messages", None)
    return found if isinstance(found, Messages) else Messages(plugin.resource.kind)
