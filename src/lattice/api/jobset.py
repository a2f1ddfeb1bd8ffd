"""The JobSet ``jobset.x-k8s.io/v1alpha2`` spec (JobSet v0.12) a training runtime's template holds.

Contract: every JobSetSpec field that Kubeflow Trainer v2.3.0 embeds in a runtime is declared,
with JobSet's schema defaults (replicatedJob ``replicas`` 1 and ``groupName`` default,
failurePolicy ``restartStrategy`` Recreate, volume-claim ``whenDeleted`` Delete) and its CRD rules
(network, successPolicy, failurePolicy, startupPolicy, volumeClaimPolicies and dependsOn are
immutable; startupPolicy InOrder excludes dependsOn). The Job templates carry the full batch/v1
``JobSpec`` schema (pod template included) from the Kubernetes snapshot, so unknown fields are
refused. Rules Lattice adds because no JobSet webhook runs here: the first replicatedJob has no
dependsOn, a dependency names another replicatedJob, successPolicy targets exist. That a
dependency is listed *before* its dependant is not checked at apply time: the apiserver's CEL
cost budget refuses that rule over Job templates of this size.
In Python, Job templates stay plain data (``ReplicatedJob.template``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, GetJsonSchemaHandler, StringConstraints
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from lattice.api.base import K8sModel, PersistentVolumeClaim
from lattice.api.k8s_schema import k8s_schema
from lattice.api.schema import cel_rule, immutable, list_map, validations

__all__ = [
    "MAX_REPLICATED_JOBS",
    "Coordinator",
    "DependsOn",
    "DependsOnStatus",
    "FailurePolicy",
    "FailurePolicyAction",
    "FailurePolicyRule",
    "JobSetNetwork",
    "JobSetSpec",
    "JobSetSuccessPolicy",
    "JobTemplate",
    "ReplicatedJob",
    "RestartStrategy",
    "StartupPolicy",
    "StartupPolicyOrder",
    "SuccessPolicyOperator",
    "VolumeClaimPolicy",
    "VolumeRetentionPolicy",
]

MAX_REPLICATED_JOBS = 32
"""Bound on replicatedJobs, so that the dependsOn rules stay within the CEL cost budget."""

_Name = Annotated[str, StringConstraints(max_length=63)]


class _JobTemplateSchema:
    """Schema of a batch/v1 JobTemplateSpec: object metadata and the full JobSpec."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "object",
            "properties": {
                "metadata": k8s_schema("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
                "spec": k8s_schema("io.k8s.api.batch.v1.JobSpec"),
            },
        }


JobTemplate = Annotated[dict[str, Any], _JobTemplateSchema()]
"""A batch/v1 ``JobTemplateSpec`` (metadata and spec) kept as plain data."""


class DependsOnStatus(StrEnum):
    """The status of the replicatedJob a dependency waits for."""

    READY = "Ready"
    COMPLETE = "Complete"


class DependsOn(K8sModel):
    """A replicatedJob that must reach a status before this one starts."""

    name: str = Field(max_length=63)
    """Name of an earlier replicatedJob."""
    status: DependsOnStatus
    """Ready (all its pods ready or succeeded) or Complete (all its Jobs completed)."""


class ReplicatedJob(K8sModel):
    """A group of identical batch Jobs in the JobSet."""

    name: str = Field(min_length=1, max_length=63)
    """Name of the replicatedJob (node, launcher, dataset-initializer, model-initializer ...)."""
    group_name: str = Field("default", max_length=63)
    """Group of the replicatedJob, exposed to its pods as a label. Defaults to default."""
    template: JobTemplate = Field(default_factory=dict)
    """batch/v1 JobTemplateSpec (metadata and spec) of each Job."""
    replicas: int = Field(1, ge=0, le=10_000)
    """Number of Jobs. Defaults to 1."""
    depends_on: list[DependsOn] | None = Field(
        None,
        max_length=5,
        json_schema_extra={**list_map("name"), **immutable("replicatedJobs[].dependsOn")},
    )
    """replicatedJobs that must be Ready or Complete before this one is created. Immutable."""


class SuccessPolicyOperator(StrEnum):
    """How targetReplicatedJobs combine."""

    ALL = "All"
    ANY = "Any"


class JobSetSuccessPolicy(K8sModel):
    """When the JobSet counts as succeeded."""

    operator: SuccessPolicyOperator
    """All or Any of the targeted Jobs must succeed."""
    target_replicated_jobs: list[_Name] | None = Field(
        None, max_length=MAX_REPLICATED_JOBS, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """replicatedJobs the operator applies to; empty means all."""


class RestartStrategy(StrEnum):
    """How the JobSet is restarted."""

    RECREATE = "Recreate"
    BLOCKING_RECREATE = "BlockingRecreate"
    IN_PLACE_RESTART = "InPlaceRestart"


class FailurePolicyAction(StrEnum):
    """What a matching failure rule does."""

    FAIL_JOBSET = "FailJobSet"
    RESTART_JOBSET = "RestartJobSet"
    RESTART_JOBSET_AND_IGNORE_MAX_RESTARTS = "RestartJobSetAndIgnoreMaxRestarts"
    RESTART_JOB = "RestartJob"
    RESTART_JOB_AND_IGNORE_MAX_RESTARTS = "RestartJobAndIgnoreMaxRestarts"


class FailurePolicyRule(K8sModel):
    """A rule matched against a failed Job; the first match decides."""

    name: str = Field(max_length=128)
    """Name of the rule, reported in the failure condition."""
    action: FailurePolicyAction
    """What to do when the rule matches."""
    on_job_failure_reasons: list[str] | None = None
    """Job failure reasons (BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy ...) that
    match; empty matches any."""
    on_job_failure_message_patterns: list[str] | None = None
    """Regular expressions matched against the Job's failure message; empty matches any."""
    target_replicated_jobs: list[str] | None = Field(
        None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """replicatedJobs the rule applies to; empty means all."""


class FailurePolicy(K8sModel):
    """When the JobSet is restarted or failed after a Job fails."""

    max_restarts: int | None = Field(None, ge=0)
    """Restarts before the JobSet fails."""
    restart_strategy: RestartStrategy = RestartStrategy.RECREATE
    """Recreate (default), BlockingRecreate or InPlaceRestart."""
    rules: list[FailurePolicyRule] | None = None
    """Rules evaluated in order against each failed Job."""


class StartupPolicyOrder(StrEnum):
    """Order in which replicatedJobs start."""

    ANY_ORDER = "AnyOrder"
    IN_ORDER = "InOrder"


class StartupPolicy(K8sModel):
    """Start replicatedJobs in list order, each once the previous is ready (deprecated upstream
    in favour of dependsOn)."""

    startup_policy_order: StartupPolicyOrder
    """AnyOrder or InOrder."""


class JobSetNetwork(K8sModel):
    """Headless service and DNS of the JobSet."""

    enable_dns_hostnames: bool | None = Field(None, alias="enableDNSHostnames")
    """Give pods stable hostnames <jobset>-<rjob>-<job>-<pod>.<subdomain>."""
    subdomain: str | None = Field(None, max_length=63)
    """Name of the headless service; defaults to the JobSet name."""
    publish_not_ready_addresses: bool | None = None
    """Publish DNS records of pods that are not ready."""


class Coordinator(K8sModel):
    """The pod announced to every pod as the coordinator."""

    replicated_job: str
    """replicatedJob of the coordinator pod."""
    job_index: int | None = Field(None, ge=0)
    """Job index within the replicatedJob. Defaults to 0."""
    pod_index: int | None = Field(None, ge=0)
    """Pod index within the Job. Defaults to 0."""


class VolumeRetentionPolicy(K8sModel):
    """What happens to the claims when the JobSet is deleted."""

    when_deleted: str = Field("Delete", json_schema_extra={"enum": ["Delete", "Retain"]})
    """Delete (default) or Retain."""


class VolumeClaimPolicy(K8sModel):
    """PersistentVolumeClaims created for the JobSet and mounted by its pods."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel_rule(
                "!has(self.templates) || self.templates.all(t, !has(t.metadata) || "
                "!has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",
                "volumeClaimPolicies[].templates[].metadata.namespace must not be set",
            )
        )
    )

    templates: list[PersistentVolumeClaim] | None = Field(
        None, max_length=50, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Claim templates; each must be mounted by a container of the pod template."""
    retention_policy: VolumeRetentionPolicy | None = None
    """What happens to the claims when the JobSet is deleted."""


class JobSetSpec(K8sModel):
    """A ``jobset.x-k8s.io/v1alpha2`` JobSetSpec."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel_rule(
                "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == "
                "'InOrder' && has(self.replicatedJobs) && "
                "self.replicatedJobs.exists(x, has(x.dependsOn)))",
                "startupPolicy InOrder and replicatedJobs[].dependsOn are mutually exclusive",
                field_path=".startupPolicy",
            ),
            cel_rule(
                "!has(self.replicatedJobs) || size(self.replicatedJobs) == 0 || "
                "!has(self.replicatedJobs[0].dependsOn)",
                "the first of replicatedJobs cannot have dependsOn",
                field_path=".replicatedJobs",
            ),
            cel_rule(
                "!has(self.replicatedJobs) || self.replicatedJobs.all(r, !has(r.dependsOn) "
                "|| r.dependsOn.all(d, d.name != r.name && "
                "self.replicatedJobs.exists(x, x.name == d.name)))",
                "replicatedJobs[].dependsOn must name another replicatedJob of the template",
                field_path=".replicatedJobs",
            ),
            cel_rule(
                "!has(self.successPolicy) || !has(self.successPolicy.targetReplicatedJobs) "
                "|| self.successPolicy.targetReplicatedJobs.all(t, has(self.replicatedJobs) "
                "&& self.replicatedJobs.exists(r, r.name == t))",
                "successPolicy.targetReplicatedJobs must name replicatedJobs of the template",
                field_path=".successPolicy.targetReplicatedJobs",
            ),
        )
    )

    replicated_jobs: list[ReplicatedJob] = Field(
        default_factory=list,
        max_length=MAX_REPLICATED_JOBS,
        json_schema_extra=list_map("name"),
    )
    """The replicatedJobs; names are unique."""
    network: JobSetNetwork | None = Field(None, json_schema_extra=immutable("network"))
    """Headless service and DNS settings. Immutable."""
    success_policy: JobSetSuccessPolicy | None = Field(
        None, json_schema_extra=immutable("successPolicy")
    )
    """When the JobSet counts as succeeded (default: all Jobs complete). Immutable."""
    failure_policy: FailurePolicy | None = Field(None, json_schema_extra=immutable("failurePolicy"))
    """When the JobSet is restarted or failed after a Job fails (default: fail at once).
    Immutable."""
    startup_policy: StartupPolicy | None = Field(None, json_schema_extra=immutable("startupPolicy"))
    """Start order of the replicatedJobs (deprecated: use dependsOn). Immutable."""
    suspend: bool | None = None
    """Suspend the JobSet (the TrainJob's suspend takes precedence)."""
    coordinator: Coordinator | None = None
    """The pod announced to every pod as the coordinator."""
    managed_by: str | None = Field(None, max_length=63)
    """Controller of the JobSet."""
    ttl_seconds_after_finished: int | None = Field(None, ge=0)
    """Delete the JobSet this many seconds after it finished."""
    volume_claim_policies: list[VolumeClaimPolicy] | None = Field(
        None,
        max_length=50,
        json_schema_extra={"x-kubernetes-list-type": "atomic", **immutable("volumeClaimPolicies")},
    )
    """PersistentVolumeClaims created for the JobSet. Immutable."""
