"""The df.recfn accessor: registration, window/filter selection, column validation."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from conftest import T0

import recfn.analysis as analysis


def test_registered_on_every_frame(known: pd.DataFrame) -> None:
    assert isinstance(known.recfn, analysis.RecfnAccessor)
    assert isinstance(pd.DataFrame().recfn, analysis.RecfnAccessor)  # validation is per method


def test_window_keeps_overlapping_rows(known: pd.DataFrame) -> None:
    inside = known.recfn.window(T0 + 32, T0 + 45)
    assert inside["id"].tolist() == [1, 6, 3, 7, 8]  # fwd ended at 30, load starts at 80
    assert known.recfn.window(T0 + 95)["id"].tolist() == [1, 9]  # step ends at 100, load is open
    assert known.recfn.window(end=T0 + 5)["id"].tolist() == [1]
    assert len(known.recfn.window()) == len(known)
    assert known.recfn.window(T0 + 32, T0 + 45).recfn.summary()["count"].sum() == 4


def test_filter(known: pd.DataFrame) -> None:
    assert known.recfn.filter(name="mm")["id"].tolist() == [4, 5, 8]
    assert known.recfn.filter(name=["mm", "fwd"], thread=1)["id"].tolist() == [2, 4, 5]
    assert known.recfn.filter(name=re.compile(r"^(s|l)"))["id"].tolist() == [1, 7, 9]
    assert known.recfn.filter(thread="Thread-2")["id"].tolist() == [7, 8, 9]
    assert known.recfn.filter(thread=[1, "Thread-2"]).shape == known.shape
    assert known.recfn.filter(scope="function").shape == known.shape
    assert known.recfn.filter(scope=["user_scope"]).empty
    assert known.astype({"name": str}).recfn.filter(name="step")["id"].tolist() == [1, 7]
    # Self times count only children that were kept: mm is no longer under bwd here.
    kept = known.recfn.filter(name=["step", "bwd"]).recfn.summary()
    assert kept.loc["bwd", "self_ns"] == 50


def test_missing_columns_are_named(known: pd.DataFrame) -> None:
    with pytest.raises(AttributeError, match="'start_ns'"):
        known.drop(columns="start_ns").recfn.window(0, 1)
    with pytest.raises(ValueError, match="'scope'"):
        known.drop(columns="scope").recfn.filter(scope="function")
    with pytest.raises(analysis.MissingColumnsError, match="'thread_name'"):
        known.drop(columns="thread_name").recfn.filter(thread="MainThread")
    with pytest.raises(analysis.MissingColumnsError, match="'name', 'kind'"):
        pd.DataFrame({"x": [1]}).recfn.flame()
    with pytest.raises(analysis.MissingColumnsError, match="'id'"):
        known.drop(columns="id").recfn.roots()
