"""The timeline as a PNG drawn straight into pixels: the notebook's picture of a cell.

It draws the `Chart` that ``timeline`` draws on a matplotlib Axes (the same lanes, bars,
colours, density, marks, memory lines, legend and alt text), with numpy for the shapes and
Pillow for the text, in DejaVu Sans as matplotlib's default. Building an Axes and laying out
its text took most of a cell's display (about 100 ms of matplotlib for a one-thread cell);
this takes a few ms. ``df.recfn.timeline()`` stays the figure to customise.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import struct
import zlib
from typing import Any, Optional

import numpy as np
import pandas as pd
import pyarrow as pa

from recfn.analysis.plots.chart import LABEL_MIN_PX, MAX_LABELS, Chart, MemoryLine, Scale
from recfn.analysis.plots.ticks import tick_values
from recfn.analysis.units import printable
from recfn.errors import RecfnValueError

DPI = 96
"""Pixels per inch the picture states (its text sizes are matplotlib's points at this)."""
PNG_LEVEL = 3
"""zlib's level for the PNG: a third less encoding time than the default 6, for ~9% more
bytes (a picture of flat colours; the notebook waits for it)."""
PNG_ISAL_LEVEL = 1
"""ISA-L's level for the PNG where the ``isal`` package is installed (a dependency where it has
wheels): the same zlib stream format, a tenth of zlib's level-3 time on the notebook's picture
(0.24 against 2.2 ms) for ~12% more bytes (22.6 against 20.1 kB)."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GLYPHS_CACHED = 1024
"""Rendered texts kept per process: a notebook's pictures repeat their labels, legends and
tick labels from cell to cell."""
TITLE_PX = 16
"""Title text, 12 pt."""
AXIS_PX = 13
"""Tick labels and the axis label, 10 pt."""
LANE_PX = 11
"""Lane labels, 8 pt."""
SMALL_PX = 9
"""Bar labels, the legend and the memory axis, 7 pt."""
TOP_PX = 30
"""Room above the lanes for the title."""
BOTTOM_PX = 44
"""Room below the lanes for the time axis: ticks, their labels and the axis label."""
MIN_PLOT_FRACTION = 0.45
"""The least share of the width the lanes keep, however long the labels."""
LEGEND_ROW_PX = 14
MEMORY_GAP_PX = 8
INK = (0, 0, 0)
GRID = (89, 89, 89)
"""Host separators (matplotlib's grey "0.35")."""
MARK_INK = (77, 77, 77)
"""Marks: black at 70% on white."""


@functools.lru_cache(maxsize=8)
def _font(size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.truetype(font_path(), size)


def font_path() -> str:
    """DejaVu Sans as matplotlib ships it (``get_data_path()/fonts/ttf``), found without
    importing matplotlib (a quarter of a second that the picture does not otherwise need)."""
    spec = importlib.util.find_spec("matplotlib")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise OSError("matplotlib is not installed: the picture's font, DejaVu Sans, comes with it")
    return os.path.join(folders[0], "mpl-data", "fonts", "ttf", "DejaVuSans.ttf")


def prepare() -> None:
    """Load now what the first picture would: its fonts (each read once per process) and
    Pillow's drawing module."""
    from PIL import ImageDraw  # noqa: F401

    for size in (TITLE_PX, AXIS_PX, LANE_PX, SMALL_PX):
        _font(size)


def timeline_png(
    df: pd.DataFrame | pa.Table,
    width_px: int,
    height_px: int,
    *,
    title: Optional[str] = None,
    max_depth: Optional[int] = None,
) -> tuple[bytes, str]:
    """The timeline of `df`, a frame or an event table (as ``df.recfn.timeline(max_depth=...,
    title=...)`` draws it, of the table's ``to_pandas()`` frame) as a
    `width_px` x `height_px` PNG, and its alt text (`Chart.describe`), which the PNG also
    carries as its Description. Margins fit the lane labels and the legend as measured in
    the font; the lanes keep at least `MIN_PLOT_FRACTION` of the width. Raises what
    ``timeline`` raises (`NothingToDrawError` for nothing to draw), RecfnValueError for a
    size too small to hold the axes."""
    if width_px < 200 or height_px < TOP_PX + BOTTOM_PX + 40:
        raise RecfnValueError(
            f"timeline_png: {width_px} x {height_px} px is too small (at least 200 x "
            f"{TOP_PX + BOTTOM_PX + 40})"
        )
    chart = Chart.of(df, max_depth=max_depth)
    canvas = _Canvas(width_px, height_px)
    left, right = _margins(chart, width_px)
    bottom = height_px - BOTTOM_PX
    lanes_bottom = bottom
    memory_top = bottom
    if chart.has_memory:
        ratio = float(np.clip(chart.layout.n_rows / 6, 2.5, 10))
        memory_top = bottom - round((bottom - TOP_PX) / (ratio + 1))
        lanes_bottom = memory_top - MEMORY_GAP_PX
    plot = _Box(left, TOP_PX, width_px - right, lanes_bottom)
    scale = chart.scale(plot.width)
    _draw_ranges(canvas, chart, scale, plot)
    if chart.mark_rows.size:
        at, bottoms = chart.mark_ticks(scale)
        for x, low in zip(plot.x(scale, at).tolist(), bottoms.tolist()):
            canvas.vline(x, plot.y(chart, low - 0.8), plot.y(chart, low), MARK_INK)
    for boundary in chart.host_breaks():
        canvas.hline(plot.y(chart, boundary), plot.left, plot.right, GRID)
    canvas.frame(plot)
    layout = chart.layout
    for centre, label in zip(
        (layout.band_top + (layout.band_rows - 1) / 2).tolist(), chart.lane_labels
    ):
        canvas.text((plot.left - 5, plot.y(chart, centre)), label, LANE_PX, "rm")
    legend: list[tuple[Optional[tuple[int, int, int]], str, bool]] = [
        (None if color is None else _rgb(color), label, False) for color, label in chart.legend
    ]
    if chart.mark_rows.size:
        legend.append((INK, "mark", True))
    peaks: list[str] = []
    axis_box = plot
    if chart.has_memory:
        axis_box = _Box(left, memory_top, width_px - right, bottom)
        lines = chart.memory_lines(scale)
        for line in lines:
            legend.append((_rgb(line.color), line.label, True))
            peaks.append(line.peak)
        _draw_memory(canvas, chart, lines, scale, axis_box)
    _draw_time_axis(canvas, chart, scale, axis_box)
    heading = printable(title) if title is not None else chart.default_title()
    canvas.text(((plot.left + plot.right) / 2, TOP_PX / 2), heading, TITLE_PX, "mm", plot.right)
    _draw_legend(canvas, legend, plot.right + 8, plot.top)
    alt = chart.describe(peaks)
    return canvas.png({"Software": "recfn", "Description": alt}), alt


class _Box:
    """A rectangle of the canvas, in pixels: `left` and `top` inside, `right` and `bottom`
    just outside."""

    def __init__(self, left: int, top: int, right: int, bottom: int) -> None:
        self.left, self.top, self.right, self.bottom = left, top, right, bottom

    @property
    def width(self) -> int:
        return self.right - self.left

    @property
    def height(self) -> int:
        return self.bottom - self.top

    def x(self, scale: Scale, ns: Any) -> Any:
        """Pixel columns of times."""
        return self.left + np.floor((np.asarray(ns) - scale.lo) / scale.ns_per_px).astype(np.int64)

    def y(self, chart: Chart, row: float) -> int:
        """The pixel line of a row coordinate (rows run from -0.5 at the top)."""
        return self.top + round((row + 0.5) * self.height / chart.layout.n_rows)


class _Canvas:
    """An RGB image with the few shapes and texts a timeline needs."""

    def __init__(self, width: int, height: int) -> None:
        self.pixels = np.full((height, width, 3), 255, dtype=np.uint8)
        self.texts: list[tuple[tuple[float, float], str, int, str]] = []

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    def fill(self, x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int]) -> None:
        self.pixels[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = color

    def hline(self, y: int, x0: int, x1: int, color: tuple[int, int, int]) -> None:
        self.fill(x0, y, x1, y + 1, color)

    def vline(self, x: int, y0: int, y1: int, color: tuple[int, int, int]) -> None:
        self.fill(x, min(y0, y1), x + 1, max(y0, y1) + 1, color)

    def frame(self, box: _Box) -> None:
        self.hline(box.top - 1, box.left - 1, box.right + 1, INK)
        self.hline(box.bottom, box.left - 1, box.right + 1, INK)
        self.vline(box.left - 1, box.top - 1, box.bottom, INK)
        self.vline(box.right, box.top - 1, box.bottom, INK)

    def text(
        self,
        at: tuple[float, float],
        text: str,
        size: int,
        anchor: str,
        limit: Optional[int] = None,
    ) -> None:
        """`text` at `at` (Pillow's `anchor`), cut with an ellipsis where it would pass
        `limit` (the canvas' right edge by default) or the left edge. Texts are drawn over
        every shape, when the picture is encoded."""
        font = _font(size)
        limit = self.width if limit is None else limit
        x = at[0]
        room = {"l": limit - x, "m": 2 * min(x, limit - x), "r": x}[anchor[0]]
        text = fit(text, font, room)
        if text:
            self.texts.append((at, text, size, anchor))

    def png(self, texts: dict[str, str]) -> bytes:
        """The picture, its texts drawn as Pillow draws them, as PNG bytes with `texts` as
        its text chunks."""
        for (x, y), text, size, anchor in self.texts:
            mask, left, top = _glyphs(text, size, anchor, math.modf(x)[0], math.modf(y)[0])
            _ink(self.pixels, mask, int(x) + left, int(y) + top, INK)
        return encode_png(self.pixels, texts)


@functools.lru_cache(maxsize=GLYPHS_CACHED)
def _glyphs(
    text: str, size: int, anchor: str, fraction_x: float, fraction_y: float
) -> tuple[np.ndarray, int, int]:
    """The coverage (0-255) of `text` drawn by Pillow at a point whose fractional part is
    (`fraction_x`, `fraction_y`), and the offset of its first pixel from the point's integer
    part: what ``ImageDraw.text`` would blend there, rendered once."""
    from PIL import Image, ImageDraw

    font = _font(size)
    left, top, right, bottom = font.getbbox(text, anchor=anchor)
    origin_x, origin_y = 2 + max(-math.floor(left), 0), 2 + max(-math.floor(top), 0)
    width = origin_x + max(math.ceil(right), 0) + 2
    height = origin_y + max(math.ceil(bottom), 0) + 2
    image = Image.new("L", (width, height), 0)
    at = (origin_x + fraction_x, origin_y + fraction_y)
    ImageDraw.Draw(image).text(at, text, font=font, fill=255, anchor=anchor)
    mask = np.asarray(image)
    rows, columns = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return np.zeros((0, 0), dtype=np.uint8), 0, 0
    cut = mask[rows[0] : rows[-1] + 1, columns[0] : columns[-1] + 1].copy()
    cut.flags.writeable = False  # shared by every picture that draws this text
    return cut, int(columns[0]) - origin_x, int(rows[0]) - origin_y


def _ink(pixels: np.ndarray, mask: np.ndarray, x: int, y: int, color: tuple[int, ...]) -> None:
    """`color` blended into `pixels` through `mask` placed at (`x`, `y`), clipped to the
    picture, rounded as Pillow rounds it (``(a * (255 - m) + c * m) / 255``)."""
    height, width = mask.shape
    x0, y0 = max(x, 0), max(y, 0)
    x1, y1 = min(x + width, pixels.shape[1]), min(y + height, pixels.shape[0])
    if x1 <= x0 or y1 <= y0:
        return
    cover = mask[y0 - y : y1 - y, x0 - x : x1 - x, np.newaxis].astype(np.uint32)
    area = pixels[y0:y1, x0:x1].astype(np.uint32)
    mixed = area * (255 - cover) + np.asarray(color, dtype=np.uint32) * cover + 128
    pixels[y0:y1, x0:x1] = ((mixed >> 8) + mixed) >> 8


def encode_png(pixels: np.ndarray, texts: dict[str, str]) -> bytes:
    """RGB `pixels` (height x width x 3, uint8) as a PNG at `DPI`, with `texts` as text chunks
    (iTXt where a text is not Latin-1). Rows are stored unfiltered: a picture of flat colours
    compresses as small without a filter, and Pillow's choice of filter per row took twice as
    long as the compression itself."""
    height, width, _ = pixels.shape
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # each row: filter 0, its bytes
    rows[:, 1:] = pixels.reshape(height, 3 * width)
    per_metre = round(DPI / 0.0254)
    chunks = [
        _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)),
        _chunk(b"pHYs", struct.pack(">IIB", per_metre, per_metre, 1)),
    ]
    for key, value in texts.items():
        try:
            chunks.append(_chunk(b"tEXt", key.encode("latin-1") + b"\0" + value.encode("latin-1")))
        except UnicodeEncodeError:
            body = key.encode("latin-1") + b"\0\0\0\0\0" + value.encode("utf-8")
            chunks.append(_chunk(b"iTXt", body))
    chunks.append(_chunk(b"IDAT", _compressed(rows.data)))
    chunks.append(_chunk(b"IEND", b""))
    return PNG_SIGNATURE + b"".join(chunks)


def _compressed(data: memoryview) -> bytes:
    """``data`` as a zlib stream: ISA-L's where installed, zlib's otherwise."""
    try:
        from isal import isal_zlib
    except ImportError:  # a platform without its wheels
        return zlib.compress(data, PNG_LEVEL)
    return bytes(isal_zlib.compress(data, PNG_ISAL_LEVEL))


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


@functools.lru_cache(maxsize=GLYPHS_CACHED)
def _length(font: Any, text: str) -> float:
    """``font.getlength(text)``, measured once per process: the lane labels, legend entries
    and tick labels repeat from picture to picture."""
    length: float = font.getlength(text)
    return length


def fit(text: str, font: Any, room: float) -> str:
    """`text` cut with an ellipsis to fit `room` pixels in `font`; empty when not even two
    characters fit."""
    if _length(font, text) <= room:
        return text
    low, high = 0, len(text)
    while low < high:  # the longest prefix that fits with its ellipsis
        middle = (low + high + 1) // 2
        if _length(font, text[:middle] + "…") <= room:
            low = middle
        else:
            high = middle - 1
    cut = text[:low] + "…"
    return cut if low >= 1 else ""


def _rgb(color: Any) -> tuple[int, int, int]:
    red, green, blue = (round(float(c) * 255) for c in list(color)[:3])
    return red, green, blue


def _margins(chart: Chart, width: int) -> tuple[int, int]:
    """Left and right margins: the longest lane label, the widest legend entry."""
    lane_font, legend_font = _font(LANE_PX), _font(SMALL_PX)
    labels = [*chart.lane_labels, "MiB"] if chart.has_memory else chart.lane_labels
    left = 16 + max((_length(lane_font, label) for label in labels), default=0.0)
    entries = [label for _, label in chart.legend] + ["memory (device)"] * chart.has_memory
    right = 40 + max((_length(legend_font, label) for label in entries), default=0.0)
    room = (1 - MIN_PLOT_FRACTION) * width
    if left + right > room:
        left, right = left * room / (left + right), right * room / (left + right)
    return max(math.ceil(left), 8), max(math.ceil(right), 8)


def _draw_ranges(canvas: _Canvas, chart: Chart, scale: Scale, plot: _Box) -> None:
    """The density image, then the wide bars and their labels, as ``timeline`` draws them."""
    wide, pixels = chart.wide(scale)
    image = chart.density(~wide, scale)
    if image is not None:
        lines = (np.arange(plot.height) * image.shape[0]) // plot.height
        inked = np.asarray(image[..., 3].any(axis=1))
        painted = np.flatnonzero(inked[lines])  # lines with nothing to blend stay as they are
        rgba = image[lines[painted]]
        alpha = rgba[..., 3:].astype(np.float32) / 255.0
        area = canvas.pixels[plot.top : plot.bottom, plot.left : plot.right]
        blended = area[painted].astype(np.float32) * (1 - alpha) + rgba[..., :3] * alpha
        area[painted] = np.rint(blended)
    bars = np.flatnonzero(wide)
    x0 = plot.x(scale, chart.x0[bars])
    x1 = np.maximum(plot.x(scale, chart.x1[bars]), x0 + 1)
    x0, x1 = np.clip(x0, plot.left, plot.right), np.clip(x1, plot.left, plot.right)
    rows = chart.y[bars]
    top = [plot.y(chart, row - 0.4) for row in rows.tolist()]
    low = [plot.y(chart, row + 0.4) for row in rows.tolist()]
    colors = np.rint(chart.colors[bars, :3] * 255).astype(np.uint8)
    edge = pixels[bars] >= 4  # white edges between bars wide enough to show them
    for i, (a, b) in enumerate(zip(x0.tolist(), x1.tolist())):
        canvas.pixels[top[i] : low[i], a:b] = colors[i]
        if edge[i]:
            canvas.pixels[top[i] : low[i], b - 1] = 255
    labelled = np.flatnonzero(pixels[bars] >= LABEL_MIN_PX)
    labelled = labelled[np.argsort(-pixels[bars][labelled], kind="stable")[:MAX_LABELS]]
    names = chart.names(bars[labelled])
    for k, i in enumerate(labelled.tolist()):
        middle = (top[i] + low[i]) / 2
        end = min(int(x1[i]) - 3, plot.right)
        canvas.text((int(x0[i]) + 3, middle), printable(str(names[k])), SMALL_PX, "lm", end)


def _draw_memory(
    canvas: _Canvas, chart: Chart, lines: list[MemoryLine], scale: Scale, box: _Box
) -> None:
    """The memory `lines` as steps in `box`, from 0 (or the lowest level) to the highest."""
    low = min(0.0, *(float(line.y.min()) for line in lines))
    high = max(low + 1e-9, *(float(line.y.max()) for line in lines))
    span = (high - low) * 1.05

    def level(value: np.ndarray) -> np.ndarray:
        return box.bottom - 1 - np.rint((value - low) / span * (box.height - 2)).astype(np.int64)

    for line in lines:
        xs = box.left + np.rint(
            (line.x - scale.x(scale.lo)) / (scale.x(scale.hi) - scale.x(scale.lo)) * box.width
        ).astype(np.int64)
        xs = np.clip(xs, box.left, box.right - 1)
        ys = level(line.y)
        color = _rgb(line.color)
        for i in range(len(xs) - 1):
            canvas.hline(int(ys[i]), int(xs[i]), int(xs[i + 1]) + 1, color)
            canvas.vline(int(xs[i + 1]), int(ys[i]), int(ys[i + 1]), color)
    canvas.frame(box)
    canvas.text((box.left - 5, box.top), f"{high:,.1f}", SMALL_PX, "rt")
    canvas.text((box.left - 5, box.bottom), f"{low:,.1f}", SMALL_PX, "rb")
    canvas.text((box.left - 5, (box.top + box.bottom) / 2), chart.memory_label(), SMALL_PX, "rm")


def _draw_time_axis(canvas: _Canvas, chart: Chart, scale: Scale, box: _Box) -> None:
    """Ticks at round times (1, 2, 2.5 or 5 times a power of ten, about one per 100 px) with
    labels that tell them apart, and the axis label."""
    lo, hi = scale.x(scale.lo), scale.x(scale.hi)
    ticks = [float(t) for t in tick_values(lo, hi, max(box.width // 100, 2)) if lo <= t <= hi]
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    decimals = _decimals(step)
    for tick in ticks:
        x = box.left + int((tick - lo) / (hi - lo) * box.width)
        x = min(x, box.right - 1)
        canvas.vline(x, box.bottom, box.bottom + 4, INK)
        canvas.text((x, box.bottom + 6), f"{tick:,.{decimals}f}", AXIS_PX, "mt")
    canvas.text(((box.left + box.right) / 2, box.bottom + 24), chart.x_label(scale), AXIS_PX, "mt")


def _decimals(step: float) -> int:
    """Decimals that tell ticks `step` apart (2.5 needs one, 0.25 two, 50 none)."""
    for decimals in range(10):
        if abs(round(step, decimals) - step) <= abs(step) * 1e-6:
            return decimals
    return 10


def _draw_legend(
    canvas: _Canvas,
    entries: list[tuple[Optional[tuple[int, int, int]], str, bool]],
    x: int,
    y: int,
) -> None:
    """One line per entry: its colour as a patch (a line for marks and memory), its label."""
    for color, label, line in entries:
        middle = y + LEGEND_ROW_PX // 2
        if color is not None and line:
            canvas.fill(x, middle, x + 20, middle + 1, color)
        elif color is not None:
            canvas.fill(x, middle - 3, x + 20, middle + 4, color)
        canvas.text((x + 26, middle), label, SMALL_PX, "lm")
        y += LEGEND_ROW_PX
