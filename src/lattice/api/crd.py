"""CustomResourceDefinitions generated from the models, and the ``lattice crds`` entry point.

Contract: ``DESCRIPTORS`` holds one ``CRDDescriptor`` per kind (names, scope, printer columns,
models, root-level rules). ``render_crds()`` maps a file name such as
``breezeml.ai_trainingjobs.yaml`` to deterministic YAML; ``render_manifests()`` adds
``kustomization.yaml``; ``write_crds(dir)`` writes them. ``main(argv)`` writes into
``deploy/crds`` (or ``--output-dir``); with ``--check`` it writes nothing and exits 1, listing
every missing, stale or unexpected file. Rendering raises if a generated schema is not
structural. Pure apart from ``write_crds``/``main``.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.config import JsonDict

from lattice.api.common import KubeflowJobStatus
from lattice.api.constants import (
    CATEGORY,
    CLUSTER_TRAINING_RUNTIME,
    MPIJOB,
    MXJOB,
    TRAINING_RUNTIME,
    TRAININGJOB,
    TRAINJOB,
    Resource,
)
from lattice.api.mpijob import MPIJob, MPIJobSpec, mpijob_root_rules
from lattice.api.mxjob import MXJob, MXJobSpec, mxjob_root_rules
from lattice.api.runtime import ClusterTrainingRuntime, TrainingRuntime, TrainingRuntimeSpec
from lattice.api.schema import canonical, structural_schema, structural_violations
from lattice.api.trainingjob import (
    TrainingJob,
    TrainingJobSpec,
    TrainingJobStatus,
    trainingjob_root_rules,
)
from lattice.api.trainjob import TrainJob, TrainJobSpec, TrainJobStatus, trainjob_root_rules

__all__ = [
    "DEFAULT_OUTPUT_DIR",
    "DESCRIPTORS",
    "CRDDescriptor",
    "PrinterColumn",
    "crd_manifest",
    "main",
    "render_crds",
    "render_manifests",
    "stale_files",
    "write_crds",
]

DEFAULT_OUTPUT_DIR = Path("deploy/crds")
KUSTOMIZATION = "kustomization.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry; priority 1 shows only with ``-o wide``."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            entry["description"] = self.description
        if self.priority:
            entry["priority"] = self.priority
        return entry


@dataclass(frozen=True, slots=True, kw_only=True)
class CRDDescriptor:
    """Everything needed to render one CRD."""

    resource: Resource
    singular: str
    kind_model: type[BaseModel]
    spec_model: type[BaseModel]
    status_model: type[BaseModel] | None
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    root_rules: tuple[JsonDict, ...] = ()
    categories: tuple[str, ...] = field(default=(CATEGORY,))

    @property
    def file_name(self) -> str:
        """``<group>_<plural>.yaml``, the controller-gen naming."""
        return f"{self.resource.group}_{self.resource.plural}.yaml"


_AGE = PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp")


def _scheduler_columns(block: str) -> tuple[PrinterColumn, ...]:
    """Stage and size, then (``-o wide``) min, max, priority and queue position, read from the
    scheduler block at ``block`` (the scheduler writes min, max and priority there, since a
    Kubeflow job's are computed from its replicas, elasticPolicy and priorityClass)."""
    return (
        PrinterColumn(
            name="Stage",
            type="string",
            json_path=f"{block}.stage",
            description="Lattice scheduler stage",
        ),
        PrinterColumn(name="Size", type="integer", json_path=f"{block}.currentSize"),
        PrinterColumn(name="Min", type="integer", json_path=f"{block}.minSize", priority=1),
        PrinterColumn(name="Max", type="integer", json_path=f"{block}.maxSize", priority=1),
        PrinterColumn(name="Priority", type="integer", json_path=f"{block}.priority", priority=1),
        PrinterColumn(
            name="Position", type="integer", json_path=f"{block}.queuePosition", priority=1
        ),
    )


# State: the last condition changed, as upstream shows it; the reconciler appends Suspended
# last when the scheduler preempts a job, so a preempted job never shows Running.
_KUBEFLOW_COLUMNS = (
    PrinterColumn(name="State", type="string", json_path=".status.conditions[-1:].type"),
    *_scheduler_columns(".status.lattice"),
    _AGE,
)


_Models = tuple[type[BaseModel], type[BaseModel], type[BaseModel] | None]


def _descriptor(
    resource: Resource,
    *,
    models: _Models,
    short_name: str = "",
    root_rules: Iterable[JsonDict] = (),
) -> CRDDescriptor:
    """A kind whose singular name is its lowercased kind; a status model means Kubeflow columns."""
    kind_model, spec_model, status_model = models
    return CRDDescriptor(
        resource=resource,
        singular=resource.kind.lower(),
        kind_model=kind_model,
        spec_model=spec_model,
        status_model=status_model,
        short_names=(short_name,) if short_name else (),
        printer_columns=_KUBEFLOW_COLUMNS if status_model is not None else (),
        root_rules=tuple(root_rules),
    )


# (resource, (kind, spec, status) models, short name, root rules) of the Kubeflow-style jobs
_KUBEFLOW_JOBS: tuple[tuple[Resource, _Models, str, list[JsonDict]], ...] = (
    (MPIJOB, (MPIJob, MPIJobSpec, KubeflowJobStatus), "mpij", mpijob_root_rules()),
    (MXJOB, (MXJob, MXJobSpec, KubeflowJobStatus), "mxj", mxjob_root_rules()),
    (TRAINJOB, (TrainJob, TrainJobSpec, TrainJobStatus), "tjob", trainjob_root_rules()),
)

DESCRIPTORS: tuple[CRDDescriptor, ...] = (
    CRDDescriptor(
        resource=TRAININGJOB,
        singular="trainingjob",
        kind_model=TrainingJob,
        spec_model=TrainingJobSpec,
        status_model=TrainingJobStatus,
        short_names=("tj",),
        printer_columns=(
            PrinterColumn(name="Stage", type="string", json_path=".status.stage"),
            PrinterColumn(name="Size", type="integer", json_path=".status.currentSize"),
            PrinterColumn(name="Min", type="integer", json_path=".spec.minSize"),
            PrinterColumn(name="Max", type="integer", json_path=".spec.maxSize"),
            PrinterColumn(name="Priority", type="integer", json_path=".spec.priority"),
            PrinterColumn(
                name="Position", type="integer", json_path=".status.queuePosition", priority=1
            ),
            _AGE,
        ),
        root_rules=tuple(trainingjob_root_rules()),
    ),
    *(
        _descriptor(res, models=models, short_name=short, root_rules=rules)
        for res, models, short, rules in _KUBEFLOW_JOBS
    ),
    _descriptor(TRAINING_RUNTIME, models=(TrainingRuntime, TrainingRuntimeSpec, None)),
    _descriptor(
        CLUSTER_TRAINING_RUNTIME, models=(ClusterTrainingRuntime, TrainingRuntimeSpec, None)
    ),
)


def _root_schema(descriptor: CRDDescriptor) -> dict[str, Any]:
    metadata: dict[str, Any] = {"type": "object"}
    if descriptor.root_rules:
        # Declaring name (and generateName) lets root rules point fieldPath at metadata.name;
        # the apiserver allows exactly these two properties under metadata.
        metadata["properties"] = {"name": {"type": "string"}, "generateName": {"type": "string"}}
    properties: dict[str, Any] = {
        "apiVersion": {
            "type": "string",
            "description": "APIVersion defines the versioned schema of this representation of an "
            "object.",
        },
        "kind": {
            "type": "string",
            "description": "Kind is a string value representing the REST resource this object "
            "represents.",
        },
        "metadata": metadata,
        "spec": structural_schema(descriptor.spec_model),
    }
    if descriptor.status_model is not None:
        properties["status"] = structural_schema(descriptor.status_model)
    root: dict[str, Any] = {
        "type": "object",
        "description": (descriptor.kind_model.__doc__ or descriptor.resource.kind).strip(),
        "required": ["spec"],
        "properties": properties,
    }
    if descriptor.root_rules:
        root["x-kubernetes-validations"] = [dict(rule) for rule in descriptor.root_rules]
    problems = structural_violations(root)
    if problems:
        raise ValueError(f"{descriptor.resource.kind}: schema is not structural: {problems}")
    result: dict[str, Any] = canonical(root)
    return result


def crd_manifest(descriptor: CRDDescriptor) -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition of one kind, as a dict."""
    resource = descriptor.resource
    names: dict[str, Any] = {
        "kind": resource.kind,
        "listKind": f"{resource.kind}List",
        "plural": resource.plural,
        "singular": descriptor.singular,
    }
    if descriptor.short_names:
        names["shortNames"] = list(descriptor.short_names)
    if descriptor.categories:
        names["categories"] = list(descriptor.categories)
    version: dict[str, Any] = {"name": resource.version, "served": True, "storage": True}
    if descriptor.printer_columns:
        version["additionalPrinterColumns"] = [c.to_dict() for c in descriptor.printer_columns]
    version["schema"] = {"openAPIV3Schema": _root_schema(descriptor)}
    if descriptor.status_model is not None:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": resource.crd_name,
            "labels": {"app.kubernetes.io/part-of": "lattice"},
        },
        "spec": {
            "group": resource.group,
            "names": names,
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "versions": [version],
        },
    }


_HEADER = "# Generated by `lattice crds` from src/lattice/api; do not edit.\n"


_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: same text, 4x faster


def _dump(document: dict[str, Any]) -> str:
    body = yaml.dump(
        document,
        Dumper=_DUMPER,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
    return _HEADER + "---\n" + body


def _render() -> dict[str, str]:
    return {d.file_name: _dump(crd_manifest(d)) for d in DESCRIPTORS}


@functools.cache
def _rendered() -> tuple[tuple[str, str], ...]:
    return tuple(_render().items())


def render_crds() -> dict[str, str]:
    """File name -> YAML text of every CRD, in a stable order and byte-for-byte deterministic
    (rendered once per process: the models are fixed at import)."""
    return dict(_rendered())


def render_manifests() -> dict[str, str]:
    """``render_crds()`` plus the ``kustomization.yaml`` listing them."""
    files = render_crds()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(files),
    }
    return {**files, KUSTOMIZATION: _dump(kustomization)}


def write_crds(directory: Path | str) -> list[Path]:
    """Write every manifest into ``directory`` (created if needed); returns the paths written."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_manifests().items():
        path = target / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale_files(directory: Path | str) -> list[str]:
    """Names of files in ``directory`` that are missing, differ from, or are not generated."""
    target = Path(directory)
    expected = render_manifests()
    stale = [
        name
        for name, text in expected.items()
        if not (target / name).is_file() or (target / name).read_text(encoding="utf-8") != text
    ]
    if target.is_dir():
        stale.extend(sorted(p.name for p in target.glob("*.yaml") if p.name not in expected))
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    """``lattice crds [--output-dir/--output DIR] [--check]``; returns the process exit code."""
    parser = argparse.ArgumentParser(
        prog="lattice crds", description="Generate the Lattice CRDs from the API models."
    )
    parser.add_argument(
        "--output-dir",
        "--output",
        dest="output_dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help=f"directory to write to (default: {DEFAULT_OUTPUT_DIR})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if any file is missing, stale or unexpected",
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.output_dir)
        for name in stale:
            print(f"stale: {args.output_dir / name}", file=sys.stderr)
        if stale:
            print("run `lattice crds` to regenerate", file=sys.stderr)
            return 1
        return 0
    for path in write_crds(args.output_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
