"""Helpers that read the event table's columns as numpy arrays, for the accessor.

Frames reach analysis from several places: ``prof.to_pandas()`` (category + ``Int64``),
``pd.read_parquet`` (nullable ints as ``float64`` with NaN) and hand-built frames (plain
``int64``, ``str``). The helpers here (and those of ``recfn.formats.columns``, re-exported) hide those
differences so that the rest of the package works on plain numpy arrays. The columns themselves
are defined by ``recfn.formats.schema``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from recfn.errors import MissingColumnsError, RecfnTypeError, RecfnValueError
from recfn.formats.columns import INT64_MAX, equals, ints, nulls, require
from recfn.formats.schema import MARK, MEMORY, RANGE, column_names

__all__ = [
    "INT64_MAX",
    "MARK",
    "MEMORY",
    "RANGE",
    "GpuSpans",
    "MissingColumnsError",
    "codes",
    "equals",
    "gpu_spans",
    "ints",
    "isin",
    "nulls",
    "process_groups",
    "require",
    "thread_groups",
    "thread_mask",
]


def group_keys(by: str | Sequence[str], what: str) -> list[str]:
    """The columns a grouping (``by``: one column name or several) names, for `what` (named in
    the errors): RecfnTypeError for anything but a str or a sequence of them, RecfnValueError
    for none."""
    keys = [by] if isinstance(by, str) else None if isinstance(by, dict) else column_names(by)
    if keys is None:
        raise RecfnTypeError(f"{what}: by must be a column name or a list of them, got {by!r}")
    if not keys:
        raise RecfnValueError(f"{what} needs at least one column to group by")
    return keys


def check_number(
    value: object, name: str, what: str, *, fraction: bool = False, optional: bool = True
) -> None:
    """RecfnTypeError naming ``value``, an option of `what` named ``name``, unless it is an
    int, or with ``fraction`` any real number (``min_duration_ns=1e6``), or None where
    ``optional``; a bool is none."""
    allowed = (int, np.integer, float, np.floating) if fraction else (int, np.integer)
    if (value is None and optional) or (isinstance(value, allowed) and not isinstance(value, bool)):
        return
    kind = "a number" if fraction else "an int"
    raise RecfnTypeError(
        f"{what}: {name} must be {kind}{' or None' if optional else ''}, got {value!r}"
    )


def isin(series: pd.Series, values: Iterable[object]) -> np.ndarray:
    """Boolean numpy mask (writable) of ``series.isin(values)``."""
    return np.array(series.isin(list(values)).to_numpy(dtype=bool, na_value=False))


def codes(series: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Integer codes (-1 for null) and the distinct values of a category or string column."""
    values = series.array
    if isinstance(values, pd.Categorical):
        return values.codes.astype(np.int64), values.categories
    found, uniques = pd.factorize(series)
    return found.astype(np.int64, copy=False), pd.Index(uniques)


class GpuSpans(NamedTuple):
    """The GPU span of each row: `timed` marks the rows that have one, `start`/`end` bound it
    (on other rows `end` equals `start`)."""

    timed: np.ndarray
    start: np.ndarray
    end: np.ndarray


def gpu_spans(df: pd.DataFrame, candidates: np.ndarray) -> GpuSpans:
    """The GPU spans (``device_start_ns`` + ``device_duration_ns``, from
    ``profile(cuda=True)``) of the `candidates` rows that have both columns set; none when the
    frame lacks them. The one reading of GPU time, for the summary and the timeline alike."""
    n = len(df)
    if "device_start_ns" not in df.columns or "device_duration_ns" not in df.columns:
        empty = np.zeros(n, dtype=np.int64)
        return GpuSpans(np.zeros(n, dtype=bool), empty, empty)
    timed = candidates & ~nulls(df["device_start_ns"]) & ~nulls(df["device_duration_ns"])
    start = ints(df["device_start_ns"], 0)
    return GpuSpans(timed, start, start + np.where(timed, ints(df["device_duration_ns"], 0), 0))


def process_groups(df: pd.DataFrame) -> np.ndarray | None:
    """One integer per row identifying its process, ``(host, pid)``; None when the frame holds
    a single process (or says nothing about processes). A null host or pid is a value of its
    own, as in ``recfn.formats.schema.process_rows``."""
    keys = [ints(df["pid"], -1), nulls(df["pid"])] if "pid" in df.columns else []
    if "host" in df.columns:
        keys.append(codes(df["host"])[0])
    if not keys or all((key == key[0]).all() for key in keys if key.size):
        return None  # one process: nothing to factorize
    combined = _combine(keys)
    return combined if combined.size and combined.max() > 0 else None


def thread_groups(df: pd.DataFrame) -> np.ndarray:
    """One integer per row identifying its thread across a fleet: ``(host, pid, thread_id)``."""
    thread = ints(df["thread_id"], -1)
    process = process_groups(df)
    return thread if process is None else _combine([process, thread])


def _combine(keys: list[np.ndarray]) -> np.ndarray:
    """Dense codes (0, 1, ...) of the distinct tuples of `keys`, in order of first appearance."""
    combined = np.zeros(len(keys[0]), dtype=np.int64)
    for key in keys:
        found, uniques = pd.factorize(key)
        combined = combined * max(len(uniques), 1) + found
        combined = pd.factorize(combined)[0].astype(np.int64)
    return combined


def as_threads(thread: int | str | Iterable[int | str], what: str) -> list[int | str]:
    """A ``thread=`` argument of `what` (one id or name, or a collection of them) as a list;
    RecfnTypeError naming anything else."""
    found = [thread] if isinstance(thread, int | np.integer | str) else thread
    if isinstance(found, Iterable) and not isinstance(found, bytes | dict):
        found = list(found)
        if all(isinstance(t, int | np.integer | str) and not isinstance(t, bool) for t in found):
            return found
    raise RecfnTypeError(
        f"{what}: thread must be a thread id (int), a thread name (str) or a list of them, "
        f"got {thread!r}"
    )


def thread_mask(df: pd.DataFrame, threads: Iterable[int | str]) -> np.ndarray:
    """Rows whose ``thread_id`` (for ints) or ``thread_name`` (for strings) is in `threads`."""
    wanted = list(threads)
    names = [t for t in wanted if isinstance(t, str)]
    require(df, ("thread_id", *(["thread_name"] if names else [])), "selecting threads")
    mask = isin(df["thread_id"], [t for t in wanted if not isinstance(t, str)])
    if names:
        mask |= isin(df["thread_name"], names)
    return mask
