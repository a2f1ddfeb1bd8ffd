"""The desired children of a running job, and the two rounds that make the cluster match them.

Contract:
- ``desired_children``: ``plugin.children(job, size=currentSize)``, refined by the plugin's
  capabilities in this order: ``observed_children`` (``ObservesChildren``: e.g. the MPI launcher
  gate, the Running-workers script), ``staged_children`` (``StagesChildren``: staged pods first,
  the sized ones once they all Succeeded, Succeeded staged pods kept at size 0), and the pin
  ConfigMap (``PinsInputs``: kept as observed once it exists, created when the job gets pods).
- ``ChildRounds.apply`` makes the children match by name (``ChildSync``): missing ones are
  created, owned extras deleted (highest index first), nothing else restarted; ``keep`` names
  pods never deleted here (the failed ones being recreated). Children of a kind the reconciler
  does not watch are a plugin error (``TerminalError``). Two rounds, each concurrent: first what
  pods consume (ConfigMaps, Secrets, PersistentVolumeClaims; a Secret that does not exist yet
  gets its generated material; a claim without an ownerReference, a retained one, is only
  created when the cache lacks its name, without expectations, ``AlreadyExists`` being success,
  and never deleted), then the pods and batch Jobs. Services go in the first round only when
  there are batch Jobs (an MPI launcher resolves its workers through them at once); pods do not
  need them to exist (Kubeflow creates pods before Services), so otherwise they go with the pods
  and a reconcile that starts a job costs one round trip, not two. An existing ConfigMap whose
  ``data`` differs is patched in place; an existing batch Job is suspended or resumed to match
  its desired ``spec.suspend`` (``lattice.controllers.batchjobs``: on resume its scheduling
  fields are re-synced), with the pods; a failed patch is an error of the step (retried).
  Outcomes are absorbed into the step in a fixed order.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine, Sequence
from typing import Any

from lattice.controllers.batchjobs import job_patches
from lattice.controllers.children import ChildSync, Existing, SyncOutcome
from lattice.controllers.generated import fill_generated
from lattice.controllers.jobstatus import Step, with_nulls
from lattice.controllers.owned import OwnedChildren
from lattice.frameworks.base import (
    Children,
    JobPlugin,
    ObservesChildren,
    OperatorContext,
    PinsInputs,
    StagesChildren,
)
from lattice.kube import AlreadyExists, KubeClient, Resource
from lattice.kube.resources import PODS, SERVICES
from lattice.primitives.objects import Obj
from lattice.runtime.controller import TerminalError
from lattice.runtime.events import ObjectRef
from lattice.runtime.informer import Informer
from lattice.runtime.projections import PodInfo

__all__ = ["ChildRounds", "desired_children"]

_INPUTS, _CONSUMERS = ("ConfigMap", "Secret", "PersistentVolumeClaim"), ("Job",)


def desired_children(
    plugin: JobPlugin[Any],
    job: Any,
    *,
    step: Step,
    size: int,
    live: Sequence[PodInfo],
    others: Obj,
    ctx: OperatorContext,
    pinned: Obj | None,
) -> Children:
    children = plugin.children(job, size=size, ctx=ctx)
    if isinstance(plugin, ObservesChildren):
        children = plugin.observed_children(job, children, pods=live, others=others)
    if isinstance(plugin, StagesChildren):
        children = plugin.staged_children(job, children, size=size, pods=live, ctx=ctx)
    if isinstance(plugin, PinsInputs):
        pin = pinned
        if pin is None and size > 0:
            pin = plugin.pin(step.obj, ctx)
        if pin is not None:
            children = dataclasses.replace(children, config_maps=(*children.config_maps, pin))
    return children


def _manifests(children: Children, kind: str) -> tuple[Obj, ...]:
    by_kind = {"ConfigMap": children.config_maps, "Secret": children.secrets}
    by_kind.update(Job=children.jobs, PersistentVolumeClaim=children.claims)
    return by_kind[kind]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChildRounds:
    """Applies a job's desired children in two concurrent rounds."""

    owned: OwnedChildren
    sync: ChildSync
    client: KubeClient

    async def apply(
        self,
        step: Step,
        children: Children,
        *,
        pods: Sequence[PodInfo],
        others: Obj,
        keep: frozenset[str],
    ) -> None:
        ref, owned = step.ref, self.owned
        ns, name = ref.namespace, ref.name
        existing = {
            p.name: Existing(p.name, True, p.deletion_timestamp is not None, p.replica_index or 0)
            for p in pods
        }
        self._check_watched(children)
        services = self.sync.sync(
            job=ref,
            exp_key=owned.exp_key(ns, name, "services"),
            res=SERVICES,
            desired=children.services,
            existing=owned.services(ref),
        )
        early, late = ([services], []) if children.jobs else ([], [services])
        inputs = self._other_syncs(ref, children, others, _INPUTS)
        outs: list[SyncOutcome | None] = await asyncio.gather(
            *early, *inputs, self._refresh_config_maps(ref, children, others)
        )
        consumers = self._other_syncs(ref, children, others, _CONSUMERS)
        outs += await asyncio.gather(
            self.sync.sync(
                job=ref,
                exp_key=owned.exp_key(ns, name, "pods"),
                res=PODS,
                desired=children.pods,
                existing=existing,
                keep=keep,
            ),
            *late,
            *consumers,
            self._resync_jobs(ref, children, others),
        )
        for outcome in outs:
            if outcome is not None:
                step.absorb(outcome)

    def _check_watched(self, children: Children) -> None:
        """Refuse children of a kind this reconciler does not watch (a plugin error)."""
        for child_kind in (*_INPUTS, *_CONSUMERS):
            if _manifests(children, child_kind) and child_kind not in self.owned.other_informers:
                raise TerminalError(f"{self.owned.kind} wants {child_kind}s, which are not watched")

    def _other_syncs(
        self, ref: ObjectRef, children: Children, others: Obj, kinds: tuple[str, ...]
    ) -> list[Coroutine[Any, Any, SyncOutcome]]:
        """The create/delete syncs of the non-pod children of ``kinds``, not yet started."""
        syncs: list[Coroutine[Any, Any, SyncOutcome]] = []
        for child_kind in kinds:
            manifests = _manifests(children, child_kind)
            if child_kind not in self.owned.other_informers:
                continue  # _check_watched: there are none
            res, informer = self.owned.other_informers[child_kind]
            existing = {
                key.partition("/")[2]: Existing(
                    key.partition("/")[2],
                    True,
                    bool((obj.get("metadata") or {}).get("deletionTimestamp")),
                    0,
                )
                for key, obj in others.items()
                if key.startswith(f"{child_kind}/")
            }
            if child_kind == "PersistentVolumeClaim":
                retained = [m for m in manifests if not m["metadata"].get("ownerReferences")]
                syncs.append(self._create_retained(ref, res, informer, retained))
                manifests = tuple(m for m in manifests if m["metadata"].get("ownerReferences"))
            if child_kind == "Secret":
                manifests = tuple(
                    m if m["metadata"]["name"] in existing else fill_generated(m) for m in manifests
                )
            syncs.append(
                self.sync.sync(
                    job=ref,
                    exp_key=self.owned.exp_key(ref.namespace, ref.name, child_kind),
                    res=res,
                    desired=manifests,
                    existing=existing,
                )
            )
        return syncs

    async def _create_retained(
        self, ref: ObjectRef, res: Resource, informer: Informer[Obj], manifests: Sequence[Obj]
    ) -> SyncOutcome:
        """Create each retained claim (no owner, so no expectations: the watch cannot map it
        back to the job) the cache does not hold; ``AlreadyExists`` is success."""
        out = SyncOutcome()
        for manifest in manifests:
            name = manifest["metadata"]["name"]
            if informer.store.get(f"{ref.namespace}/{name}") is not None:
                continue
            try:
                await self.client.create(res, manifest, namespace=ref.namespace)
            except AlreadyExists:
                continue
            except Exception as exc:
                out.errors.append(f"create {res.kind} {name}: {exc}")
        return out

    async def _resync_jobs(self, ref: ObjectRef, children: Children, others: Obj) -> SyncOutcome:
        """Suspend or resume the existing batch Jobs to match the desired ones."""
        out = SyncOutcome()
        if "Job" not in self.owned.other_informers:
            return out
        res = self.owned.other_informers["Job"][0]
        for manifest in children.jobs:
            name = manifest["metadata"]["name"]
            current = others.get(f"Job/{name}")
            if current is None or (current.get("metadata") or {}).get("deletionTimestamp"):
                continue
            for subresource, body in job_patches(current, manifest):
                try:
                    await self.client.patch(
                        res, name, body, namespace=ref.namespace, subresource=subresource or None
                    )
                except Exception as exc:
                    out.errors.append(f"patch {subresource or 'spec'} of Job {name}: {exc}")
                    break
        return out

    async def _refresh_config_maps(self, ref: ObjectRef, children: Children, others: Obj) -> None:
        """Update existing ConfigMaps whose data differs from the desired (in place)."""
        if "ConfigMap" not in self.owned.other_informers:
            return
        res = self.owned.other_informers["ConfigMap"][0]
        for manifest in children.config_maps:
            current = others.get(f"ConfigMap/{manifest['metadata']['name']}")
            if current is not None and current.get("data") != manifest.get("data"):
                await self.client.patch(
                    res,
                    manifest["metadata"]["name"],
                    {"data": with_nulls(current.get("data"), manifest.get("data"))},
                    namespace=ref.namespace,
                )
