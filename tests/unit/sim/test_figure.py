"""The simulation figure: a decodable PNG with titles, axis and tick labels and a legend."""

from __future__ import annotations

import struct
import zlib

import pytest

from lattice.sim import font
from lattice.sim.engine import JobResult, SimResult
from lattice.sim.figure import COLOURS, TEXT_SCALE, WIDTH, Item, Layout, layout, render_png
from lattice.sim.metrics import measure
from lattice.sim.runner import PolicyRun, run_policies
from lattice.sim.trace import MappingOptions, map_jobs, read_trace

WHITE, BLACK, GRID = (255, 255, 255), (0, 0, 0), (225, 225, 225)
Pixel = tuple[int, int, int]


class Image:
    """An RGB PNG decoded with zlib alone (the figure writes filter type 0 on every row)."""

    def __init__(self, data: bytes) -> None:
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        pos, chunks = 8, []
        while pos < len(data):
            (length,) = struct.unpack(">I", data[pos : pos + 4])
            body = data[pos + 4 : pos + 8 + length]
            (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
            assert zlib.crc32(body) == crc
            chunks.append((body[:4], body[4:]))
            pos += 12 + length
        assert [tag for tag, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
        self.w, self.h, depth, colour_type, *_ = struct.unpack(">IIBBBBB", chunks[0][1])
        assert (depth, colour_type) == (8, 2)
        raw = zlib.decompress(chunks[1][1])
        stride = 1 + 3 * self.w
        assert len(raw) == stride * self.h
        assert all(raw[y * stride] == 0 for y in range(self.h))
        self.rows = [raw[y * stride + 1 : (y + 1) * stride] for y in range(self.h)]

    def at(self, x: int, y: int) -> Pixel:
        r, g, b = self.rows[y][3 * x : 3 * x + 3]
        return (r, g, b)

    def box(self, item: Item) -> list[list[Pixel]]:
        return [
            [self.at(x, y) for x in range(item.x, item.x + item.w)]
            for y in range(item.y, item.y + item.h)
        ]

    def count(self, colour: Pixel, x0: int = 0, y0: int = 0, x1: int = -1, y1: int = -1) -> int:
        x1, y1 = self.w if x1 < 0 else x1, self.h if y1 < 0 else y1
        return sum(self.at(x, y) == colour for y in range(y0, y1) for x in range(x0, x1))


def ink(pixels: list[list[Pixel]], scale: int) -> list[str]:
    """Down-sample a text box to one character per font pixel, checking blocks are uniform."""
    out = []
    for y in range(0, len(pixels), scale):
        row = ""
        for x in range(0, len(pixels[0]), scale):
            block = {pixels[y + dy][x + dx] for dy in range(scale) for dx in range(scale)}
            assert len(block) == 1, f"a font pixel at ({x}, {y}) is not a solid block"
            row += "#" if block == {BLACK} else "."
        out.append(row)
    return out


def expected(text: str) -> list[str]:
    """The bitmap of ``text`` from the font: glyph rows side by side, one blank column apart."""
    return [".".join(font.glyph(ch)[r] for ch in text) for r in range(font.HEIGHT)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[PolicyRun]:
    trace = tmp_path_factory.mktemp("fig") / "g.csv"
    trace.write_text("submit,duration,units\n0,100,2\n10,100,4\n20,50,2\n30,400,4\n")
    jobs = map_jobs(read_trace(trace), MappingOptions(), capacity=4)
    return run_policies(
        jobs, ["lattice", "fifo-backfill", "no-queueing", "fifo-strict"], capacity=4
    )


def synthetic(name: str, span: float, queue: int) -> PolicyRun:
    """One job over ``span`` seconds, with ``queue`` jobs queued at the start."""
    job = JobResult(id="a", priority=0, submit=0.0, start=0.0, finish=span, resizes=0, alone=span)
    result = SimResult(
        policy=name,
        capacity=4,
        jobs=(job,),
        busy_unit_seconds=4 * span,
        queued_seconds=0.0,
        queued_busy_unit_seconds=0.0,
        passes=1,
        timeline=((0.0, 4, queue), (span / 2, 2, 0), (span, 0, 0)),
    )
    return PolicyRun(metrics=measure(result), result=result, wall_seconds=0.0)


def texts(lay: Layout, role: str, panel: int) -> list[str]:
    return [i.text for i in lay.items if i.role == role and i.panel == panel]


def overlaps(a: Item, b: Item) -> bool:
    return a.x < b.x + b.w and b.x < a.x + a.w and a.y < b.y + b.h and b.y < a.y + a.h


# The font.


REQUIRED = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.,:%-+/()_<>=?!'*#[];"


def test_font_covers_the_required_characters_with_distinct_glyphs() -> None:
    glyphs = {ch: font.glyph(ch) for ch in REQUIRED}
    for ch, rows in glyphs.items():
        assert len(rows) == font.HEIGHT, ch
        assert all(len(r) == font.WIDTH and set(r) <= {"#", "."} for r in rows), ch
        assert rows != font.MISSING, ch
        assert any("#" in r for r in rows), ch
    assert len(set(glyphs.values())) == len(REQUIRED)  # e.g. O, 0; l, 1, I all differ
    assert font.glyph(" ") == ("." * font.WIDTH,) * font.HEIGHT
    assert font.glyph("\u00e9") == font.MISSING


def test_glyph_bitmaps() -> None:
    assert font.glyph("A") == (
        ".###.",
        "#...#",
        "#...#",
        "#...#",
        "#####",
        "#...#",
        "#...#",
        ".....",
        ".....",
    )
    # Descenders sit below the baseline (rows ASCENT..HEIGHT-1); capitals never use them.
    for ch in "gjpqy,":
        assert any("#" in r for r in font.glyph(ch)[font.ASCENT :]), ch
    for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789":
        assert all(set(r) == {"."} for r in font.glyph(ch)[font.ASCENT :]), ch
    assert font.text_width("", 2) == 0
    assert font.text_width("ab", 1) == 2 * font.WIDTH + 1
    assert font.text_width("ab", 2) == 2 * (2 * font.WIDTH + 1)


# The figure.


def test_png_decodes_to_the_layout_size(runs: list[PolicyRun]) -> None:
    data = render_png(runs)
    img = Image(data)
    lay = layout(runs)
    assert (img.w, img.h) == (WIDTH, lay.height) == (lay.width, lay.height)
    assert 600 <= img.h <= 1100  # small enough to embed in the README
    assert len(data) < 100_000


def test_titles_axis_and_tick_labels(runs: list[PolicyRun]) -> None:
    lay = layout(runs)
    assert [texts(lay, "title", p) for p in range(3)] == [
        ["JCT CDF"],
        ["GPU utilisation"],
        ["Queued jobs"],
    ]
    assert texts(lay, "xtick", 0) == ["0.01", "0.1", "1", "10", "100", "1,000", "10,000"]
    assert texts(lay, "xlabel", 0) == ["JCT (hours, log scale)"]
    assert texts(lay, "ytick", 0) == ["0", "0.5", "1"]
    assert texts(lay, "ytick", 1) == ["0%", "50%", "100%"]
    assert texts(lay, "ylabel", 1) == ["% of GPUs held"]
    qmax = max(p[2] for r in runs if r.result is not None for p in r.result.timeline)
    assert qmax > 0
    assert texts(lay, "ytick", 2) == ["0", str(qmax)]
    # The trace spans a few minutes.
    assert texts(lay, "xlabel", 1) == texts(lay, "xlabel", 2) == ["simulated time (minutes)"]
    assert texts(lay, "xtick", 1)[0] == "0"


def test_utilisation_title_uses_the_unit_name(runs: list[PolicyRun]) -> None:
    assert texts(layout(runs, unit="tpu"), "title", 1) == ["TPU utilisation"]
    lay = layout(runs, unit="core")
    assert texts(lay, "title", 1) == ["Core utilisation"]
    assert texts(lay, "ylabel", 1) == ["% of cores held"]


@pytest.mark.parametrize(
    ("span", "unit", "ticks"),
    [
        (30 * 3600.0, "hours", ["0", "5", "10", "15", "20", "25", "30"]),
        (80 * 86400.0, "days", ["0", "10", "20", "30", "40", "50", "60", "70", "80"]),
        (45 * 60.0, "minutes", ["0", "10", "20", "30", "40"]),
        (3 * 86400.0 + 7200.0, "days", ["0.0", "0.5", "1.0", "1.5", "2.0", "2.5", "3.0"]),
    ],
)
def test_time_axis_unit_and_round_ticks(span: float, unit: str, ticks: list[str]) -> None:
    lay = layout([synthetic("p", span, 3)])
    assert texts(lay, "xlabel", 2) == [f"simulated time ({unit})"]
    assert texts(lay, "xtick", 1) == texts(lay, "xtick", 2) == ticks


def test_label_boxes_are_inked_inside_the_image_and_never_overlap(runs: list[PolicyRun]) -> None:
    lay = layout(runs)
    img = Image(render_png(runs))
    text_roles = {"title", "xlabel", "ylabel", "xtick", "ytick", "legend"}
    boxes = [i for i in lay.items if i.role in text_roles | {"swatch", "plot"}]
    assert {i.role for i in boxes} == text_roles | {"swatch", "plot"}
    for item in boxes:
        assert item.x >= 0, item
        assert item.y >= 0, item
        assert item.x + item.w <= img.w, item
        assert item.y + item.h <= img.h, item
        if item.role in text_roles:
            pixels = {p for row in img.box(item) for p in row}
            assert BLACK in pixels, item  # text was drawn here
            assert pixels <= {BLACK, WHITE}, item  # and nothing else (no plot lines)
    for k, a in enumerate(boxes):
        for b in boxes[k + 1 :]:
            assert not overlaps(a, b), (a, b)


def test_title_and_labels_render_the_font_bitmaps(runs: list[PolicyRun]) -> None:
    lay = layout(runs)
    img = Image(render_png(runs))
    title = next(i for i in lay.items if i.role == "title" and i.panel == 0)
    assert title.scale == TEXT_SCALE == 2
    assert ink(img.box(title), title.scale) == expected("JCT CDF")
    tick = next(i for i in lay.items if i.role == "ytick" and i.text == "100%")
    assert ink(img.box(tick), tick.scale) == expected("100%")
    # The y axis label reads upwards: rotating its box clockwise gives the plain bitmap.
    ylabel = next(i for i in lay.items if i.role == "ylabel" and i.panel == 2)
    pixels = img.box(ylabel)
    turned = [[pixels[ylabel.h - 1 - u][v] for v in range(ylabel.w)] for u in range(ylabel.h)]
    assert ink([list(col) for col in zip(*turned, strict=True)], ylabel.scale) == expected(
        "jobs in queue"
    )


def test_legend_lists_each_drawn_policy_with_a_swatch_of_its_colour(
    runs: list[PolicyRun],
) -> None:
    lay = layout(runs)
    img = Image(render_png(runs))
    drawn = [(i, r) for i, r in enumerate(runs) if r.result is not None]
    assert [i.text for i in lay.items if i.role == "legend"] == [r.metrics.policy for _, r in drawn]
    swatches = [i for i in lay.items if i.role == "swatch"]
    assert [s.colour for s in swatches] == [COLOURS[i] for i, _ in drawn]
    top = min(i.y for i in lay.items if i.panel == 0)
    for swatch in swatches:
        assert swatch.y + swatch.h <= top  # in the legend strip, above the first panel
        assert {p for row in img.box(swatch) for p in row} == {swatch.colour}
        assert img.count(swatch.colour, y1=top) == swatch.w * swatch.h
    # Each name follows its swatch on the same line.
    for swatch, name in zip(swatches, [i for i in lay.items if i.role == "legend"], strict=True):
        assert name.text == swatch.text
        assert name.x > swatch.x + swatch.w
        assert name.y <= swatch.y < name.y + name.h


def test_each_policy_is_plotted_in_its_colour_and_no_queueing_is_not(
    runs: list[PolicyRun],
) -> None:
    lay = layout(runs)
    img = Image(render_png(runs))
    for i, run in enumerate(runs):
        colour = COLOURS[i]
        if run.result is None:
            assert run.metrics.policy == "no-queueing"
            assert img.count(colour) == 0
            continue
        for p in range(3):
            plot = lay.plot(p)
            inside = img.count(colour, plot.x, plot.y, plot.x + plot.w + 1, plot.y + plot.h + 2)
            assert inside > 0, (run.metrics.policy, p)


def test_legend_wraps_and_long_labels_shrink_to_fit() -> None:
    runs = [synthetic(f"policy-number-{k}", 3600.0 * (k + 1), 1_234_567) for k in range(7)]
    lay = layout(runs, unit="accelerator")
    legend = [i for i in lay.items if i.role == "legend"]
    assert len(legend) == 7
    assert len({i.y for i in legend}) > 1  # more than one row
    assert all(i.x + i.w <= WIDTH for i in legend)
    assert lay.height > layout(runs[:1]).height
    ylabel = next(i for i in lay.items if i.role == "ylabel" and i.panel == 1)
    assert ylabel.text == "% of accelerators held"
    assert ylabel.scale == 1  # too long for the plot height at scale 2
    assert ylabel.h <= lay.plot(1).h
    top = next(i for i in lay.items if i.role == "ytick" and i.panel == 2 and i.text != "0")
    assert (top.text, top.scale) == ("1,234,567", 1)
    assert top.x >= 0
    Image(render_png(runs, unit="accelerator"))  # still a valid PNG
