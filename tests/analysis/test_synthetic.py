"""make_synthetic_trace(): schema, determinism and well-formed nesting."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recfn.analysis import make_synthetic_trace
from recfn.formats.schema import REQUIRED as COLUMNS


def test_schema_and_determinism() -> None:
    df = make_synthetic_trace(5_000, 3, n_marks=10, n_memory_events=20, seed=4)
    assert list(df.columns) == [*COLUMNS, "memory_bytes", "device"]
    assert df.dtypes.astype(str).to_dict() == {
        "id": "int64",
        "parent_id": "Int64",
        "name": "category",
        "kind": "category",
        "scope": "category",
        "start_ns": "int64",
        "end_ns": "Int64",
        "thread_id": "int64",
        "thread_name": "category",
        "depth": "int32",
        "sequence_nr": "int64",
        "fwd_thread_id": "int64",
        "is_async": "bool",
        "node_id": "int32",
        "pid": "int64",
        "memory_bytes": "Int64",
        "device": "category",
    }
    assert df["kind"].value_counts().to_dict() == {"range": 5_000, "memory": 20, "mark": 10}
    assert sorted(df["thread_id"].unique()) == [1, 2, 3]
    pd.testing.assert_frame_equal(
        df, make_synthetic_trace(5_000, 3, n_marks=10, n_memory_events=20, seed=4)
    )
    assert not df.equals(make_synthetic_trace(5_000, 3, n_marks=10, n_memory_events=20, seed=5))
    assert list(make_synthetic_trace(100, 2).columns) == list(COLUMNS)


def test_ranges_nest_within_their_parents() -> None:
    df = make_synthetic_trace(20_000, 4, n_marks=50, max_depth=6, seed=9)
    assert df["start_ns"].is_monotonic_increasing and (df["id"] == np.arange(len(df))).all()
    child = df[df["parent_id"].notna()]
    parent = df.loc[child["parent_id"].astype(int)]
    assert (parent["kind"] == "range").all()
    assert (parent["start_ns"].to_numpy() <= child["start_ns"].to_numpy()).all()
    assert (parent["end_ns"].to_numpy() >= child["end_ns"].to_numpy()).all()
    assert (parent["thread_id"].to_numpy() == child["thread_id"].to_numpy()).all()
    assert (parent["depth"].to_numpy() + 1 == child["depth"].to_numpy()).all()
    assert df["depth"].max() <= 7 and (df["end_ns"] >= df["start_ns"]).all()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        make_synthetic_trace(10, 0)
    with pytest.raises(ValueError, match="at least one range"):
        make_synthetic_trace(0, 1, n_marks=1)
    assert make_synthetic_trace(0, 2).empty
