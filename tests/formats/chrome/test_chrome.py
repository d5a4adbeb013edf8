"""Chrome trace import and export: hand-written traces, a torch-shaped fixture, round trips."""

from __future__ import annotations

import gzip
import json
import platform
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import recfn.analysis as analysis
from recfn.analysis import read_chrome_trace, write_chrome_trace
from recfn.errors import RecfnValueError, TraceFormatError
from recfn.formats.chrome import _json as jsonio
from recfn.formats.chrome import read_chrome_table
from recfn.formats.chrome._reader import IDS
from recfn.formats.schema import REQUIRED as COLUMNS

DATA = Path(__file__).resolve().parents[2] / "data"
BASE = 1_700_000_000_000_000_000


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path


HAND_WRITTEN = [
    {"name": "thread_name", "ph": "M", "pid": 1, "tid": "main", "args": {"name": "Main"}},
    {"name": "outer", "cat": "user", "ph": "B", "pid": 1, "tid": "main", "ts": 0},
    {"name": "inner", "ph": "B", "pid": 1, "tid": "main", "ts": 1, "args": {"a": 1}},
    {"ph": "E", "pid": 1, "tid": "main", "ts": 2, "args": {"b": 2}},
    {"name": "x", "cat": "op", "ph": "X", "pid": 1, "tid": "main", "ts": 3, "dur": 1.5},
    {"ph": "E", "pid": 1, "tid": "main", "ts": 10},
    {"name": "open", "ph": "B", "pid": 1, "tid": "main", "ts": 12},
    {"ph": "E", "pid": 1, "tid": "other", "ts": 5},
    {"name": "tick", "ph": "i", "s": "t", "pid": 1, "tid": "main", "ts": 4, "extra": "kept"},
    {"name": "mem", "ph": "C", "pid": 1, "ts": 1, "args": {"cpu": 100, "cuda:0": 5}},
    {"name": "mem", "ph": "C", "pid": 1, "ts": 6, "args": {"cpu": 40}},
    {"name": "flow", "ph": "s", "id": 1, "pid": 1, "tid": "main", "ts": 3},
]


def test_hand_written_events(tmp_path: Path) -> None:
    with pytest.warns(RuntimeWarning, match="1 event.*dropped.*'E': 1"):  # E on "other"
        table = read_chrome_table(write(tmp_path / "t.json", HAND_WRITTEN))
    assert table.schema.metadata[b"recfn.dropped_events"] == b"1"
    with pytest.warns(RuntimeWarning, match="dropped"):
        df = read_chrome_trace(tmp_path / "t.json")
    assert list(df.columns) == [*COLUMNS, "args"]
    got = df.assign(start=df["start_ns"], end=df["end_ns"])[["name", "kind", "start", "end"]]
    assert got.astype(object).where(got.notna(), None).values.tolist() == [
        ["outer", "range", 0, 10_000],
        ["inner", "range", 1000, 2000],
        ["mem", "counter", 1000, 1000],
        ["x", "range", 3000, 4500],
        ["flow", "flow", 3000, 3000],
        ["tick", "mark", 4000, 4000],
        ["mem", "counter", 6000, 6000],
        ["open", "range", 12_000, None],
    ]
    by_name = df.set_index("name")
    assert df["parent_id"].tolist()[:2] == [pd.NA, 0] and by_name.loc["x", "parent_id"] == 0
    assert by_name.loc["tick", "parent_id"] == df.index[df["name"] == "x"][0]
    assert by_name.loc["flow", "parent_id"] == df.index[df["name"] == "x"][0]
    assert by_name.loc["tick", "args"] == '{"extra":"kept","s":"t"}'
    assert json.loads(by_name.loc["flow", "args"]) == {"ph": "s", "id": 1}
    assert json.loads(by_name.loc["inner", "args"]) == {"a": 1, "b": 2}
    assert pd.isna(by_name.loc["outer", "args"]) and by_name.loc["outer", "scope"] == "user"
    counters = df[df["kind"] == "counter"]  # counters stay counters, their series as written
    assert counters["args"].map(json.loads).tolist() == [{"cpu": 100, "cuda:0": 5}, {"cpu": 40}]
    assert df["thread_name"].astype(str).unique().tolist() == ["Main", "0"]
    assert df["depth"].tolist() == [0, 1, 0, 1, 2, 2, 0, 0]
    assert (df["pid"] == 1).all() and (df["id"] == np.arange(len(df))).all()
    assert not df["is_async"].any()


def compact(value: Any) -> str | None:
    """What json_strings gives for `value`: compact JSON, None for None and empty containers."""
    return (
        None
        if value in (None, {}, [])
        else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    )


@pytest.mark.parametrize(
    "values",
    [
        # Objects and nulls: one encoding of the whole list, cut at its separators.
        [
            {"a": 1},
            None,
            {},
            {"k": "naïve", "n": None},
            None,
            {"e": [], "q": 'say "hi"', "p": "C:\\dir"},
        ],
        # Separators inside values: each value is encoded alone.
        [{"a": [{"b": 1}, {"c": "},{"}]}, None, {"l": [None, None]}, {"s": "all,none"}],
        # Not only objects.
        [
            {"a": [1, {"b": "x,}]"}], "c": "[{,"},
            None,
            {},
            [],
            {"k": "naïve"},
            7,
            "s",
            [[1], [2]],
            {"e": []},
        ],
        [{"only": 1}],
        [],
    ],
)
def test_json_strings(values: list[Any]) -> None:
    rows = np.arange(len(values))[::-1]
    strings, text = jsonio.json_strings(values, rows)
    assert strings.to_pylist() == [compact(values[i]) for i in rows.tolist()]
    assert all(
        f'"{key}"'.encode() in text for value in values if isinstance(value, dict) for key in value
    )


@pytest.mark.parametrize(
    "texts",
    [
        [b"null", b"[null, null]"],  # a list with a separator where its own boundary has none
        [b"{}", b"[null,null,null]", b"{}"],
        [b'{"a": 1}', b'"},{"', b"null", b"{}"],
        [b'{"a" : [1]}', b"null", b"{}"],
    ],
)
def test_json_strings_of_json_texts(texts: list[bytes]) -> None:
    """Args kept as JSON text (msgspec.Raw) can be any JSON value, not only objects."""
    values = [msgspec.Raw(t) for t in texts]
    strings, _ = jsonio.json_strings(values, np.arange(len(values)))
    assert strings.to_pylist() == [compact(json.loads(t)) for t in texts]


def test_torch_shaped_fixture() -> None:
    df = read_chrome_trace(DATA / "torch_trace.json")
    assert len(df) == 17 and (df["kind"] == "range").sum() == 10
    row = df.set_index("name")
    linear = row.loc["aten::linear"]
    assert linear["start_ns"] == BASE + 1_010_250 and linear["end_ns"] == BASE + 1_410_375
    assert linear["sequence_nr"] == 17 and linear["scope"] == "cpu_op"
    assert json.loads(linear["args"])["External id"] == 2
    assert (
        list(linear["input_shapes"][0]) == [32, 128]
        and list(linear["input_dtypes"]) == ["float"] * 3
    )
    assert row.loc["aten::addmm", "parent_id"] == linear["id"]
    assert row.loc["cudaLaunchKernel", "parent_id"] == row.loc["aten::addmm", "id"]
    assert pd.isna(row.loc["ampere_sgemm_32x32_sliced1x4_tn", "parent_id"])
    assert row.loc["ampere_sgemm_32x32_sliced1x4_tn", "thread_name"] == "stream 7 "
    assert row.loc["AddmmBackward0", "fwd_thread_id"] == 1
    span = row.loc["PyTorch Profiler (0)"]  # pid "Spans": not an integer
    assert span["pid"] < 0 and span["thread_name"] == "PyTorch Profiler"
    memory = df[df["kind"] == "memory"]
    assert memory["memory_bytes"].tolist() == [8192, 1048576, -8192]
    assert memory["device"].astype(str).tolist() == ["cpu", "cuda:0", "cpu"]
    flows = df[df["kind"] == "flow"]  # torch's flow from the launch to its kernel, kept
    assert flows["name"].astype(str).tolist() == ["ac2g", "ac2g"]
    assert [row.loc[n, "id"] for n in ("cudaLaunchKernel", "ampere_sgemm_32x32_sliced1x4_tn")] == (
        flows["parent_id"].tolist()
    )
    summary = df.recfn.summary()
    assert summary.loc["aten::linear", "self_ns"] == 400_125 - 10_000 - 350_000
    assert summary.loc["aten::addmm", "self_memory_bytes"] == 8192
    assert (
        df.recfn.summary(group_by_input_shape=True, as_index=False)["input_shapes"]
        .str.startswith("[[")
        .sum()
        == 4
    )


def test_args_that_are_not_plain_objects(tmp_path: Path) -> None:
    # Args that are not objects, torch fields that are not integers and lists of objects in
    # args take the slower paths; the results are the same.
    common = {"ph": "X", "dur": 1, "pid": 1, "tid": 1}
    events = [
        {**common, "name": "a", "ts": 0, "args": "text"},
        {**common, "name": "b", "ts": 1, "args": {"Sequence number": "7", "Fwd thread id": 3}},
        {
            **common,
            "name": "c",
            "ts": 2,
            "args": {"Sequence number": 8, "k": [{"x": 1}, {"y": "},{"}]},
        },
        {**common, "name": "d", "ts": 3},
    ]
    df = read_chrome_trace(write(tmp_path / "t.json", events))
    assert df["args"].tolist()[:3] == [
        '"text"',
        '{"Sequence number":"7","Fwd thread id":3}',
        '{"Sequence number":8,"k":[{"x":1},{"y":"},{"}]}',
    ]
    assert pd.isna(df["args"].iloc[3])
    assert df["sequence_nr"].tolist() == [-1, 7, 8, -1] and df["fwd_thread_id"].tolist() == [
        0,
        3,
        0,
        0,
    ]


def test_gzip_dict_form_and_truncated_array(tmp_path: Path) -> None:
    document = {"traceEvents": HAND_WRITTEN, "baseTimeNanoseconds": BASE, "otherData": {"k": 1}}
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(json.dumps(document).encode()))
    zipped = read_chrome_trace(tmp_path / "t.json.gz")
    assert zipped["start_ns"].iloc[0] == BASE and len(zipped) == 8
    truncated = json.dumps(HAND_WRITTEN)[:-1] + ",\n"
    (tmp_path / "cut.json").write_text(truncated)
    assert len(read_chrome_trace(tmp_path / "cut.json")) == 8


def test_round_trip_through_chrome(tmp_path: Path) -> None:
    df = analysis.make_synthetic_trace(3_000, 3, n_marks=30, n_memory_events=40, seed=2)
    every_fifth_range = (np.arange(len(df)) % 5 == 0) & (df["kind"] == "range")
    df["sequence_nr"] = np.where(every_fifth_range, np.arange(len(df)), -1)
    df["args"] = pd.array([None if i % 3 else f'{{"i": {i}}}' for i in range(len(df))], dtype="str")
    df.loc[7, "args"] = "plain text"
    last_thread = df["thread_id"].iloc[-1]  # its last root is still open
    df.loc[df.index[(df["thread_id"] == last_thread) & df["parent_id"].isna()][-1], "end_ns"] = (
        pd.NA
    )
    for suffix in ("json", "json.gz"):
        path = tmp_path / f"t.{suffix}"
        df.recfn.to_chrome_trace(path)
        back = read_chrome_trace(path)
        for column in (
            "name",
            "kind",
            "scope",
            "start_ns",
            "end_ns",
            "thread_id",
            "thread_name",
            "depth",
            "sequence_nr",
            "pid",
            "memory_bytes",
            "device",
        ):
            assert back[column].astype(str).tolist() == df[column].astype(str).tolist(), column
        assert back["parent_id"].equals(df["parent_id"])
        assert json.loads(back["args"].iloc[3]) == {"i": 3}
        assert json.loads(back["args"].iloc[7]) == {"args": "plain text"}
        assert back.recfn.summary().equals(df.recfn.summary())


def test_write_accepts_an_arrow_table(tmp_path: Path) -> None:
    df = analysis.make_synthetic_trace(200, 2, n_marks=3, seed=1)
    df.loc[df.index[-1], "end_ns"] = pd.NA  # nullable int64 must not turn into (rounding) float64
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata(
        {b"recfn.version": b"0.1.0", b"other": b"x"}
    )  # as the core writes
    write_chrome_trace(table, tmp_path / "t.json")
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["otherData"] == {"recfn.version": "0.1.0"}
    first = int(df["start_ns"].min())  # one base for the ranks of a job: a multiple of 10**15
    assert document["baseTimeNanoseconds"] == first - first % 10**15
    phases = pd.Series([e["ph"] for e in document["traceEvents"]]).value_counts()
    assert phases.to_dict() == {"X": 199, "i": 3, "M": 2, "B": 1}
    first = next(e for e in document["traceEvents"] if e["ph"] == "X")
    assert set(first) == {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args", *IDS}
    assert isinstance(first["ts"], float) and isinstance(first["dur"], float)
    back = read_chrome_trace(tmp_path / "t.json")
    assert back["end_ns"].astype(str).tolist() == df["end_ns"].astype(str).tolist()


def test_empty_traces(tmp_path: Path) -> None:
    sample = {"ph": "P", "name": "sample", "pid": 1, "tid": 1, "ts": 3}  # dropped, counted
    for document in ([], {"traceEvents": []}, [HAND_WRITTEN[0], sample]):
        df = read_chrome_trace(write(tmp_path / "e.json", document))
        assert df.empty and list(df.columns) == [*COLUMNS, "args"]
        assert df.recfn.summary().empty
    empty = analysis.make_synthetic_trace(0, 1)
    write_chrome_trace(empty, tmp_path / "w.json")
    assert json.loads((tmp_path / "w.json").read_text())["traceEvents"] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a JSON trace"),
        ('{"traceEvents": 5}', "traceEvents list"),
        ('"text"', "list of events"),
        ("[1, 2]", "must be a JSON object"),
        ('[{"ph": "X", "ts": "soon", "dur": 1}]', "ts must be a number"),
        ('[{"ph": "X", "name": "a", "dur": 1}]', "has no ts"),
        ('{"traceEvents": [], "baseTimeNanoseconds": "1"}', "baseTimeNanoseconds"),
    ],
)
def test_malformed_input(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(TraceFormatError, match=message):
        read_chrome_trace(tmp_path / "bad.json")


def test_write_needs_the_columns(tmp_path: Path) -> None:
    with pytest.raises(analysis.MissingColumnsError, match="'thread_id'"):
        frame = pd.DataFrame({"name": [], "kind": [], "start_ns": [], "end_ns": []})
        write_chrome_trace(frame, tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []  # whole or not at all: no file, no temporary


def test_writing_never_replaces_a_file_recfn_did_not_write(tmp_path: Path) -> None:
    """``write_chrome_trace`` and ``df.recfn.to_chrome_trace`` refuse another program's file
    before any work, replace it with ``overwrite``, and replace a trace of recfn's."""
    frame = analysis.make_synthetic_trace(300, 2, seed=3)
    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "settings"}')
    for write_it in (
        lambda path, **options: write_chrome_trace(frame, path, **options),
        lambda path, **options: frame.recfn.to_chrome_trace(path, **options),
    ):
        with pytest.raises(FileExistsError, match="refusing to overwrite"):
            write_it(mine)
        assert mine.read_text() == '{"my": "settings"}'
        write_it(tmp_path / "t.json.gz")
        write_it(tmp_path / "t.json.gz")  # recfn's own: replaced
        assert len(read_chrome_trace(tmp_path / "t.json.gz")) == len(frame)
    frame.recfn.to_chrome_trace(mine, overwrite=True)
    assert len(read_chrome_trace(mine)) == len(frame)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.json", "t.json.gz"]
    with pytest.raises(TypeError, match="trace path must be a str or path, got float"):
        write_chrome_trace(frame, 3.5)  # type: ignore[arg-type]


def test_trace_written_by_torch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("outer"):
            torch.ones(64, 64) @ torch.ones(64, 64)
    prof.export_chrome_trace(str(tmp_path / "torch.json"))
    df = read_chrome_trace(tmp_path / "torch.json")
    outer = df[df["name"] == "outer"]
    assert len(outer) == 1
    children = df[df["parent_id"] == outer["id"].iloc[0]]
    assert "aten::matmul" in set(children["name"].astype(str))
    assert df.recfn.summary()["count"].sum() == (df["kind"] == "range").sum()


def test_typed_and_plain_decoding_agree(tmp_path: Path) -> None:
    # Without unknown fields the events decode into structs (args kept as JSON text); one
    # unknown field sends the whole trace through plain dicts. The tables are the same.
    events = [{k: v for k, v in e.items() if k != "extra"} for e in HAND_WRITTEN]
    events += [
        {
            "ph": "X",
            "name": "t",
            "pid": 1,
            "tid": 1,
            "ts": 20,
            "dur": 1,
            "id": 4,
            "s": "p",
            "args": {"Sequence number": 3, "Input Dims": [[2, 3]], "Input type": ["float"]},
        }
    ]
    typed = read_chrome_trace(write(tmp_path / "typed.json", events))
    plain = read_chrome_trace(write(tmp_path / "plain.json", [*events, {"ph": "s", "unknown": 1}]))
    pd.testing.assert_frame_equal(typed, plain)
    row = typed.set_index("name").loc["t"]
    assert (
        row["sequence_nr"] == 3
        and json.loads(row["args"])["id"] == 4
        and list(row["input_shapes"][0]) == [2, 3]
    )


@pytest.mark.parametrize("suffix", ["json", "json.gz"])
def test_gpu_times_round_trip_through_chrome(tmp_path: Path, suffix: str) -> None:
    """profile(cuda=True)'s columns survive a Chrome file: written into the ranges' args (the
    Arrow path and the frame path alike), read back into the columns, the args as they were."""
    from known_frames import GPU_SPANS, KNOWN_ROWS, T0, make_frame, with_gpu

    import recfn

    frame = with_gpu(make_frame(KNOWN_ROWS), GPU_SPANS)
    frame["args"] = pd.array([None] * len(frame), dtype="str")
    frame.loc[frame["id"] == 2, "args"] = '{"note": "kept"}'
    columns = ["device", "device_start_ns", "device_duration_ns"]
    for source in (frame, recfn.Trace.from_pandas(frame).table):
        path = tmp_path / f"gpu.{suffix}"
        path.unlink(missing_ok=True)
        write_chrome_trace(source, path)
        raw = gzip.decompress(path.read_bytes()) if suffix.endswith("gz") else path.read_bytes()
        written = json.loads(raw)
        assert written["recfnArgColumns"] == ["device", "device_start_ns", "device_duration_ns"]
        fwd = next(e for e in written["traceEvents"] if e.get("name") == "fwd")
        assert fwd["args"] == {
            "note": "kept",
            "recfn_device": "cuda:0",
            "recfn_device_start_ns": T0 + GPU_SPANS[2][0],
            "recfn_device_duration_ns": GPU_SPANS[2][1],
        }
        back = read_chrome_trace(path).set_index("id").loc[frame["id"]].reset_index()
        for column in columns:
            assert back[column].astype(str).tolist() == frame[column].astype(str).tolist(), column
        ranges = (frame["kind"] == "range").to_numpy()  # a mark's args keep its scope ("s")
        assert [None if pd.isna(a) else json.loads(a) for a in back["args"][ranges]] == [
            None if pd.isna(a) else json.loads(a) for a in frame["args"][ranges]
        ]
        table = recfn.load(path).table
        assert table.column("device_duration_ns").null_count == len(frame) - len(GPU_SPANS)
        gpu = ["device_total_ns", "device_self_ns", "device"]
        assert back.recfn.summary()[gpu].equals(frame.recfn.summary()[gpu])
    pretty = tmp_path / "pretty.json"  # the same file as another tool writes it back, indented
    pretty.write_text(json.dumps(written, indent=1))
    again = read_chrome_trace(pretty).set_index("id").loc[frame["id"]].reset_index()
    assert (
        again["device_duration_ns"].astype(str).tolist()
        == frame["device_duration_ns"].astype(str).tolist()
    )


def test_hidden_calls_and_flops_round_trip_through_chrome(tmp_path: Path) -> None:
    """The counts recfn writes into args (library calls hidden below a traced call, FLOPs)
    come back as their columns, from the Arrow path and the frame path alike."""
    from known_frames import KNOWN_ROWS, make_frame

    import recfn

    frame = make_frame(KNOWN_ROWS)
    frame["hidden_calls"] = pd.array([None, 412, None, 7, None, 0, None, None, None], "Int64")
    frame["flops"] = pd.array([None, None, None, None, 2_000_000, None, None, None, None], "Int64")
    for source in (frame, recfn.Trace.from_pandas(frame).table):
        path = tmp_path / "counts.json"
        path.unlink(missing_ok=True)
        write_chrome_trace(source, path)
        assert json.loads(path.read_text())["recfnArgColumns"] == ["flops", "hidden_calls"]
        back = read_chrome_trace(path).set_index("id").loc[frame["id"]].reset_index()
        for column in ("hidden_calls", "flops"):
            assert back[column].astype(str).tolist() == frame[column].astype(str).tolist(), column
        ranges = (frame["kind"] == "range").to_numpy()  # a mark's args keep its scope ("s")
        assert back["args"][ranges].isna().all()  # nothing else was in them


def test_a_trace_without_gpu_times_says_nothing_of_them(tmp_path: Path) -> None:
    from known_frames import KNOWN_ROWS, make_frame

    path = tmp_path / "plain.json"
    write_chrome_trace(make_frame(KNOWN_ROWS), path)
    assert "recfnArgColumns" not in json.loads(path.read_text())
    assert "device_duration_ns" not in read_chrome_table(path).column_names


def test_gpu_times_in_args_of_another_type_are_refused(tmp_path: Path) -> None:
    from known_frames import GPU_SPANS, KNOWN_ROWS, make_frame, with_gpu

    path = tmp_path / "gpu.json"
    write_chrome_trace(with_gpu(make_frame(KNOWN_ROWS), GPU_SPANS), path)
    text = path.read_text().replace(
        '"recfn_device_duration_ns":16', '"recfn_device_duration_ns":"16"'
    )
    path.write_text(text)
    with pytest.raises(
        TraceFormatError, match="gpu.json: an event's 'recfn_device_duration_ns' in"
    ):
        read_chrome_trace(path)


def test_a_range_with_only_part_of_a_gpu_time_round_trips(tmp_path: Path) -> None:
    """A hand-made table may time a range without naming its device: what it has comes back."""
    from known_frames import GPU_SPANS, KNOWN_ROWS, make_frame, with_gpu

    frame = with_gpu(make_frame(KNOWN_ROWS), GPU_SPANS)
    frame["device"] = frame["device"].cat.add_categories(["ü"])  # a name past ASCII, too
    frame.loc[frame["id"] == 2, "device"] = None
    frame.loc[frame["id"] == 3, "device"] = "ü"
    frame.loc[frame["id"] == 4, "device_start_ns"] = pd.NA
    path = tmp_path / "partial.json"
    write_chrome_trace(frame, path)
    back = read_chrome_trace(path).set_index("id").loc[frame["id"]].reset_index()
    for column in ("device", "device_start_ns", "device_duration_ns"):
        assert back[column].astype(str).tolist() == frame[column].astype(str).tolist(), column


def test_concurrent_asyncio_tasks_round_trip(tmp_path: Path) -> None:
    """50 tasks interleave nested ranges on one thread: their ranges overlap, so nesting alone
    cannot rebuild the parents; recfn_id/recfn_parent_id carry them through the file."""
    import asyncio

    import recfn

    async def task(i: int) -> None:
        with recfn.record_function(f"task{i}"):
            for _ in range(3):
                with recfn.record_function("step"):
                    await asyncio.sleep(0)
                    with recfn.record_function("inner"):
                        await asyncio.sleep(0)

    async def run() -> None:
        await asyncio.gather(*(task(i) for i in range(50)))

    with recfn.profile() as prof:
        asyncio.run(run())
    df = prof.trace.to_pandas()
    path = tmp_path / "tasks.json"
    prof.trace.save(path)
    back = recfn.load(path, as_pandas=True)

    def structure(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
        names = dict(zip(frame["id"], frame["name"].astype(str)))
        parents = frame["parent_id"].astype(object).where(frame["parent_id"].notna(), None)
        return sorted(
            zip(
                frame["id"],
                parents,
                frame["name"].astype(str),
                parents.map(names.get),
                frame["thread_id"],
                frame["start_ns"],
            )
        )

    assert len(df) > 50 * 7 and df["thread_id"].nunique() == 1
    assert structure(back) == structure(df)

    # Without the ids, interval nesting puts some ranges under another task's range.
    document = json.loads(path.read_text())
    for event in document["traceEvents"]:
        for key in IDS:
            event.pop(key, None)
    nested = read_chrome_trace(write(tmp_path / "plain.json", document))
    moved = [
        (a[2], a[3]) != (b[2], b[3])
        for a, b in zip(
            sorted(structure(df), key=lambda r: (r[5], r[2])),
            sorted(structure(nested), key=lambda r: (r[5], r[2])),
        )
    ]
    assert any(moved)


def test_gzip_level_is_chosen_and_checked(tmp_path: Path) -> None:
    frame = analysis.make_synthetic_trace(2_000, 2, seed=6)
    sizes = {}
    for level in (1, 9):
        path = tmp_path / f"level{level}.json.gz"
        write_chrome_trace(frame, path, compresslevel=level)
        sizes[level] = path.stat().st_size
        assert gzip.decompress(path.read_bytes()).startswith(b"{")
    assert sizes[9] < sizes[1]
    assert gzip.decompress((tmp_path / "level1.json.gz").read_bytes()) == gzip.decompress(
        (tmp_path / "level9.json.gz").read_bytes()
    )
    for bad in (0, 10, True, 2.5):
        with pytest.raises(RecfnValueError, match="compresslevel must be 1 to 9"):
            write_chrome_trace(frame, tmp_path / "bad.json.gz", compresslevel=bad)  # type: ignore[arg-type]
        assert not (tmp_path / "bad.json.gz").exists()


@pytest.mark.parametrize("isal", [True, False])
def test_the_fastest_level_writes_the_same_json_with_or_without_isa_l(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isal: bool
) -> None:
    # Level 1 is compressed with ISA-L's igzip where the isal package is installed (a declared
    # dependency where it has wheels), with zlib elsewhere: either way a gzip file of the same
    # JSON as the default level's.
    frame = analysis.make_synthetic_trace(3_000, 2, seed=7)
    write_chrome_trace(frame, tmp_path / "default.json.gz")
    if not isal:
        monkeypatch.setitem(sys.modules, "isal", None)  # import isal raises ImportError
    elif platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        import isal.igzip  # installed with recfn on these platforms
    else:
        pytest.skip("isal is not a dependency on this platform")
    write_chrome_trace(frame, tmp_path / "fast.json.gz", compresslevel=1)
    fast = (tmp_path / "fast.json.gz").read_bytes()
    assert gzip.decompress(fast) == gzip.decompress((tmp_path / "default.json.gz").read_bytes())
    assert read_chrome_table(tmp_path / "fast.json.gz").num_rows == len(frame)
