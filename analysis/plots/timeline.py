"""A matplotlib Gantt chart of ranges: one band per thread, one row per nesting depth, then
one band per GPU for the ranges' GPU time, and memory on an axis of its own below.

What is drawn is decided in `recfn.analysis.plots.chart`; this module draws it on an Axes. It
stays fast and legible at millions of ranges by never drawing one artist per range: bars at
least `MIN_BAR_PX` wide go into one PolyCollection (at most `MAX_BARS` of them); narrower bars
are one image, one pixel column each (`Chart.density`). Marks are one LineCollection of
ticks, memory one step line per device.
"""

from __future__ import annotations

from collections.abc import Iterable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from recfn.analysis.plots.chart import Chart, Scale
from recfn.analysis.plots.drawing import (
    FONT_SIZE,
    add_labels,
    add_rectangles,
    check_figure,
    plain_text,
    set_alt_text,
)
from recfn.analysis.times import TimeLike


def timeline(
    df: pd.DataFrame,
    ax: Axes | None = None,
    *,
    thread: int | str | Iterable[int | str] | None = None,
    start: TimeLike | None = None,
    end: TimeLike | None = None,
    max_depth: int | None = None,
    min_duration_ns: int | None = None,
    color_by: str = "name",
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Axes:
    """Draw the ranges of `df`; see `RecfnAccessor.timeline`."""
    check_figure(ax, figsize, "timeline")
    chart = Chart.of(
        df,
        thread=thread,
        start=start,
        end=end,
        max_depth=max_depth,
        min_duration_ns=min_duration_ns,
        color_by=color_by,
    )
    layout = chart.layout
    if ax is None:
        height = float(np.clip(1.5 + 0.12 * layout.n_rows, 3, 20)) + 1.2 * chart.has_memory
        _, ax = plt.subplots(figsize=figsize or (12, height), layout="constrained")
    memory_ax = _memory_axes(ax, layout.n_rows) if chart.has_memory else None
    scale = chart.scale(max(int(ax.get_window_extent().width), 50))
    _draw_ranges(ax, chart, scale)
    handles: list[Artist] = [
        Patch(facecolor="none", edgecolor="none", label=label)
        if color is None
        else Patch(facecolor=tuple(color.tolist()), label=label)
        for color, label in chart.legend
    ]
    if chart.mark_rows.size:
        _draw_marks(ax, chart, scale)
        handles.append(Line2D([], [], color="black", lw=0.8, label="mark"))
    peaks: list[str] = []
    if memory_ax is not None:
        memory_ax.set_ylabel(chart.memory_label(), fontsize=FONT_SIZE + 1)
        memory_ax.tick_params(labelsize=FONT_SIZE)
        for line in chart.memory_lines(scale):
            (drawn,) = memory_ax.step(line.x, line.y, where="post", color=line.color, lw=1.0)
            drawn.set_label(line.label)
            handles.append(drawn)
            peaks.append(line.peak)

    for y in chart.host_breaks():
        ax.axhline(y, color="0.35", lw=0.9, gid=HOST_SEPARATOR)
    centres = layout.band_top + (layout.band_rows - 1) / 2
    ax.set_yticks(centres, chart.lane_labels, fontsize=FONT_SIZE + 1)
    plain_text(ax.get_yticklabels())
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(layout.n_rows - 0.5, -0.5)
    ax.set_xlim(scale.x(scale.lo), scale.x(scale.hi))
    bottom = ax if memory_ax is None else memory_ax
    if memory_ax is not None:
        ax.tick_params(axis="x", labelbottom=False)
    bottom.set_xlabel(chart.x_label(scale))
    plain_text([ax.set_title(title if title is not None else chart.default_title())])
    legend = ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        borderaxespad=0.0,
        fontsize=FONT_SIZE,
        frameon=False,
    )
    plain_text(legend.get_texts())
    set_alt_text(ax, chart.describe(peaks))
    return ax


HOST_SEPARATOR = "recfn-host-separator"
"""The ``gid`` of the line drawn between the lanes of two hosts."""


def _draw_ranges(ax: Axes, chart: Chart, scale: Scale) -> None:
    """Wide bars as rectangles with labels, narrow ones as one density image."""
    wide, pixels = chart.wide(scale)
    image = chart.density(~wide, scale)
    if image is not None:
        ax.imshow(
            image,
            aspect="auto",
            origin="upper",
            interpolation="nearest",
            extent=(scale.x(scale.lo), scale.x(scale.hi), chart.layout.n_rows - 0.5, -0.5),
        )
    x0, x1, y = chart.x0[wide], chart.x1[wide], chart.y[wide]
    add_rectangles(ax, scale.x(x0), scale.x(x1), y, 0.4, chart.colors[wide], pixels[wide])
    add_labels(ax, chart.names(wide), scale.x(x0), y, pixels[wide], scale.ns_per_px / scale.unit_ns)


def _draw_marks(ax: Axes, chart: Chart, scale: Scale) -> None:
    """One tick per mark in the row above its thread's band, at most one per pixel column."""
    at, bottom = chart.mark_ticks(scale)
    x = scale.x(at)
    segments = np.stack(
        [np.stack([x, bottom - 0.8], axis=1), np.stack([x, bottom], axis=1)], axis=1
    )
    ax.add_collection(LineCollection(list(segments), colors="black", linewidths=0.8, alpha=0.7))


def _memory_axes(ax: Axes, n_rows: int) -> Axes:
    """A new Axes under `ax`, sharing its time axis, for the memory lines: `ax`'s grid cell
    is split in two (or, for an Axes outside a grid, the new one is inset below it)."""
    spec = ax.get_subplotspec()
    if spec is None:
        return ax.inset_axes((0.0, -0.32, 1.0, 0.22), sharex=ax)
    ratio = float(np.clip(n_rows / 6, 2.5, 10))
    cells = spec.subgridspec(2, 1, height_ratios=[ratio, 1.0], hspace=0.08)
    ax.set_subplotspec(cells[0])
    return ax.figure.add_subplot(cells[1], sharex=ax)
