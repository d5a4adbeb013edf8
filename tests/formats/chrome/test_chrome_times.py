"""Chrome times are read in integers: microseconds since the epoch and durations keep every
nanosecond as written, in both decoders (the native one, where built, and msgspec's)."""

from __future__ import annotations

import decimal
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_chrome_native import assert_same_both_ways

from recfn.errors import TraceFormatError
from recfn.formats import chrome
from recfn.formats.chrome import _times
from recfn.formats.chrome._reader import EVENTS, NATIVE

EPOCH_US = "1700000000123456"


def write_events(path: Path, events: str, base: int | None = None) -> Path:
    """`events` (JSON text of a list) as a trace file, with `base` as baseTimeNanoseconds."""
    if base is None:
        path.write_text(events)
    else:
        path.write_text(f'{{"baseTimeNanoseconds": {base}, "traceEvents": {events}}}')
    return path


def read(path: Path) -> Any:
    assert_same_both_ways(path)
    return chrome.read_chrome_table(path)


def test_microseconds_since_the_epoch_keep_their_nanoseconds(tmp_path: Path) -> None:
    events = (
        f'[{{"ph":"X","name":"a","pid":1,"tid":1,"ts":{EPOCH_US}.890123,"dur":1.001}},'
        f'{{"ph":"X","name":"b","pid":1,"tid":1,"ts":{EPOCH_US}.891,"dur":0.017}},'
        f'{{"ph":"i","name":"m","pid":1,"tid":1,"ts":{EPOCH_US}.999,"s":"t"}},'
        f'{{"ph":"B","name":"c","pid":1,"tid":2,"ts":{EPOCH_US}.001}},'
        f'{{"ph":"E","pid":1,"tid":2,"ts":{EPOCH_US}.003}}]'
    )
    table = read(write_events(tmp_path / "t.json", events)).to_pydict()
    rows = {n: (s, e) for n, s, e in zip(table["name"], table["start_ns"], table["end_ns"])}
    epoch_ns = int(EPOCH_US) * 1000
    assert rows["a"] == (epoch_ns + 890, epoch_ns + 890 + 1001)  # .890123 rounds to .890
    assert rows["b"] == (epoch_ns + 891, epoch_ns + 891 + 17)
    assert rows["m"] == (epoch_ns + 999, epoch_ns + 999)
    assert rows["c"] == (epoch_ns + 1, epoch_ns + 3)


def test_torch_times_after_its_base_keep_every_end(tmp_path: Path) -> None:
    """torch writes ts of about 5e12 us after baseTimeNanoseconds: start + dur adds in ns."""
    base = 1_790_857_026_000_000_000
    rng = np.random.default_rng(3)
    starts = 4_961_910_095_484_902 + rng.integers(0, 10**9, 500)
    lengths = rng.integers(0, 10**7, 500)
    events = ",".join(
        f'{{"ph":"X","name":"op","pid":1,"tid":1,"ts":{s // 1000}.{s % 1000:03d},'
        f'"dur":{d // 1000}.{d % 1000:03d}}}'
        for s, d in zip(starts.tolist(), lengths.tolist())
    )
    table = read(write_events(tmp_path / "t.json", f"[{events}]", base))
    got = sorted(zip(table["start_ns"].to_pylist(), table["end_ns"].to_pylist()))
    assert got == sorted(zip((base + starts).tolist(), (base + starts + lengths).tolist()))


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0.0005", 0),  # a tie below the nanosecond: to even
        ("0.0015", 2),
        ("-0.0015", -2),
        ("1e-3", 1),
        ("1.5e3", 1_500_000),
        ("0", 0),
        ("-0.0", 0),
        ("9223372036854775.807", 2**63 - 1),
        ("9223372036854775.808", _times.BEYOND),
        ("-9223372036854775.806", -(2**63) + 2),
        ("-9223372036854775.807", _times.BEYOND),  # would be a sentinel
        ("1e300", _times.BEYOND),
        ("1700000000123456.7895", 1_700_000_000_123_456_790),
        ("1700000000123456.7885", 1_700_000_000_123_456_788),
        ("1700000000123456.78850001", 1_700_000_000_123_456_789),
    ],
)
def test_exact_nanoseconds(text: str, ns: int) -> None:
    assert _times.exact_ns(decimal.Decimal(text)) == ns


def python_ns(number: str) -> int | None:
    """What the msgspec path reads for an "X" event's ts written as `number`; None where msgspec
    refuses the number."""
    text = f'[{{"ph":"X","pid":1,"tid":1,"ts":{number}}}]'.encode()
    try:
        event = _times.exact_times(EVENTS.decode(text), text)[0]
    except ValueError:
        return None
    try:
        return int(_times.nanoseconds([event.ts], "ts", "t")[0])
    except TraceFormatError:
        return None


NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(0, 10**19).map(lambda m: f"{m // 1000}.{m % 1000:03d}"),
    st.integers(0, 10**22).map(lambda m: f"{m // 10**6}.{m % 10**6:06d}"),
    st.builds(
        lambda whole, fraction, exp: f"{whole}.{fraction}e{exp}",
        st.integers(0, 10**9),
        st.integers(0, 10**9),
        st.integers(-12, 12),
    ),
    st.sampled_from(["8796093022208", "8796093022207.9995", "-8796093022208.0005", "0.0005"]),
)


@pytest.mark.skipif(NATIVE is None, reason="recfn.native._cchrome is not built (pure install)")
@settings(max_examples=500, deadline=None)
@given(number=NUMBERS)
def test_both_decoders_read_the_same_nanoseconds(number: str) -> None:
    """The native decoder's ts is the msgspec path's, or it leaves the batch to that path."""
    text = f'[{{"ph":"X","pid":1,"tid":1,"ts":{number}}}]'.encode()
    columns = NATIVE(text, 128, -1, 0)
    expected = python_ns(number)
    if columns is None:
        return
    assert expected is not None and expected != _times.BEYOND
    assert np.frombuffer(columns["ts"], np.int64).tolist() == [expected]


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(
        st.integers(0, 10**16).map(str) | st.sampled_from(["e", "E", " ", ",", ".", "x", "-"]),
        max_size=12,
    ).map(lambda parts: "".join(parts).encode()),
    span=st.integers(1, 30),
)
def test_text_that_may_hold_large_times_is_found_across_spans(text: bytes, span: int) -> None:
    """13 digits in a row or a digit before an exponent, wherever the spans are cut."""
    expected = re.search(rb"[0-9]{13}|[0-9][eE]", text) is not None
    assert _times.may_be_large(text, span) is expected
    assert _times.may_be_large(bytearray(text), span) is expected
    assert _times.may_be_large(text) is expected


def test_a_time_beyond_int64_nanoseconds_is_refused_where_it_is_used(tmp_path: Path) -> None:
    path = write_events(tmp_path / "t.json", '[{"ph":"X","pid":1,"tid":1,"ts":1e17,"dur":1}]')
    with pytest.raises(TraceFormatError, match="outside the int64 nanosecond range"):
        read(path)
    metadata_only = '[{"ph":"M","name":"x","pid":1,"tid":1,"ts":1e17}]'
    assert read(write_events(tmp_path / "m.json", metadata_only)).num_rows == 0


def test_an_end_beyond_int64_is_refused_not_wrapped(tmp_path: Path) -> None:
    events = '[{"ph":"X","pid":1,"tid":1,"ts":9223372036854775.8,"dur":0.008}]'
    with pytest.raises(TraceFormatError, match="outside the int64 nanosecond range"):
        read(write_events(tmp_path / "t.json", events))
    events = '[{"ph":"X","pid":1,"tid":1,"ts":9223372036854775.0,"dur":0.807}]'
    assert read(write_events(tmp_path / "ok.json", events)).column("end_ns").to_pylist() == [
        2**63 - 1
    ]


@pytest.mark.parametrize("ns", [0, 1, 999, 1001, 8_796_093_022_207_999, 10**15 + 7])
def test_written_times_read_back_exactly(ns: int) -> None:
    (text,) = _times.micros(np.array([ns], np.int64))
    written = json.dumps(text) if isinstance(text, float) else bytes(text).decode()
    assert python_ns(written) == ns


def test_large_written_times_are_their_three_decimals() -> None:
    ns = np.array([0, 2**43 * 1000 + 1, 17], np.int64)
    texts = [bytes(t).decode() for t in _times.micros(ns)]
    assert texts == ["0.000", "8796093022208.001", "0.017"]


def test_the_time_base_is_shared_by_traces_of_one_job() -> None:
    first, second = 1_700_000_000_123_456_789, 1_700_000_012_000_000_000
    assert (
        _times.time_base(first)
        == _times.time_base(second)
        == 1_700_000_000_000_000_000 - (1_700_000_000_000_000_000 % 10**15)
    )
    assert 0 <= first - _times.time_base(first) < 10**15
