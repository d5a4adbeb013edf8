"""The out-of-core summary's native one pass (``recfn/native/_csummary.c``) gives the numpy
path's numbers, and the in-memory summary's, on processes as a capture saves them (a block of
rows per thread): random forests with recursion, overlapping children, open ranges, marks,
profiler spans and parents in other threads; and hands every other order to the numpy path."""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fleetdata import same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recfn
from recfn.analysis.outofcore import files as outofcore
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.errors import TraceFormatError
from recfn.native import extension

NAMES = ["step", "forward", "mm", "copy"]


@st.composite
def recorded(draw: st.DrawFn) -> pd.DataFrame:
    """A process's rows as a capture saves them: a block of rows per thread, starts in order,
    ids counting up from the thread's own base, or, where calls were traced, two id sequences
    interleaved (the thread's ranges and its traced calls, merged by start); parents earlier in
    the same block mostly, now and then in an earlier block (which the pass hands to the numpy
    path when that parent is a closed range and the block starts before it ends). A thread may
    start after the one before ends: one block for the pass, as a process's threads that never
    overlap."""
    threads = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1 if t == 0 else 0, 30)) for t in range(threads)]
    n = sum(sizes)
    frame = make_synthetic_trace(n, n_threads=1, seed=0)
    ids: list[int] = []
    start, end, parent, kind, scope, name, flops = [], [], [], [], [], [], []
    for thread, size in enumerate(sizes):
        base = draw(st.sampled_from([0, 1, 2**40])) + (thread << 32)
        sequences = [base, base + 2**20]  # ranges, traced calls
        traced = draw(st.booleans())
        at = 1_000_000 + draw(st.integers(0, 50)) + draw(st.sampled_from([0, 0, 500]))
        first_row = len(ids)
        for row in range(size):
            at += draw(st.integers(0, 5))
            where = draw(st.sampled_from(["same", "same", "same", "none", "earlier thread"]))
            if where == "same" and row:
                up: int | None = ids[first_row + draw(st.integers(0, row - 1))]
            elif where == "earlier thread" and first_row:
                up = ids[draw(st.integers(0, first_row - 1))]
            else:
                up = None
            shape = draw(st.sampled_from(["closed", "closed", "closed", "open", "mark"]))
            sequence = draw(st.integers(0, 1)) if traced else 0
            ids.append(sequences[sequence])
            sequences[sequence] += 1
            start.append(at)
            end.append(None if shape == "open" else at + draw(st.integers(0, 40)))
            parent.append(up)
            kind.append("mark" if shape == "mark" else "range")
            scope.append(draw(st.sampled_from(["function", "user_scope", "Trace"])))
            name.append(draw(st.sampled_from(NAMES)))
            flops.append(draw(st.integers(0, 1000)))
    frame["id"] = np.array(ids, dtype=np.int64)
    frame["parent_id"] = pd.array(parent, dtype="Int64")
    frame["start_ns"] = np.array(start, dtype=np.int64)
    frame["end_ns"] = pd.array(end, dtype="Int64")
    frame["kind"] = pd.Categorical(kind)
    frame["scope"] = pd.Categorical(scope)
    frame["name"] = pd.Categorical(name)
    frame["pid"] = 7
    frame["flops"] = np.array(flops, dtype=np.int64)
    return frame


def numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outofcore, "_one_pass", lambda *args, **kwargs: None)


@pytest.mark.skipif(extension("_csummary") is None, reason="pure build: the numpy path only")
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(frame=recorded())
def test_the_one_pass_gives_the_numpy_paths_and_the_in_memory_numbers(
    tmp_path: Path, frame: pd.DataFrame
) -> None:
    path = tmp_path / "one.parquet"
    recfn.Trace.from_pandas(frame).save(path)
    files = [str(path)]
    df = recfn.load(path, as_pandas=True)
    for by in ("name", ["scope", "name"]):
        with pytest.MonkeyPatch.context() as patch:
            numpy_path(patch)
            by_numpy = outofcore.summarize_files(files, by=by)
            stats_by_numpy = outofcore.run_stats(
                files, [by] if isinstance(by, str) else by, keep_calls=True
            )
            lean_by_numpy = outofcore.run_stats(files, [by] if isinstance(by, str) else by)
        native = outofcore.summarize_files(files, by=by)
        same(native, by_numpy)
        same(native, df.recfn.summary(by=by))
        for key in ("self_total_ns", "wall_ns", "events"):
            assert native.attrs[key] == by_numpy.attrs[key]
        stats = outofcore.run_stats(files, [by] if isinstance(by, str) else by, keep_calls=True)
        pd.testing.assert_frame_equal(stats.table, stats_by_numpy.table)
        # without the calls kept, the order statistics come from a selection, not a sort
        lean = outofcore.run_stats(files, [by] if isinstance(by, str) else by)
        pd.testing.assert_frame_equal(lean.table, stats.table)
        pd.testing.assert_frame_equal(lean_by_numpy.table, stats.table)
        assert stats.workload_ns == stats_by_numpy.workload_ns
        assert stats.calls is not None and stats_by_numpy.calls is not None
        assert stats.calls.keys() == stats_by_numpy.calls.keys()
        for group, calls in stats.calls.items():
            np.testing.assert_array_equal(calls.durations, stats_by_numpy.calls[group].durations)
            np.testing.assert_array_equal(calls.self_times, stats_by_numpy.calls[group].self_times)


@contextlib.contextmanager
def passes_taken() -> Iterator[list[bool]]:
    """For each process summarised inside, whether the native pass took it."""
    taken: list[bool] = []
    one_pass = outofcore._one_pass

    def watched(*args: object, **kwargs: object) -> object:
        found = one_pass(*args, **kwargs)  # type: ignore[arg-type]
        taken.append(found is not None)
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(outofcore, "_one_pass", watched)
        yield taken


@pytest.mark.skipif(extension("_csummary") is None, reason="pure build: the numpy path only")
def test_the_one_pass_takes_recorded_rows_and_hands_others_back(tmp_path: Path) -> None:
    frame = make_synthetic_trace(3000, n_threads=3, seed=4, max_depth=12)
    path = tmp_path / "one.parquet"
    recfn.Trace.from_pandas(frame).save(path)
    with passes_taken() as taken:
        same(outofcore.summarize_files([str(path)]), frame.recfn.summary())
        shuffled = tmp_path / "shuffled.parquet"
        recfn.Trace.from_pandas(frame.sample(frac=1, random_state=1)).save(shuffled)
        same(outofcore.summarize_files([str(shuffled)]), frame.recfn.summary())
    assert taken == [True, False]


def traced(module_name: str, body: str, n: int) -> recfn.Trace:
    """A trace of ``n`` ranges with calls traced in them: a module ``module_name`` (outside
    recfn, so followed) runs ``body`` (which may call ``leaf``) inside a range for each ``j``."""
    module = types.ModuleType(module_name)
    lines = "".join(f"            {line}\n" for line in body.splitlines())
    exec(
        "import recfn\n"
        "def leaf(x):\n    return x\n\n"
        "def work(n):\n"
        "    for j in range(n):\n"
        "        with recfn.record_function('block'):\n" + lines,
        vars(module),
    )
    with recfn.profile(trace_calls=True, trace_include=[module_name]) as prof:
        module.work(n)
    return prof.trace


@pytest.mark.skipif(extension("_csummary") is None, reason="pure build: the numpy path only")
def test_a_thread_with_traced_calls_takes_the_one_pass() -> None:
    """A thread's ranges and its traced calls, merged by start, are two interleaved id
    sequences in one block: the pass takes them (a closed range's children among them)."""
    trace = traced("summary_pass_target", "for i in range(j % 4):\n    leaf(i)", 200)
    ids = trace.table.column("id").to_numpy()
    assert (np.diff(ids) != 1).sum() > 100  # the two sequences interleave
    with passes_taken() as taken:
        native = outofcore.summarize_table(trace.table)
    assert taken == [True]
    same(native, trace.to_pandas().recfn.summary())
    assert native.loc["summary_pass_target::leaf", "count"] == sum(j % 4 for j in range(200))


@pytest.mark.skipif(extension("_csummary") is None, reason="pure build: the numpy path only")
def test_id_runs_taking_turns_at_every_call_go_to_the_numpy_path() -> None:
    """A range around every traced call: the two id runs take turns at every row, a segment
    each, which the pass would keep sorted at a quadratic cost; it hands them to the numpy
    path early, with the same numbers."""
    trace = traced("summary_turns_target", "leaf(j)", 8000)
    with passes_taken() as taken:
        found = outofcore.summarize_table(trace.table)
    assert taken == [False]
    same(found, trace.to_pandas().recfn.summary())
    assert found.loc["summary_turns_target::leaf", "count"] == 8000


def long_lived(n_long: int, n_short: int, seed: int) -> pd.DataFrame:
    """``n_long`` overlapping ranges open across all the rows after them, then ``n_short``
    short ranges in start order whose parents are long ranges, recent short ones or none:
    thousands of rows between a parent and its child, as a long step's or an asyncio task's."""
    rng = np.random.default_rng(seed)
    n = n_long + n_short
    frame = make_synthetic_trace(n, n_threads=1, seed=0)
    start = np.concatenate([np.arange(n_long), n_long + np.arange(n_short) * 10])
    end = np.concatenate(
        [
            start[-1] + 1_000 + rng.integers(0, 10_000, n_long),
            start[n_long:] + rng.integers(0, 25, n_short),
        ]
    )
    parent = np.full(n, -1)
    pick = rng.random(n_short)
    parent[n_long:] = np.where(pick < 0.5, rng.integers(0, n_long, n_short), -1)
    recent = np.arange(n_long, n) - 1 - rng.integers(0, 3, n_short)
    parent[n_long:] = np.where((pick > 0.8) & (recent >= n_long), recent, parent[n_long:])
    frame["id"] = np.arange(n, dtype=np.int64)
    frame["parent_id"] = pd.array(np.where(parent >= 0, parent, 0), dtype="Int64")
    frame.loc[parent < 0, "parent_id"] = pd.NA
    frame["start_ns"] = start.astype(np.int64)
    frame["end_ns"] = pd.array(end.astype(np.int64), dtype="Int64")
    frame["kind"] = pd.Categorical(["range"] * n)
    frame["scope"] = pd.Categorical(["user_scope"] * n)
    frame["name"] = pd.Categorical(rng.choice(NAMES, n))
    return frame


@pytest.mark.skipif(extension("_csummary") is None, reason="pure build: the numpy path only")
def test_ranges_open_across_thousands_of_rows_give_the_numpy_paths_numbers(
    tmp_path: Path,
) -> None:
    frame = long_lived(3_000, 20_000, seed=11)
    path = tmp_path / "long.parquet"
    recfn.Trace.from_pandas(frame).save(path)
    files = [str(path)]
    with passes_taken() as taken:
        native = outofcore.summarize_files(files)
        stats = outofcore.run_stats(files, ["name"])
    assert taken == [True, True]
    with pytest.MonkeyPatch.context() as patch:
        numpy_path(patch)
        same(native, outofcore.summarize_files(files))
        pd.testing.assert_frame_equal(stats.table, outofcore.run_stats(files, ["name"]).table)
    same(native, frame.recfn.summary())


@pytest.mark.parametrize("fault", ["ends before it starts", "dangling parent"])
def test_broken_rows_are_refused_by_both_paths(tmp_path: Path, fault: str) -> None:
    frame = make_synthetic_trace(200, n_threads=2, seed=5)
    if fault == "ends before it starts":
        frame.loc[50, "end_ns"] = frame.loc[50, "start_ns"] - 1
        message = "ends before it starts"
    else:
        frame.loc[50, "parent_id"] = 10_000
        message = "parent_id 10000 is not the id of any row"
    path = tmp_path / "broken.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)  # not validated
    with pytest.raises(TraceFormatError, match=message):
        outofcore.summarize_files([str(path)])
    with pytest.MonkeyPatch.context() as patch:
        numpy_path(patch)
        with pytest.raises(TraceFormatError, match=message):
            outofcore.summarize_files([str(path)])


def captured(tmp_path: Path) -> Path:
    """A real capture of three threads' ranges, saved: a block of rows per thread, each
    thread's ids counting up from its own base."""

    def work(k: int) -> None:
        for _ in range(300):
            with recfn.record_function(f"outer{k % 2}"):
                with recfn.record_function("inner"):
                    pass

    with recfn.profile() as trace:
        workers = [threading.Thread(target=work, args=(k,)) for k in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    path = tmp_path / "capture.parquet"
    trace.save(path)
    return path


@pytest.mark.skipif(extension("_csummary") is None, reason="pure build: the numpy path only")
def test_a_capture_of_threads_takes_the_pass(tmp_path: Path) -> None:
    path = captured(tmp_path)
    with passes_taken() as taken:
        got = outofcore.summarize_files([str(path)])
    same(got, recfn.load(path, as_pandas=True).recfn.summary())
    assert taken == [True]


def deep_chains(chains: int, names: int, seed: int) -> pd.DataFrame:
    """``chains`` stacks of nested ranges, each up to 40 deep, named from ``names`` names with
    repeats along a stack (recursion): the pass's hashed sets of ancestors' groups fill up, so
    that most lookups are checked by walking up."""
    rng = np.random.default_rng(seed)
    depths = rng.integers(1, 41, chains)
    n = int(depths.sum())
    start, end, parent = np.empty(n, np.int64), np.empty(n, np.int64), np.full(n, -1)
    at, base = 0, 1_000
    for depth in depths:
        for k in range(depth):
            start[at + k], end[at + k] = base + k, base + 2 * depth - k
            parent[at + k] = at + k - 1 if k else -1
        at += depth
        base += 2 * depth + 1
    frame = make_synthetic_trace(n, n_threads=1, seed=0)
    frame["id"] = np.arange(n, dtype=np.int64)
    frame["parent_id"] = pd.array(np.where(parent >= 0, parent, 0), dtype="Int64")
    frame.loc[parent < 0, "parent_id"] = pd.NA
    frame["start_ns"] = start
    frame["end_ns"] = pd.array(end, dtype="Int64")
    frame["kind"] = pd.Categorical(["range"] * n)
    frame["scope"] = pd.Categorical(["user_scope"] * n)
    frame["name"] = pd.Categorical([f"f{i}" for i in rng.integers(0, names, n)])
    return frame


@pytest.mark.skipif(extension("_csummary") is None, reason="pure build: the numpy path only")
def test_deep_stacks_of_many_names_give_the_numpy_paths_numbers(tmp_path: Path) -> None:
    frame = deep_chains(300, names=60, seed=3)
    path = tmp_path / "deep.parquet"
    recfn.Trace.from_pandas(frame).save(path)
    with passes_taken() as taken:
        native = outofcore.summarize_files([str(path)])
    assert taken == [True]
    with pytest.MonkeyPatch.context() as patch:
        numpy_path(patch)
        same(native, outofcore.summarize_files([str(path)]))
    same(native, frame.recfn.summary())
    durations = (frame["end_ns"] - frame["start_ns"]).groupby(frame["name"], observed=True).sum()
    assert (native["total_ns"] < durations.reindex(native.index)).any()  # recursion was met


@pytest.mark.skipif(extension("_csummary") is None, reason="pure build: the numpy path only")
def test_more_groups_than_the_row_state_holds_go_to_the_numpy_path() -> None:
    native = extension("_csummary")
    assert native is not None
    one = np.ones(1, np.int64)
    flags = np.ones(1, np.uint8)
    for groups, expected in (
        (native.MAX_GROUPS + 1, native.NOT_RECORDED),
        (native.MAX_GROUPS, native.OK),
    ):
        status = native.Pass(1, True, False).add(
            one, one, np.zeros(1, np.uint8), one, one + 1, None, flags, flags * 0,
            np.zeros(1, np.int32), groups,
        )  # fmt: skip
        assert status == expected
