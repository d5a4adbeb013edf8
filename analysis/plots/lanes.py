"""Timeline lanes across a fleet: one per ``(host, pid, thread_id)``, grouped by host and
process, labelled so that every process's ``MainThread (1)`` stays apart."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recfn.analysis.columns import EventColumns, Events, event_columns, process_groups
from recfn.analysis.units import printable


def lanes(df: Events) -> tuple[np.ndarray, dict[int, str], dict[int, str]]:
    """A lane number per row, each lane's label, and each lane's host when there are several.

    Within one process the lane is the ``thread_id`` and the label ``"<thread_name> (<id>)"``;
    with several processes lanes are numbered in (host, pid, thread_id) order, so a host's
    lanes are next to each other, and labelled ``"<host> pid <pid> · <thread_name> (<id>)"``
    (the host only when there are several; then the third result maps each lane to it).
    """
    columns = event_columns(df)
    thread = columns.ints("thread_id", 0)
    process = process_groups(columns)
    if process is None:  # each thread's name from its first row
        distinct, first_rows = np.unique(thread, return_index=True)
        labels = {
            int(t): f"{printable(str(name))} ({t})"
            for t, name in zip(distinct.tolist(), _names_of(columns, first_rows))
        }
        return thread, labels, {}
    names = _names(columns)
    host = (
        pd.Series(columns.objects("host")).fillna("")
        if columns.has("host")
        else pd.Series([""] * len(columns))
    )
    pid = columns.ints("pid", -1) if columns.has("pid") else np.full(len(columns), -1)
    pid_text = pd.Series(pid).astype(str)
    if columns.has("pid"):  # a null pid is no process id: "?", apart from any pid (-1 too)
        pid_text[columns.nulls("pid")] = "?"
    keys = pd.DataFrame(
        {
            "host": host,
            "pid": pid,
            "pid_text": pid_text,
            "process": process,
            "thread": thread,
            "name": names,
        }
    )
    distinct = keys.drop_duplicates(["process", "thread"]).sort_values(
        ["host", "pid", "process", "thread"], kind="stable"
    )
    distinct["lane"] = np.arange(len(distinct), dtype=np.int64)
    lane = keys.merge(distinct[["process", "thread", "lane"]], how="left")["lane"]
    several_hosts = distinct["host"].nunique() > 1
    labels = {}
    hosts = {}
    for row in distinct.itertuples(index=False):
        where = f"{row.host} " if several_hosts else ""
        labels[int(row.lane)] = printable(f"{where}pid {row.pid_text} · {row.name} ({row.thread})")
        if several_hosts:
            hosts[int(row.lane)] = str(row.host)
    return lane.to_numpy(dtype=np.int64), labels, hosts


def _names(columns: EventColumns) -> pd.Series:
    """The thread name of every row, ``"thread"`` where there is none."""
    if not columns.has("thread_name"):
        return pd.Series(["thread"] * len(columns))
    return pd.Series(columns.objects("thread_name")).fillna("thread")


def _names_of(columns: EventColumns, rows: np.ndarray) -> list[object]:
    """`_names` of `rows` alone (a process's first row of each thread: a few)."""
    if not columns.has("thread_name"):
        return ["thread"] * len(rows)
    names = columns.objects("thread_name", rows).tolist()
    return ["thread" if pd.isna(name) else name for name in names]
