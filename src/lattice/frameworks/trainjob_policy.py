"""The base of TrainJob's ML policy plugins, and what the plugins share.

Contract (pure): ``TrainJobPolicy`` is one plugin, named after its ``mlPolicy`` field; it is
``active`` when the runtime states that field, and its defaults do nothing (the plugins and
the order they apply in: ``lattice.frameworks.trainjob_mlpolicies``). ``env_entries`` turns
name -> value (a string, or a ``valueFrom`` object) into env entries; ``with_port`` adds a
container port once; ``first_host`` is the first trainer pod's address.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lattice.api.runtime import MLPolicy, TrainingRuntimeSpec
from lattice.api.trainjob import TrainJob
from lattice.frameworks.base import Problem
from lattice.frameworks.trainjob_plans import ReplicatedJobPlan, ResolvedJob
from lattice.primitives.objects import Obj

__all__ = [
    "INDEX_REF",
    "LABEL_COMPLETION_INDEX",
    "MASTER_PORT",
    "Resources",
    "TrainJobPolicy",
    "env_entries",
    "first_host",
    "with_port",
]

#: A node's ``resources`` (``limits``, ``requests``), as the policies count them.
Resources = Mapping[str, Any]

#: Trainer's trainer port: torch's master, JAX's coordinator, XGBoost's tracker.
MASTER_PORT = 29500
LABEL_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_REF = {"fieldRef": {"fieldPath": f"metadata.annotations['{LABEL_COMPLETION_INDEX}']"}}


def env_entries(env: Mapping[str, str | Obj]) -> list[Obj]:
    """``env`` as container env entries (``value`` for a string, else ``valueFrom``)."""
    return [
        {"name": n, "value": v} if isinstance(v, str) else {"name": n, "valueFrom": v}
        for n, v in env.items()
    ]


def with_port(container: Obj, port: int) -> None:
    """Add ``port`` to the container's ports unless it is there."""
    if not any(p.get("containerPort") == port for p in container.get("ports") or ()):
        container["ports"] = [*(container.get("ports") or ()), {"containerPort": port}]


def first_host(job: ResolvedJob) -> str:
    """The first trainer pod's address (JobSet's ``<tj>-<rjob>-0-0.<subdomain>``)."""
    return f"{job.name}-{job.trainer}-0-0.{job.subdomain}"


class TrainJobPolicy:
    """One ML policy plugin; the defaults do nothing."""

    name: ClassVar[str] = ""

    def active(self, ml: MLPolicy | None) -> bool:
        return ml is not None and getattr(ml, self.name) is not None

    def problems(self, tj: TrainJob, *, ml: MLPolicy, resources: Resources) -> list[Problem]:
        del tj, ml, resources
        return []

    def runtime_problems(self, spec: TrainingRuntimeSpec) -> list[Problem]:
        del spec
        return []

    def patch(self, job: ResolvedJob, r: ReplicatedJobPlan, spec: Obj, main: Obj) -> None:
        del job, r, spec, main

    def objects(
        self, job: ResolvedJob, *, labels: Mapping[str, str], owner: Obj
    ) -> tuple[list[Obj], list[Obj]]:
        """The ConfigMaps and Secrets of the policy."""
        del job, labels, owner
        return [], []
