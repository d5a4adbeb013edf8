"""List columns in pandas (recfn.formats.schema.list_cells): the cells pyarrow's ``to_pandas()`` gives,
one per distinct value, shared by the rows that hold it and read-only."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from cells import same
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn.formats import chrome, schema

INT64 = st.integers(-(2**63), 2**63 - 1)
FEW_INTS = st.sampled_from([0, 1, 8, -1])
SHAPES = schema.column_type("input_shapes")
STRINGS = schema.column_type("input_dtypes")


def assert_cells_of(column: pa.ChunkedArray) -> None:
    """`list_cells` gives pyarrow's cells, one read-only object per distinct value."""
    cells = schema.list_cells(column)
    expected = column.to_pandas().to_numpy()
    assert cells.dtype == object and cells.shape == expected.shape
    assert all(same(a, b) for a, b in zip(cells, expected))
    holders: dict[str, set[int]] = defaultdict(set)
    for value, cell in zip(column.to_pylist(), cells):
        holders[json.dumps(value)].add(id(cell))
        assert cell is None or not cell.flags.writeable
    assert all(len(ids) == 1 for ids in holders.values())


def chunked(values: list[Any], dtype: pa.DataType, cuts: list[int]) -> pa.ChunkedArray:
    """`values` in chunks cut at `cuts`: slices of one array (with offsets into one child)
    and arrays of their own, alternately."""
    whole = pa.array(values, dtype)
    bounds = [0, *sorted(c % (len(values) + 1) for c in cuts), len(values)]
    return pa.chunked_array(
        [
            whole[a:b] if i % 2 else pa.array(values[a:b], dtype)
            for i, (a, b) in enumerate(zip(bounds, bounds[1:]))
        ],
        dtype,
    )


def shapes(ints: st.SearchStrategy[int]) -> st.SearchStrategy[list[Any]]:
    """Rows of torch's shapes: nulls at each level, empty lists, nested empties."""
    dims = st.none() | st.lists(st.none() | ints, max_size=3)
    return st.lists(st.none() | st.lists(dims, max_size=3), max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    values=shapes(FEW_INTS) | shapes(INT64),
    dtype=st.sampled_from([SHAPES, pa.large_list(pa.list_(pa.int32()))]),
    cuts=st.lists(st.integers(0, 100), max_size=3),
)
def test_shapes_cells_are_pyarrows_shared_per_value(
    values: list[Any], dtype: pa.DataType, cuts: list[int]
) -> None:
    if dtype != SHAPES:
        values = [
            v and [d and [x if x is None else x % 2**31 for x in d] for d in v] for v in values
        ]
    assert_cells_of(chunked(values, dtype, cuts))


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.none()
        | st.lists(st.none() | st.sampled_from(["float", "", "é", "Scalar"]), max_size=3)
        | st.lists(st.text(max_size=3), max_size=3),
        max_size=40,
    ),
    cuts=st.lists(st.integers(0, 100), max_size=3),
)
def test_string_list_cells_are_pyarrows_shared_per_value(
    values: list[Any], cuts: list[int]
) -> None:
    assert_cells_of(chunked(values, STRINGS, cuts))


def test_all_distinct_and_all_equal_rows() -> None:
    assert_cells_of(pa.chunked_array([pa.array([[[i, 2]] for i in range(1000)], SHAPES)]))
    equal = pa.chunked_array([pa.array([[[8, 8], []]] * 1000, SHAPES)] * 2)
    assert_cells_of(equal)
    assert len({id(c) for c in schema.list_cells(equal)}) == 1


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (
            pa.list_(pa.float64()),
            [[1.0, None, float("nan")], [1.0, None, float("nan")], [-0.0], [0.0]],
        ),
        (pa.list_(pa.bool_()), [[True], [True, None], None, [True]]),
        (pa.list_(pa.struct([("a", pa.int64())])), [[{"a": 1}], None, [{"a": 1}]]),
        (pa.list_(pa.dictionary(pa.int32(), pa.string())), [["a"], None, ["a", "b"]]),
        (pa.list_(pa.int64()), []),
    ],
)
def test_other_element_types_convert_as_pyarrow_does(dtype: pa.DataType, values: list[Any]) -> None:
    column = pa.chunked_array([pa.array(values, dtype)] * 2, dtype)
    cells = schema.list_cells(column)
    assert all(same(a, b) for a, b in zip(cells, column.to_pandas().to_numpy(), strict=True))


def test_to_pandas_converts_every_list_column_in_place() -> None:
    table = schema.conform(
        pa.table(
            {
                "id": [1, 2, 3],
                "name": ["a", "b", "a"],
                "kind": ["range"] * 3,
                "start_ns": [1, 2, 3],
                "thread_id": [1, 1, 1],
                "input_shapes": pa.array([[[2, 3]], None, [[2, 3]]], SHAPES),
                "input_dtypes": pa.array([["float"], None, ["float"]], STRINGS),
                "stack": pa.array([["f:1(g)"], ["f:1(g)"], []], pa.list_(pa.string())),
                "memory_bytes": pa.array([None, 5, None], pa.int64()),
            }
        )
    )
    df = schema.to_pandas(table)
    plain = table.to_pandas()
    assert list(df.columns) == table.column_names
    for name in ("input_shapes", "input_dtypes", "stack"):
        assert df[name].dtype == object
        assert all(same(a, b) for a, b in zip(df[name], plain[name], strict=True))
    assert df["input_shapes"][0] is df["input_shapes"][2]
    assert str(df["memory_bytes"].dtype) == "Int64" and df["memory_bytes"][1] == 5
    with pytest.raises(ValueError, match="read-only"):
        df["input_shapes"][0][0][0] = 7
    with pytest.raises(ValueError, match="read-only"):
        df["stack"][0][0] = "other"


def test_a_profile_with_shapes_and_a_trace_without_any(tmp_path: Path) -> None:
    with recfn.profile(report_input_shapes=True) as prof:
        for _ in range(3):
            with recfn.record_function_fast("op", input_values=(np.zeros((2, 3)), 1.5)):
                pass
    df = prof.to_pandas()
    ops = df[df["name"] == "op"]
    assert ops["input_shapes"].map(lambda v: [list(d) for d in v]).tolist() == [[[2, 3], []]] * 3
    assert len({id(v) for v in ops["input_shapes"]}) == 1
    path = tmp_path / "plain.json"
    path.write_text(json.dumps([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]))
    plain = chrome.read_chrome_trace(path)
    assert "input_shapes" not in plain.columns and len(plain) == 1
