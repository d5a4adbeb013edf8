"""What a timeline shows, before anything draws it: the lanes and their rows, each range's bar
and colour, the density of bars too narrow to draw, the marks, the memory lines, the legend
and the alt text, in time and row coordinates.

Two painters draw a `Chart`: ``timeline`` on a matplotlib Axes (the accessor's
``df.recfn.timeline``) and ``picture`` straight into pixels (the notebook's PNG, where
matplotlib's artists and text layout took most of the display's time). Both draw the same
thing because neither decides what to draw.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pandas as pd
import pyarrow as pa

from recfn.analysis.columns import (
    INT64_MAX,
    MARK,
    MEMORY,
    RANGE,
    EventColumns,
    as_threads,
    check_number,
    event_columns,
    gpu_spans,
    require,
    thread_mask,
)
from recfn.analysis.plots.colors import DARK2, column_colors, rgba
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
MEMORY_COLORS: tuple[tuple[float, ...], ...] = tuple(
    tuple(float(c) for c in rgba(color)[:3]) for color in DARK2
)
"""The memory lines' colours, one per device in turn (matplotlib's "Dark2")."""
MAX_BARS = 20_000
"""Most rectangles one view draws; past that the narrowest are left out (or rasterised)."""
MAX_LABELS = 200
"""Most bars a view labels with their names (the widest)."""
LABEL_MIN_PX = 40.0
"""Narrowest bar that carries its name."""


@dataclass(frozen=True)
class Layout:
    """Vertical layout: each lane (a thread, then a GPU) gets a band of one row per depth,
    preceded by one row that holds the ticks of its marks and separates it from the band
    above. `depth` is each bar's row within its band."""

    band_rows: np.ndarray
    band_top: np.ndarray
    n_rows: int
    depth: np.ndarray

    @classmethod
    def of(cls, n_lanes: int, lane: np.ndarray, depth: np.ndarray) -> Layout:
        band_rows = np.ones(n_lanes, dtype=np.int64)
        np.maximum.at(band_rows, lane, depth + 1)
        band_top = np.cumsum(band_rows + 1) - band_rows
        return cls(band_rows, band_top, int(band_top[-1] + band_rows[-1]), depth)


@dataclass(frozen=True)
class Scale:
    """The time window ``[lo, hi]`` in ns over `width_px` pixels; the axis shows the time since
    `origin` (the trace start) in `unit`."""

    lo: int
    hi: int
    origin: int
    width_px: int
    unit: str
    unit_ns: int

    @classmethod
    def of(cls, lo: int, hi: int, origin: int, width_px: int) -> Scale:
        unit, unit_ns = next((u, ns) for u, ns in UNITS if hi - lo >= ns)
        return cls(lo, hi, origin, width_px, unit, unit_ns)

    @property
    def ns_per_px(self) -> float:
        return (self.hi - self.lo) / self.width_px

    def x(self, ns: Any) -> Any:
        return (ns - self.origin) / self.unit_ns

    def column(self, ns: np.ndarray) -> np.ndarray:
        return ((ns - self.lo) / self.ns_per_px).astype(np.int64).clip(0, self.width_px - 1)


@dataclass(frozen=True)
class GpuTimes:
    """The GPU span of each row (`gpu_spans`) and its device; `timed` marks the rows that
    have one."""

    timed: np.ndarray
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray

    @classmethod
    def of(cls, columns: EventColumns, candidates: np.ndarray) -> GpuTimes:
        timed, start, end = gpu_spans(columns, candidates)
        device = np.full(len(columns) if timed.any() else 0, "GPU", dtype=object)  # timed rows'
        if device.size and columns.has("device"):
            device = pd.Series(columns.objects("device")).fillna("GPU").to_numpy()
        return cls(timed, start, end, device)


@dataclass(frozen=True)
class MemoryLine:
    """One device's running allocated bytes as a step line: `x` in the scale's unit since
    the trace start, `y` in MiB (at most one point per pixel column: its peak)."""

    label: str
    x: np.ndarray
    y: np.ndarray
    color: tuple[float, ...]
    peak: str


@dataclass(frozen=True)
class Chart:
    """The timeline of a table's ranges, in ns and rows (see the module's docstring).

    Bars are the CPU ranges (the first `n_cpu`), then the GPU spans; `x0`/`x1` are clipped to
    ``[lo, hi]``, `y` is the row, `colors` RGBA. `legend` lists (colour, label) entries, a
    None colour for the "n more names" line; `lane_labels` the bands' labels in band order,
    `lane_hosts` the host of each thread lane ("" for one host).
    """

    columns: EventColumns
    origin: int
    lo: int
    hi: int
    begin: np.ndarray
    layout: Layout
    rows: np.ndarray
    n_cpu: int
    x0: np.ndarray
    x1: np.ndarray
    y: np.ndarray
    colors: np.ndarray
    legend: list[tuple[Optional[np.ndarray], str]]
    mark_rows: np.ndarray
    mark_lane: np.ndarray
    memory: np.ndarray
    has_memory: bool
    windowed: bool
    lane_labels: list[str]
    lane_hosts: list[str]
    devices: list[str]

    @classmethod
    def of(
        cls,
        data: pd.DataFrame | pa.Table,
        *,
        thread: int | str | Iterable[int | str] | None = None,
        start: TimeLike | None = None,
        end: TimeLike | None = None,
        max_depth: int | None = None,
        min_duration_ns: int | None = None,
        color_by: str = "name",
    ) -> Chart:
        """What ``df.recfn.timeline(...)`` draws with these options, of a frame or straight
        from an event table (the same chart as of its ``to_pandas()`` frame); raises as it
        does."""
        columns = event_columns(data)
        require(columns, ("name", "kind", "start_ns", "end_ns", "thread_id", color_by), "timeline")
        check_number(max_depth, "max_depth", "timeline")
        check_number(min_duration_ns, "min_duration_ns", "timeline", fraction=True)
        origin = trace_start(columns)
        cut_start, cut_end = window_of(columns)
        lo_given = to_ns(start, origin, "timeline: start")
        hi_given = to_ns(end, origin, "timeline: end")
        lo_given = cut_start if lo_given is None else lo_given
        hi_given = cut_end if hi_given is None else hi_given
        if lo_given is not None and hi_given is not None and hi_given <= lo_given:
            raise RecfnValueError(
                f"timeline: end must be after start (got start={start}, end={end})"
            )
        forest = nodes(columns, "timeline")
        selected = np.ones(len(columns), dtype=bool)
        if thread is not None:
            selected = thread_mask(columns, as_threads(thread, "timeline"))
        if not selected.any():
            raise NothingToDrawError("timeline: no events in the selected threads")
        begin, finish = forest.start, forest.end
        gpu = GpuTimes.of(columns, forest.closed & selected)
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
        bars = visible & columns.equals("kind", RANGE)
        depth = forest.depth
        on_gpu = gpu.timed & (gpu.start <= hi) & (gpu.end >= lo)
        if max_depth is not None:
            bars &= depth <= max_depth
            on_gpu &= depth <= max_depth
        if min_duration_ns is not None:
            bars &= forest.still_open | (forest.duration >= min_duration_ns)
            on_gpu &= gpu.end - gpu.start >= min_duration_ns
        marks = visible & columns.equals("kind", MARK)
        for own in PROFILER_MARKS:
            marks &= ~columns.equals("name", own)
        if not bars.any() and not marks.any() and not on_gpu.any():
            raise NothingToDrawError(
                "timeline: no ranges or marks in the selected threads and time window"
            )

        thread_ids, lane_labels, lane_hosts = lanes(columns)  # one lane per (host, pid, thread)
        threads = np.unique(thread_ids[bars | marks])
        gpu_rows = np.flatnonzero(on_gpu)
        devices, device_code = np.unique(gpu.device[gpu_rows].astype(str), return_inverse=True)
        cpu_rows = np.flatnonzero(bars)
        lane = np.concatenate(
            [np.searchsorted(threads, thread_ids[cpu_rows]), len(threads) + device_code]
        )
        gpu_depth = depth[gpu_rows] - _lane_minimum(device_code, depth[gpu_rows], len(devices))
        layout = Layout.of(
            len(threads) + len(devices),
            lane,
            np.concatenate([depth[cpu_rows], gpu_depth]),
        )
        memory = selected & columns.equals("kind", MEMORY) & (begin <= hi)
        has_memory = columns.has("memory_bytes") and bool(
            (memory & ~columns.nulls("memory_bytes")).any()
        )
        rows = np.concatenate([cpu_rows, gpu_rows])
        x0 = np.maximum(np.concatenate([begin[cpu_rows], gpu.start[gpu_rows]]), lo)
        x1 = np.minimum(np.concatenate([finish[cpu_rows], gpu.end[gpu_rows]]), hi)
        colors, legend = _colors(columns, rows, x1 - x0, cpu_rows.size, color_by, forest.duration)
        mark_rows = np.flatnonzero(marks)
        labels = [lane_labels[each] for each in threads.tolist()]
        labels += [GPU_LANE.format(device=printable(str(d))) for d in devices.tolist()]
        return cls(
            columns=columns,
            origin=origin,
            lo=lo,
            hi=hi,
            begin=begin,
            layout=layout,
            rows=rows,
            n_cpu=int(cpu_rows.size),
            x0=x0,
            x1=x1,
            y=layout.band_top[lane] + layout.depth,
            colors=colors,
            legend=legend,
            mark_rows=mark_rows,
            mark_lane=np.searchsorted(threads, thread_ids[mark_rows]),
            memory=memory,
            has_memory=has_memory,
            windowed=cut_start is not None,
            lane_labels=labels,
            lane_hosts=[lane_hosts.get(each, "") for each in threads.tolist()],
            devices=[str(d) for d in devices.tolist()],
        )

    @property
    def n_threads(self) -> int:
        """The thread lanes drawn (the GPU lanes come after them)."""
        return len(self.lane_hosts)

    def scale(self, width_px: int) -> Scale:
        """The time axis over `width_px` pixels (at least one)."""
        return Scale.of(self.lo, self.hi, self.origin, max(int(width_px), 1))

    def wide(self, scale: Scale) -> tuple[np.ndarray, np.ndarray]:
        """Which bars are drawn as rectangles (at least `MIN_BAR_PX` wide, the widest
        `MAX_BARS`), and every bar's width in pixels; the rest are painted as density."""
        pixels = (self.x1 - self.x0) / scale.ns_per_px
        wide = pixels >= MIN_BAR_PX
        if wide.sum() > MAX_BARS:
            wide &= pixels >= np.sort(pixels[wide])[-MAX_BARS]
        return wide, pixels

    def names(self, bars: np.ndarray) -> np.ndarray:
        """The names of the chosen bars (a mask or indices of `rows`)."""
        return self.columns.objects("name", self.rows[bars])

    def density(self, narrow: np.ndarray, scale: Scale) -> Optional[np.ndarray]:
        """The narrow bars as one RGBA image (uint8): per (row, pixel column), the colour of the longest bar there, as opaque as the share
        of the pixel's time the narrow bars cover (at least `MIN_DENSITY_ALPHA`), so a pixel
        holding one 60 ns call does not look as busy as a pixel the calls fill. None when no
        bar is narrow.

        The image has `SUBROWS` lines per nesting row while that stays within
        `MAX_IMAGE_ROWS` (no screen shows more), else one line per row, and past that several
        rows share a line: its size is bounded whatever the depth. The image spans rows
        ``-0.5`` to ``n_rows - 0.5`` and the whole time window.
        """
        bars = np.flatnonzero(narrow)
        if bars.size == 0:
            return None
        y, column = self.y[bars], scale.column(self.x0[bars])
        duration = (self.x1 - self.x0)[bars]
        n_rows = self.layout.n_rows
        subrows = SUBROWS if n_rows * SUBROWS <= MAX_IMAGE_ROWS else 1
        lines = min(n_rows * subrows, MAX_IMAGE_ROWS)
        line = y * lines // n_rows  # the first of the row's `subrows` lines
        cell = line * scale.width_px + column
        cells, inverse = np.unique(cell, return_inverse=True)
        inverse = inverse.reshape(-1)
        covered = np.bincount(inverse, weights=duration, minlength=cells.size)
        # Per cell, the longest bar (the first of them in table order); a sort of a million
        # bars by (cell, -duration) took most of this.
        longest = np.zeros(cells.size, dtype=duration.dtype)
        np.maximum.at(longest, inverse, duration)
        candidates = np.flatnonzero(duration == longest[inverse])
        first = np.full(cells.size, bars.size, dtype=np.int64)
        np.minimum.at(first, inverse[candidates], candidates)
        rgba = self.colors[bars[first]].copy()
        share = covered[inverse[first]] / max(scale.ns_per_px, 1e-9)
        rgba[:, 3] = np.clip(share, MIN_DENSITY_ALPHA, 1.0)
        rgba = np.rint(rgba * 255).astype(np.uint8)
        image = np.zeros((lines, scale.width_px, 4), dtype=np.uint8)
        for k in range(1, subrows - 1):  # the top and bottom lines stay clear: bars are 0.8 tall
            image[line[first] + k, column[first]] = rgba
        if subrows == 1:
            image[line[first], column[first]] = rgba
        return image

    def mark_ticks(self, scale: Scale) -> tuple[np.ndarray, np.ndarray]:
        """The marks drawn, at most one per pixel column of a lane: their times (ns) and the
        row coordinate of their tick's bottom (the tick is 0.8 rows tall, in the row above
        the lane's band)."""
        rows, lane = self.mark_rows, self.mark_lane
        column = scale.column(self.begin[rows])
        _, first = np.unique(lane * scale.width_px + column, return_index=True)
        return self.begin[rows[first]], self.layout.band_top[lane[first]] - 0.55

    def host_breaks(self) -> list[float]:
        """Row coordinates of the lines between the lanes of two hosts."""
        hosts, top = self.lane_hosts, self.layout.band_top
        return [float(top[i] - 1.5) for i in range(1, len(hosts)) if hosts[i] != hosts[i - 1]]

    def memory_lines(self, scale: Scale) -> list[MemoryLine]:
        """Running allocated bytes per device (see `MemoryLine`)."""
        if not self.has_memory:
            return []
        columns, begin = self.columns, self.begin
        rows = np.flatnonzero(self.memory & ~columns.nulls("memory_bytes"))
        rows = rows[np.argsort(begin[rows], kind="stable")]
        change = columns.ints("memory_bytes", 0)[rows]
        device = np.full(rows.size, None, dtype=object)
        if columns.has("device"):
            device = columns.objects("device", rows)
        result = []
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
            top = int(max(before, peak.max() if len(peak) else before))
            where = "memory" if pd.isna(name) else str(name)
            result.append(
                MemoryLine(
                    label="memory" if pd.isna(name) else f"memory ({name})",
                    x=x,
                    y=y,
                    color=MEMORY_COLORS[k % len(MEMORY_COLORS)],
                    peak=f"{where} peak {format_bytes(top)}",
                )
            )
        return result

    def memory_label(self) -> str:
        """The memory axis' label: levels are changes since the window's start in a window."""
        return "MiB since window start" if self.windowed else "MiB"

    def x_label(self, scale: Scale) -> str:
        return f"{scale.unit} since trace start ({_stamp(self.origin)})"

    def default_title(self) -> str:
        return f"{self.n_cpu:,} ranges on {self.n_threads} thread(s)"

    def describe(self, peaks: list[str]) -> str:
        """One line for an image's alt text: what the timeline shows."""
        n_cpu, n_threads = self.n_cpu, self.n_threads
        parts = [
            f"Timeline of {n_cpu:,} range{'s' if n_cpu != 1 else ''} on "
            f"{n_threads:,} thread{'s' if n_threads != 1 else ''} over "
            f"{format_ns(self.hi - self.lo)}"
        ]
        if n_cpu:
            widths = (self.x1 - self.x0)[:n_cpu]
            widest = int(np.argmax(widths))
            name = printable(str(self.columns.objects("name", self.rows[widest : widest + 1])[0]))
            parts.append(f"longest: {name} ({format_ns(float(widths[widest]))})")
        if self.devices:
            parts.append(f"GPU time on {', '.join(map(printable, self.devices))}")
        parts += peaks
        return "; ".join(parts)


def _colors(
    columns: EventColumns,
    rows: np.ndarray,
    width: np.ndarray,
    n_cpu: int,
    color_by: str,
    duration: np.ndarray,
) -> tuple[np.ndarray, list[tuple[Optional[np.ndarray], str]]]:
    """Each bar's colour, and the legend: the `TOP_COLORS` values with most CPU time (the
    first `n_cpu` bars), then how many more. `duration` is each row's (`Nodes.duration`)."""
    value_codes, values, palette = column_colors(columns, color_by, duration)  # code -1: last row
    cpu = value_codes[rows[:n_cpu]]
    weight = np.bincount(cpu + 1, weights=width[:n_cpu], minlength=len(values) + 1)
    present = np.flatnonzero(np.bincount(cpu + 1, minlength=len(values) + 1)) - 1
    ranked = present[np.argsort(-weight[present + 1], kind="stable")]
    legend: list[tuple[Optional[np.ndarray], str]] = [
        (palette[code], clip(printable(str(values[code]))) if code >= 0 else "(none)")
        for code in ranked[:TOP_COLORS].tolist()
    ]
    if ranked.size > TOP_COLORS:
        more = ranked.size - TOP_COLORS
        noun = "name" if color_by == "name" else "value"
        legend.append((None, f"{more:,} more {noun}{'s' if more > 1 else ''}"))
    return palette[value_codes[rows]], legend


def _lane_minimum(lane: np.ndarray, depth: np.ndarray, n_lanes: int) -> np.ndarray:
    """Per row, the smallest depth in its lane: GPU bands start at their shallowest range."""
    least = np.full(n_lanes, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(least, lane, depth)
    return least[lane] if lane.size else np.zeros(0, dtype=np.int64)


def clip(label: str, width: int = LEGEND_CHARS) -> str:
    """`label` cut to `width` characters with an ellipsis."""
    return label if len(label) <= width else label[: width - 1] + "…"


def _stamp(ns: int) -> str:
    """`ns` as a UTC time (``2026-11-22 16:32:09.123456 UTC``) when it looks like one, else as
    plain ns (hand-made traces may count from 0)."""
    if ns < 10**17:  # before 1973: not a Unix-epoch clock
        return f"{ns} ns"
    return str(pd.Timestamp(ns, unit="ns", tz="UTC").strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
