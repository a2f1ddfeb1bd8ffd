"""The ``kubectl lattice`` plugin's read seam over the in-memory API server.

Contract: ``MemoryReader`` is a ``lattice.kubectl.transport.Reader`` answering from a
``MemoryClient`` (``memory``), as ``kubectl get --raw`` would against that server: a request's
answer comes through unchanged, and an API error becomes what kubectl prints for it
(``Error from server (Reason): message``), parsed by the plugin's own ``error_from_stderr``.
It holds no state of its own: objects, faults (``memory.fail``) and recorded requests
(``memory.calls``) are the client's.
"""

from __future__ import annotations

from typing import Unpack

from lattice.api.constants import Resource
from lattice.kube import ApiError
from lattice.kubectl.transport import ListOptions, error_from_stderr
from lattice.primitives.objects import Obj
from tests.support.memory_client import MemoryClient

__all__ = ["MemoryReader"]


class MemoryReader:
    """``Reader`` over ``memory`` (see the module docstring)."""

    def __init__(self, memory: MemoryClient) -> None:
        self.memory = memory

    async def list(self, res: Resource, **opts: Unpack[ListOptions]) -> Obj:
        try:
            return await self.memory.list(res, **opts)
        except ApiError as exc:
            raise error_from_stderr(f"Error from server ({exc.reason}): {exc.message}") from exc

    async def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj:
        try:
            return await self.memory.get(res, name, namespace=namespace)
        except ApiError as exc:
            raise error_from_stderr(f"Error from server ({exc.reason}): {exc.message}") from exc
