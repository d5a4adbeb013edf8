"""Chrome traces read a chunk at a time: the table never depends on where chunks end."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recfn import chrome
from recfn._chrome_import import Columns, events_frame
from recfn._chrome_stream import GiveUp, Stream, inflated
from recfn._files import open_trace_file

TRICKY = ["a", "},{", '"}, {"', "]", "}]", "\\", "[{", "} ,\n{", "é", "x" * 70]
"""Names and arg values with the braces, brackets and commas a cut looks for."""


def streamed(path: Path, chunk: int) -> pd.DataFrame:
    """The table of the trace at `path` read `chunk` bytes at a time; GiveUp if not streamed."""
    source = str(path)
    with open_trace_file(source) as fh:
        stream = Stream(inflated(fh, source, 1 << 30, chunk=chunk), source)
        columns = Columns(source)
        for batch in stream.batches():
            columns.add(batch)
    return events_frame(columns, stream.base_ns, source)


events = st.lists(
    st.fixed_dictionaries(
        {
            "ph": st.sampled_from(["X", "X", "X", "i", "B", "E"]),
            "name": st.sampled_from(TRICKY),
            "ts": st.integers(0, 50),
            "dur": st.integers(0, 9),
            "pid": st.just(1),
            "tid": st.integers(1, 2),
        },
        optional={
            "args": st.dictionaries(
                st.sampled_from(TRICKY),
                st.one_of(st.sampled_from(TRICKY), st.integers(), st.lists(st.integers())),
            ),
            "s": st.just("t"),
        },
    ),
    min_size=1,
    max_size=15,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=events,
    form=st.sampled_from(["list", "object", "base after"]),
    indent=st.sampled_from([None, 2]),
    compressed=st.booleans(),
    chunk=st.integers(16, 400),
)
def test_the_table_does_not_depend_on_where_chunks_end(
    tmp_path: Path,
    events: list[dict[str, Any]],
    form: str,
    indent: int | None,
    compressed: bool,
    chunk: int,
) -> None:
    document: Any = events
    if form == "object":
        document = {"baseTimeNanoseconds": 10**18, "otherData": {"k": "]}"}, "traceEvents": events}
    elif form == "base after":
        document = {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 5}
    text = json.dumps(document, indent=indent, ensure_ascii=False).encode()
    path = tmp_path / ("t.json.gz" if compressed else "t.json")
    path.write_bytes(gzip.compress(text) if compressed else text)
    whole = streamed(path, 1 << 30)
    pd.testing.assert_frame_equal(streamed(path, chunk), whole)
    pd.testing.assert_frame_equal(chrome.read_chrome_trace(path), whole)
    base = document["baseTimeNanoseconds"] if form != "list" else 0
    after_base = whole["start_ns"] - base
    assert (after_base % 1000 == 0).all()
    assert set(after_base // 1000) <= {e["ts"] for e in events}


@pytest.mark.parametrize(
    "text",
    [
        b'[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1}',  # no closing bracket
        b'{"otherData": {"traceEvents": []}, "traceEvents": [], "x": 1}',  # a nested key first
        b'{"traceEvents": [], "traceEvents": []}',  # two lists of events
        b"[1, 2]",  # events that are not objects
    ],
)
def test_other_shapes_are_left_to_the_whole_file_reader(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(text)
    with pytest.raises(GiveUp):
        streamed(path, 8)


def test_a_list_without_its_closing_bracket_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b'[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1},\n')
    assert chrome.read_chrome_trace(path)["name"].tolist() == ["a"]
