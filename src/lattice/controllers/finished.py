"""The clean-up of a finished job, and the stop of a job failed by its run policy.

Contract:
- A finished job (Succeeded or Failed condition) keeps stage ``Completed`` and size 0, and its
  ``completionTime`` (the stored one, else now) in both status blocks.
- ``cleanPodPolicy``: All deletes every pod; Running the pods still Pending or Running; None
  none. With the pods go the Services per the kind's ``service_cleanup`` (All of them;
  WithPods the Service named like each deleted pod; None keeps them).
- ``ttlSecondsAfterFinished``: the job is deleted that long after its completion time (a
  ``NotFound`` is success); before, the seconds left are returned for a requeue. With
  ``ttl_children`` (JobSet's TTL) the job stays and its pods, Services and owned children of
  those kinds are deleted instead. The completion time is the stored one, else the
  ``Succeeded``/``Failed`` condition's ``lastTransitionTime`` (a kind that stores none, e.g.
  TrainJob), else the scheduler block's, else now: so an operator restart keeps the deadline.
- ``stop_all`` deletes every live pod and every Service of the job (a job failed for its
  deadline or backoffLimit, once that failure is written).
Deletes go through ``ChildSync.delete_all`` (expectations first, failures absorbed into the
step); nothing here writes status.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from lattice.controllers.children import ChildSync
from lattice.controllers.jobstatus import Step
from lattice.controllers.owned import OwnedChildren
from lattice.frameworks.base import RunPolicyView
from lattice.kube import KubeClient, NotFound
from lattice.kube.resources import PODS, SERVICES, Resource
from lattice.primitives.times import format_time, parse_opt_time
from lattice.runtime.projections import PodInfo

__all__ = ["Cleanup"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cleanup:
    """Deletes what a finished or stopped job no longer needs, the job itself after its TTL."""

    owned: OwnedChildren
    sync: ChildSync
    client: KubeClient
    resource: Resource

    async def finished(self, step: Step, policy: RunPolicyView) -> float | None:
        """Clean up a finished job; the seconds until its TTL deletion, or None."""
        ref = step.ref
        ns, name = ref.namespace, ref.name
        completion = (
            parse_opt_time(step.exec.get("completionTime"))
            or _finished_at(step.exec)
            or parse_opt_time(step.sched.get("completionTime"))
        )
        if completion is None:
            completion = step.now
        step.exec.setdefault("completionTime", format_time(completion))
        if policy.clean_pod_policy != "None":
            doomed = [
                p.name
                for p in self.owned.pods(ref)
                if p.deletion_timestamp is None
                and (policy.clean_pod_policy == "All" or p.phase in ("Pending", "Running"))
            ]
            await self._delete(step, "pods", PODS, doomed)
            if policy.service_cleanup != "None":
                services = [
                    e.name
                    for e in self.owned.services(ref).values()
                    if not e.deleting and (policy.service_cleanup == "All" or e.name in doomed)
                ]
                await self._delete(step, "services", SERVICES, services)
        if policy.ttl_seconds_after_finished is None:
            return None
        expire = completion + timedelta(seconds=policy.ttl_seconds_after_finished)
        if step.now >= expire:
            if policy.ttl_children is not None:
                await self._expire_children(step, policy.ttl_children)
                return None
            with contextlib.suppress(NotFound):
                await self.client.delete(self.resource, name, namespace=ns, uid=ref.uid)
            log.info("job.ttl_deleted", ttl=policy.ttl_seconds_after_finished)
            return None
        return (expire - step.now).total_seconds()

    async def _expire_children(self, step: Step, kinds: Sequence[str]) -> None:
        """JobSet's TTL: every pod, Service and owned child of ``kinds`` goes; the job stays."""
        ref = step.ref
        live = [p for p in self.owned.pods(ref) if p.deletion_timestamp is None]
        await self.stop_all(step, live)
        others = self.owned.others(ref)
        for kind in kinds:
            if kind not in self.owned.other_informers:
                continue
            names = [
                key.partition("/")[2]
                for key, obj in others.items()
                if key.startswith(f"{kind}/")
                and not (obj.get("metadata") or {}).get("deletionTimestamp")
            ]
            await self._delete(step, kind, self.owned.other_informers[kind][0], names)

    async def stop_all(self, step: Step, live: Sequence[PodInfo]) -> None:
        await self._delete(step, "pods", PODS, [p.name for p in live])
        services = self.owned.services(step.ref)
        await self._delete(
            step, "services", SERVICES, [e.name for e in services.values() if not e.deleting]
        )

    async def delete_pods(self, step: Step, names: Sequence[str]) -> None:
        """Delete the named pods (failed pods being recreated)."""
        await self._delete(step, "pods", PODS, names)

    async def _delete(self, step: Step, what: str, res: Resource, names: Sequence[str]) -> None:
        ref = step.ref
        exp_key = self.owned.exp_key(ref.namespace, ref.name, what)
        step.absorb(await self.sync.delete_all(job=ref, exp_key=exp_key, res=res, names=names))


def _finished_at(block: Mapping[str, Any]) -> datetime | None:
    """``lastTransitionTime`` of the block's true ``Succeeded`` or ``Failed`` condition."""
    for c in block.get("conditions") or ():
        if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
            return parse_opt_time(c.get("lastTransitionTime"))
    return None
