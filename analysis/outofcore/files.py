"""Summaries of traces in Parquet files that need not fit in memory together.

Self time and the recursion rule need a range's parent and children, which live in its own
process (ids are unique per ``(host, pid)``). So the files are summarised one process at a
time: a process folder of a dataset (``process=<pid>/part-*.parquet``) or any other file is read
alone, only the columns the summary needs, split by process when it holds several, and
summarised with the in-memory summary's numpy kernels (``tree.self_durations``,
``tree.outermost``); the per-process sums are then added up. No global shuffle, no engine:
memory is that of the largest process, and two processes are summarised at once. A process's
files are read a row group at a time into compact arrays (int32 positions, dictionary codes,
the two timestamps), so that a 10M-event process stays well under 1 GB; each statistic is then
one pass of ``bincount`` or ``ufunc.at`` over the rows, with no sort by group.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recfn.analysis.columns import RANGE
from recfn.analysis.stats.runs import RunStats, group_stats, nested_self, stats_table
from recfn.analysis.stats.summary import PARTIAL_COLUMNS, PROFILER_SPAN_SCOPES, add_partials
from recfn.analysis.stats.tree import (
    Nodes,
    linked_parents,
    outermost,
    parents_come_first,
    self_durations,
)
from recfn.errors import RecfnValueError, TraceFormatError
from recfn.formats.dataset import Footers, in_process_folder
from recfn.formats.schema import not_a_trace, process_rows

EVENT_COLUMNS = ("id", "parent_id", "kind", "scope", "start_ns", "end_ns")
"""The columns every summary reads, besides its keys (and ``flops`` when present)."""


def supports(files: Sequence[str], options: dict[str, Any]) -> bool:
    """Whether ``summarize_files`` can compute the summary with these ``summary()`` options."""
    by = options.get("by", "name")
    keys = [by] if isinstance(by, str) else list(by)
    return (
        "name" in keys
        and set(options) <= {"by", "sort_by", "top", "as_index"}
        and all(f.lower().endswith((".parquet", ".pq")) for f in files)
    )


def partitions(files: Sequence[str]) -> list[list[str]]:
    """The files grouped so that each group holds whole processes: the parts in one process
    folder together, every other file alone."""
    groups: dict[str, list[str]] = {}
    for name in files:
        key = os.path.dirname(name) if in_process_folder(name) else name
        groups.setdefault(key, []).append(name)
    return list(groups.values())


def summarize_files(
    files: Sequence[str],
    by: str | Sequence[str] = "name",
    *,
    sort_by: str = "total_ns",
    top: int | None = None,
    as_index: bool = True,
    threads: int | None = None,
    footers: Footers | None = None,
) -> pd.DataFrame:
    """The summary of the events in Parquet ``files`` per group, as ``df.recfn.summary``.

    ``by`` must include ``name``; as in memory, a range nested in a range of its own group
    (recursion) counts in the count, mean, min and max but not again in the total; other keys
    may be any columns (``rank``, ``host``, ``pid``...). ``flops`` is summed when the
    files have it; the memory columns are left out. ``threads`` processes are summarised at
    once (default 2). ``attrs["self_total_ns"]`` holds the time the percentages divide by,
    ``attrs["events"]`` the number of closed ranges. ValueError for other groupings and for
    options that only the in-memory summary offers; TraceFormatError for a file that is not a
    trace, or whose ids or parents are broken. ``footers`` are the files' footers read so far
    (a trace's ``footers``), if any: each file's footer is read once.
    """
    from recfn.formats.progress import progress

    keys = [by] if isinstance(by, str) else list(by)
    if "name" not in keys:
        raise RecfnValueError("the out-of-core summary groups by name (plus any other columns)")
    if top is not None and top < 0:
        raise RecfnValueError(f"top must be >= 0, got {top}")
    if threads is not None and threads < 1:
        raise RecfnValueError(f"threads must be >= 1, got {threads}")
    if not files:
        raise RecfnValueError("no files to summarise")
    footers = Footers() if footers is None else footers
    present: set[str] = set()
    for name in files:
        names = footers.schema(name).names
        lacking = [c for c in EVENT_COLUMNS if c not in names]
        if lacking:
            raise not_a_trace(name, lacking)
        present.update(names)
    missing = [k for k in keys if k not in present]
    if missing:
        raise RecfnValueError(f"the files have no column(s) {missing}")
    flops = "flops" in present
    groups = partitions(files)
    with ThreadPoolExecutor(max_workers=min(threads or 2, len(groups))) as pool:
        found = list(
            progress(
                pool.map(lambda group: _summarize_partition(group, keys, flops, footers), groups),
                total=len(groups),
                desc="recfn: summarising",
            )
        )
    parts = [part for part, _ in found]
    total = sum(own for _, own in found)
    joined = pd.concat(parts, ignore_index=True)
    ranges = int(joined["count"].sum())
    result = add_partials(joined, keys, ["flops"] if flops else [], total, sort_by, top, as_index)
    result.attrs["events"] = ranges  # closed ranges summarised
    return result


def _summarize_partition(
    files: list[str], keys: list[str], flops: bool, footers: Footers
) -> tuple[pd.DataFrame, int]:
    """The summed statistics of the processes in ``files`` and their self-time total."""
    extra = ["flops"] if flops else []
    parts, total = [], 0
    for pieces, rows, where in _processes(files, [*EVENT_COLUMNS, *keys, *extra], footers):
        part, own = _summarize_process(pieces, rows, keys, extra, where)
        parts.append(part)
        total += own
    return pd.concat(parts, ignore_index=True), total


Pieces = Callable[[list[str]], Iterator[pa.Table]]
"""``pieces(columns)``: a process's rows, those columns, in pieces (a file's row groups)."""


def _processes(
    files: list[str], columns: list[str], footers: Footers
) -> Iterator[tuple[Pieces, int, str]]:
    """The processes in ``files`` (files that hold whole processes, `partitions`): for each,
    its `Pieces`, its number of rows and the name that errors give it. One process is read a
    row group at a time; files that mix processes are read (``columns``) and split."""
    parquets = [pq.ParquetFile(name, metadata=footers(name)) for name in files]
    where = files[0] if len(files) == 1 else os.path.dirname(files[0])
    if all(_one_value(parquets, c) for c in ("host", "pid")):  # one process: row group by group

        def pieces(columns: list[str]) -> Iterator[pa.Table]:
            return _row_groups(parquets, columns)

        yield pieces, sum(parquet.metadata.num_rows for parquet in parquets), where
        return
    table = _read(parquets, [*columns, "host", "pid"])
    found = process_rows(table)
    processes = [table] if found is None else [table.take(rows) for _, rows in found]
    del table, found
    while processes:
        process = processes.pop()

        def select(columns: list[str], process: pa.Table = process) -> Iterator[pa.Table]:
            yield process.select([c for c in dict.fromkeys(columns) if c in process.column_names])

        yield select, process.num_rows, where
        del process, select


def run_stats(
    files: Sequence[str],
    keys: list[str],
    *,
    label: str = "run",
    keep_calls: bool = False,
    footers: Footers | None = None,
) -> RunStats:
    """The statistics of one run (``recfn.analysis.stats.runs.RunStats``) from its Parquet
    ``files`` (one trace, or a dataset of several processes), out of core: one process at a
    time, only the columns needed, as `summarize_files` reads them. ``keys`` must include
    ``name``. ``keep_calls`` keeps every group's calls (comparisons over calls need them).
    TraceFormatError for a file that is not a trace; ValueError for a missing key column."""
    if "name" not in keys:
        raise RecfnValueError("the out-of-core statistics group by name (plus any other columns)")
    if not files:
        raise RecfnValueError("no files in the run")
    footers = Footers() if footers is None else footers
    present: set[str] = set()
    for name in files:
        names = footers.schema(name).names
        lacking = [c for c in EVENT_COLUMNS if c not in names]
        if lacking:
            raise not_a_trace(name, lacking)
        present.update(names)
    missing = [k for k in keys if k not in present]
    if missing:
        raise RecfnValueError(f"{label}: the files have no column(s) {missing}")
    lookup: dict[tuple[Any, ...], int] = {}
    codes, durations, owns, counts = [], [], [], []
    workload = 0
    for group in partitions(list(files)):
        for pieces, rows, where in _processes(group, [*EVENT_COLUMNS, *keys], footers):
            found = _process_rows(pieces, rows, keys, where, exact_self=False)
            mapping = np.array(
                [lookup.setdefault(key, len(lookup)) for key in found.groups], dtype=np.int64
            )
            if mapping.size and np.any(mapping != np.arange(mapping.size)):
                code = mapping[found.code]
            else:
                code = found.code.astype(np.int64)
            code[~found.closed] = -1  # group_stats leaves these rows out
            codes.append(code)
            durations.append(found.duration)
            owns.append(found.own)
            counts.append(found.counted)
            workload += found.total
            del found, code

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    columns, kept = group_stats(
        joined(codes), len(lookup), joined(durations), joined(owns), joined(counts), keep_calls
    )
    groups = list(lookup)
    table = stats_table(keys, groups, columns)
    calls = None
    if kept is not None:
        seen = np.flatnonzero(columns["calls"]).tolist()
        calls = {groups[g]: found_calls for g, found_calls in zip(seen, kept)}
    return RunStats(table, keys, workload, label=label, calls=calls)


def _row_groups(parquets: list[pq.ParquetFile], columns: list[str]) -> Iterator[pa.Table]:
    """``columns`` of the files (those each has), one row group at a time, in order."""
    for parquet in parquets:
        names = parquet.schema_arrow.names
        wanted = [c for c in dict.fromkeys(columns) if c in names]
        for group in range(parquet.metadata.num_row_groups):
            yield parquet.read_row_group(group, columns=wanted)


def _read(parquets: list[pq.ParquetFile], columns: list[str]) -> pa.Table:
    """``columns`` of the files (those they have) as one table."""
    tables = []
    for parquet in parquets:
        names = parquet.schema_arrow.names
        tables.append(parquet.read(columns=list(dict.fromkeys(c for c in columns if c in names))))
    return pa.concat_tables(tables, promote_options="default").unify_dictionaries()


def _one_value(parquets: list[pq.ParquetFile], column: str) -> bool:
    """Whether the files' statistics show one value, never null, in ``column`` (a file that
    lacks the column counts as all null)."""
    seen: set[Any] = set()
    for parquet in parquets:
        metadata = parquet.metadata
        found = [i for i in range(metadata.num_columns) if metadata.schema.column(i).name == column]
        if not found:
            return False
        for group in range(metadata.num_row_groups):
            stats = metadata.row_group(group).column(found[0]).statistics
            if stats is None or not stats.has_min_max or stats.null_count != 0:
                return False
            seen.update((stats.min, stats.max))
    return len(seen) <= 1


def _column(table: pa.Table, name: str) -> pa.Array | None:
    """A column as one array; None when the table lacks it (a file without it: all null)."""
    if name not in table.column_names:
        return None
    column = table.column(name)
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def _ints(array: pa.Array, fill: int) -> np.ndarray:
    if array.null_count:
        return np.where(_valid(array), _stored(array), fill)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.int64)


def _stored(array: pa.Array) -> np.ndarray:
    """An int64 array's values as stored, without a copy (whatever lies under its nulls)."""
    return np.frombuffer(
        array.buffers()[1], dtype=np.int64, count=len(array), offset=8 * array.offset
    )


def _valid(array: pa.Array) -> np.ndarray:
    if not array.null_count:
        return np.ones(len(array), dtype=bool)
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


class _Codes:
    """Integer codes (0, 1, ... in order of first appearance; null has one too) of a column's
    values, met a piece at a time: each piece's own dictionary is mapped onto the codes seen
    so far, so the codes stay those of the whole column."""

    def __init__(self) -> None:
        self.lookup: dict[Any, int] = {}

    @property
    def values(self) -> list[Any]:
        return list(self.lookup)

    def of(self, array: pa.Array | None, rows: int) -> np.ndarray:
        """The codes of ``array`` (of ``rows`` rows, all null when None)."""
        if array is None:
            return np.full(rows, self._code(None), dtype=np.int32)
        if not pa.types.is_dictionary(array.type):
            array = pc.dictionary_encode(array)
        mapping = [self._code(value) for value in array.dictionary.to_pylist()]
        indices = array.indices
        if indices.null_count:
            indices = pc.fill_null(indices, len(mapping))
            mapping.append(self._code(None))
        codes: np.ndarray = np.asarray(mapping, dtype=np.int32)
        found: np.ndarray = codes[np.asarray(indices.to_numpy(zero_copy_only=False))]
        return found

    def _code(self, value: Any) -> int:
        if value != value:  # NaN: one group, as pandas makes it
            value = _NAN
        return self.lookup.setdefault(value, len(self.lookup))


_NAN = float("nan")
"""The one NaN that stands for every NaN key value."""


def _is(array: pa.Array, wanted: Sequence[str]) -> np.ndarray:
    """Rows whose text ``array`` holds one of ``wanted``."""
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    hits = [i for i, value in enumerate(array.dictionary.to_pylist()) if value in wanted]
    found = np.zeros(len(array), dtype=bool)
    if hits:
        indices = np.asarray(array.indices.to_numpy(zero_copy_only=False))  # nulls: any value
        for hit in hits:
            found |= indices == hit
        if array.null_count:
            found &= _valid(array)
    return found


class _ProcessRows(NamedTuple):
    """One process's ranges as the statistics need them, one entry per row."""

    closed: np.ndarray
    duration: np.ndarray
    """``end - start`` of closed ranges (any value on other rows)."""
    own: np.ndarray
    """Self time of closed ranges, 0 on other rows."""
    code: np.ndarray
    """Group of each row (dense codes), whose key values are ``groups[code]``."""
    groups: list[tuple[Any, ...]]
    counted: np.ndarray
    """Whether a row counts in its group's total: no ancestor of its own group."""
    total: int
    """The self-time total, profiler spans left out (what percentages divide by)."""


def _process_rows(
    pieces: Pieces, n: int, keys: list[str], where: str, exact_self: bool = True
) -> _ProcessRows:
    """One process's `_ProcessRows`. ``pieces(columns)`` gives its ``n`` rows' columns in
    pieces (a file's row groups), read a few columns at a time into compact arrays, so that
    large processes hold only what each step needs: int32 positions, dictionary codes, one
    piece of Arrow data at a time. Self time is the summary's with `exact_self`, else
    ``runs.nested_self`` (no sort; the same unless children overlap)."""
    parent = _parents(pieces, n, where)
    start = np.empty(n, dtype=np.int64)
    end = np.empty(n, dtype=np.int64)  # what lies under nulls is never read: those rows are open
    closed = np.empty(n, dtype=bool)
    spans = [np.zeros(0, dtype=np.intp)]  # a file may have no row group at all
    at = 0
    for piece in pieces(["start_ns", "end_ns", "kind", "scope"]):
        rows = piece.num_rows
        start_column, end_column, kind, scope = (
            _column(piece, name) for name in ("start_ns", "end_ns", "kind", "scope")
        )
        assert start_column is not None and end_column is not None  # EVENT_COLUMNS
        assert kind is not None and scope is not None
        if start_column.null_count:
            raise TraceFormatError(f"{where}: a range has a null start_ns")
        start[at : at + rows] = _ints(start_column, 0)
        end[at : at + rows] = _stored(end_column)
        here = _is(kind, [RANGE])
        here &= _valid(end_column)
        closed[at : at + rows] = here
        spans.append(np.flatnonzero(_is(scope, PROFILER_SPAN_SCOPES)) + at)
        at += rows
    if np.any(closed & (end < start)):
        raise TraceFormatError(f"{where}: a range ends before it starts")
    forest = Nodes(parent, start, end, closed, ~closed)
    if not parents_come_first(parent, start):
        try:
            forest.depth  # noqa: B018 (computed to find cycles)
        except ValueError:
            raise TraceFormatError(f"{where}: parent_id contains a cycle") from None
    # Closed ranges under closed ranges are all that self time and nesting look at.
    linked = linked_parents(forest)
    del forest, parent
    if exact_self:
        own = self_durations(linked, start, end, closed)
        duration = np.subtract(end, start, out=end)
    else:
        duration = np.subtract(end, start, out=end)
        own = nested_self(linked, duration, closed)
    del start
    total = int(own.sum()) - int(own[np.concatenate(spans)].sum())  # own is 0 unless closed
    code, groups = _group_codes(pieces, n, keys)
    counted = outermost(linked, code)
    del linked
    return _ProcessRows(closed, duration, own, code, groups, counted, total)


def _summarize_process(
    pieces: Callable[[list[str]], Iterator[pa.Table]],
    n: int,
    keys: list[str],
    extra: list[str],
    where: str,
) -> tuple[pd.DataFrame, int]:
    """One process's statistics per group, in a form that adds up, and its self-time total
    (`_process_rows`, then one pass of ``bincount`` or ``ufunc.at`` per statistic)."""
    found = _process_rows(pieces, n, keys, where)
    closed, duration, own, code, groups, counted, total = found
    del found
    # Each closed range adds to its group's slot (code + 1); slot 0 gathers the other rows.
    slots = len(groups) + 1
    slot: np.ndarray = code.astype(np.int32 if slots < 2**31 else np.int64)
    del code
    slot += 1
    slot[~closed] = 0
    count = np.bincount(slot, minlength=slots)
    sums = {}
    for name, values_of in (("duration_ns", duration), ("self_ns", own)):
        sums[name] = np.zeros(slots, dtype=np.int64)
        np.add.at(sums[name], slot, values_of)
    del own
    low = np.full(slots, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(low, slot, duration)
    high = np.full(slots, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(high, slot, duration)
    duration[~counted] = 0
    del counted
    sums["total_ns"] = np.zeros(slots, dtype=np.int64)
    np.add.at(sums["total_ns"], slot, duration)
    del duration
    for name in extra:
        column = np.zeros(n, dtype=np.int64)
        at = 0
        for piece in pieces([name]):
            found_column = _column(piece, name)
            if found_column is not None:
                column[at : at + piece.num_rows] = _ints(found_column, 0)
            at += piece.num_rows
        sums[name] = np.zeros(slots, dtype=np.int64)
        np.add.at(sums[name], slot, column)
        del column
    seen = np.flatnonzero(count[1:])  # the groups that have closed ranges
    part = pd.DataFrame(
        {
            key: pd.Series([groups[g][i] for g in seen.tolist()], dtype=object)
            for i, key in enumerate(keys)
        }
    )
    if not len(seen):
        return _empty_part(part, extra), total
    seen += 1
    part["count"] = count[seen]
    for name in ("total_ns", "self_ns"):
        part[name] = sums[name][seen]
    part["min_ns"] = low[seen]
    part["max_ns"] = high[seen]
    for name in ("duration_ns", *extra):
        part[name] = sums[name][seen]
    return part, total


def _parents(pieces: Callable[[list[str]], Iterator[pa.Table]], n: int, where: str) -> Any:
    """Row positions of the parents (-1 for roots and parents not in the process's rows),
    int32 below 2**31 rows. Ids that count up from the first row's, as recorded, need no
    lookup: a parent's position is its id minus the first id."""
    parent = np.empty(n, dtype=np.int32 if n < 2**31 else np.int64)
    first: int | None = None
    at = 0
    for ids, parent_ids in _id_columns(pieces, where):
        rows = len(ids)
        if not rows:
            continue
        values = _ints(ids, 0)
        first = int(values[0]) if first is None else first
        if int(values[0]) != first + at or int(values[-1]) - int(values[0]) != rows - 1:
            return _looked_up(pieces, n, where)
        if not np.all(values[1:] > values[:-1]):
            return _looked_up(pieces, n, where)
        # As unsigned, id - first (wrapping) is at most n - 1 exactly for the ids of rows.
        offset = np.subtract(_stored(parent_ids), first)
        outside = offset.view(np.uint64) > min(n - 1, np.iinfo(np.int64).max - first)
        if parent_ids.null_count:
            outside |= ~_valid(parent_ids)
        here = parent[at : at + rows]
        np.copyto(here, offset, casting="unsafe")  # the int32 that every kept value fits
        here[outside] = -1
        at += rows
    return parent


def _id_columns(
    pieces: Callable[[list[str]], Iterator[pa.Table]], where: str
) -> Iterator[tuple[pa.Array, pa.Array]]:
    """Each piece's id and parent_id columns; TraceFormatError for a null id."""
    for piece in pieces(["id", "parent_id"]):
        ids, parent_ids = _column(piece, "id"), _column(piece, "parent_id")
        assert ids is not None and parent_ids is not None  # EVENT_COLUMNS
        if ids.null_count:
            raise TraceFormatError(f"{where}: a range has a null id")
        yield ids, parent_ids


def _looked_up(pieces: Callable[[list[str]], Iterator[pa.Table]], n: int, where: str) -> Any:
    """`_parents` for ids in any order: looked up in an index of all the process's ids."""
    ids = np.empty(n, dtype=np.int64)
    parent_ids = np.empty(n, dtype=np.int64)
    has_parent = np.empty(n, dtype=bool)
    at = 0
    for id_column, parent_column in _id_columns(pieces, where):
        rows = len(id_column)
        ids[at : at + rows] = _ints(id_column, 0)
        parent_ids[at : at + rows] = _stored(parent_column)
        has_parent[at : at + rows] = _valid(parent_column)
        at += rows
    parent = _positions(ids, parent_ids, has_parent, where)
    return parent.astype(np.int32) if n < 2**31 else parent


def _group_codes(
    pieces: Callable[[list[str]], Iterator[pa.Table]], n: int, keys: list[str]
) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Each row's group (dense codes, 0, 1, ... in order of first appearance) and each
    group's key values."""
    coders = [_Codes() for _ in keys]
    columns = [np.empty(n, dtype=np.int32) for _ in keys]
    at = 0
    for piece in pieces(keys):
        rows = piece.num_rows
        for key, coder, column in zip(keys, coders, columns):
            column[at : at + rows] = coder.of(_column(piece, key), rows)
        at += rows
    code = columns.pop(0)
    groups = [(value,) for value in coders[0].values]
    for coder, column in zip(coders[1:], columns):
        size = len(coder.lookup)
        combined = code.astype(np.int64)
        combined *= size
        combined += column
        encoded = pc.dictionary_encode(pa.array(combined))
        del combined
        code = np.asarray(encoded.indices.to_numpy(), dtype=np.int32)
        named = coder.values
        groups = [(*groups[p // size], named[p % size]) for p in encoded.dictionary.to_pylist()]
    for small in (np.int8, np.int16):  # outermost reads the codes once a level
        if len(groups) <= np.iinfo(small).max:
            return code.astype(small), groups
    return code, groups


def _empty_part(part: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    for name in (*PARTIAL_COLUMNS, *extra):
        part[name] = np.zeros(0, dtype=np.int64)
    return part


def _positions(ids: np.ndarray, parent_ids: np.ndarray, has_parent: np.ndarray, where: str) -> Any:
    """Row positions of the parents (-1 for roots and parents not in the process's rows)."""
    index = pd.Index(ids)
    if not index.is_unique:
        raise TraceFormatError(f"{where}: ids repeat within a process")
    parent = np.full(len(ids), -1, dtype=np.int64)
    wanted = np.flatnonzero(has_parent)
    parent[wanted] = index.get_indexer(parent_ids[wanted])
    return parent
