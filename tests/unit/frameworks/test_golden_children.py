"""Golden check: every example manifest (and a few variants that reach the other ML-policy
branches) rendered through its plugin is byte-identical to the committed snapshot.

The snapshot holds a SHA-256 digest of each rendered section (the full rendering is about a
megabyte), so a failure names the case and the section that changed. What is rendered, per
manifest and operator context: ``demand``, ``run_policy``, and at each size in {0, 1, min, max}:
``children``; at the top size, with every desired pod Running and Ready, also
``observed_children``, ``staged_children``, ``progress`` and the ``pin`` ConfigMap, for the
plugins with those capabilities. Key order counts: a digest is of the JSON text in manifest
order.

A change that alters a child on purpose regenerates the snapshot with
``LATTICE_UPDATE_GOLDEN=1 pytest tests/unit/frameworks/test_golden_children.py``; to review it,
``LATTICE_GOLDEN_DUMP=<file>`` writes the full rendering, before and after, for a diff.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from lattice.frameworks.base import (
    Children,
    JobPlugin,
    ObservesChildren,
    OperatorContext,
    PinsInputs,
    StagesChildren,
)
from lattice.frameworks.registry import plugin_for
from lattice.primitives.objects import Obj
from lattice.runtime.projections import pod_info

ROOT = Path(__file__).parents[3]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).with_name("golden_children.json")
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")


def _documents() -> list[tuple[str, Obj]]:
    docs: list[tuple[str, Obj]] = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict):
                docs.append((f"{path.relative_to(ROOT)}#{i}", doc))
    return docs


def _runtimes(docs: list[tuple[str, Obj]]) -> dict[str, Obj]:
    out: dict[str, Obj] = {}
    for _, doc in docs:
        if doc.get("kind") in RUNTIME_KINDS:
            meta = doc["metadata"]
            ns = "default" if doc["kind"] == "TrainingRuntime" else ""
            out[f"{doc['kind']}/{ns}/{meta['name']}"] = doc
    elastic = copy.deepcopy(out["ClusterTrainingRuntime//torch-distributed"])
    elastic["metadata"]["name"] = "torch-elastic"
    del elastic["spec"]["mlPolicy"]["numNodes"]
    elastic["spec"]["mlPolicy"]["torch"]["elasticPolicy"] = {
        "minNodes": 1,
        "maxNodes": 3,
        "maxRestarts": 5,
    }
    out["ClusterTrainingRuntime//torch-elastic"] = elastic
    return out


def _variants(name: str, doc: Obj) -> Iterator[tuple[str, Obj]]:
    """The manifest itself, and variants reaching the other branches of its ML policy."""
    yield name, doc
    kind = doc["kind"]
    if kind == "TrainingJob" and name.endswith("simple.yaml#0"):
        inject = copy.deepcopy(doc)
        inject["spec"]["injectLattice"] = True
        yield f"{name}+injectLattice", inject
    if kind == "MPIJob":
        for impl in ("Intel", "MPICH"):
            other = copy.deepcopy(doc)
            other["spec"]["mpiImplementation"] = impl
            yield f"{name}+{impl}", other
        other = copy.deepcopy(doc)
        other["spec"].update(
            runLauncherAsWorker=True,
            sshAuthMountPath="/root/.ssh",
            launcherCreationPolicy="WaitForWorkersReady",
        )
        yield f"{name}+launcherAsWorker", other
    if kind == "TrainJob" and doc["spec"]["runtimeRef"]["name"] == "torch-distributed":
        elastic = copy.deepcopy(doc)
        elastic["spec"]["runtimeRef"]["name"] = "torch-elastic"
        elastic["spec"]["trainer"].pop("numNodes", None)
        yield f"{name}+elastic", elastic


def _contexts(runtimes: Mapping[str, Obj]) -> dict[str, OperatorContext]:
    return {
        "node": OperatorContext(runtimes=runtimes),
        "gpu": OperatorContext(
            scheduling_unit="nvidia.com/gpu",
            node_selector=(("pool", "gpu"),),
            rdzv_backend="etcd",
            rdzv_service_endpoint="etcd.lattice",
            rdzv_service_port="2379",
            checkpoint_type="local",
            priority_classes={"high": 100},
            default_priority=3,
            runtimes=runtimes,
        ),
    }


def _children(children: Children) -> Obj:
    # ``claims`` only when there are some: the digests of jobs without claims stay as they were.
    return {
        f.name: list(getattr(children, f.name))
        for f in dataclasses.fields(children)
        if f.name != "claims" or children.claims
    }


def _running(children: Children) -> list[Any]:
    pods = []
    for manifest in children.pods:
        raw = copy.deepcopy(manifest)
        raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        pods.append(pod_info(raw))
    return pods


def _public(value: Any) -> Any:
    """``value`` without private fields (caches such as a demand's hash)."""
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list | tuple):
        return type(value)(_public(v) for v in value)
    return value


def _render(plugin: JobPlugin[Any], obj: Obj, ctx: OperatorContext) -> Obj:
    job = plugin.parse(obj, ctx)
    demand = plugin.demand(job, ctx)
    out: Obj = {
        "demand": _public(dataclasses.asdict(demand)),
        "run_policy": dataclasses.asdict(plugin.run_policy(job)),
    }
    sizes = sorted({0, 1, demand.min_size, demand.max_size})
    for size in sizes:
        out[f"children@{size}"] = _children(plugin.children(job, size=size, ctx=ctx))
    top = sizes[-1]
    desired = plugin.children(job, size=top, ctx=ctx)
    pods = _running(desired)
    if isinstance(plugin, StagesChildren):
        staged = plugin.staged_children(job, desired, size=top, pods=(), ctx=ctx)
        out["staged@none"] = _children(staged)
        pods = _running(staged) + pods
        staged = plugin.staged_children(job, desired, size=top, pods=pods, ctx=ctx)
        out["staged@running"] = _children(staged)
    if isinstance(plugin, ObservesChildren):
        observed = plugin.observed_children(job, desired, pods=(), others={})
        out["observed@none"] = _children(observed)
        observed = plugin.observed_children(job, desired, pods=pods, others={})
        out["observed@running"] = _children(observed)
    progress = plugin.progress(job, size=top, pods=pods, others={})
    out["progress@running"] = dataclasses.asdict(progress)
    if isinstance(plugin, PinsInputs):
        out["pin"] = plugin.pin(obj, ctx)
    return out


def render_all() -> Obj:
    docs = _documents()
    contexts = _contexts(_runtimes(docs))
    rendered: Obj = {}
    for name, doc in docs:
        if doc.get("kind") in RUNTIME_KINDS:
            continue
        for variant, raw in _variants(name, doc):
            obj = copy.deepcopy(raw)
            meta = obj["metadata"]
            meta.setdefault("namespace", "default")
            meta["uid"] = f"uid-{meta['name']}"
            meta["annotations"] = {**(meta.get("annotations") or {})}
            plugin = plugin_for(obj["kind"])
            for ctx_name, ctx in contexts.items():
                rendered[f"{variant}@{ctx_name}"] = _render(plugin, obj, ctx)
    return rendered


def _digests(rendered: Obj) -> dict[str, str]:
    return {
        f"{case} {section}": hashlib.sha256(json.dumps(value, default=str).encode()).hexdigest()
        for case, sections in rendered.items()
        for section, value in sections.items()
    }


def test_children_of_every_example_match_the_snapshot() -> None:
    rendered = render_all()
    if dump := os.environ.get("LATTICE_GOLDEN_DUMP"):
        Path(dump).write_text(json.dumps(rendered, indent=1, default=str) + "\n")
    got = _digests(rendered)
    if os.environ.get("LATTICE_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, indent=0) + "\n")
    want = json.loads(GOLDEN.read_text())
    changed = sorted(k for k in {*got, *want} if got.get(k) != want.get(k))
    assert not changed, f"children changed (see the module docstring): {changed[:10]}"
