"""The optional capabilities of a job-kind plugin, looked up with ``isinstance``.

Contract: a plugin without a capability gets the reconciler's default for it. Each protocol is
``runtime_checkable`` and pure (values in, values out); see ``lattice.frameworks.base`` for when
the reconciler calls each one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lattice.primitives.objects import Obj

if TYPE_CHECKING:
    from lattice.frameworks.base import Children, OperatorContext, PodView

__all__ = [
    "CountsJobs",
    "IgnoresFields",
    "ObservesChildren",
    "PinsInputs",
    "ReadsRuntimes",
    "RendersStatus",
    "StagesChildren",
]


@runtime_checkable
class ObservesChildren(Protocol):
    """Optional plugin capability: refine the desired children with what is observed."""

    def observed_children(
        self,
        job: Any,
        desired: Children,
        *,
        pods: Sequence[PodView],
        others: Mapping[str, Mapping[str, Any]],
    ) -> Children:
        """``desired`` (``children(job, size)``) adjusted to the observed, non-deleted ``pods`` and
        the other children ``others`` (keyed ``"<Kind>/<name>"``, as in ``progress``).

        Whatever it drops that already exists is deleted by the reconciler, so a gate must keep
        an object once it exists.
        """
        ...


@runtime_checkable
class IgnoresFields(Protocol):
    """Optional plugin capability: fields a job may set that Lattice accepts and ignores."""

    def ignored_fields(self, job: Any) -> Sequence[tuple[str, str]]:
        """``(field path, why it is ignored)`` for each such field ``job`` sets. The reconciler
        emits one Warning Event ``IgnoredField`` for each, once per ``metadata.generation``,
        after its status write."""
        ...


@runtime_checkable
class StagesChildren(Protocol):
    """Optional plugin capability: children that run to completion before the sized ones."""

    def staged_children(
        self,
        job: Any,
        desired: Children,
        *,
        size: int,
        pods: Sequence[PodView],
        ctx: OperatorContext,
    ) -> Children:
        """``desired`` (``children(job, size)``) with the staged pods (outside the gang, e.g.
        initializers) added first, and at ``size`` > 0 only the pods whose turn has come in the
        kind's order (TrainJob: ``dependsOn``), plus those that already exist; at 0 the staged
        pods that already Succeeded (kept, never created). ``pods`` are the observed ones."""
        ...


@runtime_checkable
class PinsInputs(Protocol):
    """Optional plugin capability: pin the inputs ``parse`` read (a runtime) when the job starts.

    The reconciler creates the ``pin`` ConfigMap (owned by the job) before the job's first pods,
    keeps it while the job lives, and parses with ``parse_pinned`` whenever it exists, so editing
    or deleting the input never changes a started job.
    """

    def pinned_name(self, obj: Mapping[str, Any]) -> str:
        """The name of the job's pin ConfigMap."""
        ...

    def pin(self, obj: Mapping[str, Any], ctx: OperatorContext) -> Obj | None:
        """The pin ConfigMap recording what ``parse(obj, ctx)`` read (None: nothing to pin)."""
        ...

    def parse_pinned(
        self, obj: Mapping[str, Any], pinned: Mapping[str, Any], ctx: OperatorContext
    ) -> Any:
        """``parse`` over the pinned inputs (``pinned`` is the observed ConfigMap)."""
        ...


@runtime_checkable
class RendersStatus(Protocol):
    """Optional plugin capability: the kind stores its own status shape at ``exec_path``.

    The reconciler works on a Kubeflow-style block (conditions ``Created``, ``Running``,
    ``Succeeded``, ``Failed``, ``Suspended``...); ``read_status`` derives that block from the
    stored status, ``render_status`` turns it back into the stored shape, and
    ``observed_status`` adds the kind's own observed fields (e.g. ``jobsStatus``).
    """

    def read_status(self, stored: Mapping[str, Any]) -> Obj:
        """The Kubeflow working block for the stored status block."""
        ...

    def observed_status(
        self, job: Any, *, size: int, pods: Sequence[PodView], suspended: bool
    ) -> Obj:
        """Fields of the kind's status computed from the observed pods."""
        ...

    def render_status(
        self,
        block: Mapping[str, Any],
        *,
        stored: Mapping[str, Any],
        generation: int | None,
        now: datetime,
    ) -> Obj:
        """The status block to store for the working ``block`` (``stored``: the current one)."""
        ...


@runtime_checkable
class CountsJobs(Protocol):
    """Optional plugin capability: upstream metric families that also count the kind's jobs
    (besides training-operator's ``training_operator_jobs_*_total``), e.g. ``mpi-operator``."""

    @property
    def counted_by(self) -> tuple[str, ...]: ...


@runtime_checkable
class ReadsRuntimes(Protocol):
    """Optional plugin capability: the kind's jobs read runtime objects (TrainingRuntime,
    ClusterTrainingRuntime), so a runtime added, changed or deleted re-enqueues the jobs naming
    it (a job waiting for its runtime starts once it exists) and wakes the scheduler."""

    def names_runtime(self, obj: Mapping[str, Any], runtime: Mapping[str, Any]) -> bool:
        """Whether the raw job ``obj`` refers to the raw runtime object ``runtime``."""
        ...
