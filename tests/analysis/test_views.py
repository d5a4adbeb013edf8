"""Fleet views: per-rank summaries side by side and stragglers."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import recfn


def steps(rank: int, ends: list[int], pid: int | None = None) -> pd.DataFrame:
    """A rank's ``step`` ranges, all starting on the same grid, ending at ``ends``."""
    n = len(ends)
    return pd.DataFrame(
        {
            "id": range(1, n + 1),
            "parent_id": pd.array([None] * n, dtype="Int64"),
            "name": ["step"] * n,
            "kind": ["range"] * n,
            "start_ns": [1000 * k for k in range(n)],
            "end_ns": ends,
            "thread_id": 1,
            "pid": 100 + rank if pid is None else pid,
            "rank": rank,
        }
    )


def fleet() -> pd.DataFrame:
    return pd.concat(
        [
            steps(0, [100, 1100, 2100]),
            steps(1, [150, 1900, 2100]),  # late on the second step
            steps(2, [400, 1200, 2050]),  # late on the first
        ],
        ignore_index=True,
    )


def test_stragglers_name_the_last_rank_and_its_lag() -> None:
    result = fleet().recfn.stragglers("step")
    assert result["last_rank"].tolist()[:2] == [2, 1]
    assert result["lag_ns"].tolist() == [300, 800, 50]
    assert result["behind_median_ns"].tolist() == [250, 700, 0]
    assert (result["ranks"] == 3).all()
    with pytest.raises(ValueError, match="no closed range named 'nope'"):
        fleet().recfn.stragglers("nope")


def test_rank_summary_puts_ranks_side_by_side() -> None:
    table = fleet().recfn.rank_summary()
    assert list(table.columns) == [0, 1, 2, "imbalance"]
    assert table.loc["step", [0, 1, 2]].tolist() == [300, 1150, 650]
    assert table.loc["step", "imbalance"] == pytest.approx(1150 / (2100 / 3))
    by_count = fleet().recfn.rank_summary("count")
    assert by_count.loc["step", [0, 1, 2]].tolist() == [3, 3, 3]


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda df: df.recfn.rank_summary(["count"]), "value must be a summary column's name"),
        (lambda df: df.recfn.rank_summary(top="2"), "top must be an int or None"),
        (lambda df: df.recfn.stragglers(["step"]), "name must be a range's name (str)"),
    ],
)
def test_the_fleet_views_name_an_argument_of_the_wrong_type(call, words: str) -> None:
    with pytest.raises(TypeError, match=re.escape(words)) as raised:
        call(fleet())
    assert isinstance(raised.value, recfn.RecfnError)


def test_processes_stand_in_for_missing_ranks() -> None:
    df = fleet().assign(rank=-1)
    assert list(df.recfn.rank_summary().columns) == ["100", "101", "102", "imbalance"]
    assert df.recfn.stragglers("step")["last_rank"].tolist()[:2] == ["102", "101"]


def test_chrome_export_names_processes_and_carries_the_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    import recfn

    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with recfn.profile() as prof, recfn.record_function("step"):
        pass
    path = tmp_path / "rank3.json"
    prof.save(path)
    document = json.loads(path.read_text())
    assert document["distributedInfo"] == {"rank": 3, "world_size": 4}
    names = [e for e in document["traceEvents"] if e.get("name") == "process_name"]
    assert len(names) == 1 and names[0]["args"]["name"].startswith("rank 3 · ")
    back = recfn.load(path).to_pandas()
    assert back.recfn.summary().loc["step", "count"] == 1
