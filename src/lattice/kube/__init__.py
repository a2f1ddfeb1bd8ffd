"""The client seam: the only package that imports kubernetes_asyncio.

Everything above it speaks plain dicts, ``Resource`` descriptors and the typed errors of
``lattice.kube.errors``.
"""

from lattice.kube import errors as _errors
from lattice.kube.client import KubeClient, PatchType, RestClient, WatchEvent
from lattice.kube.errors import *  # noqa: F403 (re-exported through __all__ below)
from lattice.kube.resources import Resource

__all__ = [
    "KubeClient",
    "PatchType",
    "Resource",
    "RestClient",
    "WatchEvent",
]
__all__ += _errors.__all__
