"""The out-of-core summary (per process, over the files) gives the in-memory summary's numbers."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from fleetdata import overlapping, same, write_fleet
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn.analysis.outofcore.files import summarize_files
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.errors import MalformedFrameError, TraceFormatError
from recfn.formats import schema


@pytest.mark.parametrize("by", ["name", ["rank", "name"], ["host", "pid", "name"]])
def test_out_of_core_summary_equals_pandas(tmp_path: Path, by: str | list[str]) -> None:
    files = [str(f) for f in write_fleet(tmp_path)]
    df = recfn.load(tmp_path, as_pandas=True)
    expected = df.recfn.summary(by=by)
    assert (expected.xs("task", level="name") if isinstance(by, list) else expected.loc[["task"]])[
        "self_ns"
    ].min() > 0
    same(summarize_files(files, by=by), expected)


def test_a_lazy_trace_summarises_without_reading_its_files(tmp_path: Path) -> None:
    write_fleet(tmp_path)
    trace = recfn.load(tmp_path)
    summary = trace.summary(top=5)
    assert trace._table is None  # the files were never read into memory
    same(summary, trace.to_pandas().recfn.summary(top=5))
    assert trace.summary(by="rank") is not None  # no name: the pandas path
    assert trace._table is not None


def test_groupings_without_name_are_refused(tmp_path: Path) -> None:
    files = [str(f) for f in write_fleet(tmp_path, processes=1, ranges=10)]
    with pytest.raises(ValueError, match="groups by name"):
        summarize_files(files, by="rank")
    with pytest.raises(ValueError, match="no column"):
        summarize_files(files, by=["nope", "name"])
    with pytest.raises(ValueError, match="no files"):
        summarize_files([])


def test_one_file_of_several_processes_with_recorded_ids(tmp_path: Path) -> None:
    frames = []
    for k in range(3):  # ids 0, 1, ... in each process, as recorded; deep recursion
        df = make_synthetic_trace(3000, n_threads=2, seed=k, max_depth=24)
        df["pid"] = 500 + k
        frames.append(df)
    path = tmp_path / "merged.parquet"
    recfn.Trace.from_pandas(pd.concat(frames, ignore_index=True)).save(path)
    df = recfn.load(path, as_pandas=True)
    for by in ("name", ["pid", "name"]):
        expected = df.recfn.summary(by=by)
        assert (expected["total_ns"] < expected["count"] * expected["mean_ns"]).any()  # nested
        same(summarize_files([str(path)], by=by), expected)


def test_broken_files_are_named(tmp_path: Path) -> None:
    files = write_fleet(tmp_path, processes=2, ranges=10)
    df = recfn.load(files[0], as_pandas=True)
    df.loc[1, "id"] = df.loc[0, "id"]
    broken = tmp_path / "broken.parquet"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), broken)
    with pytest.raises(TraceFormatError, match="broken.parquet: ids repeat"):
        summarize_files([str(files[1]), str(broken)])
    pq.write_table(pa.table({"id": [1]}), broken)
    with pytest.raises(TraceFormatError, match="broken.parquet: not a recfn trace"):
        summarize_files([str(broken)])


def test_a_file_whose_footer_cannot_be_decoded_is_named_by_every_lazy_path(
    tmp_path: Path,
) -> None:
    (path,) = write_fleet(tmp_path, processes=1, ranges=10)
    (path.parent / "damaged.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    unreadable = "damaged.parquet' is not a readable Parquet file"
    with pytest.raises(TraceFormatError, match=unreadable):
        _ = recfn.load(tmp_path).metadata
    with pytest.raises(TraceFormatError, match=unreadable):
        recfn.load(tmp_path).summary(top=3)
    with pytest.raises(TraceFormatError, match=unreadable):
        _ = recfn.load(tmp_path).table


def test_a_process_without_closed_ranges_adds_nothing(tmp_path: Path) -> None:
    files = [str(f) for f in write_fleet(tmp_path / "fleet", processes=2, ranges=50)]
    df = overlapping(3000)
    path = tmp_path / "open.parquet"
    recfn.Trace.from_pandas(df[df["end_ns"].isna()]).save(path)  # one range, still open
    expected = recfn.load(tmp_path / "fleet", as_pandas=True).recfn.summary()
    same(summarize_files([*files, str(path)]), expected)
    assert summarize_files([str(path)]).empty
    empty = tmp_path / "hostname=h" / "process=9" / "part-00000.parquet"
    empty.parent.mkdir(parents=True)
    table = recfn.load(files[0]).table.slice(0, 0)
    pq.ParquetWriter(empty, table.schema).close()  # no row group at all
    assert pq.ParquetFile(empty).metadata.num_row_groups == 0
    same(summarize_files([*files, str(empty)]), expected)


@pytest.mark.parametrize("order", ["recorded", "by start", "shuffled"])
@pytest.mark.parametrize("by", ["name", ["rank", "name"]])
def test_a_process_in_parts_and_row_groups_summarises_as_in_memory(
    tmp_path: Path, order: str, by: str | list[str]
) -> None:
    """One process in two files of small row groups, each row group with its own name
    dictionary, the second file without ``rank``: read a row group at a time, the numbers are the in-memory ones,
    whether ids count up in row order (no lookup), rows are in start order (siblings that
    overlap included) or in no order at all."""
    df = make_synthetic_trace(3000, n_threads=2, seed=5, max_depth=12)
    df["pid"] = 77
    df = pd.concat([df, overlapping(77)], ignore_index=True)
    df["host"] = pd.Categorical(["h"] * len(df))  # one process by the files' statistics
    df["rank"] = pd.Series(range(len(df)), dtype="int32") % 3
    if order == "shuffled":
        df = df.sample(frac=1.0, random_state=1, ignore_index=True)
    else:
        df = df.sort_values("start_ns", kind="stable", ignore_index=True)
    if order == "recorded":  # ids 0, 1, ... in row order, parents renumbered alike
        renumber = pd.Series(range(len(df)), index=df["id"].to_numpy())
        df["parent_id"] = df["parent_id"].map(renumber).astype("Int64")
        df["id"] = range(len(df))
    folder = tmp_path / "hostname=h" / "process=77"
    folder.mkdir(parents=True)
    table = recfn.Trace.from_pandas(df).table
    names = table.schema.get_field_index("name")
    table = table.set_column(names, "name", table["name"].cast(pa.string()))
    cut = len(df) // 2
    for number, part in enumerate([table.slice(0, cut), table.slice(cut).drop_columns(["rank"])]):
        metadata = schema.metadata_of(part)
        metadata[schema.PART_KEY] = str(number)  # a part, as profile(output=...) writes it
        pieces = [part.slice(low, 700) for low in range(0, part.num_rows, 700)]
        # names in a dictionary of each row group's own order
        pieces = [p.set_column(names, "name", pc.dictionary_encode(p["name"])) for p in pieces]
        with pq.ParquetWriter(
            folder / f"part-{number:05d}.parquet", pieces[0].schema.with_metadata(metadata)
        ) as writer:
            for piece in pieces:
                writer.write_table(piece.replace_schema_metadata(metadata))
    assert pq.ParquetFile(folder / "part-00000.parquet").metadata.num_row_groups == 3
    expected = recfn.load(tmp_path, as_pandas=True).recfn.summary(by=by)
    assert expected["self_ns"].sum() > 0
    same(summarize_files(sorted(map(str, folder.glob("*.parquet"))), by=by), expected)


@pytest.mark.parametrize("key", ["host", "pid"])
def test_a_null_host_or_pid_is_refused_as_load_refuses_it(tmp_path: Path, key: str) -> None:
    """Two processes with the same ids, one with a null `key` and one with its default (""
    or -1): a file that holds them is refused out of core as `recfn.load` refuses it (the
    schema has no null host or pid); in memory, a frame with them is summarised as if the null
    were another value (merged, their ids would repeat)."""
    frames = []
    for value in (None, "" if key == "host" else -1):
        df = make_synthetic_trace(300, n_threads=1, seed=1)
        df["host"] = "h"
        df[key] = pd.Series([value] * len(df), dtype="string" if key == "host" else "Int64")
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    path = tmp_path / "two.parquet"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path)
    assert schema.process_rows(pq.read_table(path)) is not None
    refused = f"row 0: column '{key}' is null"
    with pytest.raises(TraceFormatError, match=refused):
        recfn.load(path)
    with pytest.raises(TraceFormatError, match=refused):
        summarize_files([str(path)])
    other = df.assign(**{key: df[key].fillna("other" if key == "host" else -2)})
    same(df.recfn.summary(), other.recfn.summary())


def rewritten(path: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    """``path`` written again with ``change`` applied to its table, its metadata (and so its
    stored content hash) kept: a file altered after recfn wrote it."""
    table = pq.read_table(path)
    pq.write_table(change(table).replace_schema_metadata(table.schema.metadata), path)


def test_an_altered_value_is_refused_out_of_core_as_in_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from recfn.cli import main

    files = write_fleet(tmp_path / "traces")
    column = "end_ns"

    def later_end(table: pa.Table) -> pa.Table:
        ends = table.column(column).to_pylist()
        ends[0] += 665_000_000_000
        index = table.schema.get_field_index(column)
        return table.set_column(index, column, pa.array(ends, pa.int64()))

    rewritten(files[1], later_end)
    refused = f"content hash mismatch in column '{column}'"
    with pytest.raises(TraceFormatError, match=refused):
        recfn.load(files[1])
    with pytest.raises(TraceFormatError, match=refused):
        summarize_files([str(f) for f in files])
    with pytest.raises(TraceFormatError, match=refused):
        recfn.load(tmp_path / "traces").summary()
    assert main(["summary", str(tmp_path / "traces")]) == 1
    assert refused in capsys.readouterr().err


def test_no_single_bit_flip_changes_an_out_of_core_summary_silently(tmp_path: Path) -> None:
    """Every flipped bit of a file is refused, or changes nothing the summary shows."""
    (path,) = write_fleet(tmp_path, processes=1, ranges=300)
    data = path.read_bytes()
    expected = summarize_files([str(path)])
    rng = random.Random(7)
    flipped = tmp_path / "flipped.parquet"
    silent = 0
    for _ in range(60):
        bit = rng.randrange(8 * len(data))
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        flipped.write_bytes(bytes(damaged))
        try:
            got = summarize_files([str(flipped)])
        except TraceFormatError:
            continue
        silent += not got.equals(expected)
    assert silent == 0


def test_a_file_of_a_newer_schema_or_other_types_is_refused_out_of_core(tmp_path: Path) -> None:
    from recfn.formats.io import write_parquet

    (path,) = write_fleet(tmp_path / "fleet", processes=1, ranges=50)
    table = pq.read_table(path)
    newer = tmp_path / "newer.parquet"
    metadata = schema.metadata_of(table)
    metadata[schema.SCHEMA_VERSION_KEY] = "2"
    write_parquet(table.replace_schema_metadata(metadata), newer)
    with pytest.raises(TraceFormatError, match="newer than this recfn supports"):
        summarize_files([str(newer)])
    wider = tmp_path / "wider.parquet"
    depth = table.schema.get_field_index("depth")
    write_parquet(table.set_column(depth, "depth", table.column("depth").cast(pa.int64())), wider)
    with pytest.raises(TraceFormatError, match="column 'depth' has type int64"):
        summarize_files([str(wider)])


def test_files_hashed_over_whole_columns_are_still_verified(tmp_path: Path) -> None:
    """Files written before the hash was taken a row group at a time are checked a column at a
    time."""
    from recfn.formats import _digest
    from recfn.formats.io import parquet_options

    (path,) = write_fleet(tmp_path / "fleet", processes=1, ranges=50)
    table = recfn.load(path).table
    raw = dict(table.schema.metadata)
    value = {"algorithm": _digest.ALGORITHM, "digests": _digest.table_digest(table, raw)}
    raw[schema.CONTENT_HASH_KEY.encode()] = json.dumps(value, sort_keys=True).encode()
    old = tmp_path / "old.parquet"
    pq.write_table(table.replace_schema_metadata(raw), old, **parquet_options(table))
    same(summarize_files([str(old)]), recfn.load(old).summary())
    rewritten(old, lambda t: t.set_column(0, "id", pa.array([i + 1 for i in t["id"].to_pylist()])))
    with pytest.raises(TraceFormatError, match="content hash mismatch in column 'id'"):
        summarize_files([str(old)])


def test_a_process_copied_elsewhere_is_refused_not_summed_twice(tmp_path: Path) -> None:
    files = write_fleet(tmp_path / "traces")
    copy = tmp_path / "copy" / files[0].relative_to(tmp_path / "traces")
    copy.parent.mkdir(parents=True)
    shutil.copy(files[0], copy)
    repeated = "ids repeat across the files of one process"
    with pytest.raises(TraceFormatError, match=repeated):
        summarize_files([*map(str, files), str(copy)])
    with pytest.raises(TraceFormatError, match=repeated):
        _ = recfn.load([tmp_path / "traces", tmp_path / "copy"]).table


def test_a_copied_part_is_refused(tmp_path: Path) -> None:
    files = write_fleet(tmp_path / "traces")
    shutil.copy(files[0], files[0].with_name("part-00001.parquet"))
    with pytest.raises(TraceFormatError, match="ids repeat"):
        recfn.load(tmp_path / "traces").summary()
    with pytest.raises(TraceFormatError, match="ids repeat"):
        _ = recfn.load(tmp_path / "traces").table


def test_files_that_are_no_parts_of_a_dataset_are_left_out_with_a_warning(
    tmp_path: Path,
) -> None:
    """A trace saved inside its dataset folder and a copy without recfn's metadata are not
    counted again."""
    folder = tmp_path / "traces"
    files = write_fleet(folder)
    expected = recfn.load(folder).summary()
    recfn.load(folder).save(folder / "all.parquet")
    plain = pq.read_table(files[0]).replace_schema_metadata(None)
    pq.write_table(plain, files[0].with_name("copy.parquet"))
    with pytest.warns(RuntimeWarning, match=r"left out 2 file\(s\) that are not its parts"):
        trace = recfn.load(folder)
    assert len(trace.files) == len(files)
    same(trace.summary(), expected)


def test_a_folder_of_two_runs_is_warned_about(tmp_path: Path) -> None:
    for _ in range(2):  # as two `recfn run -o traces/` would
        with recfn.profile(output=tmp_path, follow_children=True):
            with recfn.record_function("step"):
                pass
    with pytest.warns(RuntimeWarning, match="holds 2 runs"):
        recfn.load(tmp_path)


def test_a_process_folder_without_parts_is_warned_about(tmp_path: Path) -> None:
    write_fleet(tmp_path, processes=1, ranges=10)
    (tmp_path / "hostname=h" / "process=99").mkdir(parents=True)
    with pytest.warns(RuntimeWarning, match=r"1 process folder\(s\) .* hold no part"):
        recfn.load(tmp_path)


@pytest.mark.parametrize("kind", ["plain", "deep recursion", "with marks", "overlapping"])
def test_a_lazily_loaded_file_summarises_as_in_memory_without_reading_it(
    tmp_path: Path, kind: str
) -> None:
    """``recfn.load(path, lazy=True).summary()`` runs out of core (the table stays unread) and
    gives the in-memory summary's numbers; ``.table`` then reads the file as ``load`` does."""
    frames = {
        "plain": lambda: make_synthetic_trace(5000, n_threads=3, seed=1),
        "deep recursion": lambda: make_synthetic_trace(5000, n_threads=2, seed=2, max_depth=24),
        "with marks": lambda: make_synthetic_trace(5000, n_threads=2, seed=3, n_marks=40),
        "overlapping": lambda: overlapping(77),
    }
    path = tmp_path / "one.parquet"
    recfn.Trace.from_pandas(frames[kind]()).save(path)
    expected = recfn.load(path, lazy=False)
    trace = recfn.load(path, lazy=True)
    for options in ({}, {"by": ["pid", "name"], "sort_by": "self_ns", "top": 4}):
        got = trace.summary(**options)
        assert trace._table is None
        want = expected.summary(**options)
        same(got, want)
        assert got.attrs["self_total_ns"] == want.attrs["self_total_ns"]
        assert got.attrs["wall_ns"] == want.attrs["wall_ns"]
    assert trace.metadata == expected.metadata
    assert trace.table.equals(expected.table)


def test_a_lazy_load_checks_the_footer_now_and_the_values_when_read(tmp_path: Path) -> None:
    (path,) = write_fleet(tmp_path, processes=1, ranges=50)
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    with pytest.raises(TraceFormatError, match="damaged.parquet' is not a readable Parquet"):
        recfn.load(damaged, lazy=True)

    def later_end(table: pa.Table) -> pa.Table:
        ends = table.column("end_ns").to_pylist()
        ends[0] += 1_000
        index = table.schema.get_field_index("end_ns")
        return table.set_column(index, "end_ns", pa.array(ends, pa.int64()))

    rewritten(path, later_end)
    trace = recfn.load(path, lazy=True)  # the footer is sound
    refused = "content hash mismatch in column 'end_ns'"
    with pytest.raises(TraceFormatError, match=refused):
        trace.summary()
    with pytest.raises(TraceFormatError, match=refused):
        _ = trace.table


def test_a_file_with_memory_events_is_summarised_in_memory_even_when_lazy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.parquet"
    df = make_synthetic_trace(2000, n_threads=2, seed=4, n_memory_events=100)
    recfn.Trace.from_pandas(df).save(path)
    got = recfn.load(path, lazy=True).summary()
    assert "allocated_bytes" in got.columns  # the in-memory summary's memory columns
    same(got, recfn.load(path, lazy=False).summary())


def test_lazy_must_be_a_bool_or_none(tmp_path: Path) -> None:
    (path,) = write_fleet(tmp_path, processes=1, ranges=10)
    with pytest.raises(TypeError, match="lazy must be True, False or None, got str"):
        recfn.load(path, lazy="yes")
    with pytest.raises(TypeError, match="lazy must be True, False or None, got int"):
        recfn.load(tmp_path, lazy=1)


def test_a_lazy_summary_reads_only_its_columns_and_the_table_all_of_them(tmp_path: Path) -> None:
    """Damage in a column the summary does not use (``depth``) leaves the lazy summary's numbers
    as they were (that column is neither read nor verified there); reading the table refuses
    it, naming the column."""
    path = tmp_path / "one.parquet"
    recfn.Trace.from_pandas(make_synthetic_trace(3000, n_threads=2, seed=5)).save(path)
    expected = recfn.load(path, lazy=False).summary()

    def deeper(table: pa.Table) -> pa.Table:
        index = table.schema.get_field_index("depth")
        return table.set_column(
            index, "depth", pc.add(table.column("depth"), pa.scalar(1, pa.int32()))
        )

    rewritten(path, deeper)
    trace = recfn.load(path, lazy=True)
    same(trace.summary(), expected)
    with pytest.raises(TraceFormatError, match="content hash mismatch in column 'depth'"):
        _ = trace.table


@pytest.mark.parametrize("source", ["file", "dataset"])
def test_a_lazy_traces_header_reads_only_the_columns_it_shows(tmp_path: Path, source: str) -> None:
    """``repr`` of an unread trace (events from the footers; threads and the wall time from
    their columns, verified) gives the read trace's, and leaves the table unread; an altered
    value in a column it reads is refused as ``load`` refuses it."""
    files = write_fleet(tmp_path / "traces")
    path = files[0] if source == "file" else tmp_path / "traces"
    lazy, read = recfn.load(path, lazy=True), recfn.load(path, lazy=False)
    assert repr(lazy) == repr(read)
    assert (lazy.events, lazy.threads, lazy.wall_ns) == (read.events, read.threads, read.wall_ns)
    assert lazy._table is None

    def earlier_start(table: pa.Table) -> pa.Table:
        starts = table.column("start_ns").to_pylist()
        starts[0] -= 1
        index = table.schema.get_field_index("start_ns")
        return table.set_column(index, "start_ns", pa.array(starts, pa.int64()))

    rewritten(files[0], earlier_start)
    refused = "content hash mismatch in column 'start_ns'"
    with pytest.raises(TraceFormatError, match=refused):
        repr(recfn.load(path, lazy=True))


def _in_memory(frame: pd.DataFrame) -> recfn.Trace:
    return recfn.Trace.from_pandas(frame)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    threads=st.integers(1, 4),
    depth=st.integers(1, 20),
    processes=st.integers(1, 3),
    by=st.sampled_from(["name", ["pid", "name"], ["thread_id", "name"]]),
)
def test_a_trace_in_memory_summarises_in_one_pass_with_the_pandas_numbers(
    seed: int, threads: int, depth: int, processes: int, by: str | list[str]
) -> None:
    """``Trace.summary`` of a table in memory takes the one-pass summary (``summarize_table``)
    where it can: the numbers are the pandas summary's, recursion and overlap included."""
    from recfn.formats import hooks

    frames = []
    for k in range(processes):
        frame = make_synthetic_trace(300, n_threads=threads, seed=seed + k, max_depth=depth)
        frame["pid"] = 40 + k
        frames.append(frame)
    frames.append(overlapping(40))  # siblings that overlap (asyncio tasks), ranges still open
    trace = _in_memory(pd.concat(frames, ignore_index=True))
    assert hooks.table_summary is not None
    fast = hooks.table_summary(trace.table, by=by)
    assert fast is not None  # the one pass, not pandas
    expected = trace.to_pandas().recfn.summary(by=by)
    same(fast, expected)
    same(trace.summary(by=by), expected)


def test_a_trace_in_memory_with_memory_events_or_broken_ids_is_summarised_by_pandas() -> None:
    from recfn.formats import hooks

    memory = _in_memory(make_synthetic_trace(500, 2, seed=1, n_memory_events=50))
    assert hooks.table_summary is not None and hooks.table_summary(memory.table) is None
    assert "total_memory_bytes" in memory.summary().columns

    frame = make_synthetic_trace(500, 2, seed=2)
    frame.loc[3, "id"] = frame.loc[2, "id"]  # an id that repeats: the one pass refuses it
    broken = _in_memory(frame)
    assert hooks.table_summary(broken.table) is None
    with pytest.raises(MalformedFrameError, match="duplicate"):  # as pandas has always said
        broken.summary()
