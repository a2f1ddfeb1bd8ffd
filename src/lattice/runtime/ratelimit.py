"""Rate limiters and the rate-limiting queue: client-go ``default_rate_limiters.go`` and
``rate_limiting_queue.go``.

Invariants:

1. ``RateLimiter.when(key)`` says how long ``key`` should wait before its next attempt and
   records the attempt; ``forget(key)`` stops tracking ``key`` (*"Doesn't matter whether it's for
   failing or for success"*); ``num_requeues(key)`` is how many failures ``key`` has had.
2. ``ItemExponentialFailureRateLimiter``: ``base * 2**failures``, capped at ``cap``; each ``when``
   counts one failure; ``forget`` resets the count to zero.
3. ``BucketRateLimiter``: one token bucket shared by all keys (``qps`` refill, ``burst`` size,
   starting full). ``when`` *reserves* a token even when none is left, so a burst of calls gets
   increasing delays (``golang.org/x/time/rate``'s ``Reserve().Delay()``); it tracks no keys.
4. ``MaxOfRateLimiter`` asks **every** limiter (so the bucket is charged even when the per-key
   backoff is longer) and returns the longest delay; ``forget`` forgets in all of them.
5. ``default_controller_rate_limiter`` = max(exponential 5 ms → 1000 s, bucket 10 qps / burst 100).
6. ``RateLimitingQueue.add_rate_limited(key)`` = ``add_after(key, limiter.when(key))``.
   ``forget`` only clears the limiter: *"you still have to call Done on the queue"*, and the
   constructor's warning holds: *"Remember to call Forget! If you don't, you may end up tracking
   failures forever."*

All delays are float seconds on the injected clock. Single event loop, no locks.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar, Unpack

from lattice.clock import Clock
from lattice.runtime.delaying import DelayingQueue
from lattice.runtime.workqueue import K, QueueOptions

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "RateLimitingQueue",
    "default_controller_rate_limiter",
]

K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[K_contra]):
    """Decides how long a key waits before it is retried."""

    def when(self, key: K_contra) -> float:
        """Seconds ``key`` should wait before its next attempt; records the attempt."""
        ...

    def forget(self, key: K_contra) -> None:
        """Stop tracking ``key`` (it succeeded or was given up on)."""
        ...

    def num_requeues(self, key: K_contra) -> int:
        """How many failures ``key`` has had since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """Per-key backoff ``base * 2**failures`` seconds, capped at ``cap`` (invariant 2)."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        if base < 0 or cap < 0:
            msg = f"base and cap must be >= 0, got base={base} cap={cap}"
            raise ValueError(msg)
        self._base = base
        self._cap = cap
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        exp = self._failures.get(key, 0)
        self._failures[key] = exp + 1
        # 2.0**1023 is the largest finite power; base * it may be inf, which min() caps.
        return min(self._base * 2.0 ** min(exp, 1023), self._cap)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    """A token bucket shared by every key, reserving future tokens (invariant 3).

    Port of ``rate.Limiter.Reserve().Delay()``: the bucket holds at most ``burst`` tokens, starts
    full and refills at ``qps`` tokens per second; each ``when`` takes one token, letting the
    balance go negative, and returns the time until the balance is back to zero.
    """

    def __init__(self, *, clock: Clock, qps: float = 10.0, burst: int = 100) -> None:
        if qps <= 0 or burst < 1:
            msg = f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}"
            raise ValueError(msg)
        self._clock = clock
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, key: Hashable) -> float:
        now = self._clock.monotonic()
        tokens = self._tokens
        if self._last is not None and now > self._last:
            tokens = min(self._burst, tokens + (now - self._last) * self._qps)
        tokens -= 1.0
        self._tokens = tokens
        self._last = now if self._last is None else max(now, self._last)
        return -tokens / self._qps if tokens < 0 else 0.0

    def forget(self, key: Hashable) -> None:
        pass

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The longest delay of several limiters; every limiter is consulted (invariant 4)."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            msg = "MaxOfRateLimiter needs at least one limiter"
            raise ValueError(msg)
        self._limiters = limiters

    def when(self, key: K) -> float:
        # a list, not a generator: every limiter must record the attempt.
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: K) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock) -> MaxOfRateLimiter[Hashable]:
    """client-go's ``DefaultControllerRateLimiter``: per-key 5 ms → 1000 s, overall 10 qps / 100."""
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter[Hashable](base=0.005, cap=1000.0),
        BucketRateLimiter(clock=clock, qps=10.0, burst=100),
    )


class RateLimitingQueue(DelayingQueue[K]):
    """A ``DelayingQueue`` whose retries are paced by a ``RateLimiter`` (invariant 6).

    ``rate_limiter`` defaults to ``default_controller_rate_limiter(clock)``.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        rate_limiter: RateLimiter[K] | None = None,
        **options: Unpack[QueueOptions[K]],
    ) -> None:
        super().__init__(clock, **options)
        self._rate_limiter: RateLimiter[K] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock)
        )

    def add_rate_limited(self, key: K) -> None:
        """Add ``key`` after the delay the rate limiter gives it (and count the failure)."""
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Reset ``key``'s failure count. Does not replace ``done``: call both."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How many times ``key`` went through ``add_rate_limited`` since it was last forgotten."""
        return self._rate_limiter.num_requeues(key)
