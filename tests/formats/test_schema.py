"""The schema owner (recfn.formats.schema): docs agree with it, validation, conform, and one Trace type."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn.errors import TraceFormatError
from recfn.formats import schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "schema.md"


def doc_type(dtype: pa.DataType) -> str:
    """An Arrow type as docs/schema.md writes it."""
    if pa.types.is_dictionary(dtype):
        return f"dictionary<{dtype.index_type}, {doc_type(dtype.value_type)}>"
    if pa.types.is_list(dtype):
        return f"list<{doc_type(dtype.value_type)}>"
    return str(dtype)


def doc_columns() -> list[dict[str, str]]:
    """The rows of the column table of docs/schema.md."""
    lines = DOC.read_text().splitlines()
    start = lines.index(
        "| column | Arrow type | nullable | pandas dtype | required | default | meaning |"
    )
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append(dict(zip(header, cells)))
    return rows


def test_docs_column_table_matches_the_schema() -> None:
    documented = [
        (
            re.sub(r"`", "", row["column"]),
            row["Arrow type"],
            row["nullable"],
            row["pandas dtype"],
            row["required"],
        )
        for row in doc_columns()
    ]
    expected = [
        (
            c.name,
            doc_type(c.arrow_type),
            "yes" if c.nullable else "no",
            c.pandas_dtype,
            "yes" if c.required else "no",
        )
        for c in schema.COLUMNS
    ]
    assert documented == expected


def test_docs_list_every_metadata_key() -> None:
    keys = [value for name, value in vars(schema).items() if name.endswith("_KEY")]
    text = DOC.read_text()
    assert keys and all(f"| `{key}` |" in text for key in keys)
    full = schema.build_metadata(
        config={},
        pid=1,
        wall_ns=2,
        rank=0,
        local_rank=0,
        world_size=1,
        flight_recorder={"capacity": 1},
        clock_offsets={"a": 0},
        call_tracing={"recorded": 0},
        error="KeyboardInterrupt",
        chrome_members={"distributedInfo": {"rank": 0}},
    )
    in_files_only = {schema.CONTENT_HASH_KEY, schema.PART_KEY, schema.STREAM_KEY}
    assert set(full) | in_files_only == set(keys)


def full_table() -> pa.Table:
    """A captured table with every optional column."""
    with recfn.profile(
        report_input_shapes=True,
        with_stack=True,
        with_flops=True,
        profile_memory=True,
        trace_calls=True,
        trace_user_code=True,
    ) as prof:
        with recfn.record_function_fast("aten::mm", [np.ones((2, 3)), np.ones((3, 2))]):
            recfn.report_memory_usage(64, "cuda:0")
        with recfn.record_function("outer", args="a=1"):
            recfn.mark("m")
    return prof.table


def test_captured_tables_have_the_documented_types_and_dtypes() -> None:
    table = full_table()
    assert tuple(table.column_names) == schema.REQUIRED + tuple(
        c for c in schema.OPTIONAL if c in table.column_names
    )
    gpu_only = {"device_start_ns", "device_duration_ns"}  # cuda=True, tested in test_cuda.py
    assert set(schema.OPTIONAL) - gpu_only <= set(table.column_names)
    for field in table.schema:
        assert field.type == schema.column_type(field.name), field.name
    df = schema.to_pandas(table)
    for column in schema.COLUMNS:
        if column.name not in gpu_only:
            assert str(df[column.name].dtype) == column.pandas_dtype, column.name


def test_validate_casts_losslessly_and_refuses_the_rest() -> None:
    table = full_table()
    assert schema.validate(table, "t") is table  # nothing to cast: the same table
    narrow = table.set_column(
        table.schema.get_field_index("thread_id"), "thread_id", table["thread_id"].cast(pa.int32())
    )
    assert schema.validate(narrow, "t").equals(table)
    as_text = table.set_column(
        table.schema.get_field_index("start_ns"), "start_ns", table["start_ns"].cast(pa.string())
    )
    with pytest.raises(TraceFormatError, match=r"src: column 'start_ns' has type string"):
        schema.validate(as_text, "src")
    too_big = table.set_column(
        table.schema.get_field_index("depth"), "depth", pa.array([2**40] * table.num_rows)
    )
    with pytest.raises(TraceFormatError, match="'depth'"):
        schema.validate(too_big, "src")
    with pytest.raises(TraceFormatError, match=r"src: not a recfn event table .*'pid'"):
        schema.validate(table.drop_columns(["pid"]), "src")
    with pytest.raises(TypeError, match="pyarrow.Table"):
        schema.validate("table", "src")


def test_conform_fills_defaults_and_builds_metadata() -> None:
    df = pd.DataFrame(
        {"id": [1, 2], "name": ["a", "b"], "kind": ["range", "mark"], "start_ns": [10, 20],
         "thread_id": [1, 1]}
    )  # fmt: skip
    table = schema.conform(df)
    assert tuple(table.column_names) == schema.REQUIRED
    row = table.to_pylist()[1]
    assert row["end_ns"] == 20 and row["parent_id"] is None and row["scope"] == "user_scope"
    assert row["sequence_nr"] == -1 and row["node_id"] == -1 and row["is_async"] is False
    metadata = schema.metadata_of(table)
    assert metadata[schema.SCHEMA_VERSION_KEY] == "1" and metadata[schema.START_NS_KEY] == "10"
    with pytest.raises(TraceFormatError, match="missing columns.*'thread_id'"):
        schema.conform(df.drop(columns=["thread_id"]))
    # A trace's own frame comes back as the same table, metadata included.
    original = full_table()
    again = schema.conform(schema.to_pandas(original))
    assert again.schema.equals(original.schema, check_metadata=True)
    assert again.to_pylist() == original.to_pylist()


def test_load_of_json_gz_parquet_and_a_profile_give_one_type(tmp_path: Path) -> None:
    with recfn.profile() as prof, recfn.record_function("step"):
        pass
    prof.save(tmp_path / "x.json.gz")
    prof.save(tmp_path / "x.parquet")
    loaded = [recfn.load(tmp_path / "x.json.gz"), recfn.load(tmp_path / "x.parquet")]
    assert all(type(t) is recfn.Trace for t in [*loaded, prof.trace])
    names = {str(n) for n in loaded[0].to_pandas()["name"]}
    assert "step" in names and loaded[1].table.equals(prof.table)
    assert (tmp_path / "x.json.gz").read_bytes()[:2] == b"\x1f\x8b"  # Chrome JSON, gzipped


def test_save_json_writes_chrome_json(tmp_path: Path) -> None:
    with recfn.profile() as prof, recfn.record_function("step"):
        pass
    prof.save(tmp_path / "run.json")
    text = (tmp_path / "run.json").read_text()
    assert text.startswith("{") and '"traceEvents"' in text and '"step"' in text


def test_trace_facts_survive_a_parquet_round_trip(tmp_path: Path) -> None:
    with pytest.warns(RuntimeWarning, match="dropped"):
        with recfn.profile(sampling_prob=0.5, max_events=5) as prof:
            for _ in range(100):  # about 50 sampled: far more than max_events
                with recfn.record_function("r"):
                    pass
    trace = prof.trace
    assert trace is prof.trace and prof.dropped_events == trace.dropped_events > 0
    trace.save(tmp_path / "t.parquet")
    again = recfn.load(tmp_path / "t.parquet")
    for fact in ("dropped_events", "config", "wall_ns", "host", "pid", "events", "threads"):
        assert getattr(again, fact) == getattr(trace, fact), fact
    assert again.config["sampling_prob"] == 0.5 and again.pid is not None
    assert again.name == "t.parquet" and not again.interrupted


def test_stop_and_disable_profiler_return_the_trace() -> None:
    prof = recfn.profile().start()
    with pytest.raises(RuntimeError, match="not been stopped"):
        _ = prof.trace
    assert prof.stop() is prof.trace
    recfn.enable_profiler()
    trace = recfn.disable_profiler()
    assert isinstance(trace, recfn.Trace) and trace.events >= 2


def test_foreign_parquet_with_the_event_columns_loads(tmp_path: Path) -> None:
    df = full_table().to_pandas()  # plain pyarrow conversion: no recfn dtypes or metadata
    df["depth"] = df["depth"].astype("int64")
    path = tmp_path / "pandas.parquet"
    df.to_parquet(path)
    assert b"recfn.schema_version" not in (pq.read_schema(path).metadata or {})
    trace = recfn.load(path)
    assert trace.table.schema.field("depth").type == pa.int32()
    assert trace.config == {"imported": True}


def test_merge_renumbers_only_colliding_ids() -> None:
    table = full_table()
    merged = recfn.merge([table, table], name="both")
    ids = merged.table.column("id").to_pylist()
    assert len(set(ids)) == len(ids) == 2 * table.num_rows
    assert ids[: table.num_rows] == table.column("id").to_pylist()  # the first keeps its ids
    assert merged.cells == ("trace", "trace") and merged.name == "both"
    with pytest.raises(ValueError, match="at least one"):
        recfn.merge([])
    for wrong in (3.5, merged, table):  # one trace is no list of them
        with pytest.raises(recfn.RecfnError, match="merge expects a list"):
            recfn.merge(wrong)  # type: ignore[arg-type]


def test_the_core_alone_shows_a_plain_header() -> None:
    from recfn.formats import hooks as _hooks

    trace = recfn.Trace(full_table(), name="plain")
    saved = (_hooks.header_renderer, _hooks.html_renderer, _hooks.text_renderer)
    _hooks.header_renderer = _hooks.html_renderer = _hooks.text_renderer = None
    try:
        assert repr(trace).startswith("<recfn.Trace recfn · plain · ")
        assert trace._repr_html_().startswith("<p>recfn · plain")
    finally:
        _hooks.header_renderer, _hooks.html_renderer, _hooks.text_renderer = saved
    assert "<table" in trace._repr_html_()  # the facade's hooks draw the summary


VALIDITY_CASES = {
    "no nulls": pa.array([1, 2, 3], pa.int64()),
    "ints": pa.array([1, None, 3, None, 5, 6, 7, 8, None, 10], pa.int64()),
    "sliced off a byte boundary": pa.array([None, 1, 2, None, 4, 5, 6, 7, 8, None, 10]).slice(3, 7),
    "all null": pa.array([None, None, None], pa.int64()),
    "strings": pa.array(["a", None, "c"]),
    "dictionary": pa.array(["a", None, "a", "b"]).dictionary_encode(),
    "booleans": pa.array([True, None, False]),
    "null type": pa.array([None, None]),
    "empty": pa.array([], pa.int64()),
    "chunked": pa.chunked_array([pa.array([1, None]), pa.array([None, 4, 5]).slice(1)]),
    "no chunks": pa.chunked_array([], pa.int64()),
}


@pytest.mark.parametrize("case", list(VALIDITY_CASES))
def test_valid_flags_agree_with_arrows_is_valid(case: str) -> None:
    values = VALIDITY_CASES[case]
    flags = schema.valid_flags(values)
    expected = pc.is_valid(values).to_numpy(zero_copy_only=False) if len(values) else []
    assert flags.dtype == np.bool_
    np.testing.assert_array_equal(flags, np.asarray(expected, dtype=bool))
    flags[:1] = True  # writable: callers combine masks in place


def _small_tables() -> dict[str, pa.Table]:
    with recfn.profile(trace_calls=True, profile_memory=True, report_input_shapes=True) as prof:
        with recfn.record_function("outer"):
            sorted([3, 1, 2])
            recfn.mark("here")
    captured = prof.trace.table
    nulls = schema.conform(
        pa.table(
            {
                "id": [1, 2, 3],
                "parent_id": pa.array([None, 1, None], pa.int64()),
                "name": pa.array(["a", None, "a"]).dictionary_encode(),
                "kind": pa.array(["range", "range", "mark"]).dictionary_encode(),
                "start_ns": [10, 20, 30],
                "end_ns": pa.array([40, None, None], pa.int64()),
                "thread_id": [1, 1, 1],
            }
        )
    )
    return {
        "captured": captured,
        "nulls": nulls,
        "empty": captured.slice(0, 0),
        "chunked": pa.concat_tables([captured.slice(0, 2), captured.slice(2)]),
        "strings": captured.set_column(
            captured.column_names.index("name"), "name", captured["name"].cast(pa.string())
        ),
        "repeated": nulls.set_column(
            nulls.column_names.index("kind"),
            "kind",
            pa.DictionaryArray.from_arrays(
                pa.array([0, 1, 2], pa.int32()), ["range", "mark", "range"]
            ),
        ),
    }


@pytest.mark.parametrize("case", ["captured", "nulls", "empty", "chunked", "strings", "repeated"])
def test_a_small_table_converts_as_pyarrow_converts_it(case: str) -> None:
    """The column-at-a-time conversion of small tables gives pyarrow's frame: dtypes (nullable
    ints, categoricals and their categories' dtype), values, nulls; columns of kinds it does not
    convert (plain strings, dictionaries in several chunks) send the table to pyarrow."""
    table = _small_tables()[case]
    assert table.num_rows <= schema.SMALL_FRAME_ROWS
    alone = schema._small_frame_columns(table) is not None
    assert alone == (case not in ("chunked", "strings", "repeated"))
    try:
        expected = schema._arrow_frame(table, False)
    except ValueError as exc:  # pyarrow makes no frame of it either: the same error
        with pytest.raises(type(exc)):
            schema.frame(table)
        return
    pd.testing.assert_frame_equal(schema.frame(table), expected, check_exact=True)


@st.composite
def _key_tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(0, 30))
    hosts = draw(st.lists(st.sampled_from(["a", "b", None]), min_size=rows, max_size=rows))
    pids = draw(st.lists(st.sampled_from([1, 2, -1, None]), min_size=rows, max_size=rows))
    threads = draw(st.lists(st.integers(-2, 3), min_size=rows, max_size=rows))
    return pa.table(
        {
            "host": pa.array(hosts, pa.string()).dictionary_encode(),
            "pid": pa.array(pids, pa.int64()),
            "thread_id": pa.array(threads, pa.int64()),
        }
    )


@settings(max_examples=200, deadline=None)
@given(_key_tables())
def test_distinct_rows_counts_as_arrows_group_by(table: pa.Table) -> None:
    expected = table.group_by(table.column_names).aggregate([]).num_rows
    assert schema.distinct_rows(table) == expected
