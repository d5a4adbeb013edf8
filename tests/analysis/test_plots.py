"""timeline() and flame(): artists on small inputs, bounded artists on a million rows."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from known_frames import GPU_SPANS, KNOWN_ROWS, T0, make_frame, with_gpu
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.patches import Patch
from matplotlib.text import Text

import recfn
import recfn.analysis as analysis
from recfn.analysis import MissingColumnsError
from recfn.analysis.plots import chart, colors
from recfn.analysis.plots.drawing import alt_text
from recfn.analysis.plots.flame import WORD_JOINER


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
    assert ax.get_xlim() == pytest.approx((0, 100))  # ns: the unit fits the 100 ns span
    legend = ax.get_legend()
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
    ax.figure.canvas.draw()
    (memory,) = [a for a in ax.figure.axes if a is not ax]
    assert len(memory.lines) == 1 and not ax.lines
    assert memory.lines[0].get_ydata().max() == pytest.approx(2.0)
    # Regression: the steps sat at x = 0 (offsets added to the epoch ns in float were lost).
    steps = memory.lines[0].get_xdata()
    assert steps[1] == pytest.approx(45, abs=0.5) and steps[2] == pytest.approx(55, abs=0.5)
    # Regression: the step line was drawn on a twin axis, across the range bars. Now it has
    # an Axes of its own below the lanes, on the same time axis.
    below = memory.get_window_extent()
    lanes = ax.get_window_extent()
    assert below.y1 <= lanes.y0 and memory.get_shared_x_axes().joined(ax, memory)
    assert memory.get_xlabel().startswith("ns since trace start") and not ax.get_xlabel()
    assert "memory (cpu)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert alt_text(ax).endswith("cpu peak 2.00 MiB")
    assert memory.get_ylabel() == "MiB"
    late = df.recfn.window("50ns").recfn.timeline()  # the allocation at 45 ns is cut off
    (memory,) = [a for a in late.figure.axes if a is not late]
    assert memory.get_ylabel() == "MiB since window start"


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
    for options in ({"max_depth": "2"}, {"max_depth": 1.5}, {"min_duration_ns": "1ms"}):
        with pytest.raises(TypeError, match=f"{next(iter(options))} must be"):
            known.recfn.timeline(**options)  # type: ignore[arg-type]
    known.recfn.timeline(min_duration_ns=1e1, max_depth=np.int64(1))  # any real number, an int


def test_timeline_and_flame_bounded_on_a_million_rows(million: pd.DataFrame) -> None:
    ax = million.recfn.timeline()
    paths = sum(len(c.get_paths()) for c in ax.collections)
    ticks = ax.get_window_extent().width * 8  # at most one per pixel column and band
    assert paths <= chart.MAX_BARS + ticks
    assert len(ax.images) <= 1 and len(ax.texts) <= chart.MAX_LABELS
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
    with pytest.raises(TypeError, match="flame: max_depth must be an int or None, got '1'"):
        known.recfn.flame(max_depth="1")  # type: ignore[arg-type]
    with pytest.raises(analysis.NothingToDrawError, match="no ranges at max_depth=-1"):
        known.recfn.flame(max_depth=-1)  # as the timeline: nothing above the roots


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"ax": "x"}, TypeError, "ax must be a matplotlib Axes or None, got 'x'"),
        ({"figsize": 3.5}, TypeError, "figsize must be (width, height) in inches, got 3.5"),
        ({"figsize": (4, "3")}, TypeError, "figsize must be (width, height)"),
        ({"figsize": (4, 3, 2)}, TypeError, "figsize must be (width, height)"),
        ({"figsize": (0, 3)}, ValueError, "figsize must be positive, got (0, 3)"),
    ],
)
def test_timeline_and_flame_name_a_bad_axes_or_figure_size(
    known: pd.DataFrame, options: dict, error: type, words: str
) -> None:
    for draw, what in ((known.recfn.timeline, "timeline"), (known.recfn.flame, "flame")):
        with pytest.raises(error, match=re.escape(f"{what}: {words}")) as raised:
            draw(**options)
        assert isinstance(raised.value, recfn.RecfnError)
    known.recfn.flame(figsize=(np.float64(4), 3))  # numpy numbers are numbers


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
    odd.recfn.to_collapsed_stacks(path, overwrite=True)
    assert "step;bwd;a:b c 25" in path.read_text().splitlines()


def test_collapsed_stacks_never_replace_a_file_unasked(tmp_path: Path, known: pd.DataFrame) -> None:
    """The format has no room for a mark of recfn's: any file there, a trace of recfn's too,
    is refused before the tree is built, and replaced whole with ``overwrite``."""
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes\n")
    trace = tmp_path / "t.parquet"
    recfn.Trace.from_pandas(known).save(trace)
    for path, why in ((mine, "recfn did not write it"), (trace, "with collapsed stacks: it is")):
        before = path.read_bytes()
        with pytest.raises(FileExistsError, match=f"refusing to overwrite .*{why}"):
            known.recfn.to_collapsed_stacks(path)
        assert path.read_bytes() == before
    known.recfn.to_collapsed_stacks(mine, overwrite=True)
    assert mine.read_text().splitlines()[0] == "step 70"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "t.parquet"]  # no temporary
    with pytest.raises(TypeError, match="the stacks' path must be a str or path, got float"):
        known.recfn.to_collapsed_stacks(3.5)  # type: ignore[arg-type]


def flamegraph_pl_frames(line: str) -> tuple[list[str], int] | None:
    """How flamegraph.pl reads a line of collapsed stacks (its two regexes; it reads UTF-8, so
    whitespace is Unicode's): the frames and the count, None for a differential line (a
    second count), which it would misdraw."""
    found = re.match(r"^(.*)\s+?(\d+(?:\.\d*)?)$", line)
    assert found is not None, line
    if re.match(r"^(.*)\s+?(\d+(?:\.\d*)?)$", found[1]):
        return None
    return [f for f in found[1].split(";") if f], int(found[2])


def speedscope_frames(line: str) -> tuple[list[str], int]:
    """How speedscope reads a line (its importer's regex, then ";")."""
    found = re.match(r"^(.*) (\d+)$", line)
    assert found is not None, line
    return found[1].split(";"), int(found[2])


@pytest.mark.parametrize("name", ["task 0", "step 2.5", "v 1.", "epoch\t12", "x\u00a07"])
def test_names_ending_in_a_number_read_alike_in_flamegraph_and_speedscope(
    tmp_path: Path, known: pd.DataFrame, name: str
) -> None:
    odd = known.assign(name=known["name"].cat.rename_categories({"mm": name}))
    odd.recfn.to_collapsed_stacks(tmp_path / "stacks.txt")
    lines = (tmp_path / "stacks.txt").read_text(encoding="utf-8").splitlines()
    assert "step;bwd;" + name + WORD_JOINER + " 25" in lines
    for line in lines:
        assert flamegraph_pl_frames(line) == speedscope_frames(line)


def test_collapsed_stacks_in_the_real_flamegraph_pl(tmp_path: Path, known: pd.DataFrame) -> None:
    """Where flamegraph.pl is installed (it is not part of recfn): no differential frames."""
    script = shutil.which("flamegraph.pl")
    if script is None:
        pytest.skip("flamegraph.pl is not on PATH")
    odd = known.assign(name=known["name"].cat.rename_categories({"mm": "task 0"}))
    odd.recfn.to_collapsed_stacks(tmp_path / "stacks.txt")
    svg = subprocess.run(
        ["perl", script, str(tmp_path / "stacks.txt")], capture_output=True, check=True, text=True
    ).stdout
    titles = re.findall(r"<title>([^<]*)</title>", svg)
    assert any(title.startswith("task 0\u2060 (25 samples, ") for title in titles)
    assert not any("%;" in title for title in titles)  # a differential title has "+x%;"


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
    legend = df.recfn.timeline().get_legend()
    cut = MARKUP[1][: chart.LEGEND_CHARS - 1] + "…"  # a long name does not squeeze the plot
    assert [t.get_text() for t in legend.get_texts()][:2] == [MARKUP[0], cut]
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
    assert lines <= chart.MAX_IMAGE_ROWS and channels == 4
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
    depth = chart.MAX_IMAGE_ROWS + 500
    rows = [(1, None, "root", "range", 0, 10**9, 1)] + [
        (i + 2, i + 1, "f", "range", 10 + i, 20 * depth - i, 1) for i in range(depth)
    ]
    ax = make_frame(rows).recfn.timeline()
    (image,) = ax.images
    assert image.get_array().shape[0] == chart.MAX_IMAGE_ROWS
    painted = (image.get_array()[..., 3] > 0).any(axis=1)
    assert painted[1:].all()


def facecolors_by_label(ax: Axes) -> dict[str, tuple[float, ...]]:
    """Legend label -> RGBA of its patch."""
    legend = ax.get_legend()
    return {
        text.get_text(): tuple(handle.get_facecolor())
        for text, handle in zip(legend.get_texts(), legend.legend_handles)
        if isinstance(handle, Patch)
    }


@pytest.mark.parametrize("given", [False, True])
def test_legend_sits_outside_the_lanes(known: pd.DataFrame, given: bool) -> None:
    # Regression: the legend was drawn inside the axes, over the bars.
    ax = known.recfn.timeline(ax=plt.subplots()[1] if given else None)
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1


def test_time_axis_is_relative_and_human(known: pd.DataFrame) -> None:
    # Regression: the label read "ms since 1795356891634745512 ns".
    scaled = known.assign(
        start_ns=T0 + (known["start_ns"] - T0) * 100_000,
        end_ns=T0 + (known["end_ns"] - T0) * 100_000,
    )  # 100 ns -> 10 ms
    ax = scaled.recfn.timeline()
    assert ax.get_xlabel() == "ms since trace start (2023-11-14 22:13:20.000000 UTC)"
    assert ax.get_xlim() == pytest.approx((0, 10))
    assert str(T0) not in ax.get_xlabel()
    seconds = scaled.assign(end_ns=scaled["end_ns"] * 0 + T0 + 3 * 10**9)
    assert seconds.recfn.timeline().get_xlabel().startswith("s since trace start")


def test_same_name_same_colour_across_traces_and_views(known: pd.DataFrame) -> None:
    # Regression: colours were ranked by time per trace, so "mm" changed colour between cells.
    other = make_frame(
        [
            (1, None, "mm", "range", 0, 500, 1),
            (2, 1, "zz_other", "range", 10, 400, 1),
            (3, None, "step", "range", 600, 700, 1),
        ]
    )
    first = facecolors_by_label(known.recfn.timeline())
    second = facecolors_by_label(other.recfn.timeline())
    assert first["mm"] == second["mm"] and first["step"] == second["step"]
    assert first["mm"] == tuple(colors.name_colors(["mm"])[0])
    flame_colors = {tuple(c) for c in bars(other.recfn.flame())[0].get_facecolors()}
    assert tuple(colors.name_colors(["zz_other"])[0]) in flame_colors
    # The hash is stable across processes: fixed here, not salted like hash().
    assert colors.name_colors(["aten::mm"])[0].tolist() == pytest.approx(
        colors.PALETTE[43].tolist()
    )


def test_window_and_filter_are_drawn_at_their_extent(known: pd.DataFrame) -> None:
    # Regression: window() kept "step" (0..100 ns), so the plot was not narrowed.
    ax = known.recfn.window("32ns", "45ns").recfn.timeline()
    assert ax.get_xlim() == pytest.approx((32, 45))
    assert known.recfn.timeline(start="32ns", end=T0 + 45).get_xlim() == pytest.approx((32, 45))
    mm = known.recfn.filter(name="mm").recfn.timeline()
    assert mm.get_xlim() == pytest.approx((30, 75))  # its own extent, on the trace's clock


def test_figsize_and_alt_text(known: pd.DataFrame) -> None:
    ax = known.recfn.timeline(figsize=(5, 2))
    assert tuple(ax.figure.get_size_inches()) == (5, 2)
    assert tuple(known.recfn.flame(figsize=(4, 3)).figure.get_size_inches()) == (4, 3)
    with pytest.raises(ValueError, match="figsize"):
        known.recfn.timeline(ax=ax, figsize=(5, 2))
    text = analysis.alt_text(ax)
    assert text == "Timeline of 8 ranges on 2 threads over 100ns; longest: step (100ns)"
    assert analysis.alt_text(ax.figure) == text
    flame = known.recfn.flame()
    assert analysis.alt_text(flame).startswith("Flame graph of 5 call paths over 150ns")
    assert "widest root: step (150ns)" in analysis.alt_text(flame)
    _, blank = plt.subplots()
    with pytest.raises(ValueError, match="drew no timeline"):
        analysis.alt_text(blank)


def test_gpu_time_in_lanes_of_its_own(known_gpu: pd.DataFrame) -> None:
    ax = known_gpu.recfn.timeline()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["MainThread (1)", "Thread-2 (2)", "cuda:0 (GPU time)", "cuda:1 (GPU time)"]
    (collection,) = bars(ax)
    assert len(collection.get_paths()) == 8 + 7  # CPU bars, then one per GPU span
    spans = {
        (round(p.vertices[:, 0].min()), round(p.vertices[:, 0].max()))
        for p in collection.get_paths()
    }
    assert {(5, 95), (12, 28), (25, 65), (31, 39)} <= spans
    # Same colour per name on CPU and GPU: both "step" bars of cuda:1 and thread 2.
    faces = {
        (round(p.vertices[:, 0].min()), round(p.vertices[:, 0].max())): tuple(face)
        for p, face in zip(collection.get_paths(), collection.get_facecolors())
    }
    assert faces[(25, 65)] == faces[(20, 70)]
    # The GPU band of cuda:1 lies below the CPU bands.
    y = {
        (round(p.vertices[:, 0].min()), round(p.vertices[:, 0].max())): p.vertices[:, 1].mean()
        for p in collection.get_paths()
    }
    assert y[(25, 65)] > y[(20, 70)]
    assert analysis.alt_text(ax).endswith("GPU time on cuda:0, cuda:1")
    # GPU spans past the CPU ranges widen the default window.
    late = with_gpu(known_gpu, {**GPU_SPANS, 1: (5, 200, "cuda:0")})
    assert late.recfn.timeline().get_xlim() == pytest.approx((0, 205))
    # Without GPU time: no GPU band.
    assert "GPU" not in " ".join(
        t.get_text()
        for t in known_gpu.drop(columns=["device_start_ns", "device_duration_ns"])
        .recfn.timeline()
        .get_yticklabels()
    )


def test_legend_says_how_many_names_it_leaves_out() -> None:
    rows = [(i, None, f"n{i:02d}", "range", 100 * i, 100 * i + 50 + i, 1) for i in range(1, 14)]
    ax = make_frame(rows).recfn.timeline()
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[: chart.TOP_COLORS] == [f"n{i:02d}" for i in range(13, 3, -1)]
    assert texts[chart.TOP_COLORS] == "3 more names"


def test_memory_below_an_axes_outside_a_grid() -> None:
    rows = [*KNOWN_ROWS, (10, 4, "[memory]", "memory", 55, 55, 1)]
    df = make_frame(
        rows,
        memory_bytes=pd.array([None] * len(KNOWN_ROWS) + [2**20], dtype="Int64"),
        device=pd.Categorical([None] * len(KNOWN_ROWS) + ["cuda:0"]),
    )
    fig = plt.figure()
    given = fig.add_axes((0.1, 0.4, 0.7, 0.5))  # no grid cell to split: inset below
    ax = df.recfn.timeline(ax=given)
    fig.canvas.draw()
    (memory,) = ax.child_axes
    assert memory.get_window_extent().y1 <= ax.get_window_extent().y0
    assert memory.lines[0].get_label() == "memory (cuda:0)"


def test_timeline_bounds_take_the_window_formats(known: pd.DataFrame) -> None:
    assert known.recfn.timeline(start=pd.Timedelta(10, "ns")).get_xlim() == pytest.approx((10, 100))
    with pytest.raises(ValueError, match="timeline: end='later'"):
        known.recfn.timeline(end="later")
