"""Fleet views: one summary column per rank, and stragglers — for each occurrence of a range
(say ``step``), which rank finished it last and by how much."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recfn.analysis.columns import RANGE, equals, ints, nulls, require
from recfn.analysis.stats.summary import check_top, summarize
from recfn.errors import RecfnTypeError, RecfnValueError


def rank_keys(df: pd.DataFrame) -> pd.Series:
    """Each row's rank; where the frame has no ranks (-1 or no column), its process as
    ``"host:pid"`` (or ``pid``) instead, so that processes stay apart."""
    if "rank" in df.columns and (ints(df["rank"], -1) >= 0).all():
        return pd.Series(ints(df["rank"], -1), index=df.index, name="rank")
    require(df, ("pid",), "a per-rank view")
    pid = pd.Series(ints(df["pid"], 0), index=df.index).astype(str)
    if "host" in df.columns and df["host"].astype(object).nunique() > 1:
        pid = df["host"].astype(str) + ":" + pid
    return pid.rename("rank")


def rank_summary(
    df: pd.DataFrame, value: str = "total_ns", *, top: int | None = None
) -> pd.DataFrame:
    """``value`` (a summary column) per name (rows) and rank (columns), side by side, with
    ``imbalance``: the largest rank's value over the mean of all ranks (1.0: balanced).
    Rows are ordered by the sum over ranks, largest first; `top` keeps the first rows."""
    if not isinstance(value, str):
        raise RecfnTypeError(f"rank_summary: value must be a summary column's name, got {value!r}")
    check_top(top)
    frame = df.assign(rank=rank_keys(df).to_numpy())
    stats = summarize(frame, ["rank", "name"], as_index=False)
    if value not in stats.columns:
        raise RecfnValueError(
            f"value={value!r} is not a summary column; choose from {list(stats.columns)}"
        )
    table = stats.pivot_table(
        index="name", columns="rank", values=value, aggfunc="sum", observed=True
    )
    table = table.fillna(0)
    order = table.sum(axis=1).sort_values(ascending=False, kind="stable").index
    table = table.loc[order]
    mean = table.mean(axis=1)
    table["imbalance"] = np.where(mean > 0, table.max(axis=1) / mean.where(mean > 0, 1), np.nan)
    table.columns.name = "rank"
    return table.head(top) if top is not None else table


def stragglers(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """For each occurrence of the closed range ``name`` (the k-th on every rank, in start order):
    ``ranks`` that ran it, ``last_rank`` (finished last), ``lag_ns`` (its end minus the earliest
    rank's end), ``behind_median_ns`` (its end minus the median end) and ``first_end_ns`` /
    ``last_end_ns``. Occurrences that not every rank reached have ``ranks`` below the others.
    ValueError when no rank has a closed range of that name."""
    if not isinstance(name, str):
        raise RecfnTypeError(f"stragglers: name must be a range's name (str), got {name!r}")
    require(df, ("name", "kind", "start_ns", "end_ns"), "stragglers")
    chosen = equals(df["name"], name) & equals(df["kind"], RANGE) & ~nulls(df["end_ns"])
    if not chosen.any():
        raise RecfnValueError(f"stragglers: no closed range named {name!r}")
    rows = pd.DataFrame(
        {
            "rank": rank_keys(df).to_numpy()[chosen],
            "start": ints(df["start_ns"], 0)[chosen],
            "end": ints(df["end_ns"], 0)[chosen],
        }
    ).sort_values(["rank", "start"], kind="stable")
    rows["occurrence"] = rows.groupby("rank", sort=False).cumcount()
    grouped = rows.groupby("occurrence")
    last = rows.loc[grouped["end"].idxmax()].set_index("occurrence")
    result = pd.DataFrame(
        {
            "ranks": grouped.size(),
            "last_rank": last["rank"],
            "first_end_ns": grouped["end"].min(),
            "last_end_ns": grouped["end"].max(),
        }
    )
    result["lag_ns"] = result["last_end_ns"] - result["first_end_ns"]
    result["behind_median_ns"] = (result["last_end_ns"] - grouped["end"].median()).astype(np.int64)
    return result
