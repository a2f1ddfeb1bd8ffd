"""The histogram packer against an independent node-by-node best-fit reference."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.scheduler.core.packing import Histogram, make_shape
from tests.unit.scheduler.builders import ref_place

free_lists = st.lists(st.integers(-1, 9), max_size=12)


def multiset(free: list[int]) -> list[tuple[int, int]]:
    return sorted(Counter(f for f in free if f > 0).items())


@settings(max_examples=200, deadline=None)
@given(free=free_lists, units=st.integers(1, 5), n=st.integers(0, 20))
def test_bulk_place_equals_per_pod_best_fit(free: list[int], units: int, n: int) -> None:
    hist = Histogram(free)
    placed = hist.place(units, n)
    ref = [max(0, f) for f in free]
    expected = 0
    while expected < n and ref_place(ref, units):
        expected += 1
    assert placed == expected
    assert hist.items() == multiset(ref)
    assert hist.total == sum(ref)


@settings(max_examples=200, deadline=None)
@given(
    free=free_lists,
    fixed=st.lists(st.integers(0, 4), max_size=3),
    units=st.integers(0, 4),
    replicas=st.integers(0, 6),
)
def test_try_place_is_all_or_nothing_best_fit_decreasing(
    free: list[int], fixed: list[int], units: int, replicas: int
) -> None:
    hist = Histogram(free)
    before = hist.items()
    shape = make_shape(fixed_pods=tuple(fixed), replica_units=units, replicas=replicas)
    ref = [max(0, f) for f in free]
    pods = sorted([*fixed, *([units] * replicas)], reverse=True)
    trial = list(ref)
    ref_ok = all(ref_place(trial, u) for u in pods)
    assert hist.fits(shape) == ref_ok
    assert hist.items() == before
    assert hist.try_place(shape) == ref_ok
    assert hist.items() == multiset(trial if ref_ok else ref)


@pytest.mark.parametrize(
    ("free", "units", "n", "placed", "left"),
    [
        pytest.param([2, 2], 4, 1, 0, [(2, 2)], id="a 4-unit pod does not fit on 2+2"),
        pytest.param([2, 2], 2, 2, 2, [], id="two 2-unit pods fit on 2+2"),
        pytest.param([8, 3, 5], 3, 3, 3, [(2, 1), (5, 1)], id="best fit fills smallest first"),
        pytest.param([8, 8], 3, 10, 4, [(2, 2)], id="partial placement stops when full"),
    ],
)
def test_place_examples(
    free: list[int], units: int, n: int, placed: int, left: list[tuple[int, int]]
) -> None:
    hist = Histogram(free)
    assert hist.place(units, n) == placed
    assert hist.items() == left


def test_zero_unit_pods_always_fit() -> None:
    assert Histogram([]).try_place(make_shape(fixed_pods=(0, 0), replica_units=0, replicas=5))
    assert make_shape(fixed_pods=(0, 0), replica_units=0, replicas=5) == ()
