"""The profiler: what it captures, from where, with which options, and within which bounds."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import recfn
from recfn import RecordScope
from recfn.formats.schema import REQUIRED as BASE_COLUMNS


def rows(table: pa.Table, kind: str = "range") -> list[dict[str, Any]]:
    return [r for r in table.to_pylist() if r["kind"] == kind]


def by_name(table: pa.Table) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in table.to_pylist()}


def test_table_has_the_documented_columns_and_types() -> None:
    with recfn.profile() as prof, recfn.record_function("a"):
        pass
    table = prof.table
    assert tuple(table.column_names) == (*BASE_COLUMNS, "host", "rank")
    schema = table.schema
    assert schema.field("id").type == pa.int64()
    assert schema.field("name").type == pa.dictionary(pa.int32(), pa.string())
    assert schema.field("kind").type == pa.dictionary(pa.int8(), pa.string())
    assert schema.field("depth").type == pa.int32() and schema.field("is_async").type == pa.bool_()
    meta = schema.metadata
    assert meta[b"recfn.schema_version"] == b"1" and meta[b"recfn.dropped_events"] == b"0"
    assert {b"recfn.version", b"recfn.config", b"recfn.host", b"recfn.start_ns"} <= set(meta)


def test_nesting_parents_depth_and_times() -> None:
    with recfn.profile() as prof, recfn.record_function("outer"):
        with recfn.record_function("middle"):
            with recfn.record_function("inner"):
                pass
    r = by_name(prof.table)
    assert r["outer"]["parent_id"] is None and r["outer"]["depth"] == 0
    assert r["middle"]["parent_id"] == r["outer"]["id"] and r["middle"]["depth"] == 1
    assert r["inner"]["parent_id"] == r["middle"]["id"] and r["inner"]["depth"] == 2
    assert r["outer"]["start_ns"] <= r["middle"]["start_ns"] <= r["inner"]["start_ns"]
    assert r["inner"]["end_ns"] <= r["middle"]["end_ns"] <= r["outer"]["end_ns"]
    assert all(
        v["scope"] == "user_scope" and v["kind"] == "range"
        for k, v in r.items()
        if not k.startswith("__")
    )
    assert 0 <= r["outer"]["start_ns"] - int(prof.table.schema.metadata[b"recfn.start_ns"]) < 10**10


def test_start_and_stop_marks_and_user_marks() -> None:
    with recfn.profile() as prof, recfn.record_function("r"):
        recfn.mark("checkpoint")
    table = prof.table
    marks = rows(table, "mark")
    assert [m["name"] for m in marks] == ["__start_profile", "checkpoint", "__stop_profile"]
    checkpoint = marks[1]
    assert checkpoint["end_ns"] == checkpoint["start_ns"]
    assert checkpoint["parent_id"] == by_name(table)["r"]["id"]
    with pytest.raises(TypeError, match="mark name"):
        recfn.mark(3)  # type: ignore[arg-type]


def test_reported_memory_events() -> None:
    with recfn.profile() as prof:
        with recfn.record_function("alloc"):
            recfn.report_memory_usage(1024, device="cuda:0")
        recfn.report_memory_usage(-1024)
    table = prof.table
    memory = rows(table, "memory")
    assert [(m["memory_bytes"], m["device"]) for m in memory] == [(1024, "cuda:0"), (-1024, "cpu")]
    assert memory[0]["parent_id"] == by_name(table)["alloc"]["id"]
    assert rows(table)[0]["memory_bytes"] is None
    with pytest.raises(TypeError, match="nbytes"):
        recfn.report_memory_usage(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="device"):
        recfn.report_memory_usage(1, device="")


def test_profile_memory_attributes_python_allocations_to_innermost_range() -> None:
    assert not tracemalloc.is_tracing()
    with recfn.profile(profile_memory=True) as prof, recfn.record_function("outer"):
        with recfn.record_function("allocating"):
            kept = [bytearray(1000) for _ in range(100)]
    assert not tracemalloc.is_tracing()  # we stop what we started
    table = prof.table
    ids = by_name(table)
    allocated = sum(
        m["memory_bytes"]
        for m in rows(table, "memory")
        if m["parent_id"] == ids["allocating"]["id"]
    )
    assert allocated >= 100_000 and len(kept) == 100


def test_input_shapes_and_dtypes() -> None:
    with recfn.profile(report_input_shapes=True) as prof:
        with recfn.record_function_fast(
            "matmul", [np.ones((2, 3), dtype=np.float32), np.ones((3, 4)), 5]
        ):
            pass
        with recfn.record_function("no-inputs"):
            pass
    r = by_name(prof.table)
    assert r["matmul"]["input_shapes"] == [[2, 3], [3, 4], []]
    assert r["matmul"]["input_dtypes"] == ["float32", "float64", "int"]
    assert r["no-inputs"]["input_shapes"] is None


def test_flops_from_registry() -> None:
    recfn.register_flops("my_op", lambda shapes: 7 * shapes[0][0])
    try:
        with recfn.profile(with_flops=True) as prof:
            with recfn.record_function_fast("matmul", [np.ones((2, 3)), np.ones((3, 4))]):
                pass
            with recfn.record_function_fast("my_op", [np.ones((5,))]):
                pass
            with recfn.record_function("unknown"):
                pass
    finally:
        recfn.unregister_flops("my_op")
    r = by_name(prof.table)
    assert r["matmul"]["flops"] == 2 * 2 * 3 * 4
    assert r["my_op"]["flops"] == 35 and r["unknown"]["flops"] is None
    with pytest.raises(TypeError, match="formula"):
        recfn.register_flops("x", 3)  # type: ignore[arg-type]


def test_stack_has_user_frames_not_recfn() -> None:
    def user_function() -> None:
        with recfn.record_function("with-stack"):
            pass

    with recfn.profile(with_stack=True) as prof:
        user_function()
    stack = by_name(prof.table)["with-stack"]["stack"]
    assert stack and "user_function" in stack[-1]
    assert not any("/recfn/" in frame for frame in stack)


def test_args_column() -> None:
    # keyword_values are inputs: kept when the profiler asks for inputs (report_input_shapes)
    with recfn.profile(report_input_shapes=True) as prof:
        with recfn.record_function("a", args="x=1"):
            pass
        with recfn.record_function_fast("b", keyword_values={"k": 2}):
            pass
    r = by_name(prof.table)
    assert r["a"]["args"] == "x=1" and r["b"]["args"] == "{'k': 2}"


def test_record_scopes_filter() -> None:
    with recfn.profile(record_scopes=[RecordScope.FUNCTION]) as prof:
        with recfn.record_function("user"):
            rf = recfn.RecordFunction(RecordScope.FUNCTION)
            rf.before("function")
            rf.end()
    names = [r["name"] for r in rows(prof.table)]
    assert names == ["function"]


def test_max_events_drops_and_counts() -> None:
    with pytest.warns(RuntimeWarning, match="dropped"), recfn.profile(max_events=10) as prof:
        for _ in range(20):
            with recfn.record_function("r"):
                pass
    table = prof.table
    assert table.num_rows == 10
    dropped = 20 + 2 - 10  # 20 ranges + 2 marks
    assert prof.dropped_events == dropped
    assert table.schema.metadata[b"recfn.dropped_events"] == str(dropped).encode()


@pytest.mark.parametrize(
    "options, error",
    [
        ({"max_events": 0}, ValueError),
        ({"max_events": 1.5}, TypeError),
        ({"report_input_shapes": "yes"}, TypeError),
        ({"record_scopes": []}, ValueError),
        ({"record_scopes": ["bogus"]}, ValueError),
        ({"record_scopes": 3.5}, TypeError),
    ],
)
def test_bad_options(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        recfn.profile(**options)
    assert isinstance(raised.value, recfn.RecfnError)


def test_a_trace_of_files_needs_a_list_of_them() -> None:
    for files in ("t.parquet", 3.5):
        with pytest.raises(TypeError, match="from_files expects a list of file names") as raised:
            recfn.Trace.from_files(files)  # type: ignore[arg-type]
        assert isinstance(raised.value, recfn.RecfnError)


def test_enable_twice_and_disable_when_not_running() -> None:
    with recfn.profile():
        with pytest.raises(RuntimeError, match="profiler is already enabled on this thread"):
            recfn.profile().start()
    with pytest.raises(RuntimeError, match="not enabled"):
        recfn.disable_profiler()
    prof = recfn.profile()
    with pytest.raises(RuntimeError, match="not running"):
        prof.stop()
    with pytest.raises(RuntimeError, match="not been stopped"):
        _ = prof.table


def test_enable_disable_profiler_functions() -> None:
    recfn.enable_profiler(recfn.ProfilerConfig(report_input_shapes=True))
    with recfn.record_function("functional"):
        pass
    prof = recfn.disable_profiler()
    assert "functional" in by_name(prof.table)
    assert "input_shapes" in prof.table.column_names


def test_every_thread_is_captured_including_plain_threads() -> None:
    def work(tag: str) -> None:
        with recfn.record_function(tag):
            pass

    started_before = threading.Event()
    go = threading.Event()

    def early() -> None:
        started_before.set()
        go.wait()
        work("early-thread")

    early_thread = threading.Thread(target=early, name="early")
    early_thread.start()
    started_before.wait()
    with recfn.profile() as prof:
        go.set()
        early_thread.join()
        plain = threading.Thread(target=work, args=("plain-thread",), name="plain")
        plain.start()
        plain.join()
        thread = threading.Thread(target=recfn.propagate(work), args=("propagated",))
        thread.start()
        thread.join()
    r = by_name(prof.table)
    assert {"early-thread", "plain-thread", "propagated"} <= set(r)
    assert r["plain-thread"]["thread_name"] == "plain"
    assert len({r[n]["thread_id"] for n in ("early-thread", "plain-thread", "propagated")}) == 3


def test_eight_threads_fifty_thousand_nested_ranges() -> None:
    threads_n, per_thread = 8, 50_000
    barrier = threading.Barrier(threads_n)

    def work() -> None:
        barrier.wait()
        record_function = recfn.record_function
        for _ in range(per_thread // 5):
            with record_function("l0"), record_function("l1"), record_function("l2"):
                with record_function("l3"):
                    with record_function("l4"):
                        pass

    with recfn.profile() as prof:
        threads = [threading.Thread(target=work) for _ in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    table = prof.table
    kind = table.column("kind").to_numpy(zero_copy_only=False)
    ranges = table.filter(pa.array(kind == "range"))
    assert ranges.num_rows == threads_n * per_thread
    ids = ranges.column("id").to_numpy()
    assert len(np.unique(ids)) == len(ids)
    names = ranges.column("name").to_numpy(zero_copy_only=False)
    depth = ranges.column("depth").to_numpy()
    assert (depth == np.array([int(n[1]) for n in names])).all()
    parent = ranges.column("parent_id").fill_null(0).to_numpy()
    threads = ranges.column("thread_id").to_numpy()
    starts, ends = ranges.column("start_ns").to_numpy(), ranges.column("end_ns").to_numpy()
    roots = depth == 0
    assert (parent[roots] == 0).all() and (parent[~roots] != 0).all()
    order = np.argsort(ids)
    p = order[np.searchsorted(ids[order], parent[~roots])]  # row of every parent, all at once
    assert (ids[p] == parent[~roots]).all()
    assert (depth[p] == depth[~roots] - 1).all() and (threads[p] == threads[~roots]).all()
    assert (starts[p] <= starts[~roots]).all() and (ends[~roots] <= ends[p]).all()
    assert len(set(threads.tolist())) == threads_n


def test_asyncio_tasks_get_per_task_parents() -> None:
    async def task(tag: str) -> None:
        with recfn.record_function(f"{tag}-outer"):
            await asyncio.sleep(0)
            with recfn.record_function(f"{tag}-inner"):
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(task(t) for t in "abc"))

    with recfn.profile() as prof:
        asyncio.run(main())
    r = by_name(prof.table)
    for tag in "abc":
        assert r[f"{tag}-inner"]["parent_id"] == r[f"{tag}-outer"]["id"]


def test_open_range_kept_with_null_end_and_async_ranges_flagged() -> None:
    with recfn.profile() as prof:
        left_open = recfn.record_function("left-open").__enter__()
        moved = recfn.record_function("moved").__enter__()
        thread = threading.Thread(target=moved.end)
        thread.start()
        thread.join()
    r = by_name(prof.table)
    assert r["left-open"]["end_ns"] is None
    assert r["moved"]["is_async"] and r["moved"]["end_ns"] is not None
    left_open.end()


def test_keyboard_interrupt_keeps_events() -> None:
    prof = recfn.profile()
    with pytest.raises(KeyboardInterrupt), prof, recfn.record_function("interrupted"):
        raise KeyboardInterrupt
    r = by_name(prof.table)
    assert r["interrupted"]["end_ns"] is not None


def test_remote_events_merge_with_their_node_and_pid() -> None:
    recfn.set_default_node_id(3)
    try:
        with recfn.profile() as remote, recfn.record_function("remote-work"):
            pass
    finally:
        recfn.set_default_node_id(-1)
    remote_table = remote.table
    remote_table = remote_table.set_column(
        remote_table.schema.get_field_index("pid"), "pid", pa.array([99999] * remote_table.num_rows)
    )
    with recfn.profile() as prof, recfn.record_function("local-work"):
        pass
    prof.add_events(remote_table)
    merged = prof.table
    r = by_name(merged)
    assert r["remote-work"]["node_id"] == 3 and r["remote-work"]["pid"] == 99999
    assert r["local-work"]["node_id"] == -1
    assert len(set(merged.column("id").to_pylist())) == merged.num_rows
    with pytest.raises(TypeError, match="pyarrow.Table"):
        prof.add_events("not a table")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a recfn event table"):
        prof.add_events(pa.table({"x": [1]}))
    with pytest.raises(TypeError, match="node_id"):
        recfn.set_default_node_id("3")  # type: ignore[arg-type]


def test_to_pandas_types() -> None:
    pd = pytest.importorskip("pandas")
    with recfn.profile() as prof, recfn.record_function("a"):
        pass
    df = prof.to_pandas()
    assert isinstance(df["name"].dtype, pd.CategoricalDtype)
    assert df["parent_id"].dtype == "Int64" and df["end_ns"].dtype == "Int64"
    assert hasattr(df, "recfn")


def test_repr() -> None:
    prof = recfn.profile()
    assert "not started" in repr(prof)
    with prof:
        assert "running" in repr(prof)
    assert "events" in repr(prof) and "dropped" in repr(prof)


def test_sampling_prob_records_a_fraction_of_ranges() -> None:
    recfn.set_record_function_seed_for_testing(3)
    with recfn.profile(sampling_prob=0.25) as prof:
        for _ in range(4000):
            with recfn.record_function("sampled"):
                pass
    recorded = len(rows(prof.table))
    assert 800 < recorded < 1200
    assert '"sampling_prob": 0.25' in prof.table.schema.metadata[b"recfn.config"].decode()
    with pytest.raises(ValueError, match="sampling_prob"):
        recfn.profile(sampling_prob=2)


def test_html_repr_after_stop() -> None:
    prof = recfn.profile()
    assert prof._repr_html_() is None
    with prof, recfn.record_function("shown-in-html"):
        pass
    html = prof._repr_html_()
    assert html is not None and "shown-in-html" in html


@contextlib.contextmanager
def another_profiler() -> Iterator[list[recfn.profile]]:
    """A second profiler recording from another thread while the block runs; the list holds it
    once the block has ended."""
    ready, done = threading.Event(), threading.Event()
    other: list[recfn.profile] = []

    def second_profiler() -> None:
        with recfn.profile() as prof:
            ready.set()
            done.wait()
        other.append(prof)

    thread = threading.Thread(target=second_profiler)
    thread.start()
    ready.wait()
    try:
        yield other
    finally:
        done.set()
        thread.join()


def test_two_profilers_at_once_each_get_complete_ranges() -> None:
    with another_profiler() as other:
        with recfn.profile() as first, recfn.record_function("seen-by-both"):
            pass
    for prof in (first, other[0]):
        row = by_name(prof.table)["seen-by-both"]
        assert row["end_ns"] is not None and row["end_ns"] >= row["start_ns"]


@pytest.mark.parametrize("native", [True, False])
def test_two_profilers_at_once_keep_one_buffer_per_thread(native: bool) -> None:
    """Each profiler takes the thread's buffer cache for its own: neither makes a new buffer
    per range (each began with thousands of bytes of rows)."""
    from recfn.capture._recorder import row_store

    kept = row_store.allow_native
    row_store.allow_native = native
    try:
        with another_profiler() as other, recfn.profile() as first:
            for _ in range(50):
                with recfn.record_function("both"):
                    pass
    finally:
        row_store.allow_native = kept
    for prof in (first, other[0]):
        recorder = prof._recorder
        assert recorder is not None
        tids = [buf.tid for buf in recorder.buffers]
        assert len(tids) == len(set(tids))
        assert int(pc.sum(pc.equal(prof.table.column("name"), "both")).as_py()) == 50


def test_profiler_stopped_from_another_thread_frees_this_one() -> None:
    prof = recfn.profile().start()
    thread = threading.Thread(target=prof.stop)
    thread.start()
    thread.join()
    with recfn.profile() as again:  # not "already enabled": the first one is stopped
        with recfn.record_function("after"):
            pass
    assert "after" in by_name(again.table)


def test_an_exception_that_ends_a_profile_is_said_by_its_trace_and_files(tmp_path: Path) -> None:
    with pytest.raises(KeyError), recfn.profile() as prof:
        with recfn.record_function("work"):
            raise KeyError("missing")
    assert prof.trace.error == "KeyError: 'missing'" and prof.trace.interrupted
    prof.save(tmp_path / "t.parquet")
    loaded = recfn.load(tmp_path / "t.parquet")
    assert loaded.interrupted and loaded.error == "KeyError: 'missing'"
    with recfn.profile() as clean:
        pass
    assert clean.trace.error is None and not clean.trace.interrupted
