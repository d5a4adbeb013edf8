"""Summaries of traces in Parquet files that need not fit in memory together.

Self time and the recursion rule need a range's parent and children, which live in its own
process (ids are unique per ``(host, pid)``). So the files are summarised one process at a
time: a process folder of a dataset (``process=<pid>/part-*.parquet``) or any other file is read
alone, only the columns the summary needs, split by process when it holds several, and
summarised with the in-memory summary's numpy kernels (``tree.self_durations``,
``tree.outermost``); the per-process sums are then added up. No global shuffle, no engine:
memory is that of the largest process, and two processes are summarised at once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recfn.errors import TraceFormatError

from .schema import RANGE
from .summary import PARTIAL_COLUMNS, PROFILER_SPAN_SCOPES, add_partials
from .tree import Nodes, linked_parents, outermost, parents_come_first, self_durations

EVENT_COLUMNS = ("id", "parent_id", "kind", "scope", "start_ns", "end_ns")
"""The columns every summary reads, besides its keys (and ``flops`` when present)."""
PROCESS_FOLDER = "process="
"""Folders named so hold the parts of one process (``recfn._stream.process_folder``)."""


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
        folder = os.path.dirname(name)
        key = folder if os.path.basename(folder).startswith(PROCESS_FOLDER) else name
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
) -> pd.DataFrame:
    """The summary of the events in Parquet ``files`` per group, as ``df.recfn.summary``.

    ``by`` must include ``name``; as in memory, a range nested in a range of its own group
    (recursion) counts in the count, mean, min and max but not again in the total; other keys
    may be any columns (``rank``, ``host``, ``pid``...). ``flops`` is summed when the
    files have it; the memory columns are left out. ``threads`` processes are summarised at
    once (default 2). ``attrs["self_total_ns"]`` holds the time the percentages divide by,
    ``attrs["events"]`` the number of closed ranges. ValueError for other groupings and for
    options that only the in-memory summary offers; TraceFormatError for a file that is not a
    trace, or whose ids or parents are broken.
    """
    from recfn._progress import progress

    keys = [by] if isinstance(by, str) else list(by)
    if "name" not in keys:
        raise ValueError("the out-of-core summary groups by name (plus any other columns)")
    if top is not None and top < 0:
        raise ValueError(f"top must be >= 0, got {top}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if not files:
        raise ValueError("no files to summarise")
    present: set[str] = set()
    for name in files:
        names = _schema(name).names
        lacking = [c for c in EVENT_COLUMNS if c not in names]
        if lacking:
            raise TraceFormatError(f"{name}: not a recfn trace, it lacks column(s) {lacking}")
        present.update(names)
    missing = [k for k in keys if k not in present]
    if missing:
        raise ValueError(f"the files have no column(s) {missing}")
    flops = "flops" in present
    groups = partitions(files)
    with ThreadPoolExecutor(max_workers=min(threads or 2, len(groups))) as pool:
        found = list(
            progress(
                pool.map(lambda group: _summarize_partition(group, keys, flops), groups),
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


def _schema(name: str) -> pa.Schema:
    try:
        return pq.read_schema(name)
    except (OSError, pa.ArrowException) as exc:
        raise TraceFormatError(f"{name}: not a readable Parquet file ({exc})") from None


def _summarize_partition(
    files: list[str], keys: list[str], flops: bool
) -> tuple[pd.DataFrame, int]:
    """The summed statistics of the processes in ``files`` and their self-time total."""
    parquets = [pq.ParquetFile(name) for name in files]
    where = files[0] if len(files) == 1 else os.path.dirname(files[0])
    extra = ["flops"] if flops else []
    if all(_one_value(parquets, c) for c in ("host", "pid")):  # one process: columns as needed

        def read(columns: list[str]) -> pa.Table:
            return _read(parquets, columns)

        return _summarize_process(read, keys, extra, where)
    table = _read(parquets, [*EVENT_COLUMNS, *keys, "host", "pid", *extra])
    processes = _processes(table)
    del table
    parts, total = [], 0
    while processes:
        process = processes.pop()

        def select(columns: list[str], process: pa.Table = process) -> pa.Table:
            return process.select([c for c in columns if c in process.column_names])

        del process
        part, own = _summarize_process(select, keys, extra, where)
        parts.append(part)
        total += own
    return pd.concat(parts, ignore_index=True), total


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


def _processes(table: pa.Table) -> list[pa.Table]:
    """``table`` split into its processes (one table when it holds one, as usual)."""
    present = [c for c in ("host", "pid") if c in table.column_names]
    if table.num_rows == 0 or not present:
        return [table]
    distinct = table.select(present).group_by(present).aggregate([]).to_pylist()
    if len(distinct) <= 1:
        return [table]
    split = []
    for process in distinct:
        mask = None
        for name in present:
            column, value = table.column(name), process[name]
            same = pc.is_null(column) if value is None else pc.equal(column, value)
            same = pc.fill_null(same, False)
            mask = same if mask is None else pc.and_(mask, same)
        split.append(table.filter(mask))
    return split


def _column(table: pa.Table, name: str) -> pa.Array:
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


def _codes(table: pa.Table, name: str) -> tuple[np.ndarray, list[Any]]:
    """Integer codes of a column's values (0, 1, ...; nulls get one code too) and the values."""
    if name not in table.column_names:
        return np.zeros(table.num_rows, dtype=np.int8), [None]
    array = _column(table, name)
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    values = array.dictionary.to_pylist()
    indices = array.indices
    if indices.null_count:
        indices = pc.fill_null(indices, len(values))
        values.append(None)
    return np.asarray(indices.to_numpy(zero_copy_only=False)), values


def _is(table: pa.Table, name: str, wanted: Sequence[str]) -> np.ndarray:
    """Rows whose text column ``name`` holds one of ``wanted``."""
    found, values = _codes(table, name)
    hits = [i for i, value in enumerate(values) if value in wanted]
    result = np.zeros(table.num_rows, dtype=bool)
    for hit in hits:
        result |= found == hit
    return result


def _summarize_process(
    read: Callable[[list[str]], pa.Table], keys: list[str], extra: list[str], where: str
) -> tuple[pd.DataFrame, int]:
    """One process's statistics per group, in a form that adds up, and its self-time total.
    ``read(columns)`` gives its columns, a few at a time, so that large processes hold only
    what each step needs."""
    table = read(["id", "parent_id"])
    ids, parent_column = _column(table, "id"), _column(table, "parent_id")
    if ids.null_count:
        raise TraceFormatError(f"{where}: a range has a null id")
    parent = _positions(_ints(ids, 0), _stored(parent_column), _valid(parent_column), where)
    if len(parent) < 2**31:
        parent = parent.astype(np.int32)
    del table, ids, parent_column
    times = read(["start_ns", "end_ns", "kind"])
    start_column, end_column = _column(times, "start_ns"), _column(times, "end_ns")
    if start_column.null_count:
        raise TraceFormatError(f"{where}: a range has a null start_ns")
    start = _ints(start_column, 0)
    end = _stored(end_column)  # what lies under nulls is never read: those rows are not closed
    closed = _is(times, "kind", [RANGE]) & _valid(end_column)
    if np.any(closed & (end < start)):
        raise TraceFormatError(f"{where}: a range ends before it starts")
    forest = Nodes(parent, start, end, closed, ~closed)
    if not parents_come_first(parent, start):
        try:
            forest.depth  # noqa: B018 (computed to find cycles)
        except ValueError:
            raise TraceFormatError(f"{where}: parent_id contains a cycle") from None
    table = read(keys)
    positions = np.int32 if len(parent) < 2**31 else np.int64
    rows = np.flatnonzero(closed).astype(positions)
    code = np.zeros(len(rows), dtype=np.int64)
    key_codes = []
    for key in keys:
        found, values = _codes(table, key)
        key_codes.append((found, values))
        code = code * len(values) + found[rows]
        if code.size and int(code.max()) > len(rows):  # keep the codes dense
            code = np.asarray(
                pc.dictionary_encode(pa.array(code)).indices.to_numpy(), dtype=np.int64
            )
    del table
    if code.size and int(code.max()) < 2**31:
        code = code.astype(np.int32)
    group = np.full(len(parent), -1, dtype=code.dtype)
    group[rows] = code
    counted = outermost(linked_parents(forest), group)
    del group
    own = self_durations(parent, start, end, closed)
    spans = _is(read(["scope"]), "scope", PROFILER_SPAN_SCOPES)
    total = int(own[closed & ~spans].sum())
    del spans
    # Rows grouped (a stable sort: each group's first row first), then each statistic reduced.
    small = code.astype(np.int16) if code.size and int(code.max()) < 2**15 else code
    order = np.argsort(small, kind="stable")  # a radix sort for int16 codes
    del small
    grouped = code[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if code.size else order
    del grouped
    rows = rows[order]
    del order, code
    first = rows[starts]
    part = pd.DataFrame(
        {
            key: pd.Series([values[i] for i in found[first]], dtype=object)
            for key, (found, values) in zip(keys, key_codes)
        }
    )
    if not len(rows):
        return _empty_part(part, extra), total
    duration = end[rows] - start[rows]
    part["count"] = np.diff(np.r_[starts, len(rows)])
    part["total_ns"] = np.add.reduceat(np.where(counted[rows], duration, 0), starts)
    part["self_ns"] = np.add.reduceat(own[rows], starts)
    part["min_ns"] = np.minimum.reduceat(duration, starts)
    part["max_ns"] = np.maximum.reduceat(duration, starts)
    part["duration_ns"] = np.add.reduceat(duration, starts)
    for name in extra:
        values = read([name])
        column = (
            _ints(_column(values, name), 0)
            if name in values.column_names
            else np.zeros(len(parent), dtype=np.int64)
        )
        part[name] = np.add.reduceat(column[rows], starts)
    return part, total


def _empty_part(part: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    for name in (*PARTIAL_COLUMNS, *extra):
        part[name] = np.zeros(0, dtype=np.int64)
    return part


def _positions(ids: np.ndarray, parent_ids: np.ndarray, has_parent: np.ndarray, where: str) -> Any:
    """Row positions of the parents (-1 for roots and parents not in the process's rows)."""
    n = len(ids)
    if n and int(ids[-1]) - int(ids[0]) == n - 1 and bool(np.all(ids[1:] > ids[:-1])):
        low, high = int(ids[0]), int(ids[-1])  # as recorded: ids count up, no lookup needed
        found = has_parent & (parent_ids >= low) & (parent_ids <= high)
        return np.where(found, parent_ids - low, -1)
    index = pd.Index(ids)
    if not index.is_unique:
        raise TraceFormatError(f"{where}: ids repeat within a process")
    parent = np.full(n, -1, dtype=np.int64)
    wanted = np.flatnonzero(has_parent)
    parent[wanted] = index.get_indexer(parent_ids[wanted])
    return parent
