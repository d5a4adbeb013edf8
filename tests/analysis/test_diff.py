"""diff(): two known runs compared per name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from known_frames import GPU_SPANS, KNOWN_ROWS, OVERLAPPING_ROWS, make_frame, with_gpu


def test_diff_of_two_known_runs(known: pd.DataFrame) -> None:
    # The current run: bwd's second mm got 40 ns slower (and so did bwd and step), fwd is
    # gone, a new "opt" range appeared at the root.
    rows = [r for r in KNOWN_ROWS if r[2] != "fwd"]
    rows = [(*r[:5], 115, r[6]) if r[0] == 5 else r for r in rows]
    rows = [(*r[:5], 130 if r[0] == 3 else 140, r[6]) if r[0] in (1, 3) else r for r in rows]
    rows.append((20, None, "opt", "range", 200, 205, 1))
    current = make_frame(rows)
    table = current.recfn.diff(known)
    assert table.index.name == "name"
    assert table.index.tolist() == ["mm", "step", "opt", "bwd", "fwd"]
    assert table.loc["mm", ["count", "count_baseline", "count_change"]].tolist() == [3, 3, 0]
    assert table.loc["mm", ["self_ns", "self_ns_baseline", "self_ns_change"]].tolist() == [
        75,
        35,
        40,
    ]
    assert table.loc["mm", "self_ns_change_pct"] == pytest.approx(100 * 40 / 35)
    assert table.loc["step", ["total_ns", "total_ns_baseline", "total_ns_change"]].tolist() == [
        190,
        150,
        40,
    ]
    assert table.loc["step", "self_ns_change"] == 20  # lost the fwd child: more self time
    assert table.loc["bwd", ["total_ns_change", "self_ns_change"]].tolist() == [40, 0]
    assert table.loc["opt", ["count", "count_baseline", "total_ns_change_pct"]].tolist() == [
        1,
        0,
        np.inf,
    ]
    assert table.loc["fwd", ["count", "total_ns_change_pct", "self_ns_change"]].tolist() == [
        0,
        -100.0,
        -20,
    ]
    assert list(table.columns) == [
        f"{stat}{suffix}"
        for stat in ("count", "total_ns", "self_ns")
        for suffix in ("", "_baseline", "_change", "_change_pct")
    ]
    flat = current.recfn.diff(known, as_index=False)
    assert flat.columns[0] == "name" and flat["name"].tolist() == table.index.tolist()


def test_diff_with_itself_and_empty(known: pd.DataFrame) -> None:
    same = known.recfn.diff(known)
    assert (same["total_ns_change"] == 0).all() and (same["self_ns_change_pct"] == 0.0).all()
    gone = known.iloc[:0].recfn.diff(known)
    assert (gone["count"] == 0).all() and len(gone) == 4
    assert (gone["count_change_pct"] == -100.0).all()
    assert known.iloc[:0].recfn.diff(known.iloc[:0]).empty


def test_diff_by_another_grouping(known: pd.DataFrame) -> None:
    faster = known.assign(end_ns=known["end_ns"].where(known["id"] != 7, known["end_ns"] - 20))
    table = faster.recfn.diff(known, by="thread_id")
    assert table.index.name == "thread_id" and table.index.tolist() == [1, 2]
    assert table.loc[2, ["total_ns", "total_ns_baseline", "total_ns_change"]].tolist() == [
        30,
        50,
        -20,
    ]


def test_diff_of_gathered_and_sequential_tasks(overlapping: pd.DataFrame) -> None:
    # The baseline awaited the same fetches one by one, each as long as before, so fetch_all
    # took 140 ns; gathered, they overlap and fetch_all's self time shrinks but stays >= 0.
    sequential = {2: (10, 60), 3: (60, 120), 4: (120, 140), 5: (140, 175), 6: (40, 50)}
    baseline = make_frame(
        [(*r[:4], *sequential.get(r[0], (0, 140)), r[6]) for r in OVERLAPPING_ROWS]
    )
    table = overlapping.recfn.diff(baseline)
    assert table.loc["fetch_all", ["total_ns", "total_ns_baseline"]].tolist() == [100, 140]
    assert table.loc["fetch_all", ["self_ns", "self_ns_baseline", "self_ns_change"]].tolist() == [
        15,
        10,
        5,
    ]
    assert table.loc["fetch", ["self_ns", "self_ns_baseline", "self_ns_change"]].tolist() == [
        120,
        120,
        0,
    ]
    assert table.index[0] == "fetch_all"


def test_diff_compares_gpu_time_when_both_have_it(known: pd.DataFrame) -> None:
    baseline = with_gpu(known, GPU_SPANS)
    slower = {**GPU_SPANS, 4: (52, 26, "cuda:0")}  # mm's kernel took 20 ns longer
    table = with_gpu(known, slower).recfn.diff(baseline)
    assert table.loc["mm", ["device_total_ns", "device_total_ns_baseline"]].tolist() == [43, 23]
    assert table.loc["mm", "device_self_ns_change"] == 20
    # The longer mm now covers 52..78 of bwd (its sibling 61..70 inside): 11 ns more than before.
    assert table.loc["bwd", "device_self_ns_change"] == -11
    assert table.loc["step", "device_count_change_pct"] == 0.0
    assert list(table.columns)[-4:] == [
        "device_self_ns",
        "device_self_ns_baseline",
        "device_self_ns_change",
        "device_self_ns_change_pct",
    ]
    # A CPU-only baseline has no GPU time to compare with: no GPU columns, rather than zeros.
    assert not [c for c in baseline.recfn.diff(known).columns if c.startswith("device")]


@pytest.mark.parametrize("baseline", [123, "base.parquet", None])
def test_a_baseline_that_is_no_frame_is_refused(known: pd.DataFrame, baseline: object) -> None:
    import recfn
    from recfn.errors import RecfnTypeError

    with pytest.raises(RecfnTypeError, match="diff: baseline must be"):
        known.recfn.diff(baseline)  # type: ignore[arg-type]
    with pytest.raises(RecfnTypeError, match="diff: baseline must be"):
        recfn.Trace.from_pandas(known).diff(baseline)  # type: ignore[arg-type]


def test_a_trace_is_a_baseline_too(known: pd.DataFrame) -> None:
    import recfn

    shifted = known.recfn.diff(recfn.Trace.from_pandas(known))
    pd.testing.assert_frame_equal(shifted, known.recfn.diff(known))
