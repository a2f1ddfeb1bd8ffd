"""The figure of a simulation, drawn with matplotlib (the optional ``sim`` extra).

Contract: :func:`build_figure` returns a matplotlib ``Figure`` of four panels, one style per
policy (:data:`STYLES`, in the order of the runs: a colour, a line style and a marker, so that
curves that coincide stay visible); :func:`render_png` returns its PNG bytes. Panels:
1. "JCT CDF": the fraction of jobs finished within a JCT, x in hours on a log axis;
2. "<UNIT> utilisation": the percentage of capacity held over simulated time (0..100 %);
3. "Queued jobs": the number of queued jobs over time (panels 2 and 3 share the time axis,
   in hours up to 72 h and in days beyond);
4. "JCT ratio to fifo-backfill": per policy, average and p99 JCT over ``fifo-backfill``'s as
   grouped bars, with a line at 1 (only when the runs include ``fifo-backfill``).
Every axis has ticks and a label, and the legend names every drawn policy. Runs without a
simulated result (the no-queueing bound) are neither drawn nor listed, but keep their style.
matplotlib is imported only when a figure is drawn (the operator image does not carry it);
without it, :func:`render_png` raises :class:`RuntimeError` naming the extra to install.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lattice.sim.runner import PolicyRun

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BASELINE", "STYLES", "build_figure", "render_png"]

BASELINE = "fifo-backfill"

#: (colour, line style, marker) per run, in order.
STYLES: tuple[tuple[str, Any, str], ...] = (
    ("tab:blue", "-", "o"),
    ("tab:orange", "--", "s"),
    ("tab:green", "-.", "^"),
    ("tab:red", ":", "D"),
    ("tab:purple", (0, (5, 1)), "v"),
    ("tab:brown", (0, (3, 1, 1, 1, 1, 1)), "P"),
    ("tab:pink", "--", "X"),
    ("tab:gray", "-.", "*"),
    ("tab:olive", ":", "h"),
)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RuntimeError("--png needs matplotlib: pip install 'lattice-operator[sim]'") from exc
    return pyplot


def _time_scale(span: float) -> tuple[float, str]:
    return (3600.0, "hours") if span <= 72 * 3600 else (86400.0, "days")


def _style(i: int) -> tuple[str, Any, str]:
    return STYLES[i % len(STYLES)]


def build_figure(runs: Sequence[PolicyRun], *, unit: str = "gpu") -> Figure:
    """The four-panel figure of ``runs`` (see the module docstring)."""
    plt = _pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(10, 16), constrained_layout=True)
    cdf, util, queue, bars = axes
    drawn = [(i, r) for i, r in enumerate(runs) if r.result is not None]
    span = max((p[0] for _, r in drawn if r.result for p in r.result.timeline), default=3600.0)
    scale, tunit = _time_scale(span)
    label = unit.upper() if len(unit) <= 3 else unit
    for i, run in drawn:
        result = run.result
        assert result is not None
        colour, line, marker = _style(i)
        style = {"color": colour, "linestyle": line, "marker": marker, "markevery": 0.1}
        jcts = sorted(j.jct / 3600 for j in result.jobs if j.jct is not None and j.jct > 0)
        if jcts:
            frac = [(k + 1) / len(result.jobs) for k in range(len(jcts))]
            cdf.plot(jcts, frac, label=run.metrics.policy, markersize=5, **style)
        times = [p[0] / scale for p in result.timeline]
        used = [100 * p[1] / result.capacity for p in result.timeline]
        queued = [p[2] for p in result.timeline]
        util.step(times, used, where="post", markersize=4, **style)
        queue.step(times, queued, where="post", markersize=4, **style)
    cdf.set_xscale("log")
    cdf.set(title="JCT CDF", xlabel="job completion time (hours)", ylabel="fraction of jobs")
    cdf.set_ylim(0, 1.02)
    util.set(
        title=f"{label} utilisation",
        xlabel=f"time ({tunit})",
        ylabel=f"{label}s held (% of capacity)",
    )
    util.set_ylim(0, 105)
    queue.set(title="Queued jobs", xlabel=f"time ({tunit})", ylabel="jobs queued")
    queue.set_ylim(bottom=0)
    _ratio_bars(bars, runs)
    for ax in axes:
        ax.grid(True, color="0.9")
        ax.tick_params(axis="both", which="both", direction="out", length=4)
    cdf.legend(loc="lower right", fontsize="small")
    figure: Figure = fig
    return figure


def _ratio_bars(ax: Any, runs: Sequence[PolicyRun]) -> None:
    base = next((r.metrics for r in runs if r.metrics.policy == BASELINE), None)
    names, avg, p99, colours = [], [], [], []
    for i, run in enumerate(runs):
        m = run.metrics
        if base is None or run.result is None or not base.avg_jct or not base.p99_jct:
            continue
        if math.isnan(m.avg_jct):
            continue
        names.append(m.policy)
        avg.append(m.avg_jct / base.avg_jct)
        p99.append(m.p99_jct / base.p99_jct)
        colours.append(_style(i)[0])
    xs = list(range(len(names)))
    width = 0.38
    ax.bar([x - width / 2 for x in xs], avg, width, color=colours, label="average JCT")
    ax.bar(
        [x + width / 2 for x in xs],
        p99,
        width,
        color=colours,
        alpha=0.45,
        hatch="//",
        label="p99 JCT",
    )
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks(xs, names, rotation=15, ha="right", fontsize="small")
    ax.set(
        title=f"JCT ratio to {BASELINE} (solid: average, hatched: p99)",
        xlabel="policy",
        ylabel=f"JCT / {BASELINE}'s",
    )
    ax.legend(loc="upper left", fontsize="small")


def render_png(runs: Sequence[PolicyRun], *, unit: str = "gpu") -> bytes:
    """The PNG bytes of :func:`build_figure`."""
    plt = _pyplot()
    fig = build_figure(runs, unit=unit)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=80)
    plt.close(fig)
    return out.getvalue()
