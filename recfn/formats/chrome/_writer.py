"""A recfn event table to Chrome trace events; see `chrome.write_chrome_trace`."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any, NamedTuple, cast

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from recfn import native
from recfn.formats.chrome._json import compact, string_array
from recfn.formats.chrome._reader import (
    ARG_COLUMNS,
    ASYNC_RANGES,
    MEMORY_TOTALS,
    NO_DEVICE,
    RECFN_PROCESS,
)
from recfn.formats.chrome._times import large_micros, micros, micros_text, time_base
from recfn.formats.columns import equals, ints, nulls
from recfn.formats.schema import COUNTER, FLOW, MARK, MEMORY, RANGE, json_object

TORCH_ARGS = (("sequence_nr", "Sequence number", -1), ("fwd_thread_id", "Fwd thread id", 0))
"""Integer columns written under torch's args keys (unless unset), which the reader maps back."""
LIST_ARGS = (
    ("input_shapes", "Input Dims"),
    ("input_dtypes", "Input type"),
    ("stack", "stack"),
    ("flops", ARG_COLUMNS["flops"]),
    ("hidden_calls", ARG_COLUMNS["hidden_calls"]),
)
"""Optional columns written into args (the reader maps the first two back, as torch names them,
and the others from the files that list them, `ARG_COLUMNS`)."""
DEVICE_TIMES = ("device_start_ns", "device_duration_ns")
"""Columns of a range's GPU time: its rows' args take the device's `ARG_COLUMNS`."""
DEVICE_COLUMNS = ("device", *DEVICE_TIMES)


ROWS = 50_000
"""Rows encoded at a time when writing: the JSON of a large trace is never whole in memory."""


class Rows:
    """An event table, DataFrame or ``pyarrow.Table``, read `ROWS` rows at a time."""

    def __init__(self, data: pd.DataFrame | pa.Table) -> None:
        self.data = data
        self.columns = list(data.column_names if isinstance(data, pa.Table) else data.columns)
        self.count = data.num_rows if isinstance(data, pa.Table) else len(data)

    def parts(self) -> Iterator[tuple[int, pd.DataFrame | pa.Table]]:
        """(first row, rows) of `ROWS` consecutive rows, as the data holds them (a table's as
        a table, a frame's as a frame)."""
        for first in range(0, self.count, ROWS):
            if isinstance(self.data, pa.Table):
                yield first, self.data.slice(first, ROWS)
            else:
                yield first, self.data.iloc[first : first + ROWS]

    def take(self, rows: slice | np.ndarray, columns: list[str] | None = None) -> pd.DataFrame:
        """The rows at `rows` (a slice or positions) as a DataFrame."""
        data = self.data
        if isinstance(data, pa.Table):
            data = data.select(columns) if columns is not None else data
            part = (
                data.slice(rows.start, rows.stop - rows.start)
                if isinstance(rows, slice)
                else data.take(pa.array(rows))
            )
            return _frame(part)
        frame = data[columns] if columns is not None else data
        return frame.iloc[rows]

    def distinct_records(self, columns: list[str]) -> list[dict[str, Any]]:
        """These rows' values of `columns` (those present) with repeats left out, first
        occurrences in order, one dict per row: what a question about the distinct values
        (processes, threads) needs to read."""
        keep = [c for c in columns if c in self.columns]
        if not keep or not self.count:
            return [{} for _ in range(min(self.count, 1))]
        if not isinstance(self.data, pa.Table):
            return _distinct_records(self.data[keep])
        table = self.data.select(keep).combine_chunks().unify_dictionaries()
        key, size = np.zeros(self.count, dtype=np.int64), 1
        for column in table.columns:
            array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
            if not pa.types.is_dictionary(array.type):
                array = pc.dictionary_encode(array)
            size *= len(array.dictionary) + 1
            if size >= 2**62:  # too many combinations to number: read every row
                return _distinct_records(table.to_pandas())
            key = key * (len(array.dictionary) + 1) + 1
            key += pc.fill_null(array.indices, -1).to_numpy(zero_copy_only=False)
        first = np.sort(np.unique(key, return_index=True)[1])
        records: list[dict[str, Any]] = table.take(pa.array(first)).to_pylist()
        return records

    def where(self, kind: str, columns: list[str]) -> tuple[np.ndarray, pd.DataFrame]:
        """The positions of the rows of this `kind`, and their `columns` (those present)."""
        keep = [c for c in columns if c in self.columns]
        if isinstance(self.data, pa.Table):
            found = pc.fill_null(pc.equal(self.data["kind"], kind), False)
            positions = np.flatnonzero(found.to_numpy(zero_copy_only=False))
        else:
            positions = np.flatnonzero(equals(self.data["kind"], kind))
        return positions, self.take(positions, keep)

    def start_ns(self) -> int:
        """The first start, 0 for no rows."""
        if isinstance(self.data, pa.Table):
            first = pc.min(self.data["start_ns"]).as_py()
            return int(first) if first is not None else 0
        start = ints(self.data["start_ns"], 0)
        return int(start.min()) if len(start) else 0


def _frame(table: pa.Table) -> pd.DataFrame:
    """`table` as the writer's DataFrame: nullable int64 as Int64, not float64, which would
    round epoch nanoseconds."""
    return table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def _distinct_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = frame.drop_duplicates().to_dict("records")
    return records


SCOPE_CATEGORIES = {"user_scope": "user_annotation", "function": "cpu_op"}
"""recfn's scopes written as the categories torch.profiler gives the same kind of range
(annotations, operators), the ones torch-tb-profiler and HTA read; others are written as they
are. A table that already has such a category keeps its scopes as they are (a round trip must
tell them apart)."""
MEMORY_NAME = "[memory]"
"""torch's name of memory instants, which torch-tb-profiler's memory view reads."""
TORCH_DEVICE_TYPES = {"cpu": 0, "cuda": 1}
HOISTED = ("ph", "id", "id2", "bp", "scope", "s")
"""Fields of other tools' events that the reader keeps in args, written back as fields."""


class Layout:
    """What the writer works out once for the whole table (one pass over its rows): the time
    base, each process's Chrome pid (processes are told apart by host and pid, and two hosts'
    processes with one pid get different Chrome pids), its threads' names, the categories of
    the scopes, the memory totals."""

    def __init__(self, rows: Rows, base_ns: int | None = None) -> None:
        self.rows = rows
        self.base_ns = time_base(rows.start_ns()) if base_ns is None else base_ns
        processes: dict[tuple[str, int], int] = {}
        threads: dict[tuple[str, int, int], str] = {}
        scopes: set[str] = set()
        for row in rows.distinct_records(
            ["host", "pid", "rank", "thread_id", "thread_name", "scope"]
        ):
            host = "" if _missing(row.get("host")) else str(row["host"])
            pid = 0 if _missing(row.get("pid")) else int(row["pid"])
            rank = -1 if _missing(row.get("rank")) else int(row["rank"])
            processes.setdefault((host, pid), rank)
            thread, name = row.get("thread_id"), row.get("thread_name")
            if thread is not None and not _missing(thread) and not _missing(name):
                threads.setdefault((host, pid, int(thread)), str(name))
            if not _missing(row.get("scope")):
                scopes.add(str(row["scope"]))
        self.processes = _chrome_pids(processes)
        self.threads = list(threads.items())
        self.has_hosts = "host" in rows.columns or "rank" in rows.columns
        self.remapped = any(process.chrome_pid != process.pid for process in self.processes)
        self._chrome = {(p.host, p.pid): p.chrome_pid for p in self.processes}
        categories = set(SCOPE_CATEGORIES.values())
        self.categories = (
            {s: c for s, c in SCOPE_CATEGORIES.items() if s in scopes}
            if scopes.isdisjoint(categories)
            else {}
        )
        self.totals = memory_totals(rows)

    def chrome_pids(self, df: pd.DataFrame) -> list[int]:
        """The Chrome pid of each row of `df`."""
        pid = ints(df["pid"], 0) if "pid" in df.columns else np.zeros(len(df), np.int64)
        if not self.remapped:
            return pid.tolist()
        hosts = _strings(df["host"]) if "host" in df.columns else [""] * len(df)
        return [self._chrome[key] for key in zip(hosts, pid.tolist())]

    def header_events(self) -> list[dict[str, Any]]:
        """Process and thread metadata: names, sort order by rank, and recfn's own
        ``recfn_process`` (host, pid, rank) that the reader restores."""
        events: list[dict[str, Any]] = []
        if self.has_hosts or self.remapped:
            for process in self.processes:
                events += _process_metadata(*process)
        for (host, pid, thread), name in self.threads:
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": self._chrome[(host, pid)],
                    "tid": thread,
                    "args": {"name": name},
                }
            )
        return events

    def ranks(self) -> list[int]:
        """The table's distinct ranks (-1: none)."""
        return sorted({process.rank for process in self.processes})


class Process(NamedTuple):
    """A process of the table (told apart by host and pid), its rank and its Chrome pid."""

    host: str
    pid: int
    rank: int
    chrome_pid: int


def _chrome_pids(processes: dict[tuple[str, int], int]) -> list[Process]:
    """The `processes` ((host, pid): rank, in order), each with a Chrome pid: its pid, unless
    an earlier process of another host has that pid; then one above every pid of the table."""
    taken = {pid for _, pid in processes}
    spare = max(taken, default=0) + 1
    found, used = [], set()
    for (host, pid), rank in processes.items():
        chrome = pid
        if chrome in used:
            while spare in taken or spare in used:
                spare += 1
            chrome = spare
        used.add(chrome)
        found.append(Process(host, pid, rank, chrome))
    return found


def _process_metadata(host: str, pid: int, rank: int, chrome: int) -> list[dict[str, Any]]:
    """A process's "process_name" (rank, host, pid), a "process_sort_index" by rank, and
    recfn's ``recfn_process`` with its host, pid and rank as they are."""
    label = f"{host} pid {pid}" if host else f"pid {pid}"
    events: list[dict[str, Any]] = []
    if rank >= 0:
        label = f"rank {rank} · {label}"
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": chrome, "args": {"sort_index": rank}}
        )
    events.append({"ph": "M", "name": "process_name", "pid": chrome, "args": {"name": label}})
    recfn = {"host": host, "pid": pid, "rank": rank}
    events.append({"ph": "M", "name": RECFN_PROCESS, "pid": chrome, "args": recfn})
    return events


def _missing(value: Any) -> bool:
    """Whether a value read from a table is null (None from Arrow; NaN, NA or NaT from pandas)."""
    return value is None or bool(pd.isna(value))


Totals = tuple[np.ndarray, list[str], np.ndarray]
"""Memory rows (positions), their series keys and running totals, in row order."""


def memory_totals(rows: Rows) -> Totals:
    """Running totals of the table's memory rows (`_running_totals`)."""
    needed = ["kind", "pid", "host", "name", "device", "memory_bytes", "start_ns"]
    if "memory_bytes" not in rows.columns:
        return np.zeros(0, dtype=np.int64), [], np.zeros(0, dtype=np.int64)
    positions, memory = rows.where(MEMORY, needed)
    if not len(positions):
        return np.zeros(0, dtype=np.int64), [], np.zeros(0, dtype=np.int64)
    found = _running_totals(memory.reset_index(drop=True))
    order = [i for i, _, _ in found]
    return (
        positions[order],
        [key for _, key, _ in found],
        np.array([total for _, _, total in found], dtype=np.int64),
    )


def encode_part(
    part: pd.DataFrame | pa.Table, layout: Layout, totals: Totals | None = None, first: int = 0
) -> bytes:
    """`encode_events` of a batch of rows (`Rows.parts`). A table's closed ranges, the rows a
    capture holds, are written straight from its Arrow columns (`_Complete.of_table`: the same
    JSON without a DataFrame), its other rows from their frame."""
    if not isinstance(part, pa.Table):
        return encode_events(part, layout, totals, first)
    start, end = _table_ints(part, "start_ns", 0), _table_ints(part, "end_ns", 0)
    closed = _closed_ranges(part)
    rest = np.flatnonzero(~closed)
    if start is None or end is None or not closed.any():
        return encode_events(_frame(part), layout, totals, first)
    large = times_large(start, end, layout.base_ns)
    fields = _Complete.of_table(part.filter(pa.array(closed)) if rest.size else part, layout, large)
    if fields is None:
        return encode_events(_frame(part), layout, totals, first)
    parts = [fields.encoded()]
    if rest.size:
        others = part.take(pa.array(rest))
        plain = totals is None or not len(totals[0])  # no memory rows among them
        marks = _plain_marks(others, layout, large[0]) if plain else None
        if marks is None:
            marks = _other_parts(_frame(others), layout, totals, rest, first, large)
        parts.append(marks)
    return b",".join(each for each in parts if each)


def _plain_marks(table: pa.Table, layout: Layout, large: bool) -> bytes | None:
    """The JSON of `table`'s rows when every one is a plain mark (synchronous, no args: a
    profile's own start and stop marks), as `other_events` writes them from their frame, read
    from the Arrow columns (the frame of two rows cost more than the rest of a batch's Python);
    None where the frame is needed. `large` is the batch's start times' `times_large`."""
    n = table.num_rows
    names = table.column_names
    if layout.remapped or not pc.all(pc.fill_null(pc.equal(table["kind"], MARK), False)).as_py():
        return None
    if "is_async" in names and pc.any(pc.fill_null(table["is_async"], False)).as_py():
        return None
    if "args" in names and table["args"].null_count < n:
        return None
    for column, _, unset in TORCH_ARGS:
        if column in names:
            values = _table_ints(table, column, unset)
            if values is None or bool((values != unset).any()):
                return None
    if any(column in names and table[column].null_count < n for column, _ in LIST_ARGS):
        return None
    if _has_device_times(table):
        return None
    read = {c: _table_ints(table, c, 0) for c in INT_FIELDS if c in names}
    if any(v is None for v in read.values()):
        return None
    found = cast(dict[str, np.ndarray], read)
    ts = micros(found["start_ns"] - layout.base_ns, large)
    pid = found["pid"].tolist() if "pid" in found else [0] * n
    tid = found["thread_id"].tolist()
    name = ["" if v is None else str(v) for v in table["name"].to_pylist()]
    scopes = table["scope"].to_pylist() if "scope" in names else [None] * n
    cat = [layout.categories.get(c, c) for c in ("" if v is None else str(v) for v in scopes)]
    links: list[dict[str, Any]] = [{}] * n
    if "id" in found:
        parents = None
        if "parent_id" in found:
            parents = (found["parent_id"].tolist(), table["parent_id"].is_valid().to_pylist())
        links = _link_fields(found["id"].tolist(), parents)
    events = [
        {
            "ph": "i",
            "cat": cat[i],
            "name": name[i],
            "pid": pid[i],
            "tid": tid[i],
            "ts": ts[i],
            "s": "t",
            "args": {},
            **links[i],
        }
        for i in range(n)
    ]
    return msgspec.json.encode(events)[1:-1]


def encode_events(
    df: pd.DataFrame, layout: Layout, totals: Totals | None = None, first: int = 0
) -> bytes:
    """The JSON of the Chrome events of `df`'s rows, comma-separated (no brackets): one event
    per row (two for a closed async range, and memory events a counter beside), the complete
    ranges first ("X", built column-wise: `complete_events`), then the others in the order
    `other_events` gives them. `first` is the table's row that `df` starts at."""
    ranges, open_range, is_async = _range_masks(df)
    complete = ranges & ~open_range & ~is_async
    parts = [complete_events(df, layout, np.flatnonzero(complete))]
    rest = np.flatnonzero(~complete)
    if len(rest):
        start, end = ints(df["start_ns"], 0), ints(df["end_ns"], 0)
        large = times_large(start, end, layout.base_ns)
        parts.append(_other_parts(df.iloc[rest], layout, totals, rest, first, large))
    return b",".join(part for part in parts if part)


def times_large(start: np.ndarray, end: np.ndarray, base_ns: int) -> tuple[bool, bool, bool]:
    """Whether a batch's starts, durations and ends (nulls 0) are written with three decimals
    (`large_micros`): each time column's text is chosen for the whole batch."""
    return (
        large_micros(start - base_ns),
        large_micros(np.maximum(end - start, 0)),
        large_micros(np.maximum(end, start) - base_ns),
    )


def _other_parts(
    others: pd.DataFrame,
    layout: Layout,
    totals: Totals | None,
    rest: np.ndarray,
    first: int,
    large: tuple[bool, bool, bool],
) -> bytes:
    """The JSON of a batch's rows that are not closed ranges (`other_events`): `others` holds
    them, found at `rest` in the batch that starts at the table's row `first`; `totals` are
    the batch's memory totals, `large` its `times_large`."""
    if totals is not None:  # memory rows are among them: `totals` only points there
        totals = (np.searchsorted(rest, totals[0]), totals[1], totals[2])
    start, end = ints(others["start_ns"], 0), ints(others["end_ns"], 0)
    ts = micros(start - layout.base_ns, large[0])
    end_ts = micros(np.maximum(end, start) - layout.base_ns, large[2])
    args = _event_args(others)
    events = other_events(others, layout, totals, args, ts, end_ts, (rest + first).tolist())
    return msgspec.json.encode(events)[1:-1] if events else b""


def _closed_ranges(table: pa.Table) -> np.ndarray:
    """Which rows of `table` are closed, synchronous ranges (`_range_masks` of its frame)."""
    mask = pc.and_(pc.fill_null(pc.equal(table["kind"], RANGE), False), table["end_ns"].is_valid())
    if "is_async" in table.column_names:
        mask = pc.and_(mask, pc.invert(pc.fill_null(table["is_async"], False)))
    return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)


def _range_masks(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which rows of `df` are ranges, which are still open (no end), which are async."""
    is_async = (
        np.array(df["is_async"].fillna(False), dtype=bool)
        if "is_async" in df.columns
        else np.zeros(len(df), dtype=bool)
    )
    return equals(df["kind"], RANGE), nulls(df["end_ns"]), is_async


def complete_events(
    df: pd.DataFrame, layout: Layout, rows: np.ndarray, use_native: bool = True
) -> bytes:
    """The "X" events of the closed ranges at `rows` of `df`, comma-separated, exactly as msgspec
    writes ``{"ph": "X", "cat", "name", "pid", "tid", "ts", "dur", "args", "recfn_id",
    "recfn_parent_id"}`` (see `other_events` for what each holds), but built a column at a time
    (a Python dict per event cost 6-8 us): in one native pass without the GIL where
    recfn.native._cchrome is built (and `use_native`), else in Arrow's kernels."""
    if not len(rows):
        return b""
    return _Complete.of_frame(df, layout, rows).encoded(use_native)


ENCODE_COMPLETE: Any = getattr(native.extension("_cchrome"), "encode_complete", None)
"""recfn.native._cchrome's writer of complete events, None where it is not built."""


class _Complete:
    """What complete events are written from: times in nanoseconds after the base (each
    column's text chosen for the whole batch, as `micros` chooses it: `large`), Chrome pids,
    thread ids, names and categories as codes into their JSON texts, each row's args object
    (`_args_parts`), the integer fields added to it and the rows whose object is already whole
    (not `slow`), ids, parent ids and which rows have no parent."""

    def __init__(
        self,
        ts: np.ndarray,
        dur: np.ndarray,
        large: tuple[bool, bool],
        pid: np.ndarray,
        tid: np.ndarray,
        names: tuple[np.ndarray, list[str]],
        cats: tuple[np.ndarray, list[str]],
        args: tuple[pa.Array, list[Added], np.ndarray],
        ids: tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None],
    ) -> None:
        self.ts, self.dur, self.large, self.pid, self.tid = ts, dur, large, pid, tid
        self.names, self.cats = names, cats
        self.args, self.added, self.slow = args
        self.ids, self.parents, self.roots = ids

    @classmethod
    def of_frame(cls, df: pd.DataFrame, layout: Layout, rows: np.ndarray) -> _Complete:
        """The complete events at `rows` of `df`."""
        start = ints(df["start_ns"], 0)
        end = ints(df["end_ns"], 0)
        ts, dur = start - layout.base_ns, np.maximum(end - start, 0)
        ids = ints(df["id"], 0)[rows] if "id" in df.columns else None
        has_parents = ids is not None and "parent_id" in df.columns
        return cls(
            ts[rows],
            dur[rows],
            (large_micros(ts), large_micros(dur)),
            np.asarray(layout.chrome_pids(df), dtype=np.int64)[rows],
            ints(df["thread_id"], 0)[rows],
            _json_codes(df["name"], {}, rows),
            _json_codes(df["scope"], layout.categories, rows)
            if "scope" in df.columns
            else (np.zeros(len(rows), dtype=np.int64), ['""']),
            _args_parts(df, rows),
            (
                ids,
                ints(df["parent_id"], 0)[rows] if has_parents else None,
                nulls(df["parent_id"])[rows] if has_parents else None,
            ),
        )

    @classmethod
    def of_table(
        cls, table: pa.Table, layout: Layout, large: tuple[bool, bool, bool]
    ) -> _Complete | None:
        """The rows of `table`, closed synchronous ranges all, as complete events read from
        its Arrow columns (no DataFrame), in a batch whose times are `large` (`times_large`):
        what `of_frame` reads from their frame. None where the frame is needed: args other
        than integers, columns of other types, pids the layout changes."""
        n = table.num_rows
        names = table.column_names
        if not n or layout.remapped:
            return None
        if "args" in names and table["args"].null_count < n:
            return None
        if _has_device_times(table):
            return None  # their args are written from the frame (`_event_args`)
        added: list[Added] = []
        for column, key, unset in TORCH_ARGS:
            if column in names:
                values = _table_ints(table, column, unset)
                if values is None:
                    return None
                added.append((key, values != unset, values))
        for column, key in LIST_ARGS:
            if column in names and table[column].null_count < n:
                if not pa.types.is_int64(table.schema.field(column).type):
                    return None  # lists, or integers that a frame holds as floats
                filled = np.asarray(table[column].is_valid().to_numpy(zero_copy_only=False))
                counts = _table_ints(table, column, 0)
                assert counts is not None  # int64
                added.append((key, filled, counts))
        read = {c: _table_ints(table, c, 0) for c in INT_FIELDS if c in names}
        name_codes = _table_json_codes(table["name"], {})
        cat_codes = (
            _table_json_codes(table["scope"], layout.categories)
            if "scope" in names
            else (np.zeros(n, dtype=np.int64), ['""'])
        )
        if name_codes is None or cat_codes is None or any(v is None for v in read.values()):
            return None
        found = cast(dict[str, np.ndarray], read)
        start, end = found["start_ns"], found["end_ns"]
        ids = found.get("id")
        has_parents = ids is not None and "parent_id" in found
        return cls(
            start - layout.base_ns,
            np.maximum(end - start, 0),
            large[:2],
            found.get("pid", np.zeros(n, dtype=np.int64)),
            found["thread_id"],
            name_codes,
            cat_codes,
            (_empty_objects(n), [a for a in added if a[1].any()], np.zeros(n, dtype=bool)),
            (
                ids,
                found["parent_id"] if has_parents else None,
                np.asarray(table["parent_id"].is_null().to_numpy(zero_copy_only=False))
                if has_parents
                else None,
            ),
        )

    def encoded(self, use_native: bool = True) -> bytes:
        """The events' JSON: in one native pass without the GIL where recfn.native._cchrome is
        built (and `use_native`), else in Arrow's kernels."""
        return self.native() if use_native and ENCODE_COMPLETE is not None else self.arrow()

    def native(self) -> bytes:
        n = len(self.ts)
        args = self.args
        buffers = args.buffers()
        args_at = np.frombuffer(buffers[1], dtype=np.int64)[args.offset : args.offset + n + 1]
        labels = _text_table([_label(key) for key, _, _ in self.added])
        has = np.zeros((len(self.added), n), dtype=np.uint8)
        values = np.zeros((len(self.added), n), dtype=np.int64)
        for k, (_, rows_with, column) in enumerate(self.added):
            has[k], values[k] = rows_with, column
        none = np.zeros(0, dtype=np.int64)
        encoded: bytes = ENCODE_COMPLETE(
            np.ascontiguousarray(self.ts, dtype=np.int64),
            np.ascontiguousarray(self.dur, dtype=np.int64),
            int(self.large[0]) | 2 * int(self.large[1]),
            np.ascontiguousarray(self.pid, dtype=np.int64),
            np.ascontiguousarray(self.tid, dtype=np.int64),
            self.names[0],
            *_text_table(self.names[1]),
            self.cats[0],
            *_text_table(self.cats[1]),
            np.ascontiguousarray(args_at),
            buffers[2] if buffers[2] is not None else b"",
            (~self.slow).astype(np.uint8),
            *labels,
            has,
            values,
            np.ascontiguousarray(self.ids) if self.ids is not None else none,
            np.ascontiguousarray(self.parents) if self.parents is not None else none,
            self.roots.astype(np.uint8) if self.roots is not None else np.zeros(0, np.uint8),
            0 if self.ids is None else 1 if self.parents is None else 2,
        )
        return encoded

    def arrow(self) -> bytes:
        def texts(codes_and_texts: tuple[np.ndarray, list[str]]) -> pa.Array:
            codes, values = codes_and_texts
            return pa.array(values, pa.string()).take(pa.array(codes))

        pieces: list[Any] = [
            '{"ph":"X","cat":',
            texts(self.cats),
            ',"name":',
            texts(self.names),
            ',"pid":',
            _int_texts(self.pid),
            ',"tid":',
            _int_texts(self.tid),
            ',"ts":',
            micros_text(self.ts, self.large[0]),
            ',"dur":',
            micros_text(self.dur, self.large[1]),
            ',"args":',
            _with_added(self.args, self.added, ~self.slow),
        ]
        if self.ids is not None:
            pieces += [',"recfn_id":', _int_texts(self.ids)]
            if self.parents is not None and self.roots is not None:
                parent = _int_texts(self.parents)
                pieces += [',"recfn_parent_id":', pc.if_else(pa.array(self.roots), "null", parent)]
        pieces.append("},")
        text = pa.large_string()  # 64-bit offsets: a batch's JSON may pass 2 GiB (long args)
        joined = pc.binary_join_element_wise(
            *(pa.scalar(p, text) if isinstance(p, str) else p.cast(text) for p in pieces),
            pa.scalar("", text),
        )
        return _string_bytes(joined)[:-1]


INT_FIELDS = ("start_ns", "end_ns", "thread_id", "pid", "id", "parent_id")
"""The integer columns a complete event is written from (the first three always there)."""


def _table_ints(table: pa.Table, column: str, null: int) -> np.ndarray | None:
    """An integer column of `table` as int64 numpy, nulls as `null` (`ints` of its frame's
    column); None for a column of another type."""
    field = table.schema.field(column)
    if not pa.types.is_integer(field.type) or pa.types.is_uint64(field.type):
        return None
    values = pc.fill_null(table[column], null) if table[column].null_count else table[column]
    return np.asarray(values.to_numpy(), dtype=np.int64)


def _table_json_codes(
    column: pa.ChunkedArray, renamed: dict[str, str]
) -> tuple[np.ndarray, list[str]] | None:
    """`_json_codes` of a string column (plain or dictionary-encoded) read from Arrow: each
    row's code into the JSON texts of the values it uses, ``""`` for nulls. None for a column
    of another type."""
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return None
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    values = array.dictionary
    if values.null_count:
        return None
    codes = pc.fill_null(array.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    # The dictionary's values in use, in order, and each row's rank among them (what
    # np.unique(return_inverse=True) gives, counted instead of sorted): -1 (null) first.
    present = np.bincount(codes + 1, minlength=len(values) + 1) > 0
    used = np.flatnonzero(present) - 1
    codes = (np.cumsum(present) - 1)[codes + 1]
    texts = ['""'] if used.size and used[0] < 0 else []
    texts += [
        msgspec.json.encode(renamed.get(value, value)).decode()
        for value in values.take(pa.array(used[used >= 0])).to_pylist()
    ]
    return codes, texts


def _empty_objects(n: int) -> pa.Array:
    """`n` args objects ``{}`` as a large string array."""
    offsets = pa.py_buffer((2 * np.arange(n + 1, dtype=np.int64)).tobytes())
    return pa.LargeStringArray.from_buffers(n, offsets, pa.py_buffer(b"{}" * n))


def _text_table(texts: list[str]) -> tuple[np.ndarray, bytes]:
    """`texts` as the native writer reads a table of them: offsets (n + 1) and UTF-8 bytes."""
    blobs = [t.encode() for t in texts]
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    return offsets, b"".join(blobs)


def _label(key: str) -> str:
    """What precedes an added integer field's value in args: ``,"key":``."""
    return "," + msgspec.json.encode(key).decode() + ":"


def _json_codes(
    series: pd.Series, renamed: dict[str, str], rows: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """The JSON string of each value of `series` at `rows` (``str`` of it, `renamed` where it
    says, ``""`` for nulls) as codes into the texts of the distinct values, each encoded once."""

    def text(value: Any) -> str:
        return msgspec.json.encode(renamed.get(str(value), str(value))).decode()

    if isinstance(series.dtype, pd.CategoricalDtype):
        used, codes = np.unique(series.cat.codes.to_numpy()[rows], return_inverse=True)
        categories = series.cat.categories
        texts = ['""' if k < 0 else text(categories[k]) for k in used.tolist()]
        return codes.astype(np.int64).reshape(-1), texts
    found, uniques = pd.factorize(series.to_numpy(dtype=object)[rows])
    texts = [text(u) for u in uniques]
    texts.append('""')  # the code of nulls, -1
    return found.astype(np.int64) % len(texts), texts


def _int_texts(values: np.ndarray) -> pa.Array:
    return pa.array(values, pa.int64()).cast(pa.string())


Added = tuple[str, np.ndarray, np.ndarray]
"""An integer field added to args: its key, the rows that have it, its values."""


def _args_parts(df: pd.DataFrame, rows: np.ndarray) -> tuple[pa.Array, list[Added], np.ndarray]:
    """The args of the rows at `rows` (`_event_args`' dict as msgspec writes it), a column at a
    time where it can: (each row's JSON object, the integer `TORCH_ARGS` and `LIST_ARGS` fields
    to add at its end, the rows whose object is already whole). The object is an ``args`` text
    that is a JSON object, compacted, or ``{}``; other rows (text that is no object, such a key
    already in it, list values) take the dicts, which hold every field."""
    n = len(rows)
    text = pa.large_string()
    slow = np.zeros(n, dtype=bool)
    added: list[Added] = []
    for column, key, unset in TORCH_ARGS:
        if column in df.columns:
            values = ints(df[column], unset)[rows]
            added.append((key, values != unset, values))
    for column, key in LIST_ARGS:
        if column not in df.columns:
            continue
        filled = df[column].notna().to_numpy()[rows]
        if pd.api.types.is_integer_dtype(df[column].dtype):
            added.append((key, filled, ints(df[column], 0)[rows]))
        else:
            slow |= filled  # lists (shapes, stacks): the dicts
    added = [(key, has, values) for key, has, values in added if has.any()]
    slow |= _device_timed(df)[rows]  # a device name is no integer: the dicts
    base = pa.array(["{}"] * n, text) if n else pa.array([], text)
    if "args" in df.columns:
        texts = df["args"].to_numpy(dtype=object)[rows]
        present = np.flatnonzero(pd.notna(texts))
        if len(present):
            try:
                strings = pa.array(texts[present], text)
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # values that are no strings: as text
                strings = pa.array([str(t) for t in texts[present].tolist()], text)
            objects, compacted = _object_texts(strings)
            slow[present[~objects]] = True
            found = np.zeros(n, dtype=bool)
            found[present[objects]] = True
            at = np.zeros(n, dtype=np.int64)
            at[present[objects]] = np.arange(int(objects.sum()))
            if found.any():
                base = pc.if_else(pa.array(found), compacted.take(pa.array(at)), base)
            for key, has, _ in added:  # a key the text already holds: the dict replaces it
                quoted = msgspec.json.encode(key).decode() + ":"
                slow |= has & np.asarray(pc.match_substring(base, quoted).to_numpy(False))
    if slow.any():
        which = np.flatnonzero(slow)
        dicts = _event_args(df.iloc[rows[which]])
        encoded = pa.array(_split_objects(msgspec.json.encode(dicts), len(which)), text)
        at = np.zeros(n, dtype=np.int64)
        at[which] = np.arange(len(which))
        base = pc.if_else(pa.array(slow), encoded.take(pa.array(at)), base)
    return base, added, slow


def _with_added(base: pa.Array, added: list[Added], plain: np.ndarray) -> pa.Array:
    """`_args_parts`' objects with the added fields at their end, on the `plain` rows."""
    if not added:
        return base
    text = pa.large_string()
    nothing = pa.scalar("", text)
    pieces = []
    for key, has, values in added:
        field = pc.binary_join_element_wise(
            pa.scalar(_label(key), text), _int_texts(values).cast(text), nothing
        )
        pieces.append(pc.if_else(pa.array(has & plain), field, nothing))
    tail = pc.binary_join_element_wise(*pieces, nothing)
    empty = pc.equal(base, pa.scalar("{}", text))
    opened = pc.if_else(empty, pa.scalar("{", text), pc.utf8_slice_codeunits(base, 0, -1))
    tail = pc.if_else(empty, pc.utf8_slice_codeunits(tail, 1), tail)
    with_tail = pc.binary_join_element_wise(opened, tail, pa.scalar("}", text), nothing)
    return pc.if_else(pc.not_equal(tail, nothing), with_tail, base)


def _object_texts(texts: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Which of `texts` (large strings, no nulls) are one JSON object each, and those objects
    compacted (no whitespace between tokens, as msgspec writes them), in order. One check of
    them all when every one is: joined into a JSON list, msgspec finds each value where its
    text is (as many values, each as long as its text); the compacted list is cut likewise."""
    n = len(texts)
    large = pa.large_string()
    braces = pc.and_(pc.starts_with(texts, "{"), pc.ends_with(texts, "}"))
    if n and pc.all(braces).as_py():
        comma = pc.binary_join_element_wise(texts, pa.scalar(",", large), pa.scalar("", large))
        joined = b"[" + _string_bytes(comma)[:-1] + b"]"
        try:
            raws = _RAW_LIST.decode(joined)
            sizes = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
            written = pc.binary_length(texts).to_numpy(zero_copy_only=False)
            if len(raws) == n and np.array_equal(sizes, written):
                text = compact(joined)
                sizes = np.fromiter(map(len, _RAW_LIST.decode(text)), dtype=np.int64, count=n)
                # Values and the commas between them alternate: value k is entry 2k.
                starts = 1 + np.concatenate([[0], np.cumsum(sizes + 1)[:-1]])
                bounds = np.empty(2 * n, dtype=np.int64)
                bounds[0::2], bounds[1::2] = starts, starts + sizes
                kept = string_array(2 * n - 1, bounds, pa.py_buffer(text), np.ones(2 * n - 1, bool))
                return np.ones(n, dtype=bool), kept.take(pa.array(2 * np.arange(n)))
        except (ValueError, UnicodeDecodeError):  # msgspec's errors: each text alone says
            pass
    objects = np.zeros(n, dtype=bool)
    found = []
    for k, value in enumerate(texts.to_pylist()):
        if value[:1] == "{" and json_object(value) is not None:
            objects[k] = True
            found.append(compact(value.encode()))
    return objects, pa.array(found, large)


def _split_objects(encoded: bytes, count: int) -> list[bytes]:
    """The `count` JSON objects of the list `encoded` (as msgspec writes it), each its text."""
    return [bytes(raw) for raw in _RAW_LIST.decode(encoded)] if count else []


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def _string_bytes(strings: pa.Array) -> bytes:
    """The characters of a large string array's values, one after another."""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)
    first, last = int(offsets[strings.offset]), int(offsets[strings.offset + len(strings)])
    data: bytes = strings.buffers()[2].slice(first, last - first).to_pybytes()
    return data


def other_events(
    df: pd.DataFrame,
    layout: Layout,
    totals: Totals | None,
    args: list[dict[str, Any]],
    ts: list[Any],
    end_ts: list[Any],
    rows: list[int],
) -> list[dict[str, Any]]:
    """The events of the rows of `df` that are not closed ranges: "B" for open ranges (async
    ones "b"/"e", or the legacy phases they came with), "i" for marks (async ones "n"), torch's
    "[memory]" instants for memory events with a counter of the running total per process,
    name and device beside (`totals` of the rows of `df`; by default computed from `df`
    alone), "C" for counters, "s"/"t"/"f" for flows. ``ts`` and the ends of async ranges
    (`end_ts`) are exact microseconds after the layout's base (`micros`). Each row's ``id``
    and ``parent_id`` go into the event's ``recfn_id``/``recfn_parent_id``, so that recfn reads
    back the parents of ranges that overlap on one thread (asyncio tasks), which nesting alone
    cannot tell; an async range without one is identified by its row in the table (`rows`),
    which no other async range of the file has."""
    n = len(df)
    ranges, open_range, is_async = _range_masks(df)
    name = _strings(df["name"])
    cat = (
        [layout.categories.get(c, c) for c in _strings(df["scope"])] if "scope" in df else [""] * n
    )
    pid = layout.chrome_pids(df)
    tid = ints(df["thread_id"], 0).tolist()
    links = _links(df)

    def base(i: int, phase: str, time: Any = None) -> dict[str, Any]:
        event = {"ph": phase, "cat": cat[i], "name": name[i], "pid": pid[i], "tid": tid[i]}
        event["ts"] = ts[i] if time is None else time
        return event

    events = [
        {**base(i, "B"), "args": args[i], **links[i]}
        for i in np.flatnonzero(ranges & open_range & ~is_async).tolist()
    ]
    for i in np.flatnonzero(ranges & is_async).tolist():
        fields = _hoisted(args[i])
        phase = fields.pop("ph", "b")
        fields.setdefault("id", int(links[i].get("recfn_id", rows[i])))
        events.append({**base(i, phase), **fields, "args": args[i], **links[i]})
        if not open_range[i]:
            closing = ASYNC_RANGES.get(phase, "e")
            events.append({**base(i, closing, end_ts[i]), **fields})
    marks = equals(df["kind"], MARK)
    for i in np.flatnonzero(marks).tolist():
        fields = _hoisted(args[i])
        if is_async[i]:
            phase = fields.pop("ph", "n")
        else:
            phase, _ = fields.pop("ph", "i"), fields.setdefault("s", "t")
        events.append({**base(i, phase), **fields, "args": args[i], **links[i]})
    for i in np.flatnonzero(equals(df["kind"], FLOW)).tolist():
        fields = _hoisted(args[i])
        events.append({**base(i, fields.pop("ph", "s")), **fields, "args": args[i], **links[i]})
    for i in np.flatnonzero(equals(df["kind"], COUNTER)).tolist():
        events.append({**base(i, "C"), "args": args[i], **links[i]})
    if totals is None:
        found = _running_totals(df)
        totals = (
            np.array([i for i, _, _ in found], dtype=np.int64),
            [key for _, key, _ in found],
            np.array([total for _, _, total in found], dtype=np.int64),
        )
    memory_bytes = ints(df["memory_bytes"], 0) if "memory_bytes" in df.columns else None
    devices = _devices(df)
    for i, key, total in zip(totals[0].tolist(), totals[1], totals[2].tolist()):
        assert memory_bytes is not None  # memory rows have the column
        _hoisted(args[i])  # an imported instant's own fields ("s")
        own = _memory_args(args[i], name[i], int(memory_bytes[i]), total, devices[i])
        events.append({**base(i, "i"), "name": MEMORY_NAME, "s": "t", "args": own, **links[i]})
        counter = {**base(i, "C"), "cat": MEMORY_TOTALS, "args": {key: total}}
        events.append(counter)
    return events


def _hoisted(args: dict[str, Any]) -> dict[str, Any]:
    """The `HOISTED` fields that `args` (an imported event's) holds, taken out of it."""
    return {key: args.pop(key) for key in HOISTED if key in args}


def _devices(df: pd.DataFrame) -> list[Any]:
    if "device" not in df.columns:
        return [None] * len(df)
    devices: list[Any] = df["device"].astype(object).where(df["device"].notna(), None).tolist()
    return devices


def _memory_args(
    args: dict[str, Any], name: str, change: int, total: int, device: Any
) -> dict[str, Any]:
    """torch's memory instant args for a memory row (``Bytes``, ``Total Allocated``, ``Device
    Type``/``Device Id`` for cpu and cuda devices, ``Device`` for others); an imported row's own
    args (torch's values) win. A row not named "[memory]" keeps its name (``recfn_name``)."""
    own: dict[str, Any] = {"Bytes": change, "Total Allocated": total}
    if device is not None:
        kind, _, index = str(device).partition(":")
        if kind in TORCH_DEVICE_TYPES and (index.isdigit() or (kind == "cpu" and not index)):
            own["Device Type"] = TORCH_DEVICE_TYPES[kind]
            own["Device Id"] = int(index) if index else -1
        else:
            own["Device"] = str(device)
    if name != MEMORY_NAME:
        own["recfn_name"] = name
    return {**args, **{k: v for k, v in own.items() if k not in args}}


def _links(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per row: ``recfn_id`` and ``recfn_parent_id`` (null for roots); nothing without an
    ``id`` column."""
    if "id" not in df.columns:
        return [{}] * len(df)
    parents = None
    if "parent_id" in df.columns:
        parents = (ints(df["parent_id"], 0).tolist(), (~nulls(df["parent_id"])).tolist())
    return _link_fields(ints(df["id"], 0).tolist(), parents)


def _link_fields(
    ids: list[int], parents: tuple[list[int], list[bool]] | None
) -> list[dict[str, Any]]:
    """``recfn_id`` and, with a parent column (its values and which are present),
    ``recfn_parent_id`` (null where absent) of each row."""
    if parents is None:
        return [{"recfn_id": i} for i in ids]
    values, present = parents
    return [
        {"recfn_id": i, "recfn_parent_id": p if has else None}
        for i, p, has in zip(ids, values, present)
    ]


def _strings(series: pd.Series) -> list[str]:
    return [str(v) for v in series.astype(object).where(series.notna(), "").tolist()]


def _event_args(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per row: the ``args`` column (a JSON object is merged, other text kept under "args"),
    the `TORCH_ARGS` and `LIST_ARGS` columns."""
    args: list[dict[str, Any]] = [{} for _ in range(len(df))]
    if "args" in df.columns:
        texts = df["args"].to_numpy(dtype=object)
        present = np.flatnonzero(df["args"].notna().to_numpy()).tolist()
        for i, value in zip(present, _decode_many([str(texts[i]) for i in present])):
            args[i] = value
    for column, key, unset in TORCH_ARGS:
        if column in df.columns:
            values = ints(df[column], unset)
            for i in np.flatnonzero(values != unset).tolist():
                args[i][key] = int(values[i])
    for column, key in LIST_ARGS:
        if column in df.columns:
            filled = np.flatnonzero(df[column].notna().to_numpy())
            if pd.api.types.is_integer_dtype(df[column].dtype):  # counts: no object per row
                for i, count in zip(filled.tolist(), ints(df[column], 0)[filled].tolist()):
                    args[i][key] = count
                continue
            values = df[column].to_numpy(dtype=object)
            for i in filled.tolist():
                args[i][key] = _plain(values[i])
    timed = np.flatnonzero(_device_timed(df)).tolist()
    if timed:
        for column in DEVICE_COLUMNS:
            if column not in df.columns:
                continue
            key = ARG_COLUMNS[column]
            values = df[column].to_numpy(dtype=object)
            for i in timed:
                if not _missing(values[i]):
                    args[i][key] = str(values[i]) if column == "device" else int(values[i])
    return args


def _device_timed(df: pd.DataFrame) -> np.ndarray:
    """Which rows of `df` have a GPU time (`DEVICE_TIMES`), as a bool array."""
    timed = np.zeros(len(df), dtype=bool)
    for column in DEVICE_TIMES:
        if column in df.columns:
            timed |= df[column].notna().to_numpy()
    return timed


def _holds(data: pd.DataFrame | pa.Table, column: str) -> bool:
    """Whether `column` of an event table (Arrow or pandas) holds any value."""
    if isinstance(data, pa.Table):
        return column in data.column_names and data[column].null_count < data.num_rows
    return column in data.columns and bool(data[column].notna().any())


def _has_device_times(data: pd.DataFrame | pa.Table) -> bool:
    """Whether any row of an event table has a GPU time (`DEVICE_TIMES`)."""
    return any(_holds(data, column) for column in DEVICE_TIMES)


def args_columns_of(data: pd.DataFrame | pa.Table) -> list[str]:
    """The columns of an event table (Arrow or pandas) whose values its Chrome file carries in
    args (of `ARG_COLUMNS`: GPU times, FLOPs, hidden calls), for the file to say so
    (`ARGS_MEMBER`) and the reader to map them back."""
    names = data.column_names if isinstance(data, pa.Table) else list(data.columns)
    device = [c for c in DEVICE_COLUMNS if c in names] if _has_device_times(data) else []
    return device + [c for c in ARG_COLUMNS if c not in DEVICE_COLUMNS and _holds(data, c)]


def _decode_many(texts: list[str]) -> list[dict[str, Any]]:
    """`_decode_args` of each text; one decode of them all when each is one JSON object.

    The texts are joined into one JSON list, first split into raw values: when there are as
    many as texts and each is as long as its text, value k is text k (none starts or ends
    with a space, so each value begins where its text does), and the list decodes to them.
    """
    if texts and all(t[:1] == "{" and t[-1:] == "}" for t in texts):
        blobs = [t.encode() for t in texts]
        joined = b"[" + b",".join(blobs) + b"]"
        try:
            raws = _RAW_LIST.decode(joined)
            if len(raws) == len(blobs) and all(map(operator.eq, map(len, raws), map(len, blobs))):
                return _OBJECTS.decode(joined)
        except (ValueError, UnicodeDecodeError):  # msgspec's errors: the slower path says
            pass
    return [_decode_args(text) for text in texts]


_OBJECTS = msgspec.json.Decoder(list[dict[str, Any]])


def _decode_args(text: str) -> dict[str, Any]:
    value = json_object(text) if text.startswith("{") else None
    return value if value is not None else {"args": text}


def _plain(value: Any) -> Any:
    """numpy containers and scalars (as pyarrow's to_pandas gives them) as JSON-ready Python."""
    if isinstance(value, np.ndarray | list | tuple):
        return [_plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def distributed_info(layout: Layout, metadata: dict[str, str]) -> dict[str, Any]:
    """HTA's ``distributedInfo`` (``rank``, ``world_size``) for a table of one rank, else {}."""
    ranks = layout.ranks()
    if len(ranks) != 1 or ranks[0] < 0:
        return {}
    info: dict[str, Any] = {"rank": ranks[0]}
    world = metadata.get("recfn.world_size", "")
    if world.lstrip("-").isdigit() and int(world) > 0:
        info["world_size"] = int(world)
    return info


def _running_totals(df: pd.DataFrame) -> list[tuple[int, str, int]]:
    """(row, series key, running total) for memory events: a counter per (host, pid, name,
    device), keyed by the device (`NO_DEVICE` when none)."""
    rows = np.flatnonzero(equals(df["kind"], MEMORY))
    if rows.size == 0 or "memory_bytes" not in df.columns:
        return []
    device = (
        df["device"].astype(object).where(df["device"].notna(), NO_DEVICE).to_numpy()[rows]
        if "device" in df.columns
        else np.full(rows.size, NO_DEVICE, dtype=object)
    )
    series = pd.DataFrame(
        {
            "host": np.array(_strings(df["host"]), dtype=object)[rows] if "host" in df else "",
            "pid": ints(df["pid"], 0)[rows] if "pid" in df.columns else 0,
            "name": df["name"].astype(object).to_numpy()[rows],
            "device": device,
            "change": ints(df["memory_bytes"], 0)[rows],
        }
    )
    order = np.argsort(ints(df["start_ns"], 0)[rows], kind="stable")
    running = np.empty(rows.size, dtype=np.int64)
    running[order] = (
        series.iloc[order]
        .groupby(["host", "pid", "name", "device"], sort=False, dropna=False)["change"]
        .cumsum()
    )
    return list(zip(rows.tolist(), device.tolist(), running.tolist()))
