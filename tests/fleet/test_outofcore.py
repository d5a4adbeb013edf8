"""The out-of-core summary (DuckDB over the files) gives the in-memory summary's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleetdata import same, write_fleet

import recfn
from recfn.analysis.outofcore import summarize_files

pytest.importorskip("duckdb")


@pytest.mark.parametrize("by", ["name", ["rank", "name"], ["host", "pid", "name"]])
def test_duckdb_summary_equals_pandas(tmp_path: Path, by: str | list[str]) -> None:
    files = [str(f) for f in write_fleet(tmp_path)]
    df = recfn.load(tmp_path, as_pandas=True)
    expected = df.recfn.summary(by=by)
    assert (expected.xs("task", level="name") if isinstance(by, list) else expected.loc[["task"]])[
        "self_ns"
    ].min() > 0
    same(summarize_files(files, by=by), expected)


def test_a_lazy_trace_summarises_without_reading_its_files(tmp_path: Path) -> None:
    write_fleet(tmp_path)
    trace = recfn.load(tmp_path)
    summary = trace.summary(top=5)
    assert trace._table is None  # the files were never read into memory
    same(summary, trace.to_pandas().recfn.summary(top=5))
    assert trace.summary(by="rank") is not None  # no name: the pandas path
    assert trace._table is not None


def test_groupings_without_name_are_refused(tmp_path: Path) -> None:
    files = [str(f) for f in write_fleet(tmp_path, processes=1, ranges=10)]
    with pytest.raises(ValueError, match="groups by name"):
        summarize_files(files, by="rank")
    with pytest.raises(ValueError, match="no column"):
        summarize_files(files, by=["nope", "name"])


def test_cli_summarises_a_dataset_and_several_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from recfn.notebook_ext.cli import main

    files = write_fleet(tmp_path / "traces")
    assert main(["summary", str(tmp_path / "traces"), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 files" in out and "6,018 ranges" in out and "Self time total" in out
    assert main(["summary", *map(str, files[:2]), "--by", "rank,name", "--top", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in lines if line.split()[:1] in (["0"], ["1"])} == {"0", "1"}
    assert main(["summary", str(tmp_path / "traces"), "--by", "nope,name"]) == 2
    assert "no column(s) ['nope']" in capsys.readouterr().err
    assert main(["summary", str(tmp_path / "empty")]) == 1
