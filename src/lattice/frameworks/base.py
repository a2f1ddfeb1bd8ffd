"""The per-kind plugin protocol: everything that differs between TrainingJob, MPIJob, MXJob and
TrainJob, behind one small, pure interface.

Contract:
- A plugin is pure: dicts and models in, values out. No I/O, no clock (``now`` is an argument
  where needed), no randomness. The generic reconciler (``lattice.controllers.job``) and the
  scheduler loop (``lattice.scheduler.loop``) do every read and write.
- ``parse`` turns the cached raw object into the kind's typed model, raising :class:`InvalidJob`
  with field-named :class:`Problem` values for what the schema could not reject (the job then
  goes to stage ``Wrong`` with a Failed condition, and never reaches the scheduler).
- ``demand`` is what the scheduler needs: priority, min/max size, the units of fixed pods and of
  one elastic replica, and whether the job is suspended. Sizes count every pod of the job.
- ``children(job, size)`` is the complete desired set of child objects for ``size`` (0 means none
  of the sized pods). Names are pure functions of (job, replica type, index); every child carries
  a controller ownerReference to the job and the ``lattice.breezeml.ai/managed`` label.
- ``progress(job, size, pods)`` applies the kind's status rules to the observed pods and says
  whether the job is running, succeeded or failed, and which failed pods to recreate.
- Where the kind keeps the scheduler's state and the Kubeflow execution status in ``status`` is
  given by ``scheduling_path`` and ``exec_path`` (paths of keys from the object root).
- A plugin whose ``run_policy`` has a ``backoff_limit`` leaves no Failed pod unanswered while the
  job runs: each one is either named in ``recreate`` or ends the job (``failed``). The reconciler
  relies on it to count every failure once (see ``lattice.controllers.job``).

Optional capabilities (looked up with ``isinstance``; a plugin without them gets the defaults):

- :class:`ObservesChildren` (``observed_children``): adjust the desired children to what is
  observed, e.g. hold a launcher until the workers are ready, or list only the Running workers in a
  hostfile script. ``children`` itself stays a function of (job, size).
- ``messages`` (a :class:`Messages`, ``lattice.frameworks.messages``): the kind's wording of
  conditions and events. The default is TrainingJob's; Kubeflow kinds override what upstream
  words differently.
- :class:`StagesChildren` (``staged_children``): children that must finish before the sized ones
  exist (TrainJob initializers), and finished ones kept at every size.
- :class:`PinsInputs`: the job reads another object (a TrainJob's runtime); what it read when it
  started is pinned in an owned ConfigMap and parsed from there ever after.
- :class:`RendersStatus`: the kind's status is not Kubeflow's ``JobStatus``; the reconciler keeps
  its Kubeflow working block and the plugin translates it from and to the stored status.
- :class:`CountsJobs` (``counted_by``): upstream metric families that also count the kind's jobs.
- :class:`ReadsRuntimes` (``names_runtime``): a runtime event re-enqueues the jobs naming it.

The protocols live in ``lattice.frameworks.capabilities``, the values in
``lattice.frameworks.model``; this module re-exports both, so a plugin imports one place. The ML
policies every kind composes (torch, MPI, MXNet) are in ``lattice.frameworks.policies``.

``parse`` may also raise :class:`JobNotReady` (an input the job needs does not exist yet): the
job then waits, unstarted, with a condition saying why, and the scheduler skips it; it is never
failed for it (level-triggered: the next parse may succeed).

Pods are read through :class:`PodView`, a structural protocol that the informer cache's slim
``PodInfo`` satisfies, so this layer never imports the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from lattice.api.constants import Resource
from lattice.frameworks.capabilities import (
    CountsJobs,
    ObservesChildren,
    PinsInputs,
    ReadsRuntimes,
    RendersStatus,
    StagesChildren,
)
from lattice.frameworks.messages import Messages, messages_of
from lattice.frameworks.model import (
    MANAGED_LABEL,
    NODE_UNIT,
    OUR_MANAGERS,
    Children,
    ContainerView,
    Demand,
    InvalidJob,
    JobNotReady,
    OperatorContext,
    PodView,
    Problem,
    Progress,
    ReplicaCounts,
    RunPolicyView,
    managed_elsewhere,
)

__all__ = [
    "MANAGED_LABEL",
    "NODE_UNIT",
    "OUR_MANAGERS",
    "Children",
    "ContainerView",
    "CountsJobs",
    "Demand",
    "InvalidJob",
    "JobNotReady",
    "JobPlugin",
    "Messages",
    "ObservesChildren",
    "OperatorContext",
    "PinsInputs",
    "PodView",
    "Problem",
    "Progress",
    "ReadsRuntimes",
    "RendersStatus",
    "ReplicaCounts",
    "RunPolicyView",
    "StagesChildren",
    "managed_elsewhere",
    "messages_of",
]

M = TypeVar("M")


class JobPlugin(Protocol[M]):
    """One job kind. Implementations are stateless; the registry holds one instance per kind."""

    @property
    def resource(self) -> Resource:
        """Group, version, kind and plural of the job's custom resource."""
        ...

    @property
    def scheduling_path(self) -> tuple[str, ...]:
        """Path of the scheduler's state block: ``("status",)`` or ``("status", "lattice")``."""
        ...

    @property
    def exec_path(self) -> tuple[str, ...]:
        """Path of the Kubeflow execution status, e.g. ``("status", "execStatus")``."""
        ...

    def parse(self, obj: Mapping[str, Any], ctx: OperatorContext) -> M:
        """The typed job, or :class:`InvalidJob` naming each field and rule broken."""
        ...

    def demand(self, job: M, ctx: OperatorContext) -> Demand:
        """Priority, size range and units the scheduler works with."""
        ...

    def run_policy(self, job: M) -> RunPolicyView:
        """Clean-up, TTL, deadline and retry policy of the job."""
        ...

    def children(self, job: M, *, size: int, ctx: OperatorContext) -> Children:
        """Every child object the job should have at ``size``."""
        ...

    @property
    def preempted_condition(self) -> str:
        """How a started job that the scheduler stopped shows it: ``"Running"`` (Running=False,
        reason ``<Kind>Waiting``) or ``"Suspended"`` (Suspended=True, reason ``Preempted``, as
        Kubeflow kinds show an external stop; the user's ``suspend`` field is never touched)."""
        ...

    def progress(
        self,
        job: M,
        *,
        size: int,
        pods: Sequence[PodView],
        others: Mapping[str, Mapping[str, Any]],
    ) -> Progress:
        """The kind's status rules over the observed, non-deleted pods of the job.

        ``others`` holds the job's other observed children (batch Jobs, ConfigMaps, Secrets) as
        raw objects keyed ``"<Kind>/<name>"``, e.g. ``"Job/pi-launcher"``.
        """
        ...
