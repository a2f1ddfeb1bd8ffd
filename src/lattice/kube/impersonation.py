"""A kubeconfig user's impersonation fields, turned into the headers client-go sends.

Contract:
- ``impersonation_of(user)`` reads ``as``, ``as-uid``, ``as-groups`` and ``as-user-extra`` from
  one kubeconfig ``users[].user`` mapping, as kubectl and client-go do
  (``clientcmdapi.AuthInfo``). It returns None when none is set.
- A field of the wrong type, or ``as-uid``/``as-groups``/``as-user-extra`` without ``as``, raises
  ``KubeconfigError`` naming the field and the rule (kubectl refuses the same: "requesting uid,
  groups or user-extra ... without impersonating a user"), so ``lattice run`` refuses to start
  rather than act with the underlying credentials.
- ``Impersonation.headers()`` lists the ``Impersonate-User``, ``Impersonate-Uid``,
  ``Impersonate-Group`` (one header per group) and ``Impersonate-Extra-<key>`` (one per value,
  the key escaped as client-go's ``headerKeyEscape`` does) headers. The client adds them to its
  session, so every request carries them, watches included.
- ``who_am_i(client)`` asks the apiserver whom it authenticates us as (a SelfSubjectReview, which
  every authenticated user may create), impersonation applied; None if it cannot say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lattice.kube.errors import ApiError
from lattice.kube.resources import SELF_SUBJECT_REVIEWS

if TYPE_CHECKING:
    from lattice.kube.client import KubeClient

__all__ = [
    "Impersonation",
    "KubeconfigError",
    "impersonation_of",
    "loader_impersonation",
    "who_am_i",
]

# RFC 7230 token characters, minus '%' (which escapes the others): client-go legalHeaderKeyBytes.
_LEGAL_KEY = frozenset(
    b"!#$&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)


class KubeconfigError(ValueError):
    """The kubeconfig asks for something the operator will not do silently wrong."""


@dataclass(frozen=True, slots=True)
class Impersonation:
    """Whom to act as: a user name, and optionally a UID, groups and extra fields."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def headers(self) -> list[tuple[str, str]]:
        """The request headers, in order; a name may repeat (groups, extra values)."""
        out = [("Impersonate-User", self.user)]
        if self.uid:
            out.append(("Impersonate-Uid", self.uid))
        out += [("Impersonate-Group", group) for group in self.groups]
        for key, values in self.extra:
            out += [(f"Impersonate-Extra-{_escape_key(key)}", value) for value in values]
        return out


def _escape_key(key: str) -> str:
    return "".join(chr(b) if b in _LEGAL_KEY else f"%{b:02X}" for b in key.encode())


def _string(user_name: str, field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise KubeconfigError(f"kubeconfig user {user_name!r}: {field} must be a string")
    return value


def _strings(user_name: str, field: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KubeconfigError(f"kubeconfig user {user_name!r}: {field} must be a list of strings")
    return tuple(value)


def impersonation_of(
    user: Mapping[str, Any] | None, *, user_name: str = ""
) -> Impersonation | None:
    """The impersonation a kubeconfig user asks for, or None; ``KubeconfigError`` if malformed."""
    if not user:
        return None
    as_user = _string(user_name, "as", user.get("as") or "")
    uid = _string(user_name, "as-uid", user.get("as-uid") or "")
    groups = _strings(user_name, "as-groups", user.get("as-groups") or [])
    raw_extra = user.get("as-user-extra") or {}
    if not isinstance(raw_extra, Mapping):
        raise KubeconfigError(
            f"kubeconfig user {user_name!r}: as-user-extra must map keys to lists of strings"
        )
    extra = tuple(
        (str(k), _strings(user_name, f"as-user-extra.{k}", v)) for k, v in raw_extra.items()
    )
    if not as_user:
        given = [
            name
            for name, value in (("as-uid", uid), ("as-groups", groups), ("as-user-extra", extra))
            if value
        ]
        if given:
            raise KubeconfigError(
                f"kubeconfig user {user_name!r}: {', '.join(given)} set without `as`: "
                "impersonating a UID, groups or extra fields needs a user to impersonate"
            )
        return None
    return Impersonation(user=as_user, uid=uid, groups=groups, extra=extra)


def loader_impersonation(loader: Any) -> Impersonation | None:
    """The impersonation of the active user of a kubernetes_asyncio ``KubeConfigLoader`` (which
    reads the user's fields but ignores these)."""
    user = getattr(loader, "_user", None)
    context = getattr(loader, "_current_context", None)
    name = ""
    if context is not None:
        name = str((getattr(context, "value", None) or {}).get("context", {}).get("user") or "")
    value = getattr(user, "value", user)
    return impersonation_of(value if isinstance(value, Mapping) else None, user_name=name)


async def who_am_i(client: KubeClient) -> dict[str, Any] | None:
    """``status.userInfo`` of a SelfSubjectReview (username, uid, groups), or None."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        review = await client.create(SELF_SUBJECT_REVIEWS, body)
    except ApiError:
        return None
    info = (review.get("status") or {}).get("userInfo")
    return info if isinstance(info, dict) else None
