"""Types shared by the Kubeflow-style kinds: run policy, replicas, job and scheduling status.

Contract: these models mirror ``kubeflow.org/v1`` ``common_types.go`` (training-operator v1.7) and
mpi-operator ``v2beta1`` field for field, plus ``SchedulingStatus``, the block Lattice's scheduler
owns. ``TrainingJob`` carries the ``SchedulingStatus`` fields at the top of its status (seed
compatibility); MPIJob, MXJob and TrainJob carry the same model at ``status.lattice``.

Defaults that depend on the replica type (MPIJob Launcher vs Worker) cannot live in the schema;
the owning kind applies them in a model validator (operator-side defaulting).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

from lattice.api.base import IntOrString, K8sModel, MicroTime, Object, PodTemplate, Time
from lattice.api.constants import MANAGED_BY_MULTIKUEUE
from lattice.api.schema import cel_rule, list_map, validations

__all__ = [
    "CONTAINERS_MESSAGE",
    "CleanPodPolicy",
    "ConditionStatus",
    "JobCondition",
    "JobConditionType",
    "JobStatus",
    "KubeflowJobStatus",
    "ManagedRunPolicy",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
    "SchedulingStatus",
    "Stage",
    "managed_by",
    "replica_names_frozen_while_running",
    "while_running",
]

MAX_REPLICAS = 100_000
"""Upper bound on any replica count: far above any real job, low enough to keep CEL cheap."""

CONTAINERS_MESSAGE = "template.spec.containers must contain at least one container"


class CleanPodPolicy(StrEnum):
    """Which pods to delete when the job finishes."""

    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


class RestartPolicy(StrEnum):
    """How failed replicas are restarted. ExitCode: 1-127 are permanent, 128-255 retryable."""

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"


class ConditionStatus(StrEnum):
    """Status of a condition."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class JobConditionType(StrEnum):
    """The six Kubeflow job condition types (the field itself is a free string)."""

    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    SUSPENDED = "Suspended"
    FAILED = "Failed"


class Stage(StrEnum):
    """Where the Lattice scheduler has put the job."""

    INIT = ""
    WAITING = "Waiting"
    RUNNING = "Running"
    COMPLETED = "Completed"
    REQUEUE_COOLDOWN = "RequeueCooldown"
    WRONG = "Wrong"
    CANCELLED = "Cancelled"
    FAILED = "Failed"


def managed_by(controller: str) -> ConfigDict:
    """The ``model_config`` of a ``ManagedRunPolicy`` whose kind's operator is ``controller``:
    the rules that ``managedBy`` is that operator or MultiKueue, and immutable."""
    allowed = [controller, MANAGED_BY_MULTIKUEUE]
    rules = validations(
        cel_rule(
            "!has(self.managedBy) || self.managedBy in " + str(allowed),
            f"spec.runPolicy.managedBy must be {controller} or {MANAGED_BY_MULTIKUEUE}",
            field_path=".managedBy",
        ),
        cel_rule(
            "(has(self.managedBy) ? self.managedBy : '') == "
            "(has(oldSelf.managedBy) ? oldSelf.managedBy : '')",
            "spec.runPolicy.managedBy is immutable",
            field_path=".managedBy",
        ),
    )
    return ConfigDict(json_schema_extra=rules)


def while_running(block: str) -> str:
    """CEL, at the root of a job: the *old* object held pods (``<block>.currentSize`` > 0, the
    scheduler's grant). ``block`` is the scheduler block's path, ``status`` or
    ``status.lattice``. The status subresource resets ``status`` on a spec update, so the old
    block is what the scheduler last wrote; a status write leaves the spec as it was."""
    parts = ["oldSelf", *block.split("."), "currentSize"]
    present = [f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts))]
    return "(" + " && ".join([*present, f"{'.'.join(parts)} > 0"]) + ")"


def replica_names_frozen_while_running(specs: str, block: str, types: Sequence[str]) -> JsonDict:
    """A transition rule: while the job holds pods, no replica type (of ``types``) of map
    ``spec.<specs>`` renames its first container (its pods would stop matching the kind's
    container rules, and the job would turn invalid with its pods still running). The types
    are spelled out and only the first container is compared: a ``map`` over the containers
    exceeds the apiserver's CEL cost budget, the containers list having no ``maxItems``, and so
    does a field selection (``specs.Worker``) where an index (``specs['Worker']``) does not."""
    field = f"spec.{specs}"

    def first(obj: str, key: str) -> str:
        tpl = f"{obj}.{field}['{key}'].template"
        containers = f"{tpl}.spec.containers"
        return f"(has({tpl}.spec) && size({containers}) > 0 ? {containers}[0].name : '')"

    same = [
        f"(!('{t}' in self.{field}) || !('{t}' in oldSelf.{field}) || "
        f"{first('self', t)} == {first('oldSelf', t)})"
        for t in types
    ]
    return cel_rule(
        f"!{while_running(block)} || (" + " && ".join(same) + ")",
        f"{field}[*].template.spec.containers[0].name must not change while the job holds pods "
        f"({block}.currentSize > 0): the running pods would no longer match the spec",
        field_path=f".{field}",
        reason="FieldValueForbidden",
    )


class SchedulingPolicy(K8sModel):
    """Gang-scheduling knobs passed to a PodGroup (volcano or scheduler-plugins)."""

    min_available: int | None = Field(None, ge=0)
    """Minimal number of members to run the PodGroup; defaults to the number of pods."""
    queue: str | None = None
    """Volcano queue of the PodGroup."""
    min_resources: dict[str, IntOrString] | None = None
    """Minimal resources of the members (scheduler-plugins)."""
    priority_class: str | None = None
    """PriorityClass of the PodGroup (volcano)."""
    schedule_timeout_seconds: int | None = Field(None, ge=0)
    """How long members may wait before the PodGroup runs (scheduler-plugins)."""


class RunPolicy(K8sModel):
    """Runtime policies of a distributed job: clean-up, TTL, deadline, retries, gang, suspend."""

    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.NONE
    """Which pods to delete when the job completes. Defaults to None."""
    ttl_seconds_after_finished: int | None = Field(None, ge=0)
    """Delete the job this many seconds after it finished. Unset means never."""
    active_deadline_seconds: int | None = Field(None, ge=0)
    """Seconds, relative to startTime, the job may be active before it is terminated."""
    backoff_limit: int | None = Field(None, ge=0)
    """Number of retries before the job is marked Failed."""
    scheduling_policy: SchedulingPolicy | None = None
    """Gang-scheduling policy."""
    suspend: bool = False
    """Whether the controller should delete the pods and keep the job suspended."""


class ManagedRunPolicy(RunPolicy):
    """A run policy with ``managedBy``; a kind's subclass sets ``model_config`` to
    ``managed_by(<its operator>)``."""

    managed_by: str | None = Field(None, max_length=63)
    """Controller reconciling the job: the kind's operator when unset (kubeflow.org/mpi-operator
    for an MPIJob, kubeflow.org/training-operator for an MXJob), or kueue.x-k8s.io/multikueue.
    Immutable."""


class ReplicaSpec(K8sModel):
    """One replica type: how many pods, from which template, restarted how."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel_rule(
                "has(self.template) && has(self.template.spec) && "
                "has(self.template.spec.containers) && size(self.template.spec.containers) > 0",
                CONTAINERS_MESSAGE,
                field_path=".template.spec.containers",
            ),
        )
    )

    replicas: int | None = Field(None, ge=0, le=MAX_REPLICAS)
    """Desired number of replicas of this type."""
    template: PodTemplate = Field(default_factory=dict)
    """Pod template of the replicas; its restartPolicy is overridden by restartPolicy below."""
    restart_policy: RestartPolicy | None = None
    """Restart policy for all replicas of this type."""


class ReplicaStatus(K8sModel):
    """Observed pods of one replica type."""

    active: int | None = None
    """Number of running pods."""
    succeeded: int | None = None
    """Number of pods that reached phase Succeeded."""
    failed: int | None = None
    """Number of pods that reached phase Failed."""
    label_selector: Object | None = None
    """Deprecated: use selector."""
    selector: str | None = None
    """Label selector of the pods, in string form."""


class JobCondition(K8sModel):
    """One observed condition of a Kubeflow job."""

    type: str
    """Condition type: Created, Running, Restarting, Succeeded, Suspended or Failed."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: str | None = None
    """Machine-readable reason of the last transition, e.g. MPIJobRunning."""
    message: str | None = None
    """Human-readable details of the last transition."""
    last_update_time: Time | None = None
    """Last time the condition was updated."""
    last_transition_time: Time | None = None
    """Last time the condition's status changed."""


class JobStatus(K8sModel):
    """The Kubeflow ``JobStatus``: conditions, per-type replica counts and timestamps."""

    conditions: list[JobCondition] = Field(
        default_factory=list,
        json_schema_extra=list_map("type"),
    )
    """Current conditions, the most recently changed last."""
    replica_statuses: dict[str, ReplicaStatus] = Field(default_factory=dict)
    """Observed pods per replica type."""
    start_time: Time | None = None
    """When the job was acknowledged by the controller."""
    completion_time: Time | None = None
    """When the job completed."""
    last_reconcile_time: Time | None = None
    """When the job was last reconciled."""


class SchedulingStatus(K8sModel):
    """What the Lattice scheduler decided for the job, and when."""

    stage: Stage | None = None
    """Scheduler stage: "" (new), Waiting, Running, Completed, RequeueCooldown, Wrong, Cancelled,
    Failed (requeued more often than the operator's requeue limit allows)."""
    current_size: int | None = Field(None, ge=0)
    """Number of workers (nodes) the scheduler granted; 0 while waiting."""
    submit_time: MicroTime | None = None
    """When the scheduler first saw the job."""
    queued_time: MicroTime | None = None
    """When the job entered the queue (FIFO key within a priority, to the microsecond); reset on
    requeue."""
    requeue_time: MicroTime | None = None
    """When pods were first seen pending (requeued pendingTimeout later); unset when all run."""
    cooldown_time: MicroTime | None = None
    """Until when a requeued job stays in RequeueCooldown."""
    queue_position: int | None = Field(None, ge=0)
    """1-based position of a waiting job, in scheduling order, for the first 10; else unset."""
    requeue_count: int | None = Field(None, ge=0)
    """How many times the job was requeued after its pods stayed pending."""
    attained_service: float | None = Field(None, ge=0)
    """Service received so far, in unit-seconds (scheduling units x seconds running)."""
    service_updated_time: MicroTime | None = None
    """Up to when attainedService is accounted."""
    last_exec_time: MicroTime | None = None
    """When the job last started running (size went from 0 to more)."""
    completion_time: Time | None = None
    """When the job finished (succeeded or failed)."""
    last_resize_time: MicroTime | None = None
    """When currentSize last changed."""
    admitted_time: MicroTime | None = None
    """When the job was last admitted (currentSize from 0 to more); unset while it holds nothing.
    Among jobs of equal priority, service band and queuedTime, the earlier admitted goes first, so
    a running job is never stopped for one that merely ties with it."""
    last_decision: str | None = None
    """Reason of the scheduler's last decision about this job."""
    reason: str | None = None
    """Why the scheduler holds the job back, a stable CamelCase code set for every job it does
    not run: Queued, InsufficientCapacity, Fragmented, BlockedByStrictFIFO,
    ExceedsClusterCapacity, Preempted (in the pass that stopped it), Suspended,
    PodsPendingTimeout (RequeueCooldown), RequeueLimitExceeded, InvalidSpec; unset while it
    runs."""
    message: str | None = None
    """Human-readable explanation of reason."""
    waiting_since: MicroTime | None = None
    """When the job last entered Waiting (new, preempted, cooldown over, resumed); kept while it
    waits, unset otherwise. A preempted job keeps its older queuedTime: this is its wait."""
    placement: dict[str, str] | None = None
    """Where the scheduler placed each pod of the admitted job: child name (a pod, or the batch
    Job of an MPI launcher) to node name. Scheduler-owned, like every field of this block: the
    reconciler binds each named child to its node and creates no pod missing from it while it is
    set. Unset while the job holds nothing."""
    priority: int | None = None
    """The job's priority as the scheduler reads it (spec, priorityClass or annotation)."""
    min_size: int | None = Field(None, ge=0)
    """The fewest pods (counted as the scheduler's size) the job runs with."""
    max_size: int | None = Field(None, ge=0)
    """The most pods (counted as the scheduler's size) the job can use."""


class KubeflowJobStatus(JobStatus):
    """Status of MPIJob and MXJob: the Kubeflow JobStatus plus the Lattice scheduling block."""

    lattice: SchedulingStatus | None = None
    """Lattice scheduler state of this job."""
