"""`TableColumns` reads an event table as `FrameColumns` reads its ``to_pandas()`` frame: every
array, value and null the same, whatever the column's Arrow type (the fast paths: int64 and
dictionaries of distinct strings; any other type goes through pandas), so that the chart drawn
from the table is the frame's (the notebook's picture is drawn from the table)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from known_frames import (
    GPU_SPANS,
    KNOWN_ROWS,
    OVERLAPPING_ROWS,
    make_frame,
    on_two_hosts,
    with_gpu,
)

from recfn.analysis.columns import FrameColumns, TableColumns, event_columns
from recfn.analysis.plots.chart import Chart
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.formats.schema import to_pandas

ROWS = 6


def same_objects(left: np.ndarray, right: np.ndarray) -> bool:
    """Equal object arrays, a null where the other has the same null (NaN, None, pd.NA)."""
    if left.shape != right.shape:
        return False
    for a, b in zip(left.tolist(), right.tolist()):
        if pd.isna(a) or pd.isna(b):
            if type(a) is not type(b):
                return False
        elif a != b or type(a) is not type(b):
            return False
    return True


def assert_read_alike(table: pa.Table) -> None:
    """Every column of `table` read by `TableColumns` as `FrameColumns` reads the frame."""
    frame = to_pandas(table)
    from_table, from_frame = TableColumns(table), FrameColumns(frame)
    assert from_table.columns == from_frame.columns and len(from_table) == len(from_frame)
    rows = np.arange(len(frame))[::-1][: max(len(frame) - 1, 0)]
    for name in table.column_names:
        if pa.types.is_list(table.schema.field(name).type):
            continue  # no analysis reads a list column through these
        kind = from_frame.series(name).dtype.kind
        if kind in "iu" or isinstance(from_frame.series(name).dtype, pd.Int64Dtype):
            for null in (-1, 0):
                assert np.array_equal(from_table.ints(name, null), from_frame.ints(name, null))
        assert np.array_equal(from_table.nulls(name), from_frame.nulls(name)), name
        table_codes, table_values = from_table.codes(name)
        frame_codes, frame_values = from_frame.codes(name)
        assert np.array_equal(table_codes, frame_codes), name
        assert list(table_values) == list(frame_values), name
        for value in ("range", "a", "", 7, None):
            assert np.array_equal(from_table.equals(name, value), from_frame.equals(name, value))
        assert same_objects(from_table.objects(name), from_frame.objects(name)), name
        assert same_objects(from_table.objects(name, rows), from_frame.objects(name, rows)), name


def assert_same_chart(left: Chart, right: Chart) -> None:
    for field in Chart.__dataclass_fields__:
        if field == "columns":
            continue
        a, b = getattr(left, field), getattr(right, field)
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b), field
        elif field == "layout":
            for part in ("band_rows", "band_top", "depth"):
                assert np.array_equal(getattr(a, part), getattr(b, part))
            assert a.n_rows == b.n_rows
        elif field == "legend":
            assert [label for _, label in a] == [label for _, label in b]
            for (one, _), (other, _) in zip(a, b):
                assert (one is None and other is None) or np.array_equal(one, other)
        else:
            assert a == b, field
    assert np.array_equal(
        left.names(np.arange(left.rows.size)), right.names(np.arange(right.rows.size))
    )
    scale = left.scale(800)
    assert [(m.label, m.peak) for m in left.memory_lines(scale)] == [
        (m.label, m.peak) for m in right.memory_lines(scale)
    ]
    assert left.describe([]) == right.describe([])


def nulls_everywhere() -> pd.DataFrame:
    """Null thread names, hosts, pids and devices: what a foreign or merged table holds."""
    frame = make_synthetic_trace(300, 3, seed=4, n_marks=5, n_memory_events=30)
    every_third = np.arange(len(frame)) % 3 == 0
    frame["thread_name"] = frame["thread_name"].astype(object).where(~every_third, None)
    frame["host"] = np.where(frame["thread_id"] == 2, None, "h")
    frame["pid"] = pd.array(np.where(frame["thread_id"] == 3, None, 100), dtype="Int64")
    frame["device"] = frame["device"].astype(object).where(~every_third, None)
    return frame


CASES = {
    "synthetic with memory and marks": lambda: make_synthetic_trace(
        1_000, 3, seed=2, n_marks=20, n_memory_events=40
    ),
    "gpu": lambda: with_gpu(make_frame(KNOWN_ROWS), GPU_SPANS),
    "overlapping tasks": lambda: make_frame(OVERLAPPING_ROWS),
    "two hosts": lambda: on_two_hosts(
        make_synthetic_trace(400, 3, seed=11, n_marks=10, n_memory_events=20)
    ),
    "nulls everywhere": nulls_everywhere,
}


def table_of(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)


@pytest.mark.parametrize("case", list(CASES))
def test_a_table_is_read_as_its_frame(case: str) -> None:
    assert_read_alike(table_of(CASES[case]()))


@pytest.mark.parametrize("case", list(CASES))
def test_the_chart_of_a_table_is_its_frames(case: str) -> None:
    table = table_of(CASES[case]())
    assert_same_chart(Chart.of(table), Chart.of(to_pandas(table)))
    assert_same_chart(Chart.of(table, max_depth=1), Chart.of(to_pandas(table), max_depth=1))


def test_columns_outside_the_fast_paths_are_read_through_pandas() -> None:
    """A dictionary in several chunks, plain strings, int32, float (NaN and null) and bool
    columns: converted as ``to_pandas()`` converts them."""
    table = table_of(make_synthetic_trace(200, 2, seed=5))
    half = table.num_rows // 2
    chunked = pa.concat_tables([table.slice(0, half), table.slice(half)])
    assert chunked.column("name").num_chunks == 2
    plain = table.set_column(
        table.schema.get_field_index("name"), "name", table.column("name").cast(pa.string())
    )
    narrow = table.set_column(
        table.schema.get_field_index("thread_id"),
        "thread_id",
        table.column("thread_id").cast(pa.int32()),
    )
    odd = pa.table(
        {
            "x": pa.array([1.5, float("nan"), None, 2.0, 0.0]),
            "y": pa.array([1, None, 3, 4, 5], pa.int32()),
            "z": pa.array([True, False, None, True, True]),
        }
    )
    for each in (chunked, plain, narrow):
        assert_read_alike(each)
        assert_same_chart(Chart.of(each), Chart.of(to_pandas(each)))
    assert_read_alike(odd)


def test_event_columns_takes_a_frame_a_table_or_itself() -> None:
    frame = make_frame(KNOWN_ROWS)
    columns = event_columns(frame)
    assert isinstance(columns, FrameColumns) and event_columns(columns) is columns
    assert isinstance(event_columns(table_of(frame)), TableColumns)


NAMES = st.sampled_from(["a", "b", "é", ""])


@st.composite
def tables(draw: Any) -> pa.Table:
    n = draw(st.integers(0, ROWS))
    ints = st.lists(st.none() | st.integers(-(2**40), 2**40), min_size=n, max_size=n)
    names = st.lists(st.none() | NAMES, min_size=n, max_size=n)
    dictionary = pa.array(draw(names), pa.string())
    return pa.table(
        {
            "id": pa.array(draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), pa.int64()),
            "parent_id": pa.array(draw(ints), pa.int64()),
            "name": dictionary.dictionary_encode(),
            "host": pa.array(draw(names), pa.string()),
            "memory_bytes": pa.array(draw(ints), pa.int64()),
        }
    )


@settings(max_examples=150, deadline=None)
@given(tables())
def test_any_table_is_read_as_its_frame(table: pa.Table) -> None:
    assert_read_alike(table)
