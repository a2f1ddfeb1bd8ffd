"""Scheduler-heavy load on the real control plane; operator memory at 10k jobs / 100k pods.

It prints numbers; it is never a test. Two sections (issue 9):

**load** (default; needs ``make cluster-up`` with the CRDs applied; run it under
``flock /tmp/lattice-cluster.lock``). On a fresh namespace and a fresh kwok node pool
(``--nodes`` x ``--gpus`` ``nvidia.com/gpu``), in one run:

1. *baseline*: a bare client (``lattice.kube.client``) creates ``--baseline-pods`` pods one at
   a time on the same apiserver, before the operator starts: the create latency of one pod.
2. ``lattice run --scheduling-unit nvidia.com/gpu`` (pinned with ``taskset`` to the last core when
   ``taskset`` exists and there are >= 2 cores; the control plane's PIDs from ``.cluster/*.pid``
   and this process are pinned to the other cores unless ``--no-pin-control-plane``; the
   original affinities are restored at the end).
3. *fill*: ``--fill-jobs`` low-priority elastic TrainingJobs (``--fill-min``..``--fill-max``
   one-GPU workers) until every GPU of the pool is used (``lattice_capacity_units``) and every
   granted pod exists.
4. *load*: ``--jobs`` TrainingJobs created open-loop at ``--rate``/s with mixed priorities
   (``--high-frac`` at 1000, ``--mid-frac`` at 100, the rest at 0) and elastic ranges (minSize
   1 or 2, maxSize 1x/2x/4x that); every pod asks for one GPU. Meanwhile a probe creates one bare
   pod every ``--probe-interval`` s (create latency under the same load), then runs the chain of
   three writes a job needs before it has pods (``write_chain``: the floor of create-to-pods
   latency for any operator under that load), and the bench watches
   pods and jobs. After the last arrival it waits ``--settle`` s.

Reported: scheduler passes/s and pass duration p50/p95 (delta of the operator's
``lattice_scheduler_pass_duration_seconds`` histogram over the load window; plus exact values
from the operator's ``scheduler.pass`` log lines, which it writes at info level for passes that
wrote something); per priority class, the time from a job's create request to (a) its first
``minSize`` pods and (b) all the pods of its first grant (the first ``status.currentSize`` > 0
the bench saw) existing, and (c) its first ``minSize`` pods bound to nodes (which needs the pods
of the jobs preempted for it gone), p50/p95/p99 and count; operator peak RSS (VmHWM) and CPU
seconds from /proc; jobs by stage at the end; ratios to the single-pod create latency.
``--profile-seconds`` samples the operator with py-spy (``--py-spy``) during the load and prints
the top functions.

**memory** (``--memory``; no cluster). In-process, in a child process per fill path: the real
``lattice.app.Operator`` (every informer with its real transform and indexes, the reconcilers'
handlers and queues, the event recorder, the scheduler loop), built on an in-memory fake
apiserver client that serves LIST pages (``json.loads`` of the page text, like the real client)
and WATCH streams. Objects are realistic: TrainingJobs as ``kubectl apply`` stores them
(last-applied annotation, managedFields, defaulted spec, the scheduler's and the reconciler's
status); their pods and headless Services built by the real ``TrainingJobPlugin.children`` and
completed with what the apiserver, kube-scheduler and kubelet add (uid, defaults,
kube-api-access volume, managedFields, Running status with 5 conditions); GPU nodes (~35
labels, images, conditions, managedFields) and one DaemonSet pod per node. Steps: baseline
(operator built, informers synced empty, one empty pass), then nodes+daemon pods, jobs, pods,
Services filled (``list``: ``force_relist`` of the informers, i.e. a restart at that size;
``watch``: one ADDED event per object), then a real ``SchedulerLoop.run_once`` over them, the
patched jobs delivered back as MODIFIED events, and a second pass. VmRSS/VmHWM after each step.

Usage::

    flock /tmp/lattice-cluster.lock python bench/bench_scheduler_load.py --jobs 5000 --rate 20
    python bench/bench_scheduler_load.py --memory [--mem-jobs 10000 --mem-pods 100000]

This file is the entry point (arguments); the sections live in ``bench/schedload/``: ``load``
and ``report`` (the load section), ``memory`` with ``world``, ``nodes``, ``objects`` and ``fake``
(the memory section), and ``common``; they share ``bench/_support.py`` with the other benches.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schedload.load import load_main
from schedload.memory import memory_child, memory_main

__all__ = ["main"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memory", action="store_true", help="run the in-process memory section")
    ap.add_argument("--memory-child", choices=["list", "watch"], help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=9)
    # load
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--fill-jobs", type=int, default=96)
    ap.add_argument("--fill-min", type=int, default=2)
    ap.add_argument("--fill-max", type=int, default=8)
    ap.add_argument("--fill-timeout", type=float, default=300.0)
    ap.add_argument("--high-frac", type=float, default=0.05)
    ap.add_argument("--mid-frac", type=float, default=0.25)
    ap.add_argument("--concurrency", type=int, default=64, help="creates in flight at most")
    ap.add_argument("--settle", type=float, default=120.0, help="wait after the last arrival")
    ap.add_argument("--baseline-pods", type=int, default=50)
    ap.add_argument("--probe-interval", type=float, default=2.0)
    ap.add_argument("--sample", type=float, default=5.0, help="metrics sampling period")
    ap.add_argument("--cleanup-timeout", type=float, default=900.0)
    ap.add_argument("--no-pin", action="store_true", help="pin nothing")
    ap.add_argument("--no-pin-control-plane", action="store_true")
    ap.add_argument("--operator-arg", action="append", default=[])
    ap.add_argument("--profile-seconds", type=int, default=0, help="py-spy the operator (0: off)")
    ap.add_argument("--profile-delay", type=float, default=30.0)
    ap.add_argument("--profile-top", type=int, default=15)
    ap.add_argument("--py-spy", default="/tmp/pyspy/bin/py-spy")
    # memory
    ap.add_argument("--mem-jobs", type=int, default=10_000)
    ap.add_argument("--mem-pods", type=int, default=100_000)
    ap.add_argument("--mem-gpus", type=int, default=8, help="GPUs per node")
    ap.add_argument("--mem-namespaces", type=int, default=20)
    ap.add_argument("--mem-modes", default="list,watch")
    ap.add_argument("--mem-no-services", action="store_true")
    a = ap.parse_args()
    if a.memory_child:
        asyncio.run(memory_child(a.memory_child, a))
    elif a.memory:
        memory_main(a)
    else:
        asyncio.run(load_main(a))


if __name__ == "__main__":
    main()
