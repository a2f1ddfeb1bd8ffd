"""A pod's effective request: component-helpers' ``resource.PodRequests`` cases, restated."""

from __future__ import annotations

import pytest

from lattice.primitives.objects import Obj
from lattice.primitives.requests import container_requests, pod_requests, resource_list


def c(
    cpu: str | None = None,
    *,
    limit: str | None = None,
    always: bool = False,
    more: dict[str, str] | None = None,
    memory: str | None = None,
) -> Obj:
    """A container requesting ``cpu``, ``memory`` and ``more``, limited to ``limit``."""
    requests = {**({"cpu": cpu} if cpu is not None else {}), **(more or {})}
    if memory is not None:
        requests["memory"] = memory
    resources: Obj = {"requests": requests}
    if limit is not None:
        resources["limits"] = {"cpu": limit}
    container: Obj = {"name": "c", "image": "img", "resources": resources}
    if always:
        container["restartPolicy"] = "Always"
    return container


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({"containers": [c("1"), c("2")]}, 3000, id="app containers add up"),
        pytest.param(
            {"containers": [c("1")], "initContainers": [c("3"), c("2")]},
            3000,
            id="the largest init container wins over a smaller sum",
        ),
        pytest.param(
            {"containers": [c("1")], "initContainers": [c("1", always=True), c("2")]},
            3000,
            id="an init container runs beside the sidecars started before it",
        ),
        pytest.param(
            {"containers": [c("1")], "initContainers": [c("2"), c("1", always=True)]},
            2000,
            id="a sidecar started after an init container runs beside the app containers only",
        ),
        pytest.param(
            {
                "containers": [c("1")],
                "initContainers": [
                    c("1", always=True),
                    c("5"),
                    c("2", always=True),
                    c("1"),
                ],
            },
            6000,
            id="sidecars accumulate: 5 + 1 beats 1 + 1 + 2",
        ),
        pytest.param(
            {
                "containers": [c("1")],
                "initContainers": [c("1", always=True), c("2", always=True), c("1")],
            },
            4000,
            id="every sidecar adds to the app containers' sum",
        ),
        pytest.param({"containers": [c(limit="2")]}, 2000, id="a request defaults to the limit"),
        pytest.param(
            {"containers": [c("500m", limit="2")]}, 500, id="a request set below its limit stays"
        ),
        pytest.param(
            {"containers": [c("1")], "overhead": {"cpu": "250m"}}, 1250, id="overhead is added"
        ),
        pytest.param(
            {
                "containers": [c("1"), c("1")],
                "resources": {"requests": {"cpu": "3"}},
                "overhead": {"cpu": "100m"},
            },
            3100,
            id="pod-level requests replace the containers' sum, then overhead is added",
        ),
        pytest.param(
            {"containers": [c("1")], "resources": {"limits": {"cpu": "4"}}},
            4000,
            id="a pod-level request defaults to the pod-level limit",
        ),
    ],
)
def test_cpu_request(spec: Obj, want: int) -> None:
    assert dict(pod_requests(spec)).get("cpu", 0) == want


def test_every_resource_is_computed_and_sorted() -> None:
    spec = {
        "containers": [c("1", memory="1Gi"), c(more={"nvidia.com/gpu": "2"})],
        "initContainers": [c("500m", always=True, memory="512Mi"), c("4", memory="3Gi")],
        "resources": {"requests": {"memory": "8Gi", "nvidia.com/gpu": "9"}},
    }
    assert pod_requests(spec) == (
        ("cpu", 4500),
        ("memory", 8 * 2**30),  # pod level wins for memory
        ("nvidia.com/gpu", 2),  # but not for an extended resource
    )


def test_hugepages_are_a_pod_level_resource() -> None:
    spec: Obj = {
        "containers": [c(more={"hugepages-2Mi": "2Mi"})],
        "resources": {"requests": {"hugepages-2Mi": "8Mi"}},
    }
    assert pod_requests(spec) == (("hugepages-2Mi", 8 * 2**20),)


def test_an_empty_pod_requests_nothing() -> None:
    assert pod_requests({"containers": [{"name": "c", "image": "i"}]}) == ()
    assert pod_requests({}) == ()


def test_container_requests_and_resource_list() -> None:
    assert container_requests(c("250m", limit="1", memory="1Ki")) == {"cpu": 250, "memory": 1024}
    assert resource_list({"cpu": "2", "pods": 110}) == {"cpu": 2000, "pods": 110}
    assert resource_list(None) == {}


def test_a_malformed_quantity_is_named() -> None:
    with pytest.raises(ValueError, match="'lots'"):
        pod_requests({"containers": [c("lots")]})
