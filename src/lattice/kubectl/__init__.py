"""``kubectl lattice``: the scheduler's queue, and why a job waits, from CR status and events.

Contract:
- Installed as the console script ``kubectl-lattice`` (entry point ``lattice.kubectl:main``), so
  kubectl's plugin mechanism runs it for ``kubectl lattice ...``. It connects with
  :func:`lattice.kube.client.connect`: ``--kubeconfig``, else ``$KUBECONFIG`` (a path list),
  else ``~/.kube/config``; ``--context``. Without ``-n`` the namespace is the context's
  (``default`` when it names none).
- It only reads: the jobs of every kind (TrainingJob ``breezeml.ai/v1`` keeps the scheduler block
  in ``status``; MPIJob ``kubeflow.org/v2beta1``, MXJob ``kubeflow.org/v1`` and TrainJob
  ``trainer.kubeflow.org/v1alpha1`` in ``status.lattice``), events.k8s.io/v1 Events, and, to
  get priority and sizes as the operator does (the plugins' ``parse`` + ``demand``),
  PriorityClasses and Trainer runtimes. It never recomputes a decision: stage, position,
  ``lastDecision``, ``reason`` and ``message`` are what the scheduler persisted.
- ``queue [-n NS | -A]``: one row per job in scheduler order (:func:`rows.queue_order`), columns
  as in :mod:`lattice.kubectl.render`.
- ``explain KIND/NAME [-n NS]``: the job's state, a verdict, the jobs ahead of a ``Waiting`` job
  and its recent events, newest last.
- A kind whose CRD is not installed is skipped quietly. Exit 0 on success, 1 on an API error or
  a job not found, 2 on bad usage.

Layout: :mod:`~lattice.kubectl.rows` (pure: raw job -> row, order, context),
:mod:`~lattice.kubectl.render` (pure: text), :mod:`~lattice.kubectl.commands` (reads, CLI).
"""

from __future__ import annotations

from lattice.kubectl.commands import main

__all__ = ["main"]
