"""Capture into a Hive-partitioned dataset: many processes side by side, streaming past
``max_events`` with nothing lost, a killed process leaving readable parts."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import workers

import recfn
from recfn.capture._stream import _this_thread_id, spill_rows
from recfn.errors import TraceFormatError
from recfn.formats.dataset import unfinished


def run_workers(method: str, output: Path, n: int, steps: int) -> list[int]:
    context = multiprocessing.get_context(method)
    children = [
        context.Process(target=workers.record, args=(str(output), rank, steps)) for rank in range(n)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    return [int(child.pid or 0) for child in children]


@pytest.mark.parametrize(("method", "n"), [("fork", 2), ("spawn", 2), ("fork", 8)])
def test_processes_record_side_by_side_into_one_dataset(
    tmp_path: Path, method: str, n: int
) -> None:
    output = tmp_path / "traces"
    pids = run_workers(method, output, n, steps=20)
    folders = sorted(p.relative_to(output).as_posix() for p in output.glob("hostname=*/process=*"))
    host = folders[0].split("/")[0]
    assert folders == sorted(f"{host}/process={pid}" for pid in pids)
    trace = recfn.load(output)
    assert len(trace.files) == 2 * n  # each: the empty part it wrote on starting, and its last
    df = trace.to_pandas()
    assert sorted(df["pid"].unique().tolist()) == sorted(pids)
    assert sorted(df["rank"].unique().tolist()) == list(range(n))
    assert not df.duplicated(["host", "pid", "id"]).any()
    assert df["id"].duplicated().any()  # every process numbers its ids alike
    summary = df.recfn.summary()
    assert summary.loc["step", "count"] == 20 * n and summary.loc["worker", "count"] == n
    per_rank = df.recfn.summary(by=["rank", "name"])
    assert (per_rank.xs("step", level="name")["count"] == 20).all()
    ax = df.recfn.timeline()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(set(labels)) == n and all(label.endswith("MainThread (1)") for label in labels)


def test_streaming_records_past_max_events_and_loses_nothing(tmp_path: Path) -> None:
    output = tmp_path / "traces"
    steps = 80_000  # 160,002 events: more than two spills of spill_rows(70_000) rows
    with recfn.profile(output=output, max_events=70_000) as prof:
        with recfn.record_function("outer", args="kept"):
            for _ in range(steps):
                with recfn.record_function("step"), recfn.record_function("inner"):
                    pass
    trace = prof.trace
    assert len(trace.files) >= 3 and trace.dropped_events == 0
    df = trace.to_pandas()
    assert len(df) == 2 * steps + 3  # with the outer range and the start/stop marks
    assert df["id"].is_unique
    summary = df.recfn.summary()
    assert summary.loc["step", "count"] == steps and summary.loc["inner", "count"] == steps
    outer = df[df["name"] == "outer"].iloc[0]
    assert outer["args"] == "kept" and not np.isnan(float(outer["end_ns"]))
    assert (df["end_ns"].notna() | (df["kind"] != "range")).all()
    assert recfn.load(output).summary().equals(trace.summary())
    read_first = recfn.load(output)
    assert read_first.table.num_rows == len(df)
    # the parts' metadata combine the same way whether the files were read or not
    assert read_first.wall_ns == recfn.load(output).wall_ns == trace.wall_ns
    assert read_first.metadata == recfn.load(output).metadata


def test_a_failed_part_write_is_counted_as_dropped_and_capture_goes_on(tmp_path: Path) -> None:
    output = tmp_path / "traces"
    ranges = 0

    def record_until(done: object) -> None:
        nonlocal ranges
        for _ in range(200_000):  # bounded: a spill comes every few tens of thousands of ranges
            with recfn.record_function("step"):
                ranges += 1
            if done():  # type: ignore[operator]
                return
        raise AssertionError("no spill happened")

    warned = pytest.warns(RuntimeWarning, match=r"1 part\(s\) could not be written .*Error")
    with warned, recfn.profile(output=output, max_events=70_000) as prof:
        writer, recorder = prof._writer, prof._recorder
        assert writer is not None and recorder is not None
        folder = Path(writer.folder)
        record_until(lambda: len(writer.files) >= 2)  # a part on disk (after the start's)
        os.rename(folder, folder.with_name("aside"))
        folder.write_text("not a folder")  # the next part cannot be written
        record_until(lambda: writer.errors)
        folder.unlink()
        os.rename(folder.with_name("aside"), folder)
        held = sum(len(rows) for rows in writer._held.values())
        # the event count is what memory holds: the lost rows left it once, not twice
        assert recorder.events == sum(buf.rows for buf in recorder.buffers) + held
        lost = int(recorder.dropped)
        assert lost > 0
        record_until(lambda: len(writer.files) >= 3)  # writing works again
    trace = prof.trace
    assert trace.dropped_events == lost
    steps = int((trace.to_pandas()["name"] == "step").sum())
    assert steps + lost == ranges  # every range is either in the dataset or counted as lost


def test_a_killed_process_leaves_readable_parts_and_a_record_of_its_loss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from recfn.cli import main

    output = tmp_path / "traces"
    (survivor,) = run_workers("fork", output, 1, steps=20)
    context = multiprocessing.get_context("fork")
    written = context.Event()
    child = context.Process(target=workers.record_until_killed, args=(str(output), written))
    child.start()
    try:
        assert written.wait(120)
    finally:
        os.kill(int(child.pid or 0), signal.SIGKILL)
        child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert not list(output.rglob(".*"))  # no half-written part is left behind
    trace = recfn.load(output)
    killed = [p for p in output.glob("hostname=*/process=*") if p.name != f"process={survivor}"]
    assert unfinished(trace.files) == [str(killed[0])]
    assert trace.dropped_events == 0  # nothing was dropped: the loss is the unwritten tail
    df = trace.to_pandas()
    steps = df[(df["name"] == "step") & (df["pid"] != survivor)]
    # at least one whole part: the buffer's rows but the open "forever"
    assert len(steps) >= spill_rows(70_000) - 1 and steps["end_ns"].notna().all()
    ids = np.sort(steps["id"].to_numpy())
    assert (np.diff(ids) == 1).all()  # every step up to the last part's end, none missing
    assert "forever" not in set(df["name"])  # still open when killed: not yet written
    assert main(["summary", str(output)]) == 0
    out = capsys.readouterr().out
    assert f"{killed[0]}: this process never stopped its profile" in out
    assert f"process={survivor}:" not in out


def steps_written(trace: recfn.Trace) -> int:
    return int((trace.to_pandas()["name"] == "step").sum())


def record_steps(n: int) -> None:
    for _ in range(n):
        with recfn.record_function("step"):
            pass


def take_by(by: str, prof: recfn.profile) -> None:
    """A take of this thread's rows, as ``by`` makes one: a flush, a spill or ``stop()``'s."""
    writer = prof._writer
    assert writer is not None
    if by == "flush":
        writer.flush()
    elif by == "spill":
        writer.spill(prof._recorder.thread_buffers[_this_thread_id()])
    else:
        writer.finish(1)


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """Python's own SIGINT handler (a KeyboardInterrupt) for the test, whatever an earlier test
    in this process left there."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def steps_until_ctrl_c(
    tmp_path: Path, *, flush_interval: float, bound: int
) -> tuple[recfn.Trace, int]:
    """Ranges recorded into a dataset (a part every 20,000 or so) until a KeyboardInterrupt,
    which must come before ``bound`` of them: the trace and how many ranges were entered."""
    ranges = 0
    with (
        pytest.raises(KeyboardInterrupt),
        recfn.profile(output=tmp_path, max_events=40_000, flush_interval=flush_interval) as prof,
    ):
        for _ in range(bound):
            with recfn.record_function("step"):
                ranges += 1
    left = recfn.current_range()
    if left is not None:  # the pure build's one window: the Ctrl-C as `__exit__` was entered
        assert not recfn.COMPILED and left.name == "step"
        left.__exit__(None, None, None)  # as Python would have, had it called it again
    return prof.trace, ranges


def assert_nothing_lost(trace: recfn.Trace, ranges: int) -> None:
    """Every range whose body ran is written, ended. In the interpreted build the
    KeyboardInterrupt can also land in the range being entered or left, between its row and
    its body or between its body and its end: that one range is written too, open or ended,
    whether or not its body counted it."""
    assert trace.dropped_events == 0 and trace.error == "KeyboardInterrupt"
    steps = trace.to_pandas().query("name == 'step'")
    still_open = int(steps["end_ns"].isna().sum())
    if recfn.COMPILED:
        assert still_open == 0 and len(steps) == ranges
    else:
        assert still_open <= 1 and ranges <= len(steps) <= ranges + 1


@pytest.mark.parametrize("by", ["flush", "spill"])
def test_a_ctrl_c_raised_as_taken_rows_go_to_be_written_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by: str
) -> None:
    """A Ctrl-C that came while a thread's rows were being taken is raised at the next call
    into Python, which can be the write's first (here: the part's save, before it guards
    anything): the taken rows are with the unsaved ones by then, and go with a later part."""
    raised: list[str] = []
    with recfn.profile(output=tmp_path, max_events=40_000) as prof:
        writer = prof._writer
        assert writer is not None
        record_steps(5_000)
        save = writer._save

        def interrupted_save(*args: object) -> None:
            if not raised:
                raised.append(by)
                raise KeyboardInterrupt
            save(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(writer, "_save", interrupted_save)
        with pytest.raises(KeyboardInterrupt):
            take_by(by, prof)
        record_steps(100)
    assert raised == [by]
    assert prof.trace.dropped_events == 0
    assert steps_written(prof.trace) == 5_100


@pytest.mark.parametrize("by", ["flush", "spill", "stop"])
def test_a_ctrl_c_raised_as_a_take_hands_its_rows_over_loses_nothing(
    tmp_path: Path, by: str
) -> None:
    """A Ctrl-C raised at the last moment of a take, as its table reaches the unsaved ones:
    the rows go with a later part, and leave the event count once."""
    raised: list[str] = []

    class InterruptedOnce(list):  # type: ignore[type-arg]
        def append(self, table: object) -> None:
            super().append(table)
            if not raised:
                raised.append(by)
                raise KeyboardInterrupt

    with recfn.profile(output=tmp_path, max_events=40_000) as prof:
        writer = prof._writer
        assert writer is not None
        record_steps(5_000)
        events = int(prof._recorder.events)
        writer._unsaved = InterruptedOnce()
        with pytest.raises(KeyboardInterrupt):
            take_by(by, prof)
        assert events - int(prof._recorder.events) == sum(t.num_rows for t in writer._unsaved)
        record_steps(100)
    assert raised == [by]
    assert prof.trace.dropped_events == 0
    assert steps_written(prof.trace) == 5_100


def sigint_in_a_part_write(
    monkeypatch: pytest.MonkeyPatch, on_this_thread: Callable[[], bool], send: Callable[[], None]
) -> list[object]:
    """Parquet writes patched so that the first part of steps written where ``on_this_thread()``
    holds ``send``s a SIGINT just before its write; the list gets that part's path."""
    from recfn.formats import io

    write_parquet = io.write_parquet
    interrupted: list[object] = []

    def interrupted_write(table: object, path: object) -> None:
        if on_this_thread() and not interrupted and getattr(table, "num_rows", 0) > 1:
            interrupted.append(path)
            send()
        write_parquet(table, path)  # type: ignore[arg-type]

    monkeypatch.setattr(io, "write_parquet", interrupted_write)
    return interrupted


def test_ctrl_c_during_a_part_write_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, default_sigint: None
) -> None:
    """Ctrl-C (a real SIGINT) while a part is being written: the part is written with the
    next one, here at stop(); no event is lost and none is counted as dropped."""
    # a real SIGINT, handled at once on this (the main) thread: KeyboardInterrupt before the write
    interrupted = sigint_in_a_part_write(
        monkeypatch,
        lambda: threading.current_thread() is threading.main_thread(),
        lambda: signal.raise_signal(signal.SIGINT),
    )
    # no part on time: on a slow machine the flusher's thread would write the first one
    trace, ranges = steps_until_ctrl_c(tmp_path, flush_interval=3600, bound=200_000)
    assert interrupted
    assert_nothing_lost(trace, ranges)


def test_ctrl_c_while_the_flusher_writes_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, default_sigint: None
) -> None:
    """Ctrl-C while the flusher's thread writes a part: the KeyboardInterrupt reaches the main
    thread wherever it is, here taking its own buffer's rows into a table; those rows go with
    a later part (they were counted as dropped: 24-28k of them)."""
    interrupted = sigint_in_a_part_write(  # handled by the main thread, later
        monkeypatch,
        lambda: threading.current_thread().name == "recfn-flush",
        lambda: os.kill(os.getpid(), signal.SIGINT),
    )
    trace, ranges = steps_until_ctrl_c(tmp_path, flush_interval=0.001, bound=400_000)
    assert interrupted
    assert_nothing_lost(trace, ranges)


def test_ctrl_c_while_rows_become_a_part_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, default_sigint: None
) -> None:
    """Ctrl-C while a thread's taken rows are made into a table (its buffer already cleared):
    the table is made again and written with the next part."""
    from recfn.capture import _stream

    make_table = _stream.BufferTaker._table
    interrupted = []

    def interrupted_table(self: object, snapshot: object, wall_ns: int) -> object:
        table = make_table(self, snapshot, wall_ns)  # type: ignore[arg-type]
        if not interrupted and table.num_rows > 1:  # a part of steps
            interrupted.append(True)
            signal.raise_signal(signal.SIGINT)  # KeyboardInterrupt while making it
        return table

    monkeypatch.setattr(_stream.BufferTaker, "_table", interrupted_table)
    trace, ranges = steps_until_ctrl_c(tmp_path, flush_interval=3600, bound=200_000)
    assert interrupted
    assert_nothing_lost(trace, ranges)


@pytest.mark.parametrize("max_events", [20_000, 2_000])
def test_busy_threads_write_rather_than_drop(tmp_path: Path, max_events: int) -> None:
    """Several threads recording at once share ``max_events``: they write parts before their
    unwritten events together reach it, and write every buffer out rather than drop."""
    threads, each = 4, 25_000

    with recfn.profile(output=tmp_path, max_events=max_events) as prof:
        workers = [threading.Thread(target=record_steps, args=(each,)) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    trace = prof.trace
    assert trace.dropped_events == 0
    assert steps_written(trace) == threads * each


def test_an_idle_thread_is_written_on_time(tmp_path: Path) -> None:
    """Parts are written every ``flush_interval`` seconds, an idle thread's events included
    (its buffer is read as it goes on): a process killed then loses at most that much."""
    recorded, release = threading.Event(), threading.Event()

    def idle() -> None:
        with recfn.record_function("idle_outer"):
            with recfn.record_function("step"):
                pass
            recorded.set()
            release.wait(120)

    output = tmp_path / "traces"
    with recfn.profile(output=output, flush_interval=0.05) as prof:
        writer = prof._writer
        assert writer is not None
        thread = threading.Thread(target=idle)
        thread.start()
        assert recorded.wait(120)
        for _ in range(2400):  # bounded: the flush runs every 0.05 s
            if any(
                "step" in pq.read_table(f, columns=["name"]).column("name").to_pylist()
                for f in list(writer.files)
            ):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the idle thread's step was never written")
        release.set()
        thread.join()
    df = prof.trace.to_pandas()  # each event once: the idle thread's written ones not again
    assert (df["name"] == "step").sum() == 1 and (df["name"] == "idle_outer").sum() == 1
    assert df["id"].is_unique


def test_two_profiles_into_one_folder_keep_each_others_parts(tmp_path: Path) -> None:
    """Two streaming profiles of one process writing into one folder at the same time (each
    on its own thread) never overwrite each other's parts; the folder then holds the same
    events twice, which loading refuses, naming the files."""
    started, done = threading.Barrier(2), threading.Barrier(2)
    profiles: list[recfn.profile] = []

    def capture() -> None:
        with recfn.profile(output=tmp_path, max_events=40_000) as prof:
            profiles.append(prof)
            started.wait(120)
            for _ in range(30_000):
                with recfn.record_function("step"):
                    pass
            done.wait(120)

    threads = [threading.Thread(target=capture) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first, second = (set(p.trace.files) for p in profiles)
    assert not first & second
    assert all(os.path.exists(f) for f in first | second)
    for prof in profiles:  # each capture whole: both threads' steps
        assert steps_written(recfn.load(sorted(prof.trace.files))) == 60_000
    with pytest.raises(TraceFormatError, match="ids repeat across the files of one process"):
        _ = recfn.load(tmp_path).table


def test_a_last_part_that_cannot_be_written_is_counted_not_raised(tmp_path: Path) -> None:
    output = tmp_path / "traces"
    prof = recfn.profile(output=output)
    prof.start()
    for _ in range(100):
        with recfn.record_function("step"):
            pass
    writer = prof._writer
    assert writer is not None
    shutil.rmtree(writer.folder)
    Path(writer.folder).write_text("not a folder")  # the last part cannot be written
    with pytest.warns(RuntimeWarning, match=r"could not be written"):
        trace = prof.stop()
    assert trace.dropped_events == 101  # the steps and the stop mark (the start's part is gone)
    assert trace.events == 0 and "101 dropped" in repr(trace)


def traced_call() -> None:
    with recfn.record_function("child"):
        pass


@pytest.mark.parametrize("trace_calls", [False, True])
def test_a_range_left_open_by_an_earlier_profile_is_no_parent(
    tmp_path: Path, trace_calls: bool
) -> None:
    """A range opened while one profile recorded, still open when the next one starts, is
    not a row of the next capture: its children there are roots (their depth kept; the call
    tracer nests them among its calls), in memory (the engine's fast path, or the tracer's
    rows) and streamed."""
    first = recfn.profile()
    first.start()
    left_open = recfn.record_function("left_open")
    left_open.__enter__()
    first.stop()
    try:
        with recfn.profile(output=tmp_path / "streamed", trace_calls=trace_calls) as streamed:
            traced_call()
        with recfn.profile(trace_calls=trace_calls) as in_memory:
            traced_call()
    finally:
        left_open.__exit__(None, None, None)
    for prof in (streamed, in_memory):
        df = prof.to_pandas()
        assert "left_open" not in set(df["name"])
        child = df[df["name"] == "child"].iloc[0]
        assert pd.isna(child["parent_id"]) or child["parent_id"] in set(df["id"])
        if not trace_calls:  # a root under left_open, which is not in this capture
            assert pd.isna(child["parent_id"]) and child["depth"] == 1
        prof.save(tmp_path / "saved.parquet", overwrite=True)  # a whole trace: no dangling parent


def test_every_part_has_every_column_so_other_readers_see_them_all(tmp_path: Path) -> None:
    """One process records memory events and shapes, another neither: pandas,
    pyarrow.dataset, DuckDB, polars and Dask read every column of the dataset, with recfn's
    counts."""
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds

    output = tmp_path / "traces"
    context = multiprocessing.get_context("spawn")
    plain = context.Process(target=workers.record, args=(str(output), 0, 10))
    plain.start()
    plain.join(120)
    assert plain.exitcode == 0
    with recfn.profile(output=output, report_input_shapes=True):
        for _ in range(5):
            with recfn.record_function("step", args="a"):
                recfn.report_memory_usage(64)
    expected = recfn.load(output).to_pandas()
    memory = int(expected["memory_bytes"].notna().sum())
    assert memory == 5 and len(expected) > memory
    files = sorted(str(p) for p in output.rglob("part-*.parquet"))
    names = {tuple(pq.read_schema(f).names) for f in files}
    assert len(names) == 1  # one schema for all
    table = ds.dataset(output, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == len(expected)
    assert table.column("memory_bytes").drop_null().to_pylist() == [64] * memory
    frame = pd.read_parquet(output)
    assert len(frame) == len(expected) and int(frame["memory_bytes"].notna().sum()) == memory
    glob = str(output / "**" / "*.parquet")
    query = f"select count(*), count(memory_bytes), count(args) from '{glob}'"
    assert duckdb.sql(query).fetchall() == [(len(expected), memory, 5)]
    lazy = pl.scan_parquet(glob, hive_partitioning=False)
    counts = lazy.select(pl.len(), pl.col("memory_bytes").count()).collect().row(0)
    assert counts == (len(expected), memory)
    dd = pytest.importorskip("dask.dataframe")
    dask_frame = dd.read_parquet(str(output), dtype_backend="numpy_nullable").compute()
    assert len(dask_frame) == len(expected)
    assert int(dask_frame["memory_bytes"].notna().sum()) == memory


def blocked_signals(native_id: int) -> set[int]:
    """The signals a thread of this process blocks (its mask in /proc)."""
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    mask = int(
        next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk")), 16
    )
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread masks in /proc")
def test_the_flush_thread_leaves_the_process_signals_to_the_main_thread(tmp_path: Path) -> None:
    """A signal sent to the process goes to a thread that does not block it; one the flush
    thread took would wake no handler while the main thread waits (a pool worker waiting for
    work when the pool's SIGTERM comes never ended). The flush thread blocks all but faults."""
    with recfn.profile(output=tmp_path, flush_interval=60) as prof:
        writer = prof._writer
        assert writer is not None and writer._flusher is not None
        thread = writer._flusher.thread
        for _ in range(200):  # the thread blocks them as it starts
            if thread.native_id is not None and signal.SIGTERM in blocked_signals(thread.native_id):
                break
            time.sleep(0.05)
        assert thread.native_id is not None
        blocked = blocked_signals(thread.native_id)
        assert {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1} <= blocked
        assert signal.SIGSEGV not in blocked and signal.SIGBUS not in blocked
        assert signal.SIGTERM not in blocked_signals(threading.get_native_id())
