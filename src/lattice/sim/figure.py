"""A dependency-free PNG figure of a simulation: JCT CDFs, utilisation and queue length.

Contract: :func:`render_png` returns the bytes of an RGB PNG (``zlib`` + ``struct``, no
plotting library) with three panels stacked vertically, sharing one colour per policy
(:data:`COLOURS`, in the order of the runs):
1. the JCT CDF of each policy, x = log10(JCT in hours) from 0.01 h to 10,000 h, y = 0..1;
2. the fraction of capacity held over simulated time (x = 0..makespan), one line per policy;
3. the number of queued jobs over time, y scaled to the largest queue of any policy.
Light grey grid lines mark decades (panel 1) and tenths of the y range (panels 2 and 3).
Runs without a simulated result (the no-queueing bound) are skipped, but keep their colour.
No text is drawn; the docs carry the legend. Pure.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence

from lattice.sim.runner import PolicyRun

__all__ = ["COLOURS", "render_png"]

COLOURS: tuple[tuple[int, int, int], ...] = (
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

_W, _PH, _M = 900, 260, 30


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        self.px = bytearray(b"\xff" * (width * height * 3))

    def dot(self, x: int, y: int, c: tuple[int, int, int]) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i : i + 3] = bytes(c)

    def line(self, x0: float, y0: float, x1: float, y1: float, c: tuple[int, int, int]) -> None:
        steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for s in range(steps + 1):
            f = s / steps
            x, y = round(x0 + (x1 - x0) * f), round(y0 + (y1 - y0) * f)
            self.dot(x, y, c)
            self.dot(x, y + 1, c)

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


def _frame(cv: _Canvas, top: int, xs: Sequence[float], ys: Sequence[float]) -> None:
    grey, black = (225, 225, 225), (0, 0, 0)
    left, right, bottom = _M, _W - _M, top + _PH - _M
    for fx in xs:
        x = left + fx * (right - left)
        cv.line(x, top + _M, x, bottom, grey)
    for fy in ys:
        y = bottom - fy * (bottom - top - _M)
        cv.line(left, y, right, y, grey)
    cv.line(left, bottom, right, bottom, black)
    cv.line(left, top + _M, left, bottom, black)


def _plot(
    cv: _Canvas, top: int, points: Sequence[tuple[float, float]], c: tuple[int, int, int]
) -> None:
    """Step plot of ``(fx, fy)`` in [0, 1]^2 inside the panel starting at ``top``."""
    left, right, bottom = _M, _W - _M, top + _PH - _M
    height = bottom - top - _M
    prev: tuple[float, float] | None = None
    for fx, fy in points:
        x, y = left + fx * (right - left), bottom - min(1.0, max(0.0, fy)) * height
        if prev is not None:
            cv.line(prev[0], prev[1], x, prev[1], c)
            cv.line(x, prev[1], x, y, c)
        prev = (x, y)


def render_png(runs: Sequence[PolicyRun]) -> bytes:
    """The three-panel figure of ``runs`` as PNG bytes (see the module docstring)."""
    cv = _Canvas(_W, 3 * _PH)
    tenths = [i / 10 for i in range(11)]
    lo, hi = -2.0, 4.0
    _frame(cv, 0, [(d - lo) / (hi - lo) for d in range(-2, 5)], tenths)
    _frame(cv, _PH, tenths, tenths)
    _frame(cv, 2 * _PH, tenths, tenths)
    span = max(
        (r.result.timeline[-1][0] for r in runs if r.result is not None and r.result.timeline),
        default=1.0,
    )
    qmax = max((p[2] for r in runs if r.result is not None for p in r.result.timeline), default=1)
    for i, run in enumerate(runs):
        colour = COLOURS[i % len(COLOURS)]
        if run.result is None:
            continue  # the no-queueing bound has no per-job run to draw
        jcts = sorted(j.finish - j.submit for j in run.result.jobs if j.finish is not None)
        n = len(jcts)
        cdf = [
            ((math.log10(max(v / 3600, 10**lo)) - lo) / (hi - lo), (k + 1) / n)
            for k, v in enumerate(jcts)
        ]
        _plot(cv, 0, [(0.0, 0.0), *cdf], colour)
        if not run.result.timeline:
            continue
        cap = run.result.capacity
        tl = run.result.timeline
        _plot(cv, _PH, [(t / span, used / cap) for t, used, _ in tl], colour)
        _plot(cv, 2 * _PH, [(t / span, q / max(qmax, 1)) for t, _, q in tl], colour)
    return cv.png()
