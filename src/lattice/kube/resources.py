"""Descriptors of the built-in resources the operator uses; ``Resource`` itself (re-exported
here) is ``lattice.primitives.resources.Resource``, the same type as the CRDs' descriptors."""

from __future__ import annotations

from lattice.primitives.resources import Resource

__all__ = [
    "BATCH_JOBS",
    "CONFIGMAPS",
    "CRDS",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "PRIORITY_CLASSES",
    "PVCS",
    "SECRETS",
    "SELF_SUBJECT_REVIEWS",
    "SERVICES",
    "Resource",
]


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
BATCH_JOBS = Resource("batch", "v1", "jobs", "Job")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
SELF_SUBJECT_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False
)
