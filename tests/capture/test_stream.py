"""Capture into a Hive-partitioned dataset: many processes side by side, streaming past
``max_events`` with nothing lost, a killed process leaving readable parts."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import workers

import recfn
from recfn.capture._stream import spill_rows
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


@pytest.mark.parametrize(("method", "n"), [("fork", 2), ("spawn", 2), ("fork", 8), ("spawn", 8)])
def test_processes_record_side_by_side_into_one_dataset(
    tmp_path: Path, method: str, n: int
) -> None:
    output = tmp_path / "traces"
    pids = run_workers(method, output, n, steps=20)
    folders = sorted(p.relative_to(output).as_posix() for p in output.glob("hostname=*/process=*"))
    host = folders[0].split("/")[0]
    assert folders == sorted(f"{host}/process={pid}" for pid in pids)
    trace = recfn.load(output)
    assert len(trace.files) == n
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
        record_until(lambda: writer.files)  # one part on disk
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
        record_until(lambda: len(writer.files) >= 2)  # writing works again
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
