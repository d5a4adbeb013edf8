"""One run's statistics per group, as the comparison of runs needs them: the summary's count,
total and self time, plus the quartiles of each group's call durations (and the median of its
calls' self times), which stay put when the machine preempts a few calls.

A run is one capture of a workload (a trace, or a dataset of several processes). `RunStats`
holds its numbers per group; `compare` (``recfn.analysis.stats.compare``) turns two sets of
them into changes. The numbers come from per-range arrays (`group_stats`), computed from a
frame in memory here (`frame_stats`) or out of core from Parquet files
(``recfn.analysis.outofcore.files.run_stats``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd

from recfn.analysis.columns import require
from recfn.analysis.stats.summary import self_time_total
from recfn.analysis.stats.tree import linked_parents, nodes, outermost
from recfn.errors import RecfnValueError

RUN_COLUMNS: tuple[str, ...] = (
    "calls",
    "total_ns",
    "self_ns",
    "call_q1_ns",
    "call_median_ns",
    "call_q3_ns",
    "call_self_median_ns",
)
"""Columns of `RunStats.table` after the group keys: the summary's ``count`` (as ``calls``),
``total_ns`` (outermost ranges only, as in the summary) and ``self_ns``; the quartiles of the
group's call durations; the median of its calls' self times."""


@dataclass
class Calls:
    """Every call of one group in one run: durations and self times, each sorted."""

    durations: np.ndarray
    self_times: np.ndarray


@dataclass
class RunStats:
    """One run of a workload: its statistics per group and the time its ranges cover."""

    table: pd.DataFrame
    """The group keys as columns, then `RUN_COLUMNS`, one row per group with closed ranges."""
    keys: list[str]
    workload_ns: int
    """The self time of all the run's ranges (what the summary's percentages divide by)."""
    label: str = "run"
    calls: Optional[dict[tuple[Any, ...], Calls]] = None
    """Per group (its key values as a tuple), its calls, when they were kept."""
    schema_version: Optional[str] = None
    """The ``recfn.schema_version`` the run's files carry (None when they carry none)."""
    notes: list[str] = field(default_factory=list)


def nested_self(linked: np.ndarray, duration: np.ndarray, closed: np.ndarray) -> np.ndarray:
    """Each closed range's duration minus its direct children's (`linked`: parents among closed
    ranges, -1 for none), at least 0; 0 for other rows. That is the summary's self time
    (``tree.self_durations``) unless children overlap (gathered asyncio tasks), where the
    summary subtracts the union of their intervals; it needs no sort."""
    child = linked >= 0
    covered = np.bincount(linked[child], weights=duration[child], minlength=len(linked))
    own = np.where(closed, duration - covered, 0)
    own = np.rint(own).astype(np.int64)
    found: np.ndarray = np.maximum(own, 0, out=own)
    return found


def group_stats(
    code: np.ndarray,
    n_groups: int,
    duration: np.ndarray,
    own: np.ndarray,
    counted: np.ndarray,
    keep_calls: bool = False,
) -> tuple[dict[str, np.ndarray], Optional[list[Calls]]]:
    """Per group (codes ``0..n_groups-1`` of the closed ranges; -1 marks rows to leave out):
    `RUN_COLUMNS` as arrays of ``n_groups`` values, and each group's calls with `keep_calls`.
    `counted` marks the ranges that count in the total (outermost of their group)."""
    keep = code >= 0
    if not keep.all():
        code, duration, own, counted = code[keep], duration[keep], own[keep], counted[keep]
    calls = np.bincount(code, minlength=n_groups)
    total = np.bincount(code, weights=np.where(counted, duration, 0), minlength=n_groups)
    self_sum = np.bincount(code, weights=own, minlength=n_groups)
    if n_groups <= np.iinfo(np.uint16).max:  # numpy sorts 16-bit keys by radix: linear time
        code = code.astype(np.uint8 if n_groups <= np.iinfo(np.uint8).max else np.uint16)
    order = np.argsort(code, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(calls)])
    by_group = duration[order]
    own_by_group = own[order]
    del order
    quartiles = np.full((n_groups, 3), np.nan)
    self_median = np.full(n_groups, np.nan)
    kept: Optional[list[Calls]] = [] if keep_calls else None
    for g in np.flatnonzero(calls).tolist():
        lo, hi = int(bounds[g]), int(bounds[g + 1])
        times = by_group[lo:hi]
        selfs = own_by_group[lo:hi]
        if kept is not None:
            times, selfs = np.sort(times), np.sort(selfs)
            kept.append(Calls(times, selfs))
            quartiles[g] = _sorted_quartiles(times)
            self_median[g] = _sorted_quartiles(selfs)[1]
        else:
            quartiles[g] = np.percentile(times, (25, 50, 75))
            self_median[g] = np.median(selfs)
    columns = {
        "calls": calls.astype(np.int64),
        "total_ns": np.rint(total).astype(np.int64),
        "self_ns": np.rint(self_sum).astype(np.int64),
        "call_q1_ns": quartiles[:, 0],
        "call_median_ns": quartiles[:, 1],
        "call_q3_ns": quartiles[:, 2],
        "call_self_median_ns": self_median,
    }
    return columns, kept


def _sorted_quartiles(values: np.ndarray) -> np.ndarray:
    """`np.percentile(values, (25, 50, 75))` of sorted values, without sorting them again."""
    position = (len(values) - 1) * np.array([0.25, 0.5, 0.75])
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, len(values) - 1)
    weight = position - low
    found: np.ndarray = values[low] * (1 - weight) + values[high] * weight
    return found


def stats_table(
    keys: list[str], groups: Sequence[tuple[Any, ...]], columns: dict[str, np.ndarray]
) -> pd.DataFrame:
    """A `RunStats.table` from the groups' key values and `group_stats` columns (groups
    without calls left out)."""
    seen = np.flatnonzero(columns["calls"])
    table = pd.DataFrame(
        {
            key: pd.Series([groups[g][i] for g in seen.tolist()], dtype=object)
            for i, key in enumerate(keys)
        }
    )
    for name in RUN_COLUMNS:
        table[name] = columns[name][seen]
    return table


def frame_stats(
    df: pd.DataFrame,
    by: str | Sequence[str] = "name",
    *,
    label: str = "run",
    keep_calls: bool = False,
) -> RunStats:
    """A run's `RunStats` from its event frame (in memory), grouped by the `by` column(s)."""
    keys = [by] if isinstance(by, str) else list(by)
    if not keys:
        raise RecfnValueError("compare needs at least one column to group by")
    require(df, ["kind", "start_ns", "end_ns", *keys], "compare")
    forest = nodes(df, "compare")
    linked = linked_parents(forest)
    duration = forest.duration
    own = nested_self(linked, duration, forest.closed)
    rows = np.flatnonzero(forest.closed)
    code = np.full(len(df), -1, dtype=np.int64)
    if len(rows):
        picked = pd.DataFrame({key: df[key].array.take(rows) for key in keys})
        grouped = picked.groupby(keys, observed=True, sort=False, dropna=False)
        code[rows] = grouped.ngroup().to_numpy(dtype=np.int64)
        # With sort=False, ngroup numbers the groups in order of first appearance, as head(1)
        # lists their first rows.
        first = grouped.head(1)
        groups = list(zip(*(first[key].tolist() for key in keys)))
    else:
        groups = []
    counted = outermost(linked, code)
    columns, kept = group_stats(code, len(groups), duration, own, counted, keep_calls)
    table = stats_table(keys, groups, columns)
    calls = None
    if kept is not None:
        seen = np.flatnonzero(columns["calls"]).tolist()
        calls = {groups[g]: found for g, found in zip(seen, kept)}
    version = df.attrs.get("recfn", {}).get("recfn.schema_version")
    return RunStats(
        table,
        keys,
        self_time_total(df, forest, own),
        label=label,
        calls=calls,
        schema_version=version,
    )
