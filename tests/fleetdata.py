"""A small fleet dataset on disk: synthetic processes (same ids in each) plus hand-made rows
whose children overlap each other, outlive their parent or stay open."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import recfn
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.formats.schema import conform


def overlapping(pid: int) -> pd.DataFrame:
    rows = [
        # id, parent, name, kind, start, end
        (1, None, "gather", "range", 0, 100),
        (2, 1, "task", "range", 10, 60),
        (3, 1, "task", "range", 40, 90),  # overlaps the first task
        (4, 1, "task", "range", 95, 130),  # outlives its parent
        (5, 1, "tick", "mark", 50, 50),
        (6, None, "open", "range", 120, None),
        (7, 6, "task", "range", 125, 128),  # child of an open range
        (8, None, "span", "range", 0, 200),
    ]
    df = pd.DataFrame(rows, columns=["id", "parent_id", "name", "kind", "start_ns", "end_ns"])
    df["id"] += 10**9  # past the synthetic ids
    df["parent_id"] = (df["parent_id"] + 10**9).astype("Int64")
    df["end_ns"] = df["end_ns"].astype("Int64")
    df["thread_id"] = 7
    df["thread_name"] = "gatherer"
    df["depth"] = pd.Series([0, 1, 1, 1, 1, 0, 1, 0], dtype="int32")
    df["pid"] = pid
    df["scope"] = ["user_scope"] * 7 + ["Trace"]
    return recfn.Trace(conform(df, "overlapping")).to_pandas()  # other columns: defaults


def write_fleet(folder: Path, processes: int = 3, ranges: int = 2000) -> list[Path]:
    """One Parquet file per process under ``folder/hostname=.../process=.../``; returns the files."""
    files = []
    for k in range(processes):
        df = make_synthetic_trace(ranges, n_threads=2, seed=k)
        df["pid"] = 1000 + k
        df = pd.concat([df, overlapping(1000 + k)], ignore_index=True)
        df["id"] = df["id"].astype("int64")
        df["host"] = pd.Categorical([f"node{k % 2}"] * len(df))
        df["rank"] = pd.Series([k] * len(df), dtype="int32")
        path = folder / f"hostname=node{k % 2}" / f"process={1000 + k}" / "part-00000.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        recfn.Trace.from_pandas(df).save(path)
        files.append(path)
    return files


def same(left: pd.DataFrame, right: pd.DataFrame) -> None:
    """Two summaries hold the same rows and numbers (keys compared as text, any row order)."""
    keys = list(left.index.names)
    left, right = left.reset_index(), right.reset_index()
    for frame in (left, right):
        for key in keys:
            frame[key] = pd.Series([str(v) for v in frame[key]], dtype=object)
    left = left.sort_values(keys, ignore_index=True)
    right = right.sort_values(keys, ignore_index=True)[list(left.columns)]
    pd.testing.assert_frame_equal(left, right, check_dtype=False, check_index_type=False)
