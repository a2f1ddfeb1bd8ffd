"""Expectations: one test per rule of ``lattice.runtime.expectations``, on a fake clock."""

from __future__ import annotations

import pytest

from lattice.clock import FakeClock
from lattice.runtime.expectations import EXPECTATIONS_TTL, Expectations, PendingExpectations

JOB = "ns/job"


@pytest.fixture
def exp(clock: FakeClock) -> Expectations:
    return Expectations(clock)


def test_a_job_never_seen_is_satisfied(exp: Expectations) -> None:
    """No record means nothing in flight: the reconciler may act."""
    assert exp.satisfied(JOB)
    assert exp.pending(JOB) == PendingExpectations()


def test_expected_creations_block_until_each_name_is_observed(exp: Expectations) -> None:
    """The job is unsatisfied until the informer has seen every expected child appear."""
    exp.expect_creations(JOB, ["job-worker-0", "job-worker-1"])
    assert not exp.satisfied(JOB)
    exp.observed_creation(JOB, "job-worker-0")
    assert not exp.satisfied(JOB)
    assert exp.pending(JOB).creations == {"job-worker-1"}
    exp.observed_creation(JOB, "job-worker-1")
    assert exp.satisfied(JOB)


def test_expected_deletions_block_until_each_name_is_observed(exp: Expectations) -> None:
    """The job is unsatisfied until the informer has seen every expected child disappear."""
    exp.expect_deletions(JOB, ["job-worker-2", "job-worker-3"])
    exp.observed_deletion(JOB, "job-worker-3")
    assert not exp.satisfied(JOB)
    assert exp.pending(JOB).deletions == {"job-worker-2"}
    exp.observed_deletion(JOB, "job-worker-2")
    assert exp.satisfied(JOB)


def test_a_duplicate_event_cannot_satisfy_another_name(exp: Expectations) -> None:
    """Expectations are names, not counts: seeing one child twice does not stand in for another."""
    exp.expect_creations(JOB, ["a", "b"])
    exp.observed_creation(JOB, "a")
    exp.observed_creation(JOB, "a")
    assert not exp.satisfied(JOB)
    assert exp.pending(JOB).creations == {"b"}


def test_an_unexpected_observation_changes_nothing(exp: Expectations) -> None:
    """Observing a name that is not pending (someone else's pod, a relist) is a no-op."""
    exp.expect_creations(JOB, ["a"])
    exp.observed_creation(JOB, "stranger")
    exp.observed_deletion(JOB, "a")  # a deletion does not settle a pending creation
    exp.observed_creation("other/job", "a")
    assert exp.pending(JOB).creations == {"a"}


def test_failed_api_calls_lower_expectations(exp: Expectations) -> None:
    """A create or delete that failed produces no watch event, so it stops being expected."""
    exp.expect_creations(JOB, ["a"])
    exp.expect_deletions(JOB, ["b"])
    exp.creation_failed(JOB, "a")
    assert not exp.satisfied(JOB)
    exp.deletion_failed(JOB, "b")
    assert exp.satisfied(JOB)


def test_expectations_are_per_job(exp: Expectations) -> None:
    """One job's pending children do not block another job."""
    exp.expect_creations(JOB, ["a"])
    assert exp.satisfied("ns/other")
    exp.expect_creations("ns/other", ["a"])
    exp.observed_creation("ns/other", "a")
    assert exp.satisfied("ns/other")
    assert not exp.satisfied(JOB)


def test_creations_and_deletions_of_one_name_are_tracked_separately(exp: Expectations) -> None:
    """Delete-then-recreate under the same deterministic name needs both events."""
    exp.expect_deletions(JOB, ["a"])
    exp.expect_creations(JOB, ["a"])
    exp.observed_deletion(JOB, "a")
    assert exp.pending(JOB) == PendingExpectations(creations=frozenset({"a"}))
    exp.observed_creation(JOB, "a")
    assert exp.satisfied(JOB)


async def test_unobserved_expectations_expire_after_the_ttl(
    clock: FakeClock, exp: Expectations
) -> None:
    """A lost watch event blocks the job for at most the TTL (5 minutes), measured on the
    injected clock: still pending at exactly the TTL, expired just after."""
    assert EXPECTATIONS_TTL == 300.0
    exp.expect_creations(JOB, ["a"])
    exp.expect_deletions(JOB, ["b"])
    await clock.advance(EXPECTATIONS_TTL)
    assert not exp.satisfied(JOB)
    await clock.advance(0.001)
    assert exp.satisfied(JOB)
    assert exp.pending(JOB).empty


async def test_each_expectation_expires_on_its_own_deadline(
    clock: FakeClock, exp: Expectations
) -> None:
    """Names expected later keep blocking after earlier ones expire; re-expecting renews."""
    exp = Expectations(clock, ttl=10.0)
    exp.expect_creations(JOB, ["early", "renewed"])
    await clock.advance(6)
    exp.expect_creations(JOB, ["late", "renewed"])
    await clock.advance(5)  # t=11: "early" expired, the others were expected at t=6
    assert exp.pending(JOB).creations == {"late", "renewed"}
    await clock.advance(5.001)
    assert exp.satisfied(JOB)


def test_delete_forgets_the_job(exp: Expectations) -> None:
    """delete() (the job is gone) drops everything pending for it."""
    exp.expect_creations(JOB, ["a"])
    exp.expect_deletions(JOB, ["b"])
    exp.delete(JOB)
    assert exp.satisfied(JOB)
    exp.delete("never/seen")


def test_expecting_nothing_leaves_the_job_satisfied(exp: Expectations) -> None:
    """An empty batch records nothing."""
    exp.expect_creations(JOB, [])
    assert exp.satisfied(JOB)


def test_ttl_must_be_positive(clock: FakeClock) -> None:
    """A zero TTL would make every expectation expire at once; refuse it."""
    with pytest.raises(ValueError, match="ttl"):
        Expectations(clock, ttl=0)
