"""Progress bars: silent when nobody watches (CI, pipes), shown on a terminal."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fleetdata import write_fleet

import recfn
from recfn.formats import progress as _progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_silent_under_ci_and_in_pipes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_fleet(tmp_path, processes=3, ranges=10)
    monkeypatch.delenv("CI", raising=False)
    recfn.load(tmp_path).table  # noqa: B018 (reads the files)
    assert capsys.readouterr().err == ""  # standard error is not a terminal here
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setenv("CI", "true")
    assert list(_progress.progress(range(5))) == list(range(5))
    assert terminal.getvalue() == ""


def test_progress_shows_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("RECFN_PROGRESS", raising=False)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert list(_progress.progress(range(5), desc="reading")) == list(range(5))
    assert "reading" in terminal.getvalue() and "/5 " in terminal.getvalue()
    monkeypatch.setenv("RECFN_PROGRESS", "0")
    terminal.truncate(0)
    terminal.seek(0)
    list(_progress.progress(range(5), desc="reading"))
    assert terminal.getvalue() == ""
