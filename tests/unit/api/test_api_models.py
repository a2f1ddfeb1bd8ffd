"""Model behaviour: defaults, operator-side defaults, time handling, tolerance of unknown fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from lattice.api import (
    CleanPodPolicy,
    ClusterTrainingRuntime,
    KubeflowJobStatus,
    MPIJob,
    MXJob,
    RestartPolicy,
    SchedulingStatus,
    Stage,
    TrainingJob,
    TrainingJobStatus,
    TrainJob,
    format_micro_time,
    format_time,
    parse_time,
)
from lattice.api.constants import ALL_RESOURCES, MPIJOB, TRAININGJOB
from lattice.api.mxjob import canonical_replica_type

POD = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_trainingjob_defaults() -> None:
    job = TrainingJob.model_validate(
        {"metadata": {"name": "j"}, "spec": {"replicaSpecs": {"template": POD}}}
    )
    spec = job.spec
    assert (spec.min_size, spec.max_size, spec.priority) == (1, 1, 0)
    assert spec.framework == "pytorch"
    assert spec.inject_lattice is False
    assert spec.run_policy.clean_pod_policy == CleanPodPolicy.ALL
    assert spec.replica_specs.restart_policy == RestartPolicy.NEVER
    assert spec.replica_specs.replicas == 1
    assert job.api_version == "breezeml.ai/v1"
    assert job.kind == "TrainingJob"


def test_mpijob_defaults_including_operator_side_ones() -> None:
    job = MPIJob.model_validate(
        {
            "metadata": {"name": "pi"},
            "spec": {
                "mpiReplicaSpecs": {"Launcher": {"template": POD}, "Worker": {"template": POD}}
            },
        }
    )
    spec = job.spec
    assert spec.slots_per_worker == 1
    assert spec.run_launcher_as_worker is False
    assert spec.ssh_auth_mount_path == "/root/.ssh"
    assert spec.launcher_creation_policy == "AtStartup"
    assert spec.mpi_implementation == "OpenMPI"
    assert spec.run_policy.clean_pod_policy == CleanPodPolicy.NONE
    assert spec.run_policy.suspend is False
    assert spec.run_policy.managed_by is None
    assert spec.launcher is not None
    assert spec.worker is not None
    assert (spec.launcher.replicas, spec.launcher.restart_policy) == (1, RestartPolicy.ON_FAILURE)
    assert (spec.worker.replicas, spec.worker.restart_policy) == (0, RestartPolicy.NEVER)


def test_mpijob_keeps_explicit_replica_values() -> None:
    job = MPIJob.model_validate(
        {
            "spec": {
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": POD},
                    "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": POD},
                }
            }
        }
    )
    assert job.spec.worker is not None
    assert job.spec.launcher is not None
    assert job.spec.launcher.restart_policy == RestartPolicy.NEVER
    assert (job.spec.worker.replicas, job.spec.worker.restart_policy) == (3, "OnFailure")


def test_mxjob_defaults() -> None:
    job = MXJob.model_validate({"spec": {"mxReplicaSpecs": {"Worker": {"template": POD}}}})
    assert job.spec.job_mode == "MXTrain"
    worker = job.spec.mx_replica_specs["Worker"]
    assert (worker.replicas, worker.restart_policy) == (1, RestartPolicy.NEVER)
    assert job.spec.run_policy.clean_pod_policy == CleanPodPolicy.NONE


def test_trainjob_defaults_and_int_or_string() -> None:
    job = TrainJob.model_validate(
        {"spec": {"runtimeRef": {"name": "torch"}, "trainer": {"numProcPerNode": "auto"}}}
    )
    assert job.spec.runtime_ref.api_group == "trainer.kubeflow.org"
    assert job.spec.runtime_ref.kind == "ClusterTrainingRuntime"
    assert job.spec.suspend is False
    assert job.spec.managed_by == "trainer.kubeflow.org/trainjob-controller"
    assert job.spec.trainer is not None
    assert job.spec.trainer.num_proc_per_node == "auto"
    numeric = TrainJob.model_validate(
        {"spec": {"runtimeRef": {"name": "mpi"}, "trainer": {"numProcPerNode": 4}}}
    )
    assert numeric.spec.trainer is not None
    assert numeric.spec.trainer.num_proc_per_node == 4
    assert numeric.to_dict()["spec"]["trainer"]["numProcPerNode"] == 4


def test_runtime_defaults_and_jobset_fields() -> None:
    runtime = ClusterTrainingRuntime.model_validate(
        {
            "metadata": {"name": "mpi"},
            "spec": {
                "mlPolicy": {"mpi": {}},
                "podGroupPolicy": {"coscheduling": {}},
                "template": {
                    "spec": {
                        "failurePolicy": {"maxRestarts": 3},
                        "network": {"enableDNSHostnames": True},
                        "replicatedJobs": [{"name": "node", "template": {"spec": {}}}],
                    }
                },
            },
        }
    )
    spec = runtime.spec
    assert spec.ml_policy is not None
    assert spec.ml_policy.mpi is not None
    mpi = spec.ml_policy.mpi
    assert (mpi.num_proc_per_node, mpi.mpi_implementation) == (1, "OpenMPI")
    assert (mpi.ssh_auth_mount_path, mpi.run_launcher_as_node) == ("/root/.ssh", False)
    assert spec.pod_group_policy is not None
    assert spec.pod_group_policy.coscheduling is not None
    assert spec.pod_group_policy.coscheduling.schedule_timeout_seconds == 60
    assert spec.template.spec.replicated_jobs[0].replicas == 1
    assert spec.template.spec.replicated_jobs[0].group_name == "default"
    assert spec.template.spec.network is not None
    assert spec.template.spec.network.enable_dns_hostnames is True
    failure = spec.template.spec.failure_policy
    assert failure is not None
    assert (failure.max_restarts, failure.restart_strategy) == (3, "Recreate")
    dumped = runtime.to_dict()["spec"]["template"]["spec"]
    assert dumped["failurePolicy"] == {"maxRestarts": 3, "restartStrategy": "Recreate"}
    assert dumped["network"] == {"enableDNSHostnames": True}


def test_unknown_spec_fields_are_ignored_but_metadata_is_preserved() -> None:
    raw: dict[str, Any] = {
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "u-1",
            "labels": {"a": "b"},
            "managedFields": [{"manager": "kubectl"}],
            "creationTimestamp": "2026-01-02T03:04:05Z",
        },
        "spec": {"replicaSpecs": {"template": POD}, "fromTheFuture": 1},
    }
    job = TrainingJob.model_validate(raw)
    dumped = job.to_dict()
    assert "fromTheFuture" not in dumped["spec"]
    assert dumped["metadata"]["managedFields"] == [{"manager": "kubectl"}]
    assert dumped["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
    assert job.metadata.creation_timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert job.metadata.uid == "u-1"


def test_scheduling_status_is_flat_on_trainingjob_and_nested_on_kubeflow_kinds() -> None:
    fields = set(SchedulingStatus.model_fields)
    assert {
        "stage",
        "current_size",
        "submit_time",
        "queued_time",
        "requeue_time",
        "cooldown_time",
        "queue_position",
        "requeue_count",
        "attained_service",
        "service_updated_time",
        "last_exec_time",
        "completion_time",
        "last_resize_time",
        "admitted_time",
        "last_decision",
        "reason",
        "message",
        "placement",
        "priority",
        "min_size",
        "max_size",
        "waiting_since",
    } == fields
    assert fields <= set(TrainingJobStatus.model_fields)
    assert {"exec_status", "last_exec_time", "completion_time"} <= set(
        TrainingJobStatus.model_fields
    )
    status = KubeflowJobStatus.model_validate(
        {"conditions": [], "lattice": {"stage": "Waiting", "queuePosition": 2}}
    )
    assert status.lattice is not None
    assert status.lattice.stage == Stage.WAITING
    assert status.lattice.queue_position == 2
    placed = KubeflowJobStatus.model_validate({"lattice": {"placement": {"pi-worker-0": "n1"}}})
    assert placed.lattice is not None
    assert placed.lattice.placement == {"pi-worker-0": "n1"}


def test_status_round_trips_scheduler_times_as_micro_times() -> None:
    now = datetime(2026, 1, 1, 12, 30, 15, 123456, tzinfo=UTC)
    status = TrainingJobStatus(
        stage=Stage.RUNNING,
        current_size=3,
        submit_time=now,
        completion_time=now,
        attained_service=12.5,
    )
    wire = status.to_dict()
    assert wire == {
        "stage": "Running",
        "currentSize": 3,
        "submitTime": "2026-01-01T12:30:15.123456Z",
        "completionTime": "2026-01-01T12:30:15Z",
        "attainedService": 12.5,
    }
    parsed = TrainingJobStatus.model_validate(wire)
    assert parsed.submit_time == now
    assert parsed.completion_time == now.replace(microsecond=0)
    assert TrainingJobStatus.model_validate({"stage": ""}).stage == Stage.INIT


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC), id="zulu"),
        pytest.param(
            "2026-01-01T00:00:00.999999Z",
            datetime(2026, 1, 1, 0, 0, 0, 999999, tzinfo=UTC),
            id="fraction",
        ),
        pytest.param("2026-01-01T02:00:00+02:00", datetime(2026, 1, 1, tzinfo=UTC), id="offset"),
        pytest.param("2026-01-01T00:00:00", datetime(2026, 1, 1, tzinfo=UTC), id="naive-is-utc"),
    ],
)
def test_parse_time(text: str, expected: datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected
    assert parsed.tzinfo == UTC


def test_format_time() -> None:
    local = datetime(2026, 1, 1, 5, 0, 0, 500000, tzinfo=timezone(timedelta(hours=5)))
    assert format_time(local) == "2026-01-01T00:00:00Z"
    assert format_time(parse_time("2026-06-30T23:59:59Z")) == "2026-06-30T23:59:59Z"
    assert format_micro_time(local) == "2026-01-01T00:00:00.500000Z"
    assert parse_time("2026-06-30T23:59:59.000123Z").microsecond == 123


def test_resources() -> None:
    assert TRAININGJOB.api_version == "breezeml.ai/v1"
    assert MPIJOB.crd_name == "mpijobs.kubeflow.org"
    assert [r.namespaced for r in ALL_RESOURCES] == [True, True, True, True, True, False]


def test_mxjob_replica_keys_are_matched_ignoring_case() -> None:
    """training-operator v1.7 normalised ``worker:`` to ``Worker``; so does parsing."""
    pod = {"spec": {"containers": [{"name": "mxnet", "image": "mx"}]}}
    job = MXJob.model_validate(
        {
            "metadata": {"name": "mx"},
            "spec": {
                "mxReplicaSpecs": {
                    "scheduler": {"template": pod},
                    "SERVER": {"template": pod},
                    "worker": {"replicas": 3, "template": pod},
                    "tunertracker": {"template": pod},
                }
            },
        }
    )
    specs = job.spec.mx_replica_specs
    assert list(specs) == ["Scheduler", "Server", "Worker", "TunerTracker"]
    assert specs["Worker"].replicas == 3
    assert job.to_dict()["spec"]["mxReplicaSpecs"].keys() == specs.keys()


def test_mxjob_replica_type_twice_in_two_cases_is_refused() -> None:
    pod = {"spec": {"containers": [{"name": "mxnet", "image": "mx"}]}}
    raw = {"spec": {"mxReplicaSpecs": {"Worker": {"template": pod}, "worker": {"template": pod}}}}
    with pytest.raises(ValidationError, match="names a replica type twice"):
        MXJob.model_validate(raw)


def test_unknown_mxjob_replica_type_is_kept_for_the_schema_to_refuse() -> None:
    assert canonical_replica_type("chief") == "chief"
    assert canonical_replica_type("tunerserver") == "TunerServer"
