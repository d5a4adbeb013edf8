"""The recfn event table: its columns, types, defaults, metadata, validation and pandas form.

This module is the one owner of the schema. Consolidation (``recfn.capture._table``), Parquet and Chrome
JSON I/O, the trace object, the synthetic traces and the ``df.recfn`` accessor all read it from
here; docs/schema.md documents the same table and a test compares the two.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recfn.errors import RecfnTypeError, TraceFormatError
from recfn.formats import hooks as _hooks

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION: Final = 1

RANGE: Final = "range"
MARK: Final = "mark"
MEMORY: Final = "memory"
KINDS: Final = (RANGE, MARK, MEMORY)
"""The values of the ``kind`` column that recfn records, in the order of their codes."""
COUNTER: Final = "counter"
FLOW: Final = "flow"
IMPORTED_KINDS: Final = (*KINDS, COUNTER, FLOW)
"""Every value of the ``kind`` column, in the order of their codes: imported traces also have
counters (Chrome "C" events, their values in ``args``) and flow events (Chrome "s"/"t"/"f")."""

# Schema metadata keys (bytes in the Arrow schema, ``df.attrs["recfn"]`` in pandas).
SCHEMA_VERSION_KEY: Final = "recfn.schema_version"
VERSION_KEY: Final = "recfn.version"
CONFIG_KEY: Final = "recfn.config"
DROPPED_EVENTS_KEY: Final = "recfn.dropped_events"
HOST_KEY: Final = "recfn.host"
PID_KEY: Final = "recfn.pid"
START_NS_KEY: Final = "recfn.start_ns"
RANK_KEY: Final = "recfn.rank"
LOCAL_RANK_KEY: Final = "recfn.local_rank"
WORLD_SIZE_KEY: Final = "recfn.world_size"
WALL_NS_KEY: Final = "recfn.wall_ns"
CONTENT_HASH_KEY: Final = "recfn.content_hash"
"""In Parquet files only: written by ``recfn.formats.io`` (``with_content_hash``), checked and removed on
load (``check_content_hash``); tables in memory never carry it."""
PART_KEY: Final = "recfn.part"
"""A part's number in a dataset written by ``profile(output=...)``: its parents may be in other
parts, so ``check_events`` does not ask for them (``whole=False``)."""
FLIGHT_RECORDER_KEY: Final = "recfn.flight_recorder"
"""In a flight recorder's dump (``profile(flight_recorder=N)``): JSON of what the ring kept and
lost (``recfn.capture._flight``)."""
CLOCK_OFFSETS_KEY: Final = "recfn.clock_offsets"
"""In a trace loaded with ``clock_offsets``: JSON ``{host: ns}`` added to each host's times."""
CALL_TRACING_KEY: Final = "recfn.call_tracing"
"""In a trace captured with ``trace_calls`` (in memory): JSON of what the call tracer did: its
callbacks on Python and C calls, the calls it recorded, and with ``trace_user_code`` the library
calls it hid, by top-level package (``recfn.capture._tracer.CallStats.to_dict``)."""
ERROR_KEY: Final = "recfn.error"
"""The exception that ended the capture (``"KeyboardInterrupt"``, ``"KeyError: 'x'"``): a trace
saved after a crash or Ctrl-C says so when loaded (``Trace.error``, ``Trace.interrupted``)."""
STREAM_KEY: Final = "recfn.stream"
"""In a part written by ``profile(output=...)``: JSON of what the capture had done when the part
was written (``capture``: its id, ``written_ns``: when, ``events``: rows written so far, this
part's included, ``flush_interval_s``: how often parts are written), so that a process that
stopped writing is known to have lost only what came after (``recfn.formats.dataset``)."""
CHROME_MEMBERS_KEY: Final = "recfn.chrome_members"
"""In a trace imported from another tool's Chrome JSON: JSON of the file's top-level members
other than its events (torch's ``distributedInfo``, ``deviceProperties``, ...), written back
when the trace is saved as Chrome JSON."""
UNKNOWN_HOST: Final = "unknown"
"""The ``recfn.host`` of a trace recfn did not capture (imported from another tool)."""
_HASH_NAME: Final = CONTENT_HASH_KEY.encode()
METADATA_PREFIX: Final = "recfn."


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()
"""The default of the columns that a table must bring itself."""


@dataclasses.dataclass(frozen=True)
class Column:
    """One column: Arrow type, pandas dtype, whether every trace has it, and its default.

    ``default`` is what ``conform`` fills in when a table lacks the column (``NO_DEFAULT``: it
    cannot be made up; ``None``: null); ``default_from`` names a column to copy instead.
    """

    name: str
    arrow_type: pa.DataType
    pandas_dtype: str
    required: bool
    nullable: bool
    description: str
    default: Any = None
    default_from: Optional[str] = None


_STRINGS32 = pa.dictionary(pa.int32(), pa.string())
_STRINGS8 = pa.dictionary(pa.int8(), pa.string())

COLUMNS: Final[tuple[Column, ...]] = (
    Column("id", pa.int64(), "int64", True, False,
           "unique within the trace (the range's handle)", NO_DEFAULT),
    Column("parent_id", pa.int64(), "Int64", True, True,
           "`id` of the enclosing range in the same thread or asyncio task; null for roots"),
    Column("name", _STRINGS32, "category", True, False,
           "range / mark / counter name", NO_DEFAULT),
    Column("kind", _STRINGS8, "category", True, False,
           '`"range"`, `"mark"` or `"memory"`; imported traces also `"counter"` and `"flow"`',
           NO_DEFAULT),
    Column("scope", _STRINGS8, "category", True, False,
           'lower-case `RecordScope` name: `"function"`, `"user_scope"`, ...', "user_scope"),
    Column("start_ns", pa.int64(), "int64", True, False,
           "ns since the Unix epoch (a monotonic clock anchored once per profile)", NO_DEFAULT),
    Column("end_ns", pa.int64(), "Int64", True, True,
           "as `start_ns`; equals `start_ns` for marks and memory events; null for a range "
           "still open when the profiler stopped", default_from="start_ns"),
    Column("thread_id", pa.int64(), "int64", True, False,
           "logical thread id (1, 2, ...; never reused within a process)", NO_DEFAULT),
    Column("thread_name", _STRINGS32, "category", True, False,
           "`threading.current_thread().name` when the thread first recorded", ""),
    Column("depth", pa.int32(), "int32", True, False, "nesting depth, 0 for roots", 0),
    Column("sequence_nr", pa.int64(), "int64", True, False, "`-1` when not set", -1),
    Column("fwd_thread_id", pa.int64(), "int64", True, False,
           "thread of the forward range for backward ranges, `0` when not set", 0),
    Column("is_async", pa.bool_(), "bool", True, False,
           "the range ended on another thread or task than it started on", False),
    Column("node_id", pa.int32(), "int32", True, False,
           "`recfn.set_default_node_id(n)`, `-1` by default", -1),
    Column("pid", pa.int64(), "int64", True, False,
           "process id of the capturing process", 0),
    Column("host", _STRINGS32, "category", False, False,
           "host name of the capturing process; with `pid` and `thread_id` it identifies a "
           "thread across a fleet (absent in imported tables)", ""),
    Column("rank", pa.int32(), "int32", False, False,
           "`torch.distributed` rank (else `RANK`, MPI or Slurm's), `-1` outside distributed "
           "jobs (absent in imported tables)", -1),
    Column("args", pa.string(), "str", False, True,
           "`record_function(name, args=...)` / `record_function_fast(..., input_values, "
           "keyword_values)`"),
    Column("input_shapes", pa.list_(pa.list_(pa.int64())), "object", False, True,
           "`report_input_shapes=True` (empty inner list for inputs without a shape)"),
    Column("input_dtypes", pa.list_(pa.string()), "object", False, True,
           "`report_input_shapes=True` (dtype, else the type name)"),
    Column("stack", pa.list_(pa.string()), "object", False, True,
           '`with_stack=True`: `"file:line(function)"`, innermost frame last'),
    Column("memory_bytes", pa.int64(), "Int64", False, True,
           "memory events: bytes allocated (positive) or freed (negative)"),
    Column("device", _STRINGS8, "category", False, True,
           'memory events: `"cpu"`, `"cuda:0"`, ...; with `cuda=True` also ranges timed on a GPU '
           '(`"cuda:N"`); null otherwise'),
    Column("flops", pa.int64(), "Int64", False, True,
           "`with_flops=True`, for names with a registered FLOP formula"),
    Column("device_start_ns", pa.int64(), "Int64", False, True,
           "`cuda=True`: when the GPU reached the range's start event, on the `start_ns` clock; "
           "null for rows without CUDA events"),
    Column("device_duration_ns", pa.int64(), "Int64", False, True,
           "`cuda=True`: GPU time between the range's start and end events (CUDA event "
           "resolution, about 0.5 µs)"),
    Column("hidden_calls", pa.int64(), "Int64", False, True,
           "`trace_user_code=True`: library calls that ran inside this traced call, below it and "
           "above its traced children, counted but not recorded (library frames hidden); null "
           "where none"),
)  # fmt: skip
"""Every column recfn knows, required ones first in table order."""

BY_NAME: Final[dict[str, Column]] = {column.name: column for column in COLUMNS}
REQUIRED: Final[tuple[str, ...]] = tuple(c.name for c in COLUMNS if c.required)
"""The columns every trace has, in order."""
OPTIONAL: Final[tuple[str, ...]] = tuple(c.name for c in COLUMNS if not c.required)
"""Columns present when the option that fills them was enabled."""
ESSENTIAL: Final[tuple[str, ...]] = tuple(c.name for c in COLUMNS if c.default is NO_DEFAULT)
"""Columns that ``conform`` cannot make up."""
NULLABLE_INTS: Final[tuple[str, ...]] = tuple(c.name for c in COLUMNS if c.pandas_dtype == "Int64")
PARQUET_DICTIONARY: Final = ("name", "kind", "scope", "thread_name", "host", "device", "args")
"""Columns Parquet stores dictionary-encoded."""
PARQUET_DELTA: Final = ("id", "parent_id", "start_ns", "end_ns", "depth", "thread_id")
"""Columns Parquet stores delta-encoded (mostly increasing integers)."""


PROCESS_KEYS: Final = ("host", "pid")
"""Columns that identify a process across a fleet: ids are unique within one process."""
THREAD_KEYS: Final = ("host", "pid", "thread_id")
"""Columns that identify a thread (a timeline lane) across a fleet."""


def column_type(name: str) -> pa.DataType:
    """The Arrow type of column ``name``."""
    return BY_NAME[name].arrow_type


def numpy_dtype(name: str) -> Any:
    """The numpy dtype of a plain (not dictionary, not nullable) column ``name``."""
    return column_type(name).to_pandas_dtype()


def empty_table(columns: tuple[str, ...] = REQUIRED) -> pa.Table:
    """A table without rows that has ``columns`` (kinds listed in the ``kind`` dictionary)."""
    arrays = {}
    for name in columns:
        dtype = column_type(name)
        if name == "kind":
            arrays[name] = pa.DictionaryArray.from_arrays(
                pa.array([], pa.int8()), pa.array(KINDS, pa.string())
            )
        else:
            arrays[name] = pa.array([], dtype)
    return pa.table(arrays)


def build_metadata(
    *,
    config: Mapping[str, Any],
    dropped_events: int = 0,
    start_ns: int = 0,
    wall_ns: Optional[int] = None,
    pid: Optional[int] = None,
    host: Optional[str] = None,
    rank: Optional[int] = None,
    local_rank: Optional[int] = None,
    world_size: Optional[int] = None,
    flight_recorder: Optional[Mapping[str, Any]] = None,
    clock_offsets: Optional[Mapping[str, int]] = None,
    call_tracing: Optional[Mapping[str, Any]] = None,
    error: Optional[str] = None,
    chrome_members: Optional[Mapping[str, Any]] = None,
) -> dict[str, str]:
    """The schema metadata of a trace (every key is a ``*_KEY`` constant of this module)."""
    from recfn._version import __version__

    metadata = {
        SCHEMA_VERSION_KEY: str(SCHEMA_VERSION),
        VERSION_KEY: __version__,
        CONFIG_KEY: json.dumps(dict(config), sort_keys=True),
        DROPPED_EVENTS_KEY: str(int(dropped_events)),
        HOST_KEY: socket.gethostname() if host is None else host,
        START_NS_KEY: str(int(start_ns)),
    }
    if pid is not None:
        metadata[PID_KEY] = str(int(pid))
    if wall_ns is not None:
        metadata[WALL_NS_KEY] = str(int(wall_ns))
    for key, value in (
        (RANK_KEY, rank),
        (LOCAL_RANK_KEY, local_rank),
        (WORLD_SIZE_KEY, world_size),
    ):
        if value is not None:
            metadata[key] = str(int(value))
    if flight_recorder is not None:
        metadata[FLIGHT_RECORDER_KEY] = json.dumps(dict(flight_recorder), sort_keys=True)
    if clock_offsets is not None:
        metadata[CLOCK_OFFSETS_KEY] = json.dumps(dict(clock_offsets), sort_keys=True)
    if call_tracing is not None:
        metadata[CALL_TRACING_KEY] = json.dumps(dict(call_tracing), sort_keys=True)
    if error is not None:
        metadata[ERROR_KEY] = error
    if chrome_members:
        metadata[CHROME_MEMBERS_KEY] = json.dumps(dict(chrome_members))
    return metadata


JSON_KEYS: Final = (CONFIG_KEY, FLIGHT_RECORDER_KEY, CLOCK_OFFSETS_KEY, CALL_TRACING_KEY,
                    STREAM_KEY, CHROME_MEMBERS_KEY)  # fmt: skip
"""The metadata keys whose values are JSON objects (the content hash is checked on its own)."""


def json_object(raw: Union[str, bytes, None]) -> Optional[dict[str, Any]]:
    """The JSON object a metadata value holds; None when it holds none: not JSON, another JSON
    value, or nested too deep for Python's parser (a RecursionError, not a ValueError)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def check_json_metadata(metadata: Mapping[bytes, bytes], source: str) -> None:
    """``TraceFormatError`` naming ``source`` and the key when one of `JSON_KEYS` holds no JSON
    object: refused when the file is read, rather than failing whoever reads the key later."""
    for key in JSON_KEYS:
        raw = metadata.get(key.encode())
        if raw is not None and json_object(raw) is None:
            raise TraceFormatError(f"{source}: its {key} is not a readable JSON object")


def with_content_hash(table: pa.Table) -> pa.Table:
    """``table`` with ``CONTENT_HASH_KEY`` in its metadata: JSON of the hash algorithm and the
    digests of each column's values and of the layout and other metadata (``recfn.formats._digest``),
    taken a row group at a time as ``recfn.formats.io.write_parquet`` writes the row groups."""
    from recfn.formats import _digest

    raw = {k: v for k, v in (table.schema.metadata or {}).items() if k != _HASH_NAME}
    groups = _digest.row_groups_of(table.num_rows)
    digests = _digest.row_group_digest(table, raw, groups)
    value = json.dumps(
        {"algorithm": _digest.ROW_GROUP_ALGORITHM, "digests": digests}, sort_keys=True
    )
    return table.replace_schema_metadata({**raw, _HASH_NAME: value.encode()})


def stored_content_hash(
    metadata: dict[bytes, bytes], source: str
) -> Optional[tuple[str, dict[str, str], dict[bytes, bytes]]]:
    """A file's stored content hash: its algorithm, its digests and the metadata it covers (the
    rest); None when the file carries none. ``TraceFormatError`` naming ``source`` when it is
    unreadable or of an algorithm this recfn does not know."""
    from recfn.formats import _digest

    raw = dict(metadata)
    stored = raw.pop(_HASH_NAME, None)
    if stored is None:
        return None
    try:
        parsed = json.loads(stored)
        algorithm, expected = parsed["algorithm"], dict(parsed["digests"])
    except (ValueError, TypeError, KeyError, RecursionError):
        raise TraceFormatError(f"{source}: its {CONTENT_HASH_KEY} is unreadable") from None
    if algorithm not in (_digest.ALGORITHM, _digest.ROW_GROUP_ALGORITHM):
        raise TraceFormatError(f"{source}: unknown {CONTENT_HASH_KEY} algorithm {algorithm!r}")
    return algorithm, expected, raw


def compare_digests(actual: dict[str, str], expected: dict[str, str], source: str) -> None:
    """``TraceFormatError`` naming ``source`` and what changed unless the digests agree."""
    from recfn.formats import _digest

    if actual == expected:
        return
    changed = sorted(k for k in {*actual, *expected} if actual.get(k) != expected.get(k))
    what = (
        "its column names, types or metadata"
        if _digest.SCHEMA_PART in changed
        else f"column {', '.join(map(repr, changed))}"
    )
    raise TraceFormatError(
        f"{source}: content hash mismatch in {what}: the file was altered after recfn wrote it"
    )


def check_content_hash(
    table: pa.Table, source: str, row_groups: Optional[list[int]] = None
) -> pa.Table:
    """``table`` without its ``CONTENT_HASH_KEY``, after checking that its values, layout and
    metadata still hash to it; ``TraceFormatError`` naming ``source`` and what changed.
    ``row_groups``: the sizes of the file's row groups (a hash taken a row group at a time is
    checked over the same ones; by default those recfn writes)."""
    from recfn.formats import _digest

    found = stored_content_hash(table.schema.metadata or {}, source)
    if found is None:
        raise TraceFormatError(f"{source}: its {CONTENT_HASH_KEY} is unreadable")
    algorithm, expected, raw = found
    table = table.replace_schema_metadata(raw)
    if algorithm == _digest.ALGORITHM:
        actual = _digest.table_digest(table, raw)
    else:
        groups = _digest.row_groups_of(table.num_rows) if row_groups is None else row_groups
        actual = _digest.row_group_digest(table, raw, groups)
    compare_digests(actual, expected, source)
    return table


def with_required_columns(table: pa.Table) -> pa.Table:
    """``table`` (validated: no null where ``NOT_NULL``) with those columns' fields marked not
    nullable, as Parquet is written: a REQUIRED column stores no definition levels, which a
    reader would otherwise decode and turn into a validity bitmap for every value (a quarter of
    the time of reading a trace's summary columns). Zero-copy."""
    fields = [
        field.with_nullable(False)
        if field.name in _NOT_NULL_NAMES and not column.null_count  # never a null lost
        else field
        for field, column in zip(table.schema, table.columns)
    ]
    return pa.Table.from_arrays(table.columns, schema=pa.schema(fields, table.schema.metadata))


def with_nullable_columns(table: pa.Table) -> pa.Table:
    """``table`` with every field nullable, as recfn's tables are in memory whatever file they
    came from (``with_required_columns`` marks some not nullable in Parquet). Zero-copy."""
    if all(field.nullable for field in table.schema):
        return table
    fields = [field.with_nullable(True) for field in table.schema]
    return pa.Table.from_arrays(table.columns, schema=pa.schema(fields, table.schema.metadata))


def with_every_column(table: pa.Table) -> pa.Table:
    """``table`` with every column of the schema, in ``COLUMNS`` order (those it lacks all
    null), then any others: the parts of a dataset all look alike to readers that take one
    file's schema for all (DuckDB, polars, ``pyarrow.dataset``). A column it lacks is its
    default (null for the optional ones)."""
    n = table.num_rows
    columns: list[Any] = []
    fields = []
    for column in COLUMNS:
        if column.name in table.column_names:
            columns.append(_named_dictionary(table.column(column.name)))
            fields.append(table.schema.field(column.name))
        elif column.default is NO_DEFAULT:
            raise TraceFormatError(f"with_every_column: the table lacks {column.name!r}")
        else:
            columns.append(_named_dictionary(constant_column(column, n)))
            fields.append(pa.field(column.name, column.arrow_type))
    for field in table.schema:
        if field.name not in BY_NAME:
            columns.append(table.column(field.name))
            fields.append(field)
    return pa.table(columns, schema=pa.schema(fields, metadata=table.schema.metadata))


_PLACEHOLDER: Final = "cpu"
"""The one entry of an all-null dictionary column's dictionary in a dataset part."""


def _named_dictionary(column: Union[pa.ChunkedArray, pa.Array]) -> Union[pa.ChunkedArray, pa.Array]:
    """A dictionary column with no value (all null, or no rows) with one unused entry in its
    dictionary (``_PLACEHOLDER``): pandas makes an empty dictionary's categories of another type
    than a filled one's, and Dask then cannot put the parts of a dataset together."""
    if not pa.types.is_dictionary(column.type) or len(column) != column.null_count:
        return column
    dictionary = pa.array([_PLACEHOLDER], column.type.value_type)
    indices = pa.nulls(len(column), column.type.index_type)
    return pa.DictionaryArray.from_arrays(indices, dictionary)


def metadata_of(table: pa.Table) -> dict[str, str]:
    """A table's schema metadata as text."""
    raw = table.schema.metadata or {}
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in raw.items()}


def validate(table: Any, source: str, *, exact: bool = False) -> pa.Table:
    """``table`` checked against the schema, its known columns cast to their documented types.

    Raises ``TraceFormatError`` naming ``source`` for a table of a newer schema version, one that
    lacks required columns, one whose columns cannot be cast without loss (with ``exact``: whose
    known columns have any other type) or one whose events break ``check_events``; TypeError
    when ``table`` is not a ``pyarrow.Table``. Returns ``table`` itself when nothing needed a cast.
    """
    if not isinstance(table, pa.Table):
        raise RecfnTypeError(f"{source} expects a pyarrow.Table, got {type(table).__name__}")
    check_schema(table.schema, source, exact=exact)
    if not exact:
        table = _cast_known(table, source)
    check_events(table, source, whole=PART_KEY.encode() not in (table.schema.metadata or {}))
    return table


def check_schema(arrow_schema: pa.Schema, source: str, *, exact: bool = False) -> None:
    """What ``validate`` checks of a table's schema alone (a file's footer is enough): its
    schema version is one this recfn reads, it has the required columns, and with ``exact``
    its known columns have their documented types; ``TraceFormatError`` naming ``source``."""
    raw = (arrow_schema.metadata or {}).get(SCHEMA_VERSION_KEY.encode())
    if raw is not None:
        try:
            version = int(raw)
        except ValueError:
            raise TraceFormatError(f"{source}: bad {SCHEMA_VERSION_KEY} {raw!r}") from None
        if version > SCHEMA_VERSION:
            raise TraceFormatError(
                f"{source}: trace schema version {version} is newer than this recfn supports "
                f"({SCHEMA_VERSION}); upgrade recfn"
            )
    missing = [c for c in REQUIRED if c not in arrow_schema.names]
    if missing:
        raise TraceFormatError(f"{source}: not a recfn event table (missing columns: {missing})")
    check_json_metadata(arrow_schema.metadata or {}, source)
    if exact:
        for field in arrow_schema:
            column = BY_NAME.get(field.name)
            if column is not None and field.type != column.arrow_type:
                raise TraceFormatError(
                    f"{source}: column {field.name!r} has type {field.type}, "
                    f"expected {column.arrow_type}"
                )


NOT_NULL: Final[tuple[str, ...]] = tuple(c.name for c in COLUMNS if not c.nullable)
"""Columns that hold no null (``check_events`` refuses one)."""
_NOT_NULL_NAMES: Final = frozenset(NOT_NULL)


def check_events(table: pa.Table, source: str, *, whole: bool = True) -> None:
    """Refuse (``TraceFormatError`` naming ``source`` and a row) a schema-typed table whose
    events cannot be: nulls in a column that has none, an ``end_ns`` before its ``start_ns``, an
    id used twice, a ``parent_id`` that is no row's id, or a parent chain that loops.

    Vectorised (numpy and Arrow compute, no loop per row): parents' rows are found by
    ``_rows_of``; chains cannot loop when every child is deeper than its parent (``depth``),
    else ``_check_acyclic`` follows them by pointer jumping. A table that is not ``whole`` (a
    part of a streamed capture, ``recfn.part``) may name parents that are not in it: written in
    another part, or never written by a process that was killed.
    """
    for field, values in zip(table.schema, table.columns):
        column = BY_NAME.get(field.name)
        if column is not None and not column.nullable and values.null_count:
            row = pc.index(pc.is_null(values), True).as_py()
            raise TraceFormatError(f"{source}: row {row}: column {field.name!r} is null")
    n = table.num_rows
    if n == 0:
        return
    start, end = table.column("start_ns"), table.column("end_ns")
    backwards = pc.less(end, start)
    if pc.any(backwards).as_py():
        row = pc.index(backwards, True).as_py()
        raise TraceFormatError(
            f"{source}: row {row}: end_ns {end[row]} is before start_ns {start[row]}"
        )
    processes = process_rows(table)
    if processes is None:
        _check_links(table, source, whole)
        return
    for label, rows in processes:  # ids are unique within a process (host, pid), not a fleet
        _check_links(table.take(rows), f"{source} ({label}; rows counted within it)", whole)


def column_names(value: object) -> Optional[list[str]]:
    """``value`` as a list of column names when it is an iterable of strings (not a string
    itself); None for anything else. The one reading of an argument that names columns."""
    if isinstance(value, (str, bytes)):
        return None
    try:
        names = list(value)  # type: ignore[call-overload]
    except TypeError:  # not iterable
        return None
    return names if all(isinstance(name, str) for name in names) else None


def process_rows(table: pa.Table) -> Optional[list[tuple[str, Any]]]:
    """Each process's (host, pid) label and rows, in order; None for a table of one process
    (or of none). A null host or pid is a value of its own. ``check_events`` checks the ids of
    each process apart; the out-of-core summary summarises each apart."""
    process = process_codes(table)
    if process is None:
        return None
    keys = [key for key in PROCESS_KEYS if key in table.column_names]
    order = np.argsort(process, kind="stable")
    bounds = np.cumsum(np.bincount(process))[:-1]
    groups = []
    for rows in np.split(order, bounds):
        first = int(rows[0])
        label = ", ".join(f"{key}={table.column(key)[first].as_py()}" for key in keys)
        groups.append((label, rows))
    return groups


def process_codes(table: pa.Table) -> Optional[np.ndarray]:
    """Each row's process as a code (0, 1, ... in (host, pid) order; a null host or pid a value
    of its own); None for a table of one process (or of none)."""
    keys = [key for key in PROCESS_KEYS if key in table.column_names]
    if not keys or table.num_rows == 0:
        return None
    return _row_codes([table.column(key) for key in keys])


def distinct_rows(table: pa.Table) -> int:
    """How many distinct rows `table` holds (a null is a value of its own), as Arrow's
    ``group_by(...).aggregate([])`` counts them; a small table's in numpy, where that plan's
    fixed cost (~1.5 ms) was a third of a small trace's summary and header."""
    if table.num_rows == 0 or table.num_columns == 0:
        return min(int(table.num_rows), 1)
    if table.num_rows > SMALL_FRAME_ROWS:
        return int(table.group_by(table.column_names).aggregate([]).num_rows)
    codes = _row_codes(table.columns)
    return 1 if codes is None else int(codes.max()) + 1


def _row_codes(columns: Sequence[pa.ChunkedArray]) -> Optional[np.ndarray]:
    """Each row's code (0, 1, ... in the order of the columns' values), equal where the rows'
    values are (a null a value of its own); None where every row is equal (a linear check,
    no sort: one process, every table recfn captures). The columns have rows."""
    codes = [code for column in columns for code in _key_codes(column)]
    varying = [code for code in codes if not bool((code == code[0]).all())]
    if not varying:
        return None
    combined = np.zeros(len(varying[0]), dtype=np.int64)
    bound = 1  # every code so far is below it
    for code in varying:  # one 1-D inverse per column, numbered together
        _, inverse = np.unique(code, return_inverse=True)
        width = int(inverse.max()) + 1
        if bound * width >= 2**62:  # renumbered before the product could overflow
            combined = np.unique(combined, return_inverse=True)[1].reshape(-1)
            bound = int(combined.max()) + 1
        combined = combined * width + inverse.reshape(-1)
        bound *= width
    _, combined = np.unique(combined, return_inverse=True)
    return np.asarray(combined.reshape(-1), dtype=np.int64)


def _key_codes(column: pa.ChunkedArray) -> list[Any]:
    """Numbers that are equal where the values of a process key are: numbers themselves (and,
    where some are null, whether each is), else codes in order of first appearance."""
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        found = [_numpy(column.fill_null(-1))]
        return found + [_numpy(pc.is_null(column))] if column.null_count else found
    if pa.types.is_dictionary(column.type):
        if column.num_chunks == 1 and column.null_count == 0:  # one value throughout: its code
            indices = _numpy(column.chunk(0).indices)
            if indices.size and bool((indices == indices[0]).all()):
                return [indices]
        column = column.cast(column.type.value_type)  # a dictionary may hold a value twice
    return [_numpy(pc.dictionary_encode(column.combine_chunks(), null_encoding="encode").indices)]


def _check_links(table: pa.Table, source: str, whole: bool) -> None:
    """Unique ids, parents that are rows of ``table`` (or anywhere, unless ``whole``), and no
    loops among them."""
    n = table.num_rows
    ids = _numpy(table.column("id"))
    parent_column = table.column("parent_id")
    has_parent = valid_flags(parent_column)
    children = np.flatnonzero(has_parent)
    targets = _numpy(parent_column.fill_null(0))[children]
    parents, found = _rows_of(ids, targets, source)
    if not bool(found.all()):
        if whole:
            bad = int(np.argmin(found))
            raise TraceFormatError(
                f"{source}: row {children[bad]}: parent_id {targets[bad]} is not the id of any row"
            )
        has_parent = has_parent.copy()
        has_parent[children[~found]] = False  # its parent is elsewhere: a root here
        children, parents = children[found], parents[found]
    depth = _numpy(table.column("depth"))
    if bool((depth[children] > depth[parents]).all()):
        return  # depth falls along every chain: no loops
    _check_acyclic(n, children, parents, ~has_parent, ids, source)


def _rows_of(ids: Any, targets: Any, source: str) -> tuple[Any, Any]:
    """The row of each of ``targets`` among the unique ``ids``, and whether it was found;
    ``TraceFormatError`` for an id used twice. Increasing ids (every table recfn builds) need
    no sort; ids spread over less than 4 times the rows go through a lookup array; others are
    sorted once, and looked up in sorted order (binary searches with a hint, cache friendly)."""
    n = len(ids)
    low, high = int(ids.min()), int(ids.max())
    if n > 1 and bool((ids[1:] > ids[:-1]).all()):
        if high - low == n - 1:  # the rows, shifted
            position = targets - low
            found = (position >= 0) & (position < n)
            return np.where(found, position, 0), found
        position = np.minimum(np.searchsorted(ids, targets), n - 1)
        return position, ids[position] == targets
    if high - low < 4 * n:
        lookup = np.full(high - low + 1, -1, dtype=np.int64)
        lookup[ids - low] = np.arange(n)
        twice = np.flatnonzero(lookup[ids - low] != np.arange(n))
        if len(twice):
            row = int(twice[0])
            _used_twice(source, ids[row], row, int(lookup[ids[row] - low]))
        inside = (targets >= low) & (targets <= high)
        position = lookup[np.where(inside, targets - low, 0)]
        found = inside & (position >= 0)
        return np.where(found, position, 0), found
    order = np.argsort(ids)
    sorted_ids = ids[order]
    twice = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if len(twice):
        rows = sorted(order[twice[0] : twice[0] + 2].tolist())
        _used_twice(source, sorted_ids[twice[0]], rows[0], rows[1])
    by_target = np.argsort(targets)
    position = np.empty(len(targets), dtype=np.int64)
    position[by_target] = np.minimum(np.searchsorted(sorted_ids, targets[by_target]), n - 1)
    return order[position], sorted_ids[position] == targets


def _used_twice(source: str, value: Any, first: int, second: int) -> None:
    raise TraceFormatError(
        f"{source}: id {value} is used by more than one row (rows [{first}, {second}])"
    )


def _check_acyclic(
    n: int, children: Any, parents: Any, is_root: Any, ids: Any, source: str
) -> None:
    """Pointer jumping: ``up[i]`` becomes the ancestor twice as far each round, roots point at
    themselves, and rows whose ``up`` is a root are done, so a forest takes about log2 of its
    deepest chain rounds; rows left after log2(n) + 1 rounds sit on or above a loop."""
    up = np.arange(n)
    up[children] = parents
    active = children[~is_root[parents]]
    for _ in range(n.bit_length() + 1):
        if not len(active):
            return
        up[active] = up[up[active]]
        active = active[~is_root[up[active]]]
    if len(active):
        row = int(active[0])
        raise TraceFormatError(
            f"{source}: row {row} (id {ids[row]}): its chain of parent_id never reaches a root "
            "(the parents form a cycle)"
        )


def _numpy(values: Union[pa.ChunkedArray, pa.Array]) -> Any:
    """A column without nulls as one numpy array."""
    return values.to_numpy()


def valid_flags(values: Union[pa.ChunkedArray, pa.Array]) -> np.ndarray:
    """Whether each entry of ``values`` is not null, as a numpy bool array (writable). Unpacked
    from the validity bitmap by numpy: ``is_valid().to_numpy()`` converts bit by bit, about 15x
    slower (0.48 against 0.03 ms for 512k values)."""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return valid_flags(values.chunk(0))
        parts = [valid_flags(chunk) for chunk in values.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)
    n = len(values)
    if not values.null_count:
        return np.ones(n, dtype=bool)
    bitmap = values.buffers()[0]
    plain = not (pa.types.is_null(values.type) or pa.types.is_union(values.type))
    if bitmap is None or not plain:  # nulls not held in a validity bitmap
        return np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    bits = np.frombuffer(bitmap, dtype=np.uint8)
    found = np.unpackbits(bits, count=values.offset + n, bitorder="little")[values.offset :]
    flags: np.ndarray = found.view(np.bool_)
    return flags


def not_a_trace(source: str, lacking: list[str]) -> TraceFormatError:
    """The error for a file that is not a recfn trace: it lacks event-table columns."""
    return TraceFormatError(
        f"{source}: not a recfn trace, it lacks the event-table column(s) {lacking}"
    )


def conform(data: Union[pa.Table, pd.DataFrame], source: str = "conform") -> pa.Table:
    """An event table (Arrow or pandas, recorded, imported or hand-made) as a schema table.

    Known columns are cast to their documented types, absent required columns get their
    defaults, and the metadata is kept when the input carries recfn's (else built afresh).
    Raises ``TraceFormatError`` when columns without a default (``ESSENTIAL``) are missing.
    """
    table, metadata = _as_table(data)
    missing = [c for c in ESSENTIAL if c not in table.column_names]
    if missing:
        raise TraceFormatError(f"{source}: not an event table: missing columns {missing}")
    n = table.num_rows
    columns: dict[str, Any] = {}
    for name in (*REQUIRED, *(c for c in table.column_names if c not in REQUIRED)):
        if name in table.column_names:
            columns[name] = table.column(name)
            continue
        column = BY_NAME[name]
        if column.default_from is not None:
            columns[name] = table.column(column.default_from)
        else:
            columns[name] = constant_column(column, n)
    conformed = _cast_known(pa.table(columns), source)
    if SCHEMA_VERSION_KEY not in metadata:
        start = pc.min(conformed.column("start_ns")).as_py() if n else 0
        dropped = metadata.get(DROPPED_EVENTS_KEY, "0")
        metadata = build_metadata(
            config={"imported": True},
            dropped_events=int(dropped) if dropped.isdigit() else 0,
            start_ns=start or 0,
            host=UNKNOWN_HOST,
        )
    return conformed.replace_schema_metadata(metadata)


def constant_column(column: Column, n: int) -> pa.Array:
    """``n`` times the column's default (null when it has none)."""
    dtype = column.arrow_type
    if column.default is None:
        return pa.nulls(n, dtype)
    if pa.types.is_dictionary(dtype):
        indices = pa.repeat(pa.scalar(0, dtype.index_type), n)
        return pa.DictionaryArray.from_arrays(indices, pa.array([column.default], pa.string()))
    return pa.repeat(pa.scalar(column.default, dtype), n)


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """A DataFrame with categoricals for dictionary columns, ``Int64`` for nullable ints and the
    metadata in ``df.attrs["recfn"]``; it carries the ``df.recfn`` accessor. List cells are
    shared between rows with equal values (`list_cells`)."""
    _hooks.pandas_returned()
    df = frame(table)
    df.attrs["recfn"] = metadata_of(table)
    return df


def frame(table: pa.Table, *, consume: bool = False) -> pd.DataFrame:
    """`table` as a DataFrame in the schema's pandas dtypes, without attrs: categoricals for
    dictionaries, ``Int64`` for nullable ints, `list_cells` for lists. With `consume`, each
    column's Arrow memory is released as it is converted (`table` is unusable after), so that
    the table and the frame are not both held."""
    if not consume and table.num_rows <= SMALL_FRAME_ROWS:
        columns = _small_frame_columns(table)
        if columns is not None:
            import pandas as pd

            return pd.DataFrame(columns, copy=False)
    return _arrow_frame(table, consume)


SMALL_FRAME_ROWS: Final = 100_000
"""Tables of at most this many rows are converted a column at a time (`_small_frame_columns`):
for them pyarrow's conversion costs more than the values, ~0.2 ms per dictionary column."""
_CATEGORIES_CACHED: Final = 64
"""Dictionaries of at most this many values keep their pandas dtype per process: a notebook's
traces repeat their kinds, threads and hosts, and a dtype checks its categories when made."""
_CATEGORY_DTYPES: dict[tuple[tuple[Any, ...], bool], Any] = {}


def _small_frame_columns(table: pa.Table) -> dict[str, Any] | None:
    """`table`'s columns as the pandas arrays `_arrow_frame` makes of them, or None for a
    column of a kind it alone converts (strings, a null in a plain int or float column, a
    dictionary in several chunks, with unsigned indices, or with a null or repeated value)."""
    import pandas as pd

    columns: dict[str, Any] = {}
    for field in table.schema:
        column = table.column(field.name)
        dtype = field.type
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            columns[field.name] = list_cells(column)
        elif field.name in NULLABLE_INTS and dtype == pa.int64():
            values = _writable(column.fill_null(0).to_numpy())
            mask = _writable(column.is_null().to_numpy())
            columns[field.name] = pd.arrays.IntegerArray(values, mask)
        elif pa.types.is_dictionary(dtype):
            parts = categorical_parts(column)
            if parts is None:
                return None
            dictionary, codes = parts
            categories = _category_dtype(dictionary, dtype.ordered)
            columns[field.name] = pd.Categorical.from_codes(codes, dtype=categories, validate=False)
        elif (
            pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_boolean(dtype)
        ) and column.null_count == 0:
            columns[field.name] = _writable(column.to_numpy())
        else:
            return None
    return columns


def categorical_parts(column: pa.ChunkedArray) -> tuple[pa.Array, np.ndarray] | None:
    """The dictionary and the codes (-1 for null; the indices' width, writable) of a
    dictionary column that pandas makes a categorical of as it is: string values, none null or
    repeated (such a dictionary makes no pandas dtype), signed indices, one chunk. None for any
    other column, which pyarrow's own conversion handles."""
    dtype = column.type
    if (
        not pa.types.is_dictionary(dtype)
        or column.num_chunks != 1
        or not pa.types.is_string(dtype.value_type)
        or not pa.types.is_signed_integer(dtype.index_type)
    ):
        return None
    chunk = column.chunk(0)
    dictionary = chunk.dictionary
    if dictionary.null_count or pc.count_distinct(dictionary).as_py() != len(dictionary):
        return None
    return dictionary, _writable(chunk.indices.fill_null(-1).to_numpy(zero_copy_only=False))


def _writable(values: np.ndarray) -> np.ndarray:
    """`values`, or a copy of them where they are Arrow's read-only memory: users edit frames."""
    return values if values.flags.writeable else values.copy()


def _category_dtype(dictionary: pa.Array, ordered: bool) -> Any:
    """The pandas dtype of a dictionary column with these values, as pyarrow makes it."""
    if len(dictionary) > _CATEGORIES_CACHED:
        return _new_category_dtype(dictionary, ordered)
    key = (tuple(dictionary.to_pylist()), ordered)
    found = _CATEGORY_DTYPES.get(key)
    if found is None:
        if len(_CATEGORY_DTYPES) >= 4096:
            _CATEGORY_DTYPES.clear()
        found = _CATEGORY_DTYPES[key] = _new_category_dtype(dictionary, ordered)
    return found


def _new_category_dtype(dictionary: pa.Array, ordered: bool) -> Any:
    import pandas as pd

    # pyarrow gives an empty dictionary object categories, others pandas' string dtype
    categories = pd.Index(dictionary.to_pandas()) if len(dictionary) else pd.Index([], dtype=object)
    return pd.CategoricalDtype(categories, ordered=ordered)


def _arrow_frame(table: pa.Table, consume: bool) -> pd.DataFrame:
    """`frame` by pyarrow's own conversion, with the nullable ints and lists set apart."""
    positions = {name: i for i, name in enumerate(table.column_names)}
    apart: dict[str, Any] = {}
    for field in table.schema:
        if field.name in NULLABLE_INTS:
            apart[field.name] = table.column(field.name).to_pandas(types_mapper=int64_mapper).array
        elif pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
            apart[field.name] = list_cells(table.column(field.name))
    table = table.drop_columns(list(apart))
    df = table.to_pandas(self_destruct=consume, split_blocks=consume)
    del table
    import pandas as pd

    for name, values in apart.items():
        # A Series of the final dtype: pandas then does not scan object cells to infer one.
        df.insert(positions[name], name, pd.Series(values, index=df.index, copy=False))
    return df


def list_cells(column: pa.ChunkedArray) -> np.ndarray:
    """A list column as pyarrow's ``to_pandas()`` converts it (a numpy array per cell, None for
    nulls), but with one cell per distinct value, shared by the rows that hold it as a
    ``copy()``'s rows share theirs: trace rows repeat a few shapes, and a million cells cost
    more than the rest of the frame. Shared cells are made read-only, so that writing into one
    raises instead of changing other rows."""
    encoded = _codes(column)
    if encoded is None or len(column) == 0:
        return np.asarray(column.to_pandas(), dtype=object)
    codes, distinct = encoded
    holder = np.empty(distinct, np.int64)
    holder[codes] = np.arange(codes.size)  # a row that holds each value, whichever
    cells = np.asarray(column.take(holder).to_pandas(), dtype=object)
    for cell in cells:
        if isinstance(cell, np.ndarray):
            cell.flags.writeable = False
    return cells.take(codes)


def _codes(values: pa.ChunkedArray) -> tuple[np.ndarray, int] | None:
    """An integer per element of `values` (chunks end to end), equal where the elements are
    equal (nulls included), and the number of distinct codes (-1 for integers, their own
    codes); None for elements other than lists, integers and strings. A list's code is that
    of its elements' codes as bytes, so that Arrow's binary hash kernel hashes lists a level
    at a time (it has none for lists)."""
    dtype = values.type
    if pa.types.is_integer(dtype) and values.null_count == 0:
        return values.to_numpy(), -1
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        chunks = values.chunks
        offsets = [chunk.offsets.to_numpy().astype(np.int64) for chunk in chunks]
        used = [c.values.slice(o[0], o[-1] - o[0]) for c, o in zip(chunks, offsets)]
        inner = _codes(pa.chunked_array(used, dtype.value_type))
        if inner is None:
            return None
        elements = pa.py_buffer(np.ascontiguousarray(inner[0]))
        keys, start = [], 0
        for chunk, bounds, child in zip(chunks, offsets, used):
            bounds = (bounds - bounds[0] + start) * inner[0].itemsize
            validity = chunk.is_valid().buffers()[1] if chunk.null_count else None
            buffers = [validity, pa.py_buffer(bounds), elements]
            keys.append(pa.Array.from_buffers(pa.large_binary(), len(chunk), buffers))
            start += len(child)
        values = pa.chunked_array(keys, pa.large_binary())
    elif not (pa.types.is_integer(dtype) or pa.types.is_string(dtype)):
        return None
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    if encoded.num_chunks == 0:  # it leaves out empty chunks
        return np.empty(0, np.int32), 0
    codes = np.concatenate([chunk.indices.to_numpy() for chunk in encoded.chunks])
    return codes, len(encoded.chunk(0).dictionary)


def int64_mapper(dtype: pa.DataType) -> Any:
    """pandas' nullable ``Int64`` for Arrow's int64 (float64 would round epoch nanoseconds)."""
    import pandas as pd

    return pd.Int64Dtype() if dtype == pa.int64() else None


def _as_table(data: Any) -> tuple[pa.Table, dict[str, str]]:
    """``data`` as an Arrow table and its recfn metadata (from the schema or ``df.attrs``)."""
    if isinstance(data, pa.Table):
        metadata = metadata_of(data)
    elif type(data).__name__ == "DataFrame" and hasattr(data, "attrs"):
        attrs = data.attrs.get("recfn")
        metadata = {str(k): str(v) for k, v in attrs.items()} if isinstance(attrs, dict) else {}
        data = pa.table(
            {str(name): pa.array(data[name], from_pandas=True) for name in data.columns}
        )
    else:
        raise RecfnTypeError(f"expected a pyarrow.Table or a DataFrame, got {type(data).__name__}")
    return data, {k: v for k, v in metadata.items() if k.startswith(METADATA_PREFIX)}


def _cast_known(table: pa.Table, source: str) -> pa.Table:
    """Cast the known columns whose type differs; refuse casts that would lose values."""
    for index, name in enumerate(table.column_names):
        column = BY_NAME.get(name)
        if column is None or table.schema.field(index).type == column.arrow_type:
            continue
        values = table.column(index)
        actual = values.type
        if not _same_family(actual, column.arrow_type):
            raise TraceFormatError(
                f"{source}: column {name!r} has type {actual}, expected {column.arrow_type}"
            )
        try:
            if pa.types.is_dictionary(column.arrow_type):
                values = _dictionary(values, column.arrow_type)
            else:
                values = values.cast(column.arrow_type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise TraceFormatError(
                f"{source}: column {name!r} ({actual}) does not fit {column.arrow_type}: {exc}"
            ) from None
        table = table.set_column(index, name, values)
    return table


def _dictionary(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """``values`` as dictionary ``target``; an existing dictionary keeps its order."""
    if pa.types.is_dictionary(values.type):
        if pa.types.is_string(values.type.value_type):
            try:
                return values.cast(target, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        values = values.cast(pa.string())
    encoded = pc.dictionary_encode(values.cast(pa.string()).combine_chunks())
    return pa.chunked_array([encoded.cast(target)], target)


def _family(dtype: pa.DataType) -> str:
    if pa.types.is_dictionary(dtype):
        return _family(dtype.value_type)
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        return "number"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return "list"
    if pa.types.is_boolean(dtype):
        return "bool"
    return str(dtype)


def _same_family(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Whether a cast could be lossless (values that do not fit are refused by the cast)."""
    empty = pa.types.is_null(actual) or (
        pa.types.is_dictionary(actual) and pa.types.is_null(actual.value_type)
    )  # all null: fits any type (pandas' categoricals without categories become these)
    return empty or _family(actual) == _family(expected)


__all__ = [
    "BY_NAME",
    "CALL_TRACING_KEY",
    "CHROME_MEMBERS_KEY",
    "CLOCK_OFFSETS_KEY",
    "COLUMNS",
    "CONFIG_KEY",
    "CONTENT_HASH_KEY",
    "COUNTER",
    "DROPPED_EVENTS_KEY",
    "ERROR_KEY",
    "ESSENTIAL",
    "FLIGHT_RECORDER_KEY",
    "FLOW",
    "HOST_KEY",
    "IMPORTED_KINDS",
    "JSON_KEYS",
    "KINDS",
    "LOCAL_RANK_KEY",
    "MARK",
    "MEMORY",
    "METADATA_PREFIX",
    "NOT_NULL",
    "NO_DEFAULT",
    "NULLABLE_INTS",
    "OPTIONAL",
    "PARQUET_DELTA",
    "PARQUET_DICTIONARY",
    "PART_KEY",
    "PID_KEY",
    "PROCESS_KEYS",
    "RANGE",
    "RANK_KEY",
    "REQUIRED",
    "SCHEMA_VERSION",
    "SCHEMA_VERSION_KEY",
    "SMALL_FRAME_ROWS",
    "START_NS_KEY",
    "STREAM_KEY",
    "THREAD_KEYS",
    "UNKNOWN_HOST",
    "VERSION_KEY",
    "WALL_NS_KEY",
    "WORLD_SIZE_KEY",
    "Column",
    "build_metadata",
    "categorical_parts",
    "check_content_hash",
    "check_events",
    "check_json_metadata",
    "check_schema",
    "column_names",
    "column_type",
    "compare_digests",
    "conform",
    "constant_column",
    "distinct_rows",
    "empty_table",
    "frame",
    "int64_mapper",
    "json_object",
    "list_cells",
    "metadata_of",
    "not_a_trace",
    "numpy_dtype",
    "process_codes",
    "process_rows",
    "stored_content_hash",
    "to_pandas",
    "valid_flags",
    "validate",
    "with_content_hash",
    "with_every_column",
    "with_nullable_columns",
    "with_required_columns",
]
