"""Flame views of the call tree: a time-weighted icicle plot and collapsed stacks.

Ranges are merged by call path (see `tree.call_tree`), as flamegraph.pl does; siblings are
ordered by name. A path's width is its self time plus its children's widths, which is how
flamegraph.pl draws the collapsed stacks: the summed duration of its ranges, unless children
overlap (concurrent asyncio tasks), whose time then widens the parent rather than spilling
out of it.
"""

from __future__ import annotations

import os
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import MaxNLocator

from recfn.analysis.columns import check_number
from recfn.analysis.plots.chart import MAX_BARS
from recfn.analysis.plots.colors import column_colors
from recfn.analysis.plots.drawing import (
    add_labels,
    add_rectangles,
    check_figure,
    plain_text,
    set_alt_text,
)
from recfn.analysis.stats.tree import CallTree, call_tree, subtree_sums
from recfn.analysis.units import format_ns, printable
from recfn.errors import NothingToDrawError

MIN_BAR_PX = 1.0
"""Paths narrower than this many pixels are not drawn."""


def flame(
    df: pd.DataFrame,
    ax: Axes | None = None,
    *,
    max_depth: int | None = None,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Axes:
    """Draw the call tree of `df` as an icicle (roots on top); see `RecfnAccessor.flame`."""
    check_figure(ax, figsize, "flame")
    check_number(max_depth, "max_depth", "flame")
    tree = call_tree(df)
    if tree.total.size == 0:
        raise NothingToDrawError("flame: the frame has no closed ranges")
    width = subtree_sums(tree.parent, tree.self)
    x0 = _offsets(tree, width)
    shown = np.ones(tree.total.size, dtype=bool) if max_depth is None else tree.depth <= max_depth
    if not shown.any():
        raise NothingToDrawError(f"flame: no ranges at max_depth={max_depth} (0: the roots)")
    levels = int(tree.depth[shown].max()) + 1
    if ax is None:
        height = float(np.clip(1.0 + 0.25 * levels, 3, 16))
        _, ax = plt.subplots(figsize=figsize or (12, height), layout="constrained")
    span = int(width[tree.parent < 0].sum())
    ns_per_px = max(span, 1) / max(ax.get_window_extent().width, 50)

    pixels = width / ns_per_px
    drawn = np.flatnonzero(shown & (pixels >= MIN_BAR_PX))
    drawn = drawn[np.argsort(-pixels[drawn], kind="stable")[:MAX_BARS]]
    left, right, y = x0[drawn] / 1e6, (x0[drawn] + width[drawn]) / 1e6, tree.depth[drawn]
    _, _, palette = column_colors(df, "name")  # the timeline's; codes as the tree's names
    colors = palette[tree.name]  # code -1 takes the last row
    add_rectangles(ax, left, right, y, 0.45, colors[drawn], pixels[drawn])
    names = np.array([*map(str, tree.names), ""], dtype=object)[tree.name[drawn]]  # "" for code -1
    add_labels(ax, names, left, y, pixels[drawn], ns_per_px / 1e6)

    ax.set_xlim(0, max(span, 1) / 1e6)
    ax.set_ylim(levels - 0.5, -0.5)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # not one tick per level
    ax.set_ylabel("depth")
    ax.set_xlabel("time (ms), all threads, merged by call path")
    default = f"flame graph: {format_ns(span)} in {width.size:,} call paths"
    plain_text([ax.set_title(title if title is not None else default)])
    roots = np.flatnonzero(tree.parent < 0)
    widest = roots[np.argmax(width[roots])]
    name = printable(str(tree.names[tree.name[widest]])) if tree.name[widest] >= 0 else "(none)"
    set_alt_text(
        ax,
        f"Flame graph of {width.size:,} call paths over {format_ns(span)}, "
        f"{levels} level{'s' if levels != 1 else ''} deep; widest root: {name} "
        f"({format_ns(float(width[widest]))})",
    )
    return ax


def to_collapsed_stacks(
    df: pd.DataFrame, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """Write ``root;child;leaf <self_ns>`` lines, one per call path with self time, sorted.

    That is the input of flamegraph.pl and speedscope, which read it alike (`frame_name`): ";" in
    names becomes ":" and line breaks become spaces, as the format has no escapes, and a name
    that ends in whitespace and a number (``task 0``) gets an invisible word joiner after it:
    flamegraph.pl would read a leaf's number as a second count (a differential line).

    The file appears whole or not at all; the format has no room for recfn's mark, so an
    existing file is replaced only with ``overwrite`` (FileExistsError otherwise, before any
    work).
    """
    from recfn.formats.files import check_writable, path_name, write_atomic

    target = path_name(path, "the stacks' path")
    check_writable(target, overwrite=overwrite, kind="stacks")  # before the tree is built
    tree = call_tree(df)
    names = [frame_name(str(n)) for n in tree.names]
    stacks: list[str] = []
    for parent, code in zip(tree.parent.tolist(), tree.name.tolist()):
        name = names[code] if code >= 0 else ""
        stacks.append(f"{stacks[parent]};{name}" if parent >= 0 else name)
    lines = sorted(f"{stacks[p]} {tree.self[p]}\n" for p in np.flatnonzero(tree.self > 0).tolist())

    def write(temporary: str) -> None:
        with open(temporary, "w", encoding="utf-8") as out:
            out.writelines(lines)

    write_atomic(target, write, overwrite=overwrite, kind="stacks")


_NUMBER_AT_END = re.compile(r"\s(?:\d+(?:\.\d*)?)$")
"""A name's end that flamegraph.pl reads as a count: whitespace (Unicode's: it reads UTF-8), then
a number."""
WORD_JOINER = "\u2060"
"""Invisible, and neither whitespace nor a digit to flamegraph.pl and speedscope."""


def frame_name(name: str) -> str:
    """`name` as a frame of a collapsed stack that flamegraph.pl and speedscope read as it
    looks: ";" (the frame separator) as ":", line breaks as spaces, and a `WORD_JOINER` after a
    number that ends it after whitespace."""
    name = name.replace(";", ":").replace("\n", " ").replace("\r", " ")
    return name + WORD_JOINER if _NUMBER_AT_END.search(name) else name


def _offsets(tree: CallTree, width: np.ndarray) -> np.ndarray:
    """Left edge (ns) of each path: siblings side by side in name order under their parent."""
    x0 = np.zeros(tree.total.size, dtype=np.int64)
    rank = np.empty(len(tree.names) + 1, dtype=np.int64)
    rank[np.argsort(np.array([""] + [str(n) for n in tree.names]), kind="stable")] = np.arange(
        len(rank)
    )
    bounds = np.searchsorted(tree.depth, np.arange(tree.depth.max() + 2))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        paths = np.arange(lo, hi)
        order = paths[np.lexsort((rank[tree.name[paths] + 1], tree.parent[paths]))]
        before = np.cumsum(width[order]) - width[order]
        parent = tree.parent[order]
        group_start = np.r_[True, parent[1:] != parent[:-1]]
        base = np.maximum.accumulate(np.where(group_start, np.arange(order.size), 0))
        x0[order] = np.where(parent >= 0, x0[np.maximum(parent, 0)], 0) + before - before[base]
    return x0
