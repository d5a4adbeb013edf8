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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from recfn.errors import TraceFormatError

from .schema import INT64_MAX, RANGE
from .summary import PROFILER_SPAN_SCOPES, add_partials
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
    wanted = [*EVENT_COLUMNS, *keys, "host", "pid", *(["flops"] if flops else [])]
    tables = []
    for name in files:
        names = _schema(name).names
        columns = list(dict.fromkeys(c for c in wanted if c in names))
        tables.append(pq.ParquetFile(name).read(columns=columns))
    table = pa.concat_tables(tables, promote_options="default").unify_dictionaries()
    del tables
    where = files[0] if len(files) == 1 else os.path.dirname(files[0])
    parts, total = [], 0
    for process in _processes(table):
        part, own = _summarize_process(process, keys, where)
        parts.append(part)
        total += own
    return pd.concat(parts, ignore_index=True), total


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
        return np.zeros(table.num_rows, dtype=np.int64), [None]
    array = _column(table, name)
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    values = array.dictionary.to_pylist()
    indices = array.indices
    if indices.null_count:
        indices = pc.fill_null(indices, len(values))
        values.append(None)
    return np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64), values


def _is(table: pa.Table, name: str, wanted: Sequence[str]) -> np.ndarray:
    """Rows whose text column ``name`` holds one of ``wanted``."""
    found, values = _codes(table, name)
    hits = [i for i, value in enumerate(values) if value in wanted]
    result = np.zeros(table.num_rows, dtype=bool)
    for hit in hits:
        result |= found == hit
    return result


def _summarize_process(table: pa.Table, keys: list[str], where: str) -> tuple[pd.DataFrame, int]:
    """One process's statistics per group, in a form that adds up, and its self-time total."""
    id_column = _column(table, "id")
    start_column = _column(table, "start_ns")
    if id_column.null_count or start_column.null_count:
        raise TraceFormatError(f"{where}: a range has a null id or start_ns")
    ids = _ints(id_column, 0)
    parent_column = _column(table, "parent_id")
    parent = _positions(ids, _stored(parent_column), _valid(parent_column), where)
    start = _ints(start_column, 0)
    end_column = _column(table, "end_ns")
    has_end = _valid(end_column)
    end = np.where(has_end, _ints(end_column, 0), INT64_MAX)
    closed = _is(table, "kind", [RANGE]) & has_end
    if np.any(closed & (end < start)):
        raise TraceFormatError(f"{where}: a range ends before it starts")
    forest = Nodes(parent, start, end, closed, ~closed)
    if not parents_come_first(parent, start):
        try:
            forest.depth  # noqa: B018 (computed to find cycles)
        except ValueError:
            raise TraceFormatError(f"{where}: parent_id contains a cycle") from None
    own = self_durations(parent, start, end, closed)
    rows = np.flatnonzero(closed)
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
    group = np.full(len(ids), -1, dtype=np.int64)
    group[rows] = code
    duration = (end - start)[rows]
    counted = outermost(linked_parents(forest), group)[rows]
    columns = {
        "g": code,
        "row": rows,
        "duration": duration,
        "counted": np.where(counted, duration, 0),
        "own": own[rows],
    }
    if "flops" in table.column_names:
        columns["flops"] = _ints(_column(table, "flops"), 0)[rows]
    sums = ["counted", "own", *(["flops"] if "flops" in columns else [])]
    stats = (
        pa.table(columns)
        .group_by("g")
        .aggregate(
            [
                ("row", "min"),
                ("duration", "count"),
                ("duration", "sum"),
                ("duration", "min"),
                ("duration", "max"),
                *[(c, "sum") for c in sums],
            ]
        )
    )
    first = stats.column("row_min").to_numpy()
    part = pd.DataFrame(
        {
            key: pd.Series([values[i] for i in found[first]], dtype=object)
            for key, (found, values) in zip(keys, key_codes)
        }
    )
    part["count"] = stats.column("duration_count").to_numpy()
    part["total_ns"] = stats.column("counted_sum").to_numpy()
    part["self_ns"] = stats.column("own_sum").to_numpy()
    part["min_ns"] = stats.column("duration_min").to_numpy()
    part["max_ns"] = stats.column("duration_max").to_numpy()
    part["duration_ns"] = stats.column("duration_sum").to_numpy()
    if "flops" in columns:
        part["flops"] = stats.column("flops_sum").to_numpy()
    spans = _is(table, "scope", PROFILER_SPAN_SCOPES)
    return part, int(own[closed & ~spans].sum())


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
