"""MXJob ``kubeflow.org/v1``: the MXNet job of training-operator v1.7 (removed upstream in v1.8).

Contract: the spec mirrors ``mxnet_types.go`` at v1.7.0 (which has no successPolicy): ``jobMode``
and ``mxReplicaSpecs`` keyed by Scheduler, Server, Worker, TunerTracker, TunerServer, Tuner, plus
the common ``runPolicy``. Validation mirrors ``mxnet_validation.go`` as CRD rules: only the six
replica types, at most one Scheduler replica, every template has a container, the job name is a
DNS-1035 label; ``runPolicy.managedBy`` is training-operator or MultiKueue and immutable.

Schema defaults: ``jobMode`` MXTrain (upstream requires the field; Lattice defaults it),
``replicas`` 1 and ``restartPolicy`` Never for every replica type, ``runPolicy.cleanPodPolicy``
None. Replica-type keys are matched ignoring letter case, as v1.7 did (``worker:`` is
``Worker``): the CRD rules accept any case (but not two keys that differ only in case), and
parsing normalises the keys to the canonical spelling (upstream's setTypeNameToCamelCase), so
every reader of the model sees ``Worker``. The container is named ``mxnet``, with port
``mxjob-port`` (default 9091) added by the operator when missing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic.config import JsonDict, JsonValue
from pydantic_core import PydanticCustomError

from lattice.api.base import CustomResourceWithStatus, K8sModel
from lattice.api.common import (
    KubeflowJobStatus,
    ManagedRunPolicy,
    ReplicaSpec,
    RestartPolicy,
    managed_by,
    replica_names_frozen_while_running,
)
from lattice.api.constants import MANAGED_BY_TRAINING_OPERATOR, MX_REPLICA_TYPES, REPLICA_SCHEDULER
from lattice.api.schema import cel_rule, dns1035_name_rule, validations

__all__ = [
    "JobMode",
    "MXJob",
    "MXJobSpec",
    "MXReplicaSpec",
    "MXRunPolicy",
    "canonical_replica_type",
    "mxjob_root_rules",
]


class JobMode(StrEnum):
    """MXTrain needs Scheduler/Server/Worker; MXTune needs the Tuner types."""

    MX_TRAIN = "MXTrain"
    MX_TUNE = "MXTune"


class MXRunPolicy(ManagedRunPolicy):
    """Run policy of an MXJob."""

    model_config = managed_by(MANAGED_BY_TRAINING_OPERATOR)


class MXReplicaSpec(ReplicaSpec):
    """One MXNet replica type."""

    replicas: int | None = Field(1, ge=0, le=100_000)
    """Desired number of replicas. Defaults to 1."""
    restart_policy: RestartPolicy | None = RestartPolicy.NEVER
    """Restart policy of the replicas. Defaults to Never."""


_LOWER = str([t.lower() for t in MX_REPLICA_TYPES])
_REPLICA_RULES: list[JsonValue] = [
    cel_rule(
        f"self.all(k, k.lowerAscii() in {_LOWER})",
        "spec.mxReplicaSpecs may only contain the replica types " + ", ".join(MX_REPLICA_TYPES),
    ),
    cel_rule(
        "self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",
        "spec.mxReplicaSpecs must not name a replica type twice (keys are matched ignoring case)",
    ),
    cel_rule(
        f"self.all(k, k.lowerAscii() != '{REPLICA_SCHEDULER.lower()}' || "
        "!has(self[k].replicas) || self[k].replicas <= 1)",
        "spec.mxReplicaSpecs.Scheduler.replicas must be at most 1",
    ),
]

_CANONICAL = {t.lower(): t for t in MX_REPLICA_TYPES}


def canonical_replica_type(key: str) -> str:
    """``worker`` -> ``Worker`` (any letter case); unknown keys are returned unchanged."""
    return _CANONICAL.get(key.lower(), key)


class MXJobSpec(K8sModel):
    """Desired state of an MXJob."""

    run_policy: MXRunPolicy = Field(default_factory=MXRunPolicy, json_schema_extra={"default": {}})
    """Runtime policies: clean-up, TTL, deadline, retries, gang, suspend, managedBy."""
    job_mode: JobMode = JobMode.MX_TRAIN
    """MXTrain (default) or MXTune."""
    mx_replica_specs: dict[str, MXReplicaSpec] = Field(
        max_length=len(MX_REPLICA_TYPES),
        json_schema_extra=validations(*_REPLICA_RULES),
    )
    """Replica specs keyed by type: Scheduler, Server, Worker, TunerTracker, TunerServer, Tuner
    (any letter case; normalised on parse)."""

    @field_validator("mx_replica_specs", mode="before")
    @classmethod
    def _canonical_keys(cls, value: Any) -> Any:
        """Rename ``worker`` to ``Worker`` etc.; two keys for one type stay a validation error."""
        if not isinstance(value, dict):
            return value
        renamed = {canonical_replica_type(str(k)): v for k, v in value.items()}
        if len(renamed) != len(value):
            keys = ", ".join(sorted(map(str, value)))
            raise PydanticCustomError(
                "duplicate_replica_type",
                "names a replica type twice (keys are matched ignoring case): {keys}",
                {"keys": keys},
            )
        return renamed


def mxjob_root_rules() -> list[JsonDict]:
    """Root-level rule: pods and services are named ``<name>-<type>-<index>``."""
    return [
        dns1035_name_rule(
            "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', "
            "starting with a letter)",
        ),
        replica_names_frozen_while_running("mxReplicaSpecs", "status.lattice", MX_REPLICA_TYPES),
    ]


class MXJob(CustomResourceWithStatus[MXJobSpec, KubeflowJobStatus]):
    """A distributed MXNet job: scheduler, parameter servers and workers (or a tuning job)."""

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["MXJob"] = "MXJob"
