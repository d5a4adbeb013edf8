"""Reading and writing trace files of any supported kind for the CLI and ``Trace.save``.

Parquet written by recfn (or ``df.to_parquet`` of an event table) and Chrome/Perfetto JSON
(``.json``/``.json.gz``, torch.profiler's included) are recognised by their first bytes, not by
their names; anything else is refused with a ``TraceFormatError`` that says what the file is not.
"""

from __future__ import annotations

import json
import os
import socket
from typing import TYPE_CHECKING, Any

from recfn.errors import TraceFormatError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from recfn.notebook_ext.trace import Trace


def sniff(path: str) -> str:
    """``"parquet"`` or ``"chrome"`` from the file's first bytes; errors for anything else."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path!r}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a folder, not a trace file")
    with open(path, "rb") as fh:
        head = fh.read(64)
    if not head:
        raise TraceFormatError(f"{path!r} is empty")
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"\x1f\x8b"):
        return "chrome"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
        return "chrome"
    raise TraceFormatError(
        f"{path!r} is neither a recfn trace (Parquet) nor a Chrome/Perfetto JSON trace"
    )


def load_trace(path: Any) -> Trace:
    """A ``Trace`` for a Parquet event table or a Chrome JSON trace (torch.profiler's too)."""
    from recfn.notebook_ext.trace import Trace

    name = os.fspath(path)
    kind = sniff(name)
    label = os.path.basename(name)
    if kind == "parquet":
        return Trace(_load_parquet(name), name=label)
    import recfn.analysis as analysis

    try:
        loaded = analysis.read_chrome_trace(name)
    except (ValueError, UnicodeDecodeError, EOFError) as exc:  # JSONDecodeError is a ValueError
        raise TraceFormatError(f"{name!r} is not a Chrome trace: {exc}") from None
    except OSError as exc:  # gzip errors and truncated .gz files
        raise TraceFormatError(f"{name!r} could not be read as a Chrome trace: {exc}") from None
    if _is_arrow_table(loaded):
        return Trace(loaded, name=label)
    return Trace(df=loaded, name=label)


def _is_arrow_table(value: Any) -> bool:
    import pyarrow as pa

    return isinstance(value, pa.Table)


def _load_parquet(path: str) -> pa.Table:
    """recfn's own Parquet, else any Parquet that has the event table's columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import recfn
    from recfn.io import check_trace_table

    try:
        metadata = pq.read_schema(path).metadata or {}
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFormatError(f"{path!r} is not a readable Parquet file: {exc}") from None
    if b"recfn.schema_version" in metadata:
        table: pa.Table = recfn.load(path)
        return table
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFormatError(f"{path!r} is corrupted: {exc}") from None
    try:
        check_trace_table(table, path)
    except TraceFormatError:
        raise TraceFormatError(
            f"{path!r} is a Parquet file but not a recfn trace (it lacks the event-table columns)"
        ) from None
    import pandas as pd

    return frame_to_table(pd.DataFrame(table.to_pandas()))


def save_trace(trace: Trace, path: str) -> str:
    """Parquet, or Chrome JSON for ``.json``/``.json.gz`` (ValueError for other suffixes)."""
    from recfn.io import export_chrome_trace, save, trace_format

    kind = trace_format(path)
    if kind == "chrome":
        export_chrome_trace(trace.table, path)
    else:
        save(trace.table, path)
    return path


_INT64 = ("id", "parent_id", "start_ns", "end_ns", "thread_id", "sequence_nr", "fwd_thread_id",
          "pid", "memory_bytes", "flops")  # fmt: skip
_INT32 = ("depth", "node_id")
_DICT32 = ("name", "thread_name")
_DICT8 = ("kind", "scope", "device")
_DEFAULTS: dict[str, Any] = {
    "scope": "user_scope",
    "sequence_nr": -1,
    "fwd_thread_id": 0,
    "is_async": False,
    "node_id": -1,
    "pid": 0,
    "depth": 0,
    "thread_name": "",
}


def frame_to_table(df: pd.DataFrame) -> pa.Table:
    """An event-table DataFrame (imported or hand-made) as a schema-v1 ``pyarrow.Table``.

    Columns are cast to the documented Arrow types, a few bookkeeping columns get their documented
    defaults when absent, and the schema metadata is filled so ``recfn.load`` accepts the file.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from recfn import __version__
    from recfn._table import BASE_COLUMNS, SCHEMA_VERSION

    missing = [c for c in ("id", "name", "kind", "start_ns", "thread_id") if c not in df.columns]
    if missing:
        raise TraceFormatError(f"not an event table: missing columns {missing}")
    n = len(df)
    columns: dict[str, pa.Array] = {}
    for column in list(BASE_COLUMNS) + [c for c in df.columns if c not in BASE_COLUMNS]:
        if column in df.columns:
            values = pa.array(df[column], from_pandas=True)
        elif column == "parent_id":
            values = pa.nulls(n, pa.int64())
        elif column == "end_ns":
            values = pa.array(df["start_ns"], from_pandas=True)
        else:
            values = pa.array([_DEFAULTS[column]] * n)
        columns[str(column)] = _cast(str(column), values, pa, pc)
    start = pc.min(columns["start_ns"]).as_py() if n else 0
    metadata = {
        "recfn.schema_version": str(SCHEMA_VERSION),
        "recfn.version": __version__,
        "recfn.config": json.dumps({"imported": True}),
        "recfn.dropped_events": str(df.attrs.get("recfn", {}).get("recfn.dropped_events", 0))
        if isinstance(df.attrs.get("recfn"), dict)
        else "0",
        "recfn.host": socket.gethostname(),
        "recfn.start_ns": str(start or 0),
    }
    return pa.table(columns).replace_schema_metadata(metadata)


def _cast(column: str, values: pa.Array, pa: Any, pc: Any) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if column in _INT64:
        return values.cast(pa.int64())
    if column in _INT32:
        return values.cast(pa.int32())
    if column == "is_async":
        return values.cast(pa.bool_())
    if column in _DICT32 or column in _DICT8:
        index = pa.int32() if column in _DICT32 else pa.int8()
        if pa.types.is_dictionary(values.type):
            values = values.cast(pa.string())
        return pc.dictionary_encode(values.cast(pa.string())).cast(
            pa.dictionary(index, pa.string())
        )
    return values
