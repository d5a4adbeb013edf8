"""Malformed frames: every analysis either refuses them with its documented error or gives sane
numbers (never negative times, never a stray IndexError or KeyError)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from known_frames import KNOWN_ROWS, T0, make_frame
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from recfn.analysis import MissingColumnsError
from recfn.errors import MalformedFrameError, NothingToDrawError

DOCUMENTED = (MalformedFrameError, NothingToDrawError, MissingColumnsError)
BIG = np.iinfo(np.int64).max

EXTREMES = st.sampled_from([-BIG - 1, BIG, 1 << 62, (1 << 62) + 1, -(1 << 62) - 1])
NAMES = st.sampled_from(["a", "b", "$\\alpha$", "\x1b[2J"])
KINDS = st.sampled_from(["range"] * 6 + ["mark", "memory", None, "bogus"])


@st.composite
def frames(draw: st.DrawFn) -> pd.DataFrame:
    """Event tables that break at most a few of the schema's rules: an id repeated, parents
    that form cycles or point nowhere, null or extreme times, ends before starts, null ids,
    unknown kinds; about half of them break none, so that analyses run on odd but valid
    input too (overlaps, zero lengths, open ranges, orphans)."""
    n = draw(st.integers(0, 12))
    ids = list(range(1, n + 1))
    if n > 1 and draw(st.integers(0, 5)) == 0:
        ids[draw(st.integers(1, n - 1))] = ids[0]
    forest = draw(st.integers(0, 5)) > 0
    parents = [draw(st.one_of(st.none(), st.integers(0, i if forest else n + 2))) for i in range(n)]
    starts: list[int | None] = draw(st.lists(st.integers(-20, 200), min_size=n, max_size=n))
    ends: list[int | None] = [
        None if length is None else start + length
        for start, length in zip(
            starts, draw(st.lists(st.none() | st.integers(0, 120), min_size=n, max_size=n))
        )
    ]
    for _ in range(draw(st.integers(0, 2)) if n else 0):
        row = draw(st.integers(0, n - 1))
        flaw = draw(st.sampled_from(["null start", "extreme start", "extreme end", "backwards"]))
        if flaw == "null start":
            starts[row] = None
        elif flaw == "extreme start":
            starts[row] = draw(EXTREMES)
        elif flaw == "extreme end":
            ends[row] = draw(EXTREMES)
        elif starts[row] is not None and starts[row] >= -BIG + 50:  # an int64 ends before it
            ends[row] = starts[row] - draw(st.integers(1, 50))
    threads = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    nullable_ids = draw(st.booleans())
    df = pd.DataFrame(
        {
            "id": pd.array(ids, dtype="Int64") if nullable_ids else np.array(ids, dtype=np.int64),
            "parent_id": pd.array([p or None for p in parents], dtype="Int64"),
            "name": pd.Categorical(draw(st.lists(NAMES, min_size=n, max_size=n))),
            "kind": pd.array(draw(st.lists(KINDS, min_size=n, max_size=n)), dtype=object),
            "scope": "function",
            "start_ns": pd.array(starts, dtype="Int64"),
            "end_ns": pd.array(ends, dtype="Int64"),
            "thread_id": np.array(threads, dtype=np.int64),
            "thread_name": pd.Categorical([f"T{t}" for t in threads]),
            "memory_bytes": pd.array(
                draw(st.lists(st.none() | st.integers(-100, 100), min_size=n, max_size=n)),
                dtype="Int64",
            ),
        }
    )
    if nullable_ids and n and draw(st.integers(0, 5)) == 0:
        df.loc[draw(st.integers(0, n - 1)), "id"] = pd.NA
    return df.drop(columns="parent_id") if draw(st.integers(0, 3)) == 0 else df


def check_summary(summary: pd.DataFrame) -> None:
    for column in ("count", "total_ns", "self_ns", "min_ns", "max_ns"):
        assert (summary[column] >= 0).all(), column
    bound = summary["count"].astype(float) * summary["max_ns"].astype(float)  # may pass int64
    assert (summary["self_ns"].astype(float) <= bound).all()
    for column in ("total_pct", "self_pct"):
        values = summary[column].to_numpy(dtype=float)
        assert not np.isinf(values).any() and not (values < 0).any(), column


def check_tree(tree: pd.DataFrame, df: pd.DataFrame) -> None:
    assert sorted(tree.index.tolist()) == sorted(df.index.tolist())
    assert (tree["depth"] >= 0).all()
    duration, own = tree["duration_ns"].dropna(), tree["self_ns"].dropna()
    assert (duration >= 0).all() and (own >= 0).all()
    assert (tree["self_ns"] <= tree["duration_ns"]).dropna().all()


def attempt(operation: Callable[..., Any], **options: Any) -> Any:
    """The operation's result, or None when it refused with a documented error."""
    try:
        return operation(**options)
    except DOCUMENTED:
        return None


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(df=frames())
def test_malformed_frames_are_refused_or_analysed_sanely(df: pd.DataFrame) -> None:
    try:
        for summary in (
            attempt(df.recfn.summary),
            attempt(df.recfn.summary, by="thread_id"),
        ):
            event("refused" if summary is None else "analysed")
            if summary is not None:
                check_summary(summary)
        text = attempt(df.recfn.to_string)
        assert text is None or "\x1b" not in text
        diff = attempt(df.recfn.diff, baseline=df)
        assert diff is None or (diff["total_ns_change"] == 0).all()
        tree = attempt(df.recfn.tree)
        if tree is not None:
            check_tree(tree, df)
        for draw in (df.recfn.timeline, df.recfn.flame):
            figure = Figure(figsize=(3, 2), dpi=40)
            FigureCanvasAgg(figure)
            ax = attempt(draw, ax=figure.add_subplot())
            assert ax is None or ax.get_xlim()[1] > ax.get_xlim()[0]
    finally:
        plt.close("all")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda df: df.assign(end_ns=df["end_ns"].where(df["id"] != 3, T0 + 20)), "end before"),
        (lambda df: df.assign(id=[1, 1, 2, 3, 4, 5, 6, 7, 8]), "duplicate"),
        (
            lambda df: df.assign(parent_id=pd.array([3, 1, 1, 1, 3, 3, None, 7, None], "Int64")),
            "cycle",
        ),
        (
            lambda df: df.assign(parent_id=df["parent_id"].where(df["id"] != 1, 1)),
            "cycle",
        ),
        (
            lambda df: df.assign(start_ns=df["start_ns"].astype("Int64").where(df["id"] != 4)),
            "null start_ns",
        ),
        (lambda df: df.assign(id=pd.array([1, None, 6, 3, 4, 5, 7, 8, 9], "Int64")), "null ids"),
        (lambda df: df.assign(start_ns=df["start_ns"] - T0 - (1 << 62) - 100), "beyond"),
    ],
)
def test_each_malformation_is_named(change: Any, problem: str) -> None:
    # Regression: these frames gave negative totals (an end before its start) or nonsense.
    df = change(make_frame(KNOWN_ROWS))
    for operation in (
        lambda: df.recfn.summary(),
        lambda: df.recfn.tree(),
        lambda: df.recfn.flame(),
        lambda: df.recfn.timeline(),
    ):
        with pytest.raises(MalformedFrameError, match=problem):
            operation()
    assert issubclass(MalformedFrameError, ValueError)


def test_parents_outside_the_frame_make_roots() -> None:
    df = make_frame(KNOWN_ROWS)
    part = df[df["id"] != 3]  # bwd's children now point nowhere
    summary = part.recfn.summary()
    assert summary.loc["mm", "self_ns"] == 35 and (summary["total_ns"] >= 0).all()
    assert part.recfn.tree()["depth"].tolist() == [0, 1, 1, 0, 0, 0, 1, 0]
