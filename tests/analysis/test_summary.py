"""summary() and to_string(): exact numbers on hand-built tables, column dtypes, bad input."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from known_frames import KNOWN_ROWS, T0, make_frame

import recfn.analysis as analysis
from recfn.analysis.stats.summary import DEVICE_COLUMNS, MEMORY_COLUMNS, STAT_COLUMNS

KNOWN_WALL = 100
"""From the first start to the last end of the known frame's closed ranges: what Total % is of."""
EXPECTED = {
    # name: count, total, self, min, max
    "step": (2, 150, 70, 50, 100),
    "bwd": (1, 50, 25, 50, 50),
    "mm": (3, 35, 35, 10, 15),
    "fwd": (1, 20, 20, 20, 20),
}


def check_known(summary: pd.DataFrame) -> None:
    assert summary.index.astype(str).tolist() == ["step", "bwd", "mm", "fwd"]
    assert summary.index.name == "name"
    for row in summary.itertuples():
        count, total, own, low, high = EXPECTED[str(row.Index)]
        assert (row.count, row.total_ns, row.self_ns) == (count, total, own)
        assert (row.min_ns, row.max_ns) == (low, high)
        assert row.mean_ns == pytest.approx(total / count)
        assert row.total_pct == pytest.approx(100 * total / KNOWN_WALL)
        assert row.self_pct == pytest.approx(100 * own / 150)


def test_exact_self_and_totals(known: pd.DataFrame) -> None:
    summary = known.recfn.summary()
    assert list(summary.columns) == list(STAT_COLUMNS)
    check_known(summary)
    flat = known.recfn.summary(as_index=False)
    assert list(flat.columns) == ["name", *STAT_COLUMNS] and flat.index.tolist() == [0, 1, 2, 3]
    assert summary["self_pct"].sum() == pytest.approx(100)
    for column in ("count", "total_ns", "self_ns", "min_ns", "max_ns"):
        assert summary[column].dtype == np.int64


def test_overlapping_children_count_once(overlapping: pd.DataFrame) -> None:
    summary = overlapping.recfn.summary()
    assert summary.index.tolist() == ["fetch", "fetch_all", "parse", "decode"]
    assert summary["count"].tolist() == [3, 1, 1, 1]
    assert summary["total_ns"].tolist() == [130, 100, 35, 10]
    assert summary["self_ns"].tolist() == [120, 15, 35, 10]
    assert summary["self_pct"].tolist() == pytest.approx([100 * s / 180 for s in (120, 15, 35, 10)])
    assert summary.loc["fetch_all", "total_pct"] == pytest.approx(100 * 100 / 130)  # of 0..130
    lines = overlapping.recfn.to_string().splitlines()
    assert (
        lines[4].split()[:3] == ["fetch_all", "8.33%", "15ns"]
        and lines[-1] == "Self time total: 180ns"
    )


@pytest.mark.parametrize(
    "convert",
    [
        pytest.param(lambda df: df, id="Int64+category"),
        pytest.param(
            # float64 holds epoch nanoseconds only to ~256 ns; these times are small
            lambda df: df.assign(start_ns=df["start_ns"] - T0, end_ns=df["end_ns"] - T0).astype(
                {"parent_id": "float64", "end_ns": "float64", "name": "str", "kind": "str"}
            ),
            id="float64-NaN+str",
        ),
        pytest.param(lambda df: df.astype({"name": object, "kind": object}), id="object"),
        pytest.param(lambda df: df.drop(columns=["parent_id"]), id="no-parent_id"),
    ],
)
def test_accepts_the_column_variants(
    known: pd.DataFrame, convert: Callable[[pd.DataFrame], pd.DataFrame]
) -> None:
    check_known(convert(known).recfn.summary())


def test_int64_parent_ids_with_a_sentinel_and_read_parquet(
    tmp_path: Path, known: pd.DataFrame
) -> None:
    closed = known[known["end_ns"].notna()].astype({"end_ns": "int64"})
    sentinel = closed.assign(parent_id=closed["parent_id"].fillna(-1).astype("int64"))
    check_known(sentinel.recfn.summary())
    known.to_parquet(tmp_path / "t.parquet")
    check_known(pd.read_parquet(tmp_path / "t.parquet").recfn.summary())


def test_group_sort_and_top(known: pd.DataFrame) -> None:
    by_thread = known.recfn.summary(by="thread_id", sort_by="thread_id")
    assert by_thread.index.tolist() == [1, 2]
    assert by_thread["count"].tolist() == [5, 2]
    assert by_thread["mean_ns"].tolist() == [(100 + 20 + 50 + 10 + 15) / 5, (50 + 10) / 2]
    both = known.recfn.summary(by=["name", "thread_id"], sort_by="self_ns", top=2)
    assert list(both.index.names) == ["name", "thread_id"]
    assert [(str(n), t) for n, t in both.index] == [("step", 2), ("step", 1)]
    assert known.recfn.summary(sort_by="count").index[0] == "mm"


def test_grouping_without_name_counts_nested_time_once(known: pd.DataFrame) -> None:
    # Regression: by thread, step's children ran inside step; a thread's total is the time
    # its outermost ranges cover (100 ns and 50 ns), not the 195 ns that the ranges sum to.
    by_thread = known.recfn.summary(by="thread_name", sort_by="thread_name")
    assert by_thread["total_ns"].tolist() == [100, 50]
    assert by_thread["self_ns"].tolist() == [100, 50]
    assert by_thread["total_pct"].tolist() == pytest.approx([100 * 100 / 100, 100 * 50 / 100])
    # Nesting through another group: scope "a" > "b" > "a" counts the outer "a" once.
    rows = [
        (1, None, "outer", "range", 0, 100, 1),
        (2, 1, "middle", "range", 10, 90, 1),
        (3, 2, "inner", "range", 20, 80, 1),
        (4, None, "later", "range", 200, 230, 1),
    ]
    df = make_frame(rows).assign(scope=pd.Categorical(["a", "b", "a", "a"]))
    by_scope = df.recfn.summary(by="scope", sort_by="scope")
    assert by_scope["total_ns"].tolist() == [100 + 30, 80]
    assert by_scope["count"].tolist() == [3, 1]
    assert by_scope["self_ns"].tolist() == [20 + 60 + 30, 20]


def test_a_missing_categorical_key_is_a_group_of_its_own_at_any_depth() -> None:
    # Regression: a categorical key's missing value took code -1, which the walk up for
    # nesting past its first levels treats as no group, so a range 19 levels under one of its
    # own group was counted again in the total.
    depth = 20
    rows = [(i + 1, i or None, f"r{i}", "range", i, 2 * depth - i, 1) for i in range(depth)]
    keys = [None] + ["a"] * (depth - 2) + [None]
    as_object = make_frame(rows).assign(key=pd.array(keys, dtype=object))
    as_category = make_frame(rows).assign(key=pd.Categorical(keys))

    def totals(df: pd.DataFrame) -> dict[str, tuple[int, int, int]]:
        summary = df.recfn.summary(by="key", as_index=False)
        return {
            "-" if pd.isna(key) else str(key): (int(count), int(total), int(own))
            for key, count, total, own in summary[
                ["key", "count", "total_ns", "self_ns"]
            ].itertuples(index=False)
        }

    expected = totals(as_object)
    assert expected["-"] == (2, 2 * depth, 2 + 2)  # total: the outer one only, it holds the inner
    assert totals(as_category) == expected


def test_recursion_counts_the_outermost_range_once_by_name() -> None:
    # Regression: f inside f inside f summed 100 + 50 + 20 ns and put Total % past 100%.
    rows = [
        (1, None, "f", "range", 0, 100, 1),
        (2, 1, "f", "range", 10, 60, 1),
        (3, 2, "g", "range", 20, 50, 1),
        (4, 3, "f", "range", 30, 50, 1),
        (5, None, "f", "range", 200, 210, 1),
    ]
    summary = make_frame(rows).recfn.summary()
    assert summary.loc["f", "total_ns"] == 100 + 10
    assert summary.loc["f", "count"] == 4
    assert summary.loc["f", "mean_ns"] == (100 + 50 + 20 + 10) / 4  # per call, every call
    assert summary.loc["f", "max_ns"] == 100
    assert summary.loc["g", "total_ns"] == 30
    assert summary.loc["f", "total_pct"] == pytest.approx(100 * 110 / 210)  # of 0..210
    assert summary["total_pct"].max() <= 100.0


def test_group_by_input_shape_and_stack() -> None:
    shapes = [[[2, 3], [3]], [[2, 3], [3]], None, [[4]], [[4]], [], None, [[2, 3], [3]], None]
    stacks = [
        ["a.py:1(main)", "b.py:2(f)"],
        ["a.py:1(main)", "c.py:3(g)"],
        None,
        ["x.py:9(h)"],
        ["a.py:1(main)", "b.py:2(f)"],
        [],
        [],
        ["z.py:1(q)", "b.py:2(f)"],
        None,
    ]
    df = make_frame(KNOWN_ROWS, input_shapes=shapes, stack=stacks)
    by_shape = df.recfn.summary(group_by_input_shape=True, sort_by="name", as_index=False)
    keys = set(zip(by_shape["name"].astype(str), by_shape["input_shapes"]))
    assert (
        ("step", "[[2, 3], [3]]") in keys
        and ("mm", "[[4]]") in keys
        and ("mm", "[[2, 3], [3]]") in keys
    )
    assert ("mm", "[]") in keys and ("bwd", "[[4]]") in keys
    assert by_shape.loc[by_shape["input_shapes"] == "[[2, 3], [3]]", "count"].sum() == 3
    by_stack = df.recfn.summary(group_by_stack_n=1, as_index=False)
    pairs = set(zip(by_stack["name"].astype(str), by_stack["stack"]))
    expected = {
        ("step", "b.py:2(f)"),
        ("step", ""),
        ("fwd", "c.py:3(g)"),
        ("bwd", "x.py:9(h)"),
        ("mm", ""),
    }
    assert expected <= pairs
    assert by_stack.loc[by_stack["stack"] == "b.py:2(f)", "count"].sum() == 3
    two = df.recfn.summary(group_by_stack_n=2)
    assert list(two.index.names) == ["name", "stack"]
    assert "a.py:1(main); b.py:2(f)" in set(two.index.get_level_values("stack"))


def test_memory_and_flops_columns() -> None:
    rows = [
        *KNOWN_ROWS,
        (10, 4, "[memory]", "memory", 55, 55, 1),
        (11, 3, "[memory]", "memory", 45, 45, 1),
        (12, 7, "[memory]", "memory", 25, 25, 2),
    ]
    memory = [None] * len(KNOWN_ROWS) + [100, -30, 7]
    flops = [None, None, None, None, 1000, 500, None, 250, None, None, None, None]
    df = make_frame(
        rows, memory_bytes=pd.array(memory, dtype="Int64"), flops=pd.array(flops, dtype="Int64")
    )
    summary = df.recfn.summary()
    assert list(summary.columns)[-5:] == [*MEMORY_COLUMNS, "flops"]
    assert summary.loc["mm", "self_memory_bytes"] == 100
    assert summary.loc["bwd", ["total_memory_bytes", "self_memory_bytes"]].tolist() == [70, -30]
    assert summary.loc["step", ["total_memory_bytes", "self_memory_bytes"]].tolist() == [77, 7]
    # Net = allocated - freed: bwd freed 30 bytes itself, mm inside it allocated 100.
    assert summary.loc["bwd", ["allocated_bytes", "freed_bytes"]].tolist() == [100, 30]
    assert summary.loc["step", ["allocated_bytes", "freed_bytes"]].tolist() == [107, 30]
    # By thread, memory nested in the thread's outermost ranges counts once.
    by_thread = df.recfn.summary(by="thread_id", sort_by="thread_id")
    assert by_thread["total_memory_bytes"].tolist() == [70, 7]
    assert summary.loc["mm", "flops"] == 1750
    assert summary.loc["mm", "count"] == 3  # memory rows are not ranges
    text = df.recfn.to_string()
    assert "Alloc" in text and "Freed" in text and "Net Mem" in text and "Self Net Mem" in text
    assert "FLOPs" in text and "1.75K" in text


def test_to_string(known: pd.DataFrame) -> None:
    assert not hasattr(known.recfn, "table")
    text = known.recfn.to_string(top=2)
    lines = text.splitlines()
    header = ["Name", "Self", "%", "Self", "Total", "%", "Total", "Mean", "Min", "Max", "Calls"]
    assert lines[1].split() == header
    assert lines[3].split()[:3] == ["step", "46.67%", "70ns"]
    assert lines[-3] == "... 2 more names"  # of 4: the cut is said, not silent
    assert len(lines) == 2 + 2 + 1 + 2 + 1  # rules, header, 2 rows, "more", footer
    assert lines[-1] == "Self time total: 150ns"
    assert "more" not in known.recfn.to_string()
    assert "... 1 more group" in known.recfn.to_string(by="thread_id", top=1)
    assert known.recfn.to_string(max_name_width=3).splitlines()[3].startswith("...")


def test_to_string_escapes_control_characters(known: pd.DataFrame) -> None:
    # Regression: a name holding ESC and BEL reached the terminal as raw bytes.
    odd = known.assign(name=known["name"].cat.rename_categories({"mm": "\x1b[2J\x07mm"}))
    text = odd.recfn.to_string()
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J\\x07mm" in text


def test_human_units() -> None:
    from recfn.analysis.units import format_bytes, format_count, format_ns

    assert [format_ns(v) for v in (812, 12_345, 3_210_000, 1.5e9, float("nan"))] == [
        "812ns",
        "12.345us",
        "3.210ms",
        "1.500s",
        "-",
    ]
    assert [format_bytes(v) for v in (512, -1.5 * 2**20, 3 * 2**30)] == [
        "512 B",
        "-1.50 MiB",
        "3.00 GiB",
    ]
    assert [format_count(v) for v in (950, 12_300, 4e9)] == ["950", "12.30K", "4.00G"]


def test_empty_frame_gives_an_empty_summary(known: pd.DataFrame) -> None:
    empty = known.iloc[:0]
    summary = empty.recfn.summary()
    assert summary.empty and list(summary.columns) == list(STAT_COLUMNS)
    assert summary.index.name == "name"
    assert "Self time total: 0ns" in empty.recfn.to_string()


def test_bad_input(known: pd.DataFrame) -> None:
    with pytest.raises(analysis.MissingColumnsError, match="'kind', 'end_ns'"):
        known.drop(columns=["kind", "end_ns"]).recfn.summary()
    with pytest.raises(AttributeError, match="'flavour'"):
        known.recfn.summary(by="flavour")
    with pytest.raises(ValueError, match="sort_by='speed'"):
        known.recfn.summary(sort_by="speed")
    for column in (["total_ns"], {"a": 1}, 3):
        with pytest.raises(TypeError, match="sort_by must be a column name"):
            known.recfn.summary(sort_by=column)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="group_by_input_shape must be True or False, got 'x'"):
        known.recfn.summary(group_by_input_shape="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="group_by_stack_n must be an int, got 'x'"):
        known.recfn.summary(group_by_stack_n="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="input_shapes"):
        known.recfn.summary(group_by_input_shape=True)


@pytest.mark.parametrize(
    ("top", "error", "match"),
    [
        (-1, ValueError, "top must be >= 0, got -1"),
        ("3", TypeError, "top must be an int or None, got str"),
        (2.0, TypeError, "top must be an int or None, got float"),
        (True, TypeError, "top must be an int or None, got bool"),
    ],
)
def test_top_is_checked_on_every_path(
    known: pd.DataFrame, tmp_path: Path, top: object, error: type[Exception], match: str
) -> None:
    """The frame's summary, a trace's (one native pass) and the out-of-core one over files:
    the same documented error."""
    import recfn
    from recfn.analysis.outofcore.files import summarize_files

    trace = recfn.Trace.from_pandas(known)
    path = tmp_path / "known.parquet"
    trace.save(path)
    calls: list[Callable[[], object]] = [
        lambda: known.recfn.summary(top=top),
        lambda: trace.summary(top=top),
        lambda: summarize_files([str(path)], top=top),
    ]
    for call in calls:
        with pytest.raises(recfn.RecfnError) as raised:
            call()
        assert isinstance(raised.value, error) and match in str(raised.value)


@pytest.mark.parametrize(
    ("by", "error", "match"),
    [
        (5, TypeError, "by must be a column name or a list of them, got 5"),
        (["name", 5], TypeError, "by must be a column name or a list of them"),
        ([], ValueError, "needs at least one column to group by"),
    ],
)
def test_by_is_checked_on_every_path(
    known: pd.DataFrame, tmp_path: Path, by: object, error: type[Exception], match: str
) -> None:
    """The frame's summary, its diff and compare, a trace's summary and the out-of-core one:
    one documented error for a grouping that names no columns."""
    import recfn
    from recfn.analysis.outofcore.files import summarize_files

    trace = recfn.Trace.from_pandas(known)
    path = tmp_path / "known.parquet"
    trace.save(path)
    calls: list[Callable[[], object]] = [
        lambda: known.recfn.summary(by=by),  # type: ignore[arg-type]
        lambda: known.recfn.diff(known, by=by),  # type: ignore[arg-type]
        lambda: recfn.compare(known, known, by=by),  # type: ignore[arg-type]
        lambda: trace.summary(by=by),
        lambda: summarize_files([str(path)], by=by),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(recfn.RecfnError) as raised:
            call()
        assert isinstance(raised.value, error) and match in str(raised.value)


def test_a_grouping_given_as_an_iterator_is_read_once(known: pd.DataFrame) -> None:
    """The trace's summary looks at ``by`` on its way to the one-pass path: an iterator (a
    generator of column names) must reach it whole."""
    import recfn

    trace = recfn.Trace.from_pandas(known)
    expected = trace.summary(by=["name", "thread_name"])
    given = trace.summary(by=(c for c in ["name", "thread_name"]))
    pd.testing.assert_frame_equal(given, expected)


def test_summary_bounded_on_a_million_rows(million: pd.DataFrame) -> None:
    summary = million.recfn.summary()
    ranges = million[million["kind"] == "range"]
    assert summary["count"].sum() == len(ranges)
    assert summary["total_ns"].sum() < (ranges["end_ns"] - ranges["start_ns"]).sum()
    wall = ranges["end_ns"].max() - ranges["start_ns"].min()
    assert summary["total_pct"].tolist() == pytest.approx(
        (100 * summary["total_ns"] / wall).tolist()
    )
    roots = ranges[ranges["parent_id"].isna()]
    assert summary["self_ns"].sum() == (roots["end_ns"] - roots["start_ns"]).sum()


def test_profiler_span_does_not_halve_percentages() -> None:
    # Regression: a torch.profiler trace holds the profiler's own "PyTorch Profiler (0)" span
    # (category "Trace", a track of its own) over the whole capture; counted as work, it
    # doubled the self-time total and halved every percentage.
    rows = [
        (1, None, "ProfilerStep#2", "range", 10, 90, 1),
        (2, 1, "aten::linear", "range", 20, 60, 1),
        (3, None, "PyTorch Profiler (0)", "range", 0, 100, 9),
    ]
    df = make_frame(rows).assign(scope=pd.Categorical(["user_annotation", "cpu_op", "Trace"]))
    summary = df.recfn.summary()
    assert summary.loc["ProfilerStep#2", "self_pct"] == pytest.approx(100 * 40 / 80)
    assert summary.loc["aten::linear", "self_pct"] == pytest.approx(100 * 40 / 80)
    assert summary.drop(index="PyTorch Profiler (0)")["self_pct"].sum() == pytest.approx(100)
    assert summary.loc["PyTorch Profiler (0)", "count"] == 1  # still listed, not hidden
    assert df.recfn.to_string().splitlines()[-1] == "Self time total: 80ns"


def test_gpu_columns_beside_the_cpu_ones(known_gpu: pd.DataFrame) -> None:
    summary = known_gpu.recfn.summary()
    assert list(summary.columns) == [*STAT_COLUMNS, *DEVICE_COLUMNS]
    assert summary.loc["step", list(DEVICE_COLUMNS)].tolist() == [
        2,
        90 + 40,
        (90 - 16 - 45) + (40 - 8),
        65.0,
        "cuda:0, cuda:1",
    ]
    assert summary.loc["bwd", ["device_total_ns", "device_self_ns", "device"]].tolist() == [
        45,
        30,
        "cuda:0",
    ]
    assert summary.loc["mm", ["device_count", "device_total_ns"]].tolist() == [3, 23]
    assert summary.loc["mm", "device_mean_ns"] == pytest.approx(23 / 3)
    by_device = known_gpu.recfn.summary(by="device", as_index=False, sort_by="device")
    assert "device" in by_device.columns and by_device.columns.tolist().count("device") == 1
    # By thread, the GPU time nested in a thread's outermost range counts once.
    by_thread = known_gpu.recfn.summary(by="thread_id", sort_by="thread_id")
    assert by_thread["device_total_ns"].tolist() == [90, 40]
    assert by_thread["device"].tolist() == ["cuda:0", "cuda:1"]
    text = known_gpu.recfn.to_string()
    header = text.splitlines()[1]
    assert "GPU Self" in header and "GPU Total" in header and "Device" in header
    assert "cuda:0, cuda:1" in text
    assert known_gpu.recfn.summary(sort_by="device_self_ns").index[0] == "step"


def test_no_gpu_columns_without_gpu_time(known: pd.DataFrame, known_gpu: pd.DataFrame) -> None:
    assert not set(DEVICE_COLUMNS) & set(known.recfn.summary().columns)
    unrecorded = known_gpu.assign(
        device_start_ns=pd.array([None] * len(known_gpu), "Int64"),
        device_duration_ns=pd.array([None] * len(known_gpu), "Int64"),
    )
    assert not set(DEVICE_COLUMNS) & set(unrecorded.recfn.summary().columns)
    assert "GPU" not in unrecorded.recfn.to_string()
    # A group without any GPU range: zero GPU time, no mean, no device.
    partly = known_gpu.assign(
        device_duration_ns=known_gpu["device_duration_ns"].where(known_gpu["name"] != "fwd")
    )
    fwd = partly.recfn.summary().loc["fwd"]
    assert fwd["device_count"] == 0 and fwd["device_total_ns"] == 0
    assert np.isnan(fwd["device_mean_ns"]) and fwd["device"] == ""
    # The text table says "-" for it (no GPU time), not "0ns" (no time on a GPU).
    row = next(line for line in partly.recfn.to_string().splitlines() if line.startswith("fwd "))
    assert row.split()[-5:] == ["-", "-", "-", "-", "-"]  # GPU Self, Total, Mean, Calls; Device


def test_durations_as_timedelta(known_gpu: pd.DataFrame) -> None:
    summary = known_gpu.recfn.summary(as_timedelta=True, sort_by="self")
    assert summary.index[0] == "step"
    assert summary.loc["step", "total"] == pd.Timedelta(150, unit="ns")
    assert summary.loc["mm", "mean"] == pd.Timedelta(12, unit="ns")  # 35 / 3, rounded
    assert summary.loc["step", "device_self"] == pd.Timedelta(61, unit="ns")
    assert summary["self"].dtype == "timedelta64[ns]"
    assert not [c for c in summary.columns if c.endswith("_ns")]
    assert "total_pct" in summary.columns and "count" in summary.columns
