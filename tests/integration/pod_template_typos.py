"""Typos inside pod templates (and the Kubernetes types the Trainer API embeds) that the CRDs must
refuse at ``kubectl apply``, naming the field.

Pure data: ``tests/integration/test_crd_pod_templates.py`` applies each case to a real
kube-apiserver; ``tests/unit/api/test_api_trainer_manifests.py`` checks offline that the schema
refuses it. Each case is a valid manifest (``invalid_manifests.valid``) with one typo at ``path``;
``expect`` holds what the apiserver's message must contain: the full field path, and for enums and
patterns the bad value.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from tests.integration.invalid_manifests import valid

__all__ = ["POD_TEMPLATE_TYPOS", "TypoCase"]


@dataclass(frozen=True)
class TypoCase:
    """``manifest`` has one typo; the apiserver's message must contain every ``expect`` string."""

    id: str
    manifest: dict[str, Any]
    expect: tuple[str, ...]


def _at(node: Any, path: str) -> tuple[Any, str | int]:
    parts = path.replace("[", ".[").split(".")
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
    last = parts[-1]
    return node, int(last[1:-1]) if last.startswith("[") else last


def _typo(case_id: str, kind: str, path: str, value: Any, *expect: str) -> TypoCase:
    manifest = valid(kind, f"typo-{case_id}")
    parent, key = _at(manifest, path)
    if isinstance(key, int) and key == len(parent):
        parent.append(copy.deepcopy(value))
    else:
        parent[key] = copy.deepcopy(value)
    return TypoCase(id=case_id, manifest=manifest, expect=expect)


_TJ_POD = "spec.replicaSpecs.template.spec"
_MPI_POD = "spec.mpiReplicaSpecs.Worker.template.spec"
_MX_POD = "spec.mxReplicaSpecs.Server.template.spec"
_RT_JOB = "spec.template.spec.replicatedJobs[0].template.spec"
_RT_POD = f"{_RT_JOB}.template.spec"
_PATCH_POD = (
    "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec"
    ".template.spec"
)
_UNKNOWN = 'unknown field "{}"'


def _unknown(path: str) -> str:
    return _UNKNOWN.format(path)


POD_TEMPLATE_TYPOS: list[TypoCase] = [
    _typo(
        "tj-resouces",
        "TrainingJob",
        f"{_TJ_POD}.containers[0].resouces",
        {"limits": {"cpu": "1"}},
        _unknown(f"{_TJ_POD}.containers[0].resouces"),
    ),
    _typo(
        "tj-image-pull-policy",
        "TrainingJob",
        f"{_TJ_POD}.containers[0].imagePullPolicy",
        "Alwayss",
        f"{_TJ_POD}.containers[0].imagePullPolicy",
        'Unsupported value: "Alwayss"',
    ),
    _typo(
        "mpi-worker-restart-policy-in-pod",
        "MPIJob",
        f"{_MPI_POD}.restartPolicy",
        "Sometimes",
        f"{_MPI_POD}.restartPolicy",
        'Unsupported value: "Sometimes"',
    ),
    _typo(
        "mpi-volume-mounts-typo",
        "MPIJob",
        f"{_MPI_POD}.containers[0].volumeMount",
        [{"name": "x", "mountPath": "/x"}],
        _unknown(f"{_MPI_POD}.containers[0].volumeMount"),
    ),
    _typo(
        "mx-memory-quantity",
        "MXJob",
        f"{_MX_POD}.containers[0].resources",
        {"limits": {"memory": "4GB"}},
        f"{_MX_POD}.containers[0].resources.limits.memory",
        "4GB",
    ),
    _typo(
        "mx-port-as-string",
        "MXJob",
        f"{_MX_POD}.containers[0].ports",
        [{"containerPort": "9091"}],
        f"{_MX_POD}.containers[0].ports[0].containerPort",
        "must be of type integer",
    ),
    _typo(
        "rt-job-spec-backoff",
        "TrainingRuntime",
        f"{_RT_JOB}.backofLimit",
        3,
        _unknown(f"{_RT_JOB}.backofLimit"),
    ),
    _typo(
        "rt-container-resouces",
        "TrainingRuntime",
        f"{_RT_POD}.containers[0].resouces",
        {"limits": {"cpu": "1"}},
        _unknown(f"{_RT_POD}.containers[0].resouces"),
    ),
    _typo(
        "ctr-port-protocol",
        "ClusterTrainingRuntime",
        f"{_RT_POD}.containers[0].ports",
        [{"containerPort": 29500, "protocol": "TPC"}],
        f"{_RT_POD}.containers[0].ports[0].protocol",
        'Unsupported value: "TPC"',
    ),
    _typo(
        "ctr-toleration-operator",
        "ClusterTrainingRuntime",
        f"{_RT_POD}.tolerations",
        [{"key": "gpu", "operater": "Exists"}],
        _unknown(f"{_RT_POD}.tolerations[0].operater"),
    ),
    _typo(
        "ctr-failure-policy-action",
        "ClusterTrainingRuntime",
        "spec.template.spec.failurePolicy",
        {"rules": [{"name": "r", "action": "Restart"}]},
        "spec.template.spec.failurePolicy.rules[0].action",
        'Unsupported value: "Restart"',
    ),
    _typo(
        "tjob-trainer-resources",
        "TrainJob",
        "spec.trainer.resourcesPerNode",
        {"limit": {"nvidia.com/gpu": 1}},
        _unknown("spec.trainer.resourcesPerNode.limit"),
    ),
    _typo(
        "tjob-env-value-from",
        "TrainJob",
        "spec.trainer.env",
        [{"name": "A", "valueFrm": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        _unknown("spec.trainer.env[0].valueFrm"),
    ),
    _typo(
        "tjob-override-volume",
        "TrainJob",
        "spec.podTemplateOverrides",
        [{"targetJobs": [{"name": "node"}], "spec": {"volumes": [{"name": "v", "emptyDirr": {}}]}}],
        _unknown("spec.podTemplateOverrides[0].spec.volumes[0].emptyDirr"),
    ),
    _typo(
        "tjob-patch-affinity",
        "TrainJob",
        "spec.runtimePatches",
        [
            {
                "manager": "example.com/m",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "spec": {
                                            "template": {"spec": {"affinity": {"nodeAfinity": {}}}}
                                        }
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ],
        _unknown(f"{_PATCH_POD}.affinity.nodeAfinity"),
    ),
]
