"""Chrome traces read a chunk at a time and written a batch of rows at a time: neither the
table nor the file depends on where chunks or batches end."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recfn
from recfn.analysis import make_synthetic_trace
from recfn.formats import chrome
from recfn.formats.chrome import _writer as _chrome_export
from recfn.formats.chrome._reader import Columns, events_table, frame_of
from recfn.formats.chrome._stream import GiveUp, Stream, inflated
from recfn.formats.files import open_trace_file

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
    return frame_of(events_table(columns, stream.base_ns, source))


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


# -- writing -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def table() -> pa.Table:
    df = make_synthetic_trace(3000, 3, seed=1, n_marks=60, n_memory_events=40)
    df["args"] = [f'{{"External id":{i},"Ev Idx":{i}}}' for i in range(len(df))]
    return recfn.Trace.from_pandas(df).table


def events_of(path: Path) -> list[str]:
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as fh:
        return sorted(json.dumps(e, sort_keys=True) for e in json.load(fh)["traceEvents"])


def test_the_file_does_not_depend_on_how_many_rows_are_encoded_at_a_time(
    tmp_path: Path, table: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    chrome.write_chrome_trace(table, tmp_path / "whole.json.gz")
    monkeypatch.setattr(_chrome_export, "ROWS", 7)
    chrome.write_chrome_trace(table, tmp_path / "batched.json.gz")
    chrome.write_chrome_trace(table.to_pandas(), tmp_path / "frame.json")
    assert events_of(tmp_path / "batched.json.gz") == events_of(tmp_path / "whole.json.gz")
    assert events_of(tmp_path / "frame.json") == events_of(tmp_path / "whole.json.gz")
    back = chrome.read_chrome_trace(tmp_path / "batched.json.gz")
    assert back["memory_bytes"].sum() == table["memory_bytes"].to_pandas().sum()


def test_the_size_estimate_is_close(tmp_path: Path, table: pa.Table) -> None:
    for name, compressed in (("t.json", False), ("t.json.gz", True)):
        chrome.write_chrome_trace(table, tmp_path / name)
        size = (tmp_path / name).stat().st_size
        estimate = chrome.estimate_chrome_bytes(table, compressed=compressed)
        low, high = (0.8, 1.25) if not compressed else (0.8, 3.0)
        assert low * size <= estimate <= high * size, (name, size, estimate)
    chrome.write_chrome_trace(table.slice(0, 0), tmp_path / "empty.json")
    empty = (tmp_path / "empty.json").stat().st_size
    assert chrome.estimate_chrome_bytes(table.slice(0, 0)) == empty


def test_convert_announces_a_large_json(
    tmp_path: Path,
    table: pa.Table,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from recfn.cli import main

    source = tmp_path / "t.parquet"
    recfn.Trace(table).save(source)
    assert main(["convert", str(source), str(tmp_path / "small.json.gz")]) == 0
    assert "will take about" not in capsys.readouterr().err
    monkeypatch.setattr(chrome, "LARGE_JSON_BYTES", 1000)
    assert main(["convert", str(source), str(tmp_path / "large.json.gz")]) == 0
    assert "large.json.gz will take about 0.0 GiB (gzip-compressed" in capsys.readouterr().err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_converting_shows_progress_on_a_terminal_only(
    tmp_path: Path, table: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tqdm")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("RECFN_PROGRESS", raising=False)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    chrome.write_chrome_trace(table, tmp_path / "t.json.gz")
    chrome.read_chrome_trace(tmp_path / "t.json.gz")
    shown = terminal.getvalue()
    assert "writing t.json.gz" in shown and f"/{table.num_rows}" in shown
    assert "reading t.json.gz" in shown
    assert ".part" not in shown  # the file being written is named, not its temporary
    terminal.truncate(0)
    terminal.seek(0)
    recfn.Trace(table).save(tmp_path / "u.json.gz")  # what recfn convert runs
    assert "writing u.json.gz" in terminal.getvalue() and ".part" not in terminal.getvalue()
    monkeypatch.setenv("CI", "true")
    terminal.truncate(0)
    terminal.seek(0)
    chrome.write_chrome_trace(table, tmp_path / "t.json.gz")
    assert terminal.getvalue() == ""


FRAGMENTS = [
    '{"k":"}',
    '{"}',
    "{},{}",
    "{}",
    '{"a":1}',
    '{"a":[1,{"b":2}]}',
    "x",
    " {}",
    '{"n":NaN}',
]


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8))
def test_args_decoded_together_are_those_decoded_one_by_one(texts: list[str]) -> None:
    """Fragments that only parse together (``{"k":"}`` then ``{"}``) never shift the others."""
    expected = [_chrome_export._decode_args(text) for text in texts]
    assert repr(_chrome_export._decode_many(texts)) == repr(expected)
