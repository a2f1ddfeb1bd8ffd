"""Lattice API: pydantic models of every CRD the operator serves, and CRD generation.

Contract: this package is pure (no I/O besides ``crd.write_crds``, no clock, no network). It
defines TrainingJob (``breezeml.ai/v1``), MPIJob (``kubeflow.org/v2beta1``), MXJob
(``kubeflow.org/v1``), TrainJob, TrainingRuntime and ClusterTrainingRuntime
(``trainer.kubeflow.org/v1alpha1``); the shared ``SchedulingStatus`` the scheduler writes; the
Kubeflow condition semantics; and the structural-schema/CRD generator behind ``lattice crds``.

Parse with ``Model.model_validate(obj)``; emit with ``model.to_dict()`` (camelCase, no nulls,
RFC 3339 times).
"""

from __future__ import annotations

from lattice.api.base import (
    IntOrString,
    K8sModel,
    MicroTime,
    Object,
    ObjectMeta,
    PodTemplate,
    Time,
    format_micro_time,
    format_time,
    normalize_time,
    parse_time,
)
from lattice.api.common import (
    CleanPodPolicy,
    ConditionStatus,
    JobCondition,
    JobConditionType,
    JobStatus,
    KubeflowJobStatus,
    ReplicaSpec,
    ReplicaStatus,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
    SchedulingStatus,
    Stage,
)
from lattice.api.conditions import (
    get_condition,
    is_failed,
    is_finished,
    is_running,
    is_succeeded,
    is_suspended,
    new_reason,
    set_condition,
    set_status_condition,
)
from lattice.api.constants import ALL_RESOURCES, Resource
from lattice.api.mpijob import LauncherCreationPolicy, MPIImplementation, MPIJob, MPIJobSpec
from lattice.api.mxjob import JobMode, MXJob, MXJobSpec, MXReplicaSpec
from lattice.api.runtime import (
    ClusterTrainingRuntime,
    MLPolicy,
    TrainingRuntime,
    TrainingRuntimeSpec,
)
from lattice.api.trainingjob import (
    TrainingJob,
    TrainingJobFramework,
    TrainingJobSpec,
    TrainingJobStatus,
)
from lattice.api.trainjob import Condition, RuntimeRef, TrainJob, TrainJobSpec, TrainJobStatus

__all__ = [
    "ALL_RESOURCES",
    "CleanPodPolicy",
    "ClusterTrainingRuntime",
    "Condition",
    "ConditionStatus",
    "IntOrString",
    "JobCondition",
    "JobConditionType",
    "JobMode",
    "JobStatus",
    "K8sModel",
    "KubeflowJobStatus",
    "LauncherCreationPolicy",
    "MLPolicy",
    "MPIImplementation",
    "MPIJob",
    "MPIJobSpec",
    "MXJob",
    "MXJobSpec",
    "MXReplicaSpec",
    "MicroTime",
    "Object",
    "ObjectMeta",
    "PodTemplate",
    "ReplicaSpec",
    "ReplicaStatus",
    "Resource",
    "RestartPolicy",
    "RunPolicy",
    "RuntimeRef",
    "SchedulingPolicy",
    "SchedulingStatus",
    "Stage",
    "Time",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "TrainingJob",
    "TrainingJobFramework",
    "TrainingJobSpec",
    "TrainingJobStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "format_micro_time",
    "format_time",
    "get_condition",
    "is_failed",
    "is_finished",
    "is_running",
    "is_succeeded",
    "is_suspended",
    "new_reason",
    "normalize_time",
    "parse_time",
    "set_condition",
    "set_status_condition",
]
