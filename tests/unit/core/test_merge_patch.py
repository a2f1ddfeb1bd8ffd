"""The status writer's merge patch turns old into new, touching only what changed."""

from __future__ import annotations

from typing import Any

import pytest

from lattice.runtime.status import merge_patch
from tests.support.patches import apply_merge_patch


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param({"a": 1}, {"a": 1}, None, id="unchanged status writes nothing"),
        pytest.param({"a": 1}, {"a": 2}, {"a": 2}, id="changed scalar"),
        pytest.param({"a": 1, "b": 2}, {"a": 1}, {"b": None}, id="removed key becomes null"),
        pytest.param({"c": [1, 2]}, {"c": [1]}, {"c": [1]}, id="lists are replaced whole"),
        pytest.param(
            {"s": {"x": 1, "y": 2}}, {"s": {"x": 1, "y": 3}}, {"s": {"y": 3}}, id="nested change"
        ),
        pytest.param({}, {"stage": "Waiting"}, {"stage": "Waiting"}, id="new key"),
    ],
)
def test_merge_patch(old: dict[str, Any], new: dict[str, Any], want: Any) -> None:
    patch = merge_patch(old, new)
    assert patch == want
    if patch is not None:
        assert apply_merge_patch(old, patch) == new
