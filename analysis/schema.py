"""The recfn event table's columns (docs/schema.md) and helpers that read them as numpy arrays.

Frames reach analysis from several places: ``prof.to_pandas()`` (category + ``Int64``),
``pd.read_parquet`` (nullable ints as ``float64`` with NaN) and hand-built frames (plain
``int64``, ``str``). The helpers here hide those differences so that the rest of the package
works on plain numpy arrays.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

COLUMNS: tuple[str, ...] = (
    "id",
    "parent_id",
    "name",
    "kind",
    "scope",
    "start_ns",
    "end_ns",
    "thread_id",
    "thread_name",
    "depth",
    "sequence_nr",
    "fwd_thread_id",
    "is_async",
    "node_id",
    "pid",
)
"""Columns that every schema-v1 table has, in order."""

RANGE, MARK, MEMORY = "range", "mark", "memory"

INT64_MAX = np.iinfo(np.int64).max


class MissingColumnsError(AttributeError, ValueError):
    """The frame lacks columns that an operation needs.

    It subclasses both ``AttributeError`` (the pandas accessor convention) and ``ValueError``
    (bad input), so either ``except`` clause catches it.
    """


def require(df: pd.DataFrame, columns: Iterable[str], operation: str) -> None:
    """Raise `MissingColumnsError` naming every column of `columns` that `df` lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise MissingColumnsError(
            f"{operation} needs the recfn event-table column(s) {', '.join(map(repr, missing))}; "
            f"the frame has {', '.join(map(str, df.columns)) or 'no columns'} (see docs/schema.md)"
        )


def ints(series: pd.Series, null: int) -> np.ndarray:
    """`series` as int64 numpy, with nulls (pd.NA or NaN) replaced by `null`."""
    return np.asarray(series.to_numpy(dtype=np.int64, na_value=null), dtype=np.int64)


def nulls(series: pd.Series) -> np.ndarray:
    """Boolean numpy mask (writable) of the null entries of `series`."""
    return np.array(series.isna(), dtype=bool)


def equals(series: pd.Series, value: object) -> np.ndarray:
    """Boolean numpy mask (writable) of ``series == value``; null compares unequal."""
    return np.array((series == value).to_numpy(dtype=bool, na_value=False))


def isin(series: pd.Series, values: Iterable[object]) -> np.ndarray:
    """Boolean numpy mask (writable) of ``series.isin(values)``."""
    return np.array(series.isin(list(values)).to_numpy(dtype=bool, na_value=False))


def codes(series: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Integer codes (-1 for null) and the distinct values of a category or string column."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy(dtype=np.int64), series.cat.categories
    found, uniques = pd.factorize(series)
    return found.astype(np.int64, copy=False), pd.Index(uniques)


def thread_groups(df: pd.DataFrame) -> np.ndarray:
    """One integer per row identifying its thread: ``(pid, thread_id)`` when ``pid`` exists."""
    thread = ints(df["thread_id"], -1)
    if "pid" not in df.columns:
        return thread
    pid_codes, pids = pd.factorize(ints(df["pid"], -1))
    if len(pids) <= 1:
        return thread
    thread_codes, threads = pd.factorize(thread)
    combined = np.asarray(pid_codes, dtype=np.int64) * len(threads) + thread_codes
    return np.asarray(combined, dtype=np.int64)


def thread_mask(df: pd.DataFrame, threads: Iterable[int | str]) -> np.ndarray:
    """Rows whose ``thread_id`` (for ints) or ``thread_name`` (for strings) is in `threads`."""
    wanted = list(threads)
    names = [t for t in wanted if isinstance(t, str)]
    require(df, ("thread_id", *(["thread_name"] if names else [])), "selecting threads")
    mask = isin(df["thread_id"], [t for t in wanted if not isinstance(t, str)])
    if names:
        mask |= isin(df["thread_name"], names)
    return mask
