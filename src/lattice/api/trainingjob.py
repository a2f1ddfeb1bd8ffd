"""TrainingJob ``breezeml.ai/v1``: the Lattice elastic training job.

Contract: the spec is the Lattice operator's (seed 001): a single ``replicaSpecs`` (the operator
names the type ``Worker`` and sets ``replicas`` to ``status.currentSize``), an elastic range
``[minSize, maxSize]``, an integer ``priority`` and ``injectLattice``/``framework``.

Schema defaults (applied by the apiserver, mirrored by the models): ``minSize`` 1, ``maxSize`` 1,
``priority`` 0, ``injectLattice`` false, ``framework`` pytorch, ``runPolicy.cleanPodPolicy`` All,
``replicaSpecs.replicas`` 1, ``replicaSpecs.restartPolicy`` Never.
Operator-side rules (kept out of the schema, as the seed had them): the first container must be
named ``trainingjob``; ``restartPolicy`` is forced to Never when ``injectLattice`` is set; an
invalid job goes to stage ``Wrong``. Transition rules (``trainingjob_root_rules``): while the
job holds pods (``status.currentSize`` > 0), an update must not rename the first container nor
change ``injectLattice`` or ``framework``, since the running pods were built from them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

from lattice.api.base import CustomResourceWithStatus, K8sModel
from lattice.api.common import (
    CleanPodPolicy,
    JobCondition,
    JobStatus,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    SchedulingStatus,
    while_running,
)
from lattice.api.schema import cel_rule, list_map, validations

__all__ = [
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "TrainingJob",
    "TrainingJobFramework",
    "TrainingJobReplicaSpec",
    "TrainingJobRunPolicy",
    "TrainingJobSpec",
    "TrainingJobStatus",
    "trainingjob_root_rules",
]

MIN_PRIORITY = -1_000_000
MAX_PRIORITY = 1_000_000_000
"""Same ceiling as user-defined PriorityClass values."""
MAX_SIZE = 100_000


class TrainingJobFramework(StrEnum):
    """Framework the Lattice agent adapts to (sent as LATTICE_FRAMEWORK)."""

    PYTORCH = "pytorch"
    GENERIC = "generic"


class TrainingJobRunPolicy(RunPolicy):
    """Run policy of a TrainingJob; unlike Kubeflow kinds, finished pods are all cleaned up."""

    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.ALL
    """Which pods to delete when the job completes. Defaults to All."""


class TrainingJobReplicaSpec(ReplicaSpec):
    """The worker template; the operator owns the replica count (status.currentSize)."""

    replicas: int | None = Field(1, ge=0, le=MAX_SIZE)
    """Ignored on input: the operator sets it to status.currentSize."""
    restart_policy: RestartPolicy | None = RestartPolicy.NEVER
    """Restart policy of the workers. Defaults to Never (forced to Never with injectLattice)."""


class TrainingJobSpec(K8sModel):
    """Desired state of a TrainingJob."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel_rule(
                "!has(self.minSize) || !has(self.maxSize) || self.minSize <= self.maxSize",
                "spec.minSize must be less than or equal to spec.maxSize",
                field_path=".minSize",
            ),
        )
    )

    run_policy: TrainingJobRunPolicy = Field(
        default_factory=TrainingJobRunPolicy, json_schema_extra={"default": {}}
    )
    """Runtime policies: clean-up, TTL, deadline, retries."""
    replica_specs: TrainingJobReplicaSpec
    """Pod template of the workers. The number of workers is decided by the scheduler."""
    min_size: int = Field(1, ge=1, le=MAX_SIZE)
    """Fewest workers the job can run with. Defaults to 1."""
    max_size: int = Field(1, ge=1, le=MAX_SIZE)
    """Most workers the job can use. Defaults to 1."""
    inject_lattice: bool = False
    """Wrap the command with the Lattice agent and addons (needs python and an explicit command)."""
    framework: TrainingJobFramework = TrainingJobFramework.PYTORCH
    """Framework of the job, passed to the agent. Defaults to pytorch."""
    priority: int = Field(0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    """Higher runs first and may shrink running jobs of lower or equal priority. Defaults to 0."""


class TrainingJobStatus(SchedulingStatus):
    """Observed state: the scheduler's fields at top level plus the Kubeflow execution status."""

    exec_status: JobStatus | None = None
    """Kubeflow job status of the pods the operator runs for the granted size."""
    conditions: list[JobCondition] | None = Field(None, json_schema_extra=list_map("type"))
    """The Kubeflow conditions of execStatus (Created, Running, Restarting, Suspended,
    Succeeded, Failed), copied by the operator so that ``kubectl wait
    --for=condition=Succeeded`` works as on the Kubeflow kinds."""


_FIRST = "spec.replicaSpecs.template.spec.containers"


def _first_name(obj: str) -> str:
    tpl = f"{obj}.spec.replicaSpecs.template"
    containers = f"{tpl}.spec.containers"
    return f"(has({tpl}.spec) && size({containers}) > 0 ? {containers}[0].name : '')"


def trainingjob_root_rules() -> list[JsonDict]:
    """Transition rules: what must not change while the job holds pods (module docstring)."""
    running = while_running("status")
    why = "while the job holds pods (status.currentSize > 0): its running pods were built from it"
    rules: list[JsonDict] = [
        cel_rule(
            f"!{running} || {_first_name('self')} == {_first_name('oldSelf')}",
            f"{_FIRST}[0].name must not change {why}",
            field_path=f".{_FIRST}",
            reason="FieldValueForbidden",
        )
    ]
    for field, default in (("injectLattice", "false"), ("framework", "'pytorch'")):

        def value(obj: str, field: str = field, default: str = default) -> str:
            return f"(has({obj}.spec.{field}) ? {obj}.spec.{field} : {default})"

        rules.append(
            cel_rule(
                f"!{running} || {value('self')} == {value('oldSelf')}",
                f"spec.{field} must not change {why}",
                field_path=f".spec.{field}",
                reason="FieldValueForbidden",
            )
        )
    return rules


class TrainingJob(CustomResourceWithStatus[TrainingJobSpec, TrainingJobStatus]):
    """A distributed training job whose size the Lattice scheduler picks in [minSize, maxSize]."""

    api_version: Literal["breezeml.ai/v1"] = "breezeml.ai/v1"
    kind: Literal["TrainingJob"] = "TrainingJob"
