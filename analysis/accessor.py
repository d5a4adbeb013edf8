"""The ``df.recfn`` pandas accessor: analysis methods on any recfn event-table DataFrame."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from recfn import chrome

from . import flame, timeline
from .diff import diff
from .schema import INT64_MAX, RANGE, codes, equals, ints, isin, nulls, require, thread_mask
from .summary import render_table, summarize
from .tree import depths, parent_positions, preorder, self_durations


class RecfnAccessor:
    """Analysis of a recfn event table (docs/schema.md), as ``df.recfn``.

    Methods check for the columns they need and raise `schema.MissingColumnsError` (an
    AttributeError and a ValueError) naming the missing ones. Methods that select rows return
    plain DataFrames, which carry the accessor again.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self._df = frame

    # --- statistics -----------------------------------------------------------------------

    def summary(
        self,
        by: str | Sequence[str] = "name",
        sort_by: str = "total_ns",
        group_by_input_shape: bool = False,
        group_by_stack_n: int = 0,
        top: int | None = None,
    ) -> pd.DataFrame:
        """Statistics of the closed ranges per group, like torch's ``key_averages()``; ranges
        still open when the profiler stopped are left out.

        Columns: the `by` column(s) (plus ``input_shapes`` / ``stack`` when grouping by them),
        ``count``, ``total_ns``, ``self_ns`` (total minus the time its direct children cover;
        concurrent children, such as gathered asyncio tasks, count once), ``mean_ns``,
        ``min_ns``, ``max_ns``, ``total_pct`` and ``self_pct`` (shares of the summed self time
        of all ranges), then ``self_memory_bytes`` / ``memory_bytes``
        (allocated by the range's own memory events / including its children's) when the frame
        has memory events and ``flops`` when it has a flops column. Sorted by `sort_by`,
        descending (ascending for a group column); `top` keeps the first rows. An empty frame
        gives an empty summary with these columns.
        """
        return summarize(self._df, by, sort_by, group_by_input_shape, group_by_stack_n, top)

    def table(
        self,
        by: str | Sequence[str] = "name",
        sort_by: str = "total_ns",
        group_by_input_shape: bool = False,
        group_by_stack_n: int = 0,
        top: int | None = None,
        max_name_width: int = 55,
    ) -> str:
        """`summary` as a fixed-width text table with human units, like torch's ``.table()``."""
        stats = summarize(self._df, by, sort_by, group_by_input_shape, group_by_stack_n)
        keys = [by] if isinstance(by, str) else list(by)
        keys += ["input_shapes"] * group_by_input_shape + ["stack"] * (group_by_stack_n > 0)
        shown = stats if top is None else stats.head(top)
        return render_table(shown, keys, int(stats["self_ns"].sum()), max_name_width)

    def diff(self, other: pd.DataFrame) -> pd.DataFrame:
        """Per-name count, total and self time of `other` (the baseline) and this frame, with
        change (this minus baseline) and ratio; largest self-time regression first."""
        return diff(self._df, other)

    # --- call tree ------------------------------------------------------------------------

    def tree(self) -> pd.DataFrame:
        """All rows in depth-first order, each row followed by its subtree (roots and siblings by
        thread, then start, longest first), even when children overlap in time; with ``parent_id`` and
        ``depth`` (reconstructed from nesting when the frame has no ``parent_id``),
        ``duration_ns`` and ``self_ns`` (null for open ranges, 0 for marks and memory) and
        ``tree``, the name indented by depth, for printing."""
        df = self._df
        require(df, ("id", "name", "kind", "start_ns", "end_ns", "thread_id"), "tree")
        parent = parent_positions(df)
        is_range = equals(df["kind"], RANGE) & ~nulls(df["end_ns"])
        start, end = ints(df["start_ns"], 0), ints(df["end_ns"], 0)
        duration = np.where(is_range, end - start, 0)
        level = depths(parent)
        ids = ints(df["id"], -1)
        still_open = equals(df["kind"], RANGE) & nulls(df["end_ns"])
        out = df.assign(
            parent_id=pd.arrays.IntegerArray(np.where(parent >= 0, ids[parent], 0), parent < 0),
            depth=level.astype(np.int32),
            duration_ns=pd.arrays.IntegerArray(duration, still_open),
            self_ns=pd.arrays.IntegerArray(
                self_durations(parent, start, end, is_range), still_open
            ),
            tree=[
                "  " * d + str(n)
                for d, n in zip(level.tolist(), df["name"].astype(object).tolist())
            ],
        )
        nest_end = ints(df["end_ns"], INT64_MAX)
        keys = (np.arange(len(df)), -nest_end, start, ints(df["thread_id"], 0))
        return out.iloc[preorder(parent, keys)]

    def roots(self) -> pd.DataFrame:
        """Rows without a parent (in the frame), by start time."""
        return self._sorted(parent_positions(self._df) < 0)

    def children(self, event_id: int) -> pd.DataFrame:
        """Direct children of the event with id `event_id`, by start time; KeyError if no such
        event."""
        require(self._df, ("id",), "children")
        position = np.flatnonzero(ints(self._df["id"], -1) == event_id)
        if position.size == 0:
            raise KeyError(f"no event with id {event_id}")
        return self._sorted(parent_positions(self._df) == position[0])

    def _sorted(self, mask: np.ndarray) -> pd.DataFrame:
        require(self._df, ("start_ns",), "navigation")
        picked = self._df[mask]
        return picked.iloc[np.argsort(ints(picked["start_ns"], 0), kind="stable")]

    # --- selection ------------------------------------------------------------------------

    def window(self, start: int | None = None, end: int | None = None) -> pd.DataFrame:
        """Rows that overlap ``[start, end]`` (ns on the ``start_ns`` clock; None is open):
        ranges that start by `end` and end (or are still open) at or after `start`, and marks
        and memory events inside."""
        require(self._df, ("start_ns", "end_ns"), "window")
        begin = ints(self._df["start_ns"], 0)
        finish = ints(self._df["end_ns"], INT64_MAX)
        mask = np.ones(len(self._df), dtype=bool)
        if end is not None:
            mask &= begin <= end
        if start is not None:
            mask &= finish >= start
        return self._df[mask]

    def filter(
        self,
        name: str | re.Pattern[str] | Iterable[str] | None = None,
        scope: str | Iterable[str] | None = None,
        thread: int | str | Iterable[int | str] | None = None,
    ) -> pd.DataFrame:
        """Rows matching all the given criteria: `name` equal to a string, in a collection, or
        matching a compiled regular expression (``re.search``); `scope` a string or a
        collection; `thread` a thread_id (int) or thread_name (str), or a collection of them.

        Self times in a summary of the result count only children that are kept too.
        """
        df = self._df
        mask = np.ones(len(df), dtype=bool)
        if name is not None:
            require(df, ("name",), "filter by name")
            if isinstance(name, re.Pattern):
                code, values = codes(df["name"])  # search each distinct name once
                hits = np.array([bool(name.search(str(v))) for v in values] + [False])
                mask &= hits[code]
            else:
                mask &= isin(df["name"], [name] if isinstance(name, str) else name)
        if scope is not None:
            require(df, ("scope",), "filter by scope")
            mask &= isin(df["scope"], [scope] if isinstance(scope, str) else scope)
        if thread is not None:
            wanted = [thread] if isinstance(thread, int | str) else list(thread)
            mask &= thread_mask(df, wanted)
        return df[mask]

    # --- plots and export -----------------------------------------------------------------

    def timeline(
        self,
        ax: Axes | None = None,
        threads: Iterable[int | str] | None = None,
        start: int | None = None,
        end: int | None = None,
        max_depth: int | None = None,
        color_by: str = "name",
        min_duration_ns: int | None = None,
        title: str | None = None,
    ) -> Axes:
        """A Gantt chart of the ranges: one band per thread (`threads`: ids or names), one row
        per nesting depth up to `max_depth`, bars coloured by `color_by` (legend for the top
        ten values), names on wide bars, marks as ticks above their band, memory as a step
        line per device on a twin axis. `start`/`end` (ns on the ``start_ns`` clock) pick the
        window, open ranges reach its end; `min_duration_ns` drops shorter ranges. Bars
        narrower than 2 pixels are rasterised, so a million ranges draw in about a second.
        With `ax` None a new figure is made. Returns the Axes."""
        return timeline.timeline(
            self._df, ax, threads, start, end, max_depth, color_by, min_duration_ns, title
        )

    def flame(
        self, ax: Axes | None = None, *, max_depth: int | None = None, title: str | None = None
    ) -> Axes:
        """An icicle view (roots on top) of the call tree merged by call path, width = time.
        Returns the Axes."""
        return flame.flame(self._df, ax, max_depth=max_depth, title=title)

    def to_collapsed_stacks(self, path: str | os.PathLike[str]) -> None:
        """Write ``a;b;c <self_ns>`` lines for flamegraph.pl or speedscope."""
        flame.to_collapsed_stacks(self._df, path)

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write a Chrome / Perfetto JSON trace (``.json`` or ``.json.gz``)."""
        chrome.write_chrome_trace(self._df, path)
