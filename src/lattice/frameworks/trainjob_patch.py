"""How a TrainJob's overrides and patches change its runtime's templates, as upstream merges them.

Contract (pure; facts from Kubeflow Trainer v2.1 ``mergePodTemplateOverrides`` and v2.2+
``mergeRuntimePatches``, both Kubernetes strategic merge patches):

- ``strategic_merge(base, patch)``: the strategic merge of ``patch`` into ``base`` for pod
  templates and what they embed: maps merge key by key (a ``None`` value deletes the key); the
  lists Kubernetes declares ``patchStrategy=merge`` merge entry by entry on their key
  (``containers``, ``initContainers``, ``ephemeralContainers``, ``volumes``, ``env``,
  ``imagePullSecrets``, ``schedulingGates``, ``resourceClaims`` by ``name``; ``volumeMounts`` by
  ``mountPath``; ``ports`` by ``containerPort``; ``volumeDevices`` by ``devicePath``;
  ``hostAliases`` by ``ip``; ``topologySpreadConstraints`` by ``topologyKey``), a matched entry
  merged recursively, a new one appended; every other list (``tolerations``, ``command``,
  ``args``, ``envFrom`` ...) is replaced. Neither input is changed.
- ``pod_template_patches(tj, name)``: the v2.1 ``podTemplateOverrides`` entries targeting the
  replicatedJob ``name``, in list order, each as a PodTemplateSpec patch (metadata labels and
  annotations, spec).
- ``runtime_patches(tj, name)``: per ``runtimePatches`` entry (list order, one per manager) that
  patches the replicatedJob ``name``, its Job-template patch (``metadata`` and
  ``spec.template``).
- ``patched_jobset_meta(tj, labels, annotations)``: the JobSet-level labels and annotations after
  every runtime patch's ``template.metadata`` (later managers win).
- ``patch_problems(tj, names)``: a runtime patch or a podTemplateOverride naming a
  replicatedJob the runtime lacks (upstream's webhook refuses both).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from lattice.api.trainjob import TrainJob
from lattice.frameworks.base import Problem
from lattice.primitives.objects import Obj

__all__ = [
    "MERGE_KEYS",
    "patch_problems",
    "patched_jobset_meta",
    "pod_template_patches",
    "runtime_patches",
    "strategic_merge",
]

#: Lists merged entry by entry (Kubernetes ``patchStrategy=merge``), by field name -> merge key.
MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}


def strategic_merge(base: Mapping[str, Any], patch: Mapping[str, Any]) -> Obj:
    """``patch`` merged into ``base`` as a strategic merge patch (see the module docstring)."""
    result: Obj = copy.deepcopy(dict(base))
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = strategic_merge(result[key], value)
        elif key in MERGE_KEYS and isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, key=MERGE_KEYS[key])
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(base: Sequence[Any], patch: Sequence[Any], *, key: str) -> list[Any]:
    result = [copy.deepcopy(e) for e in base]
    for entry in patch:
        if not isinstance(entry, Mapping):
            result.append(copy.deepcopy(entry))
            continue
        at = next(
            (
                i
                for i, e in enumerate(result)
                if isinstance(e, Mapping) and e.get(key) == entry.get(key)
            ),
            None,
        )
        if at is None:
            result.append(copy.deepcopy(dict(entry)))
        else:
            result[at] = strategic_merge(result[at], entry)
    return result


def _dump(model: Any) -> Obj:
    dumped: Obj = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def pod_template_patches(tj: TrainJob, name: str) -> Iterator[Obj]:
    """PodTemplateSpec patches of the v2.1 ``podTemplateOverrides`` targeting ``name``."""
    for override in tj.spec.pod_template_overrides or ():
        if not any(t.name == name for t in override.target_jobs):
            continue
        patch: Obj = {}
        if override.metadata is not None:
            meta = _dump(override.metadata)
            if meta:
                patch["metadata"] = meta
        if override.spec is not None:
            patch["spec"] = _dump(override.spec)
        yield patch


def runtime_patches(tj: TrainJob, name: str) -> Iterator[Obj]:
    """Job-template patches (``metadata``, ``spec.template``) of the runtime patches of
    ``name``, in list order."""
    for patch in tj.spec.runtime_patches or ():
        template = patch.training_runtime_spec.template if patch.training_runtime_spec else None
        spec = template.spec if template else None
        for rjob in (spec.replicated_jobs if spec else None) or ():
            if rjob.name == name and rjob.template is not None:
                yield _dump(rjob.template)


def patched_jobset_meta(
    tj: TrainJob, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The JobSet-level labels and annotations with every runtime patch's metadata merged."""
    out_labels, out_annotations = dict(labels), dict(annotations)
    for patch in tj.spec.runtime_patches or ():
        template = patch.training_runtime_spec.template if patch.training_runtime_spec else None
        meta = template.metadata if template else None
        if meta is not None:
            out_labels.update(meta.labels or {})
            out_annotations.update(meta.annotations or {})
    return out_labels, out_annotations


def patch_problems(tj: TrainJob, names: Sequence[str]) -> list[Problem]:
    """A runtime patch of a replicatedJob the runtime does not have."""
    problems: list[Problem] = []
    for i, patch in enumerate(tj.spec.runtime_patches or ()):
        template = patch.training_runtime_spec.template if patch.training_runtime_spec else None
        spec = template.spec if template else None
        for j, rjob in enumerate((spec.replicated_jobs if spec else None) or ()):
            if rjob.name not in names:
                where = (
                    f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec."
                    f"replicatedJobs[{j}].name"
                )
                why = f"{rjob.name!r} is not a replicatedJob of the runtime"
                problems.append(Problem(where, why))
    for i, override in enumerate(tj.spec.pod_template_overrides or ()):
        for target in override.target_jobs:
            if target.name not in names:
                why = f"{target.name!r} is not a replicatedJob of the runtime"
                problems.append(Problem(f"spec.podTemplateOverrides[{i}].targetJobs", why))
    return problems
