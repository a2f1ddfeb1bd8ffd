"""MXJob ``kubeflow.org/v1``: the MXNet job of training-operator v1.7 (removed upstream in v1.8).

Contract: the spec mirrors ``mxnet_types.go`` at v1.7.0 (which has no successPolicy): ``jobMode``
and ``mxReplicaSpecs`` keyed by Scheduler, Server, Worker, TunerTracker, TunerServer, Tuner, plus
the common ``runPolicy``. Validation mirrors ``mxnet_validation.go`` as CRD rules: only the six
replica types, at most one Scheduler replica, every template has a container, the job name is a
DNS-1035 label; ``runPolicy.managedBy`` is training-operator or MultiKueue and immutable.

Schema defaults: ``jobMode`` MXTrain (upstream requires the field; Lattice defaults it),
``replicas`` 1 and ``restartPolicy`` Never for every replica type, ``runPolicy.cleanPodPolicy``
None. Operator-side: replica-type keys are *not* case-normalised (upstream's
setTypeNameToCamelCase); lower-case keys are rejected instead. The container is named
``mxnet``, with port ``mxjob-port`` (default 9091) added by the operator when missing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict, JsonValue

from lattice.api.base import K8sModel, ObjectMeta
from lattice.api.common import (
    KubeflowJobStatus,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    managed_by_rules,
)
from lattice.api.constants import MANAGED_BY_TRAINING_OPERATOR, MX_REPLICA_TYPES, REPLICA_SCHEDULER
from lattice.api.schema import cel_rule

__all__ = ["JobMode", "MXJob", "MXJobSpec", "MXReplicaSpec", "MXRunPolicy", "mxjob_root_rules"]

_RFC1035 = "^[a-z]([-a-z0-9]*[a-z0-9])?$"


class JobMode(StrEnum):
    """MXTrain needs Scheduler/Server/Worker; MXTune needs the Tuner types."""

    MX_TRAIN = "MXTrain"
    MX_TUNE = "MXTune"


class MXRunPolicy(RunPolicy):
    """Run policy of an MXJob."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": managed_by_rules(MANAGED_BY_TRAINING_OPERATOR)
        }
    )

    managed_by: str | None = Field(None, max_length=63)
    """Controller reconciling the job: kubeflow.org/training-operator (or unset) or
    kueue.x-k8s.io/multikueue. Immutable."""


class MXReplicaSpec(ReplicaSpec):
    """One MXNet replica type."""

    replicas: int | None = Field(1, ge=0, le=100_000)
    """Desired number of replicas. Defaults to 1."""
    restart_policy: RestartPolicy | None = RestartPolicy.NEVER
    """Restart policy of the replicas. Defaults to Never."""


_KNOWN_TYPES = " + ".join(f"('{t}' in self ? 1 : 0)" for t in MX_REPLICA_TYPES)
_REPLICA_RULES: list[JsonValue] = [
    cel_rule(
        f"size(self) == {_KNOWN_TYPES}",
        "spec.mxReplicaSpecs may only contain the replica types " + ", ".join(MX_REPLICA_TYPES),
    ),
    cel_rule(
        f"!('{REPLICA_SCHEDULER}' in self) || !has(self.{REPLICA_SCHEDULER}.replicas) || "
        f"self.{REPLICA_SCHEDULER}.replicas <= 1",
        "spec.mxReplicaSpecs.Scheduler.replicas must be at most 1",
    ),
]


class MXJobSpec(K8sModel):
    """Desired state of an MXJob."""

    run_policy: MXRunPolicy = Field(default_factory=MXRunPolicy, json_schema_extra={"default": {}})
    """Runtime policies: clean-up, TTL, deadline, retries, gang, suspend, managedBy."""
    job_mode: JobMode = JobMode.MX_TRAIN
    """MXTrain (default) or MXTune."""
    mx_replica_specs: dict[str, MXReplicaSpec] = Field(
        max_length=len(MX_REPLICA_TYPES),
        json_schema_extra={"x-kubernetes-validations": _REPLICA_RULES},
    )
    """Replica specs keyed by type: Scheduler, Server, Worker, TunerTracker, TunerServer, Tuner."""


def mxjob_root_rules() -> list[JsonDict]:
    """Root-level rule: pods and services are named ``<name>-<type>-<index>``."""
    return [
        cel_rule(
            f"self.metadata.name.matches('{_RFC1035}')",
            "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', "
            "starting with a letter)",
            field_path=".metadata.name",
        ),
    ]


class MXJob(K8sModel):
    """A distributed MXNet job: scheduler, parameter servers and workers (or a tuning job)."""

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["MXJob"] = "MXJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MXJobSpec
    status: KubeflowJobStatus | None = None
