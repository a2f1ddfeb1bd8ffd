"""The bottom layer: quantities, times, keys, paths and resource identity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from lattice.primitives.keys import kind_key, namespaced_key, object_key, owner_key, split_key
from lattice.primitives.paths import get_path
from lattice.primitives.quantity import parse_quantity, resource_units
from lattice.primitives.resources import Resource
from lattice.primitives.times import (
    format_micro_time,
    format_time,
    parse_opt_time,
    parse_time,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2", Decimal(2)),
        ("500m", Decimal("0.5")),
        ("1Gi", Decimal(1024**3)),
        ("1.5k", Decimal(1500)),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("1e3", Decimal(1000)),
        ("1E", Decimal(10**18)),
        ("+3", Decimal(3)),
        (7, Decimal(7)),
    ],
)
def test_parse_quantity_reads_the_apimachinery_grammar(text: object, want: Decimal) -> None:
    assert parse_quantity(text) == want


@pytest.mark.parametrize("text", ["", "abc", "1Kb", "1KiB", "1e", "e3", "1..0", "1e99999999"])
def test_parse_quantity_names_a_malformed_quantity(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("name", "quantity", "want"),
    [
        ("cpu", "500m", 500),
        ("cpu", "0.0001", 1),  # MilliValue rounds up
        ("cpu", 2, 2000),
        ("memory", "1Gi", 1024**3),
        ("memory", "1500m", 2),  # Value rounds up
        ("nvidia.com/gpu", "8", 8),
    ],
)
def test_resource_units_match_kube_scheduler(name: str, quantity: object, want: int) -> None:
    assert resource_units(name, quantity) == want


def test_times_round_trip_and_normalise() -> None:
    t = datetime(2026, 1, 1, 1, 2, 3, 456789, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(t) == "2025-12-31T23:02:03Z"
    assert format_micro_time(t) == "2025-12-31T23:02:03.456789Z"
    assert parse_time("2025-12-31T23:02:03.456789Z") == t
    assert parse_time("2026-01-01T01:02:03.456789+02:00").tzinfo == UTC
    assert format_time(datetime(2026, 1, 1)) == "2026-01-01T00:00:00Z"  # naive means UTC


def test_parse_opt_time_is_lenient() -> None:
    assert parse_opt_time(None) is None
    assert parse_opt_time("") is None
    assert parse_opt_time("yesterday") is None
    assert parse_opt_time(3) is None
    assert parse_opt_time(datetime(2026, 1, 1)) == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_opt_time("2026-01-01T00:00:00Z") == datetime(2026, 1, 1, tzinfo=UTC)


def test_keys() -> None:
    assert object_key({"metadata": {"namespace": "ns", "name": "a"}}) == "ns/a"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"
    assert namespaced_key("", "node-1") == "node-1"
    assert split_key("ns/a") == ("ns", "a")
    assert split_key(namespaced_key("ns", "a")) == ("ns", "a")
    assert kind_key(kind="MPIJob", namespace="ns", name="a") == owner_key("MPIJob", "ns", "a")
    assert owner_key("", "ns", "a") == "/ns/a"


def test_get_path_never_fails_and_never_copies() -> None:
    inner = {"stage": "Running"}
    obj = {"status": {"scheduling": inner, "other": 3}}
    assert get_path(obj, ("status", "scheduling")) is inner
    assert get_path(obj, ("status", "other")) == {}
    assert get_path(obj, ("status", "missing", "deeper")) == {}
    assert get_path(obj, ()) is obj


def test_resource_paths_and_names() -> None:
    pods = Resource("", "v1", "pods", "Pod")
    jobs = Resource(group="kubeflow.org", version="v2beta1", plural="mpijobs", kind="MPIJob")
    assert pods.api_version == "v1"
    assert jobs.api_version == "kubeflow.org/v2beta1"
    assert jobs.crd_name == "mpijobs.kubeflow.org"
    assert pods.path(namespace="ns", name="p", subresource="status") == (
        "/api/v1/namespaces/ns/pods/p/status"
    )
    assert jobs.path() == "/apis/kubeflow.org/v2beta1/mpijobs"
