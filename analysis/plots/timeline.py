"""A matplotlib Gantt chart of ranges: one band per thread, one row per nesting depth, then
one band per GPU for the ranges' GPU time, and memory on an axis of its own below.

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
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from recfn.analysis.columns import (
    INT64_MAX,
    MARK,
    MEMORY,
    RANGE,
    as_threads,
    equals,
    gpu_spans,
    ints,
    nulls,
    require,
    thread_mask,
)
from recfn.analysis.plots.drawing import (
    FONT_SIZE,
    MAX_BARS,
    add_labels,
    add_rectangles,
    column_colors,
    plain_text,
    set_alt_text,
)
from recfn.analysis.plots.lanes import lanes
from recfn.analysis.stats.tree import nodes
from recfn.analysis.times import TimeLike, to_ns, trace_start, window_of
from recfn.analysis.units import format_bytes, format_ns, printable
from recfn.errors import NothingToDrawError, RecfnValueError

MIN_BAR_PX = 2.0
"""Bars narrower than this many pixels are rasterised instead of drawn as rectangles."""
TOP_COLORS = 10
"""Values (names) the legend lists, most time first; a last entry says how many more."""
SUBROWS = 10
"""Raster lines per nesting row; the middle 80% are painted, as bars are 0.8 tall."""
MAX_IMAGE_ROWS = 2_000
"""Most lines in the raster image: about the pixel height of the tallest figure."""
LEGEND_CHARS = 40
"""Longest legend label; longer names are cut with an ellipsis (the bars carry them whole)."""
MIN_DENSITY_ALPHA = 0.12
"""Opacity of a pixel holding narrow bars that cover almost none of its time: narrow bars are
painted as density, as opaque as the share of the pixel's time they cover, but never fainter
than this, so that a pixel with a range in it stays visible."""
PROFILER_MARKS = ("__start_profile", "__stop_profile")
"""Marks the profiler records about itself at its start and stop: not drawn, not in the legend."""
GPU_LANE = "{device} (GPU time)"
"""Label of the band that holds the GPU time of the ranges timed on `device`."""
UNITS: tuple[tuple[str, int], ...] = (("s", 10**9), ("ms", 10**6), ("µs", 10**3), ("ns", 1))
"""Units of the time axis: the largest that the drawn span holds at least once."""


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
    require(df, ("name", "kind", "start_ns", "end_ns", "thread_id", color_by), "timeline")
    if figsize is not None and ax is not None:
        raise RecfnValueError("timeline: figsize= sizes a new figure; it cannot be given with ax=")
    origin = trace_start(df)
    cut_start, cut_end = window_of(df)
    lo_given = to_ns(start, origin, "timeline: start")
    hi_given = to_ns(end, origin, "timeline: end")
    lo_given = cut_start if lo_given is None else lo_given
    hi_given = cut_end if hi_given is None else hi_given
    if lo_given is not None and hi_given is not None and hi_given <= lo_given:
        raise RecfnValueError(f"timeline: end must be after start (got start={start}, end={end})")
    forest = nodes(df, "timeline")
    selected = np.ones(len(df), dtype=bool)
    if thread is not None:
        selected = thread_mask(df, as_threads(thread))
    if not selected.any():
        raise NothingToDrawError("timeline: no events in the selected threads")
    begin, finish = forest.start, forest.end
    gpu = _GpuTimes.of(df, forest.closed & selected)
    lo = lo_given
    if lo is None:
        lo = int(min(begin[selected].min(), gpu.start[gpu.timed].min(initial=INT64_MAX)))
    hi = hi_given
    if hi is None:
        closed = selected & (finish != INT64_MAX)
        hi = int(
            max(
                finish[closed].max(initial=lo),
                begin[selected].max(),
                gpu.end[gpu.timed].max(initial=lo),
            )
        )
    hi = max(int(hi), lo + 1)

    visible = selected & (begin <= hi) & (np.minimum(finish, hi) >= lo)
    bars = visible & equals(df["kind"], RANGE)
    depth = forest.depth
    on_gpu = gpu.timed & (gpu.start <= hi) & (gpu.end >= lo)
    if max_depth is not None:
        bars &= depth <= max_depth
        on_gpu &= depth <= max_depth
    if min_duration_ns is not None:
        bars &= forest.still_open | (forest.duration >= min_duration_ns)
        on_gpu &= gpu.end - gpu.start >= min_duration_ns
    marks = visible & equals(df["kind"], MARK) & ~df["name"].isin(PROFILER_MARKS).to_numpy()
    if not bars.any() and not marks.any() and not on_gpu.any():
        raise NothingToDrawError(
            "timeline: no ranges or marks in the selected threads and time window"
        )

    thread_ids, lane_labels, lane_hosts = lanes(df)  # one lane per (host, pid, thread)
    threads = np.unique(thread_ids[bars | marks])
    gpu_rows = np.flatnonzero(on_gpu)
    devices, device_code = np.unique(gpu.device[gpu_rows].astype(str), return_inverse=True)
    cpu_rows = np.flatnonzero(bars)
    lane = np.concatenate(
        [np.searchsorted(threads, thread_ids[cpu_rows]), len(threads) + device_code]
    )
    gpu_depth = depth[gpu_rows] - _lane_minimum(device_code, depth[gpu_rows], len(devices))
    layout = _Layout.of(
        len(threads) + len(devices),
        lane,
        np.concatenate([depth[cpu_rows], gpu_depth]),
    )
    memory = selected & equals(df["kind"], MEMORY) & (begin <= hi)
    has_memory = "memory_bytes" in df.columns and bool((memory & ~nulls(df["memory_bytes"])).any())

    if ax is None:
        height = float(np.clip(1.5 + 0.12 * layout.n_rows, 3, 20)) + 1.2 * has_memory
        _, ax = plt.subplots(figsize=figsize or (12, height), layout="constrained")
    memory_ax = _memory_axes(ax, layout.n_rows) if has_memory else None
    scale = _Scale.of(lo, hi, origin, max(int(ax.get_window_extent().width), 50))

    rows = np.concatenate([cpu_rows, gpu_rows])
    x0 = np.maximum(np.concatenate([begin[cpu_rows], gpu.start[gpu_rows]]), scale.lo)
    x1 = np.minimum(np.concatenate([finish[cpu_rows], gpu.end[gpu_rows]]), scale.hi)
    y = layout.band_top[lane] + layout.depth
    handles = _draw_ranges(ax, df, rows, x0, x1, y, layout, scale, color_by, cpu_rows.size)
    if marks.any():
        mark_rows = np.flatnonzero(marks)
        mark_lane = np.searchsorted(threads, thread_ids[mark_rows])
        _draw_marks(ax, mark_rows, begin, mark_lane, layout, scale)
        handles.append(Line2D([], [], color="black", lw=0.8, label="mark"))
    peaks: list[str] = []
    if memory_ax is not None:
        handles += _draw_memory(memory_ax, df, memory, begin, scale, peaks)
        if cut_start is not None:  # window() dropped the events before: levels are changes
            memory_ax.set_ylabel("MiB since window start", fontsize=FONT_SIZE + 1)

    _separate_hosts(ax, [lane_hosts.get(lane, "") for lane in threads.tolist()], layout)
    ticks = [lane_labels[lane] for lane in threads.tolist()]
    ticks += [GPU_LANE.format(device=printable(str(d))) for d in devices.tolist()]
    ax.set_yticks(layout.band_top + (layout.band_rows - 1) / 2, ticks, fontsize=FONT_SIZE + 1)
    plain_text(ax.get_yticklabels())
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(layout.n_rows - 0.5, -0.5)
    ax.set_xlim(scale.x(scale.lo), scale.x(scale.hi))
    bottom = ax if memory_ax is None else memory_ax
    if memory_ax is not None:
        ax.tick_params(axis="x", labelbottom=False)
    bottom.set_xlabel(f"{scale.unit} since trace start ({_stamp(origin)})")
    default = f"{cpu_rows.size:,} ranges on {len(threads)} thread(s)"
    plain_text([ax.set_title(title if title is not None else default)])
    legend = ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        borderaxespad=0.0,
        fontsize=FONT_SIZE,
        frameon=False,
    )
    plain_text(legend.get_texts())
    set_alt_text(
        ax,
        _describe(df, cpu_rows, x0, x1, len(threads), devices.tolist(), peaks, scale),
    )
    return ax


@dataclass(frozen=True)
class _GpuTimes:
    """The GPU span of each row (`gpu_spans`) and its device; `timed` marks the rows that
    have one."""

    timed: np.ndarray
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray

    @classmethod
    def of(cls, df: pd.DataFrame, candidates: np.ndarray) -> _GpuTimes:
        n = len(df)
        timed, start, end = gpu_spans(df, candidates)
        device = np.full(n, "GPU", dtype=object)
        if "device" in df.columns:
            device = df["device"].astype(object).fillna("GPU").to_numpy()
        return cls(timed, start, end, device)


HOST_SEPARATOR = "recfn-host-separator"
"""The ``gid`` of the line drawn between the lanes of two hosts."""


def _separate_hosts(ax: Axes, hosts: list[str], layout: _Layout) -> None:
    """A line across the plot where the lanes of one host end and the next host's begin."""
    for index in range(1, len(hosts)):
        if hosts[index] != hosts[index - 1]:
            y = layout.band_top[index] - 1.5  # above the row of its marks
            ax.axhline(y, color="0.35", lw=0.9, gid=HOST_SEPARATOR)


def _lane_minimum(lane: np.ndarray, depth: np.ndarray, n_lanes: int) -> np.ndarray:
    """Per row, the smallest depth in its lane: GPU bands start at their shallowest range."""
    least = np.full(n_lanes, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(least, lane, depth)
    return least[lane] if lane.size else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class _Layout:
    """Vertical layout: each lane (a thread, then a GPU) gets a band of one row per depth,
    preceded by one row that holds the ticks of its marks and separates it from the band
    above. `depth` is each bar's row within its band."""

    band_rows: np.ndarray
    band_top: np.ndarray
    n_rows: int
    depth: np.ndarray

    @classmethod
    def of(cls, n_lanes: int, lane: np.ndarray, depth: np.ndarray) -> _Layout:
        band_rows = np.ones(n_lanes, dtype=np.int64)
        np.maximum.at(band_rows, lane, depth + 1)
        band_top = np.cumsum(band_rows + 1) - band_rows
        return cls(band_rows, band_top, int(band_top[-1] + band_rows[-1]), depth)


@dataclass(frozen=True)
class _Scale:
    """The time window ``[lo, hi]`` in ns over `width_px` pixels; the axis shows the time since
    `origin` (the trace start) in `unit`."""

    lo: int
    hi: int
    origin: int
    width_px: int
    unit: str
    unit_ns: int

    @classmethod
    def of(cls, lo: int, hi: int, origin: int, width_px: int) -> _Scale:
        unit, unit_ns = next((u, ns) for u, ns in UNITS if hi - lo >= ns)
        return cls(lo, hi, origin, width_px, unit, unit_ns)

    @property
    def ns_per_px(self) -> float:
        return (self.hi - self.lo) / self.width_px

    def x(self, ns: Any) -> Any:
        return (ns - self.origin) / self.unit_ns

    def column(self, ns: np.ndarray) -> np.ndarray:
        return ((ns - self.lo) / self.ns_per_px).astype(np.int64).clip(0, self.width_px - 1)


def _draw_ranges(
    ax: Axes,
    df: pd.DataFrame,
    rows: np.ndarray,
    x0: np.ndarray,
    x1: np.ndarray,
    y: np.ndarray,
    layout: _Layout,
    scale: _Scale,
    color_by: str,
    n_cpu: int,
) -> list[Artist]:
    """Wide bars as rectangles with labels, narrow ones rasterised; returns legend handles:
    the `TOP_COLORS` values with most CPU time (the first `n_cpu` bars), then how many more."""
    value_codes, values, palette = column_colors(df, color_by)  # code -1 takes the last row
    colors = palette[value_codes[rows]]

    pixels = (x1 - x0) / scale.ns_per_px
    wide = pixels >= MIN_BAR_PX
    if wide.sum() > MAX_BARS:
        wide &= pixels >= np.sort(pixels[wide])[-MAX_BARS]
    narrow = ~wide
    _draw_raster(
        ax, y[narrow], scale.column(x0[narrow]), (x1 - x0)[narrow], colors[narrow], layout, scale
    )
    add_rectangles(
        ax, scale.x(x0[wide]), scale.x(x1[wide]), y[wide], 0.4, colors[wide], pixels[wide]
    )
    add_labels(
        ax,
        df["name"].to_numpy(dtype=object)[rows[wide]],
        scale.x(x0[wide]),
        y[wide],
        pixels[wide],
        scale.ns_per_px / scale.unit_ns,
    )

    cpu = value_codes[rows[:n_cpu]]
    weight = np.bincount(cpu + 1, weights=(x1 - x0)[:n_cpu], minlength=len(values) + 1)
    present = np.flatnonzero(np.bincount(cpu + 1, minlength=len(values) + 1)) - 1
    ranked = present[np.argsort(-weight[present + 1], kind="stable")]
    handles: list[Artist] = [
        Patch(
            facecolor=palette[code],
            label=_clip(printable(str(values[code]))) if code >= 0 else "(none)",
        )
        for code in ranked[:TOP_COLORS].tolist()
    ]
    if ranked.size > TOP_COLORS:
        more = ranked.size - TOP_COLORS
        noun = "name" if color_by == "name" else "value"
        label = f"{more:,} more {noun}{'s' if more > 1 else ''}"
        handles.append(Patch(facecolor="none", edgecolor="none", label=label))
    return handles


def _draw_raster(
    ax: Axes,
    y: np.ndarray,
    column: np.ndarray,
    duration: np.ndarray,
    colors: np.ndarray,
    layout: _Layout,
    scale: _Scale,
) -> None:
    """Paint narrow bars into one RGBA image as density: per (row, pixel column), the colour
    of the longest bar there, as opaque as the share of the pixel's time the narrow
    bars cover (at least `MIN_DENSITY_ALPHA`), so a pixel holding one 60 ns call does not look
    as busy as a pixel the calls fill.

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
    cells, inverse = np.unique(cell, return_inverse=True)
    inverse = inverse.reshape(-1)
    covered = np.bincount(inverse, weights=duration, minlength=cells.size)
    order = np.lexsort((-duration, inverse))
    first = order[np.r_[True, inverse[order][1:] != inverse[order][:-1]]]
    rgba = colors[first].copy()
    share = covered[inverse[first]] / max(scale.ns_per_px, 1e-9)
    rgba[:, 3] = np.clip(share, MIN_DENSITY_ALPHA, 1.0)
    rgba = np.rint(rgba * 255).astype(np.uint8)
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
        extent=(scale.x(scale.lo), scale.x(scale.hi), layout.n_rows - 0.5, -0.5),
    )


def _draw_marks(
    ax: Axes,
    rows: np.ndarray,
    begin: np.ndarray,
    band: np.ndarray,
    layout: _Layout,
    scale: _Scale,
) -> None:
    """One tick per mark in the row above its thread's band, at most one per pixel column."""
    _, first = np.unique(band * scale.width_px + scale.column(begin[rows]), return_index=True)
    x = scale.x(begin[rows[first]])
    bottom = layout.band_top[band[first]] - 0.55
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


def _draw_memory(
    ax: Axes,
    df: pd.DataFrame,
    memory: np.ndarray,
    begin: np.ndarray,
    scale: _Scale,
    peaks: list[str],
) -> list[Artist]:
    """Running allocated bytes per device as step lines on `ax`, at most one point per pixel
    column (its peak); appends ``"<device> peak <bytes>"`` to `peaks`."""
    rows = np.flatnonzero(memory & ~nulls(df["memory_bytes"]))
    rows = rows[np.argsort(begin[rows], kind="stable")]
    change = ints(df["memory_bytes"], 0)[rows]
    device = np.full(rows.size, None, dtype=object)
    if "device" in df.columns:
        device = df["device"].astype(object).to_numpy()[rows]
    ax.set_ylabel("MiB", fontsize=FONT_SIZE + 1)
    ax.tick_params(labelsize=FONT_SIZE)
    handles: list[Artist] = []
    for k, name in enumerate(pd.unique(device)):
        mine = pd.isna(device) if pd.isna(name) else device == name
        running = np.cumsum(change[mine])
        time = begin[rows[mine]]
        inside = time >= scale.lo
        before = running[~inside][-1] if (~inside).any() else 0
        peak = pd.Series(running[inside]).groupby(scale.column(time[inside])).max()
        # Offsets from lo in float: lo itself (about 1.7e18 ns) has no room for them.
        offset = peak.index.to_numpy() * scale.ns_per_px / scale.unit_ns
        x = np.concatenate([[0.0], offset, [scale.x(scale.hi) - scale.x(scale.lo)]])
        x += scale.x(scale.lo)
        last = running[inside][-1] if inside.any() else before
        y = np.concatenate([[before], peak.to_numpy(), [last]]) / 2**20
        label = "memory" if pd.isna(name) else f"memory ({name})"
        (line,) = ax.step(x, y, where="post", color=plt.get_cmap("Dark2")(k % 8), lw=1.0)
        line.set_label(label)
        handles.append(line)
        top = int(max(before, peak.max() if len(peak) else before))
        peaks.append(f"{'memory' if pd.isna(name) else name} peak {format_bytes(top)}")
    return handles


def _clip(label: str, width: int = LEGEND_CHARS) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _stamp(ns: int) -> str:
    """`ns` as a UTC time (``2026-11-22 16:32:09.123456 UTC``) when it looks like one, else as
    plain ns (hand-made traces may count from 0)."""
    if ns < 10**17:  # before 1973: not a Unix-epoch clock
        return f"{ns} ns"
    return str(pd.Timestamp(ns, unit="ns", tz="UTC").strftime("%Y-%m-%d %H:%M:%S.%f UTC"))


def _describe(
    df: pd.DataFrame,
    cpu_rows: np.ndarray,
    x0: np.ndarray,
    x1: np.ndarray,
    n_threads: int,
    devices: list[str],
    peaks: list[str],
    scale: _Scale,
) -> str:
    """One line for an image's alt text: what the timeline shows."""
    parts = [
        f"Timeline of {cpu_rows.size:,} range{'s' if cpu_rows.size != 1 else ''} on "
        f"{n_threads:,} thread{'s' if n_threads != 1 else ''} over "
        f"{format_ns(scale.hi - scale.lo)}"
    ]
    if cpu_rows.size:
        widest = int(np.argmax((x1 - x0)[: cpu_rows.size]))
        name = printable(str(df["name"].iloc[cpu_rows[widest]]))
        parts.append(f"longest: {name} ({format_ns(float((x1 - x0)[widest]))})")
    if devices:
        parts.append(f"GPU time on {', '.join(map(printable, devices))}")
    parts += peaks
    return "; ".join(parts)
