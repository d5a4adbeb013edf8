"""Chrome trace events (parsed JSON) to a recfn event table; see `recfn.formats.chrome.read_chrome_trace`.

Batches of the common shape are decoded by the native decoder (`NATIVE`, compiled builds) into
columns (`NativeBatch`); the others by msgspec into `Event` structs, whose ``args`` stay JSON text
(``msgspec.Raw``) unless an event's args are needed as values, and those that do not fit them
(unknown event fields, fields of other types) into plain dicts and lists. Each batch becomes
compact columns (numpy arrays, dictionary codes, Arrow strings) before the next is decoded, and
the table is built in Arrow from those (`events_table`), each intermediate dropped once used, so
that the peak stays within about 3x the table; ``read_chrome_trace``'s DataFrame is converted
from it (`frame_of`). Nothing here touches pandas per event.
"""

from __future__ import annotations

import ctypes
import decimal
import json
import operator
import re
import warnings
from collections.abc import Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter
from typing import Any, Final, Union, cast

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from msgspec.structs import astuple

from recfn import native
from recfn.errors import TraceFormatError
from recfn.formats.chrome._json import dumps, json_strings, loads, string_array
from recfn.formats.chrome._times import BEYOND, NO_TIME, exact_times, nanoseconds
from recfn.formats.columns import INT64_MAX, INT64_MIN
from recfn.formats.nesting import depths, nesting
from recfn.formats.schema import (
    BY_NAME,
    COUNTER,
    DROPPED_EVENTS_KEY,
    FLOW,
    IMPORTED_KINDS,
    MARK,
    MEMORY,
    METADATA_PREFIX,
    RANGE,
    REQUIRED,
    SCHEMA_VERSION_KEY,
    START_NS_KEY,
    UNKNOWN_HOST,
    build_metadata,
    constant_column,
    empty_table,
    frame,
    numpy_dtype,
)

CONSUMED = ("name", "cat", "ph", "ts", "dur", "pid", "tid", "args")
"""Event fields that map to columns; every other field is kept in ``args`` (but `IDS`)."""
IDS = ("recfn_id", "recfn_parent_id")
"""Event fields recfn writes with each row's ``id`` and ``parent_id``: the parent links that
nesting cannot rebuild (asyncio tasks' ranges overlap on one thread). Viewers ignore them."""
INSTANT_PHASES = ("i", "I", "R")
ASYNC_RANGES = {"b": "e", "S": "F"}
"""Async begin phases and the phases that end them: nestable ("b"/"e") and legacy ("S"/"F")."""
ASYNC_INSTANTS = ("n", "T", "p")
"""An instant on a nestable async track ("n"), a legacy async range's steps ("T", "p")."""
FLOW_PHASES = ("s", "t", "f")
ROW_PHASES = frozenset(
    ("X", "B", "E", "C", *INSTANT_PHASES, *ASYNC_RANGES, *ASYNC_RANGES.values(), *ASYNC_INSTANTS)
) | frozenset(FLOW_PHASES)
"""Phases whose events become rows; metadata ("M") are not events, and every other phase
(samples "P", objects "N"/"O"/"D", memory dumps "v"/"V", clock syncs "c", ...) is dropped and
counted."""
RECFN_PROCESS = "recfn_process"
"""The metadata event recfn writes per process: its host, pid and rank (args), where the
Chrome pid may differ from the process's own (two hosts' processes can share a pid)."""
SCOPES_MEMBER = "recfnScopes"
"""The top-level member of recfn's Chrome files that maps each category recfn wrote for a scope
(torch's ``user_annotation`` for ``user_scope``, ...) back to the scope."""
ARGS_MEMBER = "recfnArgColumns"
"""The top-level member of a file recfn wrote: the columns whose values its events carry in
args (`ARG_COLUMNS`), which the reader maps back; no other file's args are searched."""
MEMORY_TOTALS = "recfn_memory"
"""The category of the counters recfn writes beside its memory instants, so that viewers draw
the running totals: they repeat the memory rows, and are not read back."""
TORCH_MEMORY = "[memory]"
"""Name of torch's memory instants (args: Bytes, Device Type, Device Id, totals)."""
TORCH_DEVICE_TYPES = {0: "cpu", 1: "cuda"}
NO_DEVICE = "bytes"
"""Counter series key that recfn writes for memory events without a device."""
TORCH_INTS = {key: BY_NAME[key].default for key in ("sequence_nr", "fwd_thread_id")}
"""Columns from torch's integer args, and their values where absent."""
TORCH_KEYS = ("Sequence number", "Fwd thread id", "Input Dims", "Input type")
ARG_COLUMNS: Final = {
    "device": "recfn_device",
    "device_start_ns": "recfn_device_start_ns",
    "device_duration_ns": "recfn_device_duration_ns",
    "flops": "flops",
    "hidden_calls": "hidden calls",
}
"""Columns recfn writes into an event's args, and their keys: a range's GPU time (``cuda=True``),
its FLOPs and the library calls hidden below a traced call."""


Scalar = Union[str, int, float, bool, None]


class Event(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A trace event with only the fields torch, Chrome and recfn write, of the types
    `FIELD_TYPES` allows (so that decoding checks them); ``args`` as JSON text (``null`` when
    absent). ``s`` (instant scope), ``id`` and ``bp`` (flows) have no column and are kept in
    ``args``."""

    ph: Union[str, None] = None
    name: Scalar = None
    cat: Scalar = None
    ts: Union[float, None] = None
    dur: Union[float, None] = None
    pid: Scalar = None
    tid: Scalar = None
    s: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    bp: Any = msgspec.UNSET
    args: msgspec.Raw = msgspec.Raw(b"null")
    recfn_id: Union[int, None] = None
    recfn_parent_id: Union[int, None] = None


KEPT = ("bp", "id", "s")
"""`Event` fields without a column, in the order they go into ``args``."""


EVENTS = msgspec.json.Decoder(list[Event])
"""Decodes a JSON list of events that fit `Event`; msgspec.ValidationError for others."""


def decode_events(
    text: bytes | memoryview, max_depth: int, *, bracketed: bool = True
) -> list[Any] | NativeBatch:
    """The JSON list of events `text`: a `NativeBatch` where the native decoder reads it (it
    then has checked that the JSON nests at most `max_depth` levels, the list's own included),
    else `Event` structs, or plain values when some do not fit them; the plain decode's errors
    propagate (msgspec.ValidationError for numbers beyond float64, ValueError for text that is
    not JSON). Unless `bracketed`, `text` is the list's members alone (what lies between its
    brackets: a view of a stream's text, which the native decoder reads without a copy; the
    list's text is made only where it does not)."""
    if NATIVE is not None:
        # The args text is copied into Arrow's memory pool, where the table's strings are
        # gathered from such parts later: the memory a part frees is reused there, not kept by
        # another allocator (which would add up to the peak).
        columns = NATIVE(text, max_depth, *TORCH_INTS.values(), pa.allocate_buffer, not bracketed)
        if columns is not None:
            try:
                others = [] if columns["others"] is None else EVENTS.decode(columns["others"])
                if columns["others.large"]:  # else no time lost nanoseconds in a float
                    others = exact_times(others, columns["others"])
                return NativeBatch(columns, others)
            except msgspec.ValidationError:  # an other event does not fit `Event`: nor does text
                return _plain(listed(text, bracketed))
    text = listed(text, bracketed)
    try:
        return exact_times(EVENTS.decode(text), text)
    except msgspec.ValidationError:
        return _plain(text)


def listed(text: bytes | memoryview, bracketed: bool) -> bytes:
    """The JSON list whose text, or whose members' text (not `bracketed`), is `text`."""
    return text if bracketed and isinstance(text, bytes) else b"".join((b"[", text, b"]"))


def _plain(text: bytes) -> list[Any]:
    """The events of `text` as plain values (dicts, lists...), large times exact
    (`exact_times`)."""
    values: list[Any] = loads(text)
    return exact_times(values, text) if isinstance(values, list) else values


def _native(name: str) -> Any:
    """The function `name` of recfn.native._cchrome (built with the compiled modules), or None."""
    return getattr(native.extension("_cchrome"), name, None)


NATIVE: Any = _native("decode")
"""The native decoder of batches of the common shape (`NativeBatch`), None where it is not
built; the msgspec path decodes the others, and every batch when this is None (tests set it)."""
NEST: Any = _native("nest")
"""recfn.native._cchrome's one-pass nesting (`recfn.formats.nesting.nesting`), used with `NATIVE` (so that
tests that turn the native decoder off compare it with the numpy one)."""

_RELEASE: Any = _native("release")


def release_native() -> None:
    """Free the buffers the native decoder keeps from a batch for the next one (up to the
    batch's text size each): called when a read ends, so that they do not outlive it."""
    if _RELEASE is not None:
        _RELEASE()


class NativeBatch:
    """A batch decoded by recfn.native._cchrome: the columns of its complete events (`columns`: arrays
    as bytes, names and categories as codes into their distinct strings, args as compact JSON
    text in an Arrow buffer), and its other events as `Event` structs."""

    def __init__(self, columns: dict[str, Any], others: list[Event]) -> None:
        self.columns, self.others = columns, others

    def scalars(self) -> dict[str, Any]:
        """The complete events' columns, as `_scalars` gives them."""
        c = self.columns
        out: dict[str, Any] = {key: np.frombuffer(c[key], np.int64) for key in ("ts", "dur")}
        for key in ("name", "cat"):
            codes = np.frombuffer(c[f"{key}.codes"], np.int32)
            absent = codes < 0
            out[key] = pa.DictionaryArray.from_arrays(
                pa.array(codes, mask=absent) if absent.any() else pa.array(codes),
                pa.array(c[f"{key}.values"], pa.string()),
            )
        for key in ("pid", "tid"):
            out[key] = np.frombuffer(c[key], np.int64)
            if c[f"{key}.text.at"] is not None:  # strings among them (torch's "Spans")
                codes = np.frombuffer(c[f"{key}.text.codes"], np.int32)
                out[key] = out[key].astype(object)
                out[key][np.frombuffer(c[f"{key}.text.at"], np.int64)] = _objects(
                    c[f"{key}.text.values"]
                )[codes]
        for key in IDS:
            present = c[f"{key}.present"]
            out[key] = None if present is None else np.frombuffer(c[key], np.int64)
            out[f"{key}.present"] = None if present is None else np.frombuffer(present, bool)
        return out

    def columnar(self) -> dict[str, Any] | None:
        """The columns of the other events the native decoder read (flows and torch's memory
        instants; None without any): ts, pid, tid, name and cat as `scalars` gives them, their
        phase (a byte each), ``at`` (their positions among the batch's events that are not
        complete), ``args`` (the JSON text the other events' path gives their args) and a
        memory instant's ``bytes``, ``device_type`` (INT64_MIN: none) and ``device_id``."""
        c = self.columns
        n = c["columnar.n"]
        if not n:
            return None
        keys = ("ts", "pid", "tid", "at", "bytes", "device_type", "device_id")
        out: dict[str, Any] = {key: np.frombuffer(c[f"columnar.{key}"], np.int64) for key in keys}
        for key in ("name", "cat"):
            codes = np.frombuffer(c[f"columnar.{key}.codes"], np.int32)
            values = pa.array(c[f"columnar.{key}.values"], pa.string())
            out[key] = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), values)
        out["ph"] = np.frombuffer(c["columnar.ph"], np.uint8)
        offsets = np.frombuffer(c["columnar.args.offsets"], np.int64)
        data = pa.py_buffer(c["columnar.args.data"])
        out["args"] = string_array(n, offsets, data, np.ones(n, bool))
        return out


class Outline(msgspec.Struct, gc=False):
    """A trace as an object, its events as JSON text each; other members are ignored."""

    traceEvents: list[msgspec.Raw]
    baseTimeNanoseconds: int = 0


OUTLINE = msgspec.json.Decoder(Union[Outline, list[msgspec.Raw]])
"""Splits a trace into its events' JSON texts, without decoding them."""


class _TorchArgs(msgspec.Struct, gc=False):
    """The args that torch's events map to columns; the other args are skipped unparsed."""

    sequence_nr: Any = msgspec.field(default=None, name="Sequence number")
    fwd_thread_id: Any = msgspec.field(default=None, name="Fwd thread id")
    input_shapes: Any = msgspec.field(default=None, name="Input Dims")
    input_dtypes: Any = msgspec.field(default=None, name="Input type")


_TORCH_ARGS = msgspec.json.Decoder(list[Union[_TorchArgs, list[Any], str, int, float, bool, None]])
SHAPES = pa.list_(pa.list_(pa.int64()))
DTYPES = pa.list_(pa.string())
NUMBERS = frozenset({int, float, decimal.Decimal, type(None)})
SCALARS = frozenset({str, int, float, bool, type(None)})
FIELD_TYPES = {
    "ph": (frozenset({str, type(None)}), "a string"),
    "name": (SCALARS, "a string or number"),
    "cat": (SCALARS, "a string or number"),
    "pid": (SCALARS, "a string or number"),
    "tid": (SCALARS, "a string or number"),
    "ts": (NUMBERS, "a number"),
    "dur": (NUMBERS, "a number"),
    "recfn_id": (frozenset({int, type(None)}), "an integer"),
    "recfn_parent_id": (frozenset({int, type(None)}), "an integer"),
}
"""What each consumed field may be (None: absent), and how an error message says it."""


BATCH = 20_000
"""Events decoded at a time from a file decoded whole (a streamed file is decoded a chunk at a
time), and rows sorted into the table at a time: decoded structs are dropped once their
columns are built, so that memory holds compact columns, not the decoded trace."""


def events_table(
    columns: Columns, base_ns: int, source: str, members: dict[str, Any] | None = None
) -> pa.Table:
    """The event table, in the schema's Arrow types but for int32-indexed dictionaries (which
    ``conform`` narrows), of the trace events added to `columns`, with recfn's metadata (from a
    file recfn wrote, its ``otherData``; else new, with the host `UNKNOWN_HOST` and the file's
    other top-level `members` under `CHROME_MEMBERS_KEY`); `source` names the file in error
    messages. Events of phases the table has no place for, and ends without a beginning, are
    counted in ``recfn.dropped_events`` and warned about. Built straight from the columns, one
    copy of each, so that a conversion never holds a DataFrame beside the table."""
    if columns.events() >= TRIM_EVENTS:
        _release_free_memory()
    phases, fields, args, extras = columns.finish()
    ts, dur = fields.pop("ts"), fields.pop("dur")
    negative = (dur < 0) & (dur != NO_TIME) & (dur != BEYOND)
    if negative.any():
        raise TraceFormatError(
            f"{source}: an event has a negative dur ({float(dur[negative][0]) / 1000:g} us)"
        )
    dur[dur == NO_TIME] = 0  # "X" events without dur last 0 us
    name, pid, tid = fields["name"], fields["pid"], fields["tid"]

    rows = _Rows(base_ns, ts, source)
    complete = phases.where("X")
    rows.add(complete, RANGE, end=_ends(ts[complete], dur[complete]))
    del complete, dur
    dropped = _Dropped(phases)
    dropped.add("E", _add_begin_end(rows, phases, pid, tid, args))
    _add_instants(rows, phases, name, args)
    _add_counters(rows, phases, fields["cat"], args)
    _add_async(rows, phases, fields, args, extras, dropped)
    _add_flows(rows, phases, args, dropped)
    rows.ts = ts = np.empty(0, np.int64)
    metadata, recfns = _metadata(members, dropped.warn(source))
    if rows.count() == 0:
        return empty_table((*REQUIRED, "args")).replace_schema_metadata(metadata)
    ids = {key: (fields.pop(key), fields.pop(f"{key}.present")) for key in IDS}
    del name, pid, tid
    table = _table(rows, phases, fields, args, ids, extras)
    scopes = (members or {}).get(SCOPES_MEMBER)
    if isinstance(scopes, dict):  # recfn wrote the file: its scopes as torch's categories
        table = _renamed_scopes(table, scopes)
    listed = (members or {}).get(ARGS_MEMBER)
    if isinstance(listed, list):
        table = args_columns(table, [c for c in ARG_COLUMNS if c in listed], source)
    if not recfns:  # another tool's trace: it starts at its first event
        metadata[START_NS_KEY] = str(pc.min(table.column("start_ns")).as_py())
    return table.replace_schema_metadata(metadata)


def args_columns(table: pa.Table, columns: list[str], source: str) -> pa.Table:
    """`table` (of a file recfn wrote) with the values of `columns` (of `ARG_COLUMNS`) moved
    from its events' args, where the writer put them, back into those columns (a key absent:
    null); args left empty become null, as they were. TraceFormatError naming `source` for a
    value of another kind."""
    if not columns or "args" not in table.column_names:
        return table
    args = table.column("args")
    keys = "|".join(re.escape(ARG_COLUMNS[c]) for c in columns)
    found = pc.match_substring_regex(args, f'"({keys})"\\s*:')
    rows = np.flatnonzero(np.asarray(pc.fill_null(found, False).to_numpy(zero_copy_only=False)))
    if not rows.size:
        return table
    read: dict[str, list[Any]] = {column: [] for column in columns}
    texts: list[str | None] = []
    for text in args.take(pa.array(rows)).to_pylist():
        values = json.loads(text)
        if not isinstance(values, dict):
            raise TraceFormatError(f"{source}: args that are not an object: {text[:200]}")
        for column in columns:
            value = _arg_value(column, values.pop(ARG_COLUMNS[column], None))
            if value is _REFUSED:
                raise TraceFormatError(
                    f"{source}: an event's {ARG_COLUMNS[column]!r} in its args is not "
                    f"{'a device name' if column == 'device' else 'an integer'}: {text[:200]}"
                )
            read[column].append(value)
        texts.append(
            json.dumps(values, separators=(",", ":"), ensure_ascii=False) if values else None
        )
    n = table.num_rows
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    replaced = {"args": (pa.string(), texts)}
    replaced.update(
        (column, (pa.string() if column == "device" else pa.int64(), read[column]))
        for column in columns
    )
    for column, (kind, values) in replaced.items():
        if column in table.column_names:
            before = table.column(column).combine_chunks()
            plain = before.cast(kind) if pa.types.is_dictionary(before.type) else before
        else:
            plain = pa.nulls(n, kind)
        merged = pc.replace_with_mask(plain.cast(kind), pa.array(mask), pa.array(values, kind))
        if column == "device":
            merged = pc.dictionary_encode(merged).cast(pa.dictionary(pa.int32(), pa.string()))
        at = table.schema.get_field_index(column)
        table = (
            table.set_column(at, column, merged) if at >= 0 else table.append_column(column, merged)
        )
    return table


_REFUSED: Final = object()


def _arg_value(column: str, value: Any) -> Any:
    """`value` as `column` holds it (None stays None), or `_REFUSED`: a device name; a start in
    int64; a duration, FLOPs or a count of zero or more (integral floats, as a frame holding
    floats writes them, taken as integers)."""
    if value is None:
        return None
    if column == "device":
        return value if isinstance(value, str) else _REFUSED
    if isinstance(value, float) and value.is_integer() and column != "device_start_ns":
        value = int(value)
    low = INT64_MIN + 1 if column == "device_start_ns" else 0
    return value if type(value) is int and low <= value < INT64_MAX else _REFUSED


def _renamed_scopes(table: pa.Table, scopes: dict[str, Any]) -> pa.Table:
    """`table` with the categories of `scopes` (``{category: scope}``, what recfn wrote for its
    scopes) back as those scopes."""
    column = table.column("scope").combine_chunks()
    values = [scopes.get(v, v) if isinstance(scopes.get(v, v), str) else v
              for v in column.dictionary.to_pylist()]  # fmt: skip
    codes, unique = pd.factorize(_objects(values))
    indices = codes[column.indices.fill_null(0).to_numpy(zero_copy_only=False)].astype(np.int32)
    renamed = pa.DictionaryArray.from_arrays(pa.array(indices), pa.array(unique, pa.string()))
    return table.set_column(table.schema.get_field_index("scope"), "scope", renamed)


def _metadata(members: dict[str, Any] | None, dropped: int) -> tuple[dict[str, str], bool]:
    """The table's metadata: a recfn file's own (``otherData``) with `dropped` added to its
    dropped events, else new metadata of an imported trace; and whether recfn wrote the file."""
    members = members or {}
    other = members.get("otherData")
    if isinstance(other, dict) and SCHEMA_VERSION_KEY in other:
        metadata = {k: str(v) for k, v in other.items() if k.startswith(METADATA_PREFIX)}
        before = metadata.get(DROPPED_EVENTS_KEY, "0")
        metadata[DROPPED_EVENTS_KEY] = str((int(before) if before.isdigit() else 0) + dropped)
        return metadata, True
    kept = {k: v for k, v in members.items() if k not in ("traceEvents", "baseTimeNanoseconds")}
    metadata = build_metadata(
        config=IMPORTED, dropped_events=dropped, host=UNKNOWN_HOST, chrome_members=kept
    )
    return metadata, False


IMPORTED: Final = {"imported": True}
"""The ``recfn.config`` of a trace recfn did not capture."""
IMPORTED_CONFIG: Final = json.dumps(IMPORTED, sort_keys=True)


class _Dropped:
    """Events the table has no place for, counted by phase."""

    def __init__(self, phases: _Phases) -> None:
        self.counts: dict[str, int] = {}
        for phase, count in phases.counts().items():
            if phase not in ROW_PHASES and phase != "M":
                self.counts[str(phase)] = count

    def add(self, phase: str, count: int) -> None:
        if count:
            self.counts[phase] = self.counts.get(phase, 0) + count

    def warn(self, source: str) -> int:
        """Warn about the dropped events (RuntimeWarning naming how many of each phase); their
        number."""
        total = sum(self.counts.values())
        if total:
            each = ", ".join(f"{phase!r}: {n}" for phase, n in sorted(self.counts.items()))
            warnings.warn(
                f"recfn: {source}: {total} event(s) that the event table has no place for were "
                f"dropped (by phase: {each}; an end phase counts the ends without a beginning); "
                "their number is in the metadata 'recfn.dropped_events'",
                RuntimeWarning,
                stacklevel=4,
            )
        return total


TRIM_EVENTS = 500_000
"""From this many events on, the memory decoding freed is handed back before the table is built
(trimming acts on the whole process and costs more the larger its heap)."""


def _release_free_memory() -> None:
    """Hand the memory that decoding freed back to the system before the table is built: the
    allocators keep it otherwise (glibc's heap, Arrow's pool), and it would count again on top
    of the table's peak. A no-op where the C library has no ``malloc_trim``."""
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError, TypeError):  # no such C library or function here
        return None


_LIBC = _libc()


def dictionaries_by_row(table: pa.Table) -> pa.Table:
    """`table` with each dictionary column holding only the values its rows use, in order of
    first use: how ``recfn.load`` has always stored an imported table (`events_table` orders them
    as ``read_chrome_trace``'s categoricals, by first event)."""
    for index, field in enumerate(table.schema):
        if not pa.types.is_dictionary(field.type):
            continue
        column = table.column(index).combine_chunks()
        codes, used = pd.factorize(column.indices.fill_null(-1).to_numpy(), use_na_sentinel=False)
        kept = used >= 0
        lookup = np.full(len(used), -1, dtype=np.int32)
        lookup[kept] = np.arange(np.count_nonzero(kept), dtype=np.int32)
        indices = lookup[codes]
        values = pa.DictionaryArray.from_arrays(
            pa.array(indices, mask=indices < 0), column.dictionary.take(pa.array(used[kept]))
        )
        table = table.set_column(index, field.name, values)
    return table


def frame_of(table: pa.Table) -> pd.DataFrame:
    """An imported table as a DataFrame in the dtypes of ``prof.to_pandas()`` (nullable
    ``Int64`` integers, categoricals, shared list cells: ``recfn.formats.schema.frame``), without
    attrs. Consumes `table`: each column's Arrow memory is released as it is converted, so that
    the table and the frame are not both held."""
    return frame(table, consume=True)


class _Args:
    """Every event's args: those of complete events as JSON strings already (`_ArgsPart`s), the
    others' (few; their args become rows and B/E pairs merge theirs) as values, indexed after
    the complete events'."""

    def __init__(
        self, complete: list[_ArgsPart], others: list[Any], columnar: _Columnar | None = None
    ) -> None:
        self.complete, self.others, self.columnar = complete, others, columnar
        self.offset = sum(len(part.strings) for part in complete)

    def __getitem__(self, i: int) -> Any:
        return self.others[self._other(i)]

    def __setitem__(self, i: int, value: Any) -> None:
        self.others[self._other(i)] = value

    def values(self, index: np.ndarray) -> list[Any]:
        """The args of the other events at `index`."""
        return _pick(self.others, self.other_index(index))

    def other_index(self, index: np.ndarray) -> np.ndarray:
        """Where the other events at `index` are in `others`."""
        if index.size and index.min() < self.offset:
            raise IndexError("complete events' args are JSON text already")
        return index - self.offset

    def _other(self, i: int) -> int:
        if i < self.offset:
            raise IndexError(f"event {i} is complete: its args are JSON text already")
        return i - self.offset

    def parts(self, source: str) -> list[_ArgsPart]:
        """The JSON parts of all events, the others' encoded now (after merges)."""
        later = _ArgsPart(self.others, source)
        if self.columnar is not None:  # their args are text already, their values None
            later.strings = self.columnar.args(later.strings)
        return [*self.complete, later]


class _ArgsPart:
    """Args of consecutive events as JSON strings, and the columns torch's args give them."""

    def __init__(self, values: list[Any], source: str) -> None:
        strings, text = json_strings(values, np.arange(len(values)))
        try:  # args kept as JSON text were not decoded, so nothing has checked their UTF-8 yet
            strings.validate(full=True)
        except pa.ArrowInvalid:
            raise TraceFormatError(f"{source}: an event's args are not valid UTF-8") from None
        self._torch(strings, text)

    @classmethod
    def native(cls, columns: dict[str, Any]) -> _ArgsPart:
        """The args part of a `NativeBatch`'s columns: its strings over the batch's args text,
        torch's integer args and "Input Dims" / "Input type" lists as it read them; where it
        left the lists to Python (values not of the simple form), the lists are decoded from
        the text, as `_torch` decodes them."""
        part = cls.__new__(cls)
        n, data = columns["n"], columns["args.data"]
        offsets = np.frombuffer(columns["args.offsets"], np.int64)
        present = np.frombuffer(columns["args.present"], bool)
        strings = string_array(n, offsets, data, present)
        part.strings = strings
        part.ints = {key: np.frombuffer(columns[key], np.int64) for key in TORCH_INTS}
        part.has_shapes = columns["args.has_input_dims"]
        if not part.has_shapes:
            part.shapes = _shapes(None, n)
        elif columns["input_shapes"] is not None:
            part.shapes = _native_shapes(columns, n)
        else:  # values not of the simple form: torch's args decoded from the text, as `_torch`
            bounds, view = offsets.tolist(), memoryview(data)
            text = b"[" + b",".join(view[lo:hi] for lo, hi in zip(bounds, bounds[1:])) + b"]"
            part.shapes = _shapes(_torch_args(text), n)
        return part

    def _torch(self, strings: pa.LargeStringArray, text: bytes) -> None:
        """Keep `strings`, and the columns torch's args give (`text`: the args as a JSON list)."""
        n = len(strings)
        self.strings = strings
        torch_args = _torch_args(text)
        self.ints = {
            key: _arg_ints(torch_args, key, default, n) for key, default in TORCH_INTS.items()
        }
        self.has_shapes = torch_args is not None and b'"Input Dims"' in text
        self.shapes = _shapes(torch_args if self.has_shapes else None, n)


def _native_shapes(columns: dict[str, Any], n: int) -> tuple[pa.Array, ...]:
    """The ``input_shapes`` / ``input_dtypes`` arrays of `n` events over the buffers the native
    decoder wrote (per level: offsets, validity bytes; then the values), without copying them;
    nulls where it wrote none (no event has either)."""
    if not columns["input_shapes"]:
        return _shapes(None, n)
    at, valid, item_at, item_valid, values, values_valid = columns["input_shapes"]
    dims = _array(pa.int64(), values_valid, [values])
    shapes = _array(SHAPES, valid, [at], _array(SHAPES.value_type, item_valid, [item_at], dims))
    at, valid, item_at, item_valid, data = columns["input_dtypes"]
    dtypes = _array(DTYPES, valid, [at], _array(pa.string(), item_valid, [item_at, data]))
    return shapes, dtypes


def _array(
    kind: pa.DataType, valid: bytes, buffers: list[bytes], child: pa.Array | None = None
) -> pa.Array:
    """An Arrow array of `kind` over `buffers`, one validity byte per value in `valid`, and
    the `child` values of a list."""
    bitmap = pa.py_buffer(np.packbits(np.frombuffer(valid, bool), bitorder="little"))
    return pa.Array.from_buffers(
        kind,
        len(valid),
        [bitmap, *map(pa.py_buffer, buffers)],
        children=None if child is None else [child],
    )


class Columns:
    """Columns of events added in batches (lists in file order, `BATCH` or so at a time keeps
    memory low), complete ("X") events first: each batch's complete events become compact
    columns at once; the others' fields are kept as values (they are few, and their args are
    needed as values)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.parts: list[dict[str, Any]] = []
        self.args: list[_ArgsPart] = []
        self.others: dict[str, list[Any]] = {key: [] for key in (*CONSUMED, *IDS, "extra")}
        self.columnar: list[dict[str, Any]] = []  # `NativeBatch.columnar`, ``at`` among others
        self.n_columnar = 0

    def add(self, events: list[Any] | NativeBatch) -> None:
        """Add a batch of events; TraceFormatError for numbers beyond float64 in the args of
        events that are not complete (decoded here)."""
        try:
            self._add(events)
        except msgspec.ValidationError as error:
            raise TraceFormatError(f"{self.source}: not a JSON trace: {error}") from None

    def _add(self, events: list[Any] | NativeBatch) -> None:
        if isinstance(events, NativeBatch):
            self._add_native(events)
            return
        n_complete, phases, fields = _columns(events, self.source)
        self.parts.append(_scalars(fields, slice(0, n_complete), self.source))
        self.args.append(_ArgsPart(fields["args"][:n_complete], self.source))
        self.others["ph"] += phases
        for key, values in fields.items():
            self.others[key] += values[n_complete:]

    def _add_native(self, batch: NativeBatch) -> None:
        """`add` for a `NativeBatch`: its complete events' columns as they are, its other
        events (no complete one among them) as `add` takes them."""
        self.parts.append(batch.scalars())
        self.args.append(_ArgsPart.native(batch.columns))
        columnar = batch.columnar()
        if columnar is not None:
            columnar["at"] = columnar["at"] + len(self.others["ph"]) + self.n_columnar
            self.columnar.append(columnar)
            self.n_columnar += len(columnar["ts"])
        if batch.others:
            _, phases, fields = _event_columns(batch.others)
            self.others["ph"] += phases
            for key, values in fields.items():
                self.others[key] += values

    def events(self) -> int:
        """Events added so far."""
        n_complete = sum(len(part["ts"]) for part in self.parts)
        return n_complete + len(self.others["ph"]) + self.n_columnar

    def finish(self) -> tuple[_Phases, dict[str, Any], _Args, list[Any]]:
        """Phases, scalar columns, args and the extra members of all events added."""
        n_others = len(self.others["ph"])
        n_complete = sum(len(part["ts"]) for part in self.parts)
        later = _scalars(self.others, slice(0, n_others), self.source)
        phases, values, extras = self.others["ph"], self.others["args"], self.others["extra"]
        columnar = None
        if self.columnar:
            columnar = _Columnar(self.columnar, n_others)
            later, phases = columnar.scalars(later), columnar.phases(phases)
            values, extras = columnar.values(values), columnar.values(extras)
            self.columnar = []
        parts = [*self.parts, later]
        self.parts.clear()
        sizes = [len(part["ts"]) for part in parts]
        fields: dict[str, Any] = {}
        for key in list(parts[0]):  # one column's parts are freed before the next is joined
            arrays = [part.pop(key) for part in parts]
            if key in ("name", "cat"):
                fields[key] = _Labels.join(arrays)
                continue
            if all(array is None for array in arrays):  # recfn's ids, absent from other traces
                fields[key] = None
                continue
            if key in ("pid", "tid") and len({array.dtype for array in arrays}) > 1:
                fields[key] = _Ids(arrays)
                continue
            fields[key] = _concatenate(
                [
                    np.zeros(size, bool if key.endswith(".present") else np.int64)
                    if array is None
                    else array
                    for array, size in zip(arrays, sizes)
                ]
            )
        return _Phases(n_complete, phases), fields, _Args(self.args, values, columnar), extras


def _first_use(labels: pa.DictionaryArray) -> pa.DictionaryArray:
    """`labels` with only the values its rows use, in order of first use (as
    ``dictionary_encode`` gives them)."""
    codes = labels.indices.fill_null(-1).to_numpy()
    used, first = np.unique(codes, return_index=True)
    order = used[np.argsort(first)]
    order = order[order >= 0]
    lookup = np.full(len(labels.dictionary) + 1, -1, dtype=np.int32)  # -1 (null) stays -1
    lookup[order] = np.arange(len(order), dtype=np.int32)
    indices = lookup[codes]
    return pa.DictionaryArray.from_arrays(
        pa.array(indices, mask=indices < 0), labels.dictionary.take(pa.array(order))
    )


_PHASE_OF = np.array([chr(byte) for byte in range(128)], dtype=object)
"""The phase of a columnar event whose ph is the byte at that index (`NativeBatch.columnar`)."""


class _Columnar:
    """The other events that native batches hold as columns (`NativeBatch.columnar`: flows and
    torch's memory instants, as `Columns` keeps them), put among the other events, where the
    file has them: the same columns, the same event numbers as when msgspec decodes them; only
    their args (text already) are not values (`_Args`), and a memory instant's Bytes and device
    are columns (`memory`)."""

    def __init__(self, parts: list[dict[str, Any]], n_others: int) -> None:
        self.parts = parts
        self.at = np.concatenate([part["at"] for part in parts])
        self.n = n_others + len(self.at)
        self.is_columnar = np.zeros(self.n, dtype=bool)
        self.is_columnar[self.at] = True
        self.other_at = np.flatnonzero(~self.is_columnar)
        self.source = np.empty(self.n, dtype=np.int64)  # in [others..., columnar...]: each one's
        self.source[self.other_at] = np.arange(n_others)
        self.source[self.at] = np.arange(n_others, self.n)

    def memory(self, others: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The Bytes and devices (as `_torch_device` names them) of the memory instants at
        `others` (positions among the other events)."""
        row = np.searchsorted(self.at, others)
        sizes = np.concatenate([part["bytes"] for part in self.parts])[row]
        kinds = np.concatenate([part["device_type"] for part in self.parts])[row]
        ids = np.concatenate([part["device_id"] for part in self.parts])[row]
        pair = _pair_codes(kinds, ids)  # 0, 1, ... by first appearance
        _, first = np.unique(pair, return_index=True)
        names = [
            None
            if kinds[at] == INT64_MIN
            else _torch_device({"Device Type": int(kinds[at]), "Device Id": int(ids[at])})
            for at in first.tolist()
        ]
        return sizes, _objects(names)[pair]

    def scalars(self, others: dict[str, Any]) -> dict[str, Any]:
        """`_scalars` of the other events, with the columnar ones'."""
        out: dict[str, Any] = {}
        for key, values in others.items():
            if key in ("name", "cat"):
                out[key] = self._labels(values, [part[key] for part in self.parts])
            elif key in ("ts", "pid", "tid"):
                out[key] = self._spread(values, np.concatenate([part[key] for part in self.parts]))
            elif key == "dur":
                out[key] = self._spread(values, np.full(len(self.at), NO_TIME, dtype=np.int64))
            elif values is not None:  # recfn's ids and their presence: none for these
                out[key] = self._spread(values, np.zeros(len(self.at), dtype=values.dtype))
            else:
                out[key] = None
        return out

    def phases(self, others: list[Any]) -> list[Any]:
        """The phases of the other events, with the columnar ones'."""
        columnar = _PHASE_OF[np.concatenate([part["ph"] for part in self.parts])]
        spread: list[Any] = self._spread(_objects(others), columnar).tolist()
        return spread

    def values(self, others: list[Any]) -> list[Any]:
        """Values of the other events (args, extra members), None for the columnar ones."""
        out: list[Any] = [None] * self.n
        for at, value in zip(self.other_at.tolist(), others):
            out[at] = value
        return out

    def args(self, others: pa.LargeStringArray) -> pa.LargeStringArray:
        """The args strings of the other events (`_ArgsPart`'s), with the columnar ones'."""
        columnar = pa.concat_arrays([part["args"] for part in self.parts])
        kept = others.take(pa.array(self.other_at))
        return pa.concat_arrays([kept, columnar]).take(pa.array(self.source))

    def _spread(self, others: np.ndarray, columnar: np.ndarray) -> np.ndarray:
        kind = object if object in (others.dtype, columnar.dtype) else others.dtype
        out = np.empty(self.n, dtype=kind)
        out[self.other_at] = others
        out[self.at] = columnar
        return out

    def _labels(self, others: Any, columnar: list[pa.DictionaryArray]) -> Any:
        if isinstance(others, pa.DictionaryArray):
            joined = pa.chunked_array([others, *columnar]).unify_dictionaries()
            return _first_use(pa.concat_arrays(joined.chunks).take(pa.array(self.source)))
        objects = [part.to_numpy(zero_copy_only=False) for part in columnar]
        return self._spread(others, np.concatenate(objects).astype(object))


def _shared(values: list[Any]) -> pa.DictionaryArray | np.ndarray:
    """`values` (names, categories) dictionary-encoded when all are strings or None, else as an
    object array in which equal values are one object: a trace repeats a few names many times,
    and four bytes a row are less than a pointer to a string each."""
    try:
        return pa.array(values, pa.string()).dictionary_encode()
    except (pa.ArrowException, UnicodeEncodeError):  # not all strings
        codes, uniques = pd.factorize(_objects(values), use_na_sentinel=False)
        return np.asarray(np.asarray(uniques, dtype=object)[codes])


class _Labels:
    """A field (name, cat) of every event as codes (-1: absent) into its distinct values, in
    order of first appearance: what `_dictionary` needs, without an object per event."""

    def __init__(self, codes: np.ndarray, values: list[Any]) -> None:
        self.codes = codes
        self.values = _objects([*values, None])  # code -1 picks the None at the end

    @classmethod
    def join(cls, parts: list[pa.DictionaryArray | np.ndarray]) -> _Labels:
        """The labels of consecutive parts (`_shared`'s)."""
        if all(isinstance(part, pa.DictionaryArray) for part in parts):
            joined = pa.chunked_array(parts, pa.dictionary(pa.int32(), pa.string()))
            joined = joined.unify_dictionaries()
            parts.clear()
            values = joined.chunk(0).dictionary.to_pylist() if joined.num_chunks else []
            codes = [chunk.indices.fill_null(-1).to_numpy() for chunk in joined.chunks]
            return cls(np.concatenate(codes) if codes else np.empty(0, np.int32), values)
        objects = np.concatenate(
            [part if isinstance(part, np.ndarray) else _objects(part.to_pylist()) for part in parts]
        )
        parts.clear()
        codes, uniques = pd.factorize(objects)
        return cls(codes, list(uniques))

    def __getitem__(self, index: np.ndarray) -> np.ndarray:
        return np.asarray(self.values[self.codes[index]])

    def set(self, i: int, value: str) -> None:
        """Give event `i` the label `value`."""
        found = np.flatnonzero(self.values[:-1] == value)
        if found.size:
            self.codes[i] = found[0]
            return
        self.values = np.concatenate([self.values[:-1], _objects([value, None])])
        self.codes[i] = len(self.values) - 2


class _Ids:
    """A pid or tid of every event where only some parts are integers (torch's traces have a
    few "Spans" pids among millions of integers): the integers stay int64 (those of parts that
    hold other values too), the others objects, with `codes` that number the values as equality
    does (as factorizing an object array would), so that no object is made per event. Indexing
    gives the values as an object array would hold them."""

    def __init__(self, parts: list[np.ndarray]) -> None:
        ints, positions, held, at = [], [], [], 0
        for part in parts:
            if part.dtype != object:
                ints.append(part)
            else:  # its plain ints (`_ids` refused those beyond int64) join the int64 values
                plain = np.fromiter(
                    map(operator.is_, map(type, part.tolist()), repeat(int)), bool, len(part)
                )
                whole = np.zeros(len(part), np.int64)
                whole[plain] = part[plain].astype(np.int64)
                ints.append(whole)
                other = np.flatnonzero(~plain)
                positions.append(other + at)
                held.append(part[other])
            at += len(part)
        self.ints = np.concatenate(ints)
        self.positions = np.concatenate([np.empty(0, np.int64), *positions])
        self.objects = np.concatenate([np.empty(0, object), *held])
        objects = self.objects.tolist()
        own = list(map(_integer_of, objects))
        low = min([int(self.ints.min(initial=0)), *(n for n in own if n is not None)])
        self.codes = self.ints.copy()
        if low - len(objects) > INT64_MIN:
            # An integer is its own code (no hashing of millions of them); the other values
            # get codes below all of those, equal ones (as a dict has them) one code.
            others: dict[Any, int] = {}
            self.codes[self.positions] = [
                others.setdefault(v, low - 1 - len(others)) if n is None else n
                for v, n in zip(objects, own)
            ]
            return
        plain = np.ones(len(self.ints), bool)
        plain[self.positions] = False
        int_codes, int_values = pd.factorize(self.ints[plain])
        self.codes[plain] = int_codes
        equal = {value: code for code, value in enumerate(int_values.tolist())}
        self.codes[self.positions] = [equal.setdefault(v, len(equal)) for v in objects]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int | np.integer):
            at = np.searchsorted(self.positions, index)
            if at < len(self.positions) and self.positions[at] == index:
                return self.objects[at]
            return int(self.ints[index])
        out = self.ints[index].astype(object)
        if not len(self.positions):
            return out
        at = np.minimum(np.searchsorted(self.positions, index), len(self.positions) - 1)
        other = self.positions[at] == index
        out[other] = self.objects[at[other]]
        return out


def _integer_of(value: Any) -> int | None:
    """The int64 integer that `value` equals (an int, a bool, an integral float), else None."""
    if value.__class__ is float and value.is_integer():
        value = int(value)
    if value.__class__ in (int, bool) and INT64_MIN <= value <= INT64_MAX:
        return int(value)
    return None


def _concatenate(arrays: list[np.ndarray]) -> np.ndarray:
    """One array of `arrays`; object dtype when they differ (integer and other ids)."""
    if len({a.dtype for a in arrays}) > 1:
        arrays = [a.astype(object) for a in arrays]
    return np.concatenate(arrays)


def _scalars(fields: dict[str, list[Any]], rows: slice, source: str) -> dict[str, Any]:
    """The columns of `fields` but ``args`` for `rows`: arrays, names sharing one string each."""
    out: dict[str, Any] = {
        key: nanoseconds(fields[key][rows], key, source) for key in ("ts", "dur")
    }
    for key in ("name", "cat"):
        out[key] = _shared(fields[key][rows])
    out["pid"] = _ids(fields["pid"][rows], "pid", source)
    out["tid"] = _ids(fields["tid"][rows], "tid", source)
    for key in IDS:
        out[key], out[f"{key}.present"] = _optional_ints(fields[key][rows], key, source)
    return out


class _Phases:
    """The ``ph`` of every event, as codes: comparing codes is much faster than strings."""

    def __init__(self, n_complete: int, others: list[Any]) -> None:
        """`n_complete` "X" events, then events with phases `others`."""
        self.n_complete = n_complete
        codes, self._values = pd.factorize(_objects(["X", *others]), use_na_sentinel=False)
        self._codes = np.concatenate([np.full(n_complete, codes[0]), codes[1:]])

    def mask(self, *phases: str) -> np.ndarray:
        """Which events have one of `phases`."""
        known = [i for i, value in enumerate(self._values) if value in phases]
        return np.isin(self._codes, known)

    def where(self, *phases: str) -> np.ndarray:
        """Indices of the events that have one of `phases`."""
        return np.flatnonzero(self.mask(*phases))

    def counts(self) -> dict[Any, int]:
        """How many events have each phase."""
        found = np.bincount(self._codes, minlength=len(self._values)).tolist()
        return {value: n for value, n in zip(self._values.tolist(), found) if n}

    def of(self, i: int) -> Any:
        """The phase of event `i`."""
        return self._values[self._codes[i]]


def _columns(events: list[Any], source: str) -> tuple[int, list[Any], dict[str, list[Any]]]:
    """The number of complete ("X") events, the others' phases and the `CONSUMED` fields of
    every event, complete events first; ``args`` are values, or ``msgspec.Raw`` JSON text for
    complete `Event` structs without kept fields. TraceFormatError for fields of other types
    than `FIELD_TYPES` allows."""
    if events and events[0].__class__ is Event:  # decoding checked their types
        return _event_columns(events)
    n_complete, others, fields = _dict_columns(events, source)
    for key, (allowed, what) in FIELD_TYPES.items():
        values = others if key == "ph" else fields[key]
        wrong = set(map(type, values)).difference(allowed)
        if wrong:
            value = next(v for v in values if type(v) in wrong)
            raise TraceFormatError(
                f"{source}: an event's {key} must be {what}, not {type(value).__name__} "
                f"({_short(value)})"
            )
    return n_complete, others, fields


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _event_columns(events: list[Event]) -> tuple[int, list[Any], dict[str, list[Any]]]:
    """The number of complete events, the others' phases and the `CONSUMED` fields of
    `Event` structs. The args of complete events stay JSON text (``null``
    when absent); those of the others (few: instants, counters, B/E, metadata, flows) are
    decoded, in one call.

    The structs are turned into tuples and transposed (``zip``), in C: cheaper than one
    attribute lookup per field and event. Kept fields (`KEPT`) are rare, so they are counted
    before any event's args are touched for them."""
    phases = list(map(attrgetter("ph"), events))
    is_complete = np.fromiter(map(operator.eq, phases, repeat("X")), dtype=bool, count=len(phases))
    n_complete = int(np.count_nonzero(is_complete))
    if n_complete == len(events):
        complete, others = events, []
    else:
        complete = _pick(events, np.flatnonzero(is_complete))
        others = _pick(events, np.flatnonzero(~is_complete))
    ordered = complete + others if others else complete
    columns = dict(zip(Event.__struct_fields__, zip(*map(astuple, ordered))))
    fields = {key: list(columns[key]) for key in (*CONSUMED, *IDS) if key != "ph"}
    args: list[Any] = fields["args"]
    if others:
        args[n_complete:] = loads(b"[" + b",".join(args[n_complete:]) + b"]")
    kept = {
        key: columns[key] for key in KEPT if columns[key].count(msgspec.UNSET) != len(columns[key])
    }
    extra: list[Any] = [None] * len(others)  # the others' fields without a column, as written
    if kept:
        unset = repeat(msgspec.UNSET)
        has_kept = np.zeros(len(ordered), dtype=bool)
        for values in kept.values():
            has_kept |= np.fromiter(
                map(operator.is_not, values, unset), dtype=bool, count=len(values)
            )
        for i in np.flatnonzero(has_kept).tolist():
            own = loads(args[i]) if args[i].__class__ is msgspec.Raw else args[i]
            fields_kept = {k: v[i] for k, v in kept.items() if v[i] is not msgspec.UNSET}
            args[i] = {**fields_kept, **(own if isinstance(own, dict) else {})}
            if i >= n_complete:
                extra[i - n_complete] = fields_kept
    fields["extra"] = [None] * n_complete + extra
    return n_complete, [e.ph for e in others], fields


def _dict_columns(events: list[Any], source: str) -> tuple[int, list[Any], dict[str, list[Any]]]:
    """The number of complete events, the others' phases and the `CONSUMED` fields (None where
    absent) of every event, complete ("X") events first; fields outside `CONSUMED` are merged into ``args``.

    Complete events, usually nearly all, go through ``itemgetter``, one field at a time:
    faster than ``dict.get``, and than one ``itemgetter`` of all fields and a transposition.
    """
    try:
        try:
            phases = list(map(itemgetter("ph"), events))
        except KeyError:
            phases = [e.get("ph") for e in events]
    except (AttributeError, TypeError):
        raise TraceFormatError(f"{source}: every trace event must be a JSON object") from None
    is_complete = np.fromiter(map(operator.eq, phases, repeat("X")), dtype=bool, count=len(phases))
    complete = _pick(events, np.flatnonzero(is_complete))
    others = _pick(events, np.flatnonzero(~is_complete))
    fields: dict[str, list[Any]] = {}
    exact = True  # whether every complete event has every consumed field
    for key in CONSUMED:
        if key != "ph":
            try:
                fields[key] = list(map(itemgetter(key), complete))
            except KeyError:
                fields[key] = [e.get(key) for e in complete]
                exact = False
            fields[key] += [e.get(key) for e in others]
    exact = exact and sum(map(len, complete)) == len(CONSUMED) * len(complete)
    # With exactly the consumed fields in every complete event, only the others can have more.
    start = len(complete) if exact else 0
    ordered = complete + others
    extra = set(chain.from_iterable(ordered[start:])).difference(CONSUMED)
    for key in IDS:
        fields[key] = [e.get(key) for e in ordered] if key in extra else [None] * len(ordered)
    extra.difference_update(IDS)
    fields["extra"] = [None] * len(ordered)
    if extra:
        args = fields["args"]
        for i, event in enumerate(ordered[start:], start):
            if not extra.isdisjoint(event):
                kept = {k: event[k] for k in sorted(extra) if k in event}
                args[i] = {**kept, **(args[i] if isinstance(args[i], dict) else {})}
                fields["extra"][i] = kept
    return len(complete), [e.get("ph") for e in others], fields


def _pick(items: list[Any], index: np.ndarray) -> list[Any]:
    """``[items[i] for i in index]``, at C speed."""
    if index.size <= 1:
        return [items[i] for i in index.tolist()]
    return list(itemgetter(*index.tolist())(items))


def _objects(values: Sequence[Any]) -> np.ndarray:
    """A 1-d object array of `values` (np.array alone turns a list of lists into 2-d)."""
    array = np.array(values, dtype=object) if len(values) else np.empty(0, dtype=object)
    return array if array.ndim == 1 else np.fromiter(values, dtype=object, count=len(values))


def _ids(values: list[Any], key: str, source: str) -> np.ndarray:
    """pid or tid values (absent ones count as 0): int64 when all are integers (fast to
    factorize), else objects; TraceFormatError for integers outside int64."""
    if set(map(type, values)) <= {int, bool}:  # else not int64 (and not worth an array)
        array = np.array(values) if len(values) else np.empty(0, dtype=np.int64)
        if array.dtype == np.int64:
            return array
    objects = _objects(values)
    plain = np.fromiter(map(operator.is_, map(type, values), repeat(int)), bool, len(values))
    try:
        objects[plain].astype(np.int64)
    except OverflowError:
        value = next(v for v in compress(values, plain) if not INT64_MIN <= v <= INT64_MAX)
        raise TraceFormatError(f"{source}: an event's {key} {value} does not fit int64") from None
    objects[np.fromiter(map(operator.is_, values, repeat(None)), bool, len(values))] = 0
    return objects


def _ends(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``ts + dur`` (nanoseconds; `dur` not negative), `NO_TIME` where `ts` is absent and
    `BEYOND` where either is or the sum is beyond int64."""
    beyond = (ts == BEYOND) | (dur == BEYOND) | (ts > INT64_MAX - np.maximum(dur, 0))
    end = np.where(beyond | (ts == NO_TIME), 0, ts) + np.where(beyond, 0, dur)
    end[beyond] = BEYOND
    end[ts == NO_TIME] = NO_TIME
    return end


class _Rows:
    """The rows of the table being built, in parts; each row points at its source event."""

    def __init__(self, base_ns: int, ts: np.ndarray, source: str) -> None:
        self.base_ns, self.ts, self.source = base_ns, ts, source
        self.parts: list[dict[str, Any]] = []

    def ns(self, times: np.ndarray) -> np.ndarray:
        """Times (`recfn.formats.chrome._times` nanoseconds) after `base_ns` as int64
        nanoseconds since the epoch, in integers throughout; TraceFormatError for times that are
        absent or that int64 nanoseconds cannot hold (rather than wrapping them)."""
        if (times == NO_TIME).any():
            raise TraceFormatError(f"{self.source}: a range, instant or counter event has no ts")
        low = max(int(INT64_MIN) - self.base_ns, BEYOND + 1)
        high = min(int(INT64_MAX) - self.base_ns, int(INT64_MAX))
        if len(times) and ((times == BEYOND).any() or times.min() < low or times.max() > high):
            raise TraceFormatError(
                f"{self.source}: an event's time (ts, or ts + dur) is outside the int64 "
                "nanosecond range"
            )
        return times + np.int64(self.base_ns)

    def add(
        self,
        event: np.ndarray,
        kind: str,
        *,
        end: np.ndarray | None = None,
        closed: np.ndarray | None = None,
        memory_bytes: np.ndarray | None = None,
        device: np.ndarray | None = None,
        track: np.ndarray | None = None,
    ) -> None:
        """Rows for `event` (indices) starting at their ts; points end where they start. Rows
        with a `track` are async rows of that async track."""
        n = len(event)
        start = self.ns(self.ts[event])
        part: dict[str, np.ndarray | None] = {
            "event": event,
            "start": start,
            "end": start if end is None else self.ns(end),
            "closed": np.ones(n, dtype=bool) if closed is None else closed,
            "kind": np.full(n, IMPORTED_KINDS.index(kind), dtype=np.int8),
            "memory_bytes": memory_bytes,
            "device": device,
            "track": track,
        }
        self.parts.append(part)

    def count(self) -> int:
        return sum(len(part["event"]) for part in self.parts)

    def column(self, key: str) -> np.ndarray:
        """One numeric column of all parts; parts without it (memory_bytes) give zeros."""
        return np.concatenate(
            [
                np.zeros(len(part["event"]), np.int64) if part[key] is None else part[key]
                for part in self.parts
            ]
        )

    def labels(self, key: str) -> _Labels:
        """An object column (device) of all parts as codes into its distinct values (-1 for
        None and for parts without it): only the rows that have it are factorized. Called
        where some part has it (a memory part always has a device)."""
        arrays = [part[key] for part in self.parts]
        codes, uniques = pd.factorize(np.concatenate([a for a in arrays if a is not None]))
        out = np.full(sum(len(part["event"]) for part in self.parts), -1, np.int64)
        at, taken = 0, 0
        for part, array in zip(self.parts, arrays):
            n = len(part["event"])
            if array is not None:
                out[at : at + n] = codes[taken : taken + n]
                taken += n
            at += n
        return _Labels(out, list(uniques))

    def tracks(self) -> np.ndarray:
        """The async track of each row, -1 for rows of a thread."""
        return np.concatenate(
            [
                np.full(len(part["event"]), -1, np.int64)
                if part["track"] is None
                else part["track"]
                for part in self.parts
            ]
        )

    def has_memory(self) -> np.ndarray:
        """Which rows are memory events."""
        return np.concatenate(
            [np.full(len(part["event"]), part["memory_bytes"] is not None) for part in self.parts]
        )


def _add_begin_end(
    rows: _Rows, phases: _Phases, pid: np.ndarray, tid: np.ndarray, args: _Args
) -> int:
    """Pair "B" with "E" events per thread by nesting level; unpaired B are open ranges. An E's
    args are merged into its B's, as Chrome does. Returns the number of E without a B."""
    index = phases.where("B", "E")
    if index.size == 0:
        return 0
    thread = _pair_codes(pid[index], tid[index])
    begins, ends, unpaired = _pairs(index, phases.mask("B")[index], thread, rows.ts)
    _merge_args(args, begins, ends)
    rows.add(begins, RANGE, end=_end_times(rows.ts, ends), closed=ends >= 0)
    return unpaired


def _pairs(
    index: np.ndarray, begin: np.ndarray, group: np.ndarray, ts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """The begin events among `index` (`begin` tells which), the end event each pairs with (-1
    for none) and the number of ends without a begin: per `group` (a thread, an async track),
    an end closes the latest open begin (by ts, then in file order), found by nesting level."""
    order = np.lexsort((index, ts[index], group))
    index, group, begin = index[order], group[order], begin[order]
    # A begin opens the level it raises the count to; an end closes the level it lowers it from.
    level = pd.Series(np.where(begin, 1, -1)).groupby(group).cumsum().to_numpy()
    level = np.where(begin, level, level + 1)
    paired = np.lexsort((np.arange(index.size), level, group))
    b, e = paired[:-1], paired[1:]
    match = begin[b] & ~begin[e] & (group[b] == group[e]) & (level[b] == level[e])
    b, e = b[match], e[match]
    end_of = np.full(index.size, -1, dtype=np.int64)
    end_of[b] = index[e]
    opened = np.flatnonzero(begin)
    return index[opened], end_of[opened], int(np.count_nonzero(~begin)) - len(e)


def _end_times(ts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The ts of each end event (`_pairs`), 0 where there is none (an open range)."""
    return np.where(ends >= 0, ts[np.maximum(ends, 0)], 0)


def _merge_args(args: _Args, begins: np.ndarray, ends: np.ndarray) -> None:
    """Merge each end's args into its begin's, as Chrome does."""
    paired = ends >= 0
    for i, j in zip(begins[paired].tolist(), ends[paired].tolist()):
        if isinstance(args[j], dict) and args[j]:
            args[i] = {**(args[i] if isinstance(args[i], dict) else {}), **args[j]}


def _add_async(
    rows: _Rows,
    phases: _Phases,
    fields: dict[str, Any],
    args: _Args,
    extras: list[Any],
    dropped: _Dropped,
) -> None:
    """Async events become async rows (``is_async``) on their own tracks: "b"/"e" and "S"/"F"
    pairs ranges (unpaired beginnings open ones; ends without a beginning are dropped), "n",
    "T" and "p" marks. A track is an async id in its category (and scope; for legacy events its
    name too), per process unless the id is global; the rows of a track nest in one another,
    never in a thread's ranges (and, as every parent, only on their own thread). Rows from
    legacy events keep their phase in args (``ph``)."""
    index = phases.where(*ASYNC_RANGES, *ASYNC_RANGES.values(), *ASYNC_INSTANTS)
    if index.size == 0:
        return
    has_ts = rows.ts[index] != NO_TIME
    for i in index[~has_ts].tolist():
        dropped.add(str(phases.of(i)), 1)
    index = index[has_ts]
    offset = phases.n_complete  # extras are those of the events after the "X" events
    pid, cat, name = fields["pid"][index], fields["cat"][index], fields["name"][index]
    phase = [phases.of(i) for i in index.tolist()]
    keys = [
        _track(p, c, n if ph in ("S", "F", "T", "p") else None, extras[i - offset])
        for i, p, c, n, ph in zip(index.tolist(), pid, cat, name, phase)
    ]
    track = pd.factorize(_objects(keys))[0].astype(np.int64)
    is_phase = {ph: np.array([x == ph for x in phase], dtype=bool) for ph in {*phase}}
    none = np.zeros(index.size, dtype=bool)
    for begin, end in ASYNC_RANGES.items():
        opens, closes = is_phase.get(begin, none), is_phase.get(end, none)
        pair = opens | closes
        if not pair.any():
            continue
        begins, ends, unpaired = _pairs(index[pair], opens[pair], track[pair], rows.ts)
        dropped.add(end, unpaired)
        _merge_args(args, begins, ends)
        if begin != "b":
            _keep_phase(args, begins, begin)
        where = np.searchsorted(index, begins)
        rows.add(
            begins,
            RANGE,
            end=_end_times(rows.ts, ends),
            closed=ends >= 0,
            track=track[where],
        )
    marks = np.isin(_objects(phase), list(ASYNC_INSTANTS))
    for ph in ("T", "p"):
        _keep_phase(args, index[is_phase.get(ph, none)], ph)
    rows.add(index[marks], MARK, track=track[marks])


def _track(pid: Any, cat: Any, name: Any, extra: Any) -> str:
    """The async track of an event with kept fields `extra` (``id``, ``id2``, ``scope``)."""
    extra = extra if isinstance(extra, dict) else {}
    ident = extra.get("id2", extra.get("id"))
    local = True
    if isinstance(ident, dict) and len(ident) == 1:
        ((kind, ident),) = ident.items()
        local = kind != "global"
    parts = [_plain_value(pid) if local else None, cat, extra.get("scope"), ident, name]
    return dumps(parts).decode()


def _plain_value(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _keep_phase(args: _Args, events: np.ndarray, phase: str) -> None:
    """Keep `phase` in the args of `events` (``ph``), so that they are written back with it."""
    others, index = args.others, args.other_index(events)
    if args.columnar is not None:  # the native decoder's flows have their phase in their args
        index = index[~args.columnar.is_columnar[index]]
    for i in index.tolist():
        value = others[i]
        others[i] = {"ph": phase, **value} if isinstance(value, dict) else {"ph": phase}


def _add_flows(rows: _Rows, phases: _Phases, args: _Args, dropped: _Dropped) -> None:
    """Flow events ("s", "t", "f") become rows of kind "flow" at their ts on their thread, whose
    parent is the range they bind to (the one that encloses them); args keep their phase
    (``ph``) with their id (and ``bp``), so that the rows of one flow link their ranges."""
    for phase in FLOW_PHASES:
        _keep_phase(args, _timed(rows, phases.where(phase), phase, dropped), phase)
    index = phases.where(*FLOW_PHASES)
    rows.add(index[rows.ts[index] != NO_TIME], FLOW)


def _timed(rows: _Rows, index: np.ndarray, phase: str, dropped: _Dropped) -> np.ndarray:
    """The events of `index` (of `phase`) that have a ts; those without one (flows and async
    events, which older recfn skipped whole) are dropped."""
    has_ts = rows.ts[index] != NO_TIME
    dropped.add(phase, int(np.count_nonzero(~has_ts)))
    timed: np.ndarray = index[has_ts]
    return timed


def _add_instants(rows: _Rows, phases: _Phases, name: _Labels, args: _Args) -> None:
    """Instants become marks; torch's "[memory]" instants (with ``Bytes``) memory events. recfn
    writes its memory events so, each named in ``recfn_name`` where its name differs."""
    index = phases.where(*INSTANT_PHASES)
    memory = name[index] == TORCH_MEMORY
    native = np.zeros(len(index), dtype=bool)  # memory instants the native decoder read
    if args.columnar is not None:
        native = args.columnar.is_columnar[args.other_index(index)]
    decoded = memory & ~native
    candidates = args.values(index[decoded])
    allocation = [isinstance(a, dict) and "Bytes" in a for a in candidates]
    decoded[decoded] = allocation
    memory = decoded | native
    found = list(compress(candidates, allocation))
    rows.add(index[~memory], MARK)
    allocations = index[memory]
    if allocations.size:
        sizes = np.empty(len(allocations), dtype=np.int64)
        devices = np.empty(len(allocations), dtype=object)
        read = native[memory]
        sizes[~read] = _int64s([a["Bytes"] for a in found], "memory Bytes", rows.source)
        devices[~read] = _objects(_torch_devices(found))
        if read.any() and args.columnar is not None:
            at = args.other_index(allocations[read])
            sizes[read], devices[read] = args.columnar.memory(at)
        for i, a in zip(allocations[~read].tolist(), found):
            own = a.get("recfn_name")
            if isinstance(own, str):
                name.set(i, own)
                args[i] = {k: v for k, v in a.items() if k != "recfn_name"}
        rows.add(allocations, MEMORY, memory_bytes=sizes, device=devices)


def _int64s(values: list[Any], what: str, source: str) -> np.ndarray:
    """Integers (or integral floats) as int64; TraceFormatError for anything else."""
    for value in values:
        if (
            value.__class__ not in (int, float)
            or value != value
            or not INT64_MIN < value < INT64_MAX
            or value != int(value)
        ):
            raise TraceFormatError(
                f"{source}: {what} must be an int64 integer, not {_short(value)}"
            )
    return np.array([int(v) for v in values], dtype=np.int64)


def _torch_devices(found: list[dict[str, Any]]) -> list[str | None]:
    """`_torch_device` of each of `found`, once per distinct pair of integers."""
    known: dict[tuple[Any, Any], str | None] = {}
    devices = []
    for args in found:
        key = (args.get("Device Type"), args.get("Device Id", 0))
        if key[0].__class__ is not int or key[1].__class__ is not int or "Device" in args:
            devices.append(_torch_device(args))
        elif (device := known.get(key)) is not None:
            devices.append(device)
        else:
            devices.append(known.setdefault(key, _torch_device(args)))
    return devices


def _torch_device(args: dict[str, Any]) -> str | None:
    """The device of a memory instant: torch's ``Device Type`` and ``Device Id`` ("cpu",
    "cuda:0"), or the ``Device`` recfn writes for other devices; None for neither."""
    named = args.get("Device")
    if isinstance(named, str):
        return named
    if "Device Type" not in args:
        return None
    device_type, device_id = args["Device Type"], args.get("Device Id", 0)
    kind = TORCH_DEVICE_TYPES.get(device_type, "") if device_type.__class__ is int else ""
    kind = kind or f"device{_short(device_type)}"
    return kind if kind == "cpu" else f"{kind}:{_short(device_id)}"


def _add_counters(rows: _Rows, phases: _Phases, cat: Any, args: _Args) -> None:
    """Counter events ("C") become rows of kind "counter", their values in ``args`` as written
    (a series name, often a unit, per value). The counters recfn writes beside its memory
    events (category `MEMORY_TOTALS`) repeat those rows and are skipped."""
    index = phases.where("C")
    if index.size:
        rows.add(index[_objects(cat[index]) != MEMORY_TOTALS], COUNTER)


def _pair_codes(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Dense codes of (first, second) pairs, numbered by first appearance."""
    a, _ = pd.factorize(first, use_na_sentinel=False)
    b, b_values = pd.factorize(second, use_na_sentinel=False)
    return np.asarray(pd.factorize(a.astype(np.int64) * len(b_values) + b)[0], dtype=np.int64)


def _table(
    rows: _Rows,
    phases: _Phases,
    fields: dict[str, Any],
    args: _Args,
    ids: dict[str, tuple[Any, Any]],
    extras: list[Any],
) -> pa.Table:
    """Sort the rows by start (parents first), nest them per thread and async track (or link
    them by recfn's ids, `_linked`) and build the columns; the processes of recfn's
    `RECFN_PROCESS` metadata get their own pid, host and rank. Consumes `fields` (name, cat,
    pid, tid) and `ids`: each intermediate is dropped once used, so that the peak stays near
    the table's size."""
    start, end, closed = rows.column("start"), rows.column("end"), rows.column("closed")
    nest_end = np.where(closed, end, INT64_MAX)
    order = _start_order(start, nest_end)
    start, end, closed, nest_end = start[order], end[order], closed[order], nest_end[order]
    event, kind = rows.column("event")[order], rows.column("kind")[order]
    track = rows.tracks()[order]
    n = len(event)
    columns: dict[str, Any] = {}
    has_memory = rows.has_memory()[order]
    if has_memory.any():
        columns["memory_bytes"] = pa.array(rows.column("memory_bytes")[order], mask=~has_memory)
        columns["device"] = _dictionary(rows.labels("device"), order, missing=None)
    del has_memory, order
    rows.parts.clear()

    pid, tid = fields.pop("pid"), fields.pop("tid")
    codes = [ids.codes if isinstance(ids, _Ids) else ids for ids in (pid, tid)]
    thread = pd.factorize(_pair_codes(*codes)[event])[0].astype(np.int64)
    del codes
    # Each thread's first event: threads are numbered by first row, so where the count rises.
    seen = np.maximum.accumulate(thread)
    first = event[np.flatnonzero(np.r_[True, seen[1:] > seen[:-1]])]
    del seen
    named = _thread_names(phases, fields["name"], pid, tid, args)
    labels = _objects([named.get((pid[e], tid[e]), str(tid[e])) for e in first.tolist()])
    label_codes, label_values = pd.factorize(labels)
    columns["thread_name"] = pa.DictionaryArray.from_arrays(
        label_codes[thread].astype(np.int32), pa.array(label_values, pa.string())
    )
    thread_pid = _pids(pid[first])
    columns["pid"] = pa.array(thread_pid[thread])
    processes = _processes(phases, fields["name"], pid, args)
    if processes:
        _process_columns(columns, processes, pid[first], thread)
    del pid, tid
    columns["name"] = _dictionary(fields.pop("name"), event)
    columns["scope"] = _dictionary(fields.pop("cat"), event)
    columns["kind"] = pa.DictionaryArray.from_arrays(kind, pa.array(IMPORTED_KINDS, pa.string()))
    columns["start_ns"] = pa.array(start)
    columns["end_ns"] = pa.array(np.where(closed, end, 0), mask=~closed)
    del end, closed

    row_ids, parent = _linked(ids, event, kind, thread, start, nest_end, thread_pid[thread])
    ids.clear()
    if row_ids is None or parent is None:
        row_ids = np.arange(n, dtype=np.int64)
        native = NEST if NATIVE is not None else None
        # Async rows nest within their own track on their thread, never in a thread's ranges.
        lanes = thread.max(initial=0) + 1
        group = np.where(track >= 0, lanes + _pair_codes(track, thread), thread)
        parent, depth = nesting(group, start, nest_end, kind == 0, native)
        del group
    else:
        depth = depths(parent)
    del start, nest_end, kind
    columns["thread_id"] = pa.array(thread + 1)
    del thread
    columns["id"] = pa.array(row_ids)
    columns["parent_id"] = pa.array(row_ids[np.maximum(parent, 0)], mask=parent < 0)
    del row_ids, parent
    columns["depth"] = pa.array(depth.astype(numpy_dtype("depth")))
    del depth

    strings, torch_ints, shapes = _args_columns(args, event, rows.source)
    for key in TORCH_INTS:
        columns[key] = pa.array(torch_ints.pop(key)[event])
    columns["is_async"] = pa.array(track >= 0)
    columns["node_id"] = constant_column(BY_NAME["node_id"], n)
    columns["args"] = strings
    del strings
    for column, values in zip(("input_shapes", "input_dtypes"), shapes):
        columns[column] = values
    names = [*REQUIRED, "host", "rank", "args", "memory_bytes", "device"]
    names += ["input_shapes", "input_dtypes"]
    return pa.table({key: columns.pop(key) for key in names if key in columns})


def _start_order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The rows by `start`, then by `end` descending (parents first), then in event order.
    Rows come nearly in that order already (a trace lists events by time), so a stable sort by
    start (linear on sorted runs) is usually all it takes; the full three-key sort only where
    rows of equal start are not already by end descending."""
    order = np.argsort(start, kind="stable")
    ordered = start[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])
    if tied.size and (end[order[tied + 1]] > end[order[tied]]).any():
        return np.lexsort((np.arange(len(start)), -end, start))
    return order


def _args_columns(
    args: _Args, rows: np.ndarray, source: str
) -> tuple[pa.ChunkedArray, dict[str, np.ndarray], tuple[pa.ChunkedArray, ...]]:
    """The args strings of the events at `rows`, the integer columns from torch's args of all
    events, and ``input_shapes``/``input_dtypes`` at `rows` (none when absent or not of the
    schema's types). Consumes `args`: each part is dropped once its last row is copied
    (`_gather_columns`), so that the strings are held about once."""
    parts = args.parts(source)
    args.complete.clear()
    ints = {key: np.concatenate([part.ints[key] for part in parts]) for key in TORCH_INTS}
    columns = [[part.strings for part in parts]]
    if any(part.has_shapes for part in parts):
        columns += [[part.shapes[i] for part in parts] for i in range(2)]
    del parts
    taken = _gather_columns(columns, rows)
    return taken[0], ints, tuple(taken[1:])


def _gather_columns(columns: list[list[Any]], rows: np.ndarray) -> list[pa.ChunkedArray]:
    """The values of each column's consecutive parts (of the same lengths in every column) at
    `rows`, `BATCH` rows at a time: chunked results, and each part is dropped from its column
    once its last row is taken, so that the values are never held twice over (as
    concatenating the parts first would); runs of consecutive rows are slices of the parts
    (`_slices`), other rows are taken (`_Take`, worked out once for all columns). Large
    strings become strings, as the schema has them."""
    kinds = [
        pa.string() if parts[0].type == pa.large_string() else parts[0].type for parts in columns
    ]
    bounds = np.cumsum([0, *map(len, columns[0])])
    position = np.full(bounds[-1], -1, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    last = [int(position[lo:hi].max(initial=-1)) // BATCH for lo, hi in zip(bounds, bounds[1:])]
    del position
    done = sorted(range(len(last)), key=last.__getitem__)  # parts by the block that ends them
    chunks: list[list[Any]] = [[] for _ in columns]
    for block, at in enumerate(range(0, len(rows), BATCH)):
        index = rows[at : at + BATCH]
        if index[-1] - index[0] == len(index) - 1 and (np.diff(index) == 1).all():
            lo, hi = int(index[0]), int(index[-1]) + 1
            for parts, kind, out in zip(columns, kinds, chunks):
                out += _slices(parts, bounds, lo, hi, kind)
        else:
            take = _Take(bounds, index)
            for parts, kind, out in zip(columns, kinds, chunks):
                out.append(_as(take(parts), kind))
        while done and last[done[0]] <= block:
            c = done.pop(0)
            for parts in columns:
                parts[c] = None
    for parts in columns:
        parts.clear()
    return [pa.chunked_array(out, kind) for out, kind in zip(chunks, kinds)]


class _Take:
    """Taking the values at `index` of consecutive parts (starting at `bounds`). Rows nearly
    in order (a few from elsewhere among runs of consecutive ones) reach short spans of the
    parts: those are joined (a plain copy) and taken from once; otherwise each part's rows are
    taken and put back in order."""

    def __init__(self, bounds: np.ndarray, index: np.ndarray) -> None:
        part = np.searchsorted(bounds, index, side="right") - 1
        local = index - bounds[part]
        self.used = np.flatnonzero(np.bincount(part, minlength=len(bounds) - 1)).tolist()
        if len(self.used) == 1:
            self.spans, self.at = None, pa.array(local)
            return
        reached = [local[part == c] for c in self.used]
        self.spans = [(int(rows.min()), int(rows.max()) + 1) for rows in reached]
        if sum(high - low for low, high in self.spans) <= 2 * len(index):
            start = np.zeros(len(bounds) - 1, np.int64)  # where a part's span starts, less its low
            size = 0
            for c, (low, high) in zip(self.used, self.spans):
                start[c] = size - low
                size += high - low
            self.at = pa.array(local + start[part])
            return
        self.spans, self.reached = None, [pa.array(rows) for rows in reached]
        where = np.concatenate([np.flatnonzero(part == c) for c in self.used])
        self.at = pa.array(np.argsort(where, kind="stable"))

    def __call__(self, parts: list[Any]) -> pa.Array:
        if len(self.used) == 1:
            return parts[self.used[0]].take(self.at)
        if self.spans is not None:
            pieces = [
                parts[c].slice(low, high - low) for c, (low, high) in zip(self.used, self.spans)
            ]
        else:
            pieces = [parts[c].take(rows) for c, rows in zip(self.used, self.reached)]
        return pa.concat_arrays(pieces).take(self.at)


def _slices(parts: list[Any], bounds: np.ndarray, lo: int, hi: int, kind: pa.DataType) -> list[Any]:
    """Rows `lo` to `hi` of consecutive `parts` (starting at `bounds`) as slices of them, in
    `kind`: rows in file order (most of a torch trace's) need no copy."""
    first = int(np.searchsorted(bounds, lo, side="right")) - 1
    last = int(np.searchsorted(bounds, hi - 1, side="right")) - 1
    slices = []
    for c in range(first, last + 1):
        a, b = max(lo, int(bounds[c])), min(hi, int(bounds[c + 1]))
        if b > a:
            slices.append(_as(parts[c].slice(a - int(bounds[c]), b - a), kind))
    return slices


def _as(values: pa.Array, kind: pa.DataType) -> pa.Array:
    """`values` cast to `kind` (large strings to strings), as they are where of that type."""
    return values if values.type == kind else values.cast(kind)


def _optional_ints(
    values: list[Any], key: str, source: str
) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """Integers or None (`FIELD_TYPES` checked) as int64 values (0 for None) and presence, both
    None when all are None; TraceFormatError for integers outside int64."""
    if values.count(None) == len(values):
        return None, None
    present = np.fromiter(map(operator.is_not, values, repeat(None)), dtype=bool, count=len(values))
    try:
        return np.array([0 if v is None else v for v in values], dtype=np.int64), present
    except OverflowError:
        raise TraceFormatError(f"{source}: an event's {key} does not fit int64") from None


def _linked(
    ids: dict[str, tuple[Any, Any]],
    event: np.ndarray,
    kind: np.ndarray,
    thread: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    process: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """Row ids and parent positions from recfn's `IDS` fields, when every row has an id unique
    in its `process` (ids are unique within a process, not across a fleet) and every parent id
    names an earlier range of the row's thread that is open when the row starts (so the links
    form a forest that matches the times); else None."""
    if ids["recfn_id"][0] is None:
        return None, None
    own, has_id = (values[event] for values in ids["recfn_id"])
    if own.size == 0 or not has_id.all():
        return None, None
    if ids["recfn_parent_id"][0] is None:
        parent_id, has_parent = np.zeros_like(own), np.zeros(len(own), dtype=bool)
    else:
        parent_id, has_parent = (values[event] for values in ids["recfn_parent_id"])
    if (process == process[0]).all():
        by_id = np.argsort(own, kind="stable")
        if (np.diff(own[by_id]) == 0).any():
            return None, None
        slot = np.minimum(np.searchsorted(own[by_id], parent_id), len(own) - 1)
        parent = np.where(has_parent, by_id[slot], -1)
    else:  # several processes: an id is looked up in its own process
        keys = pd.MultiIndex.from_arrays([process, own])
        if keys.has_duplicates:
            return None, None
        parent = keys.get_indexer(pd.MultiIndex.from_arrays([process, parent_id]))
        parent = np.where(has_parent, parent, -1).astype(np.int64)
        if (has_parent & (parent < 0)).any():
            return None, None
    found = ~has_parent | (own[parent] == parent_id)
    root = parent < 0
    fits = (
        (parent < np.arange(len(own)))
        & (kind[parent] == IMPORTED_KINDS.index(RANGE))
        & (thread[parent] == thread)
        & (start[parent] <= start)
        & (end[parent] >= start)
    )
    if not (found & (root | fits)).all():
        return None, None
    return own, parent


def _processes(
    phases: _Phases, name: Any, pid: Any, args: _Args
) -> dict[Any, tuple[str, int, int]]:
    """The (host, pid, rank) of each Chrome pid that recfn's `RECFN_PROCESS` metadata names."""
    found: dict[Any, tuple[str, int, int]] = {}
    metadata = phases.where("M")
    for i in metadata[name[metadata] == RECFN_PROCESS].tolist():
        value = args[i] if isinstance(args[i], dict) else {}
        host, own, rank = value.get("host"), value.get("pid"), value.get("rank", -1)
        if isinstance(host, str) and _is_int64(own) and _is_int64(rank):
            found[pid[i]] = (host, cast(int, own), cast(int, rank))
    return found


def _is_int64(value: Any) -> bool:
    return value.__class__ is int and INT64_MIN <= value <= INT64_MAX


def _process_columns(
    columns: dict[str, Any],
    processes: dict[Any, tuple[str, int, int]],
    thread_pid: np.ndarray,
    thread: np.ndarray,
) -> None:
    """``pid``, ``host`` and ``rank`` of each row from its thread's Chrome pid (`thread_pid`,
    per thread) and the `processes` recfn wrote; threads of other pids keep theirs."""
    pids = columns["pid"].to_numpy(zero_copy_only=False)
    own = [processes.get(p) for p in thread_pid.tolist()]
    known = np.array([p is not None for p in own], dtype=bool)[thread]
    real = np.array([p[1] if p else 0 for p in own], dtype=np.int64)
    columns["pid"] = pa.array(np.where(known, real[thread], pids))
    hosts, host_values = pd.factorize(_objects([p[0] if p else "" for p in own]))
    columns["host"] = pa.DictionaryArray.from_arrays(
        hosts[thread].astype(np.int32), pa.array(host_values, pa.string())
    )
    rank = np.array([p[2] if p else -1 for p in own], dtype=np.int64)[thread]
    columns["rank"] = pa.array(rank.astype(numpy_dtype("rank")))


def _thread_names(
    phases: _Phases, name: np.ndarray, pid: np.ndarray, tid: np.ndarray, args: _Args
) -> dict[tuple[Any, Any], str]:
    """Names from "thread_name" metadata events, by (pid, tid)."""
    names = {}
    metadata = phases.where("M")
    for i in metadata[name[metadata] == "thread_name"].tolist():
        value = args[i].get("name") if isinstance(args[i], dict) else None
        if value is not None:
            names[(pid[i], tid[i])] = str(value)
    return names


def _dictionary(
    values: np.ndarray | _Labels, rows: np.ndarray, missing: str | None = ""
) -> pa.Array:
    """``values[rows]`` as an int32-indexed dictionary of strings (absent ones become
    `missing`, null for None), in order of first appearance in `values`; factorizes `values`
    once rather than the rows."""
    if isinstance(values, _Labels):
        codes, uniques = values.codes, values.values[:-1]
    else:
        codes, uniques = pd.factorize(values)
    codes = codes[rows]
    codes[codes < 0] = len(uniques)  # absent values: the slot after the last value
    used = np.flatnonzero(np.bincount(codes, minlength=len(uniques) + 1))
    labels = _objects([missing if u == len(uniques) else str(uniques[u]) for u in used.tolist()])
    # Distinct values can share a label (1 and "1"); factorize the labels again.
    label_codes, categories = pd.factorize(labels)
    lookup = np.zeros(len(uniques) + 1, dtype=np.int64)
    lookup[used] = label_codes
    indices = lookup[codes]
    return pa.DictionaryArray.from_arrays(
        pa.array(indices.astype(np.int32), mask=indices < 0), pa.array(categories, pa.string())
    )


def _pids(values: np.ndarray) -> np.ndarray:
    """Integer process ids; pids that are not integers (e.g. "Spans") get ids -1, -2, ..."""
    out = np.empty(len(values), dtype=np.int64)
    named: dict[Any, int] = {}
    for i, value in enumerate(values):
        if isinstance(value, int | np.integer) and not isinstance(value, bool):
            out[i] = value
        elif (
            isinstance(value, str)
            and value.lstrip("-").isdigit()
            and INT64_MIN <= int(value) <= INT64_MAX
        ):
            out[i] = int(value)
        else:
            out[i] = named.setdefault(value, -1 - len(named))
    return out


def _torch_args(text: bytes) -> list[Any] | None:
    """Each event's args (`text`: all of them, a JSON list) with only the fields that torch maps
    to columns, as `_TorchArgs` (other values as they are); None when none occurs anywhere."""
    if not any(f'"{key}"'.encode() in text for key in TORCH_KEYS):
        return None
    return _TORCH_ARGS.decode(text)


def _arg_ints(torch_args: list[Any] | None, field: str, default: int, n: int) -> np.ndarray:
    """Integer `field` (``sequence_nr``, ...) of each event's `_TorchArgs`, `default` where
    absent. Values that are not integers take a slower path: digit strings count, others not."""
    if torch_args is None:
        return np.full(n, default, dtype=np.int64)
    values = list(map(getattr, torch_args, repeat(field), repeat(None)))
    try:
        return np.asarray(
            pa.array(values, type=pa.int64()).fill_null(default).to_numpy(), dtype=np.int64
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        values = [default if v is None else v for v in values]
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([v if isinstance(v, int) else default for v in values], dtype=np.int64)


def _shapes(torch_args: list[Any] | None, n: int) -> tuple[pa.Array, pa.Array]:
    """torch's "Input Dims" / "Input type" args (`_torch_args`) of `n` events as
    ``input_shapes`` / ``input_dtypes`` arrays, per event: an event whose value lacks the
    schema's type (a tensor list's nested dims, say) has none there (its args keep it), and
    the other events keep theirs."""
    if torch_args is None:
        return (pa.nulls(n, SHAPES), pa.nulls(n, DTYPES))
    shapes = list(map(getattr, torch_args, repeat("input_shapes"), repeat(None)))
    dtypes = list(map(getattr, torch_args, repeat("input_dtypes"), repeat(None)))
    return _list_array(shapes, SHAPES, _is_shapes), _list_array(dtypes, DTYPES, _is_dtypes)


def _list_array(values: list[Any], kind: pa.DataType, fits: Any) -> pa.Array:
    """`values` as an array of `kind`, null where a value does not `fit` it."""
    try:
        return pa.array(values, kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([v if fits(v) else None for v in values], kind)


def _is_shapes(value: Any) -> bool:
    """Whether `value` is a list of lists of int64 integers (or nulls), or null."""
    return value is None or (
        value.__class__ is list
        and all(
            dims is None
            or (dims.__class__ is list and all(d is None or _is_int64(d) for d in dims))
            for dims in value
        )
    )


def _is_dtypes(value: Any) -> bool:
    """Whether `value` is a list of strings (or nulls), or null."""
    return value is None or (
        value.__class__ is list and all(t is None or t.__class__ is str for t in value)
    )
