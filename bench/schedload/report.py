"""The load section's measurements: operator metrics, apiserver latency, the printed report.

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _support import (
    apiserver_metrics,
    clock,
    is_file,
    metric_samples,
    pct,
    proc_status,
    request_key,
)

from lattice.primitives.objects import Obj
from schedload.common import write_text

if TYPE_CHECKING:
    from schedload.load import Shape, World

__all__ = [
    "QUEUE_METRICS",
    "apiserver_latency",
    "count_x_mean",
    "cpu_of",
    "hist_quantile",
    "log_passes",
    "parse_metrics",
    "report",
    "run_profile",
    "summarize",
]


# the trainingjob workqueue's metrics parse_metrics keeps, and under which key
QUEUE_METRICS = {
    "workqueue_depth": "depth",
    "workqueue_adds_total": "adds",
    "workqueue_queue_duration_seconds_sum": "qwait_sum",
    "workqueue_queue_duration_seconds_count": "qwait_count",
    "workqueue_work_duration_seconds_sum": "work_sum",
    "workqueue_work_duration_seconds_count": "work_count",
}


def parse_metrics(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "buckets": {},
        "jobs": {},
        "capacity": {},
        "rest": collections.Counter(),
        "reconcile": collections.Counter(),
        "decisions": collections.Counter(),
        "writes": collections.Counter(),
        "lat_sum": collections.Counter(),
        "lat_count": collections.Counter(),
        "throttle_sum": collections.Counter(),
        "throttle_count": collections.Counter(),
    }
    for s in metric_samples(text):
        n, lab = s.name, s.labels
        if n == "lattice_scheduler_pass_duration_seconds_bucket":
            out["buckets"][float(lab["le"])] = s.value
        elif n == "lattice_scheduler_pass_duration_seconds_count":
            out["passes"] = s.value
        elif n == "lattice_scheduler_pass_duration_seconds_sum":
            out["pass_sum"] = s.value
        elif n == "lattice_jobs" and lab.get("kind") == "TrainingJob":
            out["jobs"][lab["stage"]] = s.value
        elif n == "lattice_capacity_units":
            out["capacity"][lab["state"]] = s.value
        elif n == "rest_client_requests_total":
            out["rest"][f"{lab['method']} {lab['code']}"] += s.value
        elif n == "controller_runtime_reconcile_total" and lab["controller"] == "trainingjob":
            out["reconcile"][lab["result"]] += s.value
        elif n == "lattice_scheduler_decisions_total":
            out["decisions"][lab["type"]] += s.value
        elif n == "lattice_preemptions_total":
            out["preemptions"] = s.value
        elif n == "lattice_events_dropped_total":
            out["events_dropped"] = s.value
        elif n == "lattice_scheduler_status_writes_total":
            out["writes"][lab["result"]] += s.value
        elif n in QUEUE_METRICS and lab["name"] == "trainingjob":
            out[QUEUE_METRICS[n]] = s.value
        elif n == "rest_client_request_duration_seconds_sum":
            out["lat_sum"][f"{lab['verb']} {lab['resource']}"] += s.value
        elif n == "rest_client_request_duration_seconds_count":
            out["lat_count"][f"{lab['verb']} {lab['resource']}"] += s.value
        elif n == "rest_client_rate_limiter_duration_seconds_sum":
            out["throttle_sum"][lab["verb"]] += s.value
        elif n == "rest_client_rate_limiter_duration_seconds_count":
            out["throttle_count"][lab["verb"]] += s.value
    return out


def count_x_mean(m0: dict[str, Any], m1: dict[str, Any], prefix: str, *, digits: int) -> list[str]:
    """``"<label> <count> x <mean> ms"`` for each label of the ``<prefix>_count`` /
    ``<prefix>_sum`` counters that grew by 10 or more from ``m0`` to ``m1``, sorted."""
    out = []
    for k, c in m1[f"{prefix}_count"].items():
        dc = c - m0[f"{prefix}_count"].get(k, 0)
        if dc >= 10:
            ds = m1[f"{prefix}_sum"][k] - m0[f"{prefix}_sum"].get(k, 0)
            out.append(f"{k} {dc:.0f} x {ds / dc * 1000:.{digits}f} ms")
    return sorted(out)


def hist_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus histogram_quantile over cumulative ``{le: count}``."""
    items = sorted(buckets.items())
    if not items or items[-1][1] <= 0:
        return float("nan")
    total = items[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in items:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 0)
        prev_le, prev_c = le, c
    return prev_le


def log_passes(path: Path, start: int, end: int) -> list[Obj]:
    """The operator's ``scheduler.pass`` lines between two byte offsets of its log."""
    out: list[Obj] = []
    with path.open("rb") as f:
        f.seek(start)
        data = f.read(max(0, end - start))
    for line in data.splitlines():
        if b"scheduler.pass" not in line:
            continue
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if rec.get("event") == "scheduler.pass":
                out.append(rec)
    return out


def apiserver_latency() -> dict[str, tuple[float, float]]:
    """Server-side ``apiserver_request_duration_seconds`` (count, sum) of writes by
    verb/resource/subresource, all clients.

    Read line by line, not with ``metric_samples``: the apiserver's metrics are megabytes, and
    ``prometheus_client``'s parser takes some 20 times longer over them (seconds, taken just before
    the load window starts)."""
    out: dict[str, tuple[float, float]] = {}
    for line in apiserver_metrics().splitlines():
        if not line.startswith("apiserver_request_duration_seconds_"):
            continue
        name, _, value = line.rpartition(" ")
        kind = name.split("{", 1)[0].rsplit("_", 1)[1]
        if kind not in ("count", "sum"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', name))
        if labels.get("verb") not in ("POST", "PATCH", "PUT", "DELETE"):
            continue
        key = request_key(labels)
        c, t = out.get(key, (0.0, 0.0))
        out[key] = (c + float(value), t) if kind == "count" else (c, t + float(value))
    return out


def cpu_of(pids: dict[str, int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError, IndexError, ValueError):
            out[name] = proc_status(pid)["cpu"]
    return out


def summarize(
    world: World,
    created: dict[str, float],
    shapes: dict[str, Shape],
    cls: str,
    end: float | None = None,
) -> dict[str, Any]:
    admitted: list[float] = []
    after: list[float] = []
    to_min: list[float] = []
    to_all: list[float] = []
    to_bound: list[float] = []
    waited: list[float] = []
    for name, t0 in created.items():
        sh = shapes[name]
        if sh.cls != cls:
            continue
        firsts = [world.pod_first.get(f"{name}-worker-{i}") for i in range(sh.min_size)]
        if all(f is not None for f in firsts):
            to_min.append(max(f for f in firsts if f is not None) - t0)
        bound = [world.pod_bound.get(f"{name}-worker-{i}") for i in range(sh.min_size)]
        if all(f is not None for f in bound):
            to_bound.append(max(f for f in bound if f is not None) - t0)
        g = world.grant.get(name)
        done = False
        if g is not None:
            admitted.append(g[0] - t0)
            alls = [world.pod_first.get(f"{name}-worker-{i}") for i in range(g[1])]
            if all(f is not None for f in alls):
                to_all.append(max(f for f in alls if f is not None) - t0)
                after.append(max(f for f in alls if f is not None) - g[0])
                done = True
        if g is not None and not done:
            waited.append((end if end is not None else clock.monotonic()) - t0)
    n = sum(1 for s in shapes.values() if s.cls == cls)
    return {
        "n": n,
        "admitted": admitted,
        "after": after,
        "min": to_min,
        "all": to_all,
        "bound": to_bound,
        "waited": waited,
    }


def report(
    a: argparse.Namespace,
    *,
    world: World,
    created: dict[str, float],
    shapes: dict[str, Shape],
    idle: list[float],
    probe: list[float],
    chain: list[float],
    m0: dict[str, Any],
    m_arrived: dict[str, Any],
    m1: dict[str, Any],
    u0: dict[str, float],
    u1: dict[str, float],
    t0: float,
    t_arrived: float,
    t1: float,
    passes_log: list[Obj],
    samples: list[tuple[float, dict[str, Any], dict[str, float]]],
    others: dict[str, float],
    api: dict[str, tuple[float, float]],
) -> None:
    def passes(ma: dict[str, Any], mb: dict[str, Any], dt: float) -> str:
        n = mb.get("passes", 0) - ma.get("passes", 0)
        s = mb.get("pass_sum", 0) - ma.get("pass_sum", 0)
        b = {le: c - ma["buckets"].get(le, 0.0) for le, c in mb["buckets"].items()}
        return (
            f"{n:.0f} passes in {dt:.0f}s = {n / dt:.2f}/s, mean {s / n if n else float('nan'):.3f}"
            f"s, p50 {hist_quantile(0.5, b):.3f}s, p95 {hist_quantile(0.95, b):.3f}s "
            f"(histogram), busy {s / dt:.0%} of the time"
        )

    print("\n== scheduler passes (operator's lattice_scheduler_pass_duration_seconds)")
    print(f"  arrivals window: {passes(m0, m_arrived, t_arrived - t0)}")
    print(f"  whole window:    {passes(m0, m1, t1 - t0)}")
    if passes_log:
        secs = [float(p.get("seconds", 0)) for p in passes_log]
        jobs = [int(p.get("jobs", 0)) for p in passes_log]
        wrote = [int(p.get("written", 0)) for p in passes_log]
        failed = sum(int(p.get("failed", 0)) for p in passes_log)
        print(
            f"  log (passes that wrote; 'failed' counts only writes a pass waited for): "
            f"{len(secs)}, seconds p50 {pct(secs, 0.5):.3f} "
            f"p95 {pct(secs, 0.95):.3f} max {max(secs):.3f}; jobs per pass up to {max(jobs)}; "
            f"written per pass p50 {pct([float(w) for w in wrote], 0.5):.0f} max {max(wrote)}, "
            f"total {sum(wrote)}; failed writes {failed}"
        )
    w = {k: int(v - m0["writes"].get(k, 0)) for k, v in m1["writes"].items()}
    if w:
        print(f"  status writes by result (lattice_scheduler_status_writes_total): {w}")
    d = {k: m1["decisions"][k] - m0["decisions"].get(k, 0) for k in m1["decisions"]}
    print(f"  decisions: { {k: int(v) for k, v in d.items() if v} }, preemptions "
          f"{m1.get('preemptions', 0) - m0.get('preemptions', 0):.0f}, events dropped "
          f"{m1.get('events_dropped', 0) - m0.get('events_dropped', 0):.0f}")  # fmt: skip
    rest = {
        k: int(v - m0["rest"].get(k, 0)) for k, v in m1["rest"].items() if v - m0["rest"].get(k, 0)
    }
    print(f"  operator API requests (method code): {rest}")
    rec = {k: int(v - m0["reconcile"].get(k, 0)) for k, v in m1["reconcile"].items()}
    qn = m1.get("qwait_count", 0) - m0.get("qwait_count", 0)
    qs = m1.get("qwait_sum", 0) - m0.get("qwait_sum", 0)
    wn = m1.get("work_count", 0) - m0.get("work_count", 0)
    ws = m1.get("work_sum", 0) - m0.get("work_sum", 0)
    print(
        f"  trainingjob reconciles: {rec}; mean queue wait {qs / qn if qn else float('nan'):.2f}s,"
        f" mean reconcile {ws / wn if wn else float('nan'):.3f}s, {ws:.0f} worker-seconds in "
        f"{t1 - t0:.0f}s"
    )
    lat = count_x_mean(m0, m1, "lat", digits=0)
    print(f"  operator request latency (count x mean): {', '.join(lat)}")
    waits = count_x_mean(m0, m1, "throttle", digits=1)
    print(
        f"  operator client-side rate-limiter wait (count x mean; events have their own): "
        f"{', '.join(waits) or 'none (no limiter)'}"
    )
    srv = [
        f"{k} {c:.0f} x {t / c * 1000:.0f} ms"
        for k, (c, t) in sorted(api.items(), key=lambda kv: -kv[1][0])
        if c >= 10
    ]
    print(f"  apiserver-side write latency, all clients (count x mean): {', '.join(srv[:10])}")

    print("\n== time from create request to pods existing (bench's pod watch)")
    ref_idle = pct(idle, 0.5)
    ref_load = pct(probe, 0.5)
    print(
        f"  reference: single-pod create p50 idle {ref_idle * 1000:.1f} ms, under load "
        f"{ref_load * 1000:.1f} ms (p99 {pct(probe, 0.99) * 1000:.1f} ms, {len(probe)} probes)"
    )
    print(
        f"  floor: the chain of three writes a job needs before its pods exist (job create, status "
        f"patch, pod create; bare client, no watch), under load: p50 {pct(chain, 0.5):.2f} s, "
        f"p95 {pct(chain, 0.95):.2f} s, p99 {pct(chain, 0.99):.2f} s ({len(chain)} chains)"
    )
    hdr = (
        f"  {'class':>5} {'what':>22} {'count':>11} {'p50 s':>8} {'p95 s':>8} {'p99 s':>8} "
        f"{'max s':>8} {'p99/idle':>9} {'p99/load':>9}"
    )
    print(hdr)
    for cls in ("high", "mid", "low"):
        r = summarize(world, created, shapes, cls, end=t1)
        for what, key in (
            ("admitted (status)", "admitted"),
            ("minSize pods", "min"),
            ("all first-grant pods", "all"),
            ("admitted -> all pods", "after"),
            ("minSize pods on nodes", "bound"),
        ):
            v = r[key]
            print(
                f"  {cls:>5} {what:>22} {len(v):>5}/{r['n']:<5} {pct(v, 0.5):>8.2f} "
                f"{pct(v, 0.95):>8.2f} {pct(v, 0.99):>8.2f} {max(v, default=float('nan')):>8.2f} "
                f"{pct(v, 0.99) / ref_idle:>8.0f}x {pct(v, 0.99) / ref_load:>8.0f}x"
            )
        w = r["waited"]
        if w:
            print(
                f"  {cls:>5} {'admitted, pods missing':>22} {len(w):>5}/{r['n']:<5} at the end "
                f"(created {min(w):.0f}..{max(w):.0f}s before; not in the rows above)"
            )
        never = r["n"] - len(r["admitted"])
        if never:
            print(f"  {cls:>5} {'never admitted':>22} {never:>5}/{r['n']:<5} (still waiting)")
    print("  goal: high-priority p99 (all first-grant pods) <= 2 s")
    high = summarize(world, created, shapes, "high", end=t1)["all"]
    if high and chain:
        print(
            f"  high-priority pods / floor: p50 {pct(high, 0.5) / pct(chain, 0.5):.2f}x, "
            f"p99 {pct(high, 0.99) / pct(chain, 0.99):.2f}x"
        )
    print(
        "  'on nodes': bound by kube-scheduler, so the pods of the jobs preempted for it are gone"
    )
    for what, lags in (
        ("deletions issued", world.to_terminating),
        ("pods removed", world.to_deleted),
    ):
        print(
            f"  shrunk/preempted jobs, currentSize drop -> {what}: {len(lags)} jobs, p50 "
            f"{pct(lags, 0.5):.2f} p95 {pct(lags, 0.95):.2f} p99 {pct(lags, 0.99):.2f} "
            f"max {max(lags, default=float('nan')):.2f} s"
        )
    print(
        f"  still holding pods at the end: {len(world.shrunk)} jobs not yet deleting, "
        f"{len(world.gone)} with pods terminating"
    )

    print("\n== operator process (/proc)")
    print(
        f"  peak RSS (VmHWM) {u1['VmHWM']:.0f} MiB, RSS now {u1['VmRSS']:.0f} MiB; CPU "
        f"{u1['cpu']:.1f}s total, {u1['cpu'] - u0['cpu']:.1f}s in the load window "
        f"({(u1['cpu'] - u0['cpu']) / (t1 - t0):.0%} of one core)"
    )
    dt = t1 - t0
    print(
        "  CPU seconds of the others in the same window (% of one core): "
        + ", ".join(f"{k} {v:.0f}s ({v / dt:.0%})" for k, v in others.items())
    )
    print(
        f"  lattice_jobs at the end: { {k: int(v) for k, v in m1['jobs'].items() if v} }; "
        f"capacity {m1['capacity']}"
    )
    if samples:
        print("  timeline (s since first arrival: jobs seen, passes, depth, RSS MiB, CPU %):")
        step = max(1, len(samples) // 12)
        prev_t, prev_cpu = t0, u0["cpu"]
        for i in range(0, len(samples), step):
            t, m, u = samples[i]
            # CPU share since the previous printed row (the first row: since the window start)
            cpu = (u["cpu"] - prev_cpu) / (t - prev_t) if t - prev_t >= 1.0 else float("nan")
            prev_t, prev_cpu = t, u["cpu"]
            print(
                f"    {t - t0:6.0f}s: jobs {sum(m['jobs'].values()):.0f} "
                f"{ {k: int(v) for k, v in m['jobs'].items() if v} }, passes "
                f"{m.get('passes', 0) - m0.get('passes', 0):.0f}, depth {m.get('depth', 0):.0f}, "
                f"RSS {u['VmRSS']:.0f}, CPU {cpu:.0%}"
            )


async def run_profile(a: argparse.Namespace, pid: int, out: Path) -> str:
    """py-spy the operator for ``--profile-seconds`` after ``--profile-delay``; top functions."""
    spy = a.py_spy or shutil.which("py-spy")
    if not spy or not is_file(spy):
        return "py-spy: not found (--py-spy)"
    await clock.sleep(a.profile_delay)
    raw = out.with_suffix(".raw")
    proc = await asyncio.create_subprocess_exec(
        spy,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(a.profile_seconds),
        "--rate",
        "50",
        "--format",
        "raw",
        "--output",
        str(raw),
        "--nonblocking",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode != 0 or not raw.exists():
        return f"py-spy failed rc={proc.returncode}: {err.decode()[-500:]}"
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    frame = re.compile(r"^(.*) \((.*?):\d+\)$")
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        names = []
        for f in stack.split(";"):
            mt = frame.match(f)
            names.append(f"{mt.group(1)} ({mt.group(2).split('site-packages/')[-1]})" if mt else f)
        if names:
            own[names[-1]] += n
        for nm in set(names):
            incl[nm] += n
    lines = [
        f"py-spy: {total} non-idle samples over {a.profile_seconds}s at 50 Hz = "
        f"{total / (50 * a.profile_seconds):.0%} busy (raw stacks: {raw})"
    ]
    lines.append("  top self:")
    lines += [f"    {n / total:6.1%} {k}" for k, n in own.most_common(a.profile_top)]
    lines.append("  top inclusive:")
    lines += [f"    {n / total:6.1%} {k}" for k, n in incl.most_common(a.profile_top * 2)]
    text = "\n".join(lines)
    write_text(out, text + "\n")
    return text
