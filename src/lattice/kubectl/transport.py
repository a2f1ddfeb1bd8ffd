"""The plugin's only way to the API server: ``kubectl get --raw``, run as a subprocess.

Contract:
- ``Reader`` is the read-only seam of :mod:`lattice.kubectl.commands`: ``list`` (one page, with
  ``limit``/``continue``; its keyword options are ``ListOptions``) and ``get`` of a
  :class:`lattice.api.constants.Resource`, plain dicts out. Errors are :class:`ApiError`
  (``NotFound`` for 404, ``Forbidden`` for 403).
- ``KubectlReader`` runs ``kubectl [--kubeconfig K] [--context C] get --raw PATH``: a kubectl
  plugin always runs where kubectl is, and kubectl then authenticates exactly as it does for
  the user (exec credential plugins, OIDC, client certificates, proxies) without any Python
  Kubernetes client. ``$KUBECTL`` names another binary. kubectl's ``Error from server
  (Reason): message`` becomes the matching error; a missing binary is an ``ApiError``.
- The plugin therefore imports no HTTP client: ``lattice.kubectl`` needs only pydantic and
  PyYAML (an import-linter contract keeps it so).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict, Unpack
from urllib.parse import urlencode

from lattice.api.constants import Resource
from lattice.primitives.objects import Obj

__all__ = [
    "EVENTS",
    "PRIORITY_CLASSES",
    "ApiError",
    "Forbidden",
    "KubectlReader",
    "ListOptions",
    "NotFound",
    "Reader",
    "error_from_stderr",
    "resource_path",
]

EVENTS = Resource(group="events.k8s.io", version="v1", kind="Event", plural="events")
PRIORITY_CLASSES = Resource(
    group="scheduling.k8s.io",
    version="v1",
    kind="PriorityClass",
    plural="priorityclasses",
    namespaced=False,
)


class ApiError(Exception):
    """A read that failed: ``reason`` is the API's (``NotFound``...) or kubectl's own."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}" if reason else message)
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    """404: the object, or the resource type (a CRD not installed)."""


class Forbidden(ApiError):
    """403: RBAC refused the read."""


_ERRORS: dict[str, type[ApiError]] = {"NotFound": NotFound, "Forbidden": Forbidden}
_SERVER_ERROR = re.compile(r"Error from server \((?P<reason>\w+)\):\s*(?P<message>.*)", re.S)


def error_from_stderr(stderr: str) -> ApiError:
    """The error kubectl printed (``Error from server (NotFound): ...``) as a typed error."""
    text = stderr.strip()
    match = _SERVER_ERROR.search(text)
    if match is None:
        return ApiError("", text or "kubectl failed without a message")
    reason, message = match["reason"], match["message"].strip()
    return _ERRORS.get(reason, ApiError)(reason, message)


def resource_path(res: Resource, *, namespace: str | None = None, name: str | None = None) -> str:
    """The REST path of ``res``; ``namespace=None`` on a namespaced resource: all namespaces."""
    path = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    if res.namespaced and namespace is not None:
        path += f"/namespaces/{namespace}"
    path += f"/{res.plural}"
    return path if name is None else f"{path}/{name}"


class ListOptions(TypedDict, total=False):
    """The keyword options of ``Reader.list`` (each absent or None means unset)."""

    namespace: str | None
    field_selector: str | None
    limit: int | None
    continue_token: str | None


class Reader(Protocol):
    """What ``kubectl lattice`` asks of the API server: reads only."""

    async def list(self, res: Resource, **opts: Unpack[ListOptions]) -> Obj: ...

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj: ...


@dataclass(frozen=True, slots=True)
class KubectlReader:
    """``Reader`` over ``kubectl get --raw`` (see the module docstring)."""

    kubeconfig: str | None = None
    context: str | None = None
    kubectl: str = ""

    def _argv(self, path: str) -> list[str]:
        argv = [self.kubectl or os.environ.get("KUBECTL") or "kubectl"]
        if self.kubeconfig:
            argv += ["--kubeconfig", self.kubeconfig]
        if self.context:
            argv += ["--context", self.context]
        return [*argv, "get", "--raw", path]

    async def _raw(self, path: str) -> Obj:
        argv = self._argv(path)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise ApiError("", f"cannot run {argv[0]}: {exc}") from exc
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise error_from_stderr(err.decode(errors="replace"))
        try:
            parsed = json.loads(out)
        except ValueError as exc:
            raise ApiError("", f"{path}: the answer is not JSON: {exc}") from exc
        return parsed if isinstance(parsed, dict) else {}

    async def list(self, res: Resource, **opts: Unpack[ListOptions]) -> Obj:
        limit = opts.get("limit")
        query: Sequence[tuple[str, str]] = [
            (k, v)
            for k, v in (
                ("fieldSelector", opts.get("field_selector") or ""),
                ("limit", str(limit) if limit else ""),
                ("continue", opts.get("continue_token") or ""),
            )
            if v
        ]
        path = resource_path(res, namespace=opts.get("namespace"))
        return await self._raw(f"{path}?{urlencode(query)}" if query else path)

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj:
        return await self._raw(resource_path(res, namespace=namespace, name=name))
