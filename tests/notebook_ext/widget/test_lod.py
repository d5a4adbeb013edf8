"""The timeline's level-of-detail engine against brute force on small synthetic traces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recfn.analysis.synthetic import make_synthetic_trace
from recfn.errors import QueryError
from recfn.notebook_ext.widget import lod
from recfn.notebook_ext.widget.lod import TimelineIndex, _lanes_of, first_view, response_size


def _table(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return make_synthetic_trace(4_000, 3, seed=7, n_memory_events=300)


@pytest.fixture(scope="module")
def index(frame: pd.DataFrame) -> TimelineIndex:
    return TimelineIndex(_table(frame))


def _ranges(frame: pd.DataFrame, index: TimelineIndex) -> pd.DataFrame:
    ranges = frame[frame["kind"] == "range"].copy()
    ranges["start"] = ranges["start_ns"] - index.origin_ns
    ranges["end"] = ranges["end_ns"].astype("int64") - index.origin_ns
    ranges["lane"] = ranges["thread_id"] - 1
    return ranges


@pytest.mark.parametrize(("left", "right"), [(0.0, 1.0), (0.2, 0.3), (0.5, 0.501), (0.9, 1.2)])
def test_query_draws_exactly_the_visible_ranges_of_a_pixel_or_more(
    frame: pd.DataFrame, index: TimelineIndex, left: float, right: float
) -> None:
    t0, t1, width = index.span_ns * left, index.span_ns * right, 600
    got = index.query(t0, t1, width)
    ranges = _ranges(frame, index)
    px = (t1 - t0) / width
    visible = ranges[(ranges["start"] < t1) & (ranges["end"] > t0)]
    want = visible[(visible["end"] - visible["start"]) >= px]
    assert sorted(got["ranges"]["row"]) == sorted(frame.index[frame.index.isin(want.index)])
    assert len(want) < lod.MAX_RANGES
    # Every range that starts in the window is either drawn or counted in a density bucket.
    starting = visible[visible["start"] >= t0]
    drawn_starting = sum(1 for s in got["ranges"]["start"] if s >= t0)
    merged = sum(sum(counts) for counts in got["density"]["count"])
    assert drawn_starting + merged == len(starting)


def test_drawn_ranges_carry_lane_depth_name_and_self_time(
    frame: pd.DataFrame, index: TimelineIndex
) -> None:
    got = index.query(0, index.span_ns * 0.05, 400)["ranges"]
    assert got["row"], "a narrow window draws some ranges"
    for i, row in enumerate(got["row"][:50]):
        event = frame.iloc[row]
        assert got["lane"][i] == event["thread_id"] - 1
        assert got["depth"][i] == event["depth"]
        assert index.names[got["name"][i]] == event["name"]
        assert 0 <= got["self"][i] <= got["end"][i] - got["start"][i]


def test_cap_keeps_the_longest_ranges(
    frame: pd.DataFrame, index: TimelineIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = index.query(0, index.span_ns * 0.2, 2000)["ranges"]
    monkeypatch.setattr(lod, "MAX_RANGES", 10)
    capped = index.query(0, index.span_ns * 0.2, 2000)["ranges"]
    assert len(full["row"]) > 10 and len(capped["row"]) == 10
    durations = sorted((e - s for s, e in zip(full["start"], full["end"])), reverse=True)
    assert (
        sorted((e - s for s, e in zip(capped["start"], capped["end"])), reverse=True)
        == (durations[:10])
    )


def test_density_widens_buckets_to_stay_under_the_cell_cap(
    index: TimelineIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lod, "MAX_DENSITY_CELLS", 50)
    density = index.query(0, index.span_ns, 1000)["density"]
    assert density["bucket_px"] > 1
    assert sum(len(px) for px in density["px"]) <= 50


def test_memory_lane_brackets_the_running_total(frame: pd.DataFrame, index: TimelineIndex) -> None:
    assert [lane.kind for lane in index.lanes] == ["ranges"] * 3 + ["memory"]
    memory = frame[frame["kind"] == "memory"].sort_values("start_ns", kind="stable")
    level = memory["memory_bytes"].astype("int64").cumsum().to_numpy()
    times = memory["start_ns"].to_numpy() - index.origin_ns
    width = 300
    got = index.query(0, index.span_ns, width)["memory"][0]
    assert got["lane"] == 3
    step = index.span_ns / width
    for px in (0, 17, 150, 299):
        inside = level[(times > px * step) & (times <= (px + 1) * step)]
        if inside.size:
            assert got["low"][px] <= inside.min() and got["high"][px] >= inside.max()
    assert got["high"][-1] == level[-1] or got["low"][-1] == level[-1]


def test_lanes_name_process_and_thread_when_several_processes(frame: pd.DataFrame) -> None:
    two = frame.copy()
    two.loc[two["thread_id"] == 2, "pid"] = 99
    labels = [lane.label for lane in TimelineIndex(_table(two)).lanes if lane.kind == "ranges"]
    assert labels[0].startswith("pid 99 / ") and labels[1].startswith("pid 4242 / MainThread")
    single = [lane.label for lane in TimelineIndex(_table(frame)).lanes]
    assert single[0] == "MainThread"


@pytest.mark.parametrize("apart_by", ["pid", "host", "null pid"])
def test_processes_that_count_ids_from_the_same_start_each_keep_their_parents(
    apart_by: str,
) -> None:
    """A dataset's processes number their rows alike: ids are looked up within each process
    (host, pid; a null pid a process of its own), as the summary and the picture do."""
    first = make_synthetic_trace(400, 2, seed=1, n_memory_events=10)
    second = make_synthetic_trace(300, 2, seed=2)
    assert set(first["id"]) & set(second["id"])
    if apart_by == "host":
        first["host"], second["host"] = "a", "b"
    elif apart_by == "pid":
        first["pid"], second["pid"] = 1, 2
    else:  # (-1: what a null is filled with, still another process)
        first["pid"] = -1
        second["pid"] = pd.array([None] * len(second), dtype="Int64")
    both = TimelineIndex(_table(pd.concat([first, second], ignore_index=True)))
    alone = [TimelineIndex(_table(part)).parent for part in (first, second)]
    shifted = np.where(alone[1] >= 0, alone[1] + len(first), -1)
    assert both.parent.tolist() == [*alone[0].tolist(), *shifted.tolist()]
    tree = both.call_tree()
    assert sum(tree["count"]) == int(both.is_range.sum())
    lanes = [lane.label for lane in both.lanes if lane.kind == "ranges"]
    assert len(lanes) == 4, lanes  # two threads in each process: none shared
    if apart_by == "null pid":  # a null pid is no process id
        assert sorted({label.split(" / ")[0] for label in lanes}) == ["pid -1", "pid ?"], lanes


def test_call_tree_totals_add_up(frame: pd.DataFrame, index: TimelineIndex) -> None:
    tree = index.call_tree()
    ranges = _ranges(frame, index)
    roots = [i for i, p in enumerate(tree["parent"]) if p < 0]
    root_ranges = ranges[ranges["parent_id"].isna()]
    assert sum(tree["total"][i] for i in roots) == (root_ranges["end"] - root_ranges["start"]).sum()
    assert sum(tree["count"]) == len(ranges)
    for node, parent in enumerate(tree["parent"]):
        if parent >= 0:
            assert parent < node and tree["total"][parent] >= tree["total"][node]
        assert 0 <= tree["self"][node] <= tree["total"][node]
    assert sum(tree["self"]) == sum(index.self_ns[ranges.index.to_numpy()])


def test_call_tree_cut_stays_a_tree(index: TimelineIndex) -> None:
    tree = index.call_tree(max_nodes=7)
    assert len(tree["name"]) == 7 and tree["nodes"] > 7
    assert all(p < 7 for p in tree["parent"])
    assert set(tree["names"]) == set(tree["name"])


def test_search_detail_and_name_ids(index: TimelineIndex, frame: pd.DataFrame) -> None:
    found = index.search("ATEN::M")
    assert {index.names[i] for i in found["ids"]} == {"aten::matmul", "aten::mm"}
    assert found["names"] == 2
    assert found["matches"] == frame["name"].isin(["aten::matmul", "aten::mm"]).sum()
    assert index.search("") == {"ids": [], "names": 0, "matches": 0}
    assert index.names[index.name_ids("forward")[0]] == "forward"
    assert index.name_ids("no such name") == []
    detail = index.detail(3)
    assert detail["name"] == frame["name"].iloc[3]
    assert detail["duration"] == frame["end_ns"].iloc[3] - frame["start_ns"].iloc[3]


def test_detail_shows_args_and_shapes_when_recorded(frame: pd.DataFrame) -> None:
    small = frame.head(20).copy()
    small["args"] = ["x=1"] + [None] * 19
    table = _table(small).append_column(
        "input_shapes", pa.array([[[2, 3]]] + [[]] * 19, type=pa.list_(pa.list_(pa.int64())))
    )
    detail = TimelineIndex(table).detail(0)
    assert detail["args"] == "x=1" and detail["input_shapes"] == [[2, 3]]
    assert "args" not in TimelineIndex(table).detail(1)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ix: ix.query(5, 5, 100), "t0 < t1"),
        (lambda ix: ix.query(0, float("nan"), 100), "t0 < t1"),
        (lambda ix: ix.query(0, 10, 0), "width_px"),
        (lambda ix: ix.query(0, 10, 10**6), "width_px"),
        (lambda ix: ix.detail(-1), "row"),
        (lambda ix: ix.search(3), "search text"),
    ],
)
def test_bad_requests_raise_query_error(index: TimelineIndex, call: object, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        call(index)  # type: ignore[operator]


def test_missing_columns_are_named(frame: pd.DataFrame) -> None:
    with pytest.raises(QueryError, match="start_ns"):
        TimelineIndex(_table(frame.drop(columns=["start_ns"])))


def test_open_ranges_reach_the_end_of_the_trace(frame: pd.DataFrame) -> None:
    table = _table(frame)
    ends = table.column("end_ns").to_pylist()
    ends[0] = None
    table = table.set_column(table.column_names.index("end_ns"), "end_ns", pa.array(ends))
    index = TimelineIndex(table)
    assert index.end[0] == index.span_ns
    assert 0 in index.query(0, index.span_ns, 100)["ranges"]["row"]


def test_first_view_stays_small() -> None:
    index = TimelineIndex(_table(make_synthetic_trace(50_000, 4, n_memory_events=500)))
    assert response_size(first_view(index)) < 1_000_000
    assert np.isfinite(index.span_ns)


def test_density_counts_the_highlighted_ranges_it_merged(
    frame: pd.DataFrame, index: TimelineIndex
) -> None:
    # Zoomed out, every range of the name is merged: the buckets still say how many match.
    mm = index.name_ids("aten::mm")
    got = index.query(0, index.span_ns, 100, highlight=mm)
    merged = sum(sum(row) for row in got["density"]["match"])
    drawn = sum(1 for name in got["ranges"]["name"] if name in mm)
    assert merged > 0
    assert merged + drawn == (frame["name"] == "aten::mm").sum()
    for counts, matches in zip(got["density"]["count"], got["density"]["match"]):
        assert all(0 <= m <= c for c, m in zip(counts, matches))
    assert "match" not in index.query(0, index.span_ns, 100)["density"]


def test_longest_is_the_longest_range_of_the_name(
    frame: pd.DataFrame, index: TimelineIndex
) -> None:
    [mm] = index.name_ids("aten::mm")
    found = index.longest(mm)
    ranges = _ranges(frame, index)
    mine = ranges[ranges["name"] == "aten::mm"]
    assert found["end"] - found["start"] == (mine["end"] - mine["start"]).max()
    assert frame["name"].iloc[found["row"]] == "aten::mm"
    with pytest.raises(QueryError, match="name must be an id"):
        index.longest(len(index.names))


def test_responses_name_their_names_with_short_names_and_colours() -> None:
    from recfn.analysis.plots.colors import column_colors, hex_color

    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "parent_id": pd.array([None, 1, 1], dtype="Int64"),
            "name": ["mod.sub::Klass.method", "aten::mm", "mod.sub::f.<locals>.g"],
            "kind": "range",
            "start_ns": [0, 10, 50],
            "end_ns": [100, 40, 90],
            "thread_id": 1,
            "depth": [0, 1, 1],
        }
    )
    index = TimelineIndex(_table(frame))
    got = index.query(0, 100, 100)
    names = {got["names"][i]: i for i in got["names"]}
    assert got["short"] == {
        names["mod.sub::Klass.method"]: "Klass.method",
        names["mod.sub::f.<locals>.g"]: "f.g",
    }
    _, values, palette = column_colors(frame)
    for name, i in names.items():
        assert got["colors"][i] == hex_color(palette[list(values).index(name)])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([-1, 0, 3]), st.sampled_from([7, 7, 9]), st.integers(0, 4)),
        min_size=1,
        max_size=30,
    ),
    st.booleans(),
)
def test_lanes_are_the_distinct_rows_sorted(rows: list[tuple[int, int, int]], one: bool) -> None:
    """`_lanes_of` is ``np.unique(axis=0)`` of its columns, whether or not each column holds a
    single value (which skips its sort)."""
    table = np.array(rows[:1] * len(rows) if one else rows, dtype=np.int64)
    keys, inverse = _lanes_of(*table.T)
    expected, where = np.unique(table, axis=0, return_inverse=True)
    assert np.array_equal(keys, expected)
    assert np.array_equal(inverse, where.reshape(-1))
