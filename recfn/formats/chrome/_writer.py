"""A recfn event table to Chrome trace events; see `chrome.write_chrome_trace`."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from recfn import native
from recfn.formats.chrome._json import compact, string_array
from recfn.formats.chrome._reader import (
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
    ("flops", "flops"),
    ("hidden_calls", "hidden calls"),
)
"""Optional columns written into args (the reader maps the first two back, as torch names them)."""


ROWS = 50_000
"""Rows encoded at a time when writing: the JSON of a large trace is never whole in memory."""


class Rows:
    """An event table, DataFrame or ``pyarrow.Table``, read as DataFrames of `ROWS` rows."""

    def __init__(self, data: pd.DataFrame | pa.Table) -> None:
        self.data = data
        self.columns = list(data.column_names if isinstance(data, pa.Table) else data.columns)
        self.count = data.num_rows if isinstance(data, pa.Table) else len(data)

    def frames(self, columns: list[str] | None = None) -> Iterator[tuple[int, pd.DataFrame]]:
        """(first row, frame) of consecutive rows, with only `columns` (default all)."""
        keep = [c for c in (columns or self.columns) if c in self.columns]
        for first in range(0, self.count, ROWS):
            yield first, self.take(slice(first, first + ROWS), keep)

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
            # Nullable int64 as Int64, not float64, which would round epoch nanoseconds.
            return part.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
        frame = data[columns] if columns is not None else data
        return frame.iloc[rows]

    def distinct(self, columns: list[str]) -> Rows:
        """These rows' values of `columns` with repeats left out, first occurrences in order:
        what a question about the distinct values (processes, threads) needs to read. A
        DataFrame's rows are all kept."""
        keep = [c for c in columns if c in self.columns]
        if not isinstance(self.data, pa.Table) or not keep or not self.count:
            return self
        table = self.data.select(keep).combine_chunks().unify_dictionaries()
        key, size = np.zeros(self.count, dtype=np.int64), 1
        for column in table.columns:
            array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
            if not pa.types.is_dictionary(array.type):
                array = pc.dictionary_encode(array)
            size *= len(array.dictionary) + 1
            if size >= 2**62:
                return self  # too many combinations to number: read every row
            key = key * (len(array.dictionary) + 1) + 1
            key += pc.fill_null(array.indices, -1).to_numpy(zero_copy_only=False)
        first = np.sort(np.unique(key, return_index=True)[1])
        return Rows(table.take(pa.array(first)))

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
        keys = [c for c in ("host", "pid", "rank") if c in rows.columns]
        processes: list[Any] = []
        threads: list[Any] = []
        scopes: set[Any] = set()
        wanted = [*keys, "thread_id", "thread_name", "scope"]
        for _, frame in rows.distinct(wanted).frames(wanted):
            frame = _with_process_keys(frame)
            processes.append(frame[["host", "pid", "rank"]].drop_duplicates(["host", "pid"]))
            if "thread_name" in frame.columns:
                named = frame[["host", "pid", "thread_id", "thread_name"]].dropna()
                threads.append(named.drop_duplicates(["host", "pid", "thread_id"]))
            if "scope" in frame.columns:
                scopes.update(map(str, pd.unique(frame["scope"].dropna().astype(object))))
        self.processes = _chrome_pids(_stacked(processes).drop_duplicates(["host", "pid"]))
        self.threads = _stacked(threads)
        if len(self.threads):
            self.threads = self.threads.drop_duplicates(["host", "pid", "thread_id"])
        self.has_hosts = "host" in rows.columns or "rank" in rows.columns
        self.remapped = bool((self.processes["chrome_pid"] != self.processes["pid"]).any())
        self._chrome = {
            (h, p): c
            for h, p, c in zip(
                self.processes["host"], self.processes["pid"], self.processes["chrome_pid"]
            )
        }
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
            for host, pid, rank, chrome in self.processes[
                ["host", "pid", "rank", "chrome_pid"]
            ].itertuples(index=False):
                events += _process_metadata(str(host), int(pid), int(rank), int(chrome))
        for host, pid, thread, name in self.threads.itertuples(index=False):
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": self._chrome[(str(host), int(pid))],
                    "tid": int(thread),
                    "args": {"name": str(name)},
                }
            )
        return events

    def ranks(self) -> list[int]:
        """The table's distinct ranks (-1: none)."""
        return sorted({int(r) for r in self.processes["rank"]})


def _with_process_keys(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with ``host`` ("" when absent), ``pid`` and ``rank`` (-1) as plain values."""
    return frame.assign(
        host=_strings(frame["host"]) if "host" in frame.columns else "",
        pid=ints(frame["pid"], 0) if "pid" in frame.columns else 0,
        rank=ints(frame["rank"], -1) if "rank" in frame.columns else -1,
    )


def _chrome_pids(processes: pd.DataFrame) -> pd.DataFrame:
    """`processes` (host, pid, rank) with a ``chrome_pid`` each: its pid, unless an earlier
    process of another host has that pid; then one above every pid of the table."""
    taken = set(processes["pid"].tolist())
    spare = max(taken, default=0) + 1
    chrome, used = [], set()
    for pid in processes["pid"].tolist():
        if pid in used:
            while spare in taken or spare in used:
                spare += 1
            pid = spare
        used.add(pid)
        chrome.append(pid)
    return processes.assign(chrome_pid=np.array(chrome, dtype=np.int64)).reset_index(drop=True)


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


def _stacked(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return pd.DataFrame(
            {"host": pd.Series(dtype=object), "pid": pd.Series(dtype=np.int64),
             "rank": pd.Series(dtype=np.int64)}
        )  # fmt: skip
    return pd.concat(frames, ignore_index=True)


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
    if len(rest):  # memory rows among them: `totals` only points there
        if totals is not None:
            totals = (np.searchsorted(rest, totals[0]), totals[1], totals[2])
        start, end = ints(df["start_ns"], 0), ints(df["end_ns"], 0)
        # Each time column's text is chosen for the whole batch (`micros`), as for "X" events.
        times = [micros(start - layout.base_ns), micros(np.maximum(end, start) - layout.base_ns)]
        at = rest.tolist()
        ts, end_ts = ([values[i] for i in at] for values in times)
        others_df = df.iloc[rest]
        args = _event_args(others_df)
        others = other_events(others_df, layout, totals, args, ts, end_ts, (rest + first).tolist())
        parts.append(msgspec.json.encode(others)[1:-1] if others else b"")
    return b",".join(part for part in parts if part)


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
    fields = _Complete(df, layout, rows)
    if use_native and ENCODE_COMPLETE is not None:
        return fields.native()
    return fields.arrow()


ENCODE_COMPLETE: Any = getattr(native.extension("_cchrome"), "encode_complete", None)
"""recfn.native._cchrome's writer of complete events, None where it is not built."""


class _Complete:
    """What the complete events at `rows` of `df` are written from: times in nanoseconds (each
    column's text chosen for the whole batch, as `micros` chooses it), pids, names and
    categories as codes into their JSON texts, each row's args object (`_args_parts`) and the
    integer fields added to it, ids."""

    def __init__(self, df: pd.DataFrame, layout: Layout, rows: np.ndarray) -> None:
        start = ints(df["start_ns"], 0)
        end = ints(df["end_ns"], 0)
        ts, dur = start - layout.base_ns, np.maximum(end - start, 0)
        self.large = (large_micros(ts), large_micros(dur))
        self.ts, self.dur = ts[rows], dur[rows]
        self.pid = np.asarray(layout.chrome_pids(df), dtype=np.int64)[rows]
        self.tid = ints(df["thread_id"], 0)[rows]
        self.names = _json_codes(df["name"], {}, rows)
        self.cats = (
            _json_codes(df["scope"], layout.categories, rows)
            if "scope" in df.columns
            else (np.zeros(len(rows), dtype=np.int64), ['""'])
        )
        self.args, self.added, self.slow = _args_parts(df, rows)
        self.ids = ints(df["id"], 0)[rows] if "id" in df.columns else None
        has_parents = self.ids is not None and "parent_id" in df.columns
        self.parents = ints(df["parent_id"], 0)[rows] if has_parents else None
        self.roots = nulls(df["parent_id"])[rows] if has_parents else None

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
    ids = ints(df["id"], 0).tolist()
    if "parent_id" not in df.columns:
        return [{"recfn_id": i} for i in ids]
    has_parent = ~nulls(df["parent_id"])
    parents = [p if has else None for p, has in zip(ints(df["parent_id"], 0).tolist(), has_parent)]
    return [{"recfn_id": i, "recfn_parent_id": p} for i, p in zip(ids, parents)]


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
    return args


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
