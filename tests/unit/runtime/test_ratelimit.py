"""Rate limiters and RateLimitingQueue: client-go ``default_rate_limiters_test.go`` semantics."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from lattice.clock import FakeClock
from lattice.runtime.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)
from tests.support.aio import take
from tests.support.queue_metrics import RecordingQueueMetrics


class FixedLimiter:
    """A limiter that always answers ``delay`` and counts its calls."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0
        self.forgotten: list[Hashable] = []

    def when(self, key: Hashable) -> float:
        self.calls += 1
        return self.delay

    def forget(self, key: Hashable) -> None:
        self.forgotten.append(key)

    def num_requeues(self, key: Hashable) -> int:
        return self.calls


def test_exponential_backoff_doubles_per_failure_from_base() -> None:
    """when() returns base * 2**failures and counts one failure per call."""
    limiter = ItemExponentialFailureRateLimiter[str](base=0.001, cap=1.0)
    assert [limiter.when("a") for _ in range(4)] == [0.001, 0.002, 0.004, 0.008]
    assert limiter.num_requeues("a") == 4


def test_exponential_backoff_is_capped() -> None:
    """The delay never exceeds cap, however many failures, and never overflows."""
    limiter = ItemExponentialFailureRateLimiter[str](base=0.005, cap=1000.0)
    delays = [limiter.when("a") for _ in range(2000)]
    assert delays[17] == pytest.approx(655.36)
    assert delays[18] == 1000.0
    assert delays[-1] == 1000.0


def test_exponential_backoff_is_per_key() -> None:
    """Failures of one key do not delay another."""
    limiter = ItemExponentialFailureRateLimiter[str]()
    for _ in range(5):
        limiter.when("a")
    assert limiter.when("b") == 0.005
    assert limiter.num_requeues("b") == 1


def test_exponential_forget_resets_failures() -> None:
    """forget() sets the failure count back to zero, so the next delay is base again."""
    limiter = ItemExponentialFailureRateLimiter[str]()
    limiter.when("a")
    limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


async def test_bucket_allows_a_burst_then_spaces_by_one_over_qps(clock: FakeClock) -> None:
    """A full bucket lets `burst` calls through with no delay; later calls reserve future tokens
    at 1/qps intervals (rate.Limiter Reserve().Delay())."""
    bucket = BucketRateLimiter(clock=clock, qps=10, burst=100)
    assert [bucket.when("x") for _ in range(100)] == [0.0] * 100
    assert [round(bucket.when(i), 9) for i in range(3)] == [0.1, 0.2, 0.3]
    assert bucket.num_requeues("x") == 0


async def test_bucket_refills_with_time_and_repays_reserved_tokens(clock: FakeClock) -> None:
    """Time refills qps tokens per second; tokens reserved in advance are repaid first."""
    bucket = BucketRateLimiter(clock=clock, qps=10, burst=5)
    for _ in range(5 + 3):  # drain the burst, then reserve 3 future tokens
        bucket.when("x")
    await clock.advance(1.0)  # +10 tokens: 3 repay the debt, 7 are usable but burst caps at 5
    assert [bucket.when("x") for _ in range(5)] == [0.0] * 5
    assert round(bucket.when("x"), 9) == 0.1


async def test_bucket_never_holds_more_than_burst(clock: FakeClock) -> None:
    """A long idle period fills the bucket only up to burst."""
    bucket = BucketRateLimiter(clock=clock, qps=10, burst=2)
    await clock.advance(3600)
    assert [bucket.when("x") for _ in range(2)] == [0.0, 0.0]
    assert round(bucket.when("x"), 9) == 0.1


def test_bucket_rejects_a_zero_rate(clock: FakeClock) -> None:
    """qps <= 0 or burst < 1 would make every delay infinite; refuse it up front."""
    with pytest.raises(ValueError, match="qps"):
        BucketRateLimiter(clock=clock, qps=0)
    with pytest.raises(ValueError, match="burst"):
        BucketRateLimiter(clock=clock, burst=0)


def test_max_of_returns_the_longest_delay_and_consults_every_limiter() -> None:
    """MaxOf answers the worst delay, and every limiter records the attempt."""
    short, long_ = FixedLimiter(0.1), FixedLimiter(2.0)
    limiter = MaxOfRateLimiter[str](long_, short)
    assert limiter.when("a") == 2.0
    assert (short.calls, long_.calls) == (1, 1)


def test_max_of_forgets_in_all_and_reports_the_highest_requeue_count() -> None:
    """forget() reaches every limiter; num_requeues() is the maximum over them."""
    exp = ItemExponentialFailureRateLimiter[str]()
    fixed = FixedLimiter(0.0)
    limiter = MaxOfRateLimiter[str](exp, fixed)
    for _ in range(3):
        limiter.when("a")
    fixed.calls = 1
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert exp.num_requeues("a") == 0
    assert fixed.forgotten == ["a"]


async def test_default_controller_limiter_is_max_of_exponential_and_bucket(
    clock: FakeClock,
) -> None:
    """Per-key 5 ms doubling until the shared 10 qps / burst 100 bucket dominates."""
    limiter: RateLimiter[str] = default_controller_rate_limiter(clock)
    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    for i in range(97):  # the bucket had 100 tokens; 3 are gone
        assert limiter.when(f"k{i}") == 0.005
    # the bucket is empty: a fresh key now waits 1/qps, longer than its 5 ms
    assert round(limiter.when("fresh"), 9) == 0.1
    assert limiter.num_requeues("a") == 3


async def test_add_rate_limited_adds_after_the_limiter_delay(clock: FakeClock) -> None:
    """add_rate_limited(key) == add_after(key, limiter.when(key)), and counts a requeue."""
    queue = RateLimitingQueue[str](
        clock, rate_limiter=ItemExponentialFailureRateLimiter[str](base=1.0, cap=60.0)
    )
    queue.add_rate_limited("a")
    await clock.advance(0.999)
    assert queue.len() == 0
    await clock.advance(0.001)
    assert queue.len() == 1
    assert queue.num_requeues("a") == 1
    key = await take(queue.get())
    queue.done(key)
    queue.add_rate_limited("a")  # second failure: 2 s
    await clock.advance(1.999)
    assert queue.len() == 0
    await clock.advance(0.001)
    assert queue.len() == 1
    queue.shutdown()


async def test_forget_resets_failures_but_does_not_replace_done(clock: FakeClock) -> None:
    """forget() clears the limiter only: the key stays in processing until done()."""
    queue = RateLimitingQueue[str](
        clock, rate_limiter=ItemExponentialFailureRateLimiter[str](base=1.0, cap=60.0)
    )
    queue.add("a")
    key = await take(queue.get())
    queue.add_rate_limited(key)
    queue.add_rate_limited(key)
    queue.forget(key)
    assert queue.num_requeues(key) == 0
    queue.add(key)
    assert queue.len() == 0, "forget() must not release a key that is still being processed"
    queue.done(key)
    assert queue.len() == 1
    queue.shutdown()


async def test_retries_metric_counts_every_add_after(clock: FakeClock) -> None:
    """Like client-go, each add_after (including add_rate_limited) is one retry, while adds
    after shutdown are not."""
    metrics = RecordingQueueMetrics()
    queue = RateLimitingQueue[str](clock, metrics=metrics)
    queue.add_rate_limited("a")
    queue.add_after("b", 0)
    queue.add("c")
    assert metrics.retries == 2
    queue.shutdown()
    queue.add_rate_limited("a")
    assert metrics.retries == 2
