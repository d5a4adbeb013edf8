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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd

from recfn.analysis.columns import group_keys, require
from recfn.analysis.stats.summary import self_time_total
from recfn.analysis.stats.tree import linked_parents, nodes, outermost
from recfn.native import extension

CALL_QUANTILES: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75)
CALL_QUANTILE_COLUMNS: tuple[str, ...] = (
    "call_p10_ns",
    "call_q1_ns",
    "call_median_ns",
    "call_q3_ns",
)

LOW_TRIM: tuple[float, float] = (0.1, 0.5)
"""``call_low_mean_ns`` is the mean of the calls between these quantiles of their durations:
below the median, where preemption (which only adds time) reaches last, and with the fastest
tenth (a timer's jitter, a cached shortcut) left out; a mean of many calls varies less than
one quantile of them."""

RUN_COLUMNS: tuple[str, ...] = (
    "calls",
    "total_ns",
    "self_ns",
    *CALL_QUANTILE_COLUMNS,
    "call_low_mean_ns",
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
    span_ns: Optional[tuple[int, int]] = None
    """When the run ran: the earliest start and the latest end of its closed ranges (ns since
    the epoch); None without closed ranges. A comparison reads from the spans how the two
    sides' runs were recorded: one block after the other, or taking turns."""


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


def calls_part(
    keys: list[str],
    groups: Sequence[tuple[Any, ...]],
    code: np.ndarray,
    closed: np.ndarray,
    duration: np.ndarray,
    own: np.ndarray,
    counted: np.ndarray,
) -> pd.DataFrame:
    """The calls of one process per group: the key columns, then ``calls``, ``total_ns``
    (`counted` rows only: those outermost in their group), ``self_ns``, and the group's call
    ``durations`` and ``self_times`` (arrays, in no particular order). ``code`` gives each
    row's group (``groups[code]``); only `closed` rows are calls."""
    rows = np.flatnonzero(closed)
    code = code[rows]
    n_groups = len(groups)
    calls = np.bincount(code, minlength=n_groups)
    seen = np.flatnonzero(calls)
    part = pd.DataFrame(
        {
            key: pd.Series([groups[g][i] for g in seen.tolist()], dtype=object)
            for i, key in enumerate(keys)
        }
    )
    duration, own = duration[rows], own[rows]
    if n_groups <= np.iinfo(np.uint16).max:  # numpy sorts 16-bit keys by radix: linear time
        code = code.astype(np.uint8 if n_groups <= np.iinfo(np.uint8).max else np.uint16)
    order = np.argsort(code, kind="stable")
    starts = np.concatenate([[0], np.cumsum(calls[seen])[:-1]]).astype(np.int64)
    by_group = [values[order] for values in (duration, own, np.where(counted[rows], duration, 0))]
    del order
    part["calls"] = calls[seen].astype(np.int64)
    for name, values in (("total_ns", by_group[2]), ("self_ns", by_group[1])):
        part[name] = np.add.reduceat(values, starts) if len(seen) else np.zeros(0, np.int64)
    bounds = np.append(starts, len(rows)).tolist()
    return with_calls(part, by_group[0], by_group[1], bounds)


def with_calls(
    part: pd.DataFrame, durations: np.ndarray, self_times: np.ndarray, bounds: list[int]
) -> pd.DataFrame:
    """`part` (one row per group) with its groups' ``durations`` and ``self_times`` columns:
    group ``g``'s calls are ``values[bounds[g]:bounds[g + 1]]`` of the arrays given."""
    for name, values in (("durations", durations), ("self_times", self_times)):
        column = np.empty(len(part), dtype=object)
        for g in range(len(part)):
            column[g] = values[bounds[g] : bounds[g + 1]]
        part[name] = column
    return part


def calls_table(
    parts: pd.DataFrame, keys: list[str], keep_calls: bool = False
) -> tuple[pd.DataFrame, Optional[dict[tuple[Any, ...], Calls]]]:
    """A `RunStats.table` (and, with `keep_calls`, each group's `Calls`) from `calls_part`
    parts of one run, concatenated: a group found in several processes adds up."""
    if len(parts) and parts.duplicated(keys).any():
        grouped = parts.groupby(keys, sort=False, dropna=False)
        parts = grouped.agg(
            calls=("calls", "sum"),
            total_ns=("total_ns", "sum"),
            self_ns=("self_ns", "sum"),
            durations=("durations", lambda found: np.concatenate(list(found))),
            self_times=("self_times", lambda found: np.concatenate(list(found))),
        ).reset_index()
    table = parts[[*keys, "calls", "total_ns", "self_ns"]].reset_index(drop=True)
    quantiles = np.full((len(parts), len(CALL_QUANTILES)), np.nan)
    low_mean = np.full(len(parts), np.nan)
    self_median = np.full(len(parts), np.nan)
    kept: Optional[dict[tuple[Any, ...], Calls]] = {} if keep_calls else None
    group_keys = list(zip(*(parts[key].tolist() for key in keys)))
    for g, (times, selfs) in enumerate(zip(parts["durations"], parts["self_times"])):
        if kept is not None:
            times, selfs = np.sort(times), np.sort(selfs)
            kept[group_keys[g]] = Calls(times, selfs)
            quantiles[g] = sorted_quantiles(times, CALL_QUANTILES)
            self_median[g] = sorted_quantiles(selfs, (0.5,))[0]
            low_mean[g] = trimmed_mean(times, LOW_TRIM, is_sorted=True)
        else:
            quantiles[g], low_mean[g], self_median[g] = call_statistics(times, selfs)
    for i, name in enumerate(CALL_QUANTILE_COLUMNS):
        table[name] = quantiles[:, i]
    table["call_low_mean_ns"] = low_mean
    table["call_self_median_ns"] = self_median
    return table[[*keys, *RUN_COLUMNS]], kept


def call_statistics(
    durations: np.ndarray, self_times: np.ndarray
) -> tuple[np.ndarray, float, float]:
    """A group's `CALL_QUANTILES` of its call durations, their `LOW_TRIM` mean and the median
    of its calls' self times, from the calls in any order (both arrays non-empty; they may be
    reordered in place). The native order statistics where built (``_csummary.order_stats``:
    one selection, no copy), else numpy's partition: the same numbers (tests compare them)."""
    native = extension("_csummary")
    if native is not None and all(
        values.dtype == np.int64 and values.flags.writeable and values.flags.c_contiguous
        for values in (durations, self_times)
    ):
        *quantiles, low_mean = native.order_stats(durations, CALL_QUANTILES, LOW_TRIM)
        self_median = native.order_stats(self_times, (0.5,), None)[0]
        return np.array(quantiles), low_mean, self_median
    return (
        unsorted_quantiles(durations, CALL_QUANTILES),
        trimmed_mean(durations, LOW_TRIM),
        float(unsorted_quantiles(self_times, (0.5,))[0]),
    )


def trimmed_mean(
    values: np.ndarray, between: tuple[float, float], is_sorted: bool = False
) -> float:
    """The mean of the values whose ranks lie between the two quantiles (both ends kept; at
    least one value): their sum as integers (exact, as the durations summed everywhere else),
    divided by their number."""
    n = len(values)
    low = math.floor((n - 1) * between[0])
    high = max(math.ceil((n - 1) * between[1]), low)
    ordered = values if is_sorted else np.partition(values, [low, high])
    return float(np.sum(ordered[low : high + 1], dtype=np.int64)) / (high - low + 1)


def unsorted_quantiles(values: np.ndarray, at: Sequence[float]) -> np.ndarray:
    """`np.quantile(values, at)`, from one partial sort for all of them."""
    position = (len(values) - 1) * np.asarray(at, dtype=float)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, len(values) - 1)
    ordered = np.partition(values, np.unique(np.concatenate([low, high])))
    weight = position - low
    found: np.ndarray = ordered[low] * (1 - weight) + ordered[high] * weight
    return found


def sorted_quantiles(values: np.ndarray, at: Sequence[float]) -> np.ndarray:
    """`np.quantile(values, at)` of sorted values, without sorting them again."""
    position = (len(values) - 1) * np.asarray(at, dtype=float)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, len(values) - 1)
    weight = position - low
    found: np.ndarray = values[low] * (1 - weight) + values[high] * weight
    return found


def frame_stats(
    df: pd.DataFrame,
    by: str | Sequence[str] = "name",
    *,
    label: str = "run",
    keep_calls: bool = False,
) -> RunStats:
    """A run's `RunStats` from its event frame (in memory), grouped by the `by` column(s)."""
    keys = group_keys(by, "compare")
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
    part = calls_part(keys, groups, code, forest.closed, duration, own, counted)
    table, calls = calls_table(part, keys, keep_calls)
    version = df.attrs.get("recfn", {}).get("recfn.schema_version")
    return RunStats(
        table,
        keys,
        self_time_total(df, forest, own),
        label=label,
        calls=calls,
        schema_version=version,
        span_ns=closed_span(forest.start, forest.end, forest.closed),
    )


def closed_span(
    start: np.ndarray, end: np.ndarray, closed: np.ndarray
) -> Optional[tuple[int, int]]:
    """The earliest start and latest end of the closed ranges (`RunStats.span_ns`)."""
    if not closed.any():
        return None
    return int(start[closed].min()), int(end[closed].max())
