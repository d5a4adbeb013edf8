"""``Trace.to_pandas(columns=...)``: a frame of some columns, the same as the whole frame's."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from recfn.analysis.synthetic import make_synthetic_trace
from recfn.errors import RecfnTypeError, RecfnValueError
from recfn.formats.trace import Trace

WANTED = ["start_ns", "name", "id"]


def a_trace() -> Trace:
    frame = make_synthetic_trace(300, 2, seed=5, n_memory_events=20)
    return Trace(pa.Table.from_pandas(frame, preserve_index=False), name="cols")


def test_some_columns_are_the_whole_frames_in_the_tables_order() -> None:
    narrow = a_trace().to_pandas(columns=WANTED)
    whole = a_trace().to_pandas()
    assert list(narrow.columns) == ["id", "name", "start_ns"]
    pd.testing.assert_frame_equal(narrow, whole[["id", "name", "start_ns"]])
    assert narrow.attrs == whole.attrs and narrow.attrs["recfn"]["cell"] == "cols"


def test_with_the_whole_frame_cached_its_columns_are_taken() -> None:
    trace = a_trace()
    whole = trace.to_pandas()
    whole.attrs["mine"] = 1  # what the cached frame carries comes along
    narrow = trace.to_pandas(columns=WANTED)
    assert list(narrow.columns) == ["id", "name", "start_ns"] and narrow.attrs["mine"] == 1
    assert trace.to_pandas() is whole  # the whole frame is still the cached one


def test_any_iterable_of_names_will_do() -> None:
    narrow = a_trace().to_pandas(columns=(c for c in WANTED))
    assert list(narrow.columns) == ["id", "name", "start_ns"]


def test_a_narrow_frame_is_not_cached() -> None:
    trace = a_trace()
    trace.to_pandas(columns=WANTED)
    assert len(trace.to_pandas().columns) > len(WANTED)


@pytest.mark.parametrize("columns", ["name", [b"name"], ["name", 3], 3])
def test_columns_must_be_a_list_of_names(columns: object) -> None:
    with pytest.raises(RecfnTypeError, match="list of column names"):
        a_trace().to_pandas(columns=columns)  # type: ignore[arg-type]


def test_a_column_the_trace_lacks_is_named() -> None:
    with pytest.raises(RecfnValueError, match=r"no column\(s\) \['gpu_ns'\]"):
        a_trace().to_pandas(columns=["name", "gpu_ns"])
