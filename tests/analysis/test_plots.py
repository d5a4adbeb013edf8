"""timeline() and flame(): artists on small inputs, bounded artists on a million rows."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import KNOWN_ROWS, T0, make_frame
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.text import Text

from recfn.analysis import MissingColumnsError, drawing, timeline


def bars(ax: Axes) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_timeline_draws_one_rectangle_per_range(known: pd.DataFrame) -> None:
    ax = known.recfn.timeline()
    assert isinstance(ax, Axes)
    (collection,) = bars(ax)
    assert len(collection.get_paths()) == 8  # the open "load" range is drawn to the window end
    assert not ax.images
    (ticks,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(ticks.get_segments()) == 1
    assert [t.get_text() for t in ax.get_yticklabels()] == ["MainThread (1)", "Thread-2 (2)"]
    assert 1 <= len(ax.texts) <= 8
    assert {t.get_text() for t in ax.texts} <= {"step", "fwd", "bwd", "mm", "load"}
    assert ax.get_xlim() == pytest.approx((0, 100 / 1e6))
    legend = ax.figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == [
        "step",
        "bwd",
        "mm",
        "fwd",
        "load",
        "mark",
    ]
    ax.figure.savefig(io.BytesIO(), format="png")


def test_timeline_options(known: pd.DataFrame) -> None:
    _, given = plt.subplots()
    ax = known.recfn.timeline(
        ax=given,
        thread="MainThread",
        start=T0 + 45,
        end=T0 + 95,
        max_depth=1,
        color_by="scope",
        title="zoom",
    )
    assert ax is given and ax.get_title() == "zoom"
    assert len(bars(ax)[0].get_paths()) == 2  # step and bwd; mm is deeper, fwd outside
    assert ax.get_legend() is not None
    # On thread 2 only step (50 ns) and the open load range (drawn to the window end) are long enough.
    assert (
        len(bars(known.recfn.timeline(thread=2, end=T0 + 90, min_duration_ns=20))[0].get_paths())
        == 2
    )


def test_timeline_memory_line() -> None:
    rows = [
        *KNOWN_ROWS,
        (10, 4, "[memory]", "memory", 55, 55, 1),
        (11, 3, "[memory]", "memory", 45, 45, 1),
    ]
    df = make_frame(
        rows,
        memory_bytes=pd.array([None] * len(KNOWN_ROWS) + [2**20, 2**20], dtype="Int64"),
        device=pd.Categorical([None] * len(KNOWN_ROWS) + ["cpu", "cpu"]),
    )
    ax = df.recfn.timeline()
    twin = [a for a in ax.figure.axes if a is not ax]
    assert len(twin) == 1 and len(twin[0].lines) == 1
    assert twin[0].lines[0].get_ydata().max() == pytest.approx(2.0)


def test_narrow_bars_are_rasterised() -> None:
    rows = [(1, None, "wide", "range", 0, 1_000_000, 1)] + [
        (i, 1, "tiny", "range", 1000 * i, 1000 * i + 10, 1) for i in range(2, 900)
    ]
    ax = make_frame(rows).recfn.timeline()
    assert len(bars(ax)[0].get_paths()) == 1
    (image,) = ax.images
    assert image.get_array().shape[1] == int(ax.get_window_extent().width)


def test_timeline_bad_input(known: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="no events"):
        known.iloc[:0].recfn.timeline()
    with pytest.raises(ValueError, match="no events"):
        known.recfn.timeline(thread=99)
    with pytest.raises(ValueError, match="no ranges or marks"):
        known.recfn.timeline(thread=1, start=T0 + 10**9)
    with pytest.raises(ValueError, match="end must be after start"):
        known.recfn.timeline(start=T0 + 50, end=T0 + 50)
    with pytest.raises(MissingColumnsError, match="'thread_id'"):
        known.drop(columns="thread_id").recfn.timeline()


def test_timeline_and_flame_bounded_on_a_million_rows(million: pd.DataFrame) -> None:
    ax = million.recfn.timeline()
    paths = sum(len(c.get_paths()) for c in ax.collections)
    ticks = ax.get_window_extent().width * 8  # at most one per pixel column and band
    assert paths <= drawing.MAX_BARS + ticks
    assert len(ax.images) <= 1 and len(ax.texts) <= drawing.MAX_LABELS
    assert len(ax.get_children()) < 50
    ax.figure.savefig(io.BytesIO(), format="png", dpi=100)
    flame = million.recfn.flame()
    assert len(flame.texts) <= 200 and sum(len(c.get_paths()) for c in flame.collections) <= 20_000
    flame.figure.savefig(io.BytesIO(), format="png", dpi=100)


def test_flame_small(known: pd.DataFrame) -> None:
    ax = known.recfn.flame()
    (collection,) = bars(ax)
    boxes = sorted(
        (
            round(p.vertices[:, 0].min() * 1e6),
            round(p.vertices[:, 0].max() * 1e6),
            round(p.vertices[:, 1].mean()),
        )
        for p in collection.get_paths()
    )
    # step (150 ns) at depth 0; under it bwd, fwd, mm side by side in name order.
    assert boxes == [(0, 25, 2), (0, 50, 1), (0, 150, 0), (50, 70, 1), (70, 80, 1)]
    assert {t.get_text() for t in ax.texts} <= {"step", "bwd", "fwd", "mm"}
    assert len(bars(known.recfn.flame(max_depth=0))[0].get_paths()) == 1
    with pytest.raises(ValueError, match="no closed ranges"):
        known[known["kind"] == "mark"].recfn.flame()


def test_flame_and_collapsed_stacks_with_overlapping_children(
    tmp_path: Path, overlapping: pd.DataFrame
) -> None:
    # Widths are self time plus the children's widths, as flamegraph.pl draws the stacks: the
    # overlapping fetches (130 ns of work in 80 ns) widen fetch_all instead of spilling out.
    (collection,) = bars(overlapping.recfn.flame())
    boxes = sorted(
        (
            round(p.vertices[:, 0].min() * 1e6),
            round(p.vertices[:, 0].max() * 1e6),
            round(p.vertices[:, 1].mean()),
        )
        for p in collection.get_paths()
    )
    assert boxes == [(0, 10, 2), (0, 130, 1), (0, 180, 0), (130, 165, 1)]
    overlapping.recfn.to_collapsed_stacks(tmp_path / "stacks.txt")
    assert (tmp_path / "stacks.txt").read_text().splitlines() == [
        "fetch_all 15",
        "fetch_all;fetch 120",
        "fetch_all;fetch;decode 10",
        "fetch_all;parse 35",
    ]


def test_collapsed_stacks(tmp_path: Path, known: pd.DataFrame) -> None:
    path = tmp_path / "stacks.txt"
    known.recfn.to_collapsed_stacks(path)
    assert path.read_text().splitlines() == [
        "step 70",
        "step;bwd 25",
        "step;bwd;mm 25",
        "step;fwd 20",
        "step;mm 10",
    ]
    odd = known.assign(name=known["name"].cat.rename_categories({"mm": "a;b\nc"}))
    odd.recfn.to_collapsed_stacks(path)
    assert "step;bwd;a:b c 25" in path.read_text().splitlines()


def test_collapsed_stacks_sum_to_covered_time(tmp_path: Path, million: pd.DataFrame) -> None:
    part = million.iloc[:50_000]
    part.recfn.to_collapsed_stacks(tmp_path / "s.txt")
    total = sum(
        int(line.rsplit(" ", 1)[1]) for line in (tmp_path / "s.txt").read_text().splitlines()
    )
    assert total == part.recfn.summary()["self_ns"].sum()


MARKUP = ["$\\alpha$", "$" + "\\sqrt{" * 40 + "x" + "}" * 40 + "$"]


def drawn_texts(ax: Axes) -> list[Text]:
    legends = [*ax.figure.legends, *([ax.get_legend()] if ax.get_legend() else [])]
    return [
        *ax.texts,
        ax.title,
        *ax.get_yticklabels(),
        *(t for legend in legends for t in legend.get_texts()),
    ]


def test_names_are_drawn_as_text_never_as_math() -> None:
    # Regression: "$\alpha$" was drawn as a Greek letter, and 40 nested \sqrt raised a
    # RecursionError in matplotlib's math parser when the figure was saved.
    rows = [
        (1, None, MARKUP[0], "range", 0, 1000, 1),
        (2, 1, MARKUP[1], "range", 100, 900, 1),
    ]
    df = make_frame(rows).assign(thread_name=pd.Categorical([MARKUP[0]] * 2))
    for ax in (df.recfn.timeline(title=MARKUP[1]), df.recfn.flame(title=MARKUP[0])):
        ax.figure.savefig(io.BytesIO(), format="png")
        texts = [t for t in drawn_texts(ax) if "$" in t.get_text()]
        assert {t.get_text() for t in texts} & set(MARKUP)  # the names themselves are drawn
        for text in texts:
            assert not text.get_parse_math() and not text.get_usetex(), text.get_text()
    legend = df.recfn.timeline().figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()][:2] == MARKUP
    _, given = plt.subplots()
    ax = df.recfn.timeline(ax=given)
    assert all(not t.get_parse_math() for t in ax.get_legend().get_texts())
    ax.figure.savefig(io.BytesIO(), format="png")


def chain(depth: int) -> pd.DataFrame:
    """One range per level, each inside the one before: 5 ns shorter on either side."""
    rows = [
        (i + 1, i or None, f"f{i % 7}", "range", 5 * i, 10 * depth - 5 * i, 1) for i in range(depth)
    ]
    return make_frame(rows)


@pytest.fixture(scope="module")
def deep() -> pd.DataFrame:
    return chain(5_000)


def test_deep_chain_timeline_has_a_bounded_raster(deep: pd.DataFrame) -> None:
    # Regression: the raster held ten float64 RGBA lines per nesting row for every pixel
    # column, 4.4 GB for a 5,000-deep chain whose inner ranges are narrower than 2 px.
    ax = deep.recfn.timeline()
    (image,) = ax.images
    lines, width, channels = image.get_array().shape
    assert lines <= timeline.MAX_IMAGE_ROWS and channels == 4
    assert image.get_array().dtype == np.uint8
    assert width == int(ax.get_window_extent().width)
    assert (image.get_array()[..., 3] > 0).any()
    ax.figure.savefig(io.BytesIO(), format="png", dpi=50)


def test_deep_chain_flame_has_few_depth_ticks(deep: pd.DataFrame) -> None:
    # Regression: one y tick per level made matplotlib lay out 5,000 tick labels (24 s).
    ax = deep.recfn.flame()
    assert ax.get_ylim() == (4_999.5, -0.5)
    assert len(ax.get_yticks()) <= 20
    assert 4_000 < len(bars(ax)[0].get_paths()) <= 5_000  # paths under a pixel are left out


def test_raster_rows_share_lines_past_the_limit() -> None:
    # More nesting rows than image lines: rows share lines, and every row is still painted.
    # A long root stretches the window so that the whole chain under it is narrower than 2 px.
    depth = timeline.MAX_IMAGE_ROWS + 500
    rows = [(1, None, "root", "range", 0, 10**9, 1)] + [
        (i + 2, i + 1, "f", "range", 10 + i, 20 * depth - i, 1) for i in range(depth)
    ]
    ax = make_frame(rows).recfn.timeline()
    (image,) = ax.images
    assert image.get_array().shape[0] == timeline.MAX_IMAGE_ROWS
    painted = (image.get_array()[..., 3] > 0).any(axis=1)
    assert painted[1:].all()
