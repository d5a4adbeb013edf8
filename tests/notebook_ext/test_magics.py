"""%%record_function and %record_function driven through a real IPython InteractiveShell."""

from __future__ import annotations

import io
import os
import sys

import pandas as pd
import pytest
from IPython.core.error import UsageError

import recfn
from recfn.notebook_ext import session as get_session
from recfn.notebook_ext.magics import RecordFunctionMagics, split_line

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Cells run with the zero-annotation default trace calls, and some tests count those calls
# exactly: no other library's gc callback inside them (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("quiet_gc")

NESTED_CELL = """\
import recfn
with recfn.record_function("outer"):
    for _ in range(3):
        with recfn.record_function("inner"):
            pass
"""


def range_names(df: pd.DataFrame) -> list[str]:
    return [str(n) for n in df.loc[df["kind"] == "range", "name"]]


def test_cell_shows_header_html_table_and_png(shell):
    run = shell.run(f"%%record_function\n{NESTED_CELL}")
    assert run.error is None
    html = run.mime("text/html")
    assert len(html) == 3  # the summary, the stand-in for the interactive view, the picture
    assert "<table" in html[0] and "outer" in html[0] and "inner" in html[0]
    assert "recfn-fallback" in html[1]
    assert html[2].startswith('<img class="recfn-timeline-png" alt="Timeline of ')
    count = shell.ip.execution_count - 1
    assert f"recfn · cell[{count}]" in html[0]
    pngs = run.mime("image/png")
    assert len(pngs) == 1 and pngs[0].startswith(PNG_MAGIC)
    text = run.mime("text/plain")[0]
    assert text.startswith(f"recfn · cell[{count}]") and "events" in text and "dropped" in text


def test_timeline_picture_carries_its_alt_text(shell):
    from PIL import Image

    run = shell.run(f"%%record_function\n{NESTED_CELL}")
    picture = next(data for data in run.outputs if "image/png" in data)
    alt = picture["text/plain"]
    assert alt.startswith("Timeline of 5 ranges on 1 thread") and "longest: cell[" in alt
    assert Image.open(io.BytesIO(picture["image/png"])).info["Description"] == alt


def test_cell_range_is_a_user_scope_root_around_the_cell(shell):
    run = shell.run(f"%%record_function train_loop --var df --no-trace-calls\n{NESTED_CELL}")
    assert run.error is None
    df = shell.ns["df"].to_pandas()
    root = df[df["name"] == "train_loop"]
    assert len(root) == 1
    assert root["scope"].iloc[0] == "user_scope"
    assert root["parent_id"].isna().all()
    outer = df[df["name"] == "outer"]
    assert outer["parent_id"].iloc[0] == root["id"].iloc[0]
    assert range_names(df).count("inner") == 3
    assert df.attrs["recfn"]["cell"] == "train_loop"
    assert hasattr(df, "recfn")


def test_name_option_and_last_expression_value(shell):
    run = shell.run("%%record_function --name step --no-timeline\nx = 20\nx + 22")
    assert run.error is None
    assert run.result.result == 42
    assert get_session().last.name == "step"
    assert not run.mime("image/png")


def test_save_writes_parquet_and_chrome_json(shell, tmp_path):
    parquet = tmp_path / "cell.parquet"
    chrome = tmp_path / "cell.json"
    assert shell.run(f"%%record_function --save {parquet} --quiet\n{NESTED_CELL}").error is None
    assert shell.run(f"%%record_function --save '{chrome}' --quiet\n{NESTED_CELL}").error is None
    table = recfn.load(parquet)
    assert range_names(table.to_pandas()).count("inner") == 3
    import recfn.analysis as analysis

    imported = analysis.read_chrome_trace(chrome)
    assert range_names(imported).count("inner") == 3


def test_save_to_a_folder_streams_a_dataset(shell, tmp_path):
    folder = tmp_path / "traces"
    for _ in range(2):  # a second cell adds its parts beside the first's
        run = shell.run(f"%%record_function --save {folder}/ --quiet\n{NESTED_CELL}")
        assert run.error is None
    parts = sorted(folder.glob("hostname=*/process=*/part-*.parquet"))
    assert len(parts) == 4  # each capture: its start mark's part, then its events' part
    assert {p.parent.name for p in parts} == {f"process={os.getpid()}"}
    df = recfn.load(folder).to_pandas()
    assert range_names(df).count("inner") == 6
    last = get_session().last
    assert last.files == tuple(map(str, parts[2:]))
    assert range_names(last.to_pandas()).count("inner") == 3


def test_save_to_a_folder_with_a_flight_recorder(shell, tmp_path):
    folder = tmp_path / "traces"
    run = shell.run(
        f"%%record_function --save {folder}/ --flight-recorder 3 --no-trace-calls --quiet\n"
        "import recfn\nfor i in range(10):\n    recfn.mark(f'm{i}')\n1 / 0"
    )
    assert isinstance(run.error, ZeroDivisionError)
    (dump,) = folder.glob("hostname=*/process=*/flight.parquet")
    trace = recfn.load(dump)
    assert '"reason": "exception: ZeroDivisionError' in trace.metadata["recfn.flight_recorder"]
    names = trace.to_pandas()["name"].astype(str).tolist()
    assert names == ["m8", "m9", "__stop_profile"]  # the cell range began first


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("--save /no/such/folder/traces/", "does not exist"),
        ("--save trace.txt", "cannot tell the trace format"),
        ("--save /no/such/folder/t.parquet", "does not exist"),
        ("--var 1abc", "variable name"),
        ("--var class", "variable name"),
        ("-o df", "--var df"),
        ("--sample -0.5", "--sampling-prob/--sample must be in [0, 1]"),
        ("--sample 1.5", "[0, 1]"),
        ("--sample often", "expects a number"),
        ("--max-events 0", "--max-events must be positive"),
        ("--max-events lots", "expects an integer"),
        ("--record-scopes function,nope", "unknown RecordScope name 'nope'"),
        ("--no-trace-calls --trace-c-calls", "needs trace_calls"),
        ("--trace-max-depth 0", "at least 1"),
        ("--bogus", "unrecognized"),
        ("--last", "line magic"),
    ],
)
def test_bad_options_are_usage_errors_and_the_cell_does_not_run(shell, options, message):
    shell.ns.pop("ran", None)
    run = shell.run(f"%%record_function {options}\nran = True")
    assert isinstance(run.error, UsageError)
    assert message in str(run.error)
    assert "ran" not in shell.ns
    assert len(get_session()) == 0


def test_cuda_without_torch_is_a_usage_error(shell, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    shell.ns.pop("ran", None)
    run = shell.run("%%record_function --cuda\nran = True")
    assert isinstance(run.error, UsageError)
    assert "torch is not installed" in str(run.error)
    assert "ran" not in shell.ns


def test_shapes_memory_stack_flops_options_fill_their_columns(shell):
    cell = """\
import numpy as np, recfn
a, b = np.ones((4, 5)), np.ones((5, 6))
with recfn.record_function_fast("matmul", (a, b)):
    c = [bytearray(1000) for _ in range(10)]
"""
    run = shell.run(
        f"%%record_function --var df --shapes --memory --stack --flops --quiet --no-trace-calls\n"
        f"{cell}"
    )
    assert run.error is None
    df = shell.ns["df"].to_pandas()
    for column in ("input_shapes", "input_dtypes", "stack", "memory_bytes", "flops"):
        assert column in df.columns, column
    matmul = df[df["name"] == "matmul"].iloc[0]
    assert [list(s) for s in matmul["input_shapes"]] == [[4, 5], [5, 6]]
    assert matmul["flops"] == 2 * 4 * 5 * 6
    assert any(
        "<ipython-input" in frame or "Cell" in frame or ".py" in frame for frame in matmul["stack"]
    )
    config = get_session().last.config
    assert config["report_input_shapes"] and config["profile_memory"] and config["with_stack"]


def test_sample_keeps_a_fraction_of_the_ranges(shell):
    recfn.set_record_function_seed_for_testing(1234)
    cell = (
        'import recfn\nfor _ in range(2000):\n    with recfn.record_function("tick"):\n        pass'
    )
    run = shell.run(f"%%record_function sampled --var df --sample 0.05 --quiet\n{cell}")
    assert run.error is None
    ticks = range_names(shell.ns["df"].to_pandas()).count("tick")
    assert 0 < ticks < 400  # expected ~100 of 2000
    assert "ranges sampled at 5%" in get_session().last.header()


def test_max_events_drops_and_says_so(shell):
    cell = (
        'import recfn\nfor _ in range(50):\n    with recfn.record_function("tick"):\n        pass'
    )
    with pytest.warns(RuntimeWarning, match="dropped"):
        run = shell.run(f"%%record_function --max-events 10 --no-timeline\n{cell}")
    assert run.error is None
    trace = get_session().last
    assert trace.dropped_events > 0
    assert f"{trace.dropped_events:,} dropped" in run.mime("text/html")[0]


def test_quiet_shows_nothing_but_keeps_the_trace(shell):
    run = shell.run(f"%%record_function --quiet\n{NESTED_CELL}")
    assert run.error is None
    assert run.outputs == []
    assert len(get_session()) == 1


def test_threads_started_in_the_cell_are_captured(shell):
    cell = """\
import threading, recfn
def work():
    with recfn.record_function("in_thread"):
        pass
t = threading.Thread(target=work, name="helper")
t.start(); t.join()
"""
    run = shell.run(f"%%record_function --var df --no-timeline\n{cell}")
    assert run.error is None
    df = shell.ns["df"].to_pandas()
    assert "in_thread" in range_names(df)
    assert set(df["thread_name"].astype(str)) >= {"helper", "MainThread"}
    # sys.monitoring (3.12+) also sees threads already running, such as IPython's history saver
    assert f"{df['thread_id'].nunique()} threads" in run.mime("text/html")[0]


def test_magics_and_shell_escapes_inside_the_cell_still_work(shell):
    run = shell.run("%%record_function --quiet\nvalue = %time 1 + 1\nvalue")
    assert run.error is None
    assert run.result.result == 2


def test_exception_in_cell_keeps_and_shows_the_capture(shell):
    cell = """\
import recfn
with recfn.record_function("before_failure"):
    pass
raise ValueError("boom")
"""
    run = shell.run(f"%%record_function failing --var df\n{cell}")
    assert isinstance(run.error, ValueError)
    assert "boom" in run.stdout + run.stderr  # the usual traceback
    assert "before_failure" in range_names(shell.ns["df"].to_pandas())
    trace = get_session().last
    assert trace.interrupted and trace.error == "ValueError: boom"
    assert "interrupted by ValueError: boom" in run.mime("text/html")[0]
    assert run.mime("image/png")


def test_keyboard_interrupt_in_cell_keeps_the_capture(shell, tmp_path):
    path = tmp_path / "interrupted.parquet"
    cell = """\
import recfn
with recfn.record_function("long_loop"):
    for i in range(10):
        with recfn.record_function("step"):
            if i == 4:
                raise KeyboardInterrupt
"""
    run = shell.run(f"%%record_function --var df -o {path}\n{cell}")
    assert isinstance(run.error, KeyboardInterrupt)
    names = range_names(shell.ns["df"].to_pandas())
    assert names.count("step") == 5 and "long_loop" in names
    assert get_session().last.error == "KeyboardInterrupt"
    assert "interrupted by KeyboardInterrupt" in run.mime("text/html")[0]
    assert recfn.load(path).events == len(shell.ns["df"].to_pandas())
    # the profiler was stopped: a new capture starts fine
    assert shell.run(f"%%record_function --quiet\n{NESTED_CELL}").error is None


def test_syntax_error_is_reported_before_profiling(shell):
    run = shell.run("%%record_function\ndef broken(:\n    pass")
    assert isinstance(run.error, SyntaxError)
    assert len(get_session()) == 0


def test_top_level_await_is_a_clear_usage_error(shell):
    run = shell.run("%%record_function\nimport asyncio\nawait asyncio.sleep(0)")
    assert isinstance(run.error, UsageError)
    assert "top-level `await`" in str(run.error)
    assert len(get_session()) == 0


def test_a_running_profiler_is_a_clear_usage_error(shell):
    recfn.enable_profiler()
    try:
        run = shell.run(f"%%record_function\n{NESTED_CELL}")
    finally:
        recfn.disable_profiler()
    assert isinstance(run.error, UsageError)
    assert "already running" in str(run.error)


def test_append_builds_one_trace_over_several_cells(shell, tmp_path):
    path = tmp_path / "combined.parquet"
    first = 'import recfn\nwith recfn.record_function("load"):\n    pass'
    second = 'import recfn\nwith recfn.record_function("train"):\n    pass'
    assert shell.run(f"%%record_function part1 --append --quiet\n{first}").error is None
    run = shell.run(
        f"%%record_function part2 --append --var combined --save {path} --no-timeline\n{second}"
    )
    assert run.error is None
    combined = shell.ns["combined"].to_pandas()
    assert {"part1", "part2", "load", "train"} <= set(range_names(combined))
    assert combined["id"].is_unique
    s = get_session()
    assert s.trace().cells == ("part1", "part2")
    assert "2 cells" in s.trace().header()
    assert "session trace" in run.stdout
    assert recfn.load(path).events == len(combined)
    # the cell itself is still shown on its own
    assert "part2" in run.mime("text/html")[0] and "load" not in run.mime("text/html")[0]


def test_session_diff_between_two_cells_is_one_line(shell):
    assert shell.run(f"%%record_function before --quiet\n{NESTED_CELL}").error is None
    assert shell.run(f"%%record_function after --quiet\n{NESTED_CELL}").error is None
    s = get_session()
    diff = s.diff("before", "after")
    assert isinstance(diff, pd.DataFrame) and len(diff) > 0
    assert s["before"].name == "before" and s[-1].name == "after"
    with pytest.raises(KeyError, match="before, after"):
        s["missing"]
    assert "before" in s._repr_html_() and "after" in repr(s)


def test_session_keeps_at_most_max_cells():
    from recfn.formats.trace import Trace
    from recfn.notebook_ext.sessions import Session

    s = Session(max_cells=2)
    traces = [Trace(recfn_table(), name=f"t{i}") for i in range(3)]
    for trace in traces:
        s.add(trace, append=True)
    assert s.names() == ["t1", "t2"]
    assert s.trace().cells == ("t0", "t1", "t2")  # the combined trace keeps what was appended
    assert s.reset() == 2 and len(s) == 0 and s.last is None
    with pytest.raises(ValueError, match="--append"):
        s.trace()


def recfn_table():
    with recfn.profile() as prof, recfn.record_function("x"), recfn.record_function("y"):
        pass
    return prof.table


def test_combining_tables_with_colliding_ids_renumbers_the_later_ones():
    table = recfn_table()
    merged = recfn.merge([table, table]).to_pandas()
    assert merged["id"].is_unique and len(merged) == 2 * table.num_rows
    second = merged.iloc[table.num_rows :]
    children = second[second["parent_id"].notna()]
    assert len(children) == 1
    assert set(children["parent_id"]) <= set(second["id"])  # parents shifted with their ids


@pytest.mark.skipif(not hasattr(recfn, "session"), reason="recfn.session is not exported yet")
def test_recfn_session_is_the_notebook_session():
    import recfn.notebook_ext as notebook_ext

    assert recfn.session() is notebook_ext.session()


def test_line_magic_profiles_one_statement(shell):
    shell.run('import recfn\ndef f():\n    with recfn.record_function("f"):\n        return 7')
    run = shell.run("%record_function --var df --no-timeline y = f() * 6")
    assert run.error is None
    assert shell.ns["y"] == 42
    assert "f" in range_names(shell.ns["df"].to_pandas())
    assert run.mime("text/html")
    value = shell.run("%record_function --quiet f() + 1")
    assert value.result.result == 8


def test_line_magic_double_dash_separates_a_statement_starting_with_minus(shell):
    run = shell.run("%record_function --quiet -- -1 + 3")
    assert run.error is None and run.result.result == 2


def test_line_magic_last_and_reset(shell):
    run = shell.run("%record_function --last")
    assert isinstance(run.error, UsageError) and "no profiled cell" in str(run.error)
    shell.run(f"%%record_function first --quiet\n{NESTED_CELL}")
    again = shell.run("%record_function --last")
    assert again.error is None
    assert "recfn · first" in again.mime("text/html")[0]
    assert again.mime("image/png")
    cleared = shell.run("%record_function --reset")
    assert cleared.error is None and "1 trace dropped" in cleared.stdout
    assert len(get_session()) == 0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "needs a statement"),
        ("--reset x = 1", "no statement"),
        ("--last x = 1", "no statement"),
        ("--shape x = 1", "unknown option"),
    ],
)
def test_line_magic_usage_errors(shell, line, message):
    run = shell.run(f"%record_function {line}")
    assert isinstance(run.error, UsageError)
    assert message in str(run.error)


def test_help_prints_the_options(shell):
    run = shell.run("%record_function --help")
    assert run.error is None
    for option in ("--save", "--shapes", "--sample", "--append", "--last", "--reset", "--var NAME"):
        assert option in run.stdout
    assert shell.run("%%record_function --help\nraise RuntimeError").error is None


def test_trace_reprs_in_a_terminal(shell):
    shell.run(f"%%record_function --quiet\n{NESTED_CELL}")
    trace = get_session().last
    assert repr(trace).startswith("<recfn.Trace recfn · ")
    import IPython.lib.pretty

    text = IPython.lib.pretty.pretty(trace)
    assert text.startswith("recfn · ") and "outer" in text


def test_a_plain_profile_gets_the_same_reprs():
    with recfn.profile() as prof, recfn.record_function("step"):
        pass
    trace = prof.trace
    assert trace.wall_ns == prof.wall_ns and trace.events == prof.table.num_rows
    assert "<table" in trace._repr_html_() and "step" in trace._repr_html_()
    assert trace.header().startswith("recfn · profile · ")


def test_terminal_frontends_get_no_png(shell):
    formatter = shell.ip.display_formatter
    saved = list(formatter.active_types)
    formatter.active_types = ["text/plain"]
    try:
        run = shell.run(f"%%record_function\n{NESTED_CELL}")
    finally:
        formatter.active_types = saved
    assert run.error is None
    assert not run.mime("image/png")


@pytest.mark.parametrize(
    ("line", "options", "statement"),
    [
        ("x = 1", [], "x = 1"),
        ("--var df x = f(1)", ["--var", "df"], "x = f(1)"),
        ("--save 'a b.parquet' --shapes f()", ["--save", "a b.parquet", "--shapes"], "f()"),
        ("--sample=0.5 -- -x", ["--sample=0.5"], "-x"),
        (
            "--trace-include 'pandas.*' --trace-calls df.sum()",
            ["--trace-include", "pandas.*", "--trace-calls"],
            "df.sum()",
        ),
        ("--reset", ["--reset"], ""),
        ("-o t.parquet  print( 'a  b' )", ["-o", "t.parquet"], "print( 'a  b' )"),
    ],
)
def test_split_line(line, options, statement):
    parser = RecordFunctionMagics.record_function.parser
    own, rest = split_line(parser, line)
    assert (own, rest) == (options, statement)


def test_unload_and_reload_extension(shell):
    ip = shell.ip
    ip.run_line_magic("unload_ext", "recfn")
    try:
        assert "record_function" not in ip.magics_manager.magics["cell"]
        assert "record_function" not in ip.magics_manager.magics["line"]
        ip.run_line_magic("load_ext", "recfn.notebook_ext")
        assert "record_function" in ip.magics_manager.magics["cell"]
        ip.run_line_magic("unload_ext", "recfn.notebook_ext")
    finally:
        ip.run_line_magic("load_ext", "recfn")
    assert shell.run(f"%%record_function --quiet\n{NESTED_CELL}").error is None


DEEP_CELL = """\
def down(n):
    return 0 if n == 0 else down(n - 1)
down(10)
"""


def traced(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["kind"] == "range") & (df["scope"] == "function")]


def test_plain_code_gets_every_call_of_its_own_code_by_default(shell):
    run = shell.run(f"%%record_function --var df\n{DEEP_CELL}")
    assert run.error is None
    calls = traced(shell.ns["df"].to_pandas())
    assert list(calls["name"]) == ["__main__::down"] * 11  # at any depth: no depth limit
    assert sorted(calls["depth"]) == list(range(1, 12))  # under the cell's range, no <module> row
    header = run.mime("text/html")[0]
    assert "your code&#x27;s calls and the library calls it makes (--no-trace-calls: off)" in header
    assert "recording overhead" in header
    assert "__main__::down" in header  # the summary table is useful without annotations


def test_trace_flags_decide_over_the_default(shell):
    assert (
        shell.run(f"%%record_function --var df --quiet --no-trace-calls\n{DEEP_CELL}").error is None
    )
    assert traced(shell.ns["df"].to_pandas()).empty
    assert shell.run(f"%%record_function --var df --quiet --trace-calls\n{DEEP_CELL}").error is None
    calls = traced(shell.ns["df"].to_pandas())
    assert len(calls.query("name == '__main__::down'")) == 11  # every call
    assert "the library calls it makes" not in get_session().last.header()
    assert (
        shell.run(f"%%record_function --var df --quiet --trace-max-depth 2\n{DEEP_CELL}").error
        is None
    )
    assert len(traced(shell.ns["df"].to_pandas())) == 2
    run = shell.run(f"%%record_function --var df --quiet --record-scopes user_scope\n{DEEP_CELL}")
    assert run.error is None and traced(shell.ns["df"].to_pandas()).empty
