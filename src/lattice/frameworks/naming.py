"""Names, labels and owner references of a job's children.

Contract (pure):
- Child names are ``<job>-<replica type, lower case>-<index>`` (``/`` becomes ``-``), as
  training-operator's ``GenGeneralName``.
- ``replica_labels`` gives the ``training.kubeflow.org/*`` labels upstream puts on pods and
  Services (``replica-type`` in lower case), ``job-role: master`` when asked, plus
  ``MANAGED_LABEL: "true"``. ``replica_selector`` is the subset that picks exactly one pod.
- ``owner_reference`` is the controller ownerReference every child carries (``job_owner``: to a
  job, from its metadata); ``object_meta`` the
  metadata of a child that is not built from a template (name, namespace when set, labels, the
  owner).
- ``service_name_problems``: a job name that cannot name its children's Services (DNS-1035, at
  most 63 characters).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lattice.api.constants import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    Resource,
)
from lattice.frameworks.base import MANAGED_LABEL, Problem
from lattice.primitives.objects import Obj

__all__ = [
    "DNS1035",
    "MAX_NAME",
    "child_name",
    "child_prefix",
    "job_owner",
    "object_meta",
    "owner_reference",
    "replica_labels",
    "replica_selector",
    "service_name_problems",
]


def child_prefix(job_name: str, replica_type: str) -> str:
    """``<job>-<replica type, lower case>-``: ``child_name`` without the index."""
    return f"{job_name}-{replica_type.lower()}-".replace("/", "-")


def child_name(job_name: str, replica_type: str, index: int) -> str:
    """``<job>-<replica type, lower case>-<index>``, e.g. ``a-worker-0``."""
    return f"{child_prefix(job_name, replica_type)}{index}"


def owner_reference(*, api_version: str, kind: str, name: str, uid: str) -> Obj:
    """The controller ownerReference children carry (garbage-collected with the job)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def replica_selector(*, job_name: str, replica_type: str, index: int) -> dict[str, str]:
    """The labels that select exactly the pod ``index`` of ``replica_type`` of the job."""
    return {
        LABEL_JOB_NAME: job_name,
        LABEL_REPLICA_TYPE: replica_type.lower(),
        LABEL_REPLICA_INDEX: str(index),
    }


def replica_labels(
    *, job_name: str, replica_type: str, index: int, operator_name: str, master: bool = False
) -> dict[str, str]:
    """Every label Lattice puts on a replica's pod and Service."""
    labels = {
        LABEL_OPERATOR_NAME: operator_name,
        **replica_selector(job_name=job_name, replica_type=replica_type, index=index),
        MANAGED_LABEL: "true",
    }
    if master:
        labels[LABEL_JOB_ROLE] = "master"
    return labels


def job_owner(resource: Resource, metadata: Any) -> Obj:
    """``owner_reference`` to the job of ``resource`` whose ``metadata`` (an ``ObjectMeta``)."""
    return owner_reference(
        api_version=resource.api_version,
        kind=resource.kind,
        name=metadata.name or "",
        uid=metadata.uid or "",
    )


def object_meta(
    *,
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    owner: Mapping[str, Any],
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """``metadata`` of a child: its name, the namespace when set, ``labels``, the
    ``annotations`` when given, and ``owner``."""
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    meta["ownerReferences"] = [dict(owner)]
    return meta


#: A DNS-1035 label: what a Service name must be (at most ``MAX_NAME`` characters).
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME = 63


def service_name_problems(name: str, *, longest: str, owners: str, label: str) -> list[Problem]:
    """A problem when the job's ``name`` is not a DNS-1035 label (it names the ``owners``
    Services), or when the ``longest`` child Service name (a ``label``) exceeds 63 characters."""
    if not DNS1035.match(name):
        why = "must be a DNS-1035 label (lower-case letters, digits and '-', starting with a "
        why += f"letter): it names the {owners} Services, got {name!r}"
        return [Problem("metadata.name", why)]
    if len(longest) > MAX_NAME:
        why = f"too long: {label} {longest!r} would exceed {MAX_NAME} characters"
        return [Problem("metadata.name", why)]
    return []
