"""The summary pane's table (``widget.table``): the whole trace as ``trace.summary()`` counts
it, any window against a brute-force count, sorting, the row a view focuses, bad requests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from recfn.analysis.synthetic import make_synthetic_trace
from recfn.formats.trace import Trace
from recfn.notebook_ext.widget.lod import TimelineIndex
from recfn.notebook_ext.widget.table import MAX_ROWS, SummaryError, SummaryTable


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return make_synthetic_trace(6_000, 3, seed=11, n_memory_events=100)


@pytest.fixture(scope="module")
def table(frame: pd.DataFrame) -> SummaryTable:
    return SummaryTable(TimelineIndex(pa.Table.from_pandas(frame, preserve_index=False)))


def by_name(result: dict, column: str) -> dict[str, int]:
    return {result["names"][i]: v for i, v in zip(result["rows"]["name"], result["rows"][column])}


def test_the_whole_trace_is_what_summary_counts(frame: pd.DataFrame, table: SummaryTable) -> None:
    expected = Trace.from_pandas(frame.copy()).summary()
    got = table.query(top=MAX_ROWS)
    assert got["groups"] == len(expected)
    for column, source in (("calls", "count"), ("total", "total_ns"), ("self", "self_ns")):
        assert by_name(got, column) == {str(k): int(v) for k, v in expected[source].items()}
    means = by_name(got, "mean")
    for name, mean in expected["mean_ns"].items():
        assert abs(means[str(name)] - mean) <= 0.5
    assert got["wall"] == table.index.span_ns
    # A share of the trace's wall time (names on several threads can pass 100%).
    shares = by_name(got, "total_pct")
    for name, total in by_name(got, "total").items():
        assert shares[name] == round(100 * total / got["wall"], 2)


def brute_force(frame: pd.DataFrame, origin: int, lo: float, hi: float) -> pd.DataFrame:
    """Per name, the window's calls, total (outermost ranges) and self, by plain loops."""
    rows = frame[frame["kind"] == "range"]
    start = rows["start_ns"].to_numpy() - origin
    end = rows["end_ns"].astype("int64").to_numpy() - origin
    ids = rows["id"].to_numpy()
    parents = rows["parent_id"].astype("Int64").fillna(-1).to_numpy()
    names = rows["name"].astype(str).to_numpy()
    position = {int(i): k for k, i in enumerate(ids)}
    clipped = np.minimum(end, hi) - np.maximum(start, lo)
    inside = (start < hi) & (end > lo)
    children = np.zeros(len(rows))
    for k in np.flatnonzero(inside):
        up = position.get(int(parents[k]))
        if up is not None:
            children[up] += clipped[k]
    out: dict[str, list[float]] = {}
    for k in np.flatnonzero(inside):
        ancestor, nested = position.get(int(parents[k])), False
        while ancestor is not None:
            nested |= names[ancestor] == names[k]
            ancestor = position.get(int(parents[ancestor]))
        stats = out.setdefault(names[k], [0, 0.0, 0.0])
        stats[0] += 1
        stats[1] += 0 if nested else clipped[k]
        stats[2] += max(clipped[k] - children[k], 0)
    return pd.DataFrame(out, index=["calls", "total", "self"]).T


@pytest.mark.parametrize(("left", "right"), [(0.0, 0.1), (0.31, 0.37), (0.5, 0.5001), (0.9, 1.0)])
def test_a_window_clips_every_range_to_it(
    frame: pd.DataFrame, table: SummaryTable, left: float, right: float
) -> None:
    span = table.index.span_ns
    lo, hi = span * left, span * right
    got = table.query(lo, hi, top=MAX_ROWS)
    want = brute_force(frame, table.index.origin_ns, lo, hi)
    assert got["groups"] == len(want) and got["wall"] == hi - lo
    for column in ("calls", "total", "self"):
        expected = {name: round(v) for name, v in want[column].items()}
        assert by_name(got, column) == expected, column


def test_sorting_top_and_focus(table: SummaryTable) -> None:
    by_calls = table.query(sort="calls", top=5)
    assert by_calls["rows"]["calls"] == sorted(by_calls["rows"]["calls"], reverse=True)
    assert len(by_calls["rows"]["name"]) == 5 and by_calls["groups"] > 5
    ascending = table.query(sort="name", descending=False, top=MAX_ROWS)
    names = [ascending["names"][i] for i in ascending["rows"]["name"]]
    assert names == sorted(names)
    last = table.query(sort="calls", top=MAX_ROWS)["rows"]["name"][-1]
    focused = table.query(sort="calls", top=5, focus=last)
    assert (
        focused["rows"]["name"][:5] == by_calls["rows"]["name"]
        and focused["rows"]["name"][5] == last
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sort": "speed"}, "sort must be one of"),
        ({"top": 0}, "top must be an int"),
        ({"top": MAX_ROWS + 1}, "top must be an int"),
        ({"t0": 5.0, "t1": 5.0}, "finite t0 < t1"),
        ({"t0": "a", "t1": 3}, "numbers t0 < t1"),
    ],
)
def test_bad_requests_raise_summary_error(table: SummaryTable, kwargs: dict, message: str) -> None:
    with pytest.raises(SummaryError, match=message):
        table.query(**kwargs)
