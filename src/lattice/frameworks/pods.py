"""Pure building blocks every job-kind plugin shares: names, labels, owner references, env,
node placement, headless Services, resource units and pod-failure classification.

Contract:
- Every function is pure and total over well-formed input: it never mutates its arguments
  (templates, containers and specs are copied before anything is changed) and never does I/O.
- Child names are ``<job>-<replica type, lower case>-<index>`` (``/`` becomes ``-``), as
  training-operator's ``GenGeneralName``.
- ``replica_labels`` gives the ``training.kubeflow.org/*`` labels upstream puts on pods and
  Services (``replica-type`` in lower case), ``job-role: master`` when asked, plus
  ``MANAGED_LABEL: "true"``. ``replica_selector`` is the subset that picks exactly one pod.
- ``with_env`` sets our variables by name (replacing the user's value for those names), adds the
  ``defaults`` the user did not set, and keeps every other user variable in its order.
- ``with_node_selector`` merges the operator's node selector into ``nodeSelector``; on a key both
  set, the operator wins, so pods land only in the pool the scheduler counted.
- ``with_exclusive_node`` adds a required pod anti-affinity on ``MANAGED_LABEL`` (Exists) over
  ``kubernetes.io/hostname``: in node mode one Lattice replica takes a whole node. The user's
  affinity terms are kept.
- ``container_units`` sums one resource over containers, a container's ``requests`` falling back
  to its ``limits`` (the apiserver defaults requests from limits). Quantities are integer units,
  rounded up, ``cpu`` in millicores (``quantity_units`` is ``lattice.primitives.quantity``'s
  ``resource_units``, re-exported).
- ``validation_problems`` turns pydantic errors into :class:`Problem` values on camelCase paths;
  ``unit_problems`` names each malformed quantity of the scheduling unit in a template.
- ``must_recreate``/``exit_code`` classify failed pods: evicted or disruption-targeted pods are
  never the job's fault; exit codes of 128 and above (killed by a signal) are retryable, 1-127
  are permanent (training-operator ``IsRetryableExitCode``).
- ``job_priority`` picks a Kubeflow job's priority: the first of the given PriorityClass names
  that ``ctx.priority_classes`` knows (an unknown name is skipped), else the integer annotation
  ``lattice.breezeml.ai/priority``, else ``ctx.default_priority``; ``priority_problems`` names a
  non-integer annotation.
- ``with_placement`` is ``with_node_selector`` plus, in node mode, ``with_exclusive_node``.
- ``ssh_auth_secret`` is a ``kubernetes.io/ssh-auth`` Secret whose key material is left empty and
  marked ``lattice.breezeml.ai/generate: ssh-keypair``: plugins are pure, the reconciler fills it.
- ``go_json`` serialises like Go's ``encoding/json.Marshal``: compact, keys in the given order
  (sort maps yourself), ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, other text as UTF-8.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from lattice.api.common import RunPolicy
from lattice.api.constants import (
    ANNOTATION_PRIORITY,
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)
from lattice.frameworks.base import (
    MANAGED_LABEL,
    InvalidJob,
    OperatorContext,
    PodView,
    Problem,
    RunPolicyView,
)
from lattice.primitives.quantity import resource_units as quantity_units

ModelT = TypeVar("ModelT", bound=BaseModel)

__all__ = [
    "ANNOTATION_GENERATE",
    "GENERATE_SSH_KEYPAIR",
    "HOSTNAME_TOPOLOGY_KEY",
    "SSH_PRIVATE_KEY",
    "SSH_PUBLIC_KEY",
    "child_name",
    "container_port",
    "container_units",
    "exit_code",
    "go_json",
    "headless_service",
    "is_disrupted",
    "is_retryable_exit_code",
    "job_priority",
    "must_recreate",
    "owner_reference",
    "pod_manifest",
    "pod_restart_policy",
    "priority_problems",
    "quantity_units",
    "replica_labels",
    "replica_selector",
    "run_policy_view",
    "service_ports",
    "ssh_auth_secret",
    "template_containers",
    "unit_problems",
    "validated",
    "validation_problems",
    "with_env",
    "with_exclusive_node",
    "with_node_selector",
    "with_placement",
]

Obj = dict[str, Any]

HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"
#: ``status.reason`` of a pod the kubelet evicted (node pressure, API-initiated eviction).
EVICTED_REASON = "Evicted"

# --------------------------------------------------------------------------- identity


def child_name(job_name: str, replica_type: str, index: int) -> str:
    """``<job>-<replica type, lower case>-<index>``, e.g. ``a-worker-0``."""
    return f"{job_name}-{replica_type.lower()}-{index}".replace("/", "-")


def owner_reference(*, api_version: str, kind: str, name: str, uid: str) -> Obj:
    """The controller ownerReference children carry (garbage-collected with the job)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def replica_selector(*, job_name: str, replica_type: str, index: int) -> dict[str, str]:
    """The labels that select exactly the pod ``index`` of ``replica_type`` of the job."""
    return {
        LABEL_JOB_NAME: job_name,
        LABEL_REPLICA_TYPE: replica_type.lower(),
        LABEL_REPLICA_INDEX: str(index),
    }


def replica_labels(
    *, job_name: str, replica_type: str, index: int, operator_name: str, master: bool = False
) -> dict[str, str]:
    """Every label Lattice puts on a replica's pod and Service."""
    labels = {
        LABEL_OPERATOR_NAME: operator_name,
        **replica_selector(job_name=job_name, replica_type=replica_type, index=index),
        MANAGED_LABEL: "true",
    }
    if master:
        labels[LABEL_JOB_ROLE] = "master"
    return labels


# --------------------------------------------------------------------------- manifests


def pod_manifest(
    *,
    name: str,
    namespace: str | None,
    template: Mapping[str, Any],
    labels: Mapping[str, str],
    owner: Mapping[str, Any],
    spec: Mapping[str, Any],
) -> Obj:
    """A Pod from the template's metadata (labels, annotations kept) and a prepared ``spec``.

    Our labels win over the template's on the same key; ``spec`` is deep-copied.
    """
    tmeta = template.get("metadata") or {}
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**(tmeta.get("labels") or {}), **labels}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    meta["ownerReferences"] = [dict(owner)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(spec)}


def container_port(container: Mapping[str, Any], port_name: str) -> int | None:
    """The ``containerPort`` of the port named ``port_name``, or None."""
    for port in container.get("ports") or ():
        if port.get("name") == port_name and port.get("containerPort") is not None:
            return int(port["containerPort"])
    return None


def service_ports(
    container: Mapping[str, Any], *, default_name: str, default_port: int
) -> list[Obj]:
    """Service ports mirroring the container's ports, or one ``default_name: default_port``.

    Unnamed container ports are named ``port-<number>`` (a Service with several ports needs
    names).
    """
    ports: list[Obj] = []
    for port in container.get("ports") or ():
        number = port.get("containerPort")
        if number is None:
            continue
        entry: Obj = {"name": port.get("name") or f"port-{number}", "port": int(number)}
        entry["targetPort"] = int(number)
        if port.get("protocol"):
            entry["protocol"] = port["protocol"]
        ports.append(entry)
    if not ports:
        ports.append({"name": default_name, "port": default_port, "targetPort": default_port})
    return ports


def headless_service(
    *,
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    ports: Sequence[Mapping[str, Any]],
    owner: Mapping[str, Any],
) -> Obj:
    """A headless Service (``clusterIP: None``): ``<name>`` resolves to the selected pod's IP."""
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    meta["ownerReferences"] = [dict(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "selector": dict(selector),
            "ports": [dict(p) for p in ports],
        },
    }


# --------------------------------------------------------------------------- pod spec edits


def with_env(
    container: Mapping[str, Any],
    ours: Sequence[tuple[str, str]],
    *,
    defaults: Sequence[tuple[str, str]] = (),
) -> Obj:
    """A copy of ``container`` whose ``env`` has ``ours`` set and ``defaults`` filled in.

    The user's entries for names in ``ours`` are dropped (ours are appended in order after the
    user's other variables); ``defaults`` are appended only for names the user did not set.
    """
    result = copy.deepcopy(dict(container))
    forced = {name for name, _ in ours}
    user = [e for e in result.get("env") or () if e.get("name") not in forced]
    present = {e.get("name") for e in user}
    env = user + [{"name": n, "value": v} for n, v in ours]
    env += [{"name": n, "value": v} for n, v in defaults if n not in present and n not in forced]
    result["env"] = env
    return result


def with_node_selector(spec: Mapping[str, Any], selector: Iterable[tuple[str, str]]) -> Obj:
    """A copy of ``spec`` whose ``nodeSelector`` also has ``selector`` (operator wins)."""
    result = dict(spec)
    pairs = dict(selector)
    if pairs:
        result["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **pairs}
    return result


def with_exclusive_node(spec: Mapping[str, Any]) -> Obj:
    """A copy of ``spec`` that refuses nodes already running a Lattice-managed pod."""
    result = dict(spec)
    affinity = copy.deepcopy(dict(spec.get("affinity") or {}))
    anti = affinity.setdefault("podAntiAffinity", {})
    terms = anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
    terms.append(
        {
            "labelSelector": {"matchExpressions": [{"key": MANAGED_LABEL, "operator": "Exists"}]},
            "topologyKey": HOSTNAME_TOPOLOGY_KEY,
        }
    )
    result["affinity"] = affinity
    return result


def pod_restart_policy(policy: str) -> str:
    """The pod ``restartPolicy`` for a replica policy: ExitCode is run as Never (we recreate)."""
    return "Never" if policy == "ExitCode" else policy


# --------------------------------------------------------------------------- units


def container_units(containers: Iterable[Mapping[str, Any]], resource: str) -> int:
    """Sum of ``resource`` over containers: ``requests``, else ``limits``, else 0."""
    total = 0
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if resource in requests:
            total += quantity_units(resource, requests[resource])
        elif resource in limits:
            total += quantity_units(resource, limits[resource])
    return total


def unit_problems(containers: Sequence[Any], resource: str, *, field: str) -> list[Problem]:
    """A problem per malformed ``resource`` quantity in ``field[i].resources.{requests,limits}``."""
    problems: list[Problem] = []
    for i, container in enumerate(containers):
        if not isinstance(container, Mapping):
            problems.append(Problem(f"{field}[{i}]", "must be an object"))
            continue
        resources = container.get("resources") or {}
        if not isinstance(resources, Mapping):
            problems.append(Problem(f"{field}[{i}].resources", "must be an object"))
            continue
        for kind in ("requests", "limits"):
            values = resources.get(kind) or {}
            if not isinstance(values, Mapping):
                problems.append(Problem(f"{field}[{i}].resources.{kind}", "must be an object"))
                continue
            value = values.get(resource)
            if value is None:
                continue
            try:
                quantity_units(resource, value)
            except ValueError:
                where = f"{field}[{i}].resources.{kind}[{resource}]"
                problems.append(Problem(where, f"must be a quantity, got {value!r}"))
    return problems


def validated(
    model: type[ModelT],
    obj: Mapping[str, Any],
    rules: Callable[[ModelT], Sequence[Problem]],
) -> ModelT:
    """``model`` validated from ``obj``, then checked by the kind's operator-side ``rules``;
    ``InvalidJob`` names every problem of the first stage that found any."""
    try:
        job = model.model_validate(obj)
    except ValidationError as exc:
        raise InvalidJob(validation_problems(exc)) from None
    problems = rules(job)
    if problems:
        raise InvalidJob(problems)
    return job


def validation_problems(exc: ValidationError) -> list[Problem]:
    """Pydantic errors as problems on camelCase paths: ``spec.containers[0].name``."""
    problems = []
    for error in exc.errors(include_url=False):
        path = ""
        for part in error["loc"]:
            path += f"[{part}]" if isinstance(part, int) else ("." if path else "") + str(part)
        problems.append(Problem(path or "(object)", error["msg"]))
    return problems


# --------------------------------------------------------------------------- failures


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


# --------------------------------------------------------------------------- Kubeflow kinds

#: Annotation on a child manifest whose content the reconciler must generate before creating it.
ANNOTATION_GENERATE = "lattice.breezeml.ai/generate"
#: ``ANNOTATION_GENERATE`` value: fill ``ssh-privatekey`` (PEM) and ``ssh-publickey``
#: (authorized_keys line) with a fresh key pair (mpi-operator: ECDSA P-521).
GENERATE_SSH_KEYPAIR = "ssh-keypair"
SSH_PRIVATE_KEY = "ssh-privatekey"
SSH_PUBLIC_KEY = "ssh-publickey"
_INTEGER = re.compile(r"^[+-]?\d+$")


def template_containers(template: Mapping[str, Any]) -> list[Obj]:
    """``template.spec.containers`` as a list (empty when missing or malformed)."""
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    return list(containers) if isinstance(containers, list) else []


def priority_problems(annotations: Mapping[str, str] | None) -> list[Problem]:
    """A problem when the ``lattice.breezeml.ai/priority`` annotation is not an integer."""
    value = (annotations or {}).get(ANNOTATION_PRIORITY)
    if value is None or _INTEGER.match(value.strip()):
        return []
    where = f"metadata.annotations[{ANNOTATION_PRIORITY}]"
    return [Problem(where, f"must be an integer, got {value!r}")]


def job_priority(
    *,
    classes: Iterable[str | None],
    annotations: Mapping[str, str] | None,
    ctx: OperatorContext,
) -> int:
    """The priority of a job: first known PriorityClass in ``classes``, annotation, default."""
    for name in classes:
        if name and name in ctx.priority_classes:
            return ctx.priority_classes[name]
    value = (annotations or {}).get(ANNOTATION_PRIORITY)
    if value is not None and _INTEGER.match(value.strip()):
        return int(value.strip())
    return ctx.default_priority


def with_placement(spec: Mapping[str, Any], ctx: OperatorContext) -> Obj:
    """The operator's node selector, and in node mode a whole node per pod."""
    result = with_node_selector(spec, ctx.node_selector)
    return with_exclusive_node(result) if ctx.node_mode else result


def ssh_auth_secret(
    *,
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    owner: Mapping[str, Any],
) -> Obj:
    """A ``kubernetes.io/ssh-auth`` Secret with empty keys, marked for key-pair generation."""
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    meta["annotations"] = {ANNOTATION_GENERATE: GENERATE_SSH_KEYPAIR}
    meta["ownerReferences"] = [dict(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "kubernetes.io/ssh-auth",
        "data": {SSH_PRIVATE_KEY: "", SSH_PUBLIC_KEY: ""},
    }


_GO_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json(value: object) -> str:
    """``value`` as Go's ``json.Marshal`` writes it (see the module docstring)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escape in _GO_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def run_policy_view(policy: RunPolicy, *, service_cleanup: str = "All") -> RunPolicyView:
    """A Kubeflow ``runPolicy`` as the reconciler reads it."""
    return RunPolicyView(
        clean_pod_policy=policy.clean_pod_policy.value,
        ttl_seconds_after_finished=policy.ttl_seconds_after_finished,
        active_deadline_seconds=policy.active_deadline_seconds,
        backoff_limit=policy.backoff_limit,
        service_cleanup=service_cleanup,
    )
