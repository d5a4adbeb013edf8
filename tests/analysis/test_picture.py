"""The notebook's timeline picture drawn straight into pixels (``plots.picture``): the chart
``df.recfn.timeline()`` draws, in the same colours, density and words."""

from __future__ import annotations

import io
import platform
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from known_frames import KNOWN_ROWS, make_frame, sparse_and_busy_rows
from PIL import Image

from recfn.analysis.plots import picture
from recfn.analysis.plots.chart import Chart
from recfn.analysis.plots.colors import column_colors
from recfn.analysis.plots.drawing import alt_text
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.errors import NothingToDrawError, RecfnValueError


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


@pytest.mark.parametrize("memory", [0, 40])
def test_the_picture_says_what_the_figure_says(memory: int) -> None:
    frame = make_synthetic_trace(600, 2, seed=1, n_marks=4, n_memory_events=memory)
    png, alt = picture.timeline_png(frame, 960, 300, title="t")
    image = Image.open(io.BytesIO(png))
    assert image.size == (960, 300)
    assert image.text["Description"] == alt == alt_text(frame.recfn.timeline())
    assert ("peak" in alt) == bool(memory)


def test_a_bar_has_its_names_colour() -> None:
    frame = make_frame(KNOWN_ROWS)
    png, _ = picture.timeline_png(frame, 800, 300)
    chart = Chart.of(frame)
    _, values, palette = column_colors(frame)
    drawn = pixels(png)
    left, right = picture._margins(chart, 800)
    box = picture._Box(left, picture.TOP_PX, 800 - right, 300 - picture.BOTTOM_PX)
    scale = chart.scale(box.width)
    for bar in range(len(chart.rows)):
        if chart.x1[bar] - chart.x0[bar] < 10:  # wide enough to sample away from its edges
            continue
        middle = (chart.x0[bar] + chart.x1[bar]) // 2
        x = int(box.x(scale, middle))
        y = box.y(chart, float(chart.y[bar]))
        name = frame["name"].iloc[chart.rows[bar]]
        expected = palette[list(values).index(name)][:3] * 255
        assert np.abs(drawn[y, x].astype(float) - expected).max() <= 1, name


def test_narrow_bars_are_as_faint_as_the_time_they_cover() -> None:
    frame = make_frame(sparse_and_busy_rows())  # drawn on a few hundred pixels
    drawn = pixels(picture.timeline_png(frame, 800, 300)[0]).astype(float)
    chart = Chart.of(frame)
    left, right = picture._margins(chart, 800)
    box = picture._Box(left, picture.TOP_PX, 800 - right, 300 - picture.BOTTOM_PX)
    ink = 255 - drawn[:, box.left + 5 : box.right - 5].min(axis=2)
    names = chart.names(np.arange(chart.rows.size))
    sparse_row = box.y(chart, float(chart.y[names == "sparse"][0]))
    busy_row = box.y(chart, float(chart.y[names == "busy"][0]))
    assert ink[sparse_row].max() < 0.2 * 255
    assert ink[busy_row].min() > 0.5 * 255


@pytest.mark.parametrize("processes", [1, 2])
def test_the_left_margin_fits_every_lane_label(processes: int) -> None:
    frame = make_synthetic_trace(400, 3, seed=4)
    if processes > 1:
        half = frame.index % 2 == 0
        frame["host"] = ["a-rather-long-host-name" if h else "b" for h in half]
        frame["pid"] = [123456 if h else 7 for h in half]
    chart = Chart.of(frame)
    left, _ = picture._margins(chart, 960)
    font = picture._font(picture.LANE_PX)
    assert left >= 5 + max(font.getlength(label) for label in chart.lane_labels)


def test_texts_are_cut_to_their_room() -> None:
    font = picture._font(picture.SMALL_PX)
    long = "pandas.core.groupby.generic::SeriesGroupBy._cython_transform"
    cut = picture.fit(long, font, 80)
    assert cut.endswith("…") and font.getlength(cut) <= 80 and long.startswith(cut[:-1])
    assert picture.fit("short", font, 80) == "short"
    assert picture.fit(long, font, 3) == ""


@pytest.mark.parametrize(
    ("step", "decimals"), [(50.0, 0), (1.0, 0), (2.5, 1), (0.25, 2), (0.1, 1), (0.002, 3)]
)
def test_tick_labels_tell_ticks_apart(step: float, decimals: int) -> None:
    assert picture._decimals(step) == decimals


def test_memory_lines_are_drawn_in_their_colour() -> None:
    frame = make_synthetic_trace(300, 1, seed=2, n_memory_events=60)
    png, _ = picture.timeline_png(frame, 960, 300)
    chart = Chart.of(frame)
    color = picture._rgb(chart.memory_lines(chart.scale(500))[0].color)
    assert (pixels(png) == color).all(axis=2).sum() > 50


def test_bad_input_is_refused_as_the_figure_refuses_it() -> None:
    frame = make_frame(KNOWN_ROWS)
    with pytest.raises(RecfnValueError, match="too small"):
        picture.timeline_png(frame, 100, 300)
    with pytest.raises(NothingToDrawError):
        picture.timeline_png(frame.iloc[0:0], 960, 300)
    with pytest.raises(NothingToDrawError):
        picture.timeline_png(frame[frame["kind"] == "range"], 960, 300, max_depth=-1)


def test_a_name_that_looks_like_math_is_drawn_as_written() -> None:
    frame = make_frame([(1, None, "$\\alpha$", "range", 0, 100, 1)])
    png, alt = picture.timeline_png(frame, 960, 200)
    assert "longest: $\\alpha$" in alt
    assert Image.open(io.BytesIO(png)).size == (960, 200)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_density_keeps_the_longest_bar_of_each_pixel_first_in_table_order(seed: int) -> None:
    # Narrow bars of a few equal durations and names, many to a pixel: the colour of each
    # pixel is that of its longest bar, the first of them in the table on a tie, as a sort by
    # (pixel, -duration) that keeps table order gives it.
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.integers(0, 10_000_000, 4_000))
    durations = rng.choice([10, 20, 30], starts.size)
    names = rng.choice(["a", "b", "c", "d", "e"], starts.size)
    rows = [(1, None, "root", "range", 0, 10_000_100, 1)] + [
        (i + 2, 1, str(names[i]), "range", int(s), int(s + d), 1)
        for i, (s, d) in enumerate(zip(starts, durations))
    ]
    chart = Chart.of(make_frame(rows))
    scale = chart.scale(300)
    wide, _ = chart.wide(scale)
    image = chart.density(~wide, scale)
    assert image is not None
    bars = np.flatnonzero(~wide)
    n_rows = chart.layout.n_rows
    lines = n_rows * 10
    line = chart.y[bars] * lines // n_rows
    cell = line * scale.width_px + scale.column(chart.x0[bars])
    _, inverse = np.unique(cell, return_inverse=True)
    duration = (chart.x1 - chart.x0)[bars]
    order = np.lexsort((-duration, inverse))
    first = order[np.r_[True, inverse[order][1:] != inverse[order][:-1]]]
    expected = np.rint(chart.colors[bars[first], :3] * 255).astype(np.uint8)
    middle = line[first] + 5
    assert (image[middle, scale.column(chart.x0[bars[first]]), :3] == expected).all()


@pytest.mark.parametrize(
    ("at", "anchor"),
    [
        ((10, 20), "lm"),
        ((120.5, 40.5), "mm"),
        ((300, 7.25), "rt"),
        ((-4, 60), "lm"),
        ((395, 95), "rb"),
    ],
)
def test_texts_are_drawn_as_pillow_draws_them(at: tuple[float, float], anchor: str) -> None:
    # The canvas renders each text once (cached) and blends it itself: the pixels must be
    # Pillow's own, at fractional positions and where the text is cut by the edge.
    from PIL import ImageDraw

    background = np.random.default_rng(3).integers(0, 256, (100, 400, 3), dtype=np.uint8)
    canvas = picture._Canvas(400, 100)
    canvas.pixels[:] = background
    for text, size in (
        ("pandas.core.frame::DataFrame.apply", picture.SMALL_PX),
        ("ünï · 名前 ms", 16),
    ):
        canvas.texts.append((at, text, size, anchor))
    drawn = pixels(canvas.png({}))
    expected = Image.fromarray(background, "RGB")
    draw = ImageDraw.Draw(expected)
    for xy, text, size, anchor_ in canvas.texts:
        draw.text(xy, text, font=picture._font(size), fill=picture.INK, anchor=anchor_)
    assert (drawn == np.asarray(expected)).all()


@pytest.mark.parametrize("isal", [True, False])
def test_the_png_holds_its_pixels_texts_and_resolution(
    monkeypatch: pytest.MonkeyPatch, isal: bool
) -> None:
    # Compressed by ISA-L where the isal package is installed, by zlib elsewhere.
    if not isal:
        monkeypatch.setitem(sys.modules, "isal", None)  # import isal raises ImportError
    elif platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        import isal.isal_zlib  # installed with recfn on these platforms
    else:
        pytest.skip("isal is not a dependency on this platform")
    rgb = np.random.default_rng(4).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    texts = {"Software": "recfn", "Description": "Timeline of f → g (名前), 3 ranges"}
    image = Image.open(io.BytesIO(picture.encode_png(rgb, texts)))
    image.load()  # checks every chunk's CRC and the data's checksum
    assert image.mode == "RGB" and (np.asarray(image) == rgb).all()
    assert image.text == texts
    assert [round(d) for d in image.info["dpi"]] == [picture.DPI, picture.DPI]
