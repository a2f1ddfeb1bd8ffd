"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Contract:
- A candidate acquires the Lease when it does not exist, when its holder is empty (released),
  or when the record it last observed has not changed for ``lease_duration`` seconds. Expiry is
  judged on the candidate's own clock from when it *observed* the record, never from the
  ``renewTime`` written by another machine, so clock skew between replicas does not matter.
- Every write is an optimistic update (resourceVersion), so two candidates never both win.
- The leader renews every ``retry_period``; if it cannot renew within ``renew_deadline`` it has
  lost the lease: ``run`` cancels the leader's work and returns ``False`` (the process should
  exit, as client-go's callers do).
- When the leader's work returns normally (graceful shutdown), the Lease is released (holder
  emptied, duration 1 s) so a standby takes over at once instead of waiting for expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

import structlog

from lattice.clock import Clock
from lattice.kube import ApiError, Conflict, Forbidden, KubeClient, NotFound
from lattice.kube.errors import Unauthorized
from lattice.kube.resources import LEASES
from lattice.primitives.times import format_micro_time

__all__ = ["LeaderElector"]

log = structlog.get_logger(__name__)


class LeaderElector:
    """Campaigns for one Lease and runs the leader's work while it holds it."""

    def __init__(
        self,
        client: KubeClient,
        *,
        clock: Clock,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self._client = client
        self._clock = clock
        self._name = name
        self._namespace = namespace
        self._identity = identity
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._on_change = on_change
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._leader = False
        self._last_error = ""

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def identity(self) -> str:
        return self._identity

    def _set_leader(self, value: bool) -> None:
        if value != self._leader:
            self._leader = value
            log.info("leader.changed", leader=value, identity=self._identity, lease=self._name)
            if self._on_change is not None:
                self._on_change(value)

    def _spec(self, now: datetime, *, prior: dict[str, Any] | None) -> dict[str, Any]:
        prior_spec = (prior or {}).get("spec") or {}
        transitions = int(prior_spec.get("leaseTransitions") or 0)
        same_holder = prior_spec.get("holderIdentity") == self._identity
        return {
            "holderIdentity": self._identity,
            "leaseDurationSeconds": int(self._lease_duration),
            "acquireTime": prior_spec.get("acquireTime") if same_holder else format_micro_time(now),
            "renewTime": format_micro_time(now),
            "leaseTransitions": transitions if same_holder or prior is None else transitions + 1,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the lease afterwards."""
        now = self._clock.now()
        try:
            lease = await self._client.get(LEASES, self._name, namespace=self._namespace)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": self._spec(now, prior=None),
            }
            try:
                created = await self._client.create(LEASES, body, namespace=self._namespace)
            except ApiError as exc:
                return self._refused(exc)
            self._observe(created)
            return True
        except ApiError as exc:
            return self._refused(exc)
        spec = lease.get("spec") or {}
        if self._observed is None or (self._observed.get("spec") or {}) != spec:
            self._observe(lease)
        holder = spec.get("holderIdentity") or ""
        expired = self._clock.monotonic() >= self._observed_at + self._lease_duration
        if holder and holder != self._identity and not expired:
            return False
        body = dict(lease)
        body["spec"] = self._spec(now, prior=lease)
        try:
            updated = await self._client.replace(
                LEASES, self._name, body, namespace=self._namespace
            )
        except Conflict:
            return False
        except ApiError as exc:
            return self._refused(exc)
        self._observe(updated)
        self._last_error = ""
        return True

    def _refused(self, exc: ApiError) -> bool:
        """Log an API error once per distinct message (a 403 needs a person); returns False."""
        if exc.message != self._last_error:
            self._last_error = exc.message
            level = log.error if isinstance(exc, Forbidden | Unauthorized) else log.warning
            level("leader.request_failed", lease=self._name, status=exc.status, error=exc.message)
        return False

    def _observe(self, lease: dict[str, Any]) -> None:
        self._observed = lease
        self._observed_at = self._clock.monotonic()

    async def _acquire(self, stop: asyncio.Event) -> bool:
        while not stop.is_set():
            if await self.try_acquire_or_renew():
                return True
            await self._clock.sleep(self._retry_period)
        return False

    async def _renew_until_lost(self) -> None:
        """Returns when a renewal could not succeed within the renew deadline."""
        while True:
            deadline = self._clock.monotonic() + self._renew_deadline
            while not await self.try_acquire_or_renew():
                if self._clock.monotonic() >= deadline:
                    return
                await self._clock.sleep(self._retry_period)
            await self._clock.sleep(self._retry_period)

    async def run(
        self, lead: Callable[[], Coroutine[Any, Any, None]], *, stop: asyncio.Event
    ) -> bool:
        """Campaign until leader, run ``lead()`` while leading.

        Returns True after a graceful end (``lead`` returned, lease released) or when ``stop`` was
        set before winning; False when the lease was lost while leading.
        """
        if not await self._acquire(stop):
            return True
        self._set_leader(True)
        work = asyncio.create_task(lead(), name="leader-work")
        renew = asyncio.create_task(self._renew_until_lost(), name="leader-renew")
        done, _ = await asyncio.wait({work, renew}, return_when=asyncio.FIRST_COMPLETED)
        if renew in done:
            log.error("leader.lost", identity=self._identity, lease=self._name)
            self._set_leader(False)
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            return False
        renew.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renew
        await self.release()
        work.result()  # re-raise a crash of the leader's work
        return True

    async def release(self) -> None:
        """Give the lease up if we hold it (holder emptied, so a standby may take it at once)."""
        if not self._leader:
            return
        try:
            lease = await self._client.get(LEASES, self._name, namespace=self._namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") == self._identity:
                now = format_micro_time(self._clock.now())
                lease["spec"] = {
                    **spec,
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "renewTime": now,
                    "acquireTime": now,
                }
                await self._client.replace(LEASES, self._name, lease, namespace=self._namespace)
        except ApiError as exc:
            log.warning("leader.release_failed", error=str(exc))
        finally:
            self._set_leader(False)
