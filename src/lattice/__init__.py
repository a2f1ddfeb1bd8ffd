"""Lattice: a Kubernetes operator for distributed ML training.

One elastic, priority-preemptive scheduler decides the size of every TrainingJob, MPIJob, MXJob
and TrainJob; per-kind reconcilers turn that size into pods.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
