"""The simulation figure: four panels with titles, labels and ticks, distinguishable curves,
and the per-policy JCT-ratio bars."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from matplotlib.patches import Rectangle

pytest.importorskip("matplotlib")

from lattice.sim.figure import BASELINE, STYLES, build_figure, render_png
from lattice.sim.runner import PolicyRun, run_policies
from lattice.sim.trace import MappingOptions, map_jobs, read_trace

POLICIES = ["lattice", "lattice:BestEffortFIFO", "fifo-backfill", "fifo-strict", "no-queueing"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[PolicyRun]:
    trace: Path = tmp_path_factory.mktemp("fig") / "g.csv"
    trace.write_text("submit,duration,units\n0,100,2\n10,100,4\n20,50,2\n30,400,4\n")
    jobs = map_jobs(read_trace(trace), MappingOptions(), capacity=4)
    return run_policies(jobs, POLICIES, capacity=4)


def test_png_is_a_png_of_the_figure(runs: list[PolicyRun]) -> None:
    data = render_png(runs)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (800, 1280)  # 10 x 16 inches at 80 dpi


def test_four_panels_with_titles_labels_and_ticks(runs: list[PolicyRun]) -> None:
    fig = build_figure(runs, unit="gpu")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "JCT CDF",
        "GPU utilisation",
        "Queued jobs",
        f"JCT ratio to {BASELINE} (solid: average, hatched: p99)",
    ]
    for ax in fig.axes:
        assert ax.get_xlabel()
        assert ax.get_ylabel()
        assert len(ax.get_xticks()) >= 2
        assert len(ax.get_yticks()) >= 2
    assert fig.axes[0].get_xscale() == "log"


def test_each_policy_has_its_own_line_style_and_marker(runs: list[PolicyRun]) -> None:
    fig = build_figure(runs)
    cdf = fig.axes[0]
    labels = [line.get_label() for line in cdf.get_lines()]
    # The no-queueing bound has no simulated result: not drawn, not in the legend.
    assert labels == [r.metrics.policy for r in runs if r.result is not None]
    styles = {(line.get_linestyle(), line.get_marker()) for line in cdf.get_lines()}
    assert len(styles) == len(labels)
    legend = cdf.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == labels
    assert len({s[2] for s in STYLES}) == len(STYLES)


def test_ratio_bars_are_avg_and_p99_over_the_baseline(runs: list[PolicyRun]) -> None:
    fig = build_figure(runs)
    bars = fig.axes[3]
    base = next(r.metrics for r in runs if r.metrics.policy == BASELINE)
    drawn = [r.metrics for r in runs if r.result is not None]
    heights = [p.get_height() for p in bars.patches if isinstance(p, Rectangle)]
    assert heights[: len(drawn)] == pytest.approx([m.avg_jct / base.avg_jct for m in drawn])
    assert heights[len(drawn) :] == pytest.approx([m.p99_jct / base.p99_jct for m in drawn])
    assert [t.get_text() for t in bars.get_xticklabels()] == [m.policy for m in drawn]
