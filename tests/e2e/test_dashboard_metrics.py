"""The Grafana dashboard only uses metrics a running operator exports.

Every PromQL expression in ``deploy/dashboards/lattice.json`` (panel targets, and the metric of
each ``label_values`` variable query) is reduced to the metric names it selects. The operator then
runs (with leader election, so the leader gauge exists) and schedules one TrainingJob; its
``/metrics`` page must carry each of those names as a sample (``x_bucket``/``x_sum``/``x_count``
of a histogram ``x``, ``x_total`` of a counter, a gauge by its name).
"""

from __future__ import annotations

import json
import re
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_trainingjob_lifecycle import metrics_of
from tests.e2e.test_trainingjob_scheduling import GPU, STEP_TIMEOUT, World
from tests.support.builders import trainingjob
from tests.support.cluster import REPO, Cluster
from tests.support.wait import wait_for

DASHBOARD = REPO / "deploy" / "dashboards" / "lattice.json"

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_WORD = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
    | {"unless", "offset", "atan2", "inf", "nan", "Inf", "NaN"}
)
_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords, labels and durations
    removed)."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPING.sub("", text)
    names = set()
    for match in _WORD.finditer(text):
        word = match.group()
        if word in _KEYWORDS or text[match.end() :].lstrip().startswith("("):
            continue
        before = text[match.start() - 1] if match.start() else " "
        if before in "$." or before.isdigit():
            continue  # a Grafana variable, a number's fraction or a duration's unit
        names.add(word)
    return names


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def dashboard_metrics(path: Path = DASHBOARD) -> dict[str, set[str]]:
    """Metric name -> the expressions of the dashboard that use it."""
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    used: dict[str, set[str]] = {}
    for key, value in _walk(dashboard):
        if key == "expr" and isinstance(value, str):
            for name in metric_names(value):
                used.setdefault(name, set()).add(value)
        elif key == "definition" and isinstance(value, str):
            for name in _LABEL_VALUES.findall(value):
                used.setdefault(name, set()).add(value)
    return used


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (kind, stage) (lattice_jobs{stage=~"New|Waiting"})', {"lattice_jobs"}),
        (
            "histogram_quantile(0.99, sum by (name, le) "
            '(rate(workqueue_queue_duration_seconds_bucket{job=~"$job"}[$__rate_interval])))',
            {"workqueue_queue_duration_seconds_bucket"},
        ),
        (
            "sum(rate(a_sum[5m])) / sum(rate(a_count[5m])) > bool 0.5 and on (x) group_left (y) b",
            {"a_sum", "a_count", "b"},
        ),
        ('max(up{job="x"} offset 1h) or vector(0)', {"up"}),
    ],
)
def test_metric_names_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_dashboard_covers_what_the_issue_asks() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["uid"] == "lattice-operator"
    used = dashboard_metrics()
    for name in (
        "lattice_jobs",
        "lattice_capacity_units",
        "lattice_scheduler_decisions_total",
        "lattice_preemptions_total",
        "lattice_scheduler_pass_duration_seconds_bucket",
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "lattice_admission_wait_time_seconds_bucket",
        "lattice_pending_jobs",
        "lattice_admitted_jobs",
        "lattice_preempted_jobs_total",
        "lattice_evicted_jobs_total",
        "lattice_resizes_total",
    ):
        assert name in used, name
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"


def _exported(op: OperatorProcess) -> dict[str, str]:
    """Sample name -> the type of its family, from the operator's /metrics."""
    try:
        text = metrics_of(op)
    except (urllib.error.URLError, ConnectionError):
        return {}
    families = text_string_to_metric_families(text)
    return {s.name: family.type for family in families for s in family.samples}


def test_every_dashboard_metric_is_exported_by_a_running_operator(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    used = dashboard_metrics()
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(
        f"--scheduling-unit={GPU}",
        "--resize-interval=0",
        "--leader-elect",
        "--leader-election-namespace",
        namespace,
    )
    world = World(crds_installed, namespace)
    with explained(op):
        world.apply(trainingjob("one", min_size=2, max_size=4))
        world.expect({"one": 4}, what="one job is scheduled and runs")
        exported = wait_for(
            lambda: _exported(op),
            lambda seen: not set(used) - set(seen),
            timeout=STEP_TIMEOUT,
            interval=0.5,
            what="every dashboard metric on /metrics",
        )
        for name in used:
            if name.endswith("_bucket"):
                assert exported[name] == "histogram", f"{name} is not a histogram's bucket"
