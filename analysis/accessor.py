"""The ``df.recfn`` pandas accessor: analysis methods on any recfn event-table DataFrame."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from recfn.analysis.columns import (
    INT64_MAX,
    as_threads,
    codes,
    ints,
    isin,
    nulls,
    require,
    thread_mask,
)
from recfn.analysis.stats import fleet
from recfn.analysis.stats.diff import diff
from recfn.analysis.stats.summary import summarize, summary_text
from recfn.analysis.stats.tree import nodes, parent_positions, preorder, self_durations
from recfn.analysis.times import TimeLike, keep_origin, mark_window, to_ns, trace_start
from recfn.errors import EventNotFoundError, RecfnTypeError, RecfnValueError
from recfn.formats.schema import column_names

if TYPE_CHECKING:  # matplotlib is imported by the methods that draw, when they draw
    from matplotlib.axes import Axes

    from recfn.analysis.stats.compare import Comparison
    from recfn.formats.trace import Trace

MAX_INDENT = 40
"""Deepest level that the ``tree`` column indents; past it the depth is written instead, so
that the column stays linear in the number of rows."""


class RecfnAccessor:
    """Analysis of a recfn event table (docs/schema.md), as ``df.recfn``.

    Methods check for the columns they need and raise `schema.MissingColumnsError` (an
    AttributeError and a ValueError) naming the missing ones; methods that read the call tree
    raise `errors.MalformedFrameError` (a ValueError) for values that break the schema.
    Methods that select rows return plain DataFrames, which carry the accessor again. Options
    after the first argument are keyword-only; a thread is picked by ``thread=`` everywhere.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self._df = frame

    # --- statistics -----------------------------------------------------------------------

    def summary(
        self,
        by: str | Sequence[str] = "name",
        *,
        sort_by: str = "total_ns",
        top: int | None = None,
        group_by_input_shape: bool = False,
        group_by_stack_n: int = 0,
        as_index: bool = True,
        as_timedelta: bool = False,
    ) -> pd.DataFrame:
        """Statistics of the closed ranges per group, like torch's ``key_averages()``; ranges
        still open when the profiler stopped are left out.

        The group keys — the `by` column(s), plus ``input_shapes`` / ``stack`` when grouping
        by them — form the index, as with ``groupby().agg()``; `as_index` False gives them as
        columns. Columns: ``count``, ``total_ns``, ``self_ns`` (the range's time minus what
        its direct children cover; concurrent children, such as gathered asyncio tasks, count
        once), ``mean_ns``, ``min_ns``, ``max_ns`` (of one range's duration), ``total_pct``
        (``total_ns`` as a share of the trace's wall time, from its first range's start to its
        last range's end: a range over the whole trace reads 100%, a name busy on several
        threads at once can read more) and ``self_pct`` (a share of the self time of all
        ranges but profiler spans, see `summary.PROFILER_SPAN_SCOPES`; they add up to 100%),
        then the memory columns when the frame has memory events (`summary.MEMORY_COLUMNS`:
        net bytes of the range's subtree and of its own events, bytes its subtree allocated
        and freed), and ``flops`` when it has a flops column. When any range has GPU time
        (``profile(cuda=True)``), ``device_count`` (ranges with GPU time), ``device_total_ns``,
        ``device_self_ns``, ``device_mean_ns`` and ``device`` (the devices, comma-separated;
        not when grouping by device) follow the CPU columns; they are absent otherwise.

        Totals (``total_ns``, ``device_total_ns``, ``total_memory_bytes``) count a group's
        outermost ranges only: a range nested in a range of its own group (recursion) is
        already inside that range's total, so on one thread "Total %" stays within 100%.
        ``count``, ``mean_ns``, ``min_ns`` and ``max_ns`` still count every call.

        Sorted by `sort_by`, descending (ascending for a group key); `top` keeps the first
        rows. `as_timedelta` gives every ``*_ns`` column as ``timedelta64[ns]`` named without
        the suffix (``total``, ``device_self``...). An empty frame gives an empty summary with
        the CPU columns. Raises `MalformedFrameError` for frames that break the schema.
        """
        return summarize(
            self._df,
            by,
            sort_by=sort_by,
            top=top,
            group_by_input_shape=group_by_input_shape,
            group_by_stack_n=group_by_stack_n,
            as_index=as_index,
            as_timedelta=as_timedelta,
        )

    def to_string(
        self,
        by: str | Sequence[str] = "name",
        *,
        sort_by: str = "total_ns",
        top: int | None = None,
        group_by_input_shape: bool = False,
        group_by_stack_n: int = 0,
        max_name_width: int = 55,
    ) -> str:
        """`summary` as a fixed-width text table with human units, like torch's
        ``key_averages().table()``; GPU columns appear as in `summary`. When `top` cuts rows,
        a line says how many more names (groups) there are; the footer gives the self-time
        total of all rows."""
        return summary_text(
            self._df,
            by,
            sort_by=sort_by,
            top=top,
            group_by_input_shape=group_by_input_shape,
            group_by_stack_n=group_by_stack_n,
            max_name_width=max_name_width,
        )

    def diff(
        self,
        baseline: pd.DataFrame | Trace,
        *,
        by: str | Sequence[str] = "name",
        as_index: bool = True,
    ) -> pd.DataFrame:
        """How this frame changed from `baseline` (a frame or a `recfn.Trace`), per group
        (`by`, as in `summary`).

        For each of ``count``, ``total_ns`` and ``self_ns``: this frame's value (named as in
        the summary), ``<column>_baseline``, ``<column>_change`` (this minus baseline) and
        ``<column>_change_pct`` (change in percent of the baseline: inf for groups new in
        this frame, -100 for groups gone from it, NaN when both are 0); the same for
        ``device_count``, ``device_total_ns`` and ``device_self_ns`` when both frames have
        GPU time (`summary`). The group keys form
        the index (`as_index` False: columns). Largest self-time increase first: self time
        points at the group that got slower, while totals grow for all its callers too.
        """
        return diff(self._df, baseline, by=by, as_index=as_index)

    def compare(self, baseline: object, **options: object) -> Comparison:
        """How this frame (a run) changed from `baseline` (a run set: a frame, a trace, a
        folder of runs, a list of them), per group, noise-aware: ``recfn.compare(baseline,
        df, **options)``; see `recfn.analysis.runsets.compare` and docs/compare.md."""
        from recfn.analysis.runsets import compare

        return compare(baseline, self._df, **options)  # type: ignore[arg-type]

    # --- fleets -------------------------------------------------------------------------

    def rank_summary(self, value: str = "total_ns", *, top: int | None = None) -> pd.DataFrame:
        """`value` (a `summary` column) per name and rank, side by side, with ``imbalance``
        (largest rank over the mean); processes stand in for ranks when there are none."""
        return fleet.rank_summary(self._df, value, top=top)

    def stragglers(self, name: str) -> pd.DataFrame:
        """Per occurrence of the range `name` (the k-th on each rank): the rank that finished
        last, ``lag_ns`` behind the first and ``behind_median_ns`` behind the median."""
        return fleet.stragglers(self._df, name)

    # --- call tree ------------------------------------------------------------------------

    def tree(self) -> pd.DataFrame:
        """All rows in depth-first order, each row followed by its subtree (roots and siblings
        by thread, then start, longest first), even when children overlap in time; with
        ``parent_id`` and ``depth`` (reconstructed from nesting when the frame has no
        ``parent_id``), ``duration_ns`` and ``self_ns`` (null for open ranges, 0 for marks and
        memory) and ``tree``, the name indented by depth for printing (indentation stops at
        `MAX_INDENT` levels; deeper rows show their depth as ``[depth]``)."""
        df = self._df
        require(df, ("id", "name", "kind", "start_ns", "end_ns", "thread_id"), "tree")
        forest = nodes(df, "tree")
        parent, level = forest.parent, forest.depth
        ids = ints(df["id"], -1)
        out = df.assign(
            parent_id=pd.arrays.IntegerArray(np.where(parent >= 0, ids[parent], 0), parent < 0),
            depth=level.astype(np.int32),
            duration_ns=pd.arrays.IntegerArray(forest.duration, forest.still_open),
            self_ns=pd.arrays.IntegerArray(
                self_durations(parent, forest.start, forest.end, forest.closed),
                forest.still_open,
            ),
            tree=_indented(level, df["name"]),
        )
        keys = (np.arange(len(df)), -forest.end, forest.start, ints(df["thread_id"], 0))
        return out.iloc[preorder(parent, keys, level)]

    def roots(self) -> pd.DataFrame:
        """Rows without a parent (in the frame), by start time."""
        return self._sorted(parent_positions(self._df) < 0)

    def children(self, event_id: int) -> pd.DataFrame:
        """Direct children of the event with id `event_id`, by start time; KeyError if no such
        event."""
        require(self._df, ("id",), "children")
        position = np.flatnonzero(ints(self._df["id"], -1) == event_id)
        if position.size == 0:
            raise EventNotFoundError(f"children: no event with id {event_id!r}")
        return self._sorted(parent_positions(self._df) == position[0])

    def _sorted(self, mask: np.ndarray) -> pd.DataFrame:
        require(self._df, ("start_ns",), "navigation")
        picked = self._df[mask]
        return picked.iloc[np.argsort(ints(picked["start_ns"], 0), kind="stable")]

    # --- selection ------------------------------------------------------------------------

    def window(self, start: TimeLike | None = None, end: TimeLike | None = None) -> pd.DataFrame:
        """Rows that overlap ``[start, end]`` (None is open): ranges that start by `end` and
        end (or are still open) at or after `start`, and marks and memory events inside.

        A bound is an int (ns on the ``start_ns`` clock, since the epoch), a duration after
        the trace start (``"2ms"``, ``"1.5s"``, ``pd.Timedelta``) or an absolute
        ``pd.Timestamp`` (naive: UTC); see `times.to_ns`. The trace start is the profile's
        (``df.attrs``), else the frame's earliest ``start_ns``. The result remembers the
        window: `timeline` draws it at the window's extent, and a window of it stays inside.
        Raises ValueError naming a bad string, or an `end` before `start`.
        """
        df = self._df
        require(df, ("start_ns", "end_ns"), "window")
        origin = trace_start(df)
        lo = to_ns(start, origin, "window: start")
        hi = to_ns(end, origin, "window: end")
        if lo is not None and hi is not None and hi < lo:
            raise RecfnValueError(f"window: end ({end!r}) is before start ({start!r})")
        begin = ints(df["start_ns"], 0)
        finish = ints(df["end_ns"], INT64_MAX)
        mask = np.ones(len(df), dtype=bool)
        if hi is not None:
            mask &= begin <= hi
        if lo is not None:
            mask &= finish >= lo
        return mark_window(df[mask], df, lo, hi)

    def with_times(self) -> pd.DataFrame:
        """The frame with pandas time columns added: ``start`` and ``end``
        (``datetime64[ns, UTC]``; NaT for open ranges), ``duration`` (``timedelta64[ns]``;
        NaT for open ranges, 0 for marks and memory events) and, when the frame has GPU time,
        ``device_start`` and ``device_duration``."""
        df = self._df
        require(df, ("start_ns", "end_ns"), "with_times")

        def exact(column: str, unit: str) -> np.ndarray:
            values = ints(df[column], 0).view(f"{unit}64[ns]").copy()
            values[nulls(df[column])] = np.array("NaT", dtype=values.dtype)
            return values

        def stamps(column: str) -> pd.Series:
            return pd.Series(exact(column, "datetime"), df.index).dt.tz_localize("UTC")

        def deltas(column: str) -> pd.Series:
            return pd.Series(exact(column, "timedelta"), df.index)

        added = {"start": stamps("start_ns"), "end": stamps("end_ns")}
        added["duration"] = added["end"] - added["start"]
        if "device_start_ns" in df.columns and "device_duration_ns" in df.columns:
            added["device_start"] = stamps("device_start_ns")
            added["device_duration"] = deltas("device_duration_ns")
        return df.assign(**added)

    def filter(
        self,
        name: str | re.Pattern[str] | Iterable[str] | None = None,
        *,
        scope: str | Iterable[str] | None = None,
        thread: int | str | Iterable[int | str] | None = None,
    ) -> pd.DataFrame:
        """Rows matching all the given criteria: `name` equal to a string, in a collection, or
        matching a compiled regular expression (``re.search``); `scope` a string or a
        collection; `thread` a thread_id (int) or thread_name (str), or a collection of them.

        Self times in a summary of the result count only children that are kept too; its
        `timeline` spans the rows kept, on the time axis of the whole trace.
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
                mask &= isin(df["name"], _texts(name, "name", "a pattern, "))
        if scope is not None:
            require(df, ("scope",), "filter by scope")
            mask &= isin(df["scope"], _texts(scope, "scope", ""))
        if thread is not None:
            mask &= thread_mask(df, as_threads(thread, "filter"))
        return keep_origin(df[mask], df)

    # --- plots and export -----------------------------------------------------------------

    def timeline(
        self,
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
        """A Gantt chart of the ranges: one band per thread (`thread`: ids or names, as in
        `filter`), one row per nesting depth up to `max_depth`, then one band per GPU
        ("cuda:0 (GPU time)") holding the ranges' GPU spans when the frame has GPU time;
        marks as ticks above their band, memory as a step line per device on an Axes of its
        own below, sharing the time axis.

        Bars are coloured by `color_by` with a colour fixed per value (a hash of it: the same
        name has the same colour in every trace, cell, `timeline` and `flame`); the legend,
        outside the plot on the right, lists the ten values with most time and says how many
        more there are; wide bars carry their names. The x axis is the time since the trace
        start (ns, µs, ms or s, whichever fits the span), the absolute start in its label.

        `start`/`end` pick the window (as in `window`: ns, "2ms", Timedelta, Timestamp); by
        default the window a `window()` result was cut to, else the rows' extent, GPU spans
        included. Open ranges reach its end; `min_duration_ns` drops shorter ranges. Bars
        narrower than 2 pixels are rasterised, so a million ranges draw in about a second.
        Names and the title are drawn as plain text, never as math markup. With `ax` None a
        new figure of `figsize` (inches) is made. Returns the Axes of the lanes, described
        for an image's alt text by `drawing.alt_text(ax)`; raises `NothingToDrawError` when
        the selection is empty."""
        from recfn.analysis.plots import timeline

        return timeline.timeline(
            self._df,
            ax,
            thread=thread,
            start=start,
            end=end,
            max_depth=max_depth,
            min_duration_ns=min_duration_ns,
            color_by=color_by,
            title=title,
            figsize=figsize,
        )

    def flame(
        self,
        ax: Axes | None = None,
        *,
        max_depth: int | None = None,
        title: str | None = None,
        figsize: tuple[float, float] | None = None,
    ) -> Axes:
        """An icicle view (roots on top) of the call tree merged by call path, width = time,
        coloured per name as in `timeline`. With `ax` None a new figure of `figsize` is
        made. Returns the Axes (described by `drawing.alt_text(ax)`); raises
        `NothingToDrawError` when the frame has no closed range."""
        from recfn.analysis.plots import flame

        return flame.flame(self._df, ax, max_depth=max_depth, title=title, figsize=figsize)

    def to_collapsed_stacks(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Write ``a;b;c <self_ns>`` lines for flamegraph.pl or speedscope, whole or not at all;
        the format has no room for recfn's mark, so an existing file is replaced only with
        ``overwrite`` (FileExistsError otherwise)."""
        from recfn.analysis.plots import flame

        flame.to_collapsed_stacks(self._df, path, overwrite=overwrite)

    def to_chrome_trace(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Write a Chrome / Perfetto JSON trace (``.json`` or ``.json.gz``), whole or not at
        all; a file recfn did not write is replaced only with ``overwrite`` (FileExistsError)."""
        from recfn.formats import chrome

        chrome.write_chrome_trace(self._df, path, overwrite=overwrite)


def _texts(value: object, what: str, besides: str) -> list[str]:
    """`filter`'s ``name`` or ``scope`` (`what`): one string or a collection of them, as a
    list; RecfnTypeError naming it otherwise (`besides`: what else it may be)."""
    texts = (
        [value]
        if isinstance(value, str)
        else None
        if isinstance(value, dict)
        else column_names(value)
    )
    if texts is None:
        raise RecfnTypeError(
            f"filter: {what} must be a string, {besides}or a collection of strings, got {value!r}"
        )
    return texts


def _indented(level: np.ndarray, names: pd.Series) -> list[str]:
    """Each name indented two spaces per level, up to `MAX_INDENT` levels."""
    shown = np.minimum(level, MAX_INDENT).tolist()
    return [
        "  " * d + (f"[{deep}] " if deep > MAX_INDENT else "") + str(n)
        for d, deep, n in zip(shown, level.tolist(), names.astype(object).tolist())
    ]
