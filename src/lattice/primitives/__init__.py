"""The bottom layer: primitives every other layer shares, written once, stdlib only.

Contract: nothing here imports from the rest of ``lattice`` or from any third-party package
(import-linter enforces it). Each primitive exists once in the code base:

- ``resources``: ``Resource``, the identity of one API resource (group, version, plural, kind,
  scope) and the REST paths it implies;
- ``objects``: ``Obj``, a Kubernetes object or part of one as decoded JSON;
- ``keys``: store keys (``namespace/name``) and kind keys (``Kind/namespace/name``);
- ``paths``: reading a nested mapping by a path of keys;
- ``times``: ``metav1.Time``/``metav1.MicroTime`` formatting, parsing and normalisation;
- ``quantity``: Kubernetes quantities (``"500m"``, ``"1Gi"``, ``2``) as integer units;
- ``requests``: a pod's effective request per resource, by kube-scheduler's rules.
"""

from __future__ import annotations

__all__: list[str] = []
