"""Memory per cached pod: slim ``PodInfo`` projections vs raw dicts, measured in the same run.

Builds synthetic, realistic pods (~3 KB of JSON each: managedFields, 4 conditions, container
statuses, GPU requests, env, volumes, tolerations), parses each from JSON as the informer does,
and caches it in a ``Store`` with the owner and node indexes (plus the built-in namespace index):

- ``projected``: ``pod_info`` projections (the informer's transform), at 100,000 pods;
- ``raw``: the parsed dicts themselves, and ``stripped``: dicts without managedFields
  (client-go's TransformStripManagedFields); both at 20,000 pods by default (100k raw dicts take
  ~2 GB and tracemalloc's bookkeeping several more), extrapolated linearly to 100k.

Each (mode, measure) runs in its own child process so numbers do not pollute each other:
``tracemalloc`` traced bytes after minus before, divided by n (bytes/pod), and, in a run without
tracemalloc, VmRSS from /proc/self/status before and after (RSS delta and total).

Usage: ``python bench/bench_pod_memory.py [--n 100000] [--raw-n 20000]``
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import subprocess
import sys
import tracemalloc
import uuid
from typing import Any

from lattice.clock import RealClock
from lattice.primitives.keys import object_key
from lattice.primitives.objects import Obj
from lattice.runtime.projections import POD_INDEXES, pod_info, strip_managed_fields
from lattice.runtime.store import Store

NAMESPACES = 20
PODS_PER_JOB = 8
NODES = 1000


def _template() -> str:
    """A realistic worker pod as a %-format string; ``pod_json`` fills in the varying fields."""
    job, ns, index, name, t0 = "@job@", "@ns@", "@index@", "@name@", "@t0@"
    labels = {
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": index,
        "training.kubeflow.org/operator-name": "lattice",
        "app.kubernetes.io/managed-by": "lattice",
    }
    managed = [
        {
            "manager": "lattice-operator",
            "operation": "Update",
            "apiVersion": "v1",
            "time": t0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:labels": {f"f:{k}": {} for k in labels},
                    "f:ownerReferences": {'k:{"uid":"@owner_uid@"}': {}},
                },
                "f:spec": {
                    "f:containers": {'k:{"name":"trainer"}': {".": {}, "f:image": {}}},
                    "f:restartPolicy": {},
                },
            },
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": t0,
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {f'k:{{"type":"{c}"}}': {} for c in ("Ready", "PodScheduled")},
                    "f:containerStatuses": {},
                    "f:podIP": {},
                }
            },
        },
    ]
    pod: Obj = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": "@uid@",
            "resourceVersion": "@rv@",
            "creationTimestamp": t0,
            "labels": labels,
            "annotations": {"lattice.breezeml.ai/priority": "100"},
            "ownerReferences": [
                {
                    "apiVersion": "breezeml.ai/v1",
                    "kind": "TrainingJob",
                    "name": job,
                    "uid": "@owner_uid@",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": managed,
        },
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "registry.example.com/ml/resnet:2026.03",
                    "command": ["torchrun"],
                    "args": ["--nnodes=8", "--nproc-per-node=8", "train.py", "--epochs=90"],
                    "env": [
                        {"name": "MASTER_ADDR", "value": f"{job}-worker-0"},
                        {"name": "MASTER_PORT", "value": "23456"},
                        {"name": "WORLD_SIZE", "value": "8"},
                        {"name": "RANK", "value": index},
                        {"name": "PYTHONUNBUFFERED", "value": "1"},
                    ],
                    "ports": [{"name": "trainingjob-port", "containerPort": 23456}],
                    "resources": {
                        "limits": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1000Gi"},
                        "requests": {"nvidia.com/gpu": "8", "cpu": "90", "memory": "900Gi"},
                    },
                    "volumeMounts": [
                        {"name": "dshm", "mountPath": "/dev/shm"},
                        {
                            "name": "kube-api-access",
                            "mountPath": "/var/run/secrets",
                            "readOnly": True,
                        },
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                {"name": "kube-api-access", "projected": {"defaultMode": 420}},
            ],
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
            "nodeName": "@node@",
            "hostname": name,
            "subdomain": job,
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                },
            ],
            "priority": 0,
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": c, "status": "True", "lastTransitionTime": t0}
                for c in ("PodReadyToStartContainers", "Initialized", "Ready", "PodScheduled")
            ],
            "hostIP": "@host_ip@",
            "podIP": "@pod_ip@",
            "startTime": t0,
            "containerStatuses": [
                {
                    "name": "trainer",
                    "state": {"running": {"startedAt": t0}},
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example.com/ml/resnet:2026.03",
                    "imageID": "registry.example.com/ml/resnet@sha256:" + "ab" * 32,
                    "containerID": "containerd://@cid@",
                    "started": True,
                }
            ],
            "qosClass": "Burstable",
        },
    }
    text = json.dumps(pod, separators=(",", ":")).replace("%", "%%")
    return re.sub(r"@(\w+)@", r"%(\1)s", text)


_TEMPLATE = _template()


def pod_json(i: int) -> str:
    """Pod number ``i`` as JSON (about 3.6 KB): 8 pods per job, jobs spread over namespaces."""
    job = f"resnet-{i // PODS_PER_JOB:05d}"
    index = i % PODS_PER_JOB
    return _TEMPLATE % {
        "job": job,
        "ns": f"team-{(i // PODS_PER_JOB) % NAMESPACES:02d}",
        "index": index,
        "name": f"{job}-worker-{index}",
        "t0": f"2026-03-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z",
        "uid": str(uuid.UUID(int=i)),
        "rv": 1_000_000 + i,
        "owner_uid": str(uuid.UUID(int=10**9 + i // PODS_PER_JOB)),
        "node": f"gpu-node-{i % NODES:04d}",
        "host_ip": f"10.0.{(i % NODES) // 250}.{(i % NODES) % 250}",
        "pod_ip": f"10.{128 + i // 65536}.{(i // 256) % 256}.{i % 256}",
        "cid": f"{i:064x}",
    }


def raw_owner(obj: Obj) -> tuple[str, ...]:
    meta = obj["metadata"]
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return (f"{ref['kind']}/{meta['namespace']}/{ref['name']}",)
    return ()


def raw_node(obj: Obj) -> tuple[str, ...]:
    node = obj["spec"].get("nodeName")
    return (node,) if node else ()


def vm_rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def child(mode: str, n: int, *, trace: bool) -> None:
    """Build the cache in this process and print one JSON line of measurements."""
    store: Store[Any] = Store()
    if mode == "projected":
        for name, fn in POD_INDEXES.items():
            store.add_index(name, fn)
    else:
        store.add_index("owner", raw_owner)
        store.add_index("node", raw_node)
    pod_json(0)
    pod_info(json.loads(pod_json(0)))  # warm caches and imports outside the measurement
    gc.collect()
    rss0 = vm_rss_kib()
    if trace:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if trace else 0
    clock = RealClock()
    start = clock.monotonic()
    for i in range(n):
        raw = json.loads(pod_json(i))
        key = object_key(raw)
        if mode == "projected":
            store.upsert(key, pod_info(raw))
        elif mode == "stripped":
            store.upsert(key, strip_managed_fields(raw))
        else:
            store.upsert(key, raw)
        del raw
    elapsed = clock.monotonic() - start
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] if trace else 0
    if trace:
        tracemalloc.stop()
    print(
        json.dumps(
            {
                "mode": mode,
                "n": n,
                "bytes_per_pod": (after - before) / n if trace else None,
                "rss0_mib": rss0 / 1024,
                "rss_mib": vm_rss_kib() / 1024,
                "seconds": elapsed,
                "items": len(store),
            }
        )
    )


def run_child(mode: str, n: int, *, trace: bool) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--n", str(n)]
    if trace:
        cmd.append("--trace")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="pods for the projected cache")
    parser.add_argument("--raw-n", type=int, default=20_000, help="pods for the dict baselines")
    parser.add_argument("--child", choices=["projected", "raw", "stripped"])
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n, trace=args.trace)
        return
    size = len(pod_json(12345))
    print(f"pod JSON size: {size} bytes; target n={args.n:,}; dict baselines at {args.raw_n:,}")
    rows = []
    for mode, n in (("raw", args.raw_n), ("stripped", args.raw_n), ("projected", args.n)):
        traced = run_child(mode, n, trace=True)
        plain = run_child(mode, n, trace=False)
        rss_delta = plain["rss_mib"] - plain["rss0_mib"]
        scale = args.n / n
        rows.append((mode, n, traced["bytes_per_pod"], rss_delta, plain["rss_mib"], scale, plain))
    header = (
        f"{'cache':<10} {'n':>8} {'B/pod (tracemalloc)':>20} {'RSS delta MiB':>14} "
        f"{'RSS total MiB':>14} {'@100k delta MiB':>16} {'build s':>8}"
    )
    print(header)
    print("-" * len(header))
    for mode, n, bpp, delta, total, scale, plain in rows:
        at_target = delta * scale
        note = "" if scale == 1 else " (extrapolated)"
        print(
            f"{mode:<10} {n:>8,} {bpp:>20,.0f} {delta:>14,.1f} {total:>14,.1f} "
            f"{at_target:>16,.1f}{note} {plain['seconds']:>7.1f}"
        )
    raw_bpp, proj_bpp = rows[0][2], rows[2][2]
    strip_bpp = rows[1][2]
    print(
        f"\nprojected vs raw dict: {raw_bpp / proj_bpp:.1f}x smaller per pod; "
        f"vs stripped dict: {strip_bpp / proj_bpp:.1f}x smaller"
    )


if __name__ == "__main__":
    main()
