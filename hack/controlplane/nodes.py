#!/usr/bin/env python3
"""Print kwok fake Node manifests (YAML stream) from a small spec.

    nodes.py --count 8 --gpus 8 --cpu 32 --memory 256Gi --label pool=gpu --prefix kwok-gpu

Every node carries the annotation ``kwok.x-k8s.io/node: fake`` (the kwok convention; our kwok
controller manages exactly the nodes annotated so), ``nvidia.com/gpu`` in capacity and
allocatable when --gpus > 0, and no taint, so unmodified upstream manifests schedule onto them.
Standard library only: the cluster scripts run it before any venv exists.
"""

from __future__ import annotations

import argparse
import json
import sys


def node(
    *, name: str, gpus: int, cpu: str, memory: str, pods: int, labels: dict[str, str]
) -> dict[str, object]:
    resources: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus > 0:
        resources["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
                "node-role.kubernetes.io/agent": "",
                "type": "kwok",
                **labels,
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": dict(resources)},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=8)
    p.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node (0 for none)")
    p.add_argument("--cpu", default="32")
    p.add_argument("--memory", default="256Gi")
    p.add_argument("--pods", type=int, default=110)
    p.add_argument("--prefix", default="kwok-node")
    p.add_argument("--label", action="append", default=[], help="key=value, repeatable")
    a = p.parse_args(argv)
    labels = dict(item.split("=", 1) for item in a.label)
    docs = [
        node(
            name=f"{a.prefix}-{i}",
            gpus=a.gpus,
            cpu=a.cpu,
            memory=a.memory,
            pods=a.pods,
            labels=labels,
        )
        for i in range(a.count)
    ]
    # JSON is valid YAML; kubectl apply -f - accepts a List.
    json.dump({"apiVersion": "v1", "kind": "List", "items": docs}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
