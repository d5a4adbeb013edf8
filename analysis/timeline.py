"""A matplotlib Gantt chart of ranges: one band per thread, one row per nesting depth.

It stays fast and legible at millions of ranges by never drawing one artist per range: bars
at least `MIN_BAR_PX` wide go into one PolyCollection (at most `MAX_BARS` of them); narrower
bars are rasterised into one image, one pixel column each, keeping per pixel the colour of the
longest range there. Marks are one LineCollection of ticks, memory one step line per device.
"""

from __future__ import annotations

from collections.abc import Iterable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .schema import INT64_MAX, MARK, MEMORY, RANGE, codes, equals, ints, nulls, require, thread_mask
from .tree import depths, parent_positions

MIN_BAR_PX = 2.0
"""Bars narrower than this many pixels are rasterised instead of drawn as rectangles."""
MAX_BARS = 20_000
MAX_LABELS = 200
LABEL_MIN_PX = 40.0
CHAR_PX = 5.5
"""Approximate width of one label character at `FONT_SIZE` and 100 dpi."""
FONT_SIZE = 7
TOP_COLORS = 10
OTHER_COLOR = "#c7c7c7"
SUBROWS = 10
"""Raster rows per nesting row; the middle 80% are painted, as bars are 0.8 tall."""


def timeline(
    df: pd.DataFrame,
    ax: Axes | None = None,
    threads: Iterable[int | str] | None = None,
    start: int | None = None,
    end: int | None = None,
    max_depth: int | None = None,
    color_by: str = "name",
    min_duration_ns: int | None = None,
    title: str | None = None,
) -> Axes:
    """Draw the ranges of `df`; see `RecfnAccessor.timeline`."""
    require(df, ("name", "kind", "start_ns", "end_ns", "thread_id", color_by), "timeline")
    selected = np.ones(len(df), dtype=bool) if threads is None else thread_mask(df, threads)
    begin = ints(df["start_ns"], 0)
    finish = ints(df["end_ns"], INT64_MAX)
    if not selected.any():
        raise ValueError("timeline: no events in the selected threads")
    lo = int(begin[selected].min()) if start is None else int(start)
    known = selected & (finish != INT64_MAX)
    hi = int(end) if end is not None else int(max(finish[known].max(initial=lo), begin[selected].max()))
    if start is not None and end is not None and end <= start:
        raise ValueError(f"timeline: end must be after start (got start={start}, end={end})")
    hi = max(hi, lo + 1)

    kind_range, kind_mark = equals(df["kind"], RANGE), equals(df["kind"], MARK)
    visible = selected & (begin <= hi) & (np.minimum(finish, hi) >= lo)
    bars = visible & kind_range
    depth = _depths(df)
    if max_depth is not None:
        bars &= depth <= max_depth
    if min_duration_ns is not None:
        bars &= (finish - begin) >= min_duration_ns
    marks = visible & kind_mark
    if not bars.any() and not marks.any():
        raise ValueError("timeline: no ranges or marks in the selected threads and time window")

    thread = ints(df["thread_id"], 0)
    shown = np.unique(thread[bars | marks])
    band_rows = np.ones(len(shown), dtype=np.int64)
    np.maximum.at(band_rows, np.searchsorted(shown, thread[bars]), depth[bars] + 1)
    # Each band is preceded by one row that holds the ticks of its marks and separates it.
    band_top = np.cumsum(band_rows + 1) - band_rows
    n_rows = int(band_top[-1] + band_rows[-1])

    own_figure = ax is None
    if ax is None:
        height = float(np.clip(1.5 + 0.12 * n_rows, 3, 20))
        _, ax = plt.subplots(figsize=(12, height), layout="constrained")
    width_px = max(int(ax.get_window_extent().width), 50)
    span_ms = (hi - lo) / 1e6
    ns_per_px = (hi - lo) / width_px

    rows = np.flatnonzero(bars)
    x0 = np.maximum(begin[rows], lo)
    x1 = np.minimum(finish[rows], hi)
    y = band_top[np.searchsorted(shown, thread[rows])] + depth[rows]
    value_codes, values = codes(df[color_by])
    palette, ranked = _palette(value_codes[rows], x1 - x0, len(values))
    colors = palette[value_codes[rows] + 1]

    pixels = (x1 - x0) / ns_per_px
    wide = pixels >= MIN_BAR_PX
    if wide.sum() > MAX_BARS:
        wide &= pixels >= np.sort(pixels[wide])[-MAX_BARS]
    to_ms = 1e-6
    _draw_raster(ax, y[~wide], ((x0[~wide] - lo) / ns_per_px).astype(np.int64), x1[~wide] - x0[~wide],
                 colors[~wide], n_rows, width_px, span_ms)
    _draw_bars(ax, (x0[wide] - lo) * to_ms, (x1[wide] - lo) * to_ms, y[wide], colors[wide], pixels[wide])
    _draw_labels(ax, df["name"], rows[wide], (x0[wide] - lo) * to_ms, y[wide], pixels[wide], ns_per_px * to_ms)

    handles: list[Patch | Line2D] = [
        Patch(facecolor=palette[code + 1], label=str(values[code])) for code in ranked
    ]
    if len(ranked) < len(np.unique(value_codes[rows])):
        handles.append(Patch(facecolor=OTHER_COLOR, label="other"))
    if marks.any():
        _draw_marks(ax, marks, begin, thread, shown, band_top, lo, ns_per_px)
        handles.append(Line2D([], [], color="black", lw=0.8, label="mark"))
    memory = selected & equals(df["kind"], MEMORY) & (begin <= hi)
    if "memory_bytes" in df.columns and memory.any():
        handles += _draw_memory(ax, df, memory, begin, lo, hi, ns_per_px)

    labels = [
        f"{name} ({tid})" for name, tid in zip(_thread_names(df, shown), shown.tolist())
    ]
    ax.set_yticks(band_top + (band_rows - 1) / 2, labels, fontsize=FONT_SIZE + 1)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.tick_params(axis="y", length=0)
    ax.set_xlim(0, span_ms)
    ax.set_xlabel(f"ms since {lo} ns")
    ax.set_title(title if title is not None else f"{len(rows):,} ranges on {len(shown)} thread(s)")
    if own_figure:
        ax.figure.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 7),
                         fontsize=FONT_SIZE, frameon=False)
    else:
        ax.legend(handles=handles, loc="upper right", fontsize=FONT_SIZE, framealpha=0.8)
    return ax


def _depths(df: pd.DataFrame) -> np.ndarray:
    if "depth" in df.columns:
        return ints(df["depth"], 0)
    return depths(parent_positions(df))


def _palette(value_codes: np.ndarray, duration: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """RGBA per value code (+1, so that null, -1, maps to row 0); the top values by time get
    tab10 colours, the rest grey. Also returns the top codes, most time first."""
    weight = np.bincount(value_codes + 1, weights=duration, minlength=n_values + 1)[1:]
    ranked = np.argsort(-weight, kind="stable")[:TOP_COLORS]
    ranked = ranked[weight[ranked] > 0]
    palette = np.tile(np.array(to_rgba(OTHER_COLOR)), (n_values + 1, 1))
    cmap = plt.get_cmap("tab10")
    palette[ranked + 1] = cmap(np.arange(len(ranked)))
    return palette, ranked


def _draw_bars(ax: Axes, x0: np.ndarray, x1: np.ndarray, y: np.ndarray, colors: np.ndarray, pixels: np.ndarray) -> None:
    if x0.size == 0:
        return
    top, bottom = y - 0.4, y + 0.4
    verts = np.stack([np.stack([x0, top], 1), np.stack([x0, bottom], 1),
                      np.stack([x1, bottom], 1), np.stack([x1, top], 1)], axis=1)
    edges = np.where(pixels >= 4, 0.3, 0.0)
    ax.add_collection(PolyCollection(verts, facecolors=colors, edgecolors="white", linewidths=edges))


def _draw_raster(ax: Axes, y: np.ndarray, column: np.ndarray, duration: np.ndarray, colors: np.ndarray,
                 n_rows: int, width_px: int, span_ms: float) -> None:
    """Paint narrow bars into one image: per (row, pixel column), the longest bar's colour."""
    if y.size == 0:
        return
    cell = y * width_px + np.clip(column, 0, width_px - 1)
    order = np.lexsort((-duration, cell))
    first = order[np.r_[True, cell[order][1:] != cell[order][:-1]]]
    image = np.zeros((n_rows * width_px, 4))
    image[cell[first]] = colors[first]
    image = image.reshape(n_rows, 1, width_px, 4).repeat(SUBROWS, axis=1)
    image[:, [0, -1]] = 0.0
    ax.imshow(image.reshape(n_rows * SUBROWS, width_px, 4), extent=(0, span_ms, n_rows - 0.5, -0.5),
              aspect="auto", interpolation="nearest", origin="upper")


def _draw_labels(ax: Axes, names: pd.Series, rows: np.ndarray, x0: np.ndarray, y: np.ndarray,
                 pixels: np.ndarray, ms_per_px: float) -> None:
    """Names on the widest bars, cut to what fits."""
    chosen = np.flatnonzero(pixels >= LABEL_MIN_PX)
    chosen = chosen[np.argsort(-pixels[chosen], kind="stable")[:MAX_LABELS]]
    texts = names.to_numpy(dtype=object)[rows[chosen]]
    for i, text in zip(chosen.tolist(), texts):
        fits = int((pixels[i] - 6) / CHAR_PX)
        label = str(text)
        if len(label) > fits:
            label = label[: max(fits - 1, 0)] + "…"
        if len(label) >= 2:
            ax.text(x0[i] + 3 * ms_per_px, y[i], label, fontsize=FONT_SIZE, va="center", ha="left", clip_on=True)


def _draw_marks(ax: Axes, marks: np.ndarray, begin: np.ndarray, thread: np.ndarray, shown: np.ndarray,
                band_top: np.ndarray, lo: int, ns_per_px: float) -> None:
    """One tick per mark in the row above its thread's band, at most one per pixel column."""
    rows = np.flatnonzero(marks)
    band = np.searchsorted(shown, thread[rows])
    column = ((begin[rows] - lo) / ns_per_px).astype(np.int64)
    _, first = np.unique(band * (column.max() + 1) + column, return_index=True)
    x = (begin[rows[first]] - lo) / 1e6
    bottom = band_top[band[first]] - 0.55
    top = bottom - 0.8
    segments = np.stack([np.stack([x, top], 1), np.stack([x, bottom], 1)], axis=1)
    ax.add_collection(LineCollection(segments, colors="black", linewidths=0.8, alpha=0.7))


def _draw_memory(ax: Axes, df: pd.DataFrame, memory: np.ndarray, begin: np.ndarray, lo: int, hi: int,
                 ns_per_px: float) -> list[Line2D]:
    """Running allocated bytes per device as step lines on a twin axis, one point per pixel."""
    rows = np.flatnonzero(memory & ~nulls(df["memory_bytes"]))
    if rows.size == 0:
        return []
    rows = rows[np.argsort(begin[rows], kind="stable")]
    change = ints(df["memory_bytes"], 0)[rows]
    device = df["device"].astype(object).to_numpy()[rows] if "device" in df.columns else np.full(rows.size, None)
    twin = ax.twinx()
    twin.set_ylabel("MiB", fontsize=FONT_SIZE + 1)
    handles = []
    for k, name in enumerate(pd.unique(device)):
        mine = device == name if name is not None else pd.isna(device)
        running = np.cumsum(change[mine]) / 2**20
        time = begin[rows[mine]]
        before = running[time < lo]
        inside = time >= lo
        column = ((time[inside] - lo) / ns_per_px).astype(np.int64)
        peak = pd.Series(running[inside]).groupby(column).max()
        x = np.concatenate([[0.0], peak.index.to_numpy() * ns_per_px / 1e6, [(hi - lo) / 1e6]])
        level = before[-1] if before.size else 0.0
        y = np.concatenate([[level], peak.to_numpy(), [running[inside][-1] if inside.any() else level]])
        label = f"memory ({name})" if name is not None else "memory"
        (line,) = twin.step(x, y, where="post", color=plt.get_cmap("Dark2")(k % 8), lw=1.0, label=label)
        handles.append(line)
    return handles


def _thread_names(df: pd.DataFrame, shown: np.ndarray) -> list[str]:
    if "thread_name" not in df.columns:
        return ["thread"] * len(shown)
    first = pd.Series(df["thread_name"].astype(object).to_numpy()).groupby(ints(df["thread_id"], 0)).first()
    return [str(first.get(t, "thread")) for t in shown.tolist()]
