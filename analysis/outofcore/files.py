"""Summaries of traces in Parquet files that need not fit in memory together.

Self time and the recursion rule need a range's parent and children, which live in its own
process (ids are unique per ``(host, pid)``). So the files are summarised one process at a
time: a process folder of a dataset (``process=<pid>/part-*.parquet``) or any other file is read
alone, only the columns the summary needs, split by process when it holds several, and
summarised; the per-process sums are then added up. No global shuffle, no engine: memory is
that of the processes read at once (`worker_threads`: the cores, up to 4). A process whose rows
are as captures save them (a block per thread, ids counting up, starts in order) is summarised
in one native pass a row group at a time (`_one_pass`, ``recfn/native/_csummary.c``: 8 bytes
per row); any other, and every process in a pure build, by the in-memory summary's numpy
kernels (``tree.self_durations``, ``tree.outermost``) over compact arrays (int32 positions,
dictionary codes, the two timestamps), each statistic one pass of ``bincount`` or ``ufunc.at``
with no sort by group. A process the pass hands back after reading it is read again.

Every file is verified as ``recfn.load`` verifies it, for the columns the summary reads, while
it is read: its footer and schema (``recfn.formats.io.check_footer``), the page checksums of
the pages read, the content hash of those columns and of the layout (a row group at a time: each
row group's needed columns are read once, hashed, checked for nulls where the schema has none and
then cut into the compact arrays; a mismatch is raised once the file's last row group is in;
columns no summary reads are neither read nor checked, docs/schema.md), and
the events: no end before its start, ids unique within a process (across its parts too), a
parent that is a row unless the file is a part of a streamed capture, no cycles. Processes met in
more than one group of files (a copied process folder) are checked for ids they share.
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

from recfn.analysis.columns import RANGE, check_number, group_keys
from recfn.analysis.stats.runs import RunStats, calls_part, calls_table, with_calls
from recfn.analysis.stats.summary import (
    PARTIAL_COLUMNS,
    PROFILER_SPAN_SCOPES,
    add_partials,
    check_top,
)
from recfn.analysis.stats.tree import (
    Nodes,
    linked_parents,
    outermost,
    parents_come_first,
    self_durations,
)
from recfn.errors import RecfnValueError, TraceFormatError
from recfn.formats.dataset import (
    Footers,
    asked_columns,
    in_process_folder,
    padded_columns,
    process_label,
    repeated_id,
    repeated_ids_message,
)
from recfn.formats.io import (
    DECODE_ERRORS,
    RowGroupCheck,
    check_footer,
    decoded,
    unreadable_parquet,
)
from recfn.formats.schema import (
    PART_KEY,
    PROCESS_KEYS,
    SCHEMA_VERSION_KEY,
    column_names,
    metadata_of,
    not_a_trace,
    process_rows,
    valid_flags,
    with_nullable_columns,
)

EVENT_COLUMNS = ("id", "parent_id", "kind", "scope", "start_ns", "end_ns")
"""The columns every summary reads, besides its keys (and ``flops`` when present)."""


def supports(files: Sequence[str], options: dict[str, Any]) -> bool:
    """Whether ``summarize_files`` can compute the summary with these ``summary()`` options."""
    return supports_options(options) and all(f.lower().endswith((".parquet", ".pq")) for f in files)


def supports_options(options: dict[str, Any]) -> bool:
    """Whether the one-pass summary (``summarize_files``, ``summarize_table``) takes these
    ``summary()`` options: grouped by name (and any other columns), sorted, cut, as index."""
    by = options.get("by", "name")
    keys = [by] if isinstance(by, str) else column_names(by) or []
    return "name" in keys and set(options) <= {"by", "sort_by", "top", "as_index"}


IN_MEMORY_ONLY = ("memory_bytes", "device_start_ns", "device_duration_ns")
"""Columns whose statistics (memory, GPU time) only the in-memory summary computes."""


def holds_any(name: str, footers: Footers, columns: Sequence[str]) -> bool:
    """Whether the Parquet file ``name`` has a value in any of ``columns`` (from its footer)."""
    return any(_holds(footers, name, column) for column in columns)


def partitions(files: Sequence[str]) -> list[list[str]]:
    """The files grouped so that each group holds whole processes: the parts in one process
    folder together, every other file alone."""
    groups: dict[str, list[str]] = {}
    for name in files:
        key = os.path.dirname(name) if in_process_folder(name) else name
        groups.setdefault(key, []).append(name)
    return list(groups.values())


MAX_DEFAULT_THREADS = 4
"""At most this many processes (or runs) are read at once unless asked: each holds its
columns while it is read, about 150 MB per 1M rows."""


def worker_threads(threads: int | None) -> int:
    """How many processes or runs to read at once: ``threads`` (``RecfnValueError`` below 1),
    else the cores this process may run on, up to `MAX_DEFAULT_THREADS` (decoding, hashing and
    the pass release the GIL)."""
    if threads is not None:
        check_number(threads, "threads", "reading")
        if threads < 1:
            raise RecfnValueError(f"threads must be >= 1, got {threads}")
        return threads
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 2
    return max(1, min(cores, MAX_DEFAULT_THREADS))


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
    once (default `worker_threads`). ``attrs["self_total_ns"]`` holds the time ``self_pct``
    divides by, ``attrs["wall_ns"]`` the wall time ``total_pct`` divides by,
    ``attrs["events"]`` the number of closed ranges. ValueError for other groupings and for
    options that only the in-memory summary offers; TraceFormatError for a file that is not a
    trace, or whose ids or parents are broken. ``footers`` are the files' footers read so far
    (a trace's ``footers``), if any: each file's footer is read once.
    """
    from recfn.formats.progress import progress

    keys = _summary_keys(by, top, "the out-of-core summary")
    workers = worker_threads(threads)
    if not files:
        raise RecfnValueError("no files to summarise")
    footers = _checked(files, keys, footers, "")
    flops = any(_holds(footers, name, "flops") for name in files)
    groups = partitions(files)
    with ThreadPoolExecutor(max_workers=min(workers, len(groups))) as pool:
        found = list(
            progress(
                pool.map(lambda group: _summarize_partition(group, keys, flops, footers), groups),
                total=len(groups),
                desc="recfn: summarising",
            )
        )
    parts = [part for part, _, _, _ in found]
    total = sum(own for _, own, _, _ in found)
    _refuse_shared_ids([spans for _, _, spans, _ in found], groups, footers)
    first = min((extent[0] for _, _, _, extent in found), default=0)
    last = max((extent[1] for _, _, _, extent in found), default=0)
    joined = pd.concat(parts, ignore_index=True)
    extra = ["flops"] if flops else []
    return _summary(joined, keys, extra, total, (first, last), sort_by, top, as_index)


def _summary_keys(by: str | Sequence[str], top: int | None, what: str) -> list[str]:
    """The group keys of a one-pass summary (`what`, named in the error): ``by``, which must
    include ``name``; RecfnValueError for that, and `check_top`'s errors for ``top``."""
    keys = group_keys(by, what)
    if "name" not in keys:
        raise RecfnValueError(f"{what} groups by name (plus any other columns)")
    check_top(top)
    return keys


def _summary(
    part: pd.DataFrame,
    keys: list[str],
    extra: list[str],
    total: int,
    extent: tuple[int, int],
    sort_by: str,
    top: int | None,
    as_index: bool,
) -> pd.DataFrame:
    """The summary of the processes' summed ``part``: partials (`add_partials`) over their
    self-time ``total`` and the wall time of their closed ranges' ``extent``, and
    ``attrs["events"]``, the closed ranges summarised."""
    wall = max(extent[1] - extent[0], 0)
    result = add_partials(part, keys, extra, total, sort_by, top, as_index, wall)
    result.attrs["events"] = int(part["count"].sum())
    return result


def summarize_table(
    table: pa.Table,
    by: str | Sequence[str] = "name",
    *,
    sort_by: str = "total_ns",
    top: int | None = None,
    as_index: bool = True,
    where: str = "the trace",
) -> pd.DataFrame:
    """`summarize_files`'s summary of a table in memory (a captured trace's): the same one pass
    per process, with the same numbers as ``df.recfn.summary`` and none of its per-row pandas
    work. ``by`` must include ``name``; RecfnValueError for a table without the event columns
    or with the columns only the in-memory summary sums (`IN_MEMORY_ONLY`, with values);
    TraceFormatError naming ``where`` for broken ids or parents."""
    keys = _summary_keys(by, top, "the one-pass summary")
    names = set(table.column_names)  # a new list at each access
    missing = [c for c in (*EVENT_COLUMNS, *keys) if c not in names]
    if missing:
        raise RecfnValueError(f"{where}: no column(s) {missing} to summarise")
    held = [c for c in IN_MEMORY_ONLY if c in names and table[c].null_count < len(table)]
    if held:
        raise RecfnValueError(f"{where}: {held} are summed by the in-memory summary only")
    extra = ["flops"] if "flops" in names else []
    part, total, _, extent = _summarize_processes(
        table, keys, extra, where, True, _summarize_process
    )
    return _summary(part, keys, extra, total, extent, sort_by, top, as_index)


def run_stats(
    files: Sequence[str],
    keys: list[str],
    *,
    label: str = "run",
    keep_calls: bool = False,
    footers: Footers | None = None,
) -> RunStats:
    """The statistics of one run (``recfn.analysis.stats.runs.RunStats``) from its Parquet
    ``files`` (one trace, or a dataset of several processes), out of core and verified as
    `summarize_files` reads and verifies them (footers, page checksums, content hashes, ids and
    parents, ids shared across files), one process at a time and only the columns needed.
    ``keys`` must include ``name``. ``keep_calls`` keeps every group's calls (comparisons over
    calls need them). TraceFormatError for a file that is not a trace or fails a check;
    ValueError for a missing key column."""
    if "name" not in keys:
        raise RecfnValueError("the out-of-core statistics group by name (plus any other columns)")
    if not files:
        raise RecfnValueError("no files in the run")
    footers = _checked(files, keys, footers, f"{label}: ")
    groups = partitions(list(files))
    found = [_summarize_partition(group, keys, False, footers, _calls_part) for group in groups]
    _refuse_shared_ids([spans for _, _, spans, _ in found], groups, footers)
    parts = pd.concat([part for part, _, _, _ in found], ignore_index=True)
    workload = sum(own for _, own, _, _ in found)
    table, calls = calls_table(parts, keys, keep_calls)
    first = min(extent[0] for _, _, _, extent in found)
    last = max(extent[1] for _, _, _, extent in found)
    span = (first, last) if first <= last else None  # NO_EXTENT: no closed range
    return RunStats(table, keys, workload, label=label, calls=calls, span_ns=span)


def _checked(files: Sequence[str], keys: list[str], footers: Footers | None, where: str) -> Footers:
    """The files' footers, each file checked before any is read: the event columns, the footer
    and schema (``check_footer``), and every key column in some file (``RecfnValueError``
    prefixed with ``where`` otherwise)."""
    footers = Footers() if footers is None else footers
    present: set[str] = set()
    for name in files:
        arrow_schema = footers.schema(name)
        lacking = [c for c in EVENT_COLUMNS if c not in arrow_schema.names]
        if lacking:
            raise not_a_trace(name, lacking)
        check_footer(name, footers(name), arrow_schema)
        present.update(arrow_schema.names)
    missing = [k for k in keys if k not in present]
    if missing:
        raise RecfnValueError(f"{where}the files have no column(s) {missing}")
    return footers


def _calls_part(
    pieces: _Pieces, n: int, keys: list[str], extra: list[str], where: str, whole: bool
) -> tuple[pd.DataFrame, int, int, int, tuple[int, int]]:
    """One process's calls per group (``recfn.analysis.stats.runs.calls_part``), read and
    verified as `_summarize_process` reads them, with the same self-time total, ids and
    extent."""
    passed = _one_pass(pieces, n, keys, extra, where, whole, keep_rows=True)
    if passed is not None:
        assert passed.calls is not None
        durations, self_times = passed.calls
        part = _passed_part(passed, keys, [])[[*keys, "count", "total_ns", "self_ns"]]
        part = part.rename(columns={"count": "calls"})
        counts = passed.sums["count"]
        bounds = np.concatenate([[0], np.cumsum(counts[counts > 0])]).tolist()
        part = with_calls(part, durations, self_times, bounds)
        return part, passed.total, passed.low, passed.high, passed.extent
    found = _process_rows(pieces, n, keys, extra, where, whole)
    duration = np.subtract(found.end, found.start, out=found.end)
    part = calls_part(
        keys, found.groups, found.code, found.closed, duration, found.own, found.counted
    )
    return part, found.total, found.low, found.high, found.extent


_Span = tuple[str, int, int, str]
"""A process met in a group of files: its label, lowest and highest id, and where."""


def _summarize_partition(
    files: list[str],
    keys: list[str],
    flops: bool,
    footers: Footers,
    summarize: Callable[..., tuple[pd.DataFrame, int, int, int, tuple[int, int]]] | None = None,
) -> tuple[pd.DataFrame, int, list[_Span], tuple[int, int]]:
    """The summed statistics of the processes in ``files``, their self-time total, the span of
    each process's ids, and the earliest start and latest end of their closed ranges
    (`NO_EXTENT` without any). ``summarize`` (``_summarize_process`` unless given) makes each
    process's part."""
    summarize = _summarize_process if summarize is None else summarize
    try:
        parquets = [
            pq.ParquetFile(name, metadata=footers(name), page_checksum_verification=True)
            for name in files
        ]
    except DECODE_ERRORS as exc:
        raise unreadable_parquet(files[0], exc) from None
    where = files[0] if len(files) == 1 else os.path.dirname(files[0])
    whole = not any(_is_part(footers, name) for name in files)
    extra = ["flops"] if flops else []
    # A key that no file has is no key: the rows then differ in the others only, as in memory.
    keys_here = [c for c in PROCESS_KEYS if any(c in p.schema_arrow.names for p in parquets)]
    single = [_one_value(parquets, c) for c in keys_here]
    if all(found is not None for found in single):  # one process: row group by group

        def pieces(columns: list[str], verify: bool = False) -> Iterator[pa.Table]:
            if verify:  # the process keys too: the process is told apart by their statistics
                return _verified_row_groups(files, parquets, [*columns, *keys_here])
            return _row_groups(parquets, columns)

        rows = sum(parquet.metadata.num_rows for parquet in parquets)
        part, own, low, high, extent = summarize(pieces, rows, keys, extra, where, whole)
        label = ", ".join(f"{k}={v[0]}" for k, v in zip(keys_here, single) if v is not None)
        return part, own, ([(label, low, high, where)] if rows else []), extent
    return _summarize_processes(_read(files, parquets), keys, extra, where, whole, summarize)


def _summarize_processes(
    table: pa.Table,
    keys: list[str],
    extra: list[str],
    where: str,
    whole: bool,
    summarize: Callable[..., tuple[pd.DataFrame, int, int, int, tuple[int, int]]],
) -> tuple[pd.DataFrame, int, list[_Span], tuple[int, int]]:
    """`_summarize_partition`'s result for the processes of a table in memory."""
    found = process_rows(table)
    if found is None:
        processes = [(process_label(table) if table.num_rows else "", table)]
    else:
        processes = [(label, table.take(rows)) for label, rows in found]
    del table, found
    parts, total, spans, extent = [], 0, [], NO_EXTENT
    while processes:
        label, process = processes.pop()

        def select(
            columns: list[str], verify: bool = False, process: pa.Table = process
        ) -> Iterator[pa.Table]:
            yield process.select([c for c in dict.fromkeys(columns) if c in process.column_names])

        part, own, low, high, here = summarize(select, process.num_rows, keys, extra, where, whole)
        if process.num_rows:
            spans.append((label, low, high, where))
        del process, select
        parts.append(part)
        total += own
        extent = (min(extent[0], here[0]), max(extent[1], here[1]))
    joined = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    return joined, total, spans, extent


def _holds(footers: Footers, name: str, column: str) -> bool:
    """Whether the file has ``column`` as a capture in memory would: a streamed part holds
    every column, so there only one that a row uses or an option asked for counts."""
    arrow_schema = footers.schema(name)
    if column not in arrow_schema.names:
        return False
    if not _is_part(footers, name) or column not in padded_columns():
        return True
    if column in asked_columns(metadata_of(arrow_schema.empty_table())):
        return True
    footer = footers(name)
    index = next(i for i in range(footer.num_columns) if footer.schema.column(i).path == column)
    for group in range(footer.num_row_groups):
        chunk = footer.row_group(group).column(index)
        if not chunk.num_values:
            continue
        stats = chunk.statistics
        if stats is None or stats.null_count != chunk.num_values:
            return True
    return False


def _is_part(footers: Footers, name: str) -> bool:
    """Whether a file is a part of a streamed capture (its parents may be in other parts)."""
    return PART_KEY.encode() in (footers.schema(name).metadata or {})


def _verified_row_groups(
    files: list[str], parquets: list[pq.ParquetFile], columns: list[str]
) -> Iterator[pa.Table]:
    """``columns`` of the files a row group at a time, as ``_row_groups``, verified on the way
    (``RowGroupCheck`` of just those columns: their content hashes, the layout's, no nulls
    where the schema has none); the other columns are not read. The next row group is read
    and hashed in a thread while the caller handles this one (pyarrow and numpy release the
    GIL): the caller's row group and the next are held, with the one before while the caller
    moves on."""
    work = []
    for name, parquet in zip(files, parquets):
        names = parquet.schema_arrow.names
        check = RowGroupCheck(name, parquet, [c for c in dict.fromkeys(columns) if c in names])
        work += [(parquet, check, group) for group in range(parquet.metadata.num_row_groups)]
        if not parquet.metadata.num_row_groups:
            check.finish()

    def read(parquet: pq.ParquetFile, check: RowGroupCheck, group: int) -> Any:
        piece = decoded(check.path, parquet.read_row_group, group, columns=check.columns)
        return piece, check.digests(piece)

    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(read, *work[0]) if work else None
        for at, (_, check, _) in enumerate(work):
            assert ahead is not None
            piece, digests = ahead.result()
            ahead = pool.submit(read, *work[at + 1]) if at + 1 < len(work) else None
            check.add(piece, digests)
            if at + 1 == len(work) or work[at + 1][1] is not check:
                check.finish()  # the file's last row group
            yield piece
            del piece, digests


def _row_groups(parquets: list[pq.ParquetFile], columns: list[str]) -> Iterator[pa.Table]:
    """``columns`` of the files (those each has), one row group at a time, in order."""
    for parquet in parquets:
        names = parquet.schema_arrow.names
        wanted = [c for c in dict.fromkeys(columns) if c in names]
        for group in range(parquet.metadata.num_row_groups):
            yield with_nullable_columns(parquet.read_row_group(group, columns=wanted))


def _read(files: list[str], parquets: list[pq.ParquetFile]) -> pa.Table:
    """The files read whole and verified as ``recfn.load`` verifies them, as one table."""
    from recfn.formats.io import read_parquet

    tables = []
    for name, parquet in zip(files, parquets):
        if SCHEMA_VERSION_KEY.encode() in (parquet.schema_arrow.metadata or {}):
            tables.append(read_parquet(name))
        else:  # foreign Parquet: as it is (conform would make up what it lacks)
            check = RowGroupCheck(name, parquet)
            table = decoded(check.path, parquet.read)
            check.add(table)
            tables.append(table)
    return pa.concat_tables(tables, promote_options="default").unify_dictionaries()


def _refuse_shared_ids(found: list[list[_Span]], groups: list[list[str]], footers: Footers) -> None:
    """``TraceFormatError`` when a process met in two groups of files (a process folder copied
    elsewhere, a trace saved inside its dataset) has ids in both: the ids of groups whose spans
    of ids overlap are read again and compared."""
    by_label: dict[str, list[tuple[int, int, str, int]]] = {}
    for index, found_here in enumerate(found):
        for label, low, high, where in found_here:
            by_label.setdefault(label, []).append((low, high, where, index))
    for label, met in by_label.items():
        for i, (low, high, where, index) in enumerate(met):
            for other_low, other_high, other_where, other_index in met[i + 1 :]:
                if other_low > high or low > other_high:
                    continue
                ids = np.concatenate(
                    [_process_ids(groups[g], label, footers) for g in (index, other_index)]
                )
                repeated = repeated_id(ids)
                if repeated is not None:
                    message = repeated_ids_message(label, repeated, [where, other_where])
                    raise TraceFormatError(message)


def _process_ids(files: list[str], label: str, footers: Footers) -> np.ndarray:
    """The ids of the process ``label`` in ``files``."""
    tables = [
        pq.ParquetFile(name, metadata=footers(name)).read(
            columns=[c for c in ("id", *PROCESS_KEYS) if c in footers.schema(name).names]
        )
        for name in files
    ]
    table = pa.concat_tables(tables, promote_options="default")
    found = process_rows(table)
    ids = table.column("id")
    if found is not None:
        ids = ids.take(dict(found)[label])
    return np.asarray(ids.to_numpy(), dtype=np.int64)


def _one_value(parquets: list[pq.ParquetFile], column: str) -> tuple[Any] | None:
    """The one value, never null, that the files' statistics show in ``column`` (in a tuple),
    else None (a file that lacks the column counts as all null)."""
    seen: set[Any] = set()
    for parquet in parquets:
        metadata = parquet.metadata
        found = [i for i in range(metadata.num_columns) if metadata.schema.column(i).name == column]
        if not found:
            return None
        for group in range(metadata.num_row_groups):
            stats = metadata.row_group(group).column(found[0]).statistics
            if stats is None or not stats.has_min_max or stats.null_count != 0:
                return None
            seen.update((stats.min, stats.max))
    return (next(iter(seen)),) if len(seen) == 1 else None if seen else (None,)


def _column(table: pa.Table, name: str) -> pa.Array | None:
    """A column as one array; None when the table lacks it (a file without it: all null)."""
    if name not in table.column_names:
        return None
    column = table.column(name)
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def _ints(array: pa.Array, fill: int) -> np.ndarray:
    if array.null_count:
        return np.where(valid_flags(array), _stored(array), fill)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.int64)


def _stored(array: pa.Array) -> np.ndarray:
    """An int64 array's values as stored, without a copy (whatever lies under its nulls)."""
    return np.frombuffer(
        array.buffers()[1], dtype=np.int64, count=len(array), offset=8 * array.offset
    )


def _event_columns(piece: pa.Table, where: str) -> tuple[pa.Array, ...]:
    """A piece's ``id``, ``parent_id``, ``start_ns``, ``end_ns``, ``kind`` and ``scope`` (each
    one array); ``TraceFormatError`` for a null id or start."""
    found: list[pa.Array] = []
    for name in ("id", "parent_id", "start_ns", "end_ns", "kind", "scope"):
        column = _column(piece, name)
        assert column is not None  # EVENT_COLUMNS are checked first
        found.append(column)
    if found[0].null_count:
        raise TraceFormatError(f"{where}: a range has a null id")
    if found[2].null_count:
        raise TraceFormatError(f"{where}: a range has a null start_ns")
    return tuple(found)


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
        positions = np.asarray(indices.to_numpy(zero_copy_only=False))
        if mapping == list(range(len(mapping))) and positions.dtype == np.int32:
            return positions  # the piece's dictionary in the order of the codes: no take
        codes: np.ndarray = np.asarray(mapping, dtype=np.int32)
        found: np.ndarray = codes[positions]
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
            found &= valid_flags(array)
    return found


NO_EXTENT = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
"""The (first start, last end) of no ranges: what min and max start from."""


_Pieces = Callable[..., Iterator[pa.Table]]
"""``pieces(columns, verify=False)``: a process's rows, those columns, a piece at a time (a
row group); with ``verify`` every piece is read whole and verified on the way (``RowGroupCheck``)."""


class ProcessRows(NamedTuple):
    """One process's rows as its statistics need them (`_process_rows`), one entry per row."""

    start: np.ndarray
    end: np.ndarray
    """``end_ns`` (any value on rows that are not closed ranges)."""
    closed: np.ndarray
    own: np.ndarray
    """Self time of closed ranges, 0 on other rows."""
    code: np.ndarray
    """Each row's group (dense codes), whose key values are ``groups[code]``."""
    groups: list[tuple[Any, ...]]
    counted: np.ndarray
    """Whether a row counts in its group's total: no ancestor of its own group."""
    extras: dict[str, np.ndarray]
    total: int
    """The self-time total, profiler spans left out (what percentages divide by)."""
    low: int
    high: int
    """The lowest and highest id."""
    extent: tuple[int, int]
    """The earliest start and latest end of the closed ranges (`NO_EXTENT` without any)."""


def _process_rows(
    pieces: _Pieces, n: int, keys: list[str], extra: list[str], where: str, whole: bool
) -> ProcessRows:
    """One process's `ProcessRows`. ``pieces`` gives its ``n`` rows in pieces (a file's row
    groups): each piece is read once, verified, and cut into compact arrays (int32 positions,
    dictionary codes, the two timestamps), so that large processes hold only what each step
    needs. ``whole``: the rows are whole files, not parts of a streamed capture, so every
    parent must be one of them."""
    links = _Links(n, where, whole)
    start = np.empty(n, dtype=np.int64)
    end = np.empty(n, dtype=np.int64)  # what lies under nulls is never read: those rows are open
    closed = np.empty(n, dtype=bool)
    spans = [np.zeros(0, dtype=np.intp)]  # a file may have no row group at all
    coders = [_Codes() for _ in keys]
    key_codes = [np.empty(n, dtype=np.int32) for _ in keys]
    extras = {name: np.zeros(n, dtype=np.int64) for name in extra}
    columns = ["id", "parent_id", "start_ns", "end_ns", "kind", "scope", *keys, *extra]
    at = 0
    for piece in pieces(columns, verify=True):
        rows = piece.num_rows
        ids, parent_ids, start_column, end_column, kind, scope = _event_columns(piece, where)
        links.add(ids, parent_ids, at)
        here_start = _ints(start_column, 0)
        here_end = _stored(end_column)
        ended = valid_flags(end_column)
        if np.any(ended & (here_end < here_start)):
            raise TraceFormatError(f"{where}: an event ends before it starts")
        start[at : at + rows] = here_start
        end[at : at + rows] = here_end
        closed[at : at + rows] = _is(kind, [RANGE]) & ended
        spans.append(np.flatnonzero(_is(scope, PROFILER_SPAN_SCOPES)) + at)
        for key, coder, column in zip(keys, coders, key_codes):
            column[at : at + rows] = coder.of(_column(piece, key), rows)
        for name, values in extras.items():
            found = _column(piece, name)
            if found is not None:
                values[at : at + rows] = _ints(found, 0)
        at += rows
    # The row groups are gone; their pages go back to the system before the tree work peaks
    # (the Arrow pool keeps freed pages for reuse: 200 MiB of a 10M-event file).
    pa.default_memory_pool().release_unused()
    parent, low, high = links.result(pieces)
    del links
    extent = (int(start[closed].min()), int(end[closed].max())) if closed.any() else NO_EXTENT
    forest = Nodes(parent, start, end, closed, ~closed)
    if not parents_come_first(parent, start):
        try:
            forest.depth  # noqa: B018 (computed to find cycles)
        except ValueError:
            raise TraceFormatError(f"{where}: parent_id contains a cycle") from None
    # Closed ranges under closed ranges are all that self time and nesting look at.
    linked = linked_parents(forest)
    del forest, parent
    own = self_durations(linked, start, end, closed)
    total = int(own.sum()) - int(own[np.concatenate(spans)].sum())  # own is 0 unless closed
    code, groups = _combined_codes(coders, key_codes)
    del key_codes
    counted = outermost(linked, code)
    del linked
    return ProcessRows(
        start, end, closed, own, code, groups, counted, extras, total, low, high, extent
    )


def _summarize_process(
    pieces: _Pieces, n: int, keys: list[str], extra: list[str], where: str, whole: bool
) -> tuple[pd.DataFrame, int, int, int, tuple[int, int]]:
    """One process's statistics per group, in a form that adds up, its self-time total, its
    lowest and highest id, and the earliest start and latest end of its closed ranges (for the
    wall time ``total_pct`` is of): `_process_rows`, then one pass of ``bincount`` or
    ``ufunc.at`` per statistic, with no sort by group."""
    passed = _one_pass(pieces, n, keys, extra, where, whole, keep_rows=False)
    if passed is not None:
        return (
            _passed_part(passed, keys, extra),
            passed.total,
            passed.low,
            passed.high,
            passed.extent,
        )
    found = _process_rows(pieces, n, keys, extra, where, whole)
    start, end, closed, own, code, groups, counted, extras, total, low, high, extent = found
    del found
    # Each closed range adds to its group's slot (code + 1); slot 0 gathers the other rows.
    slots = len(groups) + 1
    slot: np.ndarray = code.astype(np.int32 if slots < 2**31 else np.int64)
    del code
    slot += 1
    slot[~closed] = 0
    duration = np.subtract(end, start, out=end)
    del start, end
    count = np.bincount(slot, minlength=slots)
    sums = {}
    for name, values_of in (("duration_ns", duration), ("self_ns", own)):
        sums[name] = np.zeros(slots, dtype=np.int64)
        np.add.at(sums[name], slot, values_of)
    del own
    minimum = np.full(slots, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(minimum, slot, duration)
    maximum = np.full(slots, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(maximum, slot, duration)
    duration[~counted] = 0
    del counted
    sums["total_ns"] = np.zeros(slots, dtype=np.int64)
    np.add.at(sums["total_ns"], slot, duration)
    del duration
    for name in extra:
        sums[name] = np.zeros(slots, dtype=np.int64)
        np.add.at(sums[name], slot, extras.pop(name))
    seen = np.flatnonzero(count[1:])  # the groups that have closed ranges
    part = pd.DataFrame(
        {
            key: pd.Series([groups[g][i] for g in seen.tolist()], dtype=object)
            for i, key in enumerate(keys)
        }
    )
    if not len(seen):
        return _empty_part(part, extra), total, low, high, extent
    seen += 1
    part["count"] = count[seen]
    for name in ("total_ns", "self_ns"):
        part[name] = sums[name][seen]
    part["min_ns"] = minimum[seen]
    part["max_ns"] = maximum[seen]
    for name in ("duration_ns", *extra):
        part[name] = sums[name][seen]
    return part, total, low, high, extent


class _Links:
    """Row positions of the parents (-1 for roots and parents not in the process's rows),
    int32 below 2**31 rows, met a piece at a time (``add``). Ids that count up from the first
    row's, as recorded, need no lookup: a parent's position is its id minus the first id;
    other ids are looked up in an index of all of them once every piece is in (``result``
    reads the ids again). Ids must be unique, and with ``whole`` every parent a row."""

    def __init__(self, n: int, where: str, whole: bool) -> None:
        self.n, self.where, self.whole = n, where, whole
        self.parent: np.ndarray | None = np.empty(n, dtype=np.int32 if n < 2**31 else np.int64)
        self.first: int | None = None
        self.low = np.iinfo(np.int64).max
        self.high = np.iinfo(np.int64).min

    def add(self, ids: pa.Array, parent_ids: pa.Array, at: int) -> None:
        rows = len(ids)
        if not rows:
            return
        values = _ints(ids, 0)
        self.low = min(self.low, int(values.min()))
        self.high = max(self.high, int(values.max()))
        parent = self.parent
        if parent is None:
            return
        first = int(values[0]) if self.first is None else self.first
        self.first = first
        if (
            int(values[0]) != first + at
            or int(values[-1]) - int(values[0]) != rows - 1
            or not np.all(values[1:] > values[:-1])
        ):
            self.parent = None  # not counting up: looked up in the end
            return
        # As unsigned, id - first (wrapping) is at most n - 1 exactly for the ids of rows.
        offset = np.subtract(_stored(parent_ids), first)
        outside = offset.view(np.uint64) > min(self.n - 1, np.iinfo(np.int64).max - first)
        if parent_ids.null_count:
            has_parent = valid_flags(parent_ids)
            dangling = outside & has_parent
            outside |= ~has_parent
        else:
            dangling = outside
        if self.whole and dangling.any():
            row = int(np.argmax(dangling))
            self._dangling(int(_stored(parent_ids)[row]))
        here = parent[at : at + rows]
        np.copyto(here, offset, casting="unsafe")  # the int32 that every kept value fits
        here[outside] = -1

    def result(self, pieces: _Pieces) -> tuple[np.ndarray, int, int]:
        """The parents' positions and the lowest and highest id."""
        parent = self.parent
        if parent is None:
            parent = self._looked_up(pieces)
        return parent, self.low, self.high

    def _looked_up(self, pieces: _Pieces) -> np.ndarray:
        """The parents of ids in any order: looked up in an index of all the process's ids."""
        n, where = self.n, self.where
        ids = np.empty(n, dtype=np.int64)
        parent_ids = np.empty(n, dtype=np.int64)
        has_parent = np.empty(n, dtype=bool)
        at = 0
        for piece in pieces(["id", "parent_id"]):
            id_column, parent_column = _column(piece, "id"), _column(piece, "parent_id")
            assert id_column is not None and parent_column is not None  # EVENT_COLUMNS
            rows = len(id_column)
            ids[at : at + rows] = _ints(id_column, 0)
            parent_ids[at : at + rows] = _stored(parent_column)
            has_parent[at : at + rows] = valid_flags(parent_column)
            at += rows
        parent: np.ndarray = _positions(ids, parent_ids, has_parent, where)
        if self.whole:
            dangling = has_parent & (parent < 0)
            if dangling.any():
                self._dangling(int(parent_ids[int(np.argmax(dangling))]))
        return parent.astype(np.int32) if n < 2**31 else parent

    def _dangling(self, parent_id: int) -> None:
        raise TraceFormatError(f"{self.where}: parent_id {parent_id} is not the id of any row")


def _combined_codes(
    coders: list[_Codes], columns: list[np.ndarray]
) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Each row's group (dense codes, 0, 1, ... in order of first appearance) from each key's
    codes, and each group's key values."""
    columns = list(columns)
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
        repeated = repeated_id(ids)
        raise TraceFormatError(
            f"{where}: ids repeat within a process (id {repeated} is used twice: a copied part?)"
        )
    parent = np.full(len(ids), -1, dtype=np.int64)
    wanted = np.flatnonzero(has_parent)
    parent[wanted] = index.get_indexer(parent_ids[wanted])
    return parent


class _Passed(NamedTuple):
    """One process summarised in one native pass (`_one_pass`): per group (in code order)
    ``sums`` holds count, duration_ns, self_ns, total_ns, min_ns, max_ns and the extras;
    with ``keep_rows``, ``calls`` holds the closed ranges' durations and self times grouped
    (group by group in code order, each group's count of them)."""

    groups: list[tuple[Any, ...]]
    sums: dict[str, np.ndarray]
    total: int
    low: int
    high: int
    extent: tuple[int, int]
    calls: tuple[np.ndarray, np.ndarray] | None


def _one_pass(
    pieces: _Pieces,
    n: int,
    keys: list[str],
    extra: list[str],
    where: str,
    whole: bool,
    keep_rows: bool,
) -> _Passed | None:
    """One process summarised in one native pass over its rows as recorded (a few blocks, a
    capture's threads, whose starts are in order, each of runs whose ids count up by one: a
    thread's ranges and its traced calls interleave; parents before children, a closed parent
    in its children's block: ``recfn/native/_csummary.c``),
    each piece read once and verified. None where the pass cannot take the rows (no native
    extension, a process of 2**31 rows, rows in another order, repeated ids, a cycle): the
    caller then takes the numpy path (`_process_rows`), which gives the same numbers and
    names what is broken (tests compare them)."""
    from recfn.native import extension

    native = extension("_csummary")
    if native is None or n >= 2**31 - 1:
        return None
    one_pass = native.Pass(n, whole, keep_rows)
    codes = _GroupCodes(len(keys))
    extras = {name: np.zeros(0, dtype=np.int64) for name in extra}
    columns = ["id", "parent_id", "start_ns", "end_ns", "kind", "scope", *keys, *extra]
    for piece in pieces(columns, verify=True):
        rows = piece.num_rows
        ids, parent_ids, start_column, end_column, kind, scope = _event_columns(piece, where)
        if any(c.type != pa.int64() for c in (ids, parent_ids, start_column, end_column)):
            return None  # foreign Parquet: the numpy path converts its integers
        ended = valid_flags(end_column) if end_column.null_count else None
        closed = _is(kind, [RANGE])
        if ended is not None:
            closed &= ended
        code = codes.of([_column(piece, key) for key in keys], rows)
        status = one_pass.add(
            _stored(ids),
            _stored(parent_ids),
            valid_flags(parent_ids).view(np.uint8) if parent_ids.null_count else None,
            _stored(start_column),
            _stored(end_column),
            None if ended is None else ended.view(np.uint8),
            closed.view(np.uint8),
            _is(scope, PROFILER_SPAN_SCOPES).view(np.uint8),
            code,
            len(codes.groups),
        )
        if status == native.NOT_RECORDED:
            return None
        if status == native.ENDS_BEFORE_START:
            raise TraceFormatError(f"{where}: an event ends before it starts")
        for name in extra:
            values = _column(piece, name)
            if values is None:
                continue
            added = extras[name]
            if len(added) < len(codes.groups):
                extras[name] = added = np.concatenate(
                    [added, np.zeros(len(codes.groups) - len(added), dtype=np.int64)]
                )
            np.add.at(added, code[closed], _ints(values, 0)[closed])
    status = one_pass.finish()
    if status == native.NOT_RECORDED:
        return None
    if status == native.DANGLING_PARENT:
        raise TraceFormatError(f"{where}: parent_id {one_pass.bad} is not the id of any row")
    count, duration_sum, self_sum, total_sum, minimum, maximum, total, first, last = (
        one_pass.result()
    )
    size = len(codes.groups)
    sums = {
        name: np.frombuffer(found, dtype=np.int64)[:size]
        for name, found in zip(
            ("count", "duration_ns", "self_ns", "total_ns", "min_ns", "max_ns"),
            (count, duration_sum, self_sum, total_sum, minimum, maximum),
        )
    }
    for name, found in extras.items():
        sums[name] = np.concatenate([found, np.zeros(size - len(found), dtype=np.int64)])
    calls = None
    if keep_rows:
        closed_rows = int(sums["count"].sum())
        calls = (np.empty(closed_rows, dtype=np.int64), np.empty(closed_rows, dtype=np.int64))
        one_pass.grouped(*calls)
    low, high = one_pass.low, one_pass.high
    extent = (first, last) if first <= last else NO_EXTENT
    return _Passed(codes.groups, sums, total, low, high, extent, calls)


def _passed_part(passed: _Passed, keys: list[str], extra: list[str]) -> pd.DataFrame:
    """A process's part of the summary (as `_summarize_process` makes it) from `_one_pass`,
    made in one piece (a column set at a time costs more than the pass of a small trace)."""
    sums = passed.sums
    seen = np.flatnonzero(sums["count"])  # the groups that have closed ranges
    columns: dict[str, Any] = {
        key: pd.Series([passed.groups[g][i] for g in seen.tolist()], dtype=object)
        for i, key in enumerate(keys)
    }
    for name in ("count", "total_ns", "self_ns", "min_ns", "max_ns", "duration_ns", *extra):
        columns[name] = sums[name][seen]  # int64, empty or not
    return pd.DataFrame(columns)


class _GroupCodes:
    """Each row's group as a dense code (0, 1, ... in order of first appearance) from its key
    values, met a piece at a time; ``groups[code]`` is the group's key values."""

    def __init__(self, keys: int) -> None:
        self.coders = [_Codes() for _ in range(keys)]
        self.groups: list[tuple[Any, ...]] = []
        self.lookup: dict[tuple[int, ...], int] = {}

    def of(self, columns: list[pa.Array | None], rows: int) -> np.ndarray:
        """The codes of one piece's rows (``columns``: each key's column, None if absent)."""
        found = [coder.of(column, rows) for coder, column in zip(self.coders, columns)]
        if len(found) == 1:
            code = found[0]
            values = self.coders[0].values
            self.groups.extend((value,) for value in values[len(self.groups) :])
            return code
        unique, first, inverse = np.unique(
            np.stack(found, axis=1), axis=0, return_index=True, return_inverse=True
        )
        values = [coder.values for coder in self.coders]
        mapping = np.empty(len(unique), dtype=np.int32)
        for at in np.argsort(first, kind="stable").tolist():  # new groups as they first appear
            combination = tuple(unique[at].tolist())
            code_of = self.lookup.get(combination)
            if code_of is None:
                code_of = self.lookup[combination] = len(self.groups)
                self.groups.append(tuple(v[c] for v, c in zip(values, combination)))
            mapping[at] = code_of
        return np.ascontiguousarray(mapping[inverse.reshape(-1)])
