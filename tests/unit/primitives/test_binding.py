"""The tolerations Lattice adds to a bound pod, as the ExtendedResourceToleration plugin does."""

from __future__ import annotations

import pytest

from lattice.primitives.binding import bind_spec, extended_tolerations, is_extended_resource

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def spec(limits: dict[str, str], **kw: object) -> dict[str, object]:
    return {"containers": [{"name": "c", "resources": {"limits": limits}}], **kw}


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("nvidia.com/gpu", True),
        ("example.com/fpga", True),
        ("cpu", False),
        ("kubernetes.io/batch", False),
        ("hugepages.kubernetes.io/x", False),
        ("requests.nvidia.com/gpu", False),
    ],
)
def test_extended_resource_names(name: str, want: bool) -> None:
    assert is_extended_resource(name) is want


def test_a_gpu_pod_tolerates_the_gpu_taint_once() -> None:
    assert extended_tolerations(spec({"nvidia.com/gpu": "2", "cpu": "1"})) == [GPU_TOLERATION]
    assert extended_tolerations(spec({"nvidia.com/gpu": "2"}, tolerations=[GPU_TOLERATION])) == []
    assert extended_tolerations(spec({"cpu": "1"})) == []


def test_binding_adds_the_tolerations_and_keeps_the_users() -> None:
    own = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    bound = bind_spec(spec({"nvidia.com/gpu": "1"}, tolerations=[own]), "n1")
    assert bound["tolerations"] == [own, GPU_TOLERATION]
    assert bind_spec(bound, "n1")["tolerations"] == [own, GPU_TOLERATION]
