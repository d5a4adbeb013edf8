"""The native decoder (recfn.native._cchrome, compiled builds) gives the very table the msgspec path
gives: every trace is read both ways (``_chrome_import.NATIVE`` on and off) and compared."""

from __future__ import annotations

import functools
import gzip
import json
import random
import struct
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from cells import same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_chrome_errors import bases, fuzzer

import recfn
from recfn.errors import TraceFormatError
from recfn.formats import chrome
from recfn.formats.chrome import _reader as _chrome_import
from recfn.formats.chrome._reader import EVENTS, NativeBatch, decode_events
from recfn.formats.chrome._stream import MAX_DEPTH
from recfn.formats.chrome._times import BEYOND, exact_times, nanoseconds

ROOT = Path(__file__).resolve().parents[3]
NATIVE = _chrome_import.NATIVE
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="recfn.native._cchrome is not built (pure install)"
)


@contextmanager
def decoder(native: Any) -> Iterator[None]:
    """Read with `native` as the native decoder (None: the msgspec path only)."""
    saved = _chrome_import.NATIVE
    _chrome_import.NATIVE = native
    try:
        yield
    finally:
        _chrome_import.NATIVE = saved


@contextmanager
def batches_of(n: int) -> Iterator[None]:
    """Read traces `n` events at a time where read whole, about `n` times 100 bytes at a time
    where streamed, so that small traces come in several batches (each an args part)."""
    saved = chrome.BATCH, chrome.inflated
    chrome.BATCH = n
    chrome.inflated = functools.partial(saved[1], chunk=100 * n)
    try:
        yield
    finally:
        chrome.BATCH, chrome.inflated = saved


def outcome(read: Callable[[Path], Any], path: Path, native: Any) -> Any:
    with decoder(native):
        try:
            return read(path)
        except TraceFormatError as error:
            return f"TraceFormatError: {error}"


def assert_same_both_ways(path: Path) -> None:
    """The table, the frame or the error of `path` do not depend on the native decoder."""
    table, plain = (outcome(chrome.read_chrome_table, path, native) for native in (NATIVE, None))
    if isinstance(plain, str):
        assert table == plain
        return
    assert isinstance(table, pa.Table), table
    assert table.equals(plain, check_metadata=True)
    frame, plain_frame = (outcome(chrome.read_chrome_trace, path, n) for n in (NATIVE, None))
    pd.testing.assert_frame_equal(frame, plain_frame)
    for name in ("input_shapes", "input_dtypes"):
        if name in table.column_names:  # shared cells (schema.list_cells), pyarrow's values
            cells = table.column(name).to_pandas()
            assert all(map(same, frame[name], cells)) and frame[name].dtype == object


def native_columns(text: bytes, max_depth: int = MAX_DEPTH) -> dict[str, Any] | None:
    columns: dict[str, Any] | None = NATIVE(text, max_depth, -1, 0)
    return columns


def torch_events(n: int) -> list[dict[str, Any]]:
    """Events shaped like torch.profiler's: complete events with torch's args, a few others."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "main"}}
    ]
    for i in range(n):
        args: dict[str, Any] = {"External id": i, "Ev Idx": i}
        if i % 3 == 0:
            args |= {"Sequence number": i, "Fwd thread id": 1}
        if i % 4 == 0:  # recorded with record_shapes=True
            args |= {"Input type": ["float", "Scalar"], "Input Dims": [[i % 7, 8], []]}
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"aten::op{i % 5}",
                "pid": 7,
                "tid": 1 + i % 2,
                "ts": 10.5 * i,
                "dur": 3.25,
                "args": args,
            }
        )
        if i % 10 == 0:
            events.append(
                {
                    "ph": "i",
                    "s": "t",
                    "name": "[memory]",
                    "pid": 7,
                    "tid": 1,
                    "ts": 10.5 * i,
                    "args": {"Bytes": 64, "Device Type": 0},
                }
            )
    return events


def with_flows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`events` with torch's forward-backward flows ("s" at an op, "f" with ``bp`` at a later
    one, as a training step records them) after every third complete event, and an instant at
    the same ts as every sixth flow (rows that tie)."""
    out: list[dict[str, Any]] = []
    for i, event in enumerate(events):
        out.append(event)
        if event["ph"] != "X" or i % 3:
            continue
        flow = {"ph": "s" if i % 2 else "f", "id": i // 2, "pid": event["pid"]}
        flow |= {"tid": event["tid"], "ts": event["ts"], "cat": "fwdbwd", "name": "fwdbwd"}
        out.append(flow if i % 2 else flow | {"bp": "e"})
        if i % 18 == 0:
            out.append({"ph": "i", "s": "t", "name": "tie", "pid": 7, "tid": 1, "ts": event["ts"]})
    return out


# -- the decoder itself ---------------------------------------------------------------------


def test_common_batches_decode_natively_into_the_columns_msgspec_gives() -> None:
    events = torch_events(30)
    text = json.dumps(events, indent=1).encode()
    batch = decode_events(text, MAX_DEPTH)
    assert isinstance(batch, NativeBatch)
    complete = [e for e in events if e["ph"] == "X"]
    scalars = batch.scalars()
    assert scalars["ts"].tolist() == [round(e["ts"] * 1000) for e in complete]  # ns
    assert scalars["pid"].tolist() == [7] * 30 and scalars["recfn_id"] is None
    assert scalars["name"].to_pylist() == [e["name"] for e in complete]
    args = _chrome_import._ArgsPart.native(batch.columns)
    assert args.strings.to_pylist() == [
        json.dumps(e["args"], separators=(",", ":")) for e in complete
    ]
    assert args.ints["sequence_nr"].tolist() == [i if i % 3 == 0 else -1 for i in range(30)]
    # torch's memory instants are columns of the batch too; the others go to msgspec
    assert [e.ph for e in batch.others] == ["M"] and batch.columns["columnar.n"] == 3


@pytest.mark.parametrize("ascii_only", [True, False])
def test_names_with_escapes_decode_as_msgspec_decodes_them(ascii_only: bool) -> None:
    names = ['a"b', "x\\y", "é", "😀", "\x00\x1f", "tab\there", "a/b", "\u2028"]
    events = [{"ph": "X", "name": n, "cat": n, "pid": 1, "tid": 1} for n in names]
    text = json.dumps(events, ensure_ascii=ascii_only).encode()
    columns = native_columns(text)
    assert columns is not None
    assert columns["name.values"] == [e.name for e in EVENTS.decode(text)] == names
    same = b'[{"ph":"X","name":"a\\/\\u00e9","pid":1,"tid":1},{"ph":"X","name":"a/\xc3\xa9","pid":1,"tid":1}]'
    columns = native_columns(same)
    assert columns is not None and columns["name.values"] == ["a/é"]
    assert columns["name.codes"] == bytes(8)  # one string, however it is written


def test_the_members_of_a_list_decode_as_the_list_does() -> None:
    """A stream's batch is its members' text (no brackets, not copied); the same columns."""
    members = ",".join(json.dumps(e) for e in torch_events(50)).encode()
    listed, bare = (NATIVE(text, MAX_DEPTH, -1, 0, None, not brackets)
                    for text, brackets in ((b"[" + members + b"]", True), (members, False)))  # fmt: skip
    assert listed is not None and bare == listed
    for text in (b"", b" ", members + b"]", b"[" + members, members + b",", members + b",{}]"):
        assert NATIVE(memoryview(text), MAX_DEPTH, -1, 0, None, True) is None, text


def test_many_distinct_names_keep_their_codes_as_the_table_grows() -> None:
    names = [f"op{i % 1500}" for i in range(4000)]
    events = [{"ph": "X", "name": n, "cat": n[:3], "pid": 1, "tid": 1} for n in names]
    batch = decode_events(json.dumps(events).encode(), MAX_DEPTH)
    assert isinstance(batch, NativeBatch)
    assert batch.scalars()["name"].to_pylist() == names
    assert batch.columns["name.values"] == names[:1500]


@pytest.mark.parametrize(
    "event",
    [
        '{"ph":"X","name":7,"pid":1,"tid":1}',  # a name that is not a string
        '{"ph":"X","pid":1,"tid":1,"other":1}',  # a field Event lacks
        '{"ph":"X","ph":"X","pid":1,"tid":1}',  # a field twice
        '{"p\\u0068":"X","pid":1,"tid":1}',  # an escaped key
        '{"ph":"X","pid":1,"tid":1,"s":"t"}',  # a kept field on a complete event
        '{"ph":"X","pid":1.0,"tid":1}',  # a pid that is neither an integer nor a string
        '{"ph":"X","pid":1,"tid":null}',
        '{"ph":"X","tid":1}',  # no pid
        '{"ph":"X","pid":9223372036854775808,"tid":1}',  # beyond int64
        '{"ph":"X","pid":1,"tid":1,"ts":1e400}',  # beyond float64
        '{"ph":"X","pid":1,"tid":1,"ts":"1"}',
        '{"ph":"X","pid":1,"tid":1,"ts":01}',  # not JSON
        '{"ph":"X","pid":1,"tid":1,"args":{"a":1e999}}',
        '{"ph":"X","pid":1,"tid":1,"args":{"Sequence number":1.5}}',
        '{"ph":"X","pid":1,"tid":1,"args":{"Sequence\\u0020number":1}}',
        '{"ph":"X","pid":1,"tid":1,"args":{"a":"\\ud800"}}',  # a lone surrogate
        '{"ph":"X","pid":1,"tid":1,"args":{"a":"\udcff"}}',  # not UTF-8 (byte 0xff)
        '{"ph":"X","pid":1,"tid":1,"args":{"a":"\x01"}}',  # a control character
        '{"ph":"X","pid":1,"tid":1,"args":{"a":[1,]}}',
        '{"ph":"X","pid":1,"tid":1,"recfn_id":-1.5}',
        '{"ph":"i","pid":1,"tid":1,"unknown":1}',  # another event with a field Event lacks
    ],
)
def test_batches_it_does_not_fully_understand_are_left_to_msgspec(event: str) -> None:
    common = '{"ph":"X","name":"n","pid":1,"tid":1,"ts":1,"dur":1}'
    text = f"[{common},{event}]".encode("utf-8", "surrogateescape")
    assert native_columns(f"[{common}]".encode()) is not None
    assert native_columns(text) is None
    try:
        decoded = decode_events(text, MAX_DEPTH)
    except ValueError:  # msgspec's errors, which the readers report
        return
    assert not isinstance(decoded, NativeBatch)


def test_string_pids_and_tids_decode_natively_as_msgspec_decodes_them(tmp_path: Path) -> None:
    """torch writes its profiler's own span with pid "Spans" and tid "PyTorch Profiler": the
    batch that holds it is read natively too, and the trace reads the same both ways."""
    events = torch_events(30)
    span = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans"}
    span |= {"tid": "PyTorch Profiler", "ts": 1.0, "dur": 300.0, "args": {"Op count": 0}}
    events[10:10] = [span, span | {"pid": "Sp\u00e4ns", "tid": 1}, span | {"tid": "1"}]
    batch = decode_events(json.dumps(events).encode(), MAX_DEPTH)
    assert isinstance(batch, NativeBatch)
    complete = [event for event in events if event["ph"] == "X"]
    for key in ("pid", "tid"):
        assert batch.scalars()[key].tolist() == [event[key] for event in complete]
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(events))
    for n in (10**6, 4):
        with batches_of(n):
            assert_same_both_ways(path)


def test_nesting_deeper_than_max_depth_is_left_to_msgspec() -> None:
    def batch(depth: int) -> bytes:  # the list, the event, its args, then nested lists
        nested = "[" * (depth - 3) + "]" * (depth - 3)
        return f'[{{"ph":"X","pid":1,"tid":1,"args":{{"a":{nested}}}}}]'.encode()

    assert native_columns(batch(MAX_DEPTH)) is not None
    assert native_columns(batch(MAX_DEPTH + 1)) is None
    assert native_columns(batch(MAX_DEPTH), MAX_DEPTH - 1) is None


NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:.25e}"),
    st.builds(
        lambda sign, whole, fraction, e, exp: f"{sign}{whole}{fraction}{e}{exp}",
        st.sampled_from(["", "-"]),
        st.sampled_from(["0", "1", "9", "12345678901234567", "900719925474099"]),
        st.sampled_from(["", ".0", ".5", ".30000000000000004441", ".000001", ".1234567890123"]),
        st.sampled_from(["e", "E", "e+", "e-", "E-"]),
        st.integers(0, 330),
    ),
    st.sampled_from(["-0", "-0.0", "0.0e5", "-0e-3", "1e22", "1e23", "9007199254740993"]),
    st.sampled_from(["9007199254740992", "9007199254.740993", "1700000000123.456", "0.1"]).map(
        lambda digits: digits + "e-22"
    ),
    st.integers(10**15, 10**17).map(lambda m: f"{m // 1000}.{m % 1000:03d}"),
)


def msgspec_ns(text: bytes) -> list[int]:
    """The ts of the events of `text` as the msgspec path reads them (int64 nanoseconds)."""
    events = exact_times(EVENTS.decode(text), text)
    return nanoseconds([e.ts for e in events], "ts", "t").tolist()


@settings(max_examples=400, deadline=None)
@given(number=NUMBERS)
def test_times_convert_as_the_msgspec_path_converts_them(number: str) -> None:
    """To the same nanoseconds; numbers msgspec refuses, and times int64 nanoseconds cannot
    hold, are not read natively."""
    assert_converts_as_msgspec(number)


def assert_converts_as_msgspec(number: str) -> None:
    """The native decoder reads the time `number` as the msgspec path does, or leaves it."""
    text = f'[{{"ph":"X","pid":1,"tid":1,"ts":{number}}}]'.encode()
    columns = native_columns(text)
    try:
        expected = msgspec_ns(text)
    except (msgspec.ValidationError, TraceFormatError):
        assert columns is None
        return
    if columns is not None:
        assert expected[0] != BEYOND
        assert columns["ts"] == struct.pack("=q", expected[0])


@pytest.mark.parametrize(
    ("ts", "large"),
    [("1.5", False), ("-0", False), ("null", False), ("8796093022207.999", False),
     (f"{2**43}", True), ("-1e20", True), ("12345678901234567.123", True)],
)  # fmt: skip
def test_another_events_time_is_flagged_where_a_float_loses_nanoseconds(
    ts: str, large: bool
) -> None:
    """The others' times go to msgspec; where the decoder says none is large, reading them
    exactly from the text (`exact_times`, which is then skipped) changes nothing."""
    text = f'[{{"ph":"X","pid":1,"tid":1,"ts":1}},{{"ph":"i","ts":{ts},"dur":{ts}}}]'.encode()
    columns = native_columns(text)
    assert columns is not None and columns["others.large"] is large
    plain = EVENTS.decode(columns["others"])
    exact = exact_times(EVENTS.decode(columns["others"]), columns["others"])
    unchanged = [(repr(e.ts), repr(e.dur)) for e in exact] == [
        (repr(e.ts), repr(e.dur)) for e in plain
    ]
    assert unchanged or large


@settings(max_examples=300, deadline=None)
@given(
    sign=st.sampled_from(["", "-"]),
    whole=st.integers(0, 10**15 - 1),
    fraction=st.sampled_from(["", ".0", ".5", ".05", ".123", ".999", ".1234", ".5e1"]),
)
def test_whole_nanosecond_times_convert_as_the_msgspec_path_converts_them(
    sign: str, whole: int, fraction: str
) -> None:
    """Times of up to 15 digits and 3 decimals (torch's form, read from their digits without a
    double), beyond 2^43 us too, and the forms next to it (4 decimals, an exponent)."""
    assert_converts_as_msgspec(f"{sign}{whole}{fraction}")


def test_many_random_times_convert_to_the_same_nanoseconds() -> None:
    """Mantissas up to 2^54, points anywhere, exponents: both sides of the native decoder's
    fast path for doubles (2^53) and of the exact one for large times (2^43 us)."""
    rng = random.Random(5)
    texts = []
    for _ in range(20_000):
        digits = str(rng.randrange(1, 2**54))
        point = rng.randrange(len(digits) + 1)
        text = f"{digits[:point] or 0}.{digits[point:] or 0}"
        text += f"e{rng.randrange(-25, 25)}" if rng.random() < 0.3 else ""
        texts.append(f"-{text}" if rng.random() < 0.5 else text)

    def batch(numbers: list[str]) -> bytes:
        return (
            "[" + ",".join(f'{{"ph":"X","pid":1,"tid":1,"ts":{t}}}' for t in numbers) + "]"
        ).encode()

    # Times int64 nanoseconds cannot hold are left to msgspec's path, which refuses them.
    texts = [t for t in texts if msgspec_ns(batch([t]))[0] != BEYOND]
    assert len(texts) > 10_000
    columns = native_columns(batch(texts))
    assert columns is not None
    assert np.frombuffer(columns["ts"], np.int64).tolist() == msgspec_ns(batch(texts))


def test_results_hold_no_extra_references_and_nothing_leaks() -> None:
    text = json.dumps(with_flows(torch_events(200))).encode()
    columns = native_columns(text)
    assert columns is not None
    # Each value is held by its container and the loop, and passed to getrefcount: 3.
    for value in columns.values():
        assert sys.getrefcount(value) == 3 or value is None or isinstance(value, int)
    for name in columns["name.values"]:
        assert sys.getrefcount(name) == 3
    del columns
    tracemalloc.start()
    try:
        # A round may grow one of the process's tables for good, once, depending on what ran
        # before it (after tests/notebook_ext/test_fallback.py, or other tests in an xdist
        # worker: one 3.7 MB block, in the first or the second round): a leak grows every round.
        grown = []
        for _round in range(3):
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(200):
                native_columns(text)
                native_columns(text[:-2])  # refused halfway
            grown.append(tracemalloc.get_traced_memory()[0] - before)
        assert min(grown) < 64 << 10, grown
    finally:
        tracemalloc.stop()


SPARE_BYTES = _chrome_import._native("spare_bytes")


@pytest.mark.parametrize("bad", [False, True], ids=["read", "failed"])
@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_a_read_frees_the_buffers_kept_for_the_next_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streamed: bool, bad: bool
) -> None:
    """decode keeps a batch's buffers for the next one; a read releases them when it ends,
    whether it read the file through or failed after native batches."""
    native_columns(json.dumps(torch_events(30)).encode())
    assert SPARE_BYTES() > 0  # the probe sees them
    events = torch_events(300) + ([{"ph": "X", "ts": 1, "dur": -1}] if bad else [])
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    if not streamed:
        monkeypatch.setattr(chrome, "_read_streamed", lambda source, max_bytes: None)
    taken = []

    def spy(text: bytes, max_depth: int, *defaults: int) -> Any:
        columns = NATIVE(text, max_depth, *defaults)
        taken.append(SPARE_BYTES() > 0)
        return columns

    with decoder(spy), batches_of(100):
        if bad:
            with pytest.raises(TraceFormatError, match="dur"):
                chrome.read_chrome_table(path)
        else:
            chrome.read_chrome_table(path)
    assert len(taken) > 1 and all(taken)  # several batches, each leaving its buffers
    assert SPARE_BYTES() == 0


# -- whole traces: the same table both ways -------------------------------------------------


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "data").glob("*.json*")), ids=str)
def test_the_test_traces_read_the_same_both_ways(path: Path) -> None:
    assert_same_both_ways(path)


@pytest.mark.parametrize("form", ["list", "object", "gzip"])
def test_torch_shaped_and_recfn_written_traces_read_the_same_both_ways(
    tmp_path: Path, form: str
) -> None:
    events = torch_events(3000)
    path = tmp_path / ("t.json.gz" if form == "gzip" else "t.json")
    document: Any = events if form == "list" else {"traceEvents": events, "baseTimeNanoseconds": 5}
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data) if form == "gzip" else data)
    assert_same_both_ways(path)
    with recfn.profile() as prof:
        for i in range(50):
            with recfn.record_function(f"step{i % 3}"), recfn.record_function("inner"):
                pass
    written = tmp_path / "recfn.json"
    chrome.write_chrome_trace(prof.table, written)
    assert_same_both_ways(written)


def test_the_table_of_a_native_read_is_built_from_native_batches(tmp_path: Path) -> None:
    """The comparisons above compare two paths: the native one is taken for common traces."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(torch_events(100)))
    taken = []

    def spy(text: bytes, max_depth: int, *defaults: int) -> Any:
        columns = NATIVE(text, max_depth, *defaults)
        taken.append(columns is not None)
        return columns

    with decoder(spy):
        chrome.read_chrome_table(path)
    assert taken and all(taken)


def test_shapes_of_the_simple_form_are_never_decoded_by_msgspec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(torch_events(100)))
    decoded: list[bytes] = []

    def spy(text: bytes) -> Any:
        decoded.append(text)
        return torch_args(text)

    torch_args = _chrome_import._torch_args
    monkeypatch.setattr(_chrome_import, "_torch_args", spy)
    table = chrome.read_chrome_table(path)
    assert table["input_shapes"].to_pylist()[:2] == [[[0, 8], []], None]
    assert not any(b"Input Dims" in text for text in decoded)
    with decoder(None):  # the spy sees the msgspec path's decode
        chrome.read_chrome_table(path)
    assert any(b"Input Dims" in text for text in decoded)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_fuzzed_traces_read_the_same_both_ways(tmp_path_factory: Any, seed: int) -> None:
    folder = tmp_path_factory.getbasetemp() / "fuzz-native"
    folder.mkdir(exist_ok=True)
    _, suffix, data = fuzzer().make_case(random.Random(seed), bases(str(folder)), bomb_mib=1)
    path = folder / f"case{suffix}"
    path.write_bytes(data)
    assert_same_both_ways(path)


def mostly(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`common` nine times in ten: most generated batches suit the native decoder, the others
    reach each of its refusals."""
    return st.integers(0, 9).flatmap(lambda k: rare if k == 0 else common)


TEXTS = st.text(
    st.one_of(st.sampled_from('"\\/\b\f\n\r\t\x00é€😀{}[],: '), st.characters()), max_size=6
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=8,
)
PLAIN = st.sampled_from(["aten::mm", "step", "é", "😀", "", "a b"])
"""Names without escapes (unless ASCII is asked for)."""
TORCH_INTS = st.sampled_from(["Sequence number", "Fwd thread id"])
INT64 = st.integers(-(2**63), 2**63 - 1)
SIMPLE_DIMS = st.none() | st.lists(st.none() | st.lists(st.none() | INT64, max_size=3), max_size=3)
""""Input Dims" values the native decoder reads: nulls at each level, empty lists."""
ODD_ITEMS = st.one_of(
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXTS,
    st.booleans(),
    JSON_VALUES,
)
DIMS = mostly(
    SIMPLE_DIMS,
    st.lists(st.lists(ODD_ITEMS | st.lists(INT64, max_size=2), max_size=2), max_size=2)
    | st.lists(ODD_ITEMS, max_size=2)
    | JSON_VALUES,
)
"""Mostly of the simple form, else ints beyond int64, floats, nested tensor lists ([[[1]]])..."""
DTYPES = mostly(
    st.none() | st.lists(st.none() | PLAIN | TEXTS, max_size=3),
    st.lists(ODD_ITEMS | st.lists(PLAIN, max_size=1), max_size=2) | JSON_VALUES,
)
"""Mostly nulls or lists of strings (escapes and unicode among them), else numbers, lists..."""
SHAPES_ARGS = st.fixed_dictionaries(
    {},
    optional={
        "Input Dims": DIMS,
        "Input type": DTYPES,
        "Input Strides": SIMPLE_DIMS,
        "Concrete Inputs": st.lists(PLAIN, max_size=2),
        "a": st.just("Input Dims"),  # the key's text as a value elsewhere
    },
)
FIELDS = {
    "name": mostly(PLAIN, st.none() | TEXTS | st.integers()),
    "cat": mostly(PLAIN, st.none() | TEXTS),
    "ts": mostly(st.integers(0, 10**6) | st.floats(0, 1e6), NUMBERS.map(json.loads)),
    "dur": mostly(st.integers(0, 100) | st.floats(0, 100), st.none() | st.just(-1)),
    "pid": mostly(st.integers(0, 2), st.sampled_from([-(2**63), 2**63, "Spans", None, 1.0])),
    "tid": mostly(st.integers(0, 2), st.sampled_from([2**63 - 1, -1, "1", True])),
    "args": mostly(
        st.tuples(
            st.dictionaries(
                PLAIN | TORCH_INTS, st.integers(-9, 9) | PLAIN | JSON_VALUES, max_size=4
            ),
            SHAPES_ARGS,
        ).map(lambda pair: pair[0] | pair[1]),
        st.dictionaries(TEXTS | TORCH_INTS | st.just("Input Dims"), JSON_VALUES, max_size=3)
        | JSON_VALUES,
    ),
    "recfn_id": st.integers(0, 5),
    "recfn_parent_id": st.integers(0, 5) | st.none(),
}
RARE_FIELDS = {"s": st.just("t"), "id": st.integers(0, 3), "bp": st.just("e")}
PHASES = mostly(st.just("X"), st.sampled_from(["B", "E", "i", "C", "M", "s", "f", "?", None]))
EVENT = st.fixed_dictionaries(
    {"ph": PHASES, **{key: FIELDS[key] for key in ("pid", "tid", "ts")}},
    optional={key: FIELDS[key] for key in FIELDS if key not in ("pid", "tid", "ts")},
)
EVENT_LISTS = st.lists(
    st.tuples(EVENT, mostly(st.just({}), st.fixed_dictionaries({}, optional=RARE_FIELDS))).map(
        lambda pair: {**pair[0], **pair[1]}
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=EVENT_LISTS,
    ascii_only=mostly(st.just(False), st.just(True)),
    indent=st.sampled_from([None, 1]),
    form=st.sampled_from(["list", "object"]),
    batch=mostly(st.just(10**6), st.integers(1, 3)),
)
def test_generated_traces_read_the_same_both_ways(
    tmp_path_factory: Any,
    events: list[dict[str, Any]],
    ascii_only: bool,
    indent: int | None,
    form: str,
    batch: int,
) -> None:
    """`batch`: events decoded at a time, so that some traces come in several parts (the
    shapes columns are all-or-nothing per part, and kept only where every part has them)."""
    path = tmp_path_factory.getbasetemp() / "generated.json"
    document: Any = events if form == "list" else {"traceEvents": events}
    text = json.dumps(document, ensure_ascii=ascii_only, indent=indent)
    path.write_bytes(text.encode("utf-8", "surrogatepass"))  # lone surrogates: bytes not UTF-8
    with batches_of(batch):
        assert_same_both_ways(path)


SHAPED_EVENTS = st.lists(
    st.fixed_dictionaries(
        {"ph": st.just("X"), "pid": st.just(1), "tid": st.integers(0, 1), "ts": st.integers(0, 99)},
        optional={"name": PLAIN, "dur": st.integers(0, 9), "args": SHAPES_ARGS},
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=SHAPED_EVENTS,
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 1]),
    batch=st.sampled_from([10**6, 1, 3]),
)
def test_generated_shapes_args_read_the_same_both_ways(
    tmp_path_factory: Any,
    events: list[dict[str, Any]],
    ascii_only: bool,
    indent: int | None,
    batch: int,
) -> None:
    """Traces of complete events with torch's record_shapes args, simple and not."""
    path = tmp_path_factory.getbasetemp() / "shapes.json"
    text = json.dumps(events, ensure_ascii=ascii_only, indent=indent)
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    with batches_of(batch):
        assert_same_both_ways(path)


# -- torch's record_shapes args: fixed cases ------------------------------------------------

SHAPED = '{"Concrete Inputs":["",""],"Input type":["float","float"],"Input Strides":[[8,1],[8,1]],"Input Dims":[[8,8],[8,8]]}'
"""The args of a cpu_op of a torch trace recorded with record_shapes=True."""


@pytest.mark.parametrize(
    ("args", "native"),
    [
        (SHAPED, True),
        ('{"Input Dims":[],"Input type":[]}', True),
        ('{"Input Dims":[[]],"Input type":[""]}', True),
        ('{"Input Dims":null,"Input type":null}', True),
        ('{"Input Dims":[null,[null,1],[]],"Input type":[null,"int",null]}', True),
        ('{"Input Dims":[[9223372036854775807,-9223372036854775808,-0]]}', True),
        ('{ "Input Dims" : [ [ 8 , 8 ] , null ] , "Input type" : [ "float" , null ] }', True),
        ('{"Input type":["a\\"b","\\u00e9\\ud83d\\ude00\\/","tab\\t","é😀\\u0000"]}', True),
        ('{"Input type":["float"]}', True),  # no dims: null
        ('{"External id":1}', True),  # neither: nulls
        ('{"a":"Input Dims"}', True),  # the key's text as a value
        ('{"a":{"Input Dims":[[1.5]],"Input type":[1]}}', True),  # not torch's: nested
        ('["Input Dims",[[1]]]', True),  # args that are not an object
        ("null", True),
        ('{"Input Dims":[[9223372036854775808]]}', False),  # beyond int64
        ('{"Input Dims":[[-9223372036854775809]]}', False),
        ('{"Input Dims":[[1.0]]}', False),  # a float
        ('{"Input Dims":[[1e2]]}', False),
        ('{"Input Dims":[[[1]]]}', False),  # a nested tensor list
        ('{"Input Dims":[[[]],[1]]}', False),
        ('{"Input Dims":[8,8]}', False),
        ('{"Input Dims":[["8"]]}', False),
        ('{"Input Dims":[[true]]}', False),
        ('{"Input Dims":"[[8]]"}', False),
        ('{"Input Dims":{}}', False),
        ('{"Input Dims":[{}]}', False),
        ('{"Input Dims":7}', False),
        ('{"Input type":[1]}', False),  # a number in Input type
        ('{"Input type":[1.5,"float"]}', False),
        ('{"Input type":[["float"]]}', False),
        ('{"Input type":"float"}', False),
        ('{"Input type":[true]}', False),
        ('{"Input Dims":[[1]],"Input Dims":[[2]]}', False),  # a key twice
        ('{"Input type":["a"],"Input Dims":[[1]],"Input type":["b"]}', False),
    ],
)
def test_shapes_args_read_the_same_both_ways(tmp_path: Path, args: str, native: bool) -> None:
    """Among events with torch's shapes args, one with `args`: read natively where `native`
    (the simple form), else left to Python (which decides what the columns are); the same table
    both ways, either way."""
    events = [
        f'{{"ph":"X","name":"aten::mm","pid":1,"tid":1,"ts":{i},"dur":1,"args":{a}}}'
        for i, a in enumerate([SHAPED, args, SHAPED])
    ]
    text = f"[{','.join(events)}]".encode()
    columns = native_columns(text)
    assert columns is not None
    assert (columns["input_shapes"] is not None) == native
    assert (columns["input_dtypes"] is not None) == native
    path = tmp_path / "t.json"
    path.write_bytes(text)
    assert_same_both_ways(path)
    if native:
        table = chrome.read_chrome_table(path)
        first = {"input_shapes": [[8, 8], [8, 8]], "input_dtypes": ["float", "float"]}
        assert {key: table[key][0].as_py() for key in first} == first


def test_shapes_args_under_an_escaped_key_leave_the_batch_to_msgspec(tmp_path: Path) -> None:
    text = b'[{"ph":"X","pid":1,"tid":1,"ts":1,"args":{"Input\\u0020Dims":[[1]]}}]'
    assert native_columns(text) is None
    path = tmp_path / "t.json"
    path.write_bytes(text)
    assert_same_both_ways(path)


def test_shapes_args_decode_natively_into_arrow_arrays() -> None:
    """The columns the native decoder gives, read back: nulls at each level and the values."""
    args = [
        '{"Input Dims":[[2,3],null,[null,-1]],"Input type":["float",null,"a\\"\\u00e9"]}',
        '{"Sequence number":5}',
        '{"Input Dims":[],"Input type":null}',
    ]
    events = [f'{{"ph":"X","pid":1,"tid":1,"args":{a}}}' for a in args]
    batch = decode_events(f"[{','.join(events)}]".encode(), MAX_DEPTH)
    assert isinstance(batch, NativeBatch)
    part = _chrome_import._ArgsPart.native(batch.columns)
    shapes, dtypes = part.shapes
    shapes.validate(full=True)
    dtypes.validate(full=True)
    assert shapes.type == _chrome_import.SHAPES and dtypes.type == _chrome_import.DTYPES
    assert shapes.to_pylist() == [[[2, 3], None, [None, -1]], None, []]
    assert dtypes.to_pylist() == [["float", None, 'a"é'], None, None]
    assert part.ints["sequence_nr"].tolist() == [-1, 5, -1]


@pytest.mark.parametrize(
    ("last", "shapes"),
    [
        ('{"Input type":["float"]}', [[[8, 8], [8, 8]]] * 2 + [None, None]),
        ('{"Input Dims":[[2]]}', [[[8, 8], [8, 8]]] * 2 + [None, [[2]]]),
        # A tensor list's nested dims do not fit the column: that event has none (its args
        # keep them), the others keep theirs.
        ('{"Input Dims":[[[1]]]}', [[[8, 8], [8, 8]]] * 2 + [None, None]),
    ],
)
def test_shapes_columns_are_per_event(tmp_path: Path, last: str, shapes: list[Any]) -> None:
    """Traces read 2 events at a time: a part without "Input Dims" gives nulls (its
    "Input type" too), an event whose values do not fit the columns a null; natively or
    not."""
    events = [
        f'{{"ph":"X","name":"op","pid":1,"tid":1,"ts":{i},"dur":1,"args":{a}}}'
        for i, a in enumerate([SHAPED, SHAPED, '{"Input type":["x"]}', last])
    ]
    path = tmp_path / "t.json"
    path.write_bytes(f"[{','.join(events)}]".encode())
    with batches_of(2):
        assert_same_both_ways(path)
        table = chrome.read_chrome_table(path)
    assert table["input_shapes"].to_pylist() == shapes


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # group
            st.integers(0, 20),  # start
            st.integers(0, 8) | st.just(-1),  # length; -1: an open range
            st.booleans(),  # a range (can contain), else a mark
        ),
        max_size=40,
    )
)
def test_native_nesting_gives_the_numpy_parents_and_depths(
    rows: list[tuple[int, int, int, bool]],
) -> None:
    """recfn.native._cchrome.nest (one pass with a stack) and recfn.formats.nesting's vectorised search agree
    on every layout: ties, zero-length and open ranges, marks, partial overlaps, groups."""
    from recfn.formats.nesting import nesting

    big = np.iinfo(np.int64).max
    group = np.array([g for g, _, _, _ in rows], dtype=np.int64)
    start = np.array([s for _, s, _, _ in rows], dtype=np.int64)
    end = np.array(
        [big if n < 0 and c else s + max(n, 0) if c else s for _, s, n, c in rows], dtype=np.int64
    )
    container = np.array([c for _, _, _, c in rows], dtype=bool)
    parent, depth = nesting(group, start, end, container, _chrome_import.NEST)
    expected_parent, expected_depth = nesting(group, start, end, container)
    assert parent.tolist() == expected_parent.tolist()
    assert depth.tolist() == expected_depth.tolist()


def args_kept(event: dict[str, Any]) -> dict[str, Any]:
    """The args the table keeps for a flow or a memory instant: the phase of a flow, the fields
    without a column (in `KEPT` order), then the event's own args."""
    kept = {key: event[key] for key in _chrome_import.KEPT if key in event}
    return (
        ({"ph": event["ph"]} if event["ph"] in ("s", "t", "f") else {})
        | kept
        | event.get("args", {})
    )


def test_torch_flows_and_memory_instants_decode_into_columns_as_msgspec_reads_them(
    tmp_path: Path,
) -> None:
    """Flows and memory instants of torch's form are columns of the batch (the others' text
    holds none of them), their args the text msgspec's path gives them, and the trace reads the
    same both ways, where they tie with instants too, in batches of a few events, and with the
    memory instants after the ops (as torch writes them with profile_memory=True: batches
    without a complete event)."""
    events = with_flows(torch_events(60))
    columns = native_columns(json.dumps(events).encode())
    assert columns is not None
    flows = [e for e in events if e["ph"] in ("s", "f") or e["name"] == "[memory]"]
    assert columns["columnar.n"] == len(flows) and b'"fwdbwd"' not in (columns["others"] or b"")
    ends = np.frombuffer(columns["columnar.args.offsets"], np.int64).tolist()
    texts = [columns["columnar.args.data"][a:b] for a, b in zip(ends, ends[1:])]
    assert texts == [json.dumps(args_kept(f), separators=(",", ":")).encode() for f in flows]
    path = tmp_path / "flows.json"
    memory_last = sorted(events, key=lambda e: e.get("name") == "[memory]")
    for trace in (events, memory_last):
        path.write_text(json.dumps(trace))
        for n in (10**6, 7, 2):
            with batches_of(n):
                assert_same_both_ways(path)


FLOWS = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["s", "t", "f"]),
        "pid": mostly(st.integers(0, 2), st.sampled_from(["Spans", 1.0, 2**63])),
        "tid": mostly(st.integers(0, 2), st.just("1")),
        "ts": mostly(st.integers(0, 99), st.sampled_from([None, 1.5, 1e300, "1"])),
        "id": mostly(st.integers(-(2**63), 2**63 - 1), st.sampled_from([2**63, 1.0, "7"])),
    },
    optional={
        "name": mostly(st.just("fwdbwd"), st.sampled_from(["a\u00e9", 1, None])),
        "cat": mostly(st.just("fwdbwd"), st.sampled_from([None, "async"])),
        "bp": mostly(st.just("e"), st.sampled_from(["s", 1, "\u00e9"])),
        "dur": st.just(1),
        "args": st.sampled_from([None, {}, {"a": 1}]),
        "s": st.just("t"),
    },
)
"""Flow events, most of torch's form (which the native decoder reads), some not."""
TIED = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "C"]), "pid": st.just(1), "tid": st.just(1)},
    optional={"ts": st.integers(0, 99), "dur": st.integers(0, 9), "name": st.just("fwdbwd")},
)
"""Events among them, at the same few times."""


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=st.lists(FLOWS | TIED, min_size=1, max_size=12), batch=st.sampled_from([10**6, 1, 3]))
def test_traces_of_flows_read_the_same_both_ways(
    tmp_path_factory: Any, events: list[dict[str, Any]], batch: int
) -> None:
    """Flows the native decoder reads among flows it leaves to msgspec, complete events and
    instants, at tied times, in batches: the same table, frame or error."""
    path = tmp_path_factory.getbasetemp() / "flows.json"
    path.write_text(json.dumps(events))
    with batches_of(batch):
        assert_same_both_ways(path)


MEMORY_ARGS = st.fixed_dictionaries(
    {
        "Bytes": mostly(st.integers(-(2**40), 2**40), st.sampled_from([1.0, "1", None])),
        "Device Type": mostly(st.integers(0, 3), st.sampled_from([True, "cuda", -0.0])),
        "Device Id": mostly(st.integers(-1, 3), st.sampled_from([2**70, False])),
        "Addr": mostly(st.integers(0, 2**62), st.just(2**64 + 1)),
        "finished": st.booleans(),
    }
).flatmap(
    lambda args: mostly(
        st.just(args),
        st.fixed_dictionaries(
            {},
            optional={
                "note": st.sampled_from(["x", "\u00e9", 'a"b', [1], {"a": 1}, 1.5]),
                "s": st.just("p"),
                "recfn_name": st.just("alloc"),
                "Device": st.just("npu:0"),
            },
        ).map(lambda odd: args | odd),
    )
)
MEMORY = st.tuples(
    st.fixed_dictionaries(
        {
            "ph": mostly(st.just("i"), st.sampled_from(["I", "R", "n"])),
            "name": mostly(st.just("[memory]"), st.sampled_from(["[memory] ", "m", 1])),
            "pid": mostly(st.just(1), st.sampled_from(["Spans", 1.0])),
            "tid": st.just(1),
            "ts": mostly(st.integers(0, 99), st.sampled_from([None, 1.5, 1e300])),
            "s": mostly(st.just("t"), st.sampled_from(["g", 1, "\u00e9", None])),
            "cat": mostly(st.just("cpu_instant_event"), st.none()),
            "args": mostly(MEMORY_ARGS, st.sampled_from([None, [], {}, {"Device Type": 0}])),
        }
    ),
    mostly(st.just({}), st.fixed_dictionaries({}, optional={"dur": st.just(1), "id": st.just(1)})),
).map(lambda pair: {**pair[0], **pair[1]})
"""Memory instants, most of torch's form (which the native decoder reads), some not."""


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=st.lists(MEMORY | TIED | FLOWS, min_size=1, max_size=12),
    batch=st.sampled_from([10**6, 1, 3]),
)
def test_traces_of_memory_instants_read_the_same_both_ways(
    tmp_path_factory: Any, events: list[dict[str, Any]], batch: int
) -> None:
    """Memory instants the native decoder reads among those it leaves to msgspec (other
    names, odd args, recfn's own keys), complete events and flows, in batches: the same table,
    frame or error."""
    path = tmp_path_factory.getbasetemp() / "memory.json"
    path.write_text(json.dumps(events))
    with batches_of(batch):
        assert_same_both_ways(path)
