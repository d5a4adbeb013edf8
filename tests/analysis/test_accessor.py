"""The df.recfn accessor: registration, window/filter selection, column validation."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from known_frames import T0

import recfn.analysis as analysis
from recfn.analysis.times import window_of


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
    assert known.recfn.filter(thread=np.int64(1)).equals(known.recfn.filter(thread=1))
    assert known.recfn.filter(scope="function").shape == known.shape
    assert known.recfn.filter(scope=["user_scope"]).empty
    assert known.astype({"name": str}).recfn.filter(name="step")["id"].tolist() == [1, 7]
    # Self times count only children that were kept: mm is no longer under bwd here.
    kept = known.recfn.filter(name=["step", "bwd"]).recfn.summary()
    assert kept.loc["bwd", "self_ns"] == 50


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"name": 3.5}, "filter: name must be a string, a pattern, or a collection of strings"),
        ({"name": ["mm", 1]}, "filter: name must be a string"),
        ({"scope": True}, "filter: scope must be a string, or a collection of strings, got True"),
    ],
)
def test_a_name_or_scope_that_is_no_string_is_refused_naming_it(
    known: pd.DataFrame, options: dict, words: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(words)):
        known.recfn.filter(**options)


@pytest.mark.parametrize("thread", [3.5, [1, 2.5], {"a": 1}, True, b"Thread-2"])
def test_a_thread_that_is_no_id_or_name_is_refused_naming_it(known: pd.DataFrame, thread) -> None:
    for call in (known.recfn.filter, known.recfn.timeline):
        with pytest.raises(TypeError, match=r"thread must be a thread id \(int\), a thread name"):
            call(thread=thread)


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


def test_window_takes_durations_after_the_trace_start(known: pd.DataFrame) -> None:
    # Without the trace's metadata, the trace starts at the earliest start_ns (T0 here).
    by_ns = known.recfn.window(T0 + 32, T0 + 45)["id"].tolist()
    assert known.recfn.window("32ns", "45ns")["id"].tolist() == by_ns
    assert known.recfn.window(pd.Timedelta(32, "ns"), "45 ns")["id"].tolist() == by_ns
    assert known.recfn.window(pd.Timestamp(T0 + 32, tz="UTC"), T0 + 45)["id"].tolist() == by_ns
    assert known.recfn.window(np.datetime64(T0 + 32, "ns"), "45ns")["id"].tolist() == by_ns
    # With the metadata, durations count from the profile's start, not the first row.
    shifted = known.copy()
    shifted.attrs["recfn"] = {"recfn.start_ns": str(T0 - 1_000_000)}
    assert (
        shifted.recfn.window("1ms", "1.000045ms")["id"].tolist()
        == known.recfn.window(T0, T0 + 45)["id"].tolist()
    )


def test_window_remembers_its_extent_and_origin(known: pd.DataFrame) -> None:
    cut = known.recfn.window("32ns", "45ns")
    assert window_of(cut) == (T0 + 32, T0 + 45)
    # A window of a window stays inside, and durations still count from the trace start.
    inner = cut.recfn.window("40ns")
    assert window_of(inner) == (T0 + 40, T0 + 45)
    assert inner["id"].tolist() == [1, 3, 7, 8]
    assert window_of(known) == (None, None)
    assert "recfn.window" not in known.attrs  # the source frame is left alone


@pytest.mark.parametrize("bad", ["2", "soon", "NaT", "2 parsecs", ""])
def test_window_refuses_bad_strings_naming_them(known: pd.DataFrame, bad: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"start={bad!r}")):
        known.recfn.window(bad)


def test_window_refuses_other_types_and_reversed_bounds(known: pd.DataFrame) -> None:
    with pytest.raises(TypeError, match="float"):
        known.recfn.window(1.5)
    with pytest.raises(TypeError, match="bool"):
        known.recfn.window(True)
    with pytest.raises(ValueError, match="end .'2ms'. is before start .'3ms'."):
        known.recfn.window("3ms", "2ms")


def test_with_times(known: pd.DataFrame, known_gpu: pd.DataFrame) -> None:
    timed = known.recfn.with_times().set_index("id")
    assert timed.loc[4, "start"] == pd.Timestamp(T0 + 50, tz="UTC")
    assert timed.loc[4, "duration"] == pd.Timedelta(10, "ns")  # exact, not through floats
    assert timed.loc[6, "duration"] == pd.Timedelta(0)  # a mark
    assert pd.isna(timed.loc[9, "end"]) and pd.isna(timed.loc[9, "duration"])  # open
    assert str(timed["start"].dtype) == "datetime64[ns, UTC]"
    assert "device_start" not in timed.columns
    gpu = known_gpu.recfn.with_times().set_index("id")
    assert gpu.loc[7, "device_duration"] == pd.Timedelta(40, "ns")
    assert gpu.loc[7, "device_start"] == pd.Timestamp(T0 + 25, tz="UTC")
    assert pd.isna(gpu.loc[6, "device_duration"])
