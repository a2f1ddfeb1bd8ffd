"""``kubectl lattice``: the scheduler's queue, and why a job waits, from CR status and events.

Contract:
- Installed as the console script ``kubectl-lattice`` (entry point ``lattice.kubectl:main``), so
  kubectl's plugin mechanism runs it for ``kubectl lattice ...``; by lattice-operator, or alone
  by the light ``kubectl-lattice`` distribution (``plugins/kubectl-lattice``: pydantic and
  PyYAML only). It reads through ``kubectl get --raw`` (:mod:`lattice.kubectl.transport`), so
  it authenticates exactly as kubectl does (``--kubeconfig``, ``--context`` passed through).
  Without ``-n`` the namespace is the context's (``default`` when it names none).
- It only reads: the jobs of every kind (TrainingJob ``breezeml.ai/v1`` keeps the scheduler block
  in ``status``; MPIJob ``kubeflow.org/v2beta1``, MXJob ``kubeflow.org/v1`` and TrainJob
  ``trainer.kubeflow.org/v1alpha1`` in ``status.lattice``), events.k8s.io/v1 Events, and, to
  get priority and sizes as the operator does (the plugins' ``parse`` + ``demand``),
  PriorityClasses and Trainer runtimes. It never recomputes a decision: stage, ``lastDecision``,
  ``reason`` and ``message`` are what the scheduler persisted; only the ``queuePosition`` of a
  waiting job past the first ten (which the scheduler does not persist) is computed, in the
  core's own order (:func:`rows.with_positions`).
- ``queue [-n NS | -A] [-o json|yaml]``: one row per job in scheduler order
  (:func:`rows.queue_order`), columns as in :mod:`lattice.kubectl.render`.
- ``explain KIND/NAME [-n NS]``: the scheduler's decision about the job and its own events
  first, then the jobs ahead of a ``Waiting`` job, then the job's other fields and events.
- A kind whose CRD is not installed is skipped quietly. Exit 0 on success, 1 on an API error or
  a job not found, 2 on bad usage.

Layout: :mod:`~lattice.kubectl.rows` (pure: raw job -> row, order, context),
:mod:`~lattice.kubectl.render` (pure: text), :mod:`~lattice.kubectl.transport` (kubectl get
--raw), :mod:`~lattice.kubectl.commands` (reads, CLI).
"""

from __future__ import annotations

from lattice.kubectl.commands import main

__all__ = ["main"]
