"""Per-name statistics of ranges, the analogue of torch's ``key_averages()``, and their text table."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .schema import MEMORY, RANGE, equals, ints, nulls, require
from .tree import parent_positions, self_durations, subtree_sums
from .units import format_bytes, format_count, format_ns

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
"""Columns of every summary, after the group keys."""


def summarize(
    df: pd.DataFrame,
    by: str | Sequence[str] = "name",
    sort_by: str = "total_ns",
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
    top: int | None = None,
) -> pd.DataFrame:
    """Statistics of the closed ranges of `df` per group; see `RecfnAccessor.summary`."""
    keys = [by] if isinstance(by, str) else list(by)
    if not keys:
        raise ValueError("summary needs at least one column to group by")
    extra = ["input_shapes"] * group_by_input_shape + ["stack"] * (group_by_stack_n > 0)
    require(df, ["kind", "start_ns", "end_ns", *keys, *extra], "summary")
    if group_by_stack_n < 0:
        raise ValueError("group_by_stack_n must be >= 0")

    is_range = equals(df["kind"], RANGE) & ~nulls(df["end_ns"])
    parent = parent_positions(df)
    start, end = ints(df["start_ns"], 0), ints(df["end_ns"], 0)
    duration = np.where(is_range, end - start, 0)
    own = self_durations(parent, start, end, is_range)
    rows = np.flatnonzero(is_range)

    work: dict[str, object] = {key: df[key].array.take(rows) for key in keys}
    if group_by_input_shape:
        work["input_shapes"] = _shape_keys(df["input_shapes"])[rows]
    if group_by_stack_n:
        work["stack"] = _stack_keys(df["stack"], group_by_stack_n)[rows]
    work["duration"] = duration[rows]
    work["own"] = own[rows]
    stats = {
        "count": ("duration", "size"),
        "total_ns": ("duration", "sum"),
        "self_ns": ("own", "sum"),
        "min_ns": ("duration", "min"),
        "max_ns": ("duration", "max"),
    }
    for column, values in _memory_columns(df, parent, is_range).items():
        work[column] = values[rows]
        stats[column] = (column, "sum")
    if "flops" in df.columns:
        work["flops"] = ints(df["flops"], 0)[rows]
        stats["flops"] = ("flops", "sum")

    group_keys = [*keys, *extra]
    result = (
        pd.DataFrame(work)
        .groupby(group_keys, observed=True, sort=False, dropna=False)
        .agg(**stats)
        .reset_index()
    )
    result["mean_ns"] = result["total_ns"] / result["count"].clip(lower=1)
    total = own[rows].sum()
    result["total_pct"] = 100.0 * result["total_ns"] / total if total else np.nan
    result["self_pct"] = 100.0 * result["self_ns"] / total if total else np.nan
    ordered = [*group_keys, *STAT_COLUMNS, *(c for c in stats if c not in STAT_COLUMNS)]
    result = result[ordered]

    if sort_by not in result.columns:
        raise ValueError(f"sort_by={sort_by!r} is not a summary column; choose from {ordered}")
    result = result.sort_values(sort_by, ascending=sort_by in group_keys, kind="stable")
    if top is not None:
        result = result.head(top)
    return result.reset_index(drop=True)


def _memory_columns(
    df: pd.DataFrame, parent: np.ndarray, is_range: np.ndarray
) -> dict[str, np.ndarray]:
    """Bytes allocated by each range's own memory events, and by its whole subtree."""
    if "memory_bytes" not in df.columns:
        return {}
    events = equals(df["kind"], MEMORY) & (parent >= 0)
    if not events.any():
        return {}
    own = np.bincount(
        parent[events], weights=ints(df["memory_bytes"], 0)[events], minlength=len(df)
    )
    own = np.rint(own).astype(np.int64)
    linked = is_range & (parent >= 0)
    linked[linked] = is_range[parent[linked]]
    return {
        "self_memory_bytes": own,
        "memory_bytes": subtree_sums(np.where(linked, parent, -1), own),
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


def render_table(
    summary: pd.DataFrame, keys: Sequence[str], total_ns: int, max_name_width: int = 55
) -> str:
    """A fixed-width text table of `summary` with human units, like torch's ``.table()``.

    `total_ns` is the footer's self-time total (the whole frame's, also when `summary` holds
    only the top rows).
    """
    columns: list[tuple[str, list[str]]] = []
    for key in keys:
        values = summary[key].astype(str).tolist()
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
        ("Self Mem", "self_memory_bytes", format_bytes),
        ("Mem", "memory_bytes", format_bytes),
        ("FLOPs", "flops", format_count),
    ]
    for title, column, fmt in formats:
        if column in summary.columns:
            columns.append((title, [fmt(v) for v in summary[column].tolist()]))
    widths = [max([len(title), *map(len, values)]) for title, values in columns]
    rule = "  ".join("-" * w for w in widths)

    def line(cells: Sequence[str]) -> str:
        first = [cells[i].ljust(widths[i]) for i in range(len(keys))]
        rest = [cells[i].rjust(widths[i]) for i in range(len(keys), len(cells))]
        return "  ".join(first + rest).rstrip()

    body = [line([values[row] for _, values in columns]) for row in range(len(summary))]
    header = line([title for title, _ in columns])
    return "\n".join([rule, header, rule, *body, rule, f"Self time total: {format_ns(total_ns)}"])


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _pct(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.2f}%"
