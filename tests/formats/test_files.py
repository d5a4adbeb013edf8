"""Trace files: exact Parquet round trips, refusal of foreign or damaged files, Chrome export."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recfn
from recfn import TraceFormatError


@pytest.fixture()
def prof() -> recfn.profile:
    with recfn.profile(report_input_shapes=True, with_stack=True) as p:
        with recfn.record_function("outer", args="a=1"):
            with recfn.record_function_fast("matmul", [np.ones((2, 3)), np.ones((3, 2))]):
                recfn.mark("inside")
            recfn.report_memory_usage(512)
        left_open = recfn.record_function("open").__enter__()
    left_open.end()
    return p


def test_parquet_round_trip_is_exact(prof: recfn.profile, tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    prof.save(path)
    loaded = recfn.load(path).table
    original = prof.table
    assert loaded.schema.equals(original.schema, check_metadata=True)
    assert loaded.equals(original)


def test_columns_that_hold_no_null_are_stored_without_definition_levels(
    prof: recfn.profile, tmp_path: Path
) -> None:
    """Parquet REQUIRED columns for ``NOT_NULL``; a file written before (every column
    optional) loads as the new one does, to the table in memory, and beside a new one."""
    from recfn.formats import io, schema
    from recfn.formats._digest import ROW_GROUP_ROWS

    path = tmp_path / "new.parquet"
    prof.save(path)
    stored = pq.ParquetFile(path).schema
    required = {
        stored.column(i).path
        for i in range(len(stored))
        if stored.column(i).max_definition_level == 0
    }
    assert required == set(schema.NOT_NULL) & set(prof.table.column_names)
    older = tmp_path / "older.parquet"
    other_process = prof.table.set_column(
        prof.table.schema.get_field_index("pid"),
        prof.table.schema.field("pid"),
        pa.array([prof.table.column("pid")[0].as_py() + 1] * prof.table.num_rows, pa.int64()),
    )
    pq.write_table(
        schema.with_content_hash(other_process),
        older,
        row_group_size=ROW_GROUP_ROWS,
        write_page_checksum=True,
        **io.parquet_options(prof.table),
    )
    assert recfn.load(older).table.equals(other_process)
    assert recfn.load(path).table.equals(prof.table)
    both = recfn.load([path, older]).table  # a dataset of files from before and after
    assert both.schema.equals(prof.table.schema)
    assert both.num_rows == 2 * prof.table.num_rows


def test_load_as_pandas(prof: recfn.profile, tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    prof.save(path)
    df = recfn.load(path, as_pandas=True)
    assert len(df) == prof.table.num_rows
    assert df["parent_id"].dtype == "Int64"
    assert df.attrs["recfn"]["recfn.schema_version"] == "1"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        recfn.load(tmp_path / "absent.parquet")


def test_foreign_parquet_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    with pytest.raises(TraceFormatError, match="not a recfn trace"):
        recfn.load(path)


def test_not_parquet_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "text.parquet"
    path.write_text("hello, I am not a trace\n")
    with pytest.raises(TraceFormatError, match="not a Parquet file"):
        recfn.load(path)


def test_truncated_file_is_refused(prof: recfn.profile, tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    prof.save(path)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 10):
        broken = tmp_path / f"cut{cut}.parquet"
        broken.write_bytes(data[:cut])
        with pytest.raises(TraceFormatError):
            recfn.load(broken)


def test_corrupted_file_is_refused(prof: recfn.profile, tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    prof.save(path)
    data = bytearray(path.read_bytes())
    middle = len(data) // 3
    data[middle : middle + 64] = bytes(64)
    broken = tmp_path / "corrupt.parquet"
    broken.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError):
        recfn.load(broken).table.validate(full=True)


def test_newer_schema_version_is_refused(prof: recfn.profile, tmp_path: Path) -> None:
    table = prof.table
    meta = dict(table.schema.metadata)
    meta[b"recfn.schema_version"] = b"99"
    path = tmp_path / "future.parquet"
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(TraceFormatError, match="newer"):
        recfn.load(path)


def test_save_refuses_non_trace_tables(tmp_path: Path) -> None:
    from recfn.formats.io import save

    with pytest.raises(TraceFormatError, match="missing columns"):
        save(pa.table({"a": [1]}), tmp_path / "x.parquet")
    with pytest.raises(TraceFormatError, match="missing columns"):
        save(pa.table({"a": [1]}), tmp_path / "x.json")


def test_parquet_is_compact(tmp_path: Path) -> None:
    with recfn.profile() as p:
        for _ in range(20_000):
            with recfn.record_function("step"), recfn.record_function("forward"):
                pass
    path = tmp_path / "compact.parquet"
    p.save(path)
    assert (
        path.stat().st_size / p.table.num_rows < 16
    )  # bytes per event (benchmark tracks the exact figure)


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_chrome_export_event_by_event(prof: recfn.profile, tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"trace{suffix}"
    prof.save(path)
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(path, "rt") as handle:
        data = json.load(handle)
    events = data["traceEvents"] if isinstance(data, dict) else data
    table = prof.table.to_pylist()
    complete = {e["name"]: e for e in events if e.get("ph") == "X"}
    origin_ns = min(r["start_ns"] for r in table)  # the writer may shift ts to the trace start
    shift = complete["outer"]["ts"] - (by_name_start(table, "outer") - origin_ns) / 1000
    for row in table:
        if row["kind"] == "range" and row["end_ns"] is not None:
            event = complete[row["name"]]
            assert event["ts"] - shift == pytest.approx(
                (row["start_ns"] - origin_ns) / 1000, abs=1e-3
            )
            assert event["dur"] == pytest.approx(
                (row["end_ns"] - row["start_ns"]) / 1000, abs=1e-3
            ), (row, event)
            assert event["tid"] == row["thread_id"] and event["pid"] == row["pid"]
    instants = {e["name"] for e in events if e.get("ph") in ("i", "I")}
    assert {"inside", "__start_profile", "__stop_profile"} <= instants
    assert any(e.get("ph") == "C" for e in events)


def by_name_start(table: list[dict[str, object]], name: str) -> int:
    return next(int(r["start_ns"]) for r in table if r["name"] == name)  # type: ignore[call-overload]


def test_save_refuses_unknown_suffixes(prof: recfn.profile, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.parquet, \.pq, \.json, \.json\.gz"):
        prof.save(tmp_path / "trace.txt")
    assert not (tmp_path / "trace.txt").exists()


@pytest.mark.parametrize("suffix", [".parquet", ".json"])
def test_record_profile_writes_by_suffix(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"block{suffix}"
    with recfn.RecordProfile(path), recfn.record_function("in-block"):
        pass
    assert path.exists()
    if suffix == ".parquet":
        assert "in-block" in recfn.load(path).table.column("name").to_pylist()
    else:
        assert "in-block" in path.read_text()


def test_record_profile_bad_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot tell the trace format"):
        recfn.RecordProfile(tmp_path / "trace.txt")


def test_a_gzip_of_megabytes_of_whitespace_is_refused_without_inflating_it_all(
    tmp_path: Path,
) -> None:
    """A small gzip that inflates to a long run of spaces (a bomb: 3 MB can hold 3 GiB) is
    refused once the run passes what any trace holds, before the rest is inflated."""
    from recfn.formats.chrome._stream import MAX_WHITESPACE

    path = tmp_path / "bomb.json.gz"
    spaces = b" " * (1 << 20)
    with gzip.open(path, "wb", compresslevel=1) as fh:
        for _ in range((MAX_WHITESPACE >> 20) + 8):
            fh.write(spaces)
        fh.write(b'{"traceEvents": []}')
    with pytest.raises(TraceFormatError, match="MiB of whitespace in a row"):
        recfn.load(path)
