"""How a failed pod is classified: the job's fault or not, retryable or not.

Contract (pure): evicted or disruption-targeted pods are never the job's fault
(``is_disrupted``); exit codes of 128 and above (killed by a signal) are retryable, 1-127
permanent (training-operator ``IsRetryableExitCode``); ``must_recreate`` applies a replica's
restart policy to a Failed pod; ``exit_code`` picks the code that explains a pod's failure.
"""

from __future__ import annotations

from lattice.frameworks.base import PodView

__all__ = ["EVICTED_REASON", "exit_code", "is_disrupted", "is_retryable_exit_code", "must_recreate"]


#: ``status.reason`` of a pod the kubelet evicted (node pressure, API-initiated eviction).
EVICTED_REASON = "Evicted"


def is_disrupted(pod: PodView) -> bool:
    """Whether the pod was evicted or targeted by a disruption (preemption, node drain ...)."""
    return pod.reason == EVICTED_REASON or pod.disruption is not None


def is_retryable_exit_code(code: int) -> bool:
    """Exit codes 128+ (killed by a signal: OOM, SIGTERM on deletion) may succeed on a retry."""
    return code >= 128


def must_recreate(pod: PodView, policy: str, code: int | None) -> bool:
    """Whether a Failed pod of a replica with restart ``policy`` is replaced or fails the job.

    Evicted/disrupted: always replaced. Never: fails. ExitCode: replaced when ``code`` is 128+
    or unknown (None, 0), fails on 1-127. OnFailure/Always: the kubelet restarts containers in
    place, so a Failed pod is a pod-level failure it gave up on: replaced.
    """
    if is_disrupted(pod):
        return True
    if policy == "Never":
        return False
    if policy == "ExitCode":
        return not code or is_retryable_exit_code(code)
    return True


def exit_code(pod: PodView, container_name: str) -> int | None:
    """The exit code explaining the pod's failure.

    The named container's non-zero terminated code; else the first non-zero terminated code of
    any container; else the named container's code (0); else None (no container terminated).
    """
    main: int | None = None
    first_failed: int | None = None
    for container in pod.containers:
        if container.state != "terminated" or container.exit_code is None:
            continue
        if container.name == container_name:
            main = container.exit_code
        elif container.exit_code != 0 and first_failed is None:
            first_failed = container.exit_code
    if main:
        return main
    if first_failed is not None:
        return first_failed
    return main
