"""Identity across a fleet: host, pid and rank in every captured table; tables of several
processes concatenate without colliding ids or lanes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pyarrow as pa
import pytest

import recfn
from recfn.formats import schema


def work() -> pa.Table:
    with recfn.profile() as prof:
        for _ in range(3):
            with recfn.record_function("step"), recfn.record_function("inner"):
                pass
    return prof.table


def as_process(table: pa.Table, pid: int, host: str) -> pd.DataFrame:
    df = recfn.Trace(table).to_pandas().copy()
    df["pid"] = pid
    df["host"] = pd.Categorical([host] * len(df))
    return df


def test_capture_records_host_pid_and_the_launchers_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "8")
    table = work()
    assert set(table.column("rank").to_pylist()) == {5}
    assert set(table.column("host").to_pylist()) == {__import__("socket").gethostname()}
    metadata = schema.metadata_of(table)
    assert metadata[schema.RANK_KEY] == "5" and metadata[schema.WORLD_SIZE_KEY] == "8"
    assert metadata[schema.LOCAL_RANK_KEY] == "1"
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert set(work().column("rank").to_pylist()) == {-1}


def test_two_processes_concatenated_summarise_and_draw_apart() -> None:
    table = work()
    one = as_process(table, 100, "a")
    both = pd.concat([one, as_process(table, 200, "b")], ignore_index=True)
    assert both["id"].duplicated().any()  # the same ids in both processes
    alone = one.recfn.summary()
    summary = both.recfn.summary()
    assert summary.loc["step", "count"] == 2 * alone.loc["step", "count"]
    assert summary.loc["step", "self_ns"] == 2 * alone.loc["step", "self_ns"]
    ax = both.recfn.timeline()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    plt.close(ax.figure)
    assert labels == ["a pid 100 · MainThread (1)", "b pid 200 · MainThread (1)"]


def test_duplicate_ids_within_one_process_are_still_refused() -> None:
    one = as_process(work(), 100, "a")
    with pytest.raises(ValueError, match="duplicate"):
        pd.concat([one, one], ignore_index=True).recfn.summary()
