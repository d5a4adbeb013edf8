"""One colour per name across the timeline, the flame graph and the interactive view
(``colors.NameColors``), the legend's "mark" only for marks of the program, and narrow bars
drawn as density."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from known_frames import make_frame, sparse_and_busy_rows
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from recfn.analysis.plots import chart, colors
from recfn.analysis.plots.colors import (
    DISTINCT_TOP,
    PALETTE,
    NameColors,
    assign_colors,
    name_colors,
)


def rows(colors: np.ndarray) -> list[tuple[float, ...]]:
    return [tuple(row) for row in colors]


def test_the_heaviest_names_share_their_colour_with_no_other_name() -> None:
    names = [f"name{i}" for i in range(300)]
    weights = np.arange(300, 0, -1, dtype=float)
    colors = rows(assign_colors(names, weights))
    top = colors[:DISTINCT_TOP]
    assert len(set(top)) == DISTINCT_TOP
    assert not set(top) & set(colors[DISTINCT_TOP:])
    assert len(set(colors[: len(PALETTE)])) == len(PALETTE)  # a palette's worth all distinct


def test_a_name_keeps_its_own_colour_unless_a_heavier_name_took_it() -> None:
    by_colour: dict[tuple[float, ...], list[str]] = {}
    for i in range(500):
        by_colour.setdefault(rows(name_colors([f"n{i}"]))[0], []).append(f"n{i}")
    apart = [names[0] for names in by_colour.values()][:10]  # ten different own colours
    assert rows(assign_colors(apart, np.arange(10.0))) == rows(name_colors(apart))
    # Two names with the same own colour: the heavier keeps it, the other moves on.
    first, second = next(names for names in by_colour.values() if len(names) >= 2)[:2]
    heavy_first = rows(assign_colors([first, second], np.array([5.0, 1.0])))
    heavy_second = rows(assign_colors([first, second], np.array([1.0, 5.0])))
    assert heavy_first[0] == rows(name_colors([first]))[0] != heavy_first[1]
    assert heavy_second[1] == rows(name_colors([second]))[0] != heavy_second[0]


def test_colours_asked_one_by_one_are_those_of_the_whole_table() -> None:
    names = [f"n{i}" for i in range(400)] + [None]
    weights = np.r_[np.random.default_rng(3).random(400), 0.0]
    table = NameColors(names, weights)
    assert np.array_equal(table.rgba(range(len(names))), assign_colors(names, weights))
    assert table.hex(400) == colors.NULL_COLOR


def test_weights_must_match_the_names() -> None:
    with pytest.raises(ValueError, match="3 values but 2 weights"):
        assign_colors(["a", "b", "c"], np.ones(2))


def frame_with_colliding_names() -> pd.DataFrame:
    """Ranges of 40 names, each name's own colour shared by another: the plots must tell the
    heaviest apart."""
    names = [f"task{i}" for i in range(40)]
    rows_ = []
    start = 0
    for i, name in enumerate(names):
        length = 1_000 * (40 - i)
        rows_.append((i + 1, None, name, "range", start, start + length, 1))
        start += length + 10
    return make_frame(rows_)


def legend_colors(ax: Axes) -> dict[str, tuple[float, ...]]:
    legend = ax.get_legend()
    return {
        text.get_text(): tuple(handle.get_facecolor())
        for text, handle in zip(legend.get_texts(), legend.legend_handles)
        if isinstance(handle, Patch) and text.get_text() != ""
    }


def test_timeline_and_flame_colour_a_name_alike() -> None:
    frame = frame_with_colliding_names()
    _, values, palette = colors.column_colors(frame)
    expected = {str(v): tuple(palette[i]) for i, v in enumerate(values)}
    shown = legend_colors(frame.recfn.timeline())
    shown = {k: v for k, v in shown.items() if not k.endswith("more names")}
    assert shown and all(expected[name] == color for name, color in shown.items())
    assert len(set(shown.values())) == len(shown), "the legend's names share no colour"
    flame = frame.recfn.flame()
    [bars] = [c for c in flame.collections if isinstance(c, PolyCollection)]
    assert {tuple(c) for c in bars.get_facecolors()} <= set(expected.values())


@pytest.mark.parametrize("names", ["category", "str"])
def test_the_legend_lists_mark_only_for_marks_of_the_program(names: str) -> None:
    profiler_marks = make_frame(
        [
            (1, None, "__start_profile", "mark", 0, 0, 1),
            (2, None, "work", "range", 5, 100, 1),
            (3, None, "__stop_profile", "mark", 100, 100, 1),
        ]
    )
    profiler_marks["name"] = profiler_marks["name"].astype(names)  # a user's frame: any dtype
    labels = [t.get_text() for t in profiler_marks.recfn.timeline().get_legend().get_texts()]
    assert "mark" not in labels
    user_mark = make_frame(
        [(1, None, "work", "range", 5, 100, 1), (2, 1, "checkpoint", "mark", 50, 50, 1)]
    )
    legend = user_mark.recfn.timeline().get_legend()
    assert "mark" in [t.get_text() for t in legend.get_texts()]
    assert any(isinstance(h, Line2D) for h in legend.legend_handles)


def test_narrow_bars_are_as_opaque_as_the_time_they_cover() -> None:
    frame = make_frame(sparse_and_busy_rows())  # drawn on a few hundred pixels
    ax = frame.recfn.timeline()
    [image] = ax.get_images()
    pixels = np.asarray(image.get_array())
    alpha = pixels[..., 3].astype(float) / 255
    painted = alpha > 0
    rows_with_paint = np.flatnonzero(painted.any(axis=1))
    top_band = rows_with_paint[rows_with_paint < pixels.shape[0] / 2]
    bottom_band = rows_with_paint[rows_with_paint >= pixels.shape[0] / 2]
    sparse_alpha = alpha[top_band][painted[top_band]].max()
    busy_alpha = alpha[bottom_band][painted[bottom_band]].min()
    assert sparse_alpha <= chart.MIN_DENSITY_ALPHA + 1 / 255
    assert busy_alpha > 0.9


def test_the_palettes_are_matplotlibs_colormaps() -> None:
    """The colours are constants (drawing a picture imports no matplotlib), equal to the
    colormaps they were taken from."""
    import matplotlib as mpl
    from matplotlib.colors import to_rgba

    tab = [
        row
        for cmap in ("tab20", "tab20b", "tab20c")
        for row in mpl.colormaps[cmap](np.arange(20))
        if np.ptp(row[:3]) > 0.05
    ]
    assert np.array_equal(PALETTE, np.array(tab))
    dark2 = mpl.colormaps["Dark2"](np.arange(8))[:, :3]
    assert np.array_equal(np.array(chart.MEMORY_COLORS), dark2)
    assert tuple(colors.NULL_RGBA) == to_rgba(colors.NULL_COLOR)
