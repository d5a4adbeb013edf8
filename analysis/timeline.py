"""A matplotlib Gantt chart of ranges: one band per thread, one row per nesting depth.

It stays fast and legible at millions of ranges by never drawing one artist per range: bars
at least `MIN_BAR_PX` wide go into one PolyCollection (at most `MAX_BARS` of them); narrower
bars are rasterised into one image, one pixel column each, keeping per pixel the colour of the
longest range there. Marks are one LineCollection of ticks, memory one step line per device.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .drawing import FONT_SIZE, MAX_BARS, add_labels, add_rectangles, plain_text
from .errors import NothingToDrawError
from .lanes import lanes
from .schema import INT64_MAX, MARK, MEMORY, RANGE, codes, equals, ints, nulls, require, thread_mask
from .tree import nodes
from .units import printable

MIN_BAR_PX = 2.0
"""Bars narrower than this many pixels are rasterised instead of drawn as rectangles."""
TOP_COLORS = 10
OTHER_COLOR = "#c7c7c7"
SUBROWS = 10
"""Raster lines per nesting row; the middle 80% are painted, as bars are 0.8 tall."""
MAX_IMAGE_ROWS = 2_000
"""Most lines in the raster image: about the pixel height of the tallest figure."""


def as_threads(thread: int | str | Iterable[int | str]) -> list[int | str]:
    """A ``thread=`` argument (one id or name, or a collection of them) as a list."""
    return [thread] if isinstance(thread, int | str) else list(thread)


def timeline(
    df: pd.DataFrame,
    ax: Axes | None = None,
    *,
    thread: int | str | Iterable[int | str] | None = None,
    start: int | None = None,
    end: int | None = None,
    max_depth: int | None = None,
    min_duration_ns: int | None = None,
    color_by: str = "name",
    title: str | None = None,
) -> Axes:
    """Draw the ranges of `df`; see `RecfnAccessor.timeline`."""
    require(df, ("name", "kind", "start_ns", "end_ns", "thread_id", color_by), "timeline")
    if start is not None and end is not None and end <= start:
        raise ValueError(f"timeline: end must be after start (got start={start}, end={end})")
    forest = nodes(df, "timeline")
    selected = np.ones(len(df), dtype=bool)
    if thread is not None:
        selected = thread_mask(df, as_threads(thread))
    if not selected.any():
        raise NothingToDrawError("timeline: no events in the selected threads")
    begin, finish = forest.start, forest.end
    lo = int(begin[selected].min()) if start is None else int(start)
    if end is None:
        closed = selected & (finish != INT64_MAX)
        end = int(max(finish[closed].max(initial=lo), begin[selected].max()))
    hi = max(int(end), lo + 1)

    visible = selected & (begin <= hi) & (np.minimum(finish, hi) >= lo)
    bars = visible & equals(df["kind"], RANGE)
    depth = forest.depth
    if max_depth is not None:
        bars &= depth <= max_depth
    if min_duration_ns is not None:
        bars &= forest.still_open | (forest.duration >= min_duration_ns)
    marks = visible & equals(df["kind"], MARK)
    if not bars.any() and not marks.any():
        raise NothingToDrawError(
            "timeline: no ranges or marks in the selected threads and time window"
        )

    thread_ids, lane_labels = lanes(df)
    layout = _Layout.of(thread_ids, depth, bars, marks)
    own_figure = ax is None
    if ax is None:
        height = float(np.clip(1.5 + 0.12 * layout.n_rows, 3, 20))
        _, ax = plt.subplots(figsize=(12, height), layout="constrained")
    scale = _Scale(lo, hi, max(int(ax.get_window_extent().width), 50))

    rows = np.flatnonzero(bars)
    handles = _draw_ranges(ax, df, rows, begin, finish, depth, thread_ids, layout, scale, color_by)
    if marks.any():
        _draw_marks(ax, np.flatnonzero(marks), begin, thread_ids, layout, scale)
        handles.append(Line2D([], [], color="black", lw=0.8, label="mark"))
    memory = selected & equals(df["kind"], MEMORY) & (begin <= hi)
    if "memory_bytes" in df.columns and memory.any():
        handles += _draw_memory(ax, df, memory, begin, scale)

    ticks = [lane_labels[lane] for lane in layout.threads.tolist()]
    ax.set_yticks(layout.band_top + (layout.band_rows - 1) / 2, ticks, fontsize=FONT_SIZE + 1)
    plain_text(ax.get_yticklabels())
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(layout.n_rows - 0.5, -0.5)
    ax.set_xlim(0, scale.ms(hi))
    ax.set_xlabel(f"ms since {lo} ns")
    default = f"{rows.size:,} ranges on {len(layout.threads)} thread(s)"
    plain_text([ax.set_title(title if title is not None else default)])
    if own_figure:
        legend = ax.figure.legend(
            handles=handles,
            loc="outside lower center",
            ncol=min(len(handles), 7),
            fontsize=FONT_SIZE,
            frameon=False,
        )
    else:
        legend = ax.legend(handles=handles, loc="upper right", fontsize=FONT_SIZE, framealpha=0.8)
    plain_text(legend.get_texts())
    return ax


@dataclass(frozen=True)
class _Layout:
    """Vertical layout: each shown thread gets a band of one row per depth, preceded by one
    row that holds the ticks of its marks and separates it from the band above."""

    threads: np.ndarray
    band_rows: np.ndarray
    band_top: np.ndarray
    n_rows: int

    @classmethod
    def of(
        cls, thread: np.ndarray, depth: np.ndarray, bars: np.ndarray, marks: np.ndarray
    ) -> _Layout:
        threads = np.unique(thread[bars | marks])
        band_rows = np.ones(len(threads), dtype=np.int64)
        np.maximum.at(band_rows, np.searchsorted(threads, thread[bars]), depth[bars] + 1)
        band_top = np.cumsum(band_rows + 1) - band_rows
        return cls(threads, band_rows, band_top, int(band_top[-1] + band_rows[-1]))

    def band(self, thread: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.threads, thread)


@dataclass(frozen=True)
class _Scale:
    """The time window ``[lo, hi]`` in ns over `width_px` pixels; the axis is in ms after lo."""

    lo: int
    hi: int
    width_px: int

    @property
    def ns_per_px(self) -> float:
        return (self.hi - self.lo) / self.width_px

    def ms(self, ns: Any) -> Any:
        return (ns - self.lo) / 1e6

    def column(self, ns: np.ndarray) -> np.ndarray:
        return ((ns - self.lo) / self.ns_per_px).astype(np.int64).clip(0, self.width_px - 1)


def _draw_ranges(
    ax: Axes,
    df: pd.DataFrame,
    rows: np.ndarray,
    begin: np.ndarray,
    finish: np.ndarray,
    depth: np.ndarray,
    thread: np.ndarray,
    layout: _Layout,
    scale: _Scale,
    color_by: str,
) -> list[Artist]:
    """Wide bars as rectangles with labels, narrow ones rasterised; returns legend handles."""
    x0, x1 = np.maximum(begin[rows], scale.lo), np.minimum(finish[rows], scale.hi)
    y = layout.band_top[layout.band(thread[rows])] + depth[rows]
    value_codes, values = codes(df[color_by])
    palette, ranked = _palette(value_codes[rows], x1 - x0, len(values))
    colors = palette[value_codes[rows] + 1]

    pixels = (x1 - x0) / scale.ns_per_px
    wide = pixels >= MIN_BAR_PX
    if wide.sum() > MAX_BARS:
        wide &= pixels >= np.sort(pixels[wide])[-MAX_BARS]
    narrow = ~wide
    _draw_raster(
        ax, y[narrow], scale.column(x0[narrow]), (x1 - x0)[narrow], colors[narrow], layout, scale
    )
    add_rectangles(
        ax, scale.ms(x0[wide]), scale.ms(x1[wide]), y[wide], 0.4, colors[wide], pixels[wide]
    )
    add_labels(
        ax,
        df["name"].to_numpy(dtype=object)[rows[wide]],
        scale.ms(x0[wide]),
        y[wide],
        pixels[wide],
        scale.ns_per_px / 1e6,
    )

    handles: list[Artist] = [
        Patch(facecolor=palette[code + 1], label=printable(str(values[code]))) for code in ranked
    ]
    if len(ranked) < len(np.unique(value_codes[rows])):
        handles.append(Patch(facecolor=OTHER_COLOR, label="other"))
    return handles


def _palette(
    value_codes: np.ndarray, duration: np.ndarray, n_values: int
) -> tuple[np.ndarray, np.ndarray]:
    """RGBA per value code + 1 (so that null, -1, maps to row 0): the top values by time get
    tab10 colours, the rest grey. Also returns the top codes, most time first."""
    weight = np.bincount(value_codes + 1, weights=duration, minlength=n_values + 1)[1:]
    ranked = np.argsort(-weight, kind="stable")[:TOP_COLORS]
    ranked = ranked[weight[ranked] > 0]
    palette = np.tile(np.array(to_rgba(OTHER_COLOR)), (n_values + 1, 1))
    palette[ranked + 1] = plt.get_cmap("tab10")(np.arange(len(ranked)))
    return palette, ranked


def _draw_raster(
    ax: Axes,
    y: np.ndarray,
    column: np.ndarray,
    duration: np.ndarray,
    colors: np.ndarray,
    layout: _Layout,
    scale: _Scale,
) -> None:
    """Paint narrow bars into one RGBA image: per (row, pixel column), the longest bar's colour.

    The image has `SUBROWS` lines per nesting row while that stays within `MAX_IMAGE_ROWS`
    (no screen shows more), else one line per row, and past that several rows share a line:
    its size is bounded whatever the depth.
    """
    if y.size == 0:
        return
    subrows = SUBROWS if layout.n_rows * SUBROWS <= MAX_IMAGE_ROWS else 1
    lines = min(layout.n_rows * subrows, MAX_IMAGE_ROWS)
    line = y * lines // layout.n_rows  # the first of the row's `subrows` lines
    cell = line * scale.width_px + column
    order = np.lexsort((-duration, cell))
    first = order[np.r_[True, cell[order][1:] != cell[order][:-1]]]
    rgba = np.rint(colors[first] * 255).astype(np.uint8)
    image = np.zeros((lines, scale.width_px, 4), dtype=np.uint8)
    for k in range(1, subrows - 1):  # the top and bottom lines stay clear, as bars are 0.8 tall
        image[line[first] + k, column[first]] = rgba
    if subrows == 1:
        image[line[first], column[first]] = rgba
    ax.imshow(
        image,
        aspect="auto",
        origin="upper",
        interpolation="nearest",
        extent=(0, scale.ms(scale.hi), layout.n_rows - 0.5, -0.5),
    )


def _draw_marks(
    ax: Axes,
    rows: np.ndarray,
    begin: np.ndarray,
    thread: np.ndarray,
    layout: _Layout,
    scale: _Scale,
) -> None:
    """One tick per mark in the row above its thread's band, at most one per pixel column."""
    band = layout.band(thread[rows])
    _, first = np.unique(band * scale.width_px + scale.column(begin[rows]), return_index=True)
    x = scale.ms(begin[rows[first]])
    bottom = layout.band_top[band[first]] - 0.55
    segments = np.stack(
        [np.stack([x, bottom - 0.8], axis=1), np.stack([x, bottom], axis=1)], axis=1
    )
    ax.add_collection(LineCollection(list(segments), colors="black", linewidths=0.8, alpha=0.7))


def _draw_memory(
    ax: Axes, df: pd.DataFrame, memory: np.ndarray, begin: np.ndarray, scale: _Scale
) -> list[Artist]:
    """Running allocated bytes per device as step lines on a twin axis, at most one point per
    pixel column (its peak)."""
    rows = np.flatnonzero(memory & ~nulls(df["memory_bytes"]))
    if rows.size == 0:
        return []
    rows = rows[np.argsort(begin[rows], kind="stable")]
    change = ints(df["memory_bytes"], 0)[rows]
    device = np.full(rows.size, None, dtype=object)
    if "device" in df.columns:
        device = df["device"].astype(object).to_numpy()[rows]
    twin = ax.twinx()
    twin.set_ylabel("MiB", fontsize=FONT_SIZE + 1)
    handles: list[Artist] = []
    for k, name in enumerate(pd.unique(device)):
        mine = pd.isna(device) if pd.isna(name) else device == name
        running = np.cumsum(change[mine]) / 2**20
        time = begin[rows[mine]]
        inside = time >= scale.lo
        before = running[~inside][-1] if (~inside).any() else 0.0
        peak = pd.Series(running[inside]).groupby(scale.column(time[inside])).max()
        x = np.concatenate(
            [[0.0], peak.index.to_numpy() * scale.ns_per_px / 1e6, [scale.ms(scale.hi)]]
        )
        y = np.concatenate(
            [[before], peak.to_numpy(), [running[inside][-1] if inside.any() else before]]
        )
        label = "memory" if pd.isna(name) else f"memory ({name})"
        (line,) = twin.step(
            x, y, where="post", color=plt.get_cmap("Dark2")(k % 8), lw=1.0, label=label
        )
        handles.append(line)
    return handles
