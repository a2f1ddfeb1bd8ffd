"""The scheduler loop's pure half: node filtering, foreign usage, the node-selector file, the
operator context, and the mapping of cached job objects to ``JobView`` and back to status.

``FakePlugin`` and the raw-object builders here are shared with ``test_loop_runner``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lattice.api.constants import Resource as CrdResource
from lattice.clock import FakeClock
from lattice.config import Settings
from lattice.frameworks.base import Demand, InvalidJob, OperatorContext, Problem
from lattice.kube.resources import PRIORITY_CLASSES, Resource
from lattice.primitives.objects import Obj
from lattice.runtime.informer import Informer
from lattice.runtime.projections import keep_raw, pod_info
from lattice.scheduler.core import (
    Decision,
    JobView,
    PodDemand,
    SchedulerConfig,
    Stage,
    Strategy,
    WaitReason,
)
from lattice.scheduler.loop import (
    ContextSource,
    Invalid,
    format_time,
    job_view,
    parse_node_selector,
    parse_time,
    read_node_selector,
    scheduler_config,
    status_fields,
    utc_now,
)
from lattice.scheduler.loop.snapshot import status_patch, waiting_since, with_status

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ts(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --------------------------------------------------------------------------- shared fakes


class FakePlugin:
    """A minimal ``JobPlugin``: the demand is read straight from ``spec``.

    spec keys: ``min``, ``max``, ``units`` (per replica), ``fixed`` (list), ``priority``,
    ``suspend``, ``names`` (the fixed pods' children) and ``prefix`` (the replicas');
    ``invalid: true`` makes ``parse`` raise ``InvalidJob``.
    """

    def __init__(
        self, kind: str = "FakeJob", *, scheduling_path: tuple[str, ...] = ("status",)
    ) -> None:
        self._resource = CrdResource(
            group="example.com", version="v1", kind=kind, plural=kind.lower() + "s"
        )
        self._path = scheduling_path

    @property
    def resource(self) -> CrdResource:
        return self._resource

    @property
    def kube_resource(self) -> Resource:
        r = self._resource
        return Resource(r.group, r.version, r.plural, r.kind)

    @property
    def scheduling_path(self) -> tuple[str, ...]:
        return self._path

    @property
    def exec_path(self) -> tuple[str, ...]:
        return ("status", "execStatus")

    def parse(self, obj: Mapping[str, Any], ctx: OperatorContext) -> Mapping[str, Any]:
        spec = obj.get("spec") or {}
        if spec.get("invalid"):
            raise InvalidJob([Problem("spec.invalid", "must not be set")])
        return spec

    def demand(self, job: Mapping[str, Any], ctx: OperatorContext) -> Demand:
        return Demand(
            priority=int(job.get("priority", 0)),
            min_size=int(job.get("min", 1)),
            max_size=int(job.get("max", 1)),
            fixed_pods=tuple(job.get("fixed", ())),
            replica_units=int(job.get("units", 1)),
            suspended=bool(job.get("suspend", False)),
            preemptible_within_priority=bool(job.get("preemptible", False)),
            fixed_names=tuple(job.get("names", ())),
            replica_prefix=str(job.get("prefix", "")),
        )

    def run_policy(self, job: Any) -> Any:
        raise NotImplementedError

    def children(self, job: Any, *, size: int, ctx: OperatorContext) -> Any:
        raise NotImplementedError

    @property
    def preempted_condition(self) -> str:
        return "Running"

    def progress(
        self, job: Any, *, size: int, pods: Sequence[Any], others: Mapping[str, Any]
    ) -> Any:
        raise NotImplementedError


def job_obj(
    name: str,
    *,
    kind: str = "FakeJob",
    namespace: str = "ns",
    created: float = -60,
    status: Obj | None = None,
    **spec: Any,
) -> Obj:
    obj: Obj = {
        "apiVersion": "example.com/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": ts(created),
        },
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def node_obj(
    name: str,
    *,
    gpus: int | None = 8,
    ready: bool = True,
    unschedulable: bool = False,
    taints: Sequence[tuple[str, str] | tuple[str, str, str]] = (),
    labels: Mapping[str, str] | None = None,
    rv: str = "1",
) -> Obj:
    allocatable: Obj = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name, "labels": dict(labels or {}), "resourceVersion": rv},
        "spec": {
            "unschedulable": unschedulable,
            "taints": [
                {"key": t[0], "effect": t[-1], **({"value": t[1]} if len(t) == 3 else {})}
                for t in taints
            ],
        },
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def foreign_obj(
    name: str, node: str, requests: Mapping[str, str], *, phase: str = "Running"
) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "other"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": dict(requests)}}],
        },
        "status": {"phase": phase},
    }


def pod_obj(
    name: str,
    *,
    job: str,
    kind: str = "FakeJob",
    phase: str = "Pending",
    created: float = -30,
    unschedulable_since: float | None = None,
    deleting: bool = False,
    rv: str = "1",
    node: str | None = None,
    requests: Mapping[str, str] | None = None,
) -> Obj:
    conditions: list[Obj] = []
    if unschedulable_since is not None:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": ts(unschedulable_since),
            }
        )
    meta: Obj = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": ts(created),
        "labels": {"lattice.breezeml.ai/managed": "true"},
        "ownerReferences": [
            {
                "apiVersion": "example.com/v1",
                "kind": kind,
                "name": job,
                "uid": f"uid-{job}",
                "controller": True,
            }
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = ts(0)
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": dict(requests or {})}}]}
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase, "conditions": conditions},
    }


GPU = OperatorContext(scheduling_unit="nvidia.com/gpu")
NODE = OperatorContext(scheduling_unit="node")


# --------------------------------------------------------------------------- node selector


def test_node_selector_lines_comments_and_blanks() -> None:
    text = "# pool of GPU nodes\n\n  pool = gpu \nzone=eu-1\nempty=\n# trailing\n"
    assert parse_node_selector(text, source="sel") == (
        ("pool", "gpu"),
        ("zone", "eu-1"),
        ("empty", ""),
    )


@pytest.mark.parametrize(
    ("text", "line", "rule"),
    [
        pytest.param("pool=gpu\njust-a-key\n", 2, "expected key=value", id="no equals"),
        pytest.param("=gpu\n", 1, "must not be empty", id="empty key"),
        pytest.param("# c\n\nmy pool=gpu\n", 3, "must not contain whitespace", id="space"),
        pytest.param("pool=a\npool=b\n", 2, "already set on line 1", id="duplicate"),
    ],
)
def test_malformed_node_selector_names_file_line_and_rule(
    tmp_path: Path, text: str, line: int, rule: str
) -> None:
    path = tmp_path / "selector"
    path.write_text(text)
    with pytest.raises(ValueError, match=rule) as info:
        read_node_selector(str(path))
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_missing_node_selector_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "absent"
    with pytest.raises(ValueError, match="cannot read the node-selector file"):
        ContextSource(Settings(node_selector_path=str(path)))
    assert read_node_selector(None) == ()
    assert read_node_selector("") == ()


def _raw_informer(resource: Resource, items: Sequence[Obj]) -> Informer[Obj]:
    informer: Informer[Obj] = Informer(
        client=None,  # type: ignore[arg-type]  # never run: the store is filled directly
        resource=resource,
        transform=keep_raw,
        clock=FakeClock(),
    )
    for item in items:
        informer.on_event("ADDED", item)
    return informer


def test_context_source_reads_selector_once_and_caches_per_call(tmp_path: Path) -> None:
    path = tmp_path / "selector"
    path.write_text("pool=gpu\n")
    classes = _raw_informer(
        PRIORITY_CLASSES,
        [
            {"metadata": {"name": "high"}, "value": 1000},
            {"metadata": {"name": "low"}, "value": -5, "globalDefault": True},
            {"metadata": {"name": "also-default"}, "value": 10, "globalDefault": True},
        ],
    )
    runtime = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime")
    cluster_runtime = Resource(
        "trainer.kubeflow.org",
        "v1alpha1",
        "clustertrainingruntimes",
        "ClusterTrainingRuntime",
        namespaced=False,
    )
    rt = {"metadata": {"name": "torch", "namespace": "team"}, "spec": {}}
    crt = {"metadata": {"name": "torch-distributed"}, "spec": {}}
    source = ContextSource(
        Settings(node_selector_path=str(path), scheduling_unit="nvidia.com/gpu"),
        priority_classes=classes,
        runtimes=[_raw_informer(runtime, [rt]), _raw_informer(cluster_runtime, [crt])],
    )
    path.write_text("pool=cpu\n")  # read once, at construction
    ctx = source.current()
    assert ctx.node_selector == (("pool", "gpu"),)
    assert ctx.scheduling_unit == "nvidia.com/gpu"
    assert not ctx.node_mode
    assert ctx.priority_classes == {"high": 1000, "low": -5, "also-default": 10}
    assert ctx.default_priority == -5  # several defaults: the lowest wins
    assert ctx.runtimes == {
        "TrainingRuntime/team/torch": rt,
        "ClusterTrainingRuntime//torch-distributed": crt,
    }
    classes.on_event("DELETED", {"metadata": {"name": "low"}})
    classes.on_event("DELETED", {"metadata": {"name": "also-default"}})
    assert source.current().default_priority == 0


def test_scheduler_config_from_settings() -> None:
    config = scheduler_config(
        Settings(
            queueing_strategy="LeastAttainedService",
            resize_interval=30,
            pending_timeout=120,
            cooldown_base=1.5,
            cooldown_max=600,
            slowdown_limit=2.5,
        )
    )
    assert config.strategy == Strategy.LEAST_ATTAINED_SERVICE
    assert config.resize_interval == timedelta(seconds=30)
    assert config.pending_timeout == timedelta(minutes=2)
    assert config.cooldown_base == timedelta(seconds=2)  # whole seconds: cooldownTime persists
    assert config.cooldown_max == timedelta(minutes=10)
    assert config.slowdown_limit == 2.5


def test_operator_defaults_are_the_core_defaults() -> None:
    # `lattice simulate` evaluates SchedulerConfig(); the operator must run the same policy.
    assert scheduler_config(Settings()) == SchedulerConfig()


# --------------------------------------------------------------------------- time


def test_time_round_trip_keeps_microseconds() -> None:
    assert parse_time("2026-01-01T00:00:05Z") == at(5)
    assert parse_time("2026-01-01T01:00:05+01:00") == at(5)
    assert parse_time("2026-01-01T00:00:05.250000Z") == at(5.25)
    assert parse_time("garbage") is None
    assert parse_time(None) is None
    assert parse_time("") is None
    assert format_time(at(5)) == "2026-01-01T00:00:05.000000Z"
    assert format_time(at(5.000001)) == "2026-01-01T00:00:05.000001Z"
    assert parse_time(format_time(at(5.75))) == at(5.75)
    assert format_time(None) is None
    assert utc_now(at(5.75)) == at(5.75)
    with pytest.raises(ValueError, match="aware"):
        utc_now(datetime(2026, 1, 1))  # naive on purpose


# --------------------------------------------------------------------------- jobs


def test_new_job_takes_demand_and_defaults() -> None:
    plugin = FakePlugin()
    obj = job_obj("a", created=-60, min=2, max=4, units=8, priority=7, fixed=[1])
    view = job_view("FakeJob", plugin, obj, [], GPU)
    assert view == JobView(
        key="FakeJob/ns/a",
        kind="FakeJob",
        namespace="ns",
        name="a",
        creation_time=at(-60),
        priority=7,
        min_size=2,
        max_size=4,
        fixed_pods=(1,),
        replica_units=8,
        # A plugin that gives units only: each pod asks for its units of the scheduling unit.
        fixed_demands=(PodDemand(requests=(("nvidia.com/gpu", 1), ("pods", 1)), units=1),),
        replica_demand=PodDemand(requests=(("nvidia.com/gpu", 8), ("pods", 1)), units=8),
    )


def test_scheduler_state_is_read_from_the_plugin_path() -> None:
    state = {
        "stage": "Running",
        "currentSize": 3,
        "submitTime": ts(-50),
        "queuedTime": ts(-40),
        "requeueTime": ts(-10),
        "cooldownTime": ts(-30),
        "requeueCount": 2,
        "lastResizeTime": ts(-20),
        "attainedService": 120,
        "serviceUpdatedTime": ts(-5),
        "queuePosition": 1,
    }
    nested = FakePlugin("Nested", scheduling_path=("status", "lattice"))
    view = job_view("Nested", nested, job_obj("a", status={"lattice": state}), [], GPU)
    assert isinstance(view, JobView)
    assert (view.stage, view.current_size, view.requeue_count) == ("Running", 3, 2)
    assert view.submit_time == at(-50)
    assert view.queued_time == at(-40)
    assert view.requeue_time == at(-10)
    assert view.cooldown_time == at(-30)
    assert view.last_resize_time == at(-20)
    assert view.attained_service == 120.0
    assert view.service_updated_at == at(-5)
    assert not view.finished
    # The same block at the wrong path is not read.
    flat = job_view("FakeJob", FakePlugin(), job_obj("a", status={"lattice": state}), [], GPU)
    assert isinstance(flat, JobView)
    assert flat.stage == Stage.NEW


def test_invalid_job_is_skipped_with_the_problems() -> None:
    view = job_view("FakeJob", FakePlugin(), job_obj("bad", invalid=True), [], GPU)
    assert view == Invalid(key="FakeJob/ns/bad", message="spec.invalid: must not be set")


@pytest.mark.parametrize(
    ("status", "meta", "finished"),
    [
        pytest.param({"stage": "Running"}, {}, False, id="running"),
        pytest.param({"stage": "Completed"}, {}, True, id="completed stage"),
        pytest.param({"stage": "Wrong"}, {}, False, id="wrong stage alone: judged again"),
        pytest.param(
            {
                "stage": "Wrong",
                "execStatus": {
                    "conditions": [
                        {"type": "Created", "status": "False", "reason": "XFailedValidation"}
                    ]
                },
            },
            {},
            True,
            id="shown invalid",
        ),
        pytest.param(
            {
                "stage": "Running",
                "execStatus": {"conditions": [{"type": "Succeeded", "status": "True"}]},
            },
            {},
            True,
            id="succeeded condition",
        ),
        pytest.param(
            {
                "stage": "Running",
                "execStatus": {"conditions": [{"type": "Failed", "status": "True"}]},
            },
            {},
            True,
            id="failed condition",
        ),
        pytest.param(
            {
                "stage": "Running",
                "execStatus": {"conditions": [{"type": "Failed", "status": "False"}]},
            },
            {},
            False,
            id="false condition",
        ),
        pytest.param({"stage": "Running"}, {"deletionTimestamp": ts(0)}, True, id="deleting"),
    ],
)
def test_finished(status: Obj, meta: Obj, finished: bool) -> None:
    obj = job_obj("a", status=status)
    obj["metadata"].update(meta)
    view = job_view("FakeJob", FakePlugin(), obj, [], GPU)
    assert isinstance(view, JobView)
    assert view.finished is finished


def test_a_wrong_job_no_longer_shown_invalid_is_read_as_new() -> None:
    """Issue 23: an invalid job is judged again once fixed; the core re-checks it as new."""
    view = job_view("FakeJob", FakePlugin(), job_obj("a", status={"stage": "Wrong"}), [], GPU)
    assert isinstance(view, JobView)
    assert (view.stage, view.finished) == ("", False)


def test_pending_since_counts_only_pods_kube_scheduler_reports_unschedulable() -> None:
    pods = [
        pod_info(pod_obj("w0", job="a", phase="Running", created=-100)),
        pod_info(pod_obj("w1", job="a", phase="Pending", created=-90)),  # pulling its image
        pod_info(pod_obj("w2", job="a", phase="Pending", created=-80, unschedulable_since=-40)),
        pod_info(
            pod_obj("w3", job="a", created=-90, unschedulable_since=-70, deleting=True)
        ),  # going: not pending
        pod_info(pod_obj("w4", job="a", phase="Failed", created=-95, unschedulable_since=-90)),
        pod_info(pod_obj("w5", job="a", phase="Pending", created=-60, unschedulable_since=-50)),
    ]
    running = job_obj("a", status={"stage": "Running", "currentSize": 6})
    view = job_view("FakeJob", FakePlugin(), running, pods, GPU)
    assert isinstance(view, JobView)
    assert view.pending_since == at(-50)
    # No unschedulable pod (an image pull, container creation), or not running: None.
    view = job_view("FakeJob", FakePlugin(), running, pods[:2], GPU)
    assert isinstance(view, JobView)
    assert view.pending_since is None
    waiting = job_obj("a", status={"stage": "Waiting"})
    view = job_view("FakeJob", FakePlugin(), waiting, pods, GPU)
    assert isinstance(view, JobView)
    assert view.pending_since is None


# --------------------------------------------------------------------------- status


def _decision(**fields: Any) -> Decision:
    base: dict[str, Any] = {
        "key": "FakeJob/ns/a",
        "stage": "Running",
        "size": 2,
        "submit_time": at(0),
        "queued_time": at(0),
        "requeue_time": None,
        "cooldown_time": None,
        "requeue_count": 0,
        "last_resize_time": at(10),
        "attained_service": 0.0,
        "service_updated_at": at(10),
        "admitted_time": at(10),
        "queue_position": 1,
        "reason": "Admitted with 2 (min 1, max 2)",
    }
    base.update(fields)
    return Decision(**base)


def test_status_fields_write_every_scheduler_field() -> None:
    view = job_view("FakeJob", FakePlugin(), job_obj("a", status={"stage": "Waiting"}), [], GPU)
    assert isinstance(view, JobView)
    fields = status_fields(_decision(), view=view, previous={}, now=at(10))
    assert fields == {
        "stage": "Running",
        "currentSize": 2,
        "submitTime": ts(0),
        "queuedTime": ts(0),
        "requeueTime": None,
        "cooldownTime": None,
        "queuePosition": 1,
        "requeueCount": 0,
        "attainedService": 0.0,
        "serviceUpdatedTime": ts(10),
        "lastExecTime": ts(10),
        "lastResizeTime": ts(10),
        "admittedTime": ts(10),
        "lastDecision": "Admitted with 2 (min 1, max 2)",
        "placement": None,
        "priority": 0,
        "minSize": 1,
        "maxSize": 1,
        "waitingSince": None,
        "reason": None,
        "message": None,
    }


def _waiting(**fields: Any) -> Decision:
    base: dict[str, Any] = {
        "stage": "Waiting",
        "size": 0,
        "admitted_time": None,
        "wait_reason": WaitReason.INSUFFICIENT_CAPACITY,
        "wait_message": "needs 2 units, 0 free",
    }
    return _decision(**{**base, **fields})


def _view_of(status: Mapping[str, Any]) -> JobView:
    view = job_view("FakeJob", FakePlugin(), job_obj("a", status=dict(status)), [], GPU)
    assert isinstance(view, JobView)
    return view


def test_a_held_back_job_gets_its_code_and_message_and_a_running_one_clears_them() -> None:
    view = _view_of({"stage": "Waiting", "queuedTime": ts(0), "submitTime": ts(0)})
    fields = status_fields(_waiting(), view=view, previous={}, now=at(10))
    assert (fields["reason"], fields["message"]) == (
        "InsufficientCapacity",
        "needs 2 units, 0 free",
    )
    fields = status_fields(_decision(), view=view, previous={}, now=at(10))
    assert (fields["reason"], fields["message"]) == (None, None)
    # A stage the pass passes through (e.g. a finished job): the fields are left as they are.
    done = _decision(stage="Completed", size=0, wait_reason=None, wait_message="")
    fields = status_fields(done, view=_view_of({"stage": "Completed"}), previous={}, now=at(10))
    assert "reason" not in fields
    assert "message" not in fields


@pytest.mark.parametrize(
    ("before", "previous", "decision", "since"),
    [
        # New: it enters waiting now.
        ({}, {}, _waiting(), ts(10)),
        # Waiting: kept.
        (
            {"stage": "Waiting", "queuedTime": ts(0)},
            {"waitingSince": ts(3)},
            _waiting(),
            ts(3),
        ),
        # Waiting, written before the field existed: from its queued time.
        ({"stage": "Waiting", "queuedTime": ts(1)}, {}, _waiting(), ts(1)),
        # Stopped (its older queuedTime is kept): now.
        (
            {"stage": "Running", "currentSize": 2, "queuedTime": ts(0)},
            {},
            _waiting(wait_reason=WaitReason.PREEMPTED),
            ts(10),
        ),
        # Cooldown over: now.
        ({"stage": "RequeueCooldown", "queuedTime": ts(0)}, {}, _waiting(), ts(10)),
        # Suspended (no queued time): unset.
        (
            {"stage": "Waiting", "queuedTime": ts(0)},
            {"waitingSince": ts(3)},
            _waiting(queued_time=None, wait_reason=WaitReason.SUSPENDED),
            None,
        ),
        # Admitted: cleared.
        ({"stage": "Waiting", "queuedTime": ts(0)}, {"waitingSince": ts(3)}, _decision(), None),
        # Cooling down: unset.
        (
            {"stage": "Running", "currentSize": 2},
            {},
            _waiting(stage="RequeueCooldown", wait_reason=WaitReason.PODS_PENDING_TIMEOUT),
            None,
        ),
    ],
)
def test_waiting_since_is_set_on_entering_the_wait_and_kept_while_it_lasts(
    before: dict[str, Any], previous: dict[str, Any], decision: Decision, since: str | None
) -> None:
    view = _view_of(before)
    assert waiting_since(decision, view=view, previous=previous, now=at(10)) == since
    fields = status_fields(decision, view=view, previous=previous, now=at(10))
    assert fields["waitingSince"] == since


def test_last_exec_time_only_moves_when_size_leaves_zero() -> None:
    status = {"stage": "Running", "currentSize": 1, "lastExecTime": ts(-100)}
    view = job_view("FakeJob", FakePlugin(), job_obj("a", status=status), [], GPU)
    assert isinstance(view, JobView)
    fields = status_fields(_decision(size=2), view=view, previous=status, now=at(10))
    assert fields["lastExecTime"] == ts(-100)
    fields = status_fields(_decision(size=0), view=view, previous=status, now=at(10))
    assert fields["lastExecTime"] == ts(-100)


class PinningPlugin(FakePlugin):
    """A ``PinsInputs`` plugin: the pin ConfigMap's ``data.min``/``data.max`` replace the spec's."""

    def pinned_name(self, obj: Mapping[str, Any]) -> str:
        return f"{obj['metadata']['name']}-pin"

    def pin(self, obj: Mapping[str, Any], ctx: OperatorContext) -> Obj | None:
        return None

    def parse_pinned(
        self, obj: Mapping[str, Any], pinned: Mapping[str, Any], ctx: OperatorContext
    ) -> Mapping[str, Any]:
        spec = dict(self.parse(obj, ctx))
        spec.update({k: int(v) for k, v in (pinned.get("data") or {}).items()})
        return spec


def test_a_pinned_job_is_sized_from_its_pin_not_from_the_live_inputs() -> None:
    plugin = PinningPlugin()
    obj = job_obj("a", min=4, max=8)
    pin = {"metadata": {"name": "a-pin"}, "data": {"min": "2", "max": "2"}}
    live = job_view("FakeJob", plugin, obj, [], GPU)
    pinned = job_view("FakeJob", plugin, obj, [], GPU, pinned=pin)
    assert isinstance(live, JobView)
    assert isinstance(pinned, JobView)
    assert (live.min_size, live.max_size) == (4, 8)
    assert (pinned.min_size, pinned.max_size) == (2, 2)


class BrokenPlugin(FakePlugin):
    """A plugin with a bug on odd input: ``parse`` raises something it did not plan for."""

    def parse(self, obj: Mapping[str, Any], ctx: OperatorContext) -> Mapping[str, Any]:
        raise AttributeError("'int' object has no attribute 'get'")


def test_a_plugin_crash_on_one_job_makes_it_invalid_instead_of_failing_the_pass() -> None:
    view = job_view("FakeJob", BrokenPlugin(), job_obj("odd"), [], GPU)
    assert isinstance(view, Invalid)
    assert "AttributeError" in view.message


def test_with_status_is_the_object_the_status_patch_leaves() -> None:
    """What a pass reads back for a write still in flight."""
    obj: Obj = {
        "metadata": {"name": "a", "resourceVersion": "7", "uid": "u"},
        "spec": {"min": 1},
        "status": {"conditions": [1], "scheduling": {"stage": "Waiting", "queuePosition": 3}},
    }
    fields = {"stage": "Running", "currentSize": 2, "queuePosition": None}
    patch = status_patch(("status", "scheduling"), fields, resource_version="7")
    out = with_status(obj, ("status", "scheduling"), fields, version="pending-1")
    assert out["status"] == {
        "conditions": [1],
        "scheduling": {"stage": "Running", "currentSize": 2},
    }
    assert out["status"]["scheduling"] == {
        k: v for k, v in patch["status"]["scheduling"].items() if v is not None
    }
    assert out["metadata"] == {"name": "a", "resourceVersion": "pending-1", "uid": "u"}
    assert out["spec"] is obj["spec"]  # untouched branches are shared
    assert obj["status"]["scheduling"] == {"stage": "Waiting", "queuePosition": 3}
    assert obj["metadata"]["resourceVersion"] == "7"
    # A missing block is created.
    bare = with_status({"metadata": {}}, ("status",), {"stage": "Waiting"}, version="v")
    assert bare == {"metadata": {"resourceVersion": "v"}, "status": {"stage": "Waiting"}}
