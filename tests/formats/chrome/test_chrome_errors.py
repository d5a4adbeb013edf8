"""The error contract of Chrome import and ``recfn.load``: every bad file raises
TraceFormatError naming the file and what is wrong; a missing path FileNotFoundError, a folder
IsADirectoryError. Each case is a reproducer from the reliability issue, then a seeded mutation
fuzzer (benchmarks/fuzz_chrome.py, run longer there)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import random
import sys
import warnings
import zlib
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recfn
from recfn.errors import TraceFormatError
from recfn.formats.chrome import MAX_DEPTH, read_chrome_trace

ROOT = Path(__file__).resolve().parents[3]
GOOD = [
    {"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 1, "dur": 5, "args": {"k": 1}},
    {"name": "b", "ph": "X", "pid": 1, "tid": 1, "ts": 2, "dur": 1},
]


def event(**fields: Any) -> str:
    """A trace of GOOD plus one event with `fields` over a complete event's."""
    return json.dumps([*GOOD, {"name": "c", "ph": "X", "pid": 1, "tid": 1, "ts": 3, **fields}])


def refused(path: Path, match: str) -> None:
    """Both readers refuse `path` with TraceFormatError naming it and matching `match`."""
    for read in (read_chrome_trace, recfn.load, lambda p: recfn.load(p, as_pandas=True)):
        with pytest.raises(TraceFormatError, match=match) as caught:
            read(path)
        assert path.name in str(caught.value)


def test_a_good_trace_loads(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(event(dur=1))
    assert recfn.load(tmp_path / "t.json").events == 3


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (event(pid=2**64 - 1), "pid 18446744073709551615 does not fit int64"),
        (event(tid=-(2**63) - 1), "tid .* does not fit int64"),
        (event(ph=["X"]), "ph must be a string, not list"),
        (event(name={"a": 1}), "name must be a string or number, not dict"),
        (event(cat=[1]), "cat must be a string or number, not list"),
        (event(ts="soon"), "ts must be a number"),
        (event(ts=1e300), "outside the int64 nanosecond range"),
        (event(ts=-1e300), "outside the int64 nanosecond range"),
        (event(dur=1e300), "outside the int64 nanosecond range"),
        (event(ts=10**400), "too large a number|not JSON|out of range"),
        (event(dur=-50), r"negative dur \(-50 us\)"),
        (event(dur=-0.25), r"negative dur \(-0.25 us\)"),
        (event(dur=1, args={"d": "@deep@"}).replace('"@deep@"', "[" * 1000 + "]" * 1000), "deep"),
        (event(dur=1, name="@deep@").replace('"@deep@"', "[" * 5000 + "]" * 5000), "deep"),
        ('{"traceEvents": [], "baseTimeNanoseconds": 9223372036854775808}', "does not fit"),
        ('{"traceEvents": {"a": 1}}', "traceEvents list, got dict"),
        ("5", "list of events .* got int|not JSON"),
        ("[1, 2]", "must be a JSON object"),
        (
            '[{"ph": "i", "name": "[memory]", "pid": 1, "ts": 1, "args": {"Bytes": "lots"}}]',
            "memory Bytes must be an int64 integer",
        ),
    ],
)
def test_bad_events_are_refused(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    refused(path, match)


@pytest.mark.parametrize(
    "fields", [{"ts": 1e306}, {"ts": -1e306}, {"ts": 1.7e308, "dur": 1e308}], ids=str
)
def test_times_beyond_float64_once_scaled_are_refused_without_a_warning(
    tmp_path: Path, fields: dict[str, float]
) -> None:
    """ts in nanoseconds (or ts + dur) overflow float64 to inf: refused as out of range, with
    no numpy overflow warning on the way."""
    path = tmp_path / "far.json"
    path.write_text(event(**{"dur": 1, **fields}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        refused(path, "outside the int64 nanosecond range")


def test_nesting_is_bounded_at_max_depth(tmp_path: Path) -> None:
    """List, event and args take 3 levels; values in args may nest 125 more, not 126, wherever
    the reader's stack stands (Python's own recursion limit would depend on it)."""
    for depth, loads in ((MAX_DEPTH - 3, True), (MAX_DEPTH - 2, False)):
        path = tmp_path / f"depth{depth}.json"
        path.write_text(event(dur=1, args={"d": "@"}).replace('"@"', "[" * depth + "]" * depth))
        if loads:
            assert json.loads(read_chrome_trace(path)["args"].iloc[-1])["d"]
        else:
            refused(path, f"nested deeper than {MAX_DEPTH} levels")


def test_brackets_and_escapes_inside_strings_do_not_nest(tmp_path: Path) -> None:
    name = '[{\\"' + "[" * 300 + "\\\\" + "{" * 300 + '\\"}'
    path = tmp_path / "strings.json"
    path.write_text(event(dur=1, name="@").replace('"@"', f'"{name}"'))
    assert read_chrome_trace(path)["name"].iloc[-1] == json.loads(f'"{name}"')


def test_invalid_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin.json"
    path.write_bytes(event(dur=1).encode().replace(b'"c"', b'"\xe9t\xe9"'))
    refused(path, "not a JSON trace")


def test_invalid_utf8_in_args_is_refused(tmp_path: Path) -> None:
    """args stay JSON text, never decoded: their bytes are checked on their own."""
    path = tmp_path / "args.json"
    path.write_bytes(event(dur=1, args={"k": "@"}).encode().replace(b"@", b"\xc4x"))
    refused(path, "args are not valid UTF-8")


def gz(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)  # the same bytes in every process (xdist)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (gz(event(dur=1))[:-12], "truncated gzip"),  # cut in the deflate stream
        (gz(event(dur=1))[:-3], "truncated gzip|corrupt gzip"),  # cut in the trailer
        (b"\x1f\x8b" + b"\x00" * 40, "corrupt gzip"),  # a gzip magic, then no gzip header
        (gz(event(dur=1))[:20] + b"\xff" * 30 + gz(event(dur=1))[50:], "corrupt gzip"),
        (gz(event(dur=1)) + b"junk after the stream", "corrupt gzip"),
    ],
)
def test_bad_gzip_is_refused(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "bad.json.gz"
    path.write_bytes(content)
    refused(path, match)


def test_gzip_members_and_padding_load(tmp_path: Path) -> None:
    text = event(dur=1)
    half = len(text) // 2
    path = tmp_path / "two.json.gz"
    path.write_bytes(gz(text[:half]) + gz(text[half:]) + b"\x00" * 8)
    assert len(read_chrome_trace(path)) == 3


def test_decompression_is_bounded(tmp_path: Path) -> None:
    """A small .json.gz inflating past max_bytes is refused while inflating, not after."""
    path = tmp_path / "bomb.json.gz"
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    path.write_bytes(compressor.compress(b"[" + b" " * (64 << 20) + b"]") + compressor.flush())
    assert path.stat().st_size < 100_000
    with pytest.raises(TraceFormatError, match="bomb.json.gz: inflates to more than 1048576"):
        read_chrome_trace(path, max_bytes=1 << 20)
    assert len(read_chrome_trace(path)) == 0  # under the default bound it is an empty trace


def test_plain_json_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(event(dur=1))
    with pytest.raises(TraceFormatError, match="big.json: more than 10 bytes"):
        read_chrome_trace(path, max_bytes=10)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    for read in (read_chrome_trace, recfn.load):
        with pytest.raises(FileNotFoundError, match="no such file: .*missing.json"):
            read(tmp_path / "missing.json")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        read_chrome_trace(tmp_path)
    with pytest.raises(FileNotFoundError, match="no trace files"):  # a folder is a dataset
        recfn.load(tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """Opening a FIFO for reading would wait for a writer forever; it is refused at once."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    refused(fifo, "is a FIFO, not a regular trace file")


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_device_file_is_refused() -> None:
    for read in (read_chrome_trace, recfn.load):
        with pytest.raises(TraceFormatError, match="'/dev/null' is a character device"):
            read("/dev/null")


# -- the mutation fuzzer -------------------------------------------------------------------


@cache
def fuzzer() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "fuzz_chrome", ROOT / "benchmarks" / "fuzz_chrome.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@cache
def bases(folder: str) -> dict[str, tuple[bytes, Any]]:
    return fuzzer().bases(Path(folder))  # type: ignore[no-any-return]


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_chrome_traces_load_or_are_refused(tmp_path_factory: Any, seed: int) -> None:
    """Each mutated trace either loads into a table without broken invariants or raises
    TraceFormatError naming the file; no other exception."""
    folder = tmp_path_factory.getbasetemp() / "fuzz"
    folder.mkdir(exist_ok=True)
    kind, suffix, data = fuzzer().make_case(random.Random(seed), bases(str(folder)), bomb_mib=2)
    path = folder / f"case{suffix}"
    path.write_bytes(data)
    try:
        df = recfn.load(path, as_pandas=True)
    except TraceFormatError as exc:
        assert path.name in str(exc), (kind, str(exc))
        return
    assert fuzzer().silently_wrong(df) is None, kind


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_saving_over_a_fifo_neither_blocks_nor_replaces_it(tmp_path: Path) -> None:
    """Whether recfn wrote the target is read from its content: a FIFO has none to read."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with recfn.profile() as prof:
        recfn.mark("m")
    with pytest.raises(FileExistsError, match="recfn did not write it"):
        prof.trace.save(fifo)
    prof.trace.save(fifo, overwrite=True)
    assert recfn.load(fifo).events == prof.trace.events


def test_saving_over_corrupt_gzip_is_refused_politely(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b"[]")[:10] + b"\xff" * 40)  # a gzip header, bad deflate
    with recfn.profile() as prof:
        recfn.mark("m")
    with pytest.raises(FileExistsError, match="recfn did not write it"):
        prof.trace.save(path)
