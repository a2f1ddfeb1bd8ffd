"""The client seam: the only package that imports kubernetes_asyncio.

Everything above it speaks plain dicts, ``Resource`` descriptors and the typed errors of
``lattice.kube.errors``.
"""

from lattice.kube.client import KubeClient, PatchType, RestClient, WatchEvent
from lattice.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
)
from lattice.kube.resources import Resource

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeClient",
    "NotFound",
    "PatchType",
    "Resource",
    "RestClient",
    "ServerError",
    "TooManyRequests",
    "WatchEvent",
]
