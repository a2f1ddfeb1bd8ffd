"""A dependency-free PNG figure of a simulation: JCT CDFs, utilisation and queue length.

Contract: :func:`render_png` returns the bytes of an RGB PNG (``zlib`` + ``struct``, no
plotting library) :data:`WIDTH` pixels wide: a legend strip, then three panels stacked
vertically, sharing one colour per policy (:data:`COLOURS`, in the order of the runs):
1. "JCT CDF": the JCT CDF of each policy, x = log10(JCT in hours) from 0.01 h to 10,000 h
   (one grid line and tick label per decade), y = fraction of jobs, 0..1;
2. "<UNIT> utilisation" (``unit`` as given to ``lattice simulate --unit``; names of up to three
   letters are upper-cased): the fraction of capacity held over simulated time, 0..100 %;
3. "Queued jobs": the number of queued jobs over time, y scaled to the largest queue of any
   policy (tick labels 0 and that maximum).
Panels 2 and 3 share the time axis 0..makespan, labelled in minutes (under 1 h), hours (up to
72 h) or days, with round tick values. Light grey grid lines mark the x ticks and tenths of the
y range. Every panel has a title, axis labels and tick labels, drawn with the built-in bitmap
font of :mod:`lattice.sim.font` at scale :data:`TEXT_SCALE` (1 if a label would not fit
otherwise). The legend lists each drawn policy (``Metrics.policy``) after a swatch of its
colour, wrapping onto more rows as needed. Runs without a simulated result (the no-queueing
bound) are neither drawn nor listed, but keep their colour. :func:`layout` says where every
piece of text, swatch and plot area goes; :func:`render_png` draws exactly that. Pure.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from lattice.sim import font
from lattice.sim.runner import PolicyRun

__all__ = ["COLOURS", "TEXT_SCALE", "WIDTH", "Item", "Layout", "layout", "render_png"]

Colour = tuple[int, int, int]

COLOURS: tuple[Colour, ...] = (
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
)

WIDTH = 900
TEXT_SCALE = 2
_BLACK: Colour = (0, 0, 0)
_GREY: Colour = (225, 225, 225)
_ML, _MR = 104, 44  # plot margins: left (y tick and axis labels), right (last x tick label)
_PANEL, _PLOT_Y, _PLOT_H = 290, 34, 190  # panel height; plot top offset and height in it
_TITLE_Y, _XTICK_DY, _XLABEL_DY = 8, 12, 36  # title offset; x ticks/label below the plot
_YLABEL_X, _YTICK_GAP, _TICK = 12, 10, 4
_LEG_Y, _LEG_ROW, _LEG_GAP = 10, 26, 28  # legend top, row pitch, gap between entries
_SWATCH_W, _SWATCH_H, _SWATCH_GAP = 28, 12, 8
_LO, _HI = -2, 4  # log10 hours at the ends of the JCT axis


@dataclass(frozen=True, slots=True)
class Item:
    """One thing :func:`render_png` draws, and the box it occupies (``x, y`` top left).

    ``role`` is ``plot`` (a panel's plotting area; ``text`` is the panel title), ``title``,
    ``xlabel``, ``ylabel`` (drawn rotated, reading upwards), ``xtick``, ``ytick``, ``legend``
    (a policy name) or ``swatch`` (``text`` is the policy name, ``colour`` its fill).
    ``panel`` is 0..2 (top to bottom), or -1 for the legend.
    """

    role: str
    text: str
    x: int
    y: int
    w: int
    h: int
    panel: int
    scale: int = TEXT_SCALE
    colour: Colour = _BLACK


@dataclass(frozen=True, slots=True)
class Layout:
    """The size of the figure and everything on it."""

    width: int
    height: int
    items: tuple[Item, ...]

    def plot(self, panel: int) -> Item:
        return next(i for i in self.items if i.role == "plot" and i.panel == panel)


@dataclass(frozen=True, slots=True)
class _Axes:
    title: str
    xlabel: str
    ylabel: str
    xticks: tuple[tuple[float, str], ...]  # (fraction of the axis, label); grid lines too
    yticks: tuple[tuple[float, str], ...]


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        self.px = bytearray(b"\xff" * (width * height * 3))

    def dot(self, x: int, y: int, c: Colour) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i : i + 3] = bytes(c)

    def rect(self, x: int, y: int, w: int, h: int, c: Colour) -> None:
        for yy in range(y, y + h):
            for xx in range(x, x + w):
                self.dot(xx, yy, c)

    def line(self, x0: float, y0: float, x1: float, y1: float, c: Colour) -> None:
        steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for s in range(steps + 1):
            f = s / steps
            x, y = round(x0 + (x1 - x0) * f), round(y0 + (y1 - y0) * f)
            self.dot(x, y, c)
            self.dot(x, y + 1, c)

    def text(self, item: Item) -> None:
        """Draw ``item.text`` in its box; rotated 90 degrees anticlockwise for ``ylabel``."""
        s = item.scale
        for i, ch in enumerate(item.text):
            for r, row in enumerate(font.glyph(ch)):
                for col, bit in enumerate(row):
                    if bit != "#":
                        continue
                    u, v = (i * (font.WIDTH + 1) + col) * s, r * s
                    if item.role == "ylabel":
                        self.rect(item.x + v, item.y + item.h - u - s, s, s, item.colour)
                    else:
                        self.rect(item.x + u, item.y + v, s, s, item.colour)

    def png(self) -> bytes:
        raw = b"".join(
            b"\x00" + bytes(self.px[y * self.w * 3 : (y + 1) * self.w * 3]) for y in range(self.h)
        )

        def chunk(tag: bytes, data: bytes) -> bytes:
            body = tag + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def _span(runs: Sequence[PolicyRun]) -> float:
    span = max(
        (r.result.timeline[-1][0] for r in runs if r.result is not None and r.result.timeline),
        default=1.0,
    )
    return span if span > 0 else 1.0


def _qmax(runs: Sequence[PolicyRun]) -> int:
    q = max((p[2] for r in runs if r.result is not None for p in r.result.timeline), default=1)
    return max(q, 1)


def _time_axis(span: float) -> tuple[str, tuple[tuple[float, str], ...]]:
    """The time unit's name and round ticks (at most 9) for an axis 0..``span`` seconds."""
    if span < 3600:
        name, div = "minutes", 60.0
    elif span <= 72 * 3600:
        name, div = "hours", 3600.0
    else:
        name, div = "days", 86400.0
    v = span / div
    raw = v / 8
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    n = int(v / step + 1e-9)
    return name, tuple((k * step / v, f"{k * step:,.{decimals}f}") for k in range(n + 1))


def _unit_name(unit: str) -> str:
    u = unit.strip() or "unit"
    return u.upper() if len(u) <= 3 else u


def _axes(runs: Sequence[PolicyRun], unit: str) -> tuple[_Axes, _Axes, _Axes]:
    name = _unit_name(unit)
    tname, tticks = _time_axis(_span(runs))
    decades = tuple(
        ((d - _LO) / (_HI - _LO), f"{10.0**d:,.{max(0, -d)}f}") for d in range(_LO, _HI + 1)
    )
    xlabel = f"simulated time ({tname})"
    return (
        _Axes(
            "JCT CDF",
            "JCT (hours, log scale)",
            "fraction of jobs",
            decades,
            ((0.0, "0"), (0.5, "0.5"), (1.0, "1")),
        ),
        _Axes(
            f"{name[0].upper()}{name[1:]} utilisation",
            xlabel,
            f"% of {name}s held",
            tticks,
            ((0.0, "0%"), (0.5, "50%"), (1.0, "100%")),
        ),
        _Axes(
            "Queued jobs", xlabel, "jobs in queue", tticks, ((0.0, "0"), (1.0, f"{_qmax(runs):,}"))
        ),
    )


def _fit(text: str, room: int) -> int:
    """:data:`TEXT_SCALE`, or 1 if ``text`` would be wider than ``room`` at that scale."""
    return TEXT_SCALE if font.text_width(text, TEXT_SCALE) <= room else 1


def _label(role: str, text: str, x: int, y: int, panel: int, *, scale: int) -> Item:
    return Item(role, text, x, y, font.text_width(text, scale), font.HEIGHT * scale, panel, scale)


def _legend(runs: Sequence[PolicyRun]) -> tuple[list[Item], int]:
    """The legend's swatches and names, and the y just below the legend strip."""
    items: list[Item] = []
    right = WIDTH - _MR
    room = right - _ML - _SWATCH_W - _SWATCH_GAP
    x, row = _ML, 0
    for i, run in enumerate(runs):
        if run.result is None:
            continue
        name = run.metrics.policy
        while len(name) > 1 and font.text_width(name, TEXT_SCALE) > room:
            name = name[:-2] + "."
        width = _SWATCH_W + _SWATCH_GAP + font.text_width(name, TEXT_SCALE)
        if x > _ML and x + width > right:
            x, row = _ML, row + 1
        y = _LEG_Y + row * _LEG_ROW
        colour = COLOURS[i % len(COLOURS)]
        cap = font.ASCENT * TEXT_SCALE
        sy = y + (cap - _SWATCH_H) // 2
        items.append(Item("swatch", name, x, sy, _SWATCH_W, _SWATCH_H, -1, colour=colour))
        items.append(_label("legend", name, x + _SWATCH_W + _SWATCH_GAP, y, -1, scale=TEXT_SCALE))
        x += width + _LEG_GAP
    rows = row + 1 if items else 0
    return items, _LEG_Y + rows * _LEG_ROW + 4


def _panel_items(ax: _Axes, top: int, panel: int) -> list[Item]:
    pw = WIDTH - _ML - _MR
    py, bottom = top + _PLOT_Y, top + _PLOT_Y + _PLOT_H
    out = [Item("plot", ax.title, _ML, py, pw, _PLOT_H, panel)]
    s = _fit(ax.title, pw)
    tw = font.text_width(ax.title, s)
    out.append(_label("title", ax.title, _ML + (pw - tw) // 2, top + _TITLE_Y, panel, scale=s))
    s = _fit(ax.xlabel, pw)
    tw = font.text_width(ax.xlabel, s)
    out.append(
        _label("xlabel", ax.xlabel, _ML + (pw - tw) // 2, bottom + _XLABEL_DY, panel, scale=s)
    )
    s = _fit(ax.ylabel, _PLOT_H)
    th = font.text_width(ax.ylabel, s)
    out.append(
        Item(
            "ylabel", ax.ylabel, _YLABEL_X, py + (_PLOT_H - th) // 2, font.HEIGHT * s, th, panel, s
        )
    )
    for fx, text in ax.xticks:
        tw = font.text_width(text, TEXT_SCALE)
        x = _ML + round(fx * pw) - tw // 2
        out.append(_label("xtick", text, x, bottom + _XTICK_DY, panel, scale=TEXT_SCALE))
    ytick_room = _ML - _YTICK_GAP - (_YLABEL_X + font.HEIGHT * TEXT_SCALE + 4)
    for fy, text in ax.yticks:
        s = _fit(text, ytick_room)
        ty = bottom - round(fy * _PLOT_H) - font.ASCENT * s // 2
        x = _ML - _YTICK_GAP - font.text_width(text, s)
        out.append(_label("ytick", text, x, ty, panel, scale=s))
    return out


def layout(runs: Sequence[PolicyRun], *, unit: str = "gpu") -> Layout:
    """Where :func:`render_png` puts everything for ``runs`` (see the module docstring)."""
    items, legend_bottom = _legend(runs)
    for p, ax in enumerate(_axes(runs, unit)):
        items.extend(_panel_items(ax, legend_bottom + p * _PANEL, p))
    return Layout(WIDTH, legend_bottom + 3 * _PANEL, tuple(items))


def _frame(cv: _Canvas, plot: Item, ax: _Axes) -> None:
    left, right, top, bottom = plot.x, plot.x + plot.w, plot.y, plot.y + plot.h
    for fx, _ in ax.xticks:
        x = left + round(fx * plot.w)
        cv.line(x, top, x, bottom, _GREY)
        cv.line(x, bottom, x, bottom + _TICK, _BLACK)
    for k in range(11):
        y = bottom - k * plot.h / 10
        cv.line(left, y, right, y, _GREY)
    for fy, _ in ax.yticks:
        y = bottom - round(fy * plot.h)
        cv.line(left - _TICK, y, left, y, _BLACK)
    cv.line(left, bottom, right, bottom, _BLACK)
    cv.line(left, top, left, bottom, _BLACK)


def _plot(cv: _Canvas, plot: Item, points: Sequence[tuple[float, float]], c: Colour) -> None:
    """Step plot of ``(fx, fy)``, both clamped to [0, 1], inside ``plot``."""
    bottom = plot.y + plot.h
    prev: tuple[float, float] | None = None
    for fx, fy in points:
        x = plot.x + min(1.0, max(0.0, fx)) * plot.w
        y = bottom - min(1.0, max(0.0, fy)) * plot.h
        if prev is not None:
            cv.line(prev[0], prev[1], x, prev[1], c)
            cv.line(x, prev[1], x, y, c)
        prev = (x, y)


def render_png(runs: Sequence[PolicyRun], *, unit: str = "gpu") -> bytes:
    """The figure of ``runs`` as PNG bytes (see the module docstring)."""
    lay = layout(runs, unit=unit)
    cv = _Canvas(lay.width, lay.height)
    plots = [lay.plot(p) for p in range(3)]
    for plot, ax in zip(plots, _axes(runs, unit), strict=True):
        _frame(cv, plot, ax)
    span, qmax = _span(runs), _qmax(runs)
    for i, run in enumerate(runs):
        colour = COLOURS[i % len(COLOURS)]
        if run.result is None:
            continue  # the no-queueing bound has no per-job run to draw
        jcts = sorted(j.finish - j.submit for j in run.result.jobs if j.finish is not None)
        n = len(jcts)
        cdf = [
            ((math.log10(max(v / 3600, 10.0**_LO)) - _LO) / (_HI - _LO), (k + 1) / n)
            for k, v in enumerate(jcts)
        ]
        _plot(cv, plots[0], [(0.0, 0.0), *cdf], colour)
        if not run.result.timeline:
            continue
        cap = run.result.capacity
        tl = run.result.timeline
        _plot(cv, plots[1], [(t / span, used / cap) for t, used, _ in tl], colour)
        _plot(cv, plots[2], [(t / span, q / qmax) for t, _, q in tl], colour)
    for item in lay.items:
        if item.role == "swatch":
            cv.rect(item.x, item.y, item.w, item.h, item.colour)
        elif item.role != "plot":
            cv.text(item)
    return cv.png()
