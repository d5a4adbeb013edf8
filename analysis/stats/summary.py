"""Statistics of ranges per group (by default per name, like ``key_averages()``) and their
text rendering."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from recfn.analysis.columns import (
    MEMORY,
    check_number,
    codes,
    equals,
    gpu_spans,
    group_keys,
    ints,
    require,
)
from recfn.analysis.stats.tree import (
    Nodes,
    linked_parents,
    nodes,
    outermost,
    self_durations,
    subtree_sums,
)
from recfn.analysis.units import format_bytes, format_count, format_ns, printable
from recfn.errors import RecfnTypeError, RecfnValueError

STAT_COLUMNS: tuple[str, ...] = (
    "count",
    "total_ns",
    "self_ns",
    "mean_ns",
    "min_ns",
    "max_ns",
    "total_pct",
    "self_pct",
)
"""Columns of every summary, after the group keys (which form the index)."""

DEVICE_COLUMNS: tuple[str, ...] = (
    "device_count",
    "device_total_ns",
    "device_self_ns",
    "device_mean_ns",
    "device",
)
"""GPU columns, right after `STAT_COLUMNS` when any range of the frame has GPU time
(``device_duration_ns``, filled by ``recfn.profile(cuda=True)``); absent otherwise.
``device`` (the devices of the group's GPU ranges, comma-separated) is left out when it is a
group key."""

MEMORY_COLUMNS: tuple[str, ...] = (
    "allocated_bytes",
    "freed_bytes",
    "total_memory_bytes",
    "self_memory_bytes",
)
"""Memory columns, when the frame has memory events (``profile(profile_memory=True)``): the
bytes allocated and the bytes freed (a positive count) by the memory events in a range and
every range it contains; their net (allocated less freed) there, and in the range's own events
only. Net is negative where a range freed more than it allocated (memory allocated before it,
such as the previous batch)."""

PROFILER_SPAN_SCOPES: tuple[str, ...] = ("Trace",)
"""Scopes of ranges that a profiler records about itself rather than about the program:
torch.profiler traces hold one ``PyTorch Profiler (N)`` span over the whole capture, on a
track of its own. They stay in the summary but not in the time that percentages divide by."""

_TIMED = frozenset(
    c.removesuffix("_ns") for c in (*STAT_COLUMNS, *DEVICE_COLUMNS) if c.endswith("_ns")
)
"""Names of the duration columns as `timedeltas` gives them."""


def summarize(
    df: pd.DataFrame,
    by: str | Sequence[str] = "name",
    *,
    sort_by: str = "total_ns",
    top: int | None = None,
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
    as_index: bool = True,
    as_timedelta: bool = False,
) -> pd.DataFrame:
    """Statistics of the closed ranges of `df` per group; see `RecfnAccessor.summary`."""
    if not isinstance(sort_by, str):
        raise RecfnTypeError(f"summary: sort_by must be a column name, got {sort_by!r}")
    if as_timedelta and sort_by in _TIMED:
        sort_by += "_ns"  # the name that the column has with as_timedelta
    found = _summarize(df, by, sort_by, top, group_by_input_shape, group_by_stack_n)
    result = timedeltas(found.table) if as_timedelta else found.table
    result = result.set_index(found.keys) if as_index else result
    mark_summary(result, found.total, found.wall)
    return result


SUMMARY_ATTR = "recfn.summary"
"""The ``attrs`` key that marks a frame as a summary (a notebook shows it with units)."""


def mark_summary(result: pd.DataFrame, total: int, wall: int) -> None:
    """Mark ``result`` as a summary (`SUMMARY_ATTR`) and keep what its percentages divide by:
    ``attrs["self_total_ns"]`` (``self_pct``) and ``attrs["wall_ns"]`` (``total_pct``)."""
    result.attrs[SUMMARY_ATTR] = True
    result.attrs["self_total_ns"] = total
    result.attrs["wall_ns"] = wall


def timedeltas(summary: pd.DataFrame) -> pd.DataFrame:
    """`summary` with each ``*_ns`` column as a ``timedelta64[ns]`` column named without the
    suffix (``total_ns`` -> ``total``); means are rounded to the nanosecond."""
    result = summary.copy()
    timed = [c for c in result.columns if c.endswith("_ns")]
    for column in timed:
        result[column] = pd.to_timedelta(result[column].round(), unit="ns")
    return result.rename(columns={c: c.removesuffix("_ns") for c in timed})


def summary_text(
    df: pd.DataFrame,
    by: str | Sequence[str] = "name",
    *,
    sort_by: str = "total_ns",
    top: int | None = None,
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
    max_name_width: int = 55,
) -> str:
    """The summary as a text table; see `RecfnAccessor.to_string`."""
    found = _summarize(df, by, sort_by, top, group_by_input_shape, group_by_stack_n)
    return render_text(found.table, found.keys, found.total, max_name_width, found.groups)


class _Summary(NamedTuple):
    table: pd.DataFrame
    """The summary rows (after `top`), keys as columns."""
    keys: list[str]
    total: int
    """The self-time total that percentages divide by."""
    groups: int
    """How many groups there are before `top` cuts them."""
    first: int
    """The earliest start of a closed range (`range_span`)."""
    wall: int
    """The wall time that ``total_pct`` divides by (`range_span`)."""


def _summarize(
    df: pd.DataFrame,
    by: str | Sequence[str],
    sort_by: str,
    top: int | None,
    group_by_input_shape: bool,
    group_by_stack_n: int,
) -> _Summary:
    """The summary with its keys as columns, and what its text rendering needs."""
    keys = group_keys(by, "summary")
    check_number(group_by_stack_n, "group_by_stack_n", "summary", optional=False)
    if group_by_stack_n < 0:
        raise RecfnValueError(f"group_by_stack_n must be >= 0, got {group_by_stack_n}")
    if not isinstance(group_by_input_shape, bool | np.bool_):
        raise RecfnTypeError(
            f"summary: group_by_input_shape must be True or False, got {group_by_input_shape!r}"
        )
    check_top(top)
    extra = ["input_shapes"] * group_by_input_shape + ["stack"] * (group_by_stack_n > 0)
    require(df, ["kind", "start_ns", "end_ns", *keys, *extra], "summary")
    forest = nodes(df, "summary")
    duration = forest.duration
    own = self_durations(forest.parent, forest.start, forest.end, forest.closed)
    rows = np.flatnonzero(forest.closed)

    work: dict[str, object] = {key: df[key].array.take(rows) for key in keys}
    if group_by_input_shape:
        work["input_shapes"] = _shape_keys(df["input_shapes"])[rows]
    if group_by_stack_n:
        work["stack"] = _stack_keys(df["stack"], group_by_stack_n)[rows]
    grouping = [*keys, *extra]
    frame = pd.DataFrame(work)
    # Totals count only a group's outermost ranges: time (and memory) nested inside a range of
    # the same group, as in recursion, is already in the outer range's total.
    groups = frame.groupby(grouping, observed=True, sort=False, dropna=False)
    group = np.full(len(df), -1, dtype=np.int64)
    only = frame[grouping[0]]
    if len(grouping) == 1 and isinstance(only.dtype, pd.CategoricalDtype):
        codes = only.cat.codes.to_numpy(dtype=np.int64)  # as good as ngroup, cheaper
        codes[codes < 0] = len(only.cat.categories)  # a missing key is a group of its own
        group[rows] = codes
    else:
        group[rows] = groups.ngroup().to_numpy(dtype=np.int64)
    counted = outermost(linked_parents(forest), group)[rows]
    frame["duration"] = duration[rows]
    frame["counted"] = np.where(counted, duration[rows], 0)
    frame["own"] = own[rows]
    stats = {
        "count": ("duration", "size"),
        "duration_ns": ("duration", "sum"),
        "total_ns": ("counted", "sum"),
        "self_ns": ("own", "sum"),
        "min_ns": ("duration", "min"),
        "max_ns": ("duration", "max"),
    }
    for column, values in _memory_columns(df, forest).items():
        # A subtree's bytes count once per group, as its time does.
        nested = column != "self_memory_bytes"
        frame[column] = np.where(counted, values[rows], 0) if nested else values[rows]
        stats[column] = (column, "sum")
    if "flops" in df.columns:
        frame["flops"] = ints(df["flops"], 0)[rows]
        stats["flops"] = ("flops", "sum")

    device = _device_columns(df, forest, rows, counted)
    for column in ("device_count", "device_total_ns", "device_self_ns", "device_duration_ns"):
        if column in device:
            frame[column] = device[column]
            stats[column] = (column, "sum")

    result = frame.groupby(grouping, observed=True, sort=False, dropna=False).agg(**stats)
    result = result.reset_index()
    result["mean_ns"] = result.pop("duration_ns") / result["count"].clip(lower=1)
    if device:
        result["device_mean_ns"] = result.pop("device_duration_ns") / result["device_count"]
        if "device" not in grouping:
            group_of = groups.ngroup().to_numpy(dtype=np.int64)  # numbered as `result` is
            result["device"] = _device_labels(device["device"], group_of, len(result))
    total = self_time_total(df, forest, own)
    first, last = range_span(forest)
    wall = last - first
    result["total_pct"] = 100.0 * result["total_ns"] / wall if wall else np.nan
    result["self_pct"] = 100.0 * result["self_ns"] / total if total else np.nan
    gpu = [c for c in DEVICE_COLUMNS if c in result.columns and c not in grouping]
    ordered = [*grouping, *STAT_COLUMNS, *gpu]
    ordered += [c for c in stats if c not in ordered and c in result.columns]
    result = result[ordered]

    if sort_by not in result.columns:
        raise RecfnValueError(f"sort_by={sort_by!r} is not a summary column; choose from {ordered}")
    result = result.sort_values(sort_by, ascending=sort_by in grouping, kind="stable")
    groups_found = len(result)
    if top is not None:
        result = result.head(top)
    return _Summary(result.reset_index(drop=True), grouping, total, groups_found, first, wall)


def _device_columns(
    df: pd.DataFrame, forest: Nodes, rows: np.ndarray, counted: np.ndarray
) -> dict[str, np.ndarray]:
    """Per closed range (`rows`): whether it has GPU time, that time as counted in totals
    (outermost ranges of a group, as for CPU time), its GPU self time (minus what its
    children's GPU spans cover), its GPU duration and its device; empty without GPU time."""
    timed, begin, end = gpu_spans(df, forest.closed)
    if not timed.any():
        return {}
    length = end - begin
    own = self_durations(forest.parent, begin, end, timed)
    mine = timed[rows]
    labels = np.full(rows.size, None, dtype=object)
    if "device" in df.columns:
        labels[mine] = df["device"].astype(object).to_numpy()[rows[mine]]
    return {
        "device_count": mine.astype(np.int64),
        "device_total_ns": np.where(counted & mine, length[rows], 0),
        "device_self_ns": own[rows],
        "device_duration_ns": length[rows],
        "device": labels,
    }


def _device_labels(labels: np.ndarray, group: np.ndarray, n_groups: int) -> list[str]:
    """Per group, the distinct devices of its GPU ranges, sorted and comma-separated."""
    known = pd.notna(labels)
    pairs = pd.DataFrame({"group": group[known], "device": labels[known].astype(str)})
    joined = pairs.drop_duplicates().sort_values("device").groupby("group")["device"].agg(", ".join)
    return [str(v) for v in joined.reindex(range(n_groups), fill_value="").tolist()]


def range_span(forest: Nodes) -> tuple[int, int]:
    """The earliest start and the latest end of the closed ranges; (0, 0) without any. Their
    difference is the trace's wall time, which ``total_pct`` divides by: a range that covers
    the whole trace reads 100%; a name busy on several threads at once can read more, as CPU
    time does."""
    closed = forest.closed
    if not closed.any():
        return 0, 0
    return int(forest.start[closed].min()), int(forest.end[closed].max())


def self_time_total(df: pd.DataFrame, forest: Nodes, own: np.ndarray) -> int:
    """The time that summary percentages divide by: the self time of all closed ranges but
    profiler spans (`PROFILER_SPAN_SCOPES`), i.e. the time the program spent in ranges,
    each instant counted once per thread."""
    counted = forest.closed
    if "scope" in df.columns:
        scope, scopes = codes(df["scope"])
        spans = np.flatnonzero(scopes.isin(PROFILER_SPAN_SCOPES))
        if spans.size:
            counted = counted & ~np.isin(scope, spans)
    return int(own[counted].sum())


def _memory_columns(df: pd.DataFrame, forest: Nodes) -> dict[str, np.ndarray]:
    """Per range, the net bytes (allocated less freed) of its whole subtree's memory events and
    of its own, and the bytes its subtree allocated and freed (`MEMORY_COLUMNS`)."""
    if "memory_bytes" not in df.columns:
        return {}
    parent = forest.parent
    events = equals(df["kind"], MEMORY) & (parent >= 0)
    if not events.any():
        return {}
    own = np.bincount(
        parent[events], weights=ints(df["memory_bytes"], 0)[events], minlength=len(df)
    )
    own = np.rint(own).astype(np.int64)
    change = ints(df["memory_bytes"], 0)
    allocated = np.bincount(
        parent[events], weights=np.maximum(change, 0)[events], minlength=len(df)
    )
    freed = np.bincount(parent[events], weights=np.maximum(-change, 0)[events], minlength=len(df))
    linked = linked_parents(forest)
    return {
        "allocated_bytes": subtree_sums(linked, np.rint(allocated).astype(np.int64)),
        "freed_bytes": subtree_sums(linked, np.rint(freed).astype(np.int64)),
        "total_memory_bytes": subtree_sums(linked, own),
        "self_memory_bytes": own,
    }


def _shape_keys(shapes: pd.Series) -> np.ndarray:
    """``input_shapes`` (list of lists of ints) as strings such as ``"[[2, 3], []]"``."""
    outer = pa.array(shapes, type=pa.list_(pa.list_(pa.int64())), from_pandas=True)
    inner = outer.flatten()
    dims = pa.ListArray.from_arrays(inner.offsets, pc.cast(inner.flatten(), pa.string()))
    inner_text = pc.binary_join_element_wise("[", pc.binary_join(dims, ", "), "]", "")
    listed = pa.ListArray.from_arrays(outer.offsets, inner_text)
    text = pc.binary_join_element_wise("[", pc.binary_join(listed, ", "), "]", "")
    return np.asarray(pc.if_else(outer.is_null(), "", text).to_numpy(zero_copy_only=False))


def _stack_keys(stacks: pd.Series, n: int) -> np.ndarray:
    """The innermost `n` frames of each ``stack``, outermost first, joined by ``"; "``."""
    listed = pa.array(stacks, type=pa.list_(pa.string()), from_pandas=True)
    offsets = listed.offsets.to_numpy()
    ends = offsets[1:]
    begins = np.maximum(offsets[:-1], ends - n)
    lengths = ends - begins
    new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    take = np.repeat(begins - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    tails = pa.ListArray.from_arrays(new_offsets, listed.values.take(pa.array(take)))
    return np.asarray(pc.binary_join(tails, "; ").fill_null("").to_numpy(zero_copy_only=False))


def render_text(
    summary: pd.DataFrame,
    keys: Sequence[str],
    total_ns: int,
    max_name_width: int = 55,
    groups: int | None = None,
) -> str:
    """A fixed-width text table of `summary` (keys as columns) with human units.

    `total_ns` is the footer's self-time total (the whole frame's, also when `summary` holds
    only the top rows); `groups`, the number of groups before the top rows were taken, adds
    a line "N more names" when rows were cut. Control characters in keys are shown escaped:
    names are data, and must not drive the terminal that prints them.
    """
    if max_name_width < 1:
        raise RecfnValueError(f"max_name_width must be >= 1, got {max_name_width}")
    columns: list[tuple[str, list[str]]] = []
    for key in keys:
        values = [printable(v) for v in summary[key].astype(str).tolist()]
        columns.append((key.replace("_", " ").title(), [_clip(v, max_name_width) for v in values]))
    formats = [
        ("Self %", "self_pct", _pct),
        ("Self", "self_ns", format_ns),
        ("Total %", "total_pct", _pct),
        ("Total", "total_ns", format_ns),
        ("Mean", "mean_ns", format_ns),
        ("Min", "min_ns", format_ns),
        ("Max", "max_ns", format_ns),
        ("Calls", "count", lambda v: f"{int(v)}"),
        ("GPU Self", "device_self_ns", format_ns),
        ("GPU Total", "device_total_ns", format_ns),
        ("GPU Mean", "device_mean_ns", format_ns),
        ("GPU Calls", "device_count", lambda v: f"{int(v)}"),
        ("Device", "device", lambda v: printable(str(v)) or "-"),
        ("Alloc", "allocated_bytes", format_bytes),
        ("Freed", "freed_bytes", format_bytes),
        ("Net Mem", "total_memory_bytes", format_bytes),
        ("Self Net Mem", "self_memory_bytes", format_bytes),
        ("FLOPs", "flops", format_count),
    ]
    for title, column, fmt in formats:
        if column in summary.columns:
            cells = [fmt(v) for v in summary[column].tolist()]
            columns.append((title, without_gpu_time(summary, column, cells)))
    widths = [max([len(title), *map(len, values)]) for title, values in columns]
    rule = "  ".join("-" * w for w in widths)

    def line(cells: Sequence[str]) -> str:
        first = [cells[i].ljust(widths[i]) for i in range(len(keys))]
        rest = [cells[i].rjust(widths[i]) for i in range(len(keys), len(cells))]
        return "  ".join(first + rest).rstrip()

    body = [line([values[row] for _, values in columns]) for row in range(len(summary))]
    if groups is not None and groups > len(summary):
        noun = "name" if list(keys) == ["name"] else "group"
        more = groups - len(summary)
        body.append(f"... {more:,} more {noun}{'s' if more > 1 else ''}")
    header = line([title for title, _ in columns])
    return "\n".join([rule, header, rule, *body, rule, f"Self time total: {format_ns(total_ns)}"])


GPU_TIME_COLUMNS = ("device_self_ns", "device_total_ns", "device_count")
"""Summary columns shown as "-" for a name no range of which was timed on a GPU: it has no GPU
time, rather than 0 ns of it."""


def without_gpu_time(summary: pd.DataFrame, column: str, cells: list[str]) -> list[str]:
    """`cells`, the text of `summary`'s `column`, with "-" on the rows of names never timed on
    a GPU where `column` is one of `GPU_TIME_COLUMNS` (the text table's and the notebook's)."""
    if column not in GPU_TIME_COLUMNS or "device_count" not in summary.columns:
        return cells
    untimed = (summary["device_count"] == 0).tolist()
    return ["-" if none else cell for cell, none in zip(cells, untimed)]


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _pct(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.2f}%"


PARTIAL_COLUMNS = ("count", "total_ns", "self_ns", "min_ns", "max_ns", "duration_ns")
"""The statistics of a partial summary (one process's, out of core or on Dask) that add up:
summed, but ``min_ns``/``max_ns`` taken per group (``add_partials``)."""


def add_partials(
    parts: pd.DataFrame,
    keys: list[str],
    extra: list[str],
    total: int,
    sort_by: str,
    top: int | None,
    as_index: bool,
    wall: int,
) -> pd.DataFrame:
    """The summary of partial summaries added up (per process, out of core or on Dask): their
    ``count``, ``total_ns``, ``self_ns``, ``duration_ns`` and `extra` summed, ``min_ns`` and
    ``max_ns`` taken per group, laid out as ``summary()`` lays it out: ``total_pct`` of the
    ``wall`` time (the whole trace's, see `range_span`), ``self_pct`` of the self-time
    ``total``, columns, order, ``top``, index, ``attrs["self_total_ns"]`` and
    ``attrs["wall_ns"]``."""
    sums = ["count", "total_ns", "self_ns", "duration_ns", *extra]
    if _has_duplicates(parts, keys):
        grouped = parts.groupby(keys, sort=False, dropna=False)
        result = grouped[sums].sum()
        result["min_ns"] = grouped["min_ns"].min()
        result["max_ns"] = grouped["max_ns"].max()
        result = result.reset_index()
    else:
        result = parts
    ordered = [*keys, *STAT_COLUMNS, *extra]
    if sort_by not in ordered:
        raise RecfnValueError(f"sort_by={sort_by!r} is not a summary column; choose from {ordered}")
    # One frame made at the end: each column set on a small frame costs more than its values.
    arrays = {name: result[name].array for name in [*ordered, "duration_ns"] if name in result}
    duration, count, total_ns, self_ns = (
        arrays[name].to_numpy(dtype=np.float64, na_value=np.nan)
        for name in ("duration_ns", "count", "total_ns", "self_ns")
    )
    columns = {name: arrays[name] for name in ordered if name in arrays}
    columns["mean_ns"] = duration / np.clip(count, 1, None)
    columns["total_pct"] = 100.0 * total_ns / wall if wall else np.full(len(result), np.nan)
    columns["self_pct"] = 100.0 * self_ns / total if total else np.full(len(result), np.nan)
    order = _distinct_order(columns[sort_by], descending=sort_by not in keys)
    if order is None:  # ties or missing values: pandas breaks them by the keys
        result = pd.DataFrame({name: columns[name] for name in ordered}, copy=False)
        result = result.sort_values(
            [sort_by, *keys], ascending=[sort_by in keys, *[True] * len(keys)], kind="stable"
        )
        if top is not None:
            result = result.head(top)
        result = result.reset_index(drop=True)
        result = result.set_index(keys) if as_index else result
    else:
        order = order[:top] if top is not None else order
        taken = {name: _take(columns[name], order) for name in ordered}
        index: pd.Index = pd.RangeIndex(len(order))
        if as_index:
            levels = [taken.pop(key) for key in keys]
            index = (
                pd.Index(levels[0], name=keys[0])
                if len(keys) == 1
                else pd.MultiIndex.from_arrays(levels, names=keys)
            )
        result = pd.DataFrame(taken, index=index, copy=False)
    mark_summary(result, total, wall)
    return result


def _has_duplicates(parts: pd.DataFrame, keys: list[str]) -> bool:
    """Whether two rows of `parts` have the same `keys` (partials of one group to add up)."""
    if len(parts) < 2:
        return False
    if len(keys) == 1:
        return not parts[keys[0]].is_unique
    return bool(parts.duplicated(keys).any())


def _distinct_order(values: Any, descending: bool) -> Optional[np.ndarray]:
    """The positions of `values` sorted (largest first when `descending`) when they are
    numbers with no two equal and none missing, else None: then the order is the values' alone,
    and the sort needs none of pandas' tie-breaking by the group keys (a small summary's sort
    cost more than its sums)."""
    if not isinstance(values, np.ndarray):
        if not pd.api.types.is_numeric_dtype(values.dtype) or values.isna().any():
            return None
        values = values.to_numpy()
    if values.dtype.kind not in "iuf" or (values.dtype.kind == "f" and np.isnan(values).any()):
        return None
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    if ordered.size > 1 and not (ordered[1:] != ordered[:-1]).all():
        return None
    return order[::-1] if descending else order


def _take(values: Any, order: np.ndarray) -> Any:
    """`values` (a numpy or pandas array) at the positions `order`, as pandas takes them."""
    return values[order] if isinstance(values, np.ndarray) else values.take(order)


def check_top(top: object) -> None:
    """A summary's ``top``: None (every group) or an int >= 0; RecfnTypeError or
    RecfnValueError naming it otherwise."""
    if top is None:
        return
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)):
        raise RecfnTypeError(f"top must be an int or None, got {type(top).__name__}")
    if top < 0:
        raise RecfnValueError(f"top must be >= 0, got {top}")
