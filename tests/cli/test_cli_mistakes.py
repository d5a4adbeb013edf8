"""User mistakes on the command line end in one line and the documented exit code
(docs/cli.md#errors-and-exit-codes): never a traceback, never "unexpected ... please report it".

In process (``recfn.cli.main``), so the fuzz over every subcommand's options stays fast."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recfn
from recfn.cli import main

EXIT_FAILURE, EXIT_USAGE = 1, 2


def call(*args: str) -> tuple[int, str]:
    """``main(args)``: its exit code and what it wrote on stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(args))
    return code, err.getvalue()


def assert_one_line(code: int, stderr: str, expected: int | None = None) -> None:
    """The error contract: a failure is one ``recfn: error:`` line, never an unexpected one."""
    assert "Traceback" not in stderr, stderr
    assert "unexpected" not in stderr and "please report" not in stderr, stderr
    if expected is not None:
        assert code == expected, (code, stderr)
    if code != 0:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("recfn: error: "), stderr


def write_inputs(folder: Path) -> dict[str, str]:
    """The files the mistakes are made with, in ``folder``: a small trace, a script, and the
    wrong things (a missing file, a folder, a FIFO, a text file, corrupt Parquet, a folder
    holding corrupt Parquet)."""
    with recfn.profile() as prof:
        for i in range(3):
            with recfn.record_function(f"step{i}"):
                pass
    trace = folder / "t.parquet"
    recfn.Trace(prof.table).save(trace)
    (folder / "s.py").write_text("pass\n")
    (folder / "text.parquet").write_text("not parquet\n")
    (folder / "empty.parquet").write_bytes(b"")
    (folder / "corrupt.parquet").write_bytes(trace.read_bytes()[: trace.stat().st_size // 2])
    (folder / "dir").mkdir()
    (folder / "bad_dir").mkdir()
    (folder / "bad_dir" / "part.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    os.mkfifo(folder / "fifo.parquet")
    return {
        "trace": str(trace),
        "script": str(folder / "s.py"),
        "folder": str(folder),
    }


@contextlib.contextmanager
def inputs() -> Iterator[dict[str, str]]:
    """`write_inputs` in a fresh folder that is the current folder meanwhile."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        files = write_inputs(folder)
        os.chdir(folder)
        try:
            yield files
        finally:
            os.chdir(old)


@pytest.fixture
def here(tmp_path: Path) -> Iterator[dict[str, str]]:
    old = os.getcwd()
    files = write_inputs(tmp_path)
    os.chdir(tmp_path)
    try:
        yield files
    finally:
        os.chdir(old)


# --- each mistake the campaign found, at its cause -------------------------------------------


def test_max_events_beyond_int64_is_a_usage_error(here: dict[str, str]) -> None:
    for option in ("--max-events", "--trace-max-depth", "--flight-recorder"):
        code, err = call("run", "-q", option, "9" * 30, "s.py")
        assert_one_line(code, err, EXIT_USAGE)
        assert option in err and "64 bits" in err


def test_profiler_config_refuses_ints_beyond_int64() -> None:
    with pytest.raises(recfn.RecfnError, match="max_events must fit in 64 bits"):
        recfn.ProfilerConfig(max_events=2**63)
    assert recfn.ProfilerConfig(max_events=2**63 - 1).max_events == 2**63 - 1


@pytest.mark.parametrize("width", ["nan", "inf", "-inf", "1e400", "1e6", "9" * 30, "0", "-1"])
def test_timeline_width_must_be_a_drawable_number(here: dict[str, str], width: str) -> None:
    code, err = call("timeline", "t.parquet", "-o", "t.png", f"--width={width}")
    assert_one_line(code, err, EXIT_USAGE)
    assert "--width" in err
    assert not os.path.exists("t.png")


@pytest.mark.parametrize("mark", ["", " "])
def test_align_clocks_needs_a_mark(here: dict[str, str], mark: str) -> None:
    code, err = call("timeline", "t.parquet", "-o", "t.png", "--align-clocks", mark)
    assert_one_line(code, err, EXIT_USAGE)
    assert "--align-clocks" in err


def test_align_clocks_on_a_mark_the_trace_lacks(here: dict[str, str]) -> None:
    code, err = call("timeline", "t.parquet", "-o", "t.png", "--align-clocks", "sync")
    assert_one_line(code, err, EXIT_FAILURE)
    assert "--align-clocks" in err and "'sync'" in err


@pytest.mark.parametrize(
    "events",
    ["", '{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "idle"}}'],
    ids=["none", "only metadata"],
)
def test_a_timeline_with_nothing_to_draw_is_one_line(here: dict[str, str], events: str) -> None:
    """recfn's own errors are the input's, never "unexpected": a trace with no events to draw."""
    Path("none.json").write_text(f'{{"traceEvents": [{events}]}}')
    code, err = call("timeline", "none.json", "-o", "t.png")
    assert_one_line(code, err, EXIT_FAILURE)
    assert "timeline: no " in err, err
    assert not os.path.exists("t.png")


def test_codegen_empty_prefix_is_a_usage_error(here: dict[str, str]) -> None:
    code, err = call("codegen", "json", "--prefix", "")
    assert_one_line(code, err, EXIT_USAGE)
    assert "prefix" in err


def test_an_argument_with_nul_is_a_usage_error(here: dict[str, str]) -> None:
    for args in (("summary", "a\x00b"), ("run", "-q", "-o", "x\x00.parquet", "s.py")):
        code, err = call(*args)
        assert_one_line(code, err, EXIT_USAGE)
        assert "NUL" in err


def test_a_script_with_a_syntax_error_is_shown_as_python_shows_it(here: dict[str, str]) -> None:
    Path("syntax.py").write_text("x = (\n")
    code, err = call("run", "-q", "syntax.py")
    assert code == EXIT_FAILURE
    assert "SyntaxError" in err and "syntax.py" in err and "recfn" not in err


def test_an_unreadable_script_is_one_line(here: dict[str, str]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    Path("locked.py").write_text("pass\n")
    os.chmod("locked.py", 0)
    code, err = call("run", "-q", "locked.py")
    assert_one_line(code, err, EXIT_FAILURE)
    assert "locked.py" in err


def fake_cpu_torch() -> types.ModuleType:
    """A module shaped as a CPU-only torch build is, for the message path where torch is not
    installed: ``torch.cuda.is_available()`` is False and ``torch.version.cuda`` None."""
    torch = types.ModuleType("torch")
    torch.__version__ = "2.13.0+cpu"  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(cuda=None)  # type: ignore[attr-defined]
    return torch


def assert_cuda_refused(err: str, *words: str) -> None:
    assert "--cuda" not in err or "cuda" in err
    assert "cuda=True" in err
    for word in words:
        assert word in err, err


def test_cuda_on_a_cpu_only_torch_is_one_line(
    here: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", fake_cpu_torch())
    code, err = call("run", "-q", "--cuda", "s.py")
    assert_one_line(code, err, EXIT_FAILURE)
    assert_cuda_refused(err, "no CUDA support", "2.13.0+cpu")


def test_cuda_without_torch_is_one_line(
    here: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    code, err = call("run", "-q", "--cuda", "s.py")
    assert_one_line(code, err, EXIT_FAILURE)
    assert_cuda_refused(err, "torch is not installed")


def test_cuda_on_the_installed_torch_is_one_line(here: dict[str, str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: --cuda works here")
    code, err = call("run", "-q", "--cuda", "s.py")
    assert_one_line(code, err, EXIT_FAILURE)
    assert "cuda=True needs a CUDA device" in err


def test_a_corrupt_file_in_a_folder_is_a_bad_file(here: dict[str, str]) -> None:
    for args in (("summary", "bad_dir"), ("convert", "bad_dir", "-o", "o.json")):
        code, err = call(*args)
        assert_one_line(code, err, EXIT_FAILURE)
        assert "part.parquet" in err


def test_a_fifo_among_several_traces_is_refused_without_blocking(here: dict[str, str]) -> None:
    for args in (
        ("summary", "t.parquet", "fifo.parquet"),
        ("convert", "folder_with_fifo", "-o", "o.json"),
    ):
        os.makedirs("folder_with_fifo", exist_ok=True)
        if not os.path.exists("folder_with_fifo/p.parquet"):
            os.mkfifo("folder_with_fifo/p.parquet")
        code, err = call(*args)
        assert_one_line(code, err, EXIT_FAILURE)
        assert "a FIFO" in err


@pytest.mark.parametrize(("option", "words"), [("--by", "no column '--'"), ("--sort", "--sort")])
def test_an_option_given_dashes_as_its_value(here: dict[str, str], option: str, words: str) -> None:
    """``--by=--``: Python 3.11's argparse gave the option an empty list."""
    code, err = call("summary", "t.parquet", f"{option}=--")
    assert_one_line(code, err, EXIT_USAGE)
    assert words in err


def test_sigterm_ends_a_run_waiting_to_read_its_script(tmp_path: Path) -> None:
    """A script that is a FIFO: the run waits for its writer, as python does, and SIGTERM still
    ends the wait (the exit signals are handled only once the script is read)."""
    fifo = tmp_path / "script.py"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "recfn", "run", "-q", str(fifo)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        time.sleep(1.0)  # at worst, the signal comes before the open: ended all the same
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


def test_deeply_nested_metadata_json_is_refused_on_load(tmp_path: Path) -> None:
    """A recfn file without a content hash whose recfn.config is nested past Python's
    recursion limit: refused by the load, naming the key, not a RecursionError later."""
    with recfn.profile() as prof:
        with recfn.record_function("a"):
            pass
    metadata = dict(prof.table.schema.metadata)
    metadata.pop(b"recfn.content_hash", None)
    metadata[b"recfn.config"] = b"[" * 100_000 + b"]" * 100_000
    path = tmp_path / "deep.parquet"
    pq.write_table(prof.table.replace_schema_metadata(metadata), path)
    with pytest.raises(recfn.TraceFormatError, match=r"recfn\.config"):
        recfn.load(path).table  # noqa: B018
    code, err = call("summary", str(path))
    assert_one_line(code, err, EXIT_FAILURE)
    assert "recfn.config" in err


def test_a_deeply_nested_content_hash_is_unreadable(tmp_path: Path) -> None:
    with recfn.profile() as prof:
        with recfn.record_function("a"):
            pass
    path = tmp_path / "t.parquet"
    recfn.Trace(prof.table).save(path)
    table = pq.read_table(path)
    metadata = dict(table.schema.metadata)
    metadata[b"recfn.content_hash"] = b"[" * 100_000 + b"]" * 100_000
    pq.write_table(table.replace_schema_metadata(metadata), path)
    with pytest.raises(recfn.TraceFormatError, match="content_hash is unreadable"):
        recfn.load(path).table  # noqa: B018


def test_trace_config_of_a_table_with_deep_metadata_is_empty() -> None:
    with recfn.profile() as prof:
        pass
    metadata = dict(prof.table.schema.metadata)
    metadata[b"recfn.config"] = b"[" * 100_000 + b"]" * 100_000
    trace = recfn.Trace(prof.table.replace_schema_metadata(metadata))
    assert trace.config == {}


# --- the fuzz: random bad values for every option of every subcommand -------------------------

NUMBERS = ["nan", "NaN", "inf", "-inf", "1e400", "-1", "-0.5", "", " ", "abc", "1,2", "0x10"]
"""Values that no integer or number option takes."""
INT64S = [*NUMBERS, "9" * 30, "-" + "9" * 30, str(2**63)]
"""Values that no integer capture option takes (the recorder keeps them as int64)."""
TEXTS = ["", " ", "nan", "-", "--", "-1", ",", "a,,b", "9" * 30, "\u00e9\u2603", "*", "x=y=z"]
"""Values for options that take text."""
INPUTS = ["missing.parquet", "dir", "bad_dir", "fifo.parquet", "text.parquet", "empty.parquet",
          "corrupt.parquet", "s.py", "/dev/null", "", "missing/"]  # fmt: skip
"""Paths that are not traces to read (a file or folder argument)."""
OUTPUTS = ["dir", "missing/t.parquet", "t.txt", "", "s.py", "text.parquet", "fifo.parquet",
           "/dev/null", "t.parquet/x.parquet"]  # fmt: skip
"""Paths a trace or image cannot be written to (or that recfn refuses to replace)."""
IMAGES = ["dir", "missing/t.png", "t.txt", "", "s.py", "fifo.parquet", "t.parquet"]

# (arguments before the bad value, the option or None for a positional, what it takes,
#  arguments after, the exit code a bad value must give or None: any documented one)
CASES: list[tuple[list[str], str | None, list[str], list[str], int | None]] = [
    (["run", "-q"], "--max-events", INT64S, ["s.py"], EXIT_USAGE),
    (["run", "-q"], "--flight-recorder", INT64S, ["s.py"], EXIT_USAGE),
    (["run", "-q"], "--trace-max-depth", INT64S, ["s.py"], EXIT_USAGE),
    (["run", "-q"], "--flush-interval", NUMBERS, ["s.py"], EXIT_USAGE),
    (["run", "-q"], "--sampling-prob", NUMBERS, ["s.py"], EXIT_USAGE),
    (["run", "-q"], "--top", NUMBERS, ["s.py"], EXIT_USAGE),
    (["run", "-q"], "--record-scopes", TEXTS, ["s.py"], EXIT_USAGE),
    (["run", "-q"], "--trace-include", TEXTS, ["s.py"], None),
    (["run", "-q"], "--trace-exclude", TEXTS, ["s.py"], None),
    (["run", "-q"], "--output", OUTPUTS, ["s.py"], None),
    (["run", "-q"], "--timeline", IMAGES, ["s.py"], None),
    (["run", "-q"], None, ["missing.py", "dir", "bad_dir", "", "missing/"], [], EXIT_FAILURE),
    (["summary"], None, INPUTS, [], EXIT_FAILURE),
    (["summary", "t.parquet"], "--top", NUMBERS, [], EXIT_USAGE),
    (["summary", "t.parquet"], "--by", TEXTS, [], EXIT_USAGE),
    (["summary", "t.parquet"], "--sort", TEXTS, [], EXIT_USAGE),
    (["summary", "t.parquet"], None, INPUTS, [], EXIT_FAILURE),
    (["timeline"], None, INPUTS, ["-o", "t.png"], EXIT_FAILURE),
    (["timeline", "t.parquet"], "--output", IMAGES, [], None),
    (["timeline", "t.parquet", "-o", "t.png"], "--width", NUMBERS, [], EXIT_USAGE),
    (["timeline", "t.parquet", "-o", "t.png"], "--max-depth", NUMBERS, [], None),
    (["timeline", "t.parquet", "-o", "t.png"], "--align-clocks", TEXTS, [], None),
    (["convert"], None, INPUTS, ["-o", "o.json"], EXIT_FAILURE),
    (["convert", "t.parquet"], "--output", OUTPUTS, [], None),
    (["convert", "t.parquet", "-o", "o"], "--split", TEXTS, [], EXIT_USAGE),
    (["diff", "t.parquet"], None, INPUTS, [], EXIT_FAILURE),
    (["diff"], None, INPUTS, ["t.parquet"], EXIT_FAILURE),
    (["diff", "t.parquet", "t.parquet"], "--top", NUMBERS, [], EXIT_USAGE),
    (["demo", "-q"], "--dir", [p for p in INPUTS if p not in ("dir", "bad_dir")], [], None),
    (["codegen"], None, TEXTS, [], EXIT_USAGE),
    (["codegen", "json"], "--prefix", TEXTS, [], None),
    (["codegen", "json"], "--scope", TEXTS, [], EXIT_USAGE),
    (["codegen", "json"], "--rename", TEXTS, [], EXIT_USAGE),
    (["codegen", "json"], "--include", TEXTS, [], None),
    (["codegen", "json"], "--output", [p for p in OUTPUTS if p != "/dev/null"], [], None),
]


@st.composite
def mistakes(draw: st.DrawFn) -> tuple[list[str], int | None]:
    before, option, values, after, expected = draw(st.sampled_from(CASES))
    value = draw(st.sampled_from(values))
    if option is None:
        return [*before, value, *after], expected
    joined = draw(st.booleans()) or value.startswith("-")  # --opt=-1, as a user must write it
    given = [f"{option}={value}"] if joined else [option, value]
    return [*before, *given, *after], expected


@settings(
    database=None,
    derandomize=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mistakes())
def test_bad_option_values_end_in_one_documented_line(
    mistake: tuple[list[str], int | None],
) -> None:
    args, expected = mistake
    with inputs():
        code, err = call(*args)
    assert code in (0, EXIT_FAILURE, EXIT_USAGE), (args, code, err)
    assert_one_line(code, err, expected)
