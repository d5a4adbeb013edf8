"""Chrome / Perfetto JSON trace files (the Trace Event Format) to and from the event table.

`read_chrome_trace` imports traces from ``torch.profiler``'s ``export_chrome_trace``, Chrome,
Perfetto's JSON export and recfn itself: complete ("X") events and B/E pairs become ranges,
instants ("i", "I", "R") marks, counters ("C") memory events, and "thread_name" metadata names
the threads. Parents come from interval nesting per thread. Other phases (flows, async,
objects, samples) are skipped. Event fields without a column are kept in ``args`` as JSON.

A torch trace can hold millions of events, so the file is read a chunk at a time
(`recfn.formats.chrome._stream`) and each chunk's events become compact columns before the next chunk
is read: in compiled builds a native decoder (``recfn/native/_cchrome.c``) reads the common shape
straight into columns; other batches (and every batch of a pure install) are decoded by msgspec
into typed structs whose args stay unparsed JSON text (batches with other event fields into
plain dicts and lists). Both give the same table. The event table is built
in Arrow from those (``recfn.load`` keeps it, `read_chrome_trace` converts it to pandas);
nothing touches pandas per event. Writing encodes a batch of rows at a time through the (gzip) stream.
"""

from __future__ import annotations

import functools
import gc
import gzip
import io
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, BinaryIO, Final, Protocol

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from recfn.errors import RecfnValueError, TraceFormatError
from recfn.formats.chrome import _json as jsonio
from recfn.formats.chrome import _writer
from recfn.formats.chrome._reader import (
    ARGS_MEMBER,
    BATCH,
    OUTLINE,
    SCOPES_MEMBER,
    Columns,
    NativeBatch,
    Outline,
    decode_events,
    dictionaries_by_row,
    events_table,
    frame_of,
    release_native,
)
from recfn.formats.chrome._stream import MAX_DEPTH as MAX_DEPTH
from recfn.formats.chrome._stream import (
    MAX_JSON_BYTES,
    GiveUp,
    Stream,
    check_depth,
    inflated,
)
from recfn.formats.chrome._times import DOCUMENT_TIMES, exact_times, time_base
from recfn.formats.chrome._writer import (
    Layout,
    Rows,
    args_columns_of,
    distributed_info,
    encode_events,
    encode_part,
)
from recfn.formats.columns import INT64_MAX, INT64_MIN, require
from recfn.formats.files import open_trace_file
from recfn.formats.hooks import pandas_returned
from recfn.formats.progress import Bar
from recfn.formats.schema import (
    CHROME_MEMBERS_KEY,
    METADATA_PREFIX,
    PID_KEY,
    RANK_KEY,
    WORLD_SIZE_KEY,
    json_object,
    metadata_of,
)

PathLike = str | os.PathLike[str]


def read_chrome_trace(path: PathLike, *, max_bytes: int = MAX_JSON_BYTES) -> pd.DataFrame:
    """Read a Chrome trace (``.json``, or gzip-compressed such as ``.json.gz``) as a recfn event
    table in the dtypes of ``prof.to_pandas()``, plus an ``args`` column and, when the trace has
    them, ``memory_bytes``/``device`` and torch's shapes as ``input_shapes``/``input_dtypes``.

    ``pid``/``tid`` pairs become ``thread_id`` 1, 2, ... in order of first event; times are
    ``baseTimeNanoseconds`` (when present) plus ``ts`` microseconds. A JSON list missing its
    closing bracket, which the format allows, is accepted.

    Every file that is not a readable trace raises ``TraceFormatError`` naming the file and
    what is wrong: not JSON or not UTF-8, corrupt or truncated gzip, more than `max_bytes` of
    JSON, nesting deeper than `MAX_DEPTH` levels, a top level that is neither a list of events nor an object with a
    ``traceEvents`` list, events that are not objects, ``ph`` that is not a string, ``name``,
    ``cat``, ``pid`` or ``tid`` that is not a scalar, integers outside int64, times that are
    not finite or fall outside int64 nanoseconds, a negative ``dur``. FileNotFoundError and
    IsADirectoryError when there is no file (see ``recfn.formats.io.open_trace_file``).
    """
    pandas_returned()
    return frame_of(_read(os.fspath(path), max_bytes))


def read_chrome_table(path: PathLike, *, max_bytes: int = MAX_JSON_BYTES) -> pa.Table:
    """`read_chrome_trace`'s events as a ``pyarrow.Table`` in the schema's types, but for
    dictionaries indexed by int32 (``recfn.formats.schema.conform`` narrows them), each holding the
    values its rows use in order of first use: the table that ``recfn.load`` and
    ``recfn convert`` keep, built without a DataFrame. Same errors."""
    return dictionaries_by_row(_read(os.fspath(path), max_bytes))


def _read(source: str, max_bytes: int) -> pa.Table:
    """The event table of the trace file `source` (`events_table`); the native decoder's
    buffers are freed when it ends (`release_native`)."""
    try:
        with _gc_paused():
            streamed = _read_streamed(source, max_bytes)
            if streamed is not None:
                return streamed
            with open_trace_file(source) as fh:
                raw = _read_json(fh, source, max_bytes)
            check_depth(raw, source)
            outline = _outline(raw, source)
            if outline is None:
                return _decode_values(raw, source)
            members = _members(raw)
            del raw  # its events' texts keep it until the last batch is decoded
            columns = Columns(source)
            for batch in _batches(outline[0], source):
                columns.add(batch)
            return events_table(columns, outline[1], source, members)
    except TraceFormatError:
        raise
    except UnicodeDecodeError as error:
        raise TraceFormatError(f"{source}: not UTF-8 text ({error})") from None
    except RecursionError:
        raise TraceFormatError(f"{source}: JSON nested too deeply to decode") from None
    except (ValueError, TypeError, OverflowError, KeyError, IndexError, pa.ArrowException) as error:
        # A check missed above; still a bad file, not a bug to show as a traceback.
        raise TraceFormatError(
            f"{source}: not a readable Chrome trace ({type(error).__name__}: {error})"
        ) from error
    finally:
        release_native()


def _read_streamed(source: str, max_bytes: int) -> pa.Table | None:
    """The event table of a trace read a chunk at a time (`recfn.formats.chrome._stream`), so that
    memory never holds the whole file; None for a file of another shape, to decode whole."""
    with open_trace_file(source) as fh:
        size = os.fstat(fh.fileno()).st_size
        with Bar(size, desc=f"reading {os.path.basename(source)}", unit="B") as bar:
            stream = Stream(inflated(fh, source, max_bytes, bar.update), source)
            columns = Columns(source)
            try:
                for batch in stream.batches():
                    columns.add(batch)
            except GiveUp:
                return None
    _check_base(stream.base_ns, source)
    return events_table(columns, stream.base_ns, source, stream.members)


def _read_json(fh: BinaryIO, source: str, max_bytes: int) -> bytearray:
    """The file's JSON bytes, inflated if gzip-compressed; refuses more than `max_bytes`."""
    raw = bytearray()
    for chunk in inflated(fh, source, max_bytes):
        raw += chunk
    return raw


def _outline(raw: bytes | bytearray, source: str) -> tuple[list[msgspec.Raw], int] | None:
    """The JSON texts of a trace's events and its baseTimeNanoseconds; None for a trace
    whose outline does not fit (no list of events, a baseTimeNanoseconds that is not an
    integer), which `_decode_values` tells what is wrong with.

    Events are then decoded `BATCH` at a time (`_batches`): only one batch of decoded events
    is alive at once.
    """
    try:
        document = _parse(raw, source, OUTLINE.decode)
    except msgspec.ValidationError:
        return None
    if isinstance(document, Outline):
        events, base_ns = document.traceEvents, document.baseTimeNanoseconds
    else:
        events, base_ns = document, 0
    _check_base(base_ns, source)
    return events, base_ns


_MEMBERS: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _members(raw: bytes | bytearray) -> dict[str, Any]:
    """The top-level members of a trace object but its events ({} for a list of events)."""
    if raw.lstrip()[:1] != b"{":
        return {}
    try:
        members = _MEMBERS.decode(raw)
        return {k: jsonio.loads(v) for k, v in members.items() if k != "traceEvents"}
    except (ValueError, UnicodeDecodeError):
        return {}


def _batches(events: list[msgspec.Raw], source: str) -> Iterator[list[Any] | NativeBatch]:
    """`BATCH` events at a time, decoded as `Event` structs, or plain values when they do not
    fit them; `events` is emptied on the way, so that their text can be freed."""
    while events:
        text = b"[" + b",".join(events[:BATCH]) + b"]"
        del events[:BATCH]
        try:
            batch = decode_events(text, MAX_DEPTH)  # the file's depth is checked
        except msgspec.ValidationError as error:  # numbers beyond float64
            raise TraceFormatError(f"{source}: not a JSON trace: {error}") from None
        except (ValueError, UnicodeDecodeError) as error:
            raise TraceFormatError(f"{source}: not a JSON trace: {error}") from None
        yield batch


def _decode_values(raw: bytes | bytearray, source: str) -> pa.Table:
    """The event table of a trace decoded whole into plain values; TraceFormatError that says
    what is wrong with its top level."""
    try:
        document = _parse(raw, source, jsonio.loads)
    except msgspec.ValidationError as error:  # numbers beyond float64
        raise TraceFormatError(f"{source}: not a JSON trace: {error}") from None
    events: Any
    if isinstance(document, dict):
        events = document.get("traceEvents")
        base_ns = document.get("baseTimeNanoseconds", 0)
        if not isinstance(base_ns, int) or isinstance(base_ns, bool):
            raise TraceFormatError(f"{source}: baseTimeNanoseconds must be an integer")
    else:
        events, base_ns = document, 0
    if not isinstance(events, list):
        raise TraceFormatError(
            f"{source}: expected a list of events or an object with a traceEvents list, "
            f"got {type(events if isinstance(document, dict) else document).__name__}"
        )
    _check_base(base_ns, source)
    events = exact_times(events, raw, lambda: _parse(raw, source, DOCUMENT_TIMES.decode))
    columns = Columns(source)
    columns.add(events)
    members = document if isinstance(document, dict) else {}
    return events_table(columns, base_ns, source, members)


def _check_base(base_ns: int, source: str) -> None:
    if not INT64_MIN <= base_ns <= INT64_MAX:
        raise TraceFormatError(f"{source}: baseTimeNanoseconds {base_ns} does not fit int64")


GZIP_LEVEL: Final = 6
"""gzip's level for a ``.json.gz`` unless told otherwise: zlib's default balance."""
FASTEST_ISAL_LEVEL: Final = 1
"""ISA-L's level (0 to 3) for a ``.json.gz`` asked for at level 1: on a traced cell's 5.8 MB
of JSON 5 ms and 574 kB, where zlib's level 1 took 30 ms for 596 kB (ISA-L's 0: 735 kB)."""


def write_chrome_trace(
    data: pd.DataFrame | pa.Table,
    path: PathLike,
    *,
    base_ns: int | None = None,
    compresslevel: int = GZIP_LEVEL,
    overwrite: bool = False,
) -> None:
    """Write an event table, DataFrame or ``pyarrow.Table``, as a Chrome trace that Perfetto,
    chrome://tracing, torch-tb-profiler and HTA read.

    Ranges become complete "X" events (still-open ones "B" events without an "E"; async ranges
    "b"/"e" pairs), marks instant "i" events (async ones "n"), memory events torch's "[memory]"
    instants (``Bytes``, ``Total Allocated``, the device) with a "C" counter of the running
    total per process, name and device beside, counters "C" events, flows "s"/"t"/"f" events,
    thread names "M" metadata events. The scopes ``user_scope`` and ``function`` are written as
    torch's categories ``user_annotation`` and ``cpu_op``. ``ts``/``dur`` are exact
    microseconds after ``baseTimeNanoseconds``, which is `base_ns` (default: the first start
    rounded down to a multiple of 10^15 ns, so that the files of one job's ranks share it).
    Processes are told apart by host and pid: each gets "process_name" and recfn's
    "recfn_process" metadata (host, pid, rank), and a Chrome pid of its own where two hosts'
    processes share a pid. A table's ``recfn.*`` schema metadata goes to ``otherData``; a table
    of one rank gets ``distributedInfo`` (``rank``, ``world_size``) as HTA reads it, and a
    trace imported from another tool its top-level members back (torch's
    ``distributedInfo``, ``deviceProperties``). A path ending in ``.gz`` is compressed, at
    gzip's `compresslevel` (1 fastest to 9 smallest; RecfnValueError for another; level 1
    with ISA-L where it is installed, see `_gzip_stream`).

    Rows are encoded and written (through the gzip stream) a batch at a time, so memory holds
    the table and one batch's JSON, never the whole file's; a progress bar shows on a terminal
    or in a notebook. `estimate_chrome_bytes` tells beforehand about how large the file gets.

    The file appears whole or not at all (`recfn.formats.files.write_atomic`), and a file recfn
    did not write is replaced only with `overwrite` (FileExistsError otherwise, before any work).
    """
    from recfn.formats.files import path_name, write_atomic

    _check_level(compresslevel)
    name = path_name(path)
    write_atomic(
        name,
        functools.partial(
            write_chrome_file,
            data,
            base_ns=base_ns,
            compresslevel=compresslevel,
            shown_as=os.path.basename(name),
        ),
        overwrite=overwrite,
    )


def _check_level(compresslevel: object) -> None:
    if isinstance(compresslevel, bool) or compresslevel not in range(1, 10):
        raise RecfnValueError(f"compresslevel must be 1 to 9, got {compresslevel!r}")


def write_chrome_file(
    data: pd.DataFrame | pa.Table,
    path: PathLike,
    *,
    base_ns: int | None = None,
    compresslevel: int = GZIP_LEVEL,
    shown_as: str | None = None,
) -> None:
    """`write_chrome_trace`'s writing itself: straight into `path`, whatever is there, for
    callers that give it a file of their own (the temporary file of an atomic write; the
    progress bar then names `shown_as`, the file it becomes)."""
    _check_level(compresslevel)
    layout, head = _prepare(data, base_ns=base_ns)
    name = os.fspath(path)
    with (
        _output(name, compresslevel) as out,
        Bar(layout.rows.count, desc=f"writing {shown_as or os.path.basename(name)}") as bar,
    ):
        for piece in _file_pieces(layout, head, bar):
            out.write(piece)


def chrome_gz_bytes(
    data: pd.DataFrame | pa.Table, *, base_ns: int | None = None, compresslevel: int = GZIP_LEVEL
) -> bytes:
    """The bytes `write_chrome_file` writes to a ``.json.gz`` path, made in memory, with no
    progress bar (a notebook's embedded trace, the view's download): no file, and no writer
    thread for a table of one batch (``_writer.ROWS``), where it cost more than the events."""
    _check_level(compresslevel)
    layout, head = _prepare(data, base_ns=base_ns)
    buffer = io.BytesIO()
    with _compressing(buffer, compresslevel, behind=layout.rows.count > _writer.ROWS) as out:
        for piece in _file_pieces(layout, head, None):
            out.write(piece)
    return buffer.getvalue()


def _file_pieces(layout: Layout, head: bytes, bar: Bar | None) -> Iterator[bytes]:
    """The file's JSON in the order it is written: `head`, the events a batch at a time
    (comma-separated), the closing brackets."""
    yield head
    separator = b""
    for events in _event_batches(layout, bar):
        if events:
            yield separator + events
            separator = b","
    yield b"]}"


RANK_FILE: Final = "rank-{rank}.json.gz"
"""The name `write_chrome_ranks` gives each rank's file."""


def write_chrome_ranks(table: pa.Table, folder: PathLike, *, overwrite: bool = False) -> list[str]:
    """Write the events of each rank of `table` (its ``rank`` column) as a Chrome trace of its
    own in `folder` (made if missing), `RANK_FILE`, as HTA reads a job: one file per rank, each
    with ``distributedInfo`` (``rank``, ``world_size``), all on one time base
    (``baseTimeNanoseconds``, so that HTA, which lines ranks up by ``ts`` alone, aligns them).
    Returns the paths written, by rank. Each file is written whole or not at all, and a file
    recfn did not write is replaced only with `overwrite` (FileExistsError). RecfnValueError
    for a table without ranks or with events of no rank (-1)."""
    from recfn.formats.files import write_atomic

    if "rank" not in table.column_names:
        raise RecfnValueError("the trace has no rank column: there are no ranks to split by")
    rank = table.column("rank").fill_null(-1).to_numpy()
    found = sorted(set(rank.tolist()))
    if not found or found[0] < 0:
        unranked = int(np.count_nonzero(rank < 0))
        raise RecfnValueError(
            f"{unranked} of {len(rank)} events have no rank (-1): every event needs one to be "
            "split by rank (filter them out first)"
        )
    name = os.fspath(folder)
    os.makedirs(name, exist_ok=True)
    base = time_base(int(pc.min(table.column("start_ns")).as_py()))
    metadata = metadata_of(table)
    world = metadata.get(WORLD_SIZE_KEY, "")
    world = world if world.isdigit() and int(world) > 0 else str(len(found))
    written = []
    for each in found:
        part = table.filter(pa.array(rank == each))
        own = {**metadata, RANK_KEY: str(each), WORLD_SIZE_KEY: world}
        pids = pc.unique(part.column("pid")).to_pylist()
        if len(pids) == 1:
            own[PID_KEY] = str(pids[0])
        part = part.replace_schema_metadata(own)
        path = os.path.join(name, RANK_FILE.format(rank=each))
        write_atomic(
            path,
            functools.partial(
                write_chrome_file, part, base_ns=base, shown_as=os.path.basename(path)
            ),
            overwrite=overwrite,
        )
        written.append(path)
    return written


def estimate_chrome_bytes(data: pd.DataFrame | pa.Table, *, compressed: bool = False) -> int:
    """About how many bytes `write_chrome_trace` writes for `data` (gzip-compressed ones with
    `compressed`, as for a ``.gz`` path): the JSON of up to `SAMPLE_ROWS` rows spread over the
    table, scaled to all rows. Quick (milliseconds) whatever the size; a rough figure, usually
    within a few tens of percent (compressed sizes are overestimated: a sample repeats less)."""
    rows = Rows(data)
    _check_columns(data)
    head = _head(data, rows, time_base(rows.start_ns()), {})
    if rows.count == 0:
        return len(head) + 2
    picked = np.unique(
        np.linspace(0, rows.count - 1, min(rows.count, SAMPLE_ROWS)).astype(np.int64)
    )
    sample = rows.take(picked)
    encoded = encode_events(sample, Layout(Rows(sample)))
    per_row = (len(encoded) + 2) / len(picked)
    if compressed:
        per_row *= len(gzip.compress(encoded, compresslevel=GZIP_LEVEL)) / len(encoded)
    return len(head) + 2 + round(per_row * rows.count)


SAMPLE_ROWS: Final = 2000
"""Rows that `estimate_chrome_bytes` encodes."""
LARGE_JSON_BYTES: Final = 1 << 30
"""Estimated sizes above this are announced by ``recfn convert`` before it writes."""


def _check_columns(data: pd.DataFrame | pa.Table) -> None:
    require(data, REQUIRED_TO_WRITE, "write_chrome_trace")


def _prepare(data: pd.DataFrame | pa.Table, *, base_ns: int | None) -> tuple[Layout, bytes]:
    """The layout of an event table and the JSON of its file up to the first event."""
    _check_columns(data)
    layout = Layout(Rows(data), base_ns)
    return layout, _head(data, layout.rows, layout.base_ns, layout.categories, layout)


def _head(
    data: pd.DataFrame | pa.Table,
    rows: Rows,
    base_ns: int,
    categories: dict[str, str],
    layout: Layout | None = None,
) -> bytes:
    """The file's JSON up to its first event: ``schemaVersion`` and ``baseTimeNanoseconds``
    first (how recfn knows its own files, `recfn.formats.files.CHROME_MARK`), then
    ``distributedInfo`` written as HTA's parser looks for it (``"rank": N``, with a space),
    another tool's members, ``otherData`` (recfn's metadata) and the categories written for
    scopes (`SCOPES_MEMBER`), and the columns its events carry in args (`ARGS_MEMBER`)."""
    found = metadata_of(data) if isinstance(data, pa.Table) else data.attrs.get("recfn", {})
    found = found if isinstance(found, dict) else {}
    metadata = {str(k): str(v) for k, v in found.items() if str(k).startswith(METADATA_PREFIX)}
    members = _foreign_members(metadata)
    head = b'{"schemaVersion":1,"baseTimeNanoseconds":%d,"displayTimeUnit":"ms"' % base_ns
    info = distributed_info(layout, metadata) if layout is not None else {}
    info = info or members.pop("distributedInfo", None)
    members.pop("distributedInfo", None)
    if isinstance(info, dict) and info:
        head += b',"distributedInfo":' + json.dumps(info).encode()
    for key, value in members.items():
        head += b"," + jsonio.dumps(key) + b":" + jsonio.dumps(value)
    head += b',"otherData":' + jsonio.dumps(metadata)
    listed = args_columns_of(data)
    if listed:
        head += b',"' + ARGS_MEMBER.encode() + b'":' + jsonio.dumps(listed)
    if categories:
        head += (
            b',"'
            + SCOPES_MEMBER.encode()
            + b'":'
            + jsonio.dumps({category: scope for scope, category in categories.items()})
        )
    return head + b',"traceEvents":['


RECFN_MEMBERS: Final = frozenset(
    ("schemaVersion", "baseTimeNanoseconds", "displayTimeUnit", "otherData", "traceEvents")
)


def _foreign_members(metadata: dict[str, str]) -> dict[str, Any]:
    """The top-level members of the Chrome file a trace was imported from
    (`CHROME_MEMBERS_KEY`), but those recfn writes itself."""
    members = json_object(metadata.get(CHROME_MEMBERS_KEY)) or {}
    return {
        k: v
        for k, v in members.items()
        if k not in RECFN_MEMBERS and k not in (SCOPES_MEMBER, ARGS_MEMBER)
    }


REQUIRED_TO_WRITE: Final = ("name", "kind", "start_ns", "end_ns", "thread_id")


def _event_batches(layout: Layout, bar: Bar | None) -> Iterator[bytes]:
    """The JSON of the metadata events, then of the events of `ROWS` rows at a time, each
    comma-separated without brackets."""
    yield jsonio.dumps(layout.header_events())[1:-1]
    positions, keys, totals = layout.totals
    for first, part in layout.rows.parts():
        size = len(part)
        lo, hi = np.searchsorted(positions, [first, first + size])
        batch = (positions[lo:hi] - first, keys[lo:hi], totals[lo:hi])
        yield encode_part(part, layout, batch, first)
        if bar is not None:
            bar.update(size)


class _Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


@contextmanager
def _output(path: str, level: int) -> Iterator[_Sink]:
    """`path` opened for writing, through a gzip stream (at `level`) when it ends with
    ``.gz``, whose writes run behind the caller (`_compressing`)."""
    with open(path, "wb") as raw:
        if not path.endswith(".gz"):
            yield raw
            return
        with _compressing(raw, level) as out:
            yield out


@contextmanager
def _compressing(raw: BinaryIO, level: int, *, behind: bool = True) -> Iterator[_Sink]:
    """A gzip stream (at `level`) onto `raw`, its writes run behind the caller (`_Behind`)
    unless `behind` is False."""
    with _gzip_stream(raw, level) as out:
        if not behind:
            yield out
            return
        writer = _Behind(out)
        try:
            yield writer
            writer.wait()
        finally:
            writer.close()


def _gzip_stream(raw: BinaryIO, level: int) -> gzip.GzipFile:
    """A gzip stream onto `raw`: zlib's at `level`, except at level 1 (the fastest) where ISA-L's
    igzip is installed (the ``isal`` package): five times quicker than zlib's level 1 on trace
    JSON, and no larger (`FASTEST_ISAL_LEVEL`)."""
    if level == 1:
        try:
            from isal import igzip
        except ImportError:  # a platform without its wheels: zlib does it, slower
            pass
        else:
            stream: gzip.GzipFile = igzip.IGzipFile(  # type: ignore[no-untyped-call]
                filename="", mode="wb", fileobj=raw, compresslevel=FASTEST_ISAL_LEVEL
            )
            return stream
    return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level)


class _Behind:
    """A stream's writes run in a worker thread, one at a time and in order, while the caller
    goes on: gzip's deflate and its CRC release the GIL, so the next batch of events is encoded
    while the last one is compressed (a third of the time of a ``.json.gz``, before). At most
    one write is in flight, so memory holds one batch more. A failed write is raised by the next
    `write` or by `wait`."""

    def __init__(self, out: _Sink) -> None:
        self._out = out
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="recfn-gzip")
        self._last: Future[object] | None = None

    def write(self, data: bytes) -> None:
        self.wait()
        self._last = self._pool.submit(self._out.write, data)

    def wait(self) -> None:
        """Until the last write is done; raises what it raised."""
        last, self._last = self._last, None
        if last is not None:
            last.result()

    def close(self) -> None:
        """Stop the thread, after the write in flight (whose error, if any, is left: `wait`
        raises it where nothing else is being raised)."""
        self._pool.shutdown(wait=True)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: building millions of small containers otherwise triggers it often."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse(raw: bytes | bytearray, source: str, decode: Callable[[Any], Any]) -> Any:
    """Decode a trace file's bytes, closing a JSON list that lacks its final bracket. Raises
    TraceFormatError for bytes that are not JSON; lets msgspec.ValidationError (JSON of other
    types than `decode` asks for) through."""
    try:
        return decode(raw)
    except msgspec.ValidationError:
        raise
    except (ValueError, UnicodeDecodeError) as error:
        stripped = raw.rstrip()
        if raw.lstrip().startswith(b"[") and not stripped.endswith(b"]"):
            try:
                return decode(stripped.rstrip(b",") + b"]")
            except msgspec.ValidationError:
                raise
            except (ValueError, UnicodeDecodeError):
                pass
        raise TraceFormatError(f"{source}: not a JSON trace: {error}") from None


__all__ = [
    "LARGE_JSON_BYTES",
    "MAX_DEPTH",
    "MAX_JSON_BYTES",
    "estimate_chrome_bytes",
    "read_chrome_table",
    "read_chrome_trace",
    "write_chrome_ranks",
    "write_chrome_trace",
]
