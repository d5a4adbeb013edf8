"""Chrome / Perfetto JSON trace files (the Trace Event Format) to and from the event table.

`read_chrome_trace` imports traces from ``torch.profiler``'s ``export_chrome_trace``, Chrome,
Perfetto's JSON export and recfn itself: complete ("X") events and B/E pairs become ranges,
instants ("i", "I", "R") marks, counters ("C") memory events, and "thread_name" metadata names
the threads. Parents come from interval nesting per thread. Other phases (flows, async,
objects, samples) are skipped. Event fields without a column are kept in ``args`` as JSON.

A torch trace can hold millions of events, so the file is parsed once, by msgspec into typed
structs whose args stay unparsed JSON text (traces with other event fields into plain dicts and
lists), and columns are built from plain lists, without pandas work per event.
"""

from __future__ import annotations

import gc
import gzip
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd
import pyarrow as pa

from recfn import _jsonio as jsonio
from recfn._chrome_export import distributed_info, trace_events
from recfn._chrome_import import TRACE, Document, events_frame
from recfn._frames import ints, require
from recfn._hooks import pandas_returned
from recfn.schema import METADATA_PREFIX, metadata_of

PathLike = str | os.PathLike[str]


def read_chrome_trace(path: PathLike) -> pd.DataFrame:
    """Read a Chrome trace (``.json``, or gzip-compressed such as ``.json.gz``) as a recfn event
    table in the dtypes of ``prof.to_pandas()``, plus an ``args`` column and, when the trace has
    them, ``memory_bytes``/``device`` and torch's shapes as ``input_shapes``/``input_dtypes``.

    ``pid``/``tid`` pairs become ``thread_id`` 1, 2, ... in order of first event; times are
    ``baseTimeNanoseconds`` (when present) plus ``ts`` microseconds. Raises ValueError for a
    file that is not JSON or not a trace (a list of events, or an object with a
    ``traceEvents`` list); a JSON list missing its closing bracket, which the format allows,
    is accepted.
    """
    pandas_returned()
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    with _gc_paused():
        try:
            document = _parse(raw, str(path), TRACE.decode)
        except msgspec.ValidationError:  # fields of other types, or other fields: plain values
            document = _parse(raw, str(path), jsonio.loads)
        events: Any
        if isinstance(document, Document):
            events, base_ns = document.traceEvents, document.baseTimeNanoseconds
        elif isinstance(document, dict):
            events = document.get("traceEvents")
            base_ns = document.get("baseTimeNanoseconds", 0)
            if not isinstance(base_ns, int):
                raise ValueError(f"{path}: baseTimeNanoseconds must be an integer")
        else:
            events, base_ns = document, 0
        if not isinstance(events, list):
            raise ValueError(
                f"{path}: expected a list of events or an object with a traceEvents list"
            )
        frame = events_frame(events, base_ns, str(path))
        # Free the parsed trace while the collector is paused: once resumed, it would first
        # walk every one of its containers (about 0.1 s per 300k events).
        del document, events
    return frame


def write_chrome_trace(data: pd.DataFrame | pa.Table, path: PathLike) -> None:
    """Write an event table, DataFrame or ``pyarrow.Table``, as a Chrome trace.

    Ranges become complete "X" events (still-open ones "B" events without an "E"), marks
    instant "i" events, memory events "C" counters of the running total per process, name and
    device, thread names "M" metadata events. ``ts``/``dur`` are float microseconds after
    ``baseTimeNanoseconds`` (the first start), so nanoseconds survive a round trip. A table's
    ``recfn.*`` schema metadata goes to ``otherData``. Processes get "process_name" metadata
    (host, pid, rank); a table of one rank gets ``distributedInfo`` (``rank``, ``world_size``)
    as HTA reads it. A path ending in ``.gz`` is compressed.
    """
    metadata = {}
    if isinstance(data, pa.Table):
        metadata = {k: v for k, v in metadata_of(data).items() if k.startswith(METADATA_PREFIX)}
        # Nullable int64 as Int64, not float64, which would round epoch nanoseconds.
        data = data.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    require(data, ("name", "kind", "start_ns", "end_ns", "thread_id"), "write_chrome_trace")
    start = ints(data["start_ns"], 0)
    base_ns = int(start.min()) if len(start) else 0
    document = {
        "schemaVersion": 1,
        "baseTimeNanoseconds": base_ns,
        "displayTimeUnit": "ms",
        "otherData": metadata,
        "traceEvents": trace_events(data, base_ns),
    }
    info = distributed_info(data, metadata)
    if info:
        document["distributedInfo"] = info
    encoded = jsonio.dumps(document)
    if str(path).endswith(".gz"):
        encoded = gzip.compress(encoded, compresslevel=6)
    Path(path).write_bytes(encoded)


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


def _parse(raw: bytes, source: str, decode: Callable[[bytes], Any]) -> Any:
    """Decode a trace file's bytes, closing a JSON list that lacks its final bracket. Raises
    ValueError for bytes that are not JSON; lets msgspec.ValidationError (JSON of other types
    than `decode` asks for) through."""
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
        raise ValueError(f"{source}: not a JSON trace: {error}") from error
