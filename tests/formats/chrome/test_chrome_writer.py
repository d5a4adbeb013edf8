"""The writer's complete ("X") events and their args are built a column at a time: each must
hold what msgspec writes for the event's dict (the same text where an args text is written as
msgspec writes it), whatever the names, args, nulls, processes and times; a ``.json.gz``,
compressed in a thread, is the ``.json`` whatever the batches."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recfn.formats.chrome._times import micros, micros_text
from recfn.formats.chrome._writer import (
    ENCODE_COMPLETE,
    Layout,
    Rows,
    complete_events,
    encode_events,
    encode_part,
)
from recfn.native.constants import CHROME_EXACT_US

LARGE_NS = CHROME_EXACT_US * 1000


@pytest.mark.parametrize(
    "values",
    [
        [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 1010, 1100, 123456789, LARGE_NS - 1],
        [LARGE_NS, 0, 1, 20, 300, 4000, 2**62],  # one large value: every text has 3 decimals
        [],
    ],
)
def test_micros_text_is_what_msgspec_writes(values: list[int]) -> None:
    ns = np.array(values, dtype=np.int64)
    expected = [msgspec.json.encode(value).decode() for value in micros(ns)]
    assert micros_text(ns).to_pylist() == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2 * LARGE_NS), max_size=40))
def test_micros_text_of_any_times(values: list[int]) -> None:
    ns = np.array(values, dtype=np.int64)
    assert micros_text(ns).to_pylist() == [msgspec.json.encode(v).decode() for v in micros(ns)]


NAMES = st.one_of(st.none(), st.text(max_size=8), st.sampled_from(['q"', "a\\b", "\x01\n", "é中"]))
SCOPES = st.sampled_from([None, "user_scope", "function", "custom"])
ARGS = st.none() | st.sampled_from(
    ['{"k": "v"}', "text", '{"n": 1.50, "u": "\\u00e9"}', '{"hidden calls": 1}', "{}", "[1]"]
)
"""Args texts: objects (spaced, with numbers and escapes msgspec writes otherwise, with a key
that a column also sets), text that is no object."""


DURATIONS = st.integers(0, 10**9) | st.integers(LARGE_NS - 1, LARGE_NS + 1)
"""Durations, some long enough to be written with three decimals."""


@st.composite
def frames(draw: Any) -> pd.DataFrame:
    n = draw(st.integers(1, 12))
    start = np.array(draw(st.lists(st.integers(0, 10**12), min_size=n, max_size=n)))
    start = start + draw(st.sampled_from([0, 1_700_000_000_000_000_000]))
    frame = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64) + 7,
            "parent_id": pd.array(
                draw(st.lists(st.none() | st.integers(0, 99), min_size=n, max_size=n)),
                dtype="Int64",
            ),
            "name": pd.Series(draw(st.lists(NAMES, min_size=n, max_size=n)), dtype=object),
            "scope": pd.Series(draw(st.lists(SCOPES, min_size=n, max_size=n)), dtype=object),
            "kind": "range",
            "start_ns": start,
            "end_ns": start + np.array(draw(st.lists(DURATIONS, min_size=n, max_size=n))),
            "thread_id": draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)),
            "pid": draw(st.lists(st.sampled_from([5, 6]), min_size=n, max_size=n)),
            "host": draw(st.lists(st.sampled_from(["a", "b"]), min_size=n, max_size=n)),
            "hidden_calls": pd.array(
                draw(st.lists(st.none() | st.integers(0, 9), min_size=n, max_size=n)),
                dtype="Int64",
            ),
            "args": pd.Series(draw(st.lists(ARGS, min_size=n, max_size=n)), dtype=object),
        }
    )
    if draw(st.booleans()):
        frame["name"] = frame["name"].astype("category")
    if draw(st.booleans()):
        frame["sequence_nr"] = draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n))
    return frame


@settings(max_examples=80, deadline=None)
@given(frames(), st.sampled_from([None, 0]))
def test_complete_events_are_the_json_of_their_dicts(frame: pd.DataFrame, base: Any) -> None:
    layout = Layout(Rows(frame), base)
    rows = np.arange(len(frame))
    args = [{} for _ in rows]
    for i, text in enumerate(frame["args"]):
        if text is not None:
            decoded = json.loads(text) if text[:1] in "{[" else None
            args[i] = decoded if isinstance(decoded, dict) else {"args": text}
        if "sequence_nr" in frame and frame["sequence_nr"][i] != -1:
            args[i]["Sequence number"] = int(frame["sequence_nr"][i])
        if not pd.isna(frame["hidden_calls"][i]):
            args[i]["hidden calls"] = int(frame["hidden_calls"][i])
    start, end = frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy()
    ts, dur = micros(start - layout.base_ns), micros(end - start)
    pids = layout.chrome_pids(frame)
    expected = []
    for i in rows.tolist():
        scope = frame["scope"][i]
        parent = frame["parent_id"][i]
        event = {
            "ph": "X",
            "cat": "" if scope is None else layout.categories.get(scope, scope),
            "name": "" if pd.isna(frame["name"][i]) else str(frame["name"][i]),
            "pid": pids[i],
            "tid": int(frame["thread_id"][i]),
            "ts": ts[i],
            "dur": dur[i],
            "args": args[i],
            "recfn_id": int(frame["id"][i]),
            "recfn_parent_id": None if pd.isna(parent) else int(parent),
        }
        expected.append(msgspec.json.encode(event))
    written = complete_events(frame, layout, rows)
    assert encode_events(frame, layout) == written
    # An args text is kept as it is written, compacted: the same values as its dict's.
    assert json.loads(b"[" + written + b"]") == json.loads(b"[" + b",".join(expected) + b"]")
    if not frame["args"].isin(['{"n": 1.50, "u": "\\u00e9"}']).any():
        assert written == b",".join(expected)  # and the same text


@settings(max_examples=80, deadline=None)
@given(frames(), st.sampled_from([None, 0]), st.data())
def test_the_native_writer_writes_what_the_arrow_kernels_write(
    frame: pd.DataFrame, base: Any, data: Any
) -> None:
    """Byte for byte, on any rows of a batch (whose times choose their text as a whole)."""
    layout = Layout(Rows(frame), base)
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, len(frame) - 1)))), dtype=np.int64)
    arrow = complete_events(frame, layout, rows, use_native=False)
    assert complete_events(frame, layout, rows) == arrow


@pytest.mark.skipif(ENCODE_COMPLETE is None, reason="a pure build has no native writer")
def test_the_native_writer_refuses_codes_outside_their_table() -> None:
    one = np.zeros(1, dtype=np.int64)  # also the offsets of a table of no texts
    table = np.array([0, 2], dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    plain = np.ones(1, dtype=np.uint8)

    def encode(name_code: int, names_at: np.ndarray = table) -> bytes:
        code = np.array([name_code], dtype=np.int64)
        at = np.array([0, 2], dtype=np.int64)
        encoded: bytes = ENCODE_COMPLETE(
            one, one, 0, one, one, code, names_at, b'""', one, table, b'""', at, b"{}", plain,
            one, b"", np.zeros(0, np.uint8), none, none, none,
            np.zeros(0, np.uint8), 0,
        )  # fmt: skip
        return encoded

    assert encode(0).startswith(b'{"ph":"X","cat":"","name":""')
    with pytest.raises(ValueError, match="code outside"):
        encode(1)
    with pytest.raises(ValueError, match="offsets out of range"):
        encode(0, np.array([0, 3], dtype=np.int64))


def test_a_gzip_file_is_the_json_file_compressed(tmp_path: Any, monkeypatch: Any) -> None:
    """``.json.gz`` is compressed in a thread while the next batch is encoded: every batch
    arrives, in order."""
    import gzip

    from recfn.analysis.synthetic import make_synthetic_trace
    from recfn.formats.chrome import _writer, write_chrome_trace

    monkeypatch.setattr(_writer, "ROWS", 97)  # many batches
    frame = make_synthetic_trace(2_000, 3, seed=1, n_marks=40, n_memory_events=30)
    write_chrome_trace(frame, tmp_path / "t.json")
    write_chrome_trace(frame, tmp_path / "t.json.gz")
    plain = (tmp_path / "t.json").read_bytes()
    assert gzip.decompress((tmp_path / "t.json.gz").read_bytes()) == plain


@pytest.mark.parametrize("level", [1, 6])
def test_the_bytes_made_in_memory_are_the_file(tmp_path: Any, monkeypatch: Any, level: int) -> None:
    """`chrome_gz_bytes` (the notebook's embedded trace) holds what the file holds, every
    batch in order (compressed behind the encoding, in a thread), at either gzip stream
    (ISA-L's at level 1, zlib's otherwise); a table of one batch is compressed in the
    caller's thread, to the same bytes."""
    import gzip

    from recfn.analysis.synthetic import make_synthetic_trace
    from recfn.formats.chrome import _writer, chrome_gz_bytes, write_chrome_trace

    monkeypatch.setattr(_writer, "ROWS", 97)  # many batches
    frame = make_synthetic_trace(2_000, 3, seed=3, n_marks=40, n_memory_events=30)
    write_chrome_trace(frame, tmp_path / "t.json")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    made = chrome_gz_bytes(table, compresslevel=level)
    assert gzip.decompress(made) == (tmp_path / "t.json").read_bytes()
    monkeypatch.setattr(_writer, "ROWS", 50_000)  # one batch
    write_chrome_trace(frame, tmp_path / "one.json")
    made = chrome_gz_bytes(table, compresslevel=level)
    assert gzip.decompress(made) == (tmp_path / "one.json").read_bytes()


def test_a_failed_compressed_write_is_raised(tmp_path: Any, monkeypatch: Any) -> None:
    import gzip

    from recfn.analysis.synthetic import make_synthetic_trace
    from recfn.formats.chrome import write_chrome_trace

    def full(self: Any, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gzip.GzipFile, "write", full)
    with pytest.raises(OSError, match="No space left"):
        write_chrome_trace(make_synthetic_trace(300, 1, seed=2), tmp_path / "t.json.gz")


def test_async_ranges_without_ids_get_ids_no_other_has(tmp_path: Any, monkeypatch: Any) -> None:
    """A table without ``id`` (another tool's DataFrame) still gets one id per async range, the
    row's place in the table, whatever batch it is written in: viewers pair "b" and "e" events
    by id, so two ranges of one name must not share one."""
    from recfn.formats.chrome import _writer, write_chrome_trace

    monkeypatch.setattr(_writer, "ROWS", 4)  # several batches
    n = 10
    frame = pd.DataFrame(
        {
            "name": "fetch",
            "kind": "range",
            "start_ns": np.arange(n, dtype=np.int64) * 1000,
            "end_ns": np.arange(n, dtype=np.int64) * 1000 + 5000,
            "thread_id": 1,
            "is_async": True,
        }
    )
    write_chrome_trace(frame, tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    begins = [event["id"] for event in events if event["ph"] == "b"]
    assert sorted(begins) == list(range(n))
    ends = [event["id"] for event in events if event["ph"] == "e"]
    assert sorted(ends) == list(range(n))


@st.composite
def tables(draw: Any) -> pa.Table:
    """Rows of a few processes and threads, some named, some hosts and ranks missing, some
    memory rows."""
    n = draw(st.integers(1, 30))

    def column(values: Any) -> list[Any]:
        return draw(st.lists(values, min_size=n, max_size=n))

    start = np.array(column(st.integers(0, 10**6)), dtype=np.int64)
    table = pa.table(
        {
            "name": pa.array(column(st.sampled_from(["a", "b", "alloc"]))).dictionary_encode(),
            "kind": pa.array(column(st.sampled_from(["range", "memory"]))).dictionary_encode(),
            "scope": pa.array(column(SCOPES), pa.string()).dictionary_encode(),
            "start_ns": start,
            "end_ns": start + 5,
            "thread_id": pa.array(column(st.sampled_from([1, 2, 3])), pa.int64()),
            "thread_name": pa.array(
                column(st.none() | st.sampled_from(["main", "w"])), pa.string()
            ),
            "pid": pa.array(column(st.none() | st.sampled_from([5, 6])), pa.int64()),
            "host": pa.array(column(st.none() | st.sampled_from(["a", "b", ""])), pa.string()),
            "rank": pa.array(column(st.none() | st.sampled_from([0, 1])), pa.int32()),
            "memory_bytes": pa.array(column(st.integers(-9, 9)), pa.int64()),
            "device": pa.array(
                column(st.none() | st.just("cuda:0")), pa.string()
            ).dictionary_encode(),
        }
    )
    return table.drop_columns(draw(st.sets(st.sampled_from(["host", "rank", "thread_name"]))))


@settings(max_examples=60, deadline=None)
@given(tables())
def test_a_table_is_laid_out_as_its_frame(table: pa.Table) -> None:
    """An Arrow table's layout reads only its distinct processes and threads and its memory
    rows: the same as the DataFrame's, read whole."""
    read, whole = Layout(Rows(table)), Layout(Rows(table.to_pandas()))
    assert read.processes == whole.processes
    assert read.header_events() == whole.header_events()
    assert read.categories == whole.categories
    for ours, theirs in zip(read.totals, whole.totals):
        assert np.array_equal(ours, theirs)


@st.composite
def batches(draw: Any) -> pa.Table:
    """Rows as captures hold them (closed ranges, ids, integer args), with what sends a row or
    a batch to its frame mixed in: marks, memory rows, open and async ranges, args texts,
    shapes, times large enough for three decimals, remapped pids."""
    n = draw(st.integers(1, 25))

    def column(values: Any) -> list[Any]:
        return draw(st.lists(values, min_size=n, max_size=n))

    start = np.array(column(st.integers(0, 10**9)), dtype=np.int64)
    start += draw(st.sampled_from([0, 1_700_000_000_000_000_000]))
    end = start + np.array(column(DURATIONS), dtype=np.int64)
    kinds = st.sampled_from(["range"]) | st.sampled_from(["range", "mark", "memory"])
    columns: dict[str, Any] = {
        "id": pa.array(np.arange(n, dtype=np.int64) + 3),
        "parent_id": pa.array(column(st.none() | st.integers(0, 9)), pa.int64()),
        "name": pa.array(column(NAMES), pa.string()),
        "kind": pa.array(column(kinds)).dictionary_encode(),
        "scope": pa.array(column(SCOPES), pa.string()).dictionary_encode(),
        "start_ns": start,
        "end_ns": pa.array(
            [None if gone else int(e) for e, gone in zip(end, column(st.booleans()))]
            if draw(st.booleans())
            else end,
            pa.int64(),
        ),
        "thread_id": pa.array(column(st.sampled_from([1, 2, 2**40])), pa.int64()),
        "pid": pa.array(column(st.none() | st.sampled_from([5, 6])), pa.int64()),
        "host": pa.array(column(st.sampled_from(["a", "b"] if draw(st.booleans()) else ["a"]))),
        "sequence_nr": pa.array(column(st.integers(-1, 3)), pa.int64()),
        "hidden_calls": pa.array(column(st.none() | st.integers(0, 9)), pa.int64()),
    }
    if draw(st.booleans()):
        columns["name"] = columns["name"].dictionary_encode()
    if draw(st.booleans()):
        columns["is_async"] = pa.array(column(st.none() | st.booleans()), pa.bool_())
    if draw(st.booleans()):
        columns["args"] = pa.array(column(ARGS), pa.string())
    if draw(st.booleans()):
        columns["memory_bytes"] = pa.array(column(st.integers(-9, 9)), pa.int64())
    if draw(st.booleans()):
        columns["input_shapes"] = pa.array(
            column(st.none() | st.just([[2, 3]])), pa.list_(pa.list_(pa.int64()))
        )
    return pa.table(columns)


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from([None, 0]))
def test_a_tables_batch_is_written_as_its_frames(table: pa.Table, base: Any) -> None:
    """A table's closed ranges are written from its Arrow columns, the rest from their frame:
    byte for byte what the whole frame writes."""
    layout = Layout(Rows(table), base)
    frame = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    expected = encode_events(frame, layout, layout.totals, 7)
    assert encode_part(table, layout, layout.totals, 7) == expected


@st.composite
def ranges_and_plain_marks(draw: Any) -> pa.Table:
    """Closed ranges and marks without args (every profile's start and stop marks), the batch
    the writer encodes from Arrow alone; the other columns as `batches` draws them."""
    n = draw(st.integers(2, 20))

    def column(values: Any) -> list[Any]:
        return draw(st.lists(values, min_size=n, max_size=n))

    start = np.array(column(st.integers(0, 10**9)), dtype=np.int64)
    start += draw(st.sampled_from([0, 1_700_000_000_000_000_000]))
    kind = column(st.sampled_from(["range", "mark"]) | st.sampled_from([None, "mark"]))
    end = [int(s + d) if k == "range" else None for s, d, k in zip(start, column(DURATIONS), kind)]
    columns: dict[str, Any] = {
        "id": pa.array(np.arange(n, dtype=np.int64) + 3),
        "parent_id": pa.array(column(st.none() | st.integers(0, 9)), pa.int64()),
        "name": pa.array(column(NAMES), pa.string()),
        "kind": pa.array(kind, pa.string()).dictionary_encode(),
        "scope": pa.array(column(SCOPES), pa.string()).dictionary_encode(),
        "start_ns": start,
        "end_ns": pa.array(end, pa.int64()),
        "thread_id": pa.array(column(st.sampled_from([1, 2, 2**40])), pa.int64()),
        "host": pa.array(column(st.sampled_from(["a"]))),
        "sequence_nr": pa.array([-1] * n, pa.int64()),
        "is_async": pa.array([False] * n, pa.bool_()),
    }
    if draw(st.booleans()):
        columns["pid"] = pa.array(column(st.none() | st.sampled_from([5, 6])), pa.int64())
    if draw(st.booleans()):
        columns["hidden_calls"] = pa.array(
            [None if k == "mark" else h for k, h in zip(kind, column(st.integers(0, 9)))],
            pa.int64(),
        )
    if draw(st.booleans()):
        columns["name"] = columns["name"].dictionary_encode()
    if draw(st.booleans()):
        del columns["parent_id"]
    return pa.table(columns)


@settings(max_examples=100, deadline=None)
@given(ranges_and_plain_marks(), st.sampled_from([None, 0]))
def test_plain_marks_are_written_from_arrow_as_their_frame_writes_them(
    table: pa.Table, base: Any
) -> None:
    layout = Layout(Rows(table), base)
    frame = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    expected = encode_events(frame, layout, layout.totals, 7)
    assert encode_part(table, layout, layout.totals, 7) == expected
