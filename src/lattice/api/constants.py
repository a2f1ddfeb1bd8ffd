"""API groups, versions, kinds, plurals, label and annotation keys, reserved values.

Contract: every wire-level name the operator shares with upstream (Kubeflow training-operator,
mpi-operator, Trainer v2, Kueue) is spelled once, here. ``Resource`` (re-exported from
``lattice.primitives.resources``) describes one resource; the six instances below are the kinds
Lattice serves.
"""

from __future__ import annotations

from lattice.primitives.resources import Resource

__all__ = [
    "ALL_RESOURCES",
    "ANNOTATION_CHECKPOINTING",
    "ANNOTATION_PRIORITY",
    "CATEGORY",
    "CLUSTER_TRAINING_RUNTIME",
    "GROUP_BREEZEML",
    "GROUP_KUBEFLOW",
    "GROUP_TRAINER",
    "LABEL_JOB_NAME",
    "LABEL_JOB_ROLE",
    "LABEL_OPERATOR_NAME",
    "LABEL_REPLICA_INDEX",
    "LABEL_REPLICA_TYPE",
    "LABEL_TRAINJOB_ANCESTOR",
    "MANAGED_BY_MPI_OPERATOR",
    "MANAGED_BY_MULTIKUEUE",
    "MANAGED_BY_TRAINING_OPERATOR",
    "MANAGED_BY_TRAINJOB_CONTROLLER",
    "MPIJOB",
    "MPI_REPLICA_TYPES",
    "MXJOB",
    "MX_REPLICA_TYPES",
    "REPLICA_LAUNCHER",
    "REPLICA_SCHEDULER",
    "REPLICA_SERVER",
    "REPLICA_TUNER",
    "REPLICA_TUNER_SERVER",
    "REPLICA_TUNER_TRACKER",
    "REPLICA_WORKER",
    "TRAININGJOB",
    "TRAININGJOB_CONTAINER_NAME",
    "TRAININGJOB_PORT_NAME",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "Resource",
]

GROUP_BREEZEML = "breezeml.ai"
GROUP_KUBEFLOW = "kubeflow.org"
GROUP_TRAINER = "trainer.kubeflow.org"

CATEGORY = "lattice"
"""``kubectl get lattice`` lists every Lattice kind."""


TRAININGJOB = Resource(
    group=GROUP_BREEZEML, version="v1", kind="TrainingJob", plural="trainingjobs"
)
MPIJOB = Resource(group=GROUP_KUBEFLOW, version="v2beta1", kind="MPIJob", plural="mpijobs")
MXJOB = Resource(group=GROUP_KUBEFLOW, version="v1", kind="MXJob", plural="mxjobs")
TRAINJOB = Resource(group=GROUP_TRAINER, version="v1alpha1", kind="TrainJob", plural="trainjobs")
TRAINING_RUNTIME = Resource(
    group=GROUP_TRAINER, version="v1alpha1", kind="TrainingRuntime", plural="trainingruntimes"
)
CLUSTER_TRAINING_RUNTIME = Resource(
    group=GROUP_TRAINER,
    version="v1alpha1",
    kind="ClusterTrainingRuntime",
    plural="clustertrainingruntimes",
    namespaced=False,
)
ALL_RESOURCES = (TRAININGJOB, MPIJOB, MXJOB, TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)

# Labels put on pods and services (training-operator common_types.go).
LABEL_JOB_NAME = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index"
LABEL_OPERATOR_NAME = "training.kubeflow.org/operator-name"
LABEL_JOB_ROLE = "training.kubeflow.org/job-role"
LABEL_TRAINJOB_ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
"""Ties a runtime replicatedJob to the TrainJob field overriding it (trainer, *-initializer)."""

ANNOTATION_PRIORITY = "lattice.breezeml.ai/priority"
"""Integer priority for kinds without ``spec.priority`` (MPIJob, MXJob, TrainJob)."""
ANNOTATION_CHECKPOINTING = "lattice.breezeml.ai/checkpointing"
""""true": the job checkpoints, so the scheduler may stop it for a job of its own priority."""

# Values of managedBy / runPolicy.managedBy.
MANAGED_BY_MPI_OPERATOR = "kubeflow.org/mpi-operator"
MANAGED_BY_TRAINING_OPERATOR = "kubeflow.org/training-operator"
MANAGED_BY_TRAINJOB_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"

# Replica types.
REPLICA_LAUNCHER = "Launcher"
REPLICA_WORKER = "Worker"
REPLICA_SCHEDULER = "Scheduler"
REPLICA_SERVER = "Server"
REPLICA_TUNER_TRACKER = "TunerTracker"
REPLICA_TUNER_SERVER = "TunerServer"
REPLICA_TUNER = "Tuner"
MPI_REPLICA_TYPES = (REPLICA_LAUNCHER, REPLICA_WORKER)
MX_REPLICA_TYPES = (
    REPLICA_SCHEDULER,
    REPLICA_SERVER,
    REPLICA_WORKER,
    REPLICA_TUNER_TRACKER,
    REPLICA_TUNER_SERVER,
    REPLICA_TUNER,
)

TRAININGJOB_CONTAINER_NAME = "trainingjob"
TRAININGJOB_PORT_NAME = "trainingjob-port"
