"""The ML policies (torch, MPI, JAX, XGBoost, Flux, MXNet), one module each, shared by every
job kind that runs them.

Contract: a policy module is pure and kind-neutral: it knows how a framework is wired (env,
hostfiles, ssh keys, rendezvous), never which kind asks. The per-kind plugins compose them.
"""

__all__: list[str] = []
