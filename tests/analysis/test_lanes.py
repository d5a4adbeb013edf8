"""Timeline lanes of a fleet: one per (host, pid, thread), a host's lanes together and labelled
with the host when there are several, in the static timeline and the widget's lanes alike."""

from __future__ import annotations

import threading

import matplotlib
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import recfn
from recfn.analysis.plots.timeline import HOST_SEPARATOR
from recfn.notebook_ext.widget.lod import TimelineIndex

matplotlib.use("Agg")


def capture() -> pa.Table:
    """A main thread and a worker thread, a range each."""

    def work() -> None:
        with recfn.record_function("work"):
            pass

    with recfn.profile() as prof:
        with recfn.record_function("main"):
            worker = threading.Thread(target=work, name="worker")
            worker.start()
            worker.join()
    return prof.table


def as_process(table: pa.Table, host: str, pid: int) -> pa.Table:
    n = table.num_rows
    hosts = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, np.int32)), pa.array([host], pa.string())
    )
    table = table.set_column(table.schema.get_field_index("host"), "host", hosts)
    pids = pa.array(np.full(n, pid, np.int64))
    return table.set_column(table.schema.get_field_index("pid"), "pid", pids)


@pytest.fixture(scope="module")
def fleet() -> pa.Table:
    base = capture()
    processes = [("b", 7), ("a", 7), ("a", 8)]  # the same pid on two hosts: still apart
    return pa.concat_tables([as_process(base, h, p) for h, p in processes]).unify_dictionaries()


def worker_id(table: pa.Table) -> int:
    """The worker's logical thread id (ids are never reused: it depends on earlier tests)."""
    names = table.column("thread_name").to_pylist()
    return int(table.column("thread_id")[names.index("worker")].as_py())


def test_static_timeline_groups_lanes_by_host_and_separates_hosts(fleet: pa.Table) -> None:
    ax = recfn.Trace(fleet).timeline()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    worker = f"worker ({worker_id(fleet)})"
    assert labels == [
        "a pid 7 · MainThread (1)",
        f"a pid 7 · {worker}",
        "a pid 8 · MainThread (1)",
        f"a pid 8 · {worker}",
        "b pid 7 · MainThread (1)",
        f"b pid 7 · {worker}",
    ]
    separators = [line for line in ax.get_lines() if line.get_gid() == HOST_SEPARATOR]
    assert len(separators) == 1
    ticks = ax.get_yticks()
    assert ticks[3] < separators[0].get_ydata()[0] < ticks[4]  # between a's lanes and b's


def test_widget_lanes_are_grouped_and_labelled_by_host(fleet: pa.Table) -> None:
    labels = [lane.label for lane in TimelineIndex(fleet).lanes if lane.kind == "ranges"]
    assert labels == [
        "a / pid 7 / MainThread",
        "a / pid 7 / worker",
        "a / pid 8 / MainThread",
        "a / pid 8 / worker",
        "b / pid 7 / MainThread",
        "b / pid 7 / worker",
    ]


def test_one_host_keeps_its_labels_without_host_or_separator(fleet: pa.Table) -> None:
    one_host = as_process(fleet.slice(0, fleet.num_rows // 3), "a", 7)
    ax = recfn.Trace(one_host).timeline()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["MainThread (1)", f"worker ({worker_id(one_host)})"]
    assert not [line for line in ax.get_lines() if line.get_gid() == HOST_SEPARATOR]
    labels = [lane.label for lane in TimelineIndex(one_host).lanes]
    assert labels == ["MainThread", "worker"]


def test_a_null_pid_is_a_lane_of_its_own() -> None:
    """A frame with a null pid beside pid -1 (one the user built: recfn refuses such files):
    two processes, so two lanes, as the summary counts them."""
    from recfn.analysis.plots.lanes import lanes

    base = capture().to_pandas()
    frames = []
    for pid in (None, -1):
        df = base.copy()
        df["pid"] = pd.Series([pid] * len(df), dtype="Int64")
        frames.append(df)
    lane, labels, _ = lanes(pd.concat(frames, ignore_index=True))
    assert len(set(lane)) == 2 * base["thread_id"].nunique() == len(labels)
    pids = sorted({label.split(" · ")[0] for label in labels.values()})
    assert pids == ["pid -1", "pid ?"], labels  # a null pid is no process id
