"""Expectations: in-flight creates and deletes per job, so a stale cache cannot cause duplicates.

After a reconciler creates or deletes children, the informer cache lags behind the apiserver.
A second reconcile that reads the cache too early would create the same pods again (their
creations are not visible yet) or miss deletions. So, as in Kubernetes' ``ControllerExpectations``
and kueue's ``expectations.Store``, the reconciler records what it is about to do, the informer
handlers record what they see, and the reconciler does not act on a job whose expectations are
unsatisfied. Children have deterministic names, so expectations are sets of **names**, not counts:
a duplicate or replayed watch event cannot satisfy an expectation twice.

Rules:

1. ``expect_creations(job, names)`` / ``expect_deletions(job, names)`` add ``names`` to the job's
   pending creations / deletions, each with a deadline of now + ``ttl``; naming a pending name
   again renews its deadline. Call them *before* issuing the API calls.
2. ``observed_creation(job, name)`` (the informer saw the child appear) and
   ``creation_failed(job, name)`` (the create call failed, so no event will come) remove ``name``
   from the pending creations; likewise ``observed_deletion`` / ``deletion_failed`` for deletions.
   Removing a name that is not pending is a no-op.
3. ``satisfied(job)`` is true iff the job has no pending name whose deadline is still ahead.
   A job never seen is satisfied.
4. A pending name expires ``ttl`` seconds (default 5 minutes, client-go's
   ``ExpectationsTimeout``) after it was expected, measured on the injected clock's monotonic
   time: it then no longer blocks the job, so a lost watch event cannot wedge a job forever.
   It is still pending at exactly ``ttl`` seconds and expired just after (client-go:
   ``Since(timestamp) > ttl``).
5. ``pending(job)`` returns the unexpired pending names; ``delete(job)`` forgets the job (call it
   when the job itself is deleted).
6. Creations and deletions are tracked separately: the same name may be pending in both (delete
   then re-create under the same deterministic name).

Single event loop, no locks. Expired names are pruned when the job is next read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lattice.clock import Clock

__all__ = ["EXPECTATIONS_TTL", "Expectations", "PendingExpectations"]

EXPECTATIONS_TTL = 300.0
"""Seconds after which an unobserved expectation expires (client-go ``ExpectationsTimeout``)."""


@dataclass(frozen=True, slots=True)
class PendingExpectations:
    """The child names a job still waits to see created and deleted."""

    creations: frozenset[str] = frozenset()
    deletions: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.creations and not self.deletions


@dataclass(slots=True)
class _Record:
    # name -> monotonic time at which the name was (last) expected
    creations: dict[str, float] = field(default_factory=dict)
    deletions: dict[str, float] = field(default_factory=dict)


class Expectations:
    """Pending creates and deletes of child names, per job key (see the module docstring)."""

    def __init__(self, clock: Clock, *, ttl: float = EXPECTATIONS_TTL) -> None:
        if ttl <= 0:
            msg = f"ttl must be > 0, got {ttl}"
            raise ValueError(msg)
        self._clock = clock
        self._ttl = ttl
        self._jobs: dict[str, _Record] = {}

    def expect_creations(self, job_key: str, names: Iterable[str]) -> None:
        """Record that ``names`` are about to be created for ``job_key`` (rule 1)."""
        self._expect(job_key, names, creations=True)

    def expect_deletions(self, job_key: str, names: Iterable[str]) -> None:
        """Record that ``names`` are about to be deleted for ``job_key`` (rule 1)."""
        self._expect(job_key, names, creations=False)

    def observed_creation(self, job_key: str, name: str) -> None:
        """The informer saw child ``name`` of ``job_key`` appear (rule 2)."""
        self._lower(job_key, name, creations=True)

    def observed_deletion(self, job_key: str, name: str) -> None:
        """The informer saw child ``name`` of ``job_key`` disappear (rule 2)."""
        self._lower(job_key, name, creations=False)

    def creation_failed(self, job_key: str, name: str) -> None:
        """Creating ``name`` failed, so no watch event will come for it (rule 2)."""
        self._lower(job_key, name, creations=True)

    def deletion_failed(self, job_key: str, name: str) -> None:
        """Deleting ``name`` failed, so no watch event will come for it (rule 2)."""
        self._lower(job_key, name, creations=False)

    def satisfied(self, job_key: str) -> bool:
        """Whether the reconciler may act on ``job_key`` (rule 3)."""
        return self._prune(job_key) is None

    def pending(self, job_key: str) -> PendingExpectations:
        """The unexpired names ``job_key`` still waits for (rule 5)."""
        record = self._prune(job_key)
        if record is None:
            return PendingExpectations()
        return PendingExpectations(
            creations=frozenset(record.creations), deletions=frozenset(record.deletions)
        )

    def delete(self, job_key: str) -> None:
        """Forget everything about ``job_key`` (rule 5)."""
        self._jobs.pop(job_key, None)

    # -- internals --------------------------------------------------------------------------

    def _expect(self, job_key: str, names: Iterable[str], *, creations: bool) -> None:
        now = self._clock.monotonic()
        record = self._jobs.get(job_key)
        fresh = record is None
        if record is None:
            record = _Record()
        pending = record.creations if creations else record.deletions
        for name in names:
            pending[name] = now
        if fresh and (record.creations or record.deletions):
            self._jobs[job_key] = record

    def _lower(self, job_key: str, name: str, *, creations: bool) -> None:
        record = self._jobs.get(job_key)
        if record is None:
            return
        (record.creations if creations else record.deletions).pop(name, None)
        if not record.creations and not record.deletions:
            del self._jobs[job_key]

    def _prune(self, job_key: str) -> _Record | None:
        """Drop expired names (rule 4); return the record, or None if nothing is pending."""
        record = self._jobs.get(job_key)
        if record is None:
            return None
        now = self._clock.monotonic()
        for pending in (record.creations, record.deletions):
            expired = [name for name, at in pending.items() if now - at > self._ttl]
            for name in expired:
                del pending[name]
        if not record.creations and not record.deletions:
            del self._jobs[job_key]
            return None
        return record
