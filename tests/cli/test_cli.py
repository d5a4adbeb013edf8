"""The recfn command line end to end: ``python -m recfn ...`` in a subprocess, plus argument
handling in process."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import recfn
from recfn.cli import main
from recfn.notebook_ext.options import split_options

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


ENV: dict[str, str] = {}


@pytest.fixture(autouse=True, scope="module")
def _subprocess_env(checkout_env: dict[str, str]) -> None:
    ENV.update(checkout_env)


def recfn_cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recfn", *map(str, args)],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_user_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    """A user mistake: non-zero exit, one line on stderr, no traceback."""
    assert_one_line_error(proc.returncode, proc.stderr, *words)


def assert_one_line_error(code: int, stderr: str, *words: str) -> None:
    assert code != 0
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("recfn: error: ")
    assert "Traceback" not in stderr
    for word in words:
        assert word in lines[0], lines[0]


def in_process(capsys: pytest.CaptureFixture[str], *args: object, cwd: Path) -> tuple[int, str]:
    """``main(args)`` run here (fast) from ``cwd``: its exit code and stderr."""
    capsys.readouterr()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = main([str(a) for a in args])
    finally:
        os.chdir(old)
    return code, capsys.readouterr().err


def range_names(df: pd.DataFrame) -> list[str]:
    return [str(n) for n in df.loc[df["kind"] == "range", "name"]]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``recfn demo`` run once; its files are the inputs of the other commands."""
    folder = tmp_path_factory.mktemp("demo")
    proc = recfn_cli("demo", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout
    return folder


# -- demo --------------------------------------------------------------------------------------


def test_demo_writes_trace_and_timeline(demo_dir: Path):
    assert (demo_dir / "demo_timeline.png").read_bytes().startswith(PNG_MAGIC)
    df = recfn.load(demo_dir / "demo.parquet", as_pandas=True)
    names = set(range_names(df))
    assert {"train_step", "forward", "matmul", "preprocess", "fetch_all", "fetch[0]"} <= names
    assert df["thread_name"].astype(str).nunique() >= 3  # main + two workers
    matmul = df[df["name"] == "matmul"].iloc[0]
    assert [list(s) for s in matmul["input_shapes"]] == [[64, 128], [128, 256]]
    fetches = df[df["name"].astype(str).str.startswith("fetch[")]
    fetch_all = df.loc[df["name"] == "fetch_all", "id"].iloc[0]
    assert (fetches["parent_id"] == fetch_all).all()  # per-task parents


# -- run ---------------------------------------------------------------------------------------

SCRIPT = textwrap.dedent(
    """\
    import sys
    import numpy as np
    import recfn

    print("argv:", sys.argv[1:])
    with recfn.record_function("work"):
        with recfn.record_function_fast("matmul", (np.ones((4, 5)), np.ones((5, 6)))):
            pass
    if "--fail" in sys.argv:
        def helper():
            raise ValueError("boom in script")
        helper()
    if "--exit" in sys.argv:
        sys.exit(3)
    if "--interrupt" in sys.argv:
        raise KeyboardInterrupt
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(SCRIPT)
    return path


def test_run_profiles_a_script_and_writes_trace_and_timeline(script: Path, tmp_path: Path):
    proc = recfn_cli(
        "run", script, "a", "-b", "--c=1", "-o", "t.parquet", "--shapes", "--timeline", "t.png",
        "--no-trace-calls",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "argv: ['a', '-b', '--c=1']" in proc.stdout
    assert "recfn · job.py" in proc.stderr and "matmul" in proc.stderr  # the summary
    df = recfn.load(tmp_path / "t.parquet", as_pandas=True)
    main_range = df[df["name"] == "__main__"]
    assert len(main_range) == 1 and main_range["scope"].iloc[0] == "user_scope"
    work = df[df["name"] == "work"].iloc[0]
    assert work["parent_id"] == main_range["id"].iloc[0]
    matmul = df[df["name"] == "matmul"].iloc[0]
    assert [list(s) for s in matmul["input_shapes"]] == [[4, 5], [5, 6]]
    assert (tmp_path / "t.png").read_bytes().startswith(PNG_MAGIC)


def test_run_options_fill_their_columns(script: Path, tmp_path: Path):
    proc = recfn_cli(
        "run", "--memory", "--stack", "--flops", "--max-events", "100000", "-q", "--no-trace-calls",
        script, "-o", "t.parquet", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    df = recfn.load(tmp_path / "t.parquet", as_pandas=True)
    assert {"stack", "memory_bytes", "flops"} <= set(df.columns)
    matmul = df[df["name"] == "matmul"].iloc[0]
    assert matmul["flops"] == 2 * 4 * 5 * 6
    assert any("job.py" in frame for frame in matmul["stack"])


def test_run_passes_arguments_after_double_dash_untouched(script: Path, tmp_path: Path):
    proc = recfn_cli("run", "-q", script, "--", "-o", "x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "argv: ['-o', 'x']" in proc.stdout
    assert proc.stderr == ""
    assert not (tmp_path / "x").exists()


def test_run_failing_script_shows_its_traceback_and_keeps_the_trace(script: Path, tmp_path: Path):
    proc = recfn_cli("run", script, "--fail", "-o", "t.json", cwd=tmp_path)
    assert proc.returncode == 1
    assert "ValueError: boom in script" in proc.stderr
    assert str(script) in proc.stderr and "notebook_ext" not in proc.stderr
    assert "interrupted by ValueError" in proc.stderr
    import recfn.analysis as analysis

    assert "work" in range_names(analysis.read_chrome_trace(tmp_path / "t.json"))


def test_run_exits_with_the_scripts_code(script: Path, tmp_path: Path):
    proc = recfn_cli("run", "-q", "-o", "t.parquet", script, "--exit", cwd=tmp_path)
    assert proc.returncode == 3
    assert (tmp_path / "t.parquet").exists()


def test_run_interrupted_script_exits_130_and_keeps_the_trace(script: Path, tmp_path: Path):
    proc = recfn_cli("run", script, "--interrupt", "-o", "t.parquet", cwd=tmp_path)
    assert proc.returncode == 130
    assert "interrupted" in proc.stderr and "Traceback" not in proc.stderr
    assert "work" in range_names(recfn.load(tmp_path / "t.parquet", as_pandas=True))


def test_run_user_mistakes(script: Path, tmp_path: Path):
    assert_user_error(recfn_cli("run", "missing.py", cwd=tmp_path), "no such script")
    assert_user_error(recfn_cli("run", script, "-o", "t.txt", cwd=tmp_path), "t.txt")
    assert_user_error(recfn_cli("run", "--sample", "2", script, cwd=tmp_path), "--sample", "[0, 1]")
    assert_user_error(recfn_cli("run", cwd=tmp_path), "which script")


# -- summary, timeline, convert, diff ----------------------------------------------------------


def test_summary_prints_header_and_table(demo_dir: Path):
    proc = recfn_cli("summary", "demo.parquet", "--top", "5", "--sort", "total", cwd=demo_dir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("recfn · demo.parquet")
    assert (
        "__main__" in proc.stdout and "demo" in proc.stdout
    )  # the two enclosing ranges lead by total


def test_timeline_renders_png(demo_dir: Path, tmp_path: Path):
    out = tmp_path / "timeline.png"
    proc = recfn_cli("timeline", demo_dir / "demo.parquet", "-o", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_convert_parquet_to_chrome_and_back(demo_dir: Path, tmp_path: Path):
    chrome = tmp_path / "demo.json.gz"
    back = tmp_path / "back.parquet"
    assert recfn_cli("convert", demo_dir / "demo.parquet", chrome, cwd=tmp_path).returncode == 0
    assert json.loads(gzip.decompress(chrome.read_bytes()))["traceEvents"]
    proc = recfn_cli("convert", chrome, "-o", back, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    original = recfn.load(demo_dir / "demo.parquet", as_pandas=True)
    again = recfn.load(back, as_pandas=True)
    assert sorted(range_names(again)) == sorted(range_names(original))


def ranked(rank: int) -> recfn.Trace:
    """A small capture as rank `rank` of a job of two."""
    import pyarrow as pa

    with recfn.profile() as prof:
        with recfn.record_function(f"step{rank}"):
            pass
    table = prof.trace.table
    index = table.schema.get_field_index("rank")
    table = table.set_column(index, "rank", pa.array([rank] * table.num_rows, pa.int32()))
    metadata = {**prof.trace.metadata, "recfn.rank": str(rank), "recfn.world_size": "2"}
    return recfn.Trace(table.replace_schema_metadata(metadata))


def test_convert_split_rank_writes_a_chrome_file_per_rank(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    (tmp_path / "job").mkdir()
    for rank in (0, 1):
        ranked(rank).save(tmp_path / "job" / f"r{rank}.parquet")
    code, err = in_process(capsys, "convert", "job", "-o", "hta", "--split", "rank", cwd=tmp_path)
    assert code == 0, err
    files = sorted((tmp_path / "hta").iterdir())
    assert [f.name for f in files] == ["rank-0.json.gz", "rank-1.json.gz"]
    heads = [json.loads(gzip.decompress(f.read_bytes())) for f in files]
    assert [h["distributedInfo"] for h in heads] == [
        {"rank": 0, "world_size": 2},
        {"rank": 1, "world_size": 2},
    ]
    assert heads[0]["baseTimeNanoseconds"] == heads[1]["baseTimeNanoseconds"]
    for rank, f in enumerate(files):
        back = recfn.load(f)
        assert set(back.table.column("rank").to_pylist()) == {rank}
        assert range_names(back.to_pandas()) == [f"step{rank}"]
    # A second run refuses nothing recfn wrote; a file it did not write needs --force.
    assert (
        in_process(capsys, "convert", "job", "-o", "hta", "--split", "rank", cwd=tmp_path)[0] == 0
    )
    (tmp_path / "hta" / "rank-1.json.gz").write_text("mine")
    code, err = in_process(capsys, "convert", "job", "-o", "hta", "--split", "rank", cwd=tmp_path)
    assert_one_line_error(code, err, "refusing to overwrite")
    code, err = in_process(
        capsys, "convert", "job", "-o", "hta", "--split", "rank", "--force", cwd=tmp_path
    )
    assert code == 0, err


def test_convert_split_rank_refuses_events_without_a_rank(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    with recfn.profile() as prof:
        with recfn.record_function("a"):
            pass
    prof.trace.save(tmp_path / "t.parquet")
    code, err = in_process(
        capsys, "convert", "t.parquet", "-o", "out", "--split", "rank", cwd=tmp_path
    )
    assert code == 1
    assert_one_line_error(code, err, "--split rank", "no rank")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


TORCH_SHAPED_TRACE = {
    "schemaVersion": 1,
    "deviceProperties": [],
    "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "train_step", "pid": 11, "tid": 11,
         "ts": 1000.0, "dur": 500.0, "args": {"External id": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 11, "tid": 11, "ts": 1100.0,
         "dur": 200.0, "args": {"Input Dims": [[4, 5], [5, 6]], "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 11, "tid": 11, "ts": 1350.0,
         "dur": 50.0, "args": {}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 11, "tid": 11,
         "ts": 1120.0, "s": "t", "args": {"Bytes": 80, "Total Allocated": 80, "Device Id": -1,
                                          "Device Type": 0}},
        {"ph": "M", "name": "thread_name", "pid": 11, "tid": 11, "args": {"name": "python"}},
    ],
}  # fmt: skip


def test_convert_and_summarize_a_torch_shaped_chrome_trace(tmp_path: Path):
    source = tmp_path / "torch_trace.json"
    source.write_text(json.dumps(TORCH_SHAPED_TRACE))
    proc = recfn_cli("convert", source, "torch.parquet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    df = recfn.load(tmp_path / "torch.parquet", as_pandas=True)
    assert {"train_step", "aten::mm", "aten::add"} <= set(range_names(df))
    summary = recfn_cli("summary", source, cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr
    assert "aten::mm" in summary.stdout


def test_diff_compares_two_traces(demo_dir: Path, tmp_path: Path):
    proc = recfn_cli("diff", demo_dir / "demo.parquet", demo_dir / "demo.parquet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "baseline: recfn · demo.parquet" in proc.stdout and "matmul" in proc.stdout
    header = proc.stdout.splitlines()[2].split()
    assert header[:4] == ["name", "count", "count_baseline", "count_change"]


# -- bad input files ---------------------------------------------------------------------------


@pytest.fixture
def bad_files(tmp_path: Path, demo_dir: Path) -> Path:
    (tmp_path / "notes.txt").write_text("not a trace\n")
    (tmp_path / "empty.parquet").write_bytes(b"")
    pd.DataFrame({"a": [1, 2]}).to_parquet(tmp_path / "foreign.parquet")
    whole = (demo_dir / "demo.parquet").read_bytes()
    (tmp_path / "truncated.parquet").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "object.json").write_text('{"hello": "world"}')
    (tmp_path / "broken.json").write_text('{"traceEvents": [{"ph": "X",')
    (tmp_path / "folder.parquet").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("missing.parquet", ("no such file",)),
        ("notes.txt", ("neither a recfn trace",)),
        ("empty.parquet", ("empty",)),
        ("foreign.parquet", ("not a recfn trace",)),
        ("truncated.parquet", ("truncated.parquet",)),
        ("object.json", ("object.json",)),
        ("broken.json", ("broken.json",)),
        ("folder.parquet", ("folder",)),
    ],
)
def test_summary_refuses_bad_files_with_one_line(
    bad_files: Path, capsys: pytest.CaptureFixture[str], name: str, words: tuple[str, ...]
):
    assert_one_line_error(*in_process(capsys, "summary", name, cwd=bad_files), *words)


def test_bad_files_end_the_process_with_one_line(bad_files: Path):
    assert_user_error(recfn_cli("summary", "foreign.parquet", cwd=bad_files), "not a recfn trace")
    assert_user_error(recfn_cli("timeline", "notes.txt", cwd=bad_files), "neither a recfn trace")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("timeline", "notes.txt", "-o", "t.png"), ("notes.txt",)),
        (("timeline", "{demo}", "-o", "t.bmp"), (".png",)),
        (("timeline", "{demo}", "-o", "folder.parquet/"), ()),
        (("convert", "{demo}", "no/such/dir/x.json"), ("does not exist",)),
        (("convert", "{demo}", "out.csv"), ("out.csv",)),
        (("convert", "{demo}", "{demo}"), ("overwrite",)),
        (("convert", "{demo}", "--output", "{demo}"), ("overwrite",)),
        (("convert", "{demo}"), ("which file to write",)),
        (("convert", "{demo}", "a.json", "-o", "b.json"), ("once",)),
        (("convert", "notes.txt", "out.parquet"), ("neither",)),
        (("diff", "{demo}", "foreign.parquet"), ("not a recfn trace",)),
        (("diff", "missing.parquet", "{demo}"), ("no such file",)),
    ],
)
def test_other_commands_refuse_bad_paths(
    bad_files: Path, demo_dir: Path, capsys: pytest.CaptureFixture[str], args, words
):
    demo = str(demo_dir / "demo.parquet")
    argv = [a.format(demo=demo) for a in args]
    assert_one_line_error(*in_process(capsys, *argv, cwd=bad_files), *words)


def test_usage_errors_and_help(tmp_path: Path):
    assert_user_error(recfn_cli("frobnicate", cwd=tmp_path), "invalid choice")
    assert_user_error(recfn_cli("summary", cwd=tmp_path), "required")
    no_args = recfn_cli(cwd=tmp_path)
    assert no_args.returncode == 2 and "usage: recfn" in no_args.stdout
    helped = recfn_cli("--help", cwd=tmp_path)
    assert helped.returncode == 0 and "demo" in helped.stdout and "codegen" in helped.stdout
    version = recfn_cli("--version", cwd=tmp_path)
    assert version.returncode == 0
    assert version.stdout.splitlines()[0] == f"recfn {recfn.__version__}"
    assert str(recfn.build_info()).splitlines()[1] in version.stdout  # compiled or pure, and how


def test_codegen_is_dispatched(tmp_path: Path):
    proc = recfn_cli("codegen", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


# -- in process --------------------------------------------------------------------------------


def run_parser():
    from recfn.cli import build_parser, subcommand_parser

    return subcommand_parser(build_parser(), "run")


@pytest.mark.parametrize(
    ("argv", "own", "rest"),
    [
        (["s.py"], [], ["s.py"]),
        (["s.py", "a", "-o", "t.parquet", "b"], ["-o", "t.parquet"], ["s.py", "a", "b"]),
        (["--shapes", "s.py", "--x", "-q"], ["--shapes", "-q"], ["s.py", "--x"]),
        (["--timeline=t.png", "s.py", "--", "-o", "x"], ["--timeline=t.png"], ["s.py", "-o", "x"]),
        (["--", "s.py", "--shapes"], [], ["s.py", "--shapes"]),
        (["s.py", "-h", "--trace-include", "a.*"], ["--trace-include", "a.*"], ["s.py", "-h"]),
        ([], [], []),
    ],
)
def test_run_options_are_taken_before_and_after_the_script(argv, own, rest):
    assert split_options(run_parser(), argv, interleaved=True)[:2] == (own, rest)


def test_split_options_rejects_unknown_options_before_the_script():
    with pytest.raises(ValueError, match="unknown option"):
        split_options(run_parser(), ["--bogus", "s.py"], interleaved=True)
    with pytest.raises(ValueError, match="needs a value"):
        split_options(run_parser(), ["s.py", "-o"], interleaved=True)


def test_main_returns_codes_in_process(demo_dir: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["summary", str(demo_dir / "demo.parquet"), "--top", "3"]) == 0
    assert "recfn · demo.parquet" in capsys.readouterr().out
    assert main(["summary", str(demo_dir / "nope.parquet")]) == 1
    assert main(["summary", str(demo_dir / "demo.parquet"), "--top", "0"]) == 2
    assert main(["summary", str(demo_dir / "demo.parquet"), "--by", "nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("recfn: error: ") for line in err)


def test_run_traces_a_plain_scripts_own_calls_at_any_depth_by_default(tmp_path: Path):
    script = tmp_path / "plain.py"
    script.write_text("def down(n):\n    return 0 if n == 0 else down(n - 1)\n\ndown(10)\n")
    proc = recfn_cli("run", script, "-o", "t.parquet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "your code's calls and the library calls it makes" in proc.stderr
    df = recfn.load(tmp_path / "t.parquet", as_pandas=True)
    assert list(df.loc[df["scope"] == "function", "name"]) == ["__main__::down"] * 11
    proc = recfn_cli("run", script, "-o", "t.parquet", "--force", "--no-trace-calls", cwd=tmp_path)
    df = recfn.load(tmp_path / "t.parquet", as_pandas=True)
    assert proc.returncode == 0 and (df["scope"] != "function").all()


# -- one error contract over hostile Chrome files ---------------------------------------------

HOSTILE_CHROME = {
    "corrupt.json.gz": gzip.compress(b'[{"ph": "X", "ts": 1, "dur": 1}]')[:20] + b"\xff" * 20,
    "cut.json.gz": gzip.compress(b'[{"ph": "X", "ts": 1, "dur": 1}]' * 50)[:-10],
    "pid.json": b'[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 18446744073709551615}]',
    "deep.json": b'[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": {"d": '
    + b"[" * 1000
    + b"]" * 1000
    + b"}}]",
    "phase.json": b'[{"ph": ["X"], "name": "a", "ts": 1, "dur": 1}]',
    "huge_ts.json": b'[{"ph": "X", "name": "a", "ts": 1e300, "dur": 1}]',
    "negative.json": b'[{"ph": "X", "name": "a", "ts": 1, "dur": -50}]',
    "latin1.json": b'[{"ph": "X", "name": "\xe9t\xe9", "ts": 1, "dur": 1}]',
}


@pytest.fixture
def hostile_chrome(tmp_path: Path) -> Path:
    for name, content in HOSTILE_CHROME.items():
        (tmp_path / name).write_bytes(content)
    os.mkfifo(tmp_path / "pipe.json")
    return tmp_path


@pytest.mark.parametrize("name", [*HOSTILE_CHROME, "pipe.json"])
def test_hostile_chrome_files_get_one_line(
    hostile_chrome: Path, capsys: pytest.CaptureFixture[str], name: str
):
    for args in (
        ("summary", name),
        ("timeline", name, "-o", "out.png"),
        ("convert", name, "-o", "out.parquet"),
        ("diff", name, name),
    ):
        code, stderr = in_process(capsys, *args, cwd=hostile_chrome)
        assert code == 1, stderr
        assert_one_line_error(code, stderr, name)
        assert "unexpected" not in stderr  # refused by a check, not by the last resort


def test_hostile_chrome_files_in_a_real_process(hostile_chrome: Path):
    for name in ("corrupt.json.gz", "deep.json", "pipe.json"):
        proc = recfn_cli("summary", name, cwd=hostile_chrome)
        assert_user_error(proc, name)
        assert proc.returncode == 1


def test_an_unexpected_error_is_one_line_unless_debugging(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    """The last resort: an exception no check foresaw (here injected into the loader)."""

    def broken(path: object, as_pandas: bool = False) -> object:
        raise RuntimeError("the loader broke")

    monkeypatch.setattr("recfn.formats.trace.load", broken)
    code, stderr = in_process(capsys, "summary", "demo.parquet", cwd=demo_dir)
    assert code == 1
    assert_one_line_error(
        code, stderr, "unexpected RuntimeError: the loader broke", "RECFN_DEBUG=1"
    )
    monkeypatch.setenv("RECFN_DEBUG", "1")
    code, stderr = in_process(capsys, "summary", "demo.parquet", cwd=demo_dir)
    assert code == 1 and "Traceback" in stderr and "the loader broke" in stderr


def test_timeline_draws_names_that_look_like_math(tmp_path: Path, capsys):
    """matplotlib would parse ``$...$`` as math text and fail on a bad formula."""
    name = "$" + "\\sqrt{" * 30 + "x" + "}" * 29 + "$"
    with recfn.profile() as prof:
        with recfn.record_function(name):
            pass
    prof.trace.save(tmp_path / "math.parquet")
    code, stderr = in_process(capsys, "timeline", "math.parquet", "-o", "m.png", cwd=tmp_path)
    assert code == 0, stderr
    assert (tmp_path / "m.png").read_bytes().startswith(PNG_MAGIC)


def test_run_m_runs_a_module_as_python_m_does(tmp_path: Path):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text("def work(n):\n    return sum(range(n))\n")
    (package / "__main__.py").write_text(
        "import sys\nfrom mypkg.core import work\nprint(work(int(sys.argv[1])), sys.argv[2:])\n"
    )
    proc = recfn_cli("run", "-o", "t.parquet", "-m", "mypkg", "10", "-o", "x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "45 ['-o', 'x']\n"  # every argument after the module is the module's
    assert "recfn · mypkg" in proc.stderr
    df = recfn.load(tmp_path / "t.parquet", as_pandas=True)
    assert (df["name"] == "mypkg.core::work").sum() == 1  # the module's code is user code
    assert_user_error(recfn_cli("run", "-m", "nosuch_module_x", cwd=tmp_path), "nosuch_module_x")
    proc = recfn_cli("run", "-m", cwd=tmp_path)
    assert proc.returncode == 2 and "-m needs a value" in proc.stderr


CONSOLE = """
import atexit, sys
atexit.register(lambda: print("atexit ran", flush=True))
sys.argv = ["recfn", *sys.argv[1:]]
from recfn.cli import console
print("before", end="")  # unflushed: console() flushes it
console()
print("never here")
"""


@pytest.mark.parametrize(
    ("args", "code"), [(["--version"], 0), (["summary", "missing.parquet"], 1), (["nope"], 2)]
)
def test_the_console_exit_keeps_the_exit_code_the_output_and_atexit(
    tmp_path: Path, args: list[str], code: int
) -> None:
    """``console()`` skips the interpreter's teardown (where pyarrow can abort) but not what a
    normal exit does first: atexit handlers, flushed output, the exit code."""
    proc = subprocess.run(
        [sys.executable, "-c", CONSOLE, *args],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.startswith("before") and "atexit ran" in proc.stdout
    assert "never here" not in proc.stdout


def test_recfns_warnings_are_one_line_and_a_scripts_are_as_python_shows_them(
    tmp_path: Path,
) -> None:
    """A dataset with a stray file: the summary goes on and says so in one ``recfn: warning:``
    line; a warning of the script ``recfn run`` runs keeps Python's form."""
    folder = tmp_path / "traces"
    with recfn.profile(output=folder):
        with recfn.record_function("step"):
            pass
    (folder / "stray.parquet").write_bytes(b"not a trace")

    def shown(*args: object) -> subprocess.CompletedProcess[str]:  # the suite's env hides them
        command = [sys.executable, "-m", "recfn", *map(str, args)]
        env = dict(ENV, PYTHONWARNINGS="default")
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)

    done = shown("summary", folder)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"recfn: warning: '{folder}' is a dataset of process folders; left out 1 file(s) that "
        "are not its parts: stray.parquet (outside the process folders)"
    ]
    script = tmp_path / "warns.py"
    script.write_text("import warnings\nwarnings.warn('mind the gap', UserWarning)\n")
    done = shown("run", "--no-trace-calls", script, "-o", tmp_path / "run.parquet")
    assert done.returncode == 0, done.stderr
    assert "warns.py:2: UserWarning: mind the gap" in done.stderr, done.stderr


def test_file_commands_set_numpy_and_arrow_up_before_importing_them_and_run_keeps_the_users(
    demo_dir: Path, tmp_path: Path
):
    """OpenBLAS starts a thread per core at NumPy's import, which spins a while: the commands
    that only read and write files ask for one BLAS thread before NumPy is imported, and
    ``compare``, which reads run after run, asks Arrow's allocator to keep freed pages a while
    before pyarrow is imported (``import recfn.cli`` imports neither), unless the environment
    says otherwise; a script ``recfn run`` runs keeps the environment it was given."""
    from recfn.cli._main import ARROW_PURGE_ENV, ARROW_PURGE_MS, BLAS_THREADS_ENV

    names = (BLAS_THREADS_ENV, ARROW_PURGE_ENV)
    env = {k: v for k, v in ENV.items() if k not in names}
    path = str(demo_dir / "demo.parquet")
    commands = {"summary": [path], "compare": [path, path]}
    for command, given, expected in (
        ("summary", None, ["1", None]),
        ("compare", None, ["1", ARROW_PURGE_MS]),
        ("compare", "3", ["3", "3"]),
    ):
        probe = (
            "import atexit, os, sys\n"
            "import recfn.cli\n"
            "print('imported:', [m for m in ('numpy', 'pyarrow') if m in sys.modules])\n"
            f"atexit.register(lambda: print('env:', [os.environ.get(n) for n in {names!r}]))\n"
            f"sys.argv = ['recfn', {command!r}, *{commands[command]!r}]\n"
            "recfn.cli.console()\n"
        )
        here = env if given is None else {**env, **dict.fromkeys(names, given)}
        found = subprocess.run(
            [sys.executable, "-c", probe], env=here, capture_output=True, text=True, timeout=120
        )
        assert found.returncode == 0, found.stderr
        assert "imported: []" in found.stdout
        assert f"env: {expected}" in found.stdout, (command, given)
    user = tmp_path / "show_env.py"
    user.write_text(f"import os\nprint('env:', [os.environ.get(n) for n in {names!r}])\n")
    ran = subprocess.run(
        [sys.executable, "-m", "recfn", "run", str(user), "--no-trace-calls"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "env: [None, None]" in ran.stdout


def test_a_long_header_wraps_within_the_timeline_width(tmp_path: Path) -> None:
    """The default title (the header line) is wrapped to the figure: a long one widened the
    saved image past the requested width."""
    from PIL import Image

    from recfn.cli._common import write_timeline

    with recfn.profile() as prof:
        with recfn.record_function("step"):
            pass
    trace = recfn.Trace(prof.trace.table, name="a_rather_long_trace_name_" * 8)
    out = tmp_path / "t.png"
    write_timeline(trace, str(out), width=6.0)
    assert Image.open(out).width <= 6.0 * 110 * 1.1  # 110 dpi, tight margins
