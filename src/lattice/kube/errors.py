"""Typed API errors, decided from the HTTP status and the Status object's ``reason``.

Callers match on the class (``except Conflict``) rather than on numbers. 409 splits into
``AlreadyExists`` (a create collided) and ``Conflict`` (a stale resourceVersion), as client-go's
``IsAlreadyExists`` / ``IsConflict`` do.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "error_from_response",
]


class ApiError(Exception):
    """A non-2xx answer from the apiserver."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        retry_after: float | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.body = body or {}


class NotFound(ApiError):
    """404."""


class AlreadyExists(ApiError):
    """409 with reason AlreadyExists."""


class Conflict(ApiError):
    """409 for a stale resourceVersion or a failed precondition."""


class Gone(ApiError):
    """410: the requested resourceVersion is too old; relist."""


class Invalid(ApiError):
    """422: the object failed validation."""


class Forbidden(ApiError):
    """403."""


class Unauthorized(ApiError):
    """401."""


class TooManyRequests(ApiError):
    """429: back off, honouring Retry-After."""


class ServerError(ApiError):
    """5xx, or a transport failure mapped to one."""


def error_from_response(status: int, text: str, retry_after: str | None = None) -> ApiError:
    """Build the typed error for an HTTP status and the body text (a Status object if JSON)."""
    body: dict[str, Any] = {}
    try:
        parsed = json.loads(text) if text else {}
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or text[:500])
    wait: float | None = None
    if retry_after:
        try:
            wait = float(retry_after)
        except ValueError:
            wait = None
    cls: type[ApiError]
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status == 410:
        cls = Gone
    elif status == 422:
        cls = Invalid
    elif status == 403:
        cls = Forbidden
    elif status == 401:
        cls = Unauthorized
    elif status == 429:
        cls = TooManyRequests
    elif status >= 500:
        cls = ServerError
    else:
        cls = ApiError
    return cls(status, reason or cls.__name__, message, retry_after=wait, body=body)
