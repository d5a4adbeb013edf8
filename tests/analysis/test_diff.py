"""diff(): two known runs compared per name."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import KNOWN_ROWS, OVERLAPPING_ROWS, make_frame


def test_diff_of_two_known_runs(known: pd.DataFrame) -> None:
    # The new run: bwd's second mm got 40 ns slower (and so did bwd and step), fwd is gone,
    # a new "opt" range appeared at the root.
    rows = [r for r in KNOWN_ROWS if r[2] != "fwd"]
    rows = [(*r[:5], 115, r[6]) if r[0] == 5 else r for r in rows]
    rows = [(*r[:5], 130 if r[0] == 3 else 140, r[6]) if r[0] in (1, 3) else r for r in rows]
    rows.append((20, None, "opt", "range", 200, 205, 1))
    new = make_frame(rows)
    result = new.recfn.diff(known)
    assert result["name"].tolist() == ["mm", "step", "opt", "bwd", "fwd"]
    table = result.set_index("name")
    assert table.loc["mm", ["count_base", "count_new", "count_change"]].tolist() == [3, 3, 0]
    assert table.loc["mm", ["self_ns_base", "self_ns_new", "self_change_ns"]].tolist() == [
        35,
        75,
        40,
    ]
    assert table.loc["mm", "self_ratio"] == 75 / 35
    assert table.loc["step", ["total_ns_base", "total_ns_new", "total_change_ns"]].tolist() == [
        150,
        190,
        40,
    ]
    assert table.loc["step", "self_change_ns"] == 20  # lost the fwd child: more self time
    assert table.loc["bwd", ["total_change_ns", "self_change_ns"]].tolist() == [40, 0]
    assert table.loc["opt", ["count_base", "count_new", "total_ratio"]].tolist() == [0, 1, np.inf]
    assert table.loc["fwd", ["count_new", "total_ratio", "self_change_ns"]].tolist() == [
        0,
        0.0,
        -20,
    ]
    assert list(result.columns) == [
        "name",
        "count_base",
        "count_new",
        "count_change",
        "count_ratio",
        "total_ns_base",
        "total_ns_new",
        "total_change_ns",
        "total_ratio",
        "self_ns_base",
        "self_ns_new",
        "self_change_ns",
        "self_ratio",
    ]


def test_diff_with_itself_and_empty(known: pd.DataFrame) -> None:
    same = known.recfn.diff(known)
    assert (same["total_change_ns"] == 0).all() and (same["self_ratio"] == 1.0).all()
    gone = known.iloc[:0].recfn.diff(known)
    assert (gone["count_new"] == 0).all() and len(gone) == 4
    assert known.iloc[:0].recfn.diff(known.iloc[:0]).empty


def test_diff_of_gathered_and_sequential_tasks(overlapping: pd.DataFrame) -> None:
    # The base awaited the same fetches one by one, each as long as before, so fetch_all took
    # 140 ns; gathered, they overlap and fetch_all's self time shrinks but stays >= 0.
    sequential = {2: (10, 60), 3: (60, 120), 4: (120, 140), 5: (140, 175), 6: (40, 50)}
    base = make_frame([(*r[:4], *sequential.get(r[0], (0, 140)), r[6]) for r in OVERLAPPING_ROWS])
    table = overlapping.recfn.diff(base).set_index("name")
    assert table.loc["fetch_all", ["total_ns_base", "total_ns_new"]].tolist() == [140, 100]
    assert table.loc["fetch_all", ["self_ns_base", "self_ns_new", "self_change_ns"]].tolist() == [
        10,
        15,
        5,
    ]
    assert table.loc["fetch", ["self_ns_base", "self_ns_new", "self_change_ns"]].tolist() == [
        120,
        120,
        0,
    ]
    assert table.index.tolist()[0] == "fetch_all"
