"""Helpers that read the event table's columns as numpy arrays, for the accessor.

Frames reach analysis from several places: ``prof.to_pandas()`` (category + ``Int64``),
``pd.read_parquet`` (nullable ints as ``float64`` with NaN) and hand-built frames (plain
``int64``, ``str``). The helpers here (and those of ``recfn.formats.columns``, re-exported) hide those
differences so that the rest of the package works on plain numpy arrays; `EventColumns` reads
the same arrays from a frame or straight from an Arrow event table (the notebook's picture
draws a captured table without converting it to pandas). The columns themselves are defined by
``recfn.formats.schema``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Optional, Union

import numpy as np
import pandas as pd
import pyarrow as pa

from recfn.errors import MissingColumnsError, RecfnTypeError, RecfnValueError
from recfn.formats.columns import INT64_MAX, equals, ints, nulls, require
from recfn.formats.schema import MARK, MEMORY, RANGE, column_names

__all__ = [
    "INT64_MAX",
    "MARK",
    "MEMORY",
    "RANGE",
    "EventColumns",
    "FrameColumns",
    "GpuSpans",
    "MissingColumnsError",
    "TableColumns",
    "codes",
    "equals",
    "event_columns",
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


def gpu_spans(df: Events, candidates: np.ndarray) -> GpuSpans:
    """The GPU spans (``device_start_ns`` + ``device_duration_ns``, from
    ``profile(cuda=True)``) of the `candidates` rows that have both columns set; none when the
    frame lacks them. The one reading of GPU time, for the summary and the timeline alike."""
    columns = event_columns(df)
    n = len(columns)
    if not columns.has("device_start_ns") or not columns.has("device_duration_ns"):
        empty = np.zeros(n, dtype=np.int64)
        return GpuSpans(np.zeros(n, dtype=bool), empty, empty)
    timed = candidates & ~columns.nulls("device_start_ns") & ~columns.nulls("device_duration_ns")
    start = columns.ints("device_start_ns", 0)
    duration = columns.ints("device_duration_ns", 0)
    return GpuSpans(timed, start, start + np.where(timed, duration, 0))


def process_groups(df: Events) -> np.ndarray | None:
    """One integer per row identifying its process, ``(host, pid)``; None when the frame holds
    a single process (or says nothing about processes). A null host or pid is a value of its
    own, as in ``recfn.formats.schema.process_rows``."""
    columns = event_columns(df)
    keys = [columns.ints("pid", -1), columns.nulls("pid")] if columns.has("pid") else []
    if columns.has("host"):
        keys.append(columns.codes("host")[0])
    if not keys or all((key == key[0]).all() for key in keys if key.size):
        return None  # one process: nothing to factorize
    combined = _combine(keys)
    return combined if combined.size and combined.max() > 0 else None


def thread_groups(df: Events) -> np.ndarray:
    """One integer per row identifying its thread across a fleet: ``(host, pid, thread_id)``."""
    columns = event_columns(df)
    thread = columns.ints("thread_id", -1)
    process = process_groups(columns)
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


def thread_mask(df: Events, threads: Iterable[int | str]) -> np.ndarray:
    """Rows whose ``thread_id`` (for ints) or ``thread_name`` (for strings) is in `threads`."""
    wanted = list(threads)
    names = [t for t in wanted if isinstance(t, str)]
    columns = event_columns(df)
    require(columns, ("thread_id", *(["thread_name"] if names else [])), "selecting threads")
    mask = columns.isin("thread_id", [t for t in wanted if not isinstance(t, str)])
    if names:
        mask |= columns.isin("thread_name", names)
    return mask


class EventColumns:
    """The event table's columns as numpy arrays, each column read once: what the call tree,
    the lanes, the colours and the timeline's chart read, from a DataFrame (`FrameColumns`) or
    straight from a ``pyarrow.Table`` (`TableColumns`: the notebook's picture draws a captured
    table without a pandas frame). Both give the same arrays for a table and its
    ``to_pandas()`` frame (tests/analysis/test_event_columns.py). ``columns`` lists the column
    names, ``attrs`` the frame's attrs (a table's metadata as ``to_pandas`` puts it there)."""

    def __init__(self, columns: list[str], attrs: dict[str, Any], rows: int) -> None:
        self.columns = columns
        self.attrs = attrs
        self._names = set(columns)
        self._rows = rows
        self._series: dict[str, pd.Series] = {}

    def __len__(self) -> int:
        return self._rows

    def has(self, name: str) -> bool:
        return name in self._names

    def series(self, name: str) -> pd.Series:
        """The column as the frame holds it (made once)."""
        found = self._series.get(name)
        if found is None:
            found = self._series[name] = self._series_of(name)
        return found

    def _series_of(self, name: str) -> pd.Series:
        raise NotImplementedError

    def ints(self, name: str, null: int) -> np.ndarray:
        """`ints` of the column: int64, nulls replaced by `null` (a new, writable array)."""
        return ints(self.series(name), null)

    def nulls(self, name: str) -> np.ndarray:
        return nulls(self.series(name))

    def equals(self, name: str, value: object) -> np.ndarray:
        return equals(self.series(name), value)

    def isin(self, name: str, values: Iterable[object]) -> np.ndarray:
        return isin(self.series(name), values)

    def codes(self, name: str) -> tuple[np.ndarray, Sequence[Any]]:
        """`codes` of the column: int64 codes (-1 for null) and the distinct values."""
        return codes(self.series(name))

    def objects(self, name: str, rows: Optional[np.ndarray] = None) -> np.ndarray:
        """The values (of `rows` alone, positions) as Python objects, nulls as pandas gives
        them (NaN, or ``pd.NA`` for nullable ints)."""
        series = self.series(name)
        if rows is None:
            return np.asarray(series.astype(object).to_numpy())
        return np.asarray(series.take(rows).to_numpy(dtype=object))


class FrameColumns(EventColumns):
    """`EventColumns` of a DataFrame (its columns read without its ``attrs``: pandas
    deep-copies a frame's attrs, recfn's metadata, into every column it hands out)."""

    def __init__(self, df: pd.DataFrame) -> None:
        super().__init__(list(df.columns), df.attrs, len(df))
        self._frame = df
        if df.attrs:
            self._frame = df.copy(deep=False)
            self._frame.attrs = {}

    def _series_of(self, name: str) -> pd.Series:
        return self._frame[name]


class TableColumns(EventColumns):
    """`EventColumns` of a ``pyarrow.Table``: int64 columns and the dictionary columns pandas
    takes as they are (``schema.categorical_parts``) are read from Arrow's memory; any other
    column is converted as ``to_pandas()`` converts it, alone, and read as a frame's."""

    def __init__(self, table: pa.Table) -> None:
        from recfn.formats.schema import metadata_of

        super().__init__(table.column_names, {"recfn": metadata_of(table)}, table.num_rows)
        self._table = table
        self._dictionaries: dict[str, Optional[tuple[np.ndarray, list[Any]]]] = {}

    def _series_of(self, name: str) -> pd.Series:
        from recfn.formats.schema import frame

        return frame(self._table.select([name]))[name]

    def _int64(self, name: str) -> Optional[pa.ChunkedArray]:
        column = self._table.column(name)
        return column if column.type == pa.int64() else None

    def _dictionary(self, name: str) -> Optional[tuple[np.ndarray, list[Any]]]:
        """The codes (int64, -1 for null) and values of a dictionary column that pandas makes
        a categorical of as it is (``schema.categorical_parts``); None for any other column."""
        if name not in self._dictionaries:
            from recfn.formats.schema import categorical_parts

            parts = categorical_parts(self._table.column(name))
            self._dictionaries[name] = None
            if parts is not None:
                dictionary, codes = parts
                self._dictionaries[name] = (codes.astype(np.int64), dictionary.to_pylist())
        return self._dictionaries[name]

    def ints(self, name: str, null: int) -> np.ndarray:
        column = self._int64(name)
        if column is None:
            return super().ints(name, null)
        values: np.ndarray = (column.fill_null(null) if column.null_count else column).to_numpy()
        return values if values.flags.writeable else values.copy()

    def nulls(self, name: str) -> np.ndarray:
        if self._int64(name) is None and self._dictionary(name) is None:
            return super().nulls(name)  # a float's NaN is null to pandas, not to Arrow
        from recfn.formats.schema import valid_flags

        return ~valid_flags(self._table.column(name))

    def equals(self, name: str, value: object) -> np.ndarray:
        found = self._dictionary(name)
        if found is None:
            return super().equals(name, value)
        codes, values = found
        if not isinstance(value, str) or value not in values:
            return np.zeros(len(self), dtype=bool)
        return np.asarray(codes == values.index(value))

    def codes(self, name: str) -> tuple[np.ndarray, Sequence[Any]]:
        found = self._dictionary(name)
        if found is None:
            return super().codes(name)
        return found[0].copy(), found[1]

    def objects(self, name: str, rows: Optional[np.ndarray] = None) -> np.ndarray:
        found = self._dictionary(name)
        if found is None:
            return super().objects(name, rows)
        codes, values = found
        lookup = np.empty(len(values) + 1, dtype=object)
        lookup[:-1] = values
        lookup[-1] = np.nan  # code -1, null: what a categorical gives
        picked: np.ndarray = lookup[codes if rows is None else codes[rows]]
        return picked


Events = Union[pd.DataFrame, EventColumns]
"""What the helpers here read: a frame, or the columns of one or of a table."""


def event_columns(data: Union[pd.DataFrame, pa.Table, EventColumns]) -> EventColumns:
    """`data`'s `EventColumns` (itself if it is one already)."""
    if isinstance(data, EventColumns):
        return data
    if isinstance(data, pa.Table):
        return TableColumns(data)
    return FrameColumns(data)
