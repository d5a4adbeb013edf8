"""Other tools' Chrome events are kept in the one schema (async ranges, flows, counters) or
counted as dropped; recfn's Chrome files keep its processes apart and its metadata, and speak the
other tools' dialects (torch's categories and memory instants, HTA's rank metadata)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from test_chrome_native import assert_same_both_ways

import recfn
from recfn.formats import chrome
from recfn.formats.schema import HOST_KEY

DATA = Path(__file__).resolve().parents[2] / "data"


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path


def read(path: Path) -> pa.Table:
    with pytest.warns(RuntimeWarning) if _drops(path) else _nothing():
        assert_same_both_ways(path)
        return chrome.read_chrome_table(path)


def _drops(path: Path) -> bool:
    text = path.read_text()
    return any(f'"ph": "{p}"' in text for p in ("P", "O", "N", "D"))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


OTHER_TOOLS = [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
    {"ph": "X", "name": "step", "cat": "c", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "b", "name": "request", "cat": "net", "id": 7, "pid": 1, "tid": 1, "ts": 10},
    {"ph": "n", "name": "headers", "cat": "net", "id": 7, "pid": 1, "tid": 1, "ts": 20},
    {"ph": "b", "name": "body", "cat": "net", "id": 7, "pid": 1, "tid": 1, "ts": 30},
    {"ph": "e", "name": "body", "cat": "net", "id": 7, "pid": 1, "tid": 1, "ts": 140},
    {"ph": "e", "name": "request", "cat": "net", "id": 7, "pid": 1, "tid": 1, "ts": 150},
    {"ph": "S", "name": "load", "cat": "io", "id": "0x1", "pid": 1, "tid": 1, "ts": 5},
    {"ph": "T", "name": "load", "cat": "io", "id": "0x1", "pid": 1, "tid": 1, "ts": 6},
    {"ph": "p", "name": "load", "cat": "io", "id": "0x1", "pid": 1, "tid": 1, "ts": 7},
    {"ph": "F", "name": "load", "cat": "io", "id": "0x1", "pid": 1, "tid": 1, "ts": 8},
    {"ph": "s", "name": "launch", "cat": "ac2g", "id": 3, "pid": 1, "tid": 1, "ts": 50},
    {"ph": "t", "name": "launch", "cat": "ac2g", "id": 3, "pid": 1, "tid": 2, "ts": 60},
    {"ph": "f", "name": "launch", "cat": "ac2g", "id": 3, "bp": "e", "pid": 1, "tid": 2, "ts": 61},
    {"ph": "X", "name": "kernel", "cat": "kernel", "pid": 1, "tid": 2, "ts": 61, "dur": 9},
    {"ph": "C", "name": "CPU", "cat": "sys", "pid": 1, "ts": 70, "args": {"percent": 12.5}},
    {"ph": "C", "name": "CPU", "cat": "sys", "pid": 1, "ts": 80, "args": {"percent": 80}},
    {"ph": "P", "name": "sample", "pid": 1, "tid": 1, "ts": 90},
    {"ph": "O", "name": "obj", "id": "0x2", "pid": 1, "tid": 1, "ts": 91, "args": {"snapshot": {}}},
    {"ph": "N", "name": "obj", "id": "0x2", "pid": 1, "tid": 1, "ts": 92},
    {"ph": "e", "name": "orphan", "cat": "net", "id": 99, "pid": 1, "tid": 1, "ts": 95},
]


def rows(table: pa.Table) -> list[tuple[Any, ...]]:
    df = table.to_pandas()
    return list(
        zip(
            df["name"].astype(str),
            df["kind"].astype(str),
            df["start_ns"],
            df["end_ns"],
            df["is_async"],
        )
    )


def test_events_of_other_tools_are_kept_or_counted(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", OTHER_TOOLS)
    with pytest.warns(RuntimeWarning, match=r"4 event.*dropped.*'N': 1, 'O': 1, 'P': 1, 'e': 1"):
        table = chrome.read_chrome_table(path)
    assert table.schema.metadata[b"recfn.dropped_events"] == b"4"
    kinds = pd.Series(table.column("kind").to_pylist()).value_counts().to_dict()
    assert kinds == {"range": 5, "mark": 3, "flow": 3, "counter": 2}
    found = {
        (name, kind): (start, end, is_async) for name, kind, start, end, is_async in rows(table)
    }
    assert found[("request", "range")] == (10_000, 150_000, True)
    assert found[("body", "range")] == (30_000, 140_000, True)
    assert found[("load", "range")] == (5000, 8000, True)
    assert found[("headers", "mark")] == (20_000, 20_000, True)
    df = table.to_pandas().set_index("name")
    ids = table.to_pandas().set_index(["name", "kind"])["id"]
    # An async track nests in itself, never in the thread's ranges.
    assert df.loc["body", "parent_id"] == ids["request", "range"]
    assert df.loc["headers", "parent_id"] == ids["request", "range"]
    assert pd.isna(df.loc["request", "parent_id"])
    flows = df[df["kind"] == "flow"]
    parents = flows["parent_id"].astype(object).where(flows["parent_id"].notna(), None)
    assert parents.tolist() == [ids["step", "range"], None, ids["kernel", "range"]]
    assert [json.loads(a)["ph"] for a in flows["args"]] == ["s", "t", "f"]
    counters = df[df["kind"] == "counter"]
    assert counters["args"].tolist() == ['{"percent":12.5}', '{"percent":80}']
    assert "memory_bytes" not in table.column_names  # counters are not memory


def test_both_decoders_read_other_tools_events_alike(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", OTHER_TOOLS)
    with pytest.warns(RuntimeWarning, match="dropped"):
        assert_same_both_ways(path)


def test_a_tensor_list_keeps_the_shapes_of_the_other_events(tmp_path: Path) -> None:
    """A collective's "Input Dims" holds a tensor list (nested dims): only its own shapes are
    not columns (its args keep them)."""
    op = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "dur": 1}
    events = [
        {**op, "name": "aten::mm", "ts": 0, "args": {"Input Dims": [[2, 3], [3, 4]]}},
        {
            **op,
            "name": "gloo:all_reduce",
            "ts": 2,
            "args": {"Input Dims": [[[2, 3], [2, 3]]], "Input type": ["TensorList"]},
        },
        {**op, "name": "aten::cat", "ts": 4, "args": {"Input Dims": [[[4], [4]], []]}},
        {**op, "name": "aten::add", "ts": 6, "args": {"Input Dims": [[5], [5]]}},
    ]
    table = read(write(tmp_path / "t.json", events))
    assert table.column("input_shapes").to_pylist() == [[[2, 3], [3, 4]], None, None, [[5], [5]]]
    assert table.column("input_dtypes").to_pylist() == [None, ["TensorList"], None, None]
    assert json.loads(table.column("args")[1].as_py())["Input Dims"] == [[[2, 3], [2, 3]]]


def phases(path: Path) -> dict[str, int]:
    events = json.loads(path.read_text())["traceEvents"]
    return pd.Series([e["ph"] for e in events]).value_counts().to_dict()


def test_async_flow_and_counter_events_round_trip(tmp_path: Path) -> None:
    source = write(tmp_path / "t.json", OTHER_TOOLS)
    with pytest.warns(RuntimeWarning, match="dropped"):
        first = recfn.load(source)
    first.save(tmp_path / "back.json")
    again = read(tmp_path / "back.json")
    kept = {p: n for p, n in pd.Series([e["ph"] for e in OTHER_TOOLS]).value_counts().items()}
    written = phases(tmp_path / "back.json")
    for phase in ("b", "n", "S", "T", "p", "F", "s", "t", "f", "C", "X"):
        assert written.get(phase) == kept[phase], phase
    assert written["e"] == kept["e"] - 1  # the end without a beginning was dropped
    assert rows(again) == rows(first.table)
    assert again.column("args").to_pylist() == first.table.column("args").to_pylist()
    assert again.schema.metadata[b"recfn.dropped_events"] == b"4"  # counted once, kept


def two_hosts() -> pa.Table:
    """Two containers (pid 1 on both hosts) whose steps overlap in time."""

    def host(name: str, start: int) -> recfn.Trace:
        with recfn.profile() as prof:
            with recfn.record_function("step"):
                with recfn.record_function("inner"):
                    pass
        table = prof.trace.table
        shift = start - table.column("start_ns")[0].as_py()
        table = table.set_column(
            table.schema.get_field_index("start_ns"),
            "start_ns",
            pa.array([v + shift for v in table.column("start_ns").to_pylist()]),
        )
        table = table.set_column(
            table.schema.get_field_index("end_ns"),
            "end_ns",
            pa.array([v + shift for v in table.column("end_ns").to_pylist()]),
        )
        for column, value in (("pid", 1), ("host", name)):
            index = table.schema.get_field_index(column)
            table = table.set_column(
                index, column, pa.array([value] * table.num_rows).cast(table.schema[index].type)
            )
        return recfn.Trace(table)

    return recfn.merge([host("a", 10**18), host("b", 10**18 + 10)]).table


def test_two_hosts_with_one_pid_stay_two_processes(tmp_path: Path) -> None:
    table = two_hosts()
    recfn.Trace(table).save(tmp_path / "fleet.json")
    document = json.loads((tmp_path / "fleet.json").read_text())
    pids = {e["pid"] for e in document["traceEvents"] if e["ph"] == "X"}
    assert len(pids) == 2 and 1 in pids
    back = read(tmp_path / "fleet.json")
    assert sorted(set(zip(back.column("host").to_pylist(), back.column("pid").to_pylist()))) == [
        ("a", 1),
        ("b", 1),
    ]

    def structure(t: pa.Table) -> list[tuple[Any, ...]]:
        df = t.to_pandas()
        names = dict(zip(zip(df["host"].astype(str), df["id"]), df["name"].astype(str)))
        return sorted(
            (h, n, s, e, names.get((h, p)) if pd.notna(p) else None)
            for h, n, s, e, p in zip(
                df["host"].astype(str), df["name"].astype(str), df["start_ns"], df["end_ns"],
                df["parent_id"],
            )
        )  # fmt: skip

    assert structure(back) == structure(table)


def test_a_chrome_round_trip_keeps_metadata_and_process_columns(tmp_path: Path) -> None:
    with recfn.profile() as prof:
        with recfn.record_function("step"):
            recfn.mark("here")
    table = prof.trace.table
    metadata = {**prof.trace.metadata, "recfn.rank": "3", "recfn.world_size": "4"}
    rank = table.schema.get_field_index("rank")
    table = table.set_column(rank, "rank", pa.array([3] * table.num_rows, pa.int32()))
    trace = recfn.Trace(table.replace_schema_metadata(metadata))
    trace.save(tmp_path / "t.json")
    back = recfn.load(tmp_path / "t.json")
    for key in ("recfn.rank", "recfn.pid", "recfn.wall_ns", "recfn.host", "recfn.config"):
        assert back.metadata[key] == trace.metadata[key], key
    assert back.wall_ns == trace.wall_ns and back.pid == trace.pid and back.host == trace.host
    for column in ("host", "rank", "pid", "name", "kind", "scope", "start_ns", "end_ns", "id"):
        assert back.table.column(column).to_pylist() == table.column(column).to_pylist(), column
    head = (tmp_path / "t.json").read_text()[:2000]
    assert re.search(r'"rank":\s+(\d+)', head).group(1) == "3"  # as HTA's parser finds it


def test_foreign_traces_have_an_unknown_host() -> None:
    trace = recfn.load(DATA / "torch_trace.json")
    assert trace.metadata[HOST_KEY] == "unknown" and trace.host == "unknown"


def test_a_torch_trace_passed_through_keeps_its_members_and_memory_instants(
    tmp_path: Path,
) -> None:
    document = json.loads((DATA / "torch_trace.json").read_text())
    document["distributedInfo"] = {"backend": "gloo", "rank": 1, "world_size": 2}
    source = write(tmp_path / "rank1.json", document)
    recfn.load(source).save(tmp_path / "through.json")
    text = (tmp_path / "through.json").read_text()
    written = json.loads(text)
    assert written["distributedInfo"] == document["distributedInfo"]
    assert written["deviceProperties"] == document["deviceProperties"]
    assert re.search(r'"rank":\s+(\d+)', text).group(1) == "1"

    def memory(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (e["ph"], e["ts"], e["args"])
            for e in events
            if e.get("name") == "[memory]" and e["ph"] == "i"
        ]

    assert memory(written["traceEvents"]) == memory(document["traceEvents"])
    categories = {e["cat"] for e in written["traceEvents"] if e["ph"] == "X"}
    assert categories == {e["cat"] for e in document["traceEvents"] if e["ph"] == "X"}


def test_recfn_scopes_are_written_as_torch_categories(tmp_path: Path) -> None:
    with recfn.profile() as prof:
        with recfn.record_function("step"):  # user_scope
            op = recfn.RecordFunction(recfn.RecordScope.FUNCTION)
            op.before("op")
            op.end()
    prof.trace.save(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["name"]: e["cat"] for e in events if e["ph"] == "X"} == {
        "step": "user_annotation",
        "op": "cpu_op",
    }
    back = recfn.load(tmp_path / "t.json").table
    assert back.column("scope").to_pylist() == prof.trace.table.column("scope").to_pylist()


def test_memory_events_are_torch_memory_instants(tmp_path: Path) -> None:
    with recfn.profile() as prof:
        recfn.report_memory_usage(4096, "cuda:1")
        recfn.report_memory_usage(-1024, "cuda:1")
        recfn.report_memory_usage(64, "cpu")
    prof.trace.save(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    instants = [e["args"] for e in events if e["ph"] == "i" and e["name"] == "[memory]"]
    assert instants == [
        {"Bytes": 4096, "Total Allocated": 4096, "Device Type": 1, "Device Id": 1},
        {"Bytes": -1024, "Total Allocated": 3072, "Device Type": 1, "Device Id": 1},
        {"Bytes": 64, "Total Allocated": 64, "Device Type": 0, "Device Id": -1},
    ]
    back = recfn.load(tmp_path / "t.json").table
    for column in ("memory_bytes", "device", "start_ns", "kind"):
        assert back.column(column).to_pylist() == prof.trace.table.column(column).to_pylist()


def profiled_steps(rank: int) -> pa.Table:
    """Two ProfilerStep ranges (user_scope) with an operator (function scope) in each, as rank
    `rank` of a job of two."""
    with recfn.profile() as prof:
        for step in range(2):
            with recfn.record_function(f"ProfilerStep#{step}"):
                op = recfn.RecordFunction(recfn.RecordScope.FUNCTION)
                op.before("aten::mm")
                sum(range(1000))
                op.end()
    table = prof.trace.table
    index = table.schema.get_field_index("rank")
    table = table.set_column(index, "rank", pa.array([rank] * table.num_rows, pa.int32()))
    metadata = {**prof.trace.metadata, "recfn.rank": str(rank), "recfn.world_size": "2"}
    return table.replace_schema_metadata(metadata)


def test_torch_tb_profiler_finds_the_operators_and_steps(tmp_path: Path) -> None:
    """The real torch-tb-profiler, where it is installed."""
    data = pytest.importorskip("torch_tb_profiler.profiler.data")
    recfn.Trace(profiled_steps(0)).save(tmp_path / "w.pt.trace.json")
    profile = data.RunProfileData.parse("w", "1", str(tmp_path / "w.pt.trace.json"), str(tmp_path))
    assert [(op.name, op.calls) for op in profile.op_list_groupby_name] == [("aten::mm", 2)]
    assert profile.steps_names == ["0", "1"]
    assert all(cost >= 0 for cost in profile.avg_costs.costs)


def test_hta_reads_each_rank_on_one_time_base(tmp_path: Path) -> None:
    """The real HTA, where it is installed: a file per rank, ranks found and lined up."""
    trace_analysis = pytest.importorskip("hta.trace_analysis")
    first, second = profiled_steps(0), profiled_steps(1)
    table = recfn.merge([recfn.Trace(first), recfn.Trace(second)]).table
    written = chrome.write_chrome_ranks(table, tmp_path / "job")
    assert [Path(p).name for p in written] == ["rank-0.json.gz", "rank-1.json.gz"]
    analysis = trace_analysis.TraceAnalysis(trace_dir=str(tmp_path / "job"))
    assert sorted(analysis.t.traces) == [0, 1]

    def step_start(t: pa.Table) -> int:
        df = t.to_pandas()
        return int(df.loc[df["name"] == "ProfilerStep#0", "start_ns"].iloc[0])

    offset_us = (step_start(second) - step_start(first)) / 1000
    firsts = {rank: float(df["ts"].min()) for rank, df in analysis.t.traces.items()}
    assert abs(firsts[1] - firsts[0] - offset_us) <= 1  # HTA keeps whole microseconds


def test_write_chrome_ranks_needs_a_rank_for_every_event(tmp_path: Path) -> None:
    with recfn.profile() as prof:
        with recfn.record_function("a"):
            pass
    with pytest.raises(recfn.RecfnError, match="no rank"):
        chrome.write_chrome_ranks(prof.trace.table, tmp_path / "job")
