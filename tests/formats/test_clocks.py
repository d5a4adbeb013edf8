"""Clock offsets between hosts: estimated from matching marks or given, applied on load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn.formats import schema


def capture() -> pa.Table:
    """One process: three ``sync`` marks, each followed by a ``step`` range."""
    with recfn.profile() as prof:
        for _ in range(3):
            recfn.mark("sync")
            with recfn.record_function("step"):
                pass
    return prof.table


BASE = capture()


def as_host(table: pa.Table, host: str, pid: int, rank: int, skew: int) -> pa.Table:
    """``table`` as if another process on ``host`` had recorded it with its clock ``skew`` ns
    ahead."""
    n = table.num_rows
    hosts = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, np.int32)), pa.array([host], pa.string())
    )
    replaced = {
        "host": hosts,
        "pid": pa.array(np.full(n, pid, np.int64)),
        "rank": pa.array(np.full(n, rank, np.int32)),
        "start_ns": pc.add(table.column("start_ns"), skew),
        "end_ns": pc.add(table.column("end_ns"), skew),
    }
    for name, values in replaced.items():
        table = table.set_column(table.schema.get_field_index(name), name, values)
    return table


def write(folder: Path, tables: list[pa.Table]) -> Path:
    for table in tables:
        host, pid = table.column("host")[0].as_py(), table.column("pid")[0].as_py()
        path = folder / f"hostname={host}" / f"process={pid}" / "part-00000.parquet"
        path.parent.mkdir(parents=True)
        recfn.Trace(table).save(path)
    return folder


@settings(max_examples=25, deadline=None)
@given(skews=st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=3))
def test_offsets_from_marks_undo_each_hosts_skew(skews: list[int]) -> None:
    tables = [as_host(BASE, "a", 1, 0, 0)]
    tables += [as_host(BASE, f"h{k}", 10 + k, k + 1, skew) for k, skew in enumerate(skews)]
    merged = pa.concat_tables(tables, promote_options="default").unify_dictionaries()
    offsets = recfn.estimate_clock_offsets(merged, "sync")
    assert offsets == {"a": 0, **{f"h{k}": -skew for k, skew in enumerate(skews)}}
    aligned = recfn.apply_clock_offsets(merged, "sync")
    for table in tables[1:]:
        host = table.column("host")[0].as_py()
        rows = pc.equal(aligned.column("host").cast(pa.string()), host)
        assert aligned.filter(rows).column("start_ns").equals(BASE.column("start_ns"))
    assert json.loads(aligned.schema.metadata[schema.CLOCK_OFFSETS_KEY.encode()]) == offsets


def test_load_applies_estimated_or_given_offsets_and_records_them(tmp_path: Path) -> None:
    skew = 3_000_000
    folder = write(
        tmp_path / "traces", [as_host(BASE, "a", 1, 0, 0), as_host(BASE, "b", 2, 1, skew)]
    )
    raw = recfn.load(folder).to_pandas()
    assert raw.recfn.stragglers("step")["last_rank"].tolist() == [1, 1, 1]

    for offsets in ("sync", {"b": -skew}):
        trace = recfn.load(folder, clock_offsets=offsets)
        assert json.loads(trace.metadata[schema.CLOCK_OFFSETS_KEY]) == {"a": 0, "b": -skew}
        df = trace.to_pandas()
        b = df[df["host"] == "b"]
        assert (b["start_ns"].to_numpy() == raw[raw["host"] == "b"]["start_ns"] - skew).all()
        lag = df.recfn.stragglers("step")["lag_ns"]
        assert (lag == 0).all()  # the same process twice: aligned, nobody lags
        # Durations unchanged; the wall time (Total %) is that of the aligned clocks.
        aligned, skewed = trace.summary(), recfn.load(folder).summary()
        assert aligned.drop(columns="total_pct").equals(skewed.drop(columns="total_pct"))

    single = recfn.load(folder / "hostname=b/process=2/part-00000.parquet", clock_offsets={"b": 5})
    assert (
        single.table.column("start_ns")[0].as_py()
        == raw[raw["host"] == "b"]["start_ns"].iloc[0] + 5
    )


def test_the_reference_is_the_host_of_the_lowest_rank_and_outliers_do_not_move_it() -> None:
    a = as_host(BASE, "a", 1, 3, 0)
    b = as_host(BASE, "b", 2, 0, 700)
    marks = np.flatnonzero(pc.equal(a.column("name").cast(pa.string()), "sync").to_numpy(False))
    late = np.zeros(a.num_rows, np.int64)
    late[marks[0]] = -(10**9)  # one mark of host a far off (still first): the median holds
    a = a.set_column(
        a.schema.get_field_index("start_ns"),
        "start_ns",
        pc.add(a.column("start_ns"), pa.array(late)),
    )
    merged = pa.concat_tables([a, b]).unify_dictionaries()
    assert recfn.estimate_clock_offsets(merged, "sync") == {"b": 0, "a": 700}


def test_bad_offsets_are_refused_with_what_was_wrong(tmp_path: Path) -> None:
    folder = write(tmp_path / "traces", [as_host(BASE, "a", 1, 0, 0), as_host(BASE, "b", 2, 1, 9)])
    with pytest.raises(ValueError, match=r"hosts the trace does not have: \['c'\]"):
        recfn.load(folder, clock_offsets={"c": 1}).to_pandas()
    with pytest.raises(TypeError, match="host names"):
        recfn.load(folder, clock_offsets={"a": 1.5})
    with pytest.raises(TypeError, match="mapping or a mark name"):
        recfn.load(folder, clock_offsets=[1, 2])
    with pytest.raises(ValueError, match="no mark named 'barrier'"):
        recfn.load(folder, clock_offsets="barrier").to_pandas()
    only_a = as_host(BASE, "a", 1, 0, 0)
    b = as_host(BASE, "b", 2, 1, 0)
    b = b.filter(pc.not_equal(b.column("name").cast(pa.string()), "sync"))
    merged = pa.concat_tables([only_a, b]).unify_dictionaries()
    with pytest.raises(ValueError, match="no mark named 'sync'"):
        recfn.estimate_clock_offsets(b, "sync")
    with pytest.raises(ValueError, match="host 'b' has no 'sync' mark matching"):
        recfn.estimate_clock_offsets(merged, "sync")
    with pytest.raises(recfn.RecfnError, match="expects a pyarrow.Table"):
        recfn.apply_clock_offsets(5, {})  # type: ignore[arg-type]


def test_cli_timeline_aligns_clocks_on_a_mark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from recfn.cli import main

    folder = write(tmp_path / "traces", [as_host(BASE, "a", 1, 0, 0), as_host(BASE, "b", 2, 1, 9)])
    image = tmp_path / "aligned.png"
    assert main(["timeline", str(folder), "-o", str(image), "--align-clocks", "sync"]) == 0
    assert image.stat().st_size > 0
    assert main(["timeline", str(folder), "-o", str(image), "--align-clocks", "nope"]) == 1
    err = capsys.readouterr().err
    assert "recfn: error: --align-clocks: no mark named 'nope'" in err
    assert "Traceback" not in err
