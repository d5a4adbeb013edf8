"""`recfn summary` out of core: datasets, several files, and one large Parquet file."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fleetdata import write_fleet


def test_cli_summarises_a_dataset_and_several_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from recfn.cli import main

    files = write_fleet(tmp_path / "traces")
    assert main(["summary", str(tmp_path / "traces"), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 files" in out and "6,018 ranges" in out and "Self time total" in out
    assert "never stopped" not in out  # saved traces, not parts of a capture
    assert main(["summary", *map(str, files[:2]), "--by", "rank,name", "--top", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in lines if line.split()[:1] in (["0"], ["1"])} == {"0", "1"}
    assert main(["summary", str(tmp_path / "traces"), "--by", "nope,name"]) == 2
    assert "no column(s) ['nope']" in capsys.readouterr().err
    assert main(["summary", str(tmp_path / "empty")]) == 1


def test_cli_summary_of_a_dataset_reads_each_footer_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema check, the unfinished captures and the header share the footers read (and,
    for one large file, the check of its size)."""
    from recfn.cli import _summary, main
    from recfn.formats import dataset

    write_fleet(tmp_path, ranges=20)
    reads: Counter[str] = Counter()
    read_footer = dataset.read_footer

    def counted(name: str) -> pq.FileMetaData:
        reads[name] += 1
        return read_footer(name)

    monkeypatch.setattr(dataset, "read_footer", counted)
    assert main(["summary", str(tmp_path)]) == 0
    assert "3 processes · 3 files" in capsys.readouterr().out
    assert reads == Counter(dataset.resolve(tmp_path))
    reads.clear()
    monkeypatch.setattr(_summary, "LARGE_ROWS", 10)
    one = dataset.resolve(tmp_path)[0]
    assert main(["summary", one]) == 0
    assert "1 process · 1 file" in capsys.readouterr().out  # out of core
    assert reads == Counter([one])


def test_cli_summarises_a_large_file_out_of_core(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from recfn.cli import _summary, main

    path = write_fleet(tmp_path, processes=1)[0]
    assert main(["summary", str(path)]) == 0
    assert "1 file ·" not in capsys.readouterr().out  # small: read whole
    monkeypatch.setattr(_summary, "LARGE_ROWS", 100)
    assert main(["summary", str(path), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "1 process · 1 file · 2,006 ranges · 0 dropped" in out and "Self time total" in out
