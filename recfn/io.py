"""Trace files: Parquet save/load with validation, Chrome JSON export, pandas conversion."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Union

import pyarrow as pa

from recfn._table import BASE_COLUMNS, SCHEMA_VERSION
from recfn.errors import TraceFormatError

if TYPE_CHECKING:
    import pandas as pd

PathLike = Union[str, "os.PathLike[str]"]
NULLABLE_INT_COLUMNS = (
    "parent_id",
    "end_ns",
    "memory_bytes",
    "flops",
    "device_start_ns",
    "device_duration_ns",
)


def trace_format(path: Any) -> str:
    """``"parquet"`` or ``"chrome"`` from the file name; ValueError for anything else."""
    name = os.fspath(path)
    if not isinstance(name, str):
        raise TypeError(f"trace path must be a str or path, got {type(path).__name__}")
    lower = name.lower()
    if lower.endswith((".json", ".json.gz")):
        return "chrome"
    if lower.endswith((".parquet", ".pq")):
        return "parquet"
    raise ValueError(f"cannot tell the trace format of {name!r}: use .parquet, .json or .json.gz")


def check_trace_table(table: Any, what: str) -> pa.Table:
    """Check that ``table`` is a recfn event table of a schema version we can read."""
    if not isinstance(table, pa.Table):
        raise TypeError(f"{what} expects a pyarrow.Table, got {type(table).__name__}")
    metadata = table.schema.metadata or {}
    raw = metadata.get(b"recfn.schema_version")
    if raw is None:
        missing = [c for c in BASE_COLUMNS if c not in table.column_names]
        if missing:
            raise TraceFormatError(f"{what}: not a recfn event table (missing columns: {missing})")
        return table
    try:
        version = int(raw)
    except ValueError:
        raise TraceFormatError(f"{what}: bad recfn.schema_version {raw!r}") from None
    if version > SCHEMA_VERSION:
        raise TraceFormatError(
            f"{what}: trace schema version {version} is newer than this recfn supports "
            f"({SCHEMA_VERSION}); upgrade recfn"
        )
    missing = [c for c in BASE_COLUMNS if c not in table.column_names]
    if missing:
        raise TraceFormatError(f"{what}: recfn trace is missing columns {missing}")
    return table


def save(table: pa.Table, path: PathLike) -> None:
    """Write ``table`` as Parquet (zstd, dictionary columns kept, metadata kept)."""
    import pyarrow.parquet as pq

    check_trace_table(table, "save")
    pq.write_table(
        table,
        os.fspath(path),
        compression="zstd",
        compression_level=3,
        use_dictionary=["name", "kind", "scope", "thread_name", "device", "args"],
        column_encoding={
            column: "DELTA_BINARY_PACKED"
            for column in ("id", "parent_id", "start_ns", "end_ns", "depth", "thread_id")
        },
        store_schema=True,
        use_compliant_nested_type=False,  # keep Arrow's list item names: exact round trips
    )


def load(path: PathLike, as_pandas: bool = False) -> Any:
    """Read a trace written by ``save``; refuses files that are not complete recfn traces."""
    import pyarrow.parquet as pq

    name = os.fspath(path)
    if not os.path.isfile(name):
        raise FileNotFoundError(f"no such trace file: {name!r}")
    try:
        metadata = pq.read_schema(name).metadata or {}
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFormatError(
            f"{name!r} is not a Parquet file (or it is truncated): {exc}"
        ) from None
    if b"recfn.schema_version" not in metadata:
        raise TraceFormatError(f"{name!r} is a Parquet file but not a recfn trace")
    try:
        table = pq.read_table(name)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFormatError(f"{name!r} is corrupted: {exc}") from None
    table = check_trace_table(table, f"load({name!r})")
    return table_to_pandas(table) if as_pandas else table


def table_to_pandas(table: pa.Table) -> pd.DataFrame:
    """DataFrame with categoricals for dictionary columns and ``Int64`` for nullable ints."""
    import recfn.analysis as analysis  # noqa: F401  (registers the df.recfn accessor)

    df = table.to_pandas()
    for column in NULLABLE_INT_COLUMNS:
        if column in table.column_names:
            df[column] = table.column(column).to_pandas(types_mapper=_int64_mapper).array
    df.attrs["recfn"] = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    return df


def _int64_mapper(dtype: pa.DataType) -> Any:
    import pandas as pd

    return pd.Int64Dtype() if dtype == pa.int64() else None


def export_chrome_trace(table: pa.Table, path: PathLike) -> None:
    """Write a Chrome/Perfetto JSON trace (``.json`` or ``.json.gz``)."""
    if trace_format(path) != "chrome":
        raise ValueError(f"Chrome traces are written as .json or .json.gz, not {os.fspath(path)!r}")
    from recfn.analysis.chrome import write_chrome_trace

    write_chrome_trace(table, path)
