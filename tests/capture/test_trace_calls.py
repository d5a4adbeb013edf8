"""recfn.profile(trace_calls=True): exactly the expected ranges and nesting for a known call graph."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from instrument_helpers import make_module
from tracer_clocks import NATIVE_CLOCKS, native_clock

import recfn

pytestmark = pytest.mark.usefixtures("quiet_gc")  # counts of traced calls: no gc callbacks

GRAPH = """
import recfn

def leaf(x):
    return x + 1

def branch(x):
    with recfn.record_function("user"):
        y = leaf(x)
    return leaf(y)

def root(n):
    total = 0
    for i in range(n):
        total += branch(i)
    return total

def fails():
    leaf(0)
    raise ValueError("no")

def guarded():
    try:
        fails()
    except ValueError:
        return leaf(1)

def gen():
    yield leaf(1)
    yield leaf(2)

def consume():
    return sum(gen())

def counts(items):
    return len(items)

def deep(k):
    return deep(k - 1) if k else leaf(0)
"""


@pytest.fixture(scope="module")
def graph():
    return make_module("callgraph", GRAPH)


@pytest.fixture(autouse=True, params=[*NATIVE_CLOCKS, "python"])
def tracer_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs on the C profile hook (compiled builds) on each of its clocks, and on
    the Python tracer."""
    if request.param in NATIVE_CLOCKS:
        native_clock(monkeypatch, request.param)
    else:
        monkeypatch.setenv("RECFN_CTRACE", "0")
    return str(request.param)


def tree(prof: recfn.profile, thread_id: int | None = None) -> list[str]:
    """The ranges of one thread as indented names, checking every parent_id/depth on the way."""
    rows = [r for r in prof.table.to_pylist() if r["kind"] == "range"]
    if thread_id is not None:
        rows = [r for r in rows if r["thread_id"] == thread_id]
    by_id = {r["id"]: r for r in rows}
    lines = []
    for r in rows:
        parent = by_id.get(r["parent_id"])
        assert r["depth"] == (parent["depth"] + 1 if parent else 0), r
        if parent is not None:  # a child lies within its parent
            assert parent["start_ns"] <= r["start_ns"] <= r["end_ns"] <= parent["end_ns"]
        assert r["end_ns"] is not None
        lines.append("  " * r["depth"] + r["name"])
    return lines


def test_known_call_graph_exact_ranges_and_nesting(graph) -> None:
    with recfn.profile(trace_calls=True, trace_include=["callgraph"]) as prof:
        assert graph.root(2) == 5
    assert tree(prof) == [
        "callgraph::root",
        "  callgraph::branch",
        "    user",
        "      callgraph::leaf",
        "    callgraph::leaf",
        "  callgraph::branch",
        "    user",
        "      callgraph::leaf",
        "    callgraph::leaf",
    ]
    scopes = {r["name"]: r["scope"] for r in prof.table.to_pylist()}
    assert scopes["callgraph::leaf"] == "function" and scopes["user"] == "user_scope"


def test_user_range_around_traced_calls(graph) -> None:
    with recfn.profile(trace_calls=True, trace_include=["callgraph"]) as prof:
        with recfn.record_function("outer"):
            graph.leaf(1)
            with recfn.record_function("inner"):
                graph.leaf(2)
    assert tree(prof) == [
        "outer",
        "  callgraph::leaf",
        "  inner",
        "    callgraph::leaf",
    ]


def test_exceptions_generators_and_recursion(graph) -> None:
    with recfn.profile(trace_calls=True, trace_include=["callgraph"]) as prof:
        assert graph.guarded() == 2
        assert graph.consume() == 5
        graph.deep(2)
    assert tree(prof) == [
        "callgraph::guarded",
        "  callgraph::fails",
        "    callgraph::leaf",
        "  callgraph::leaf",
        "callgraph::consume",
        "  callgraph::gen",  # each resumption of the generator is one range
        "    callgraph::leaf",
        "  callgraph::gen",
        "    callgraph::leaf",
        "  callgraph::gen",
        "callgraph::deep",
        "  callgraph::deep",
        "    callgraph::deep",
        "      callgraph::leaf",
    ]


def test_max_depth_and_exclude(graph) -> None:
    with recfn.profile(trace_calls=True, trace_include=["callgraph"], trace_max_depth=2) as prof:
        graph.deep(3)
    assert tree(prof) == ["callgraph::deep", "  callgraph::deep"]
    with recfn.profile(
        trace_calls=True, trace_include=["callgraph"], trace_exclude=["*.branch", "*.leaf"]
    ) as prof:
        graph.root(1)
    assert tree(prof) == ["callgraph::root", "  user"]


def test_filters_match_the_recorded_name_too(graph) -> None:
    """A name copied from the table (``module::qualname``) works as a pattern."""
    with recfn.profile(
        trace_calls=True,
        trace_include=["callgraph"],
        trace_exclude=["callgraph::b*", "callgraph::l*"],
    ) as prof:
        graph.root(1)
    assert tree(prof) == ["callgraph::root", "  user"]


def test_c_calls_made_by_traced_code(graph) -> None:
    with recfn.profile(
        trace_calls=True, trace_c_calls=True, trace_include=["callgraph", "builtins"]
    ) as prof:
        graph.counts([1, 2])
    assert tree(prof) == ["callgraph::counts", "  builtins::len"]


def test_threads_started_while_profiling(graph) -> None:
    results = []
    with recfn.profile(trace_calls=True, trace_include=["callgraph"]) as prof:
        worker = threading.Thread(target=lambda: results.append(graph.leaf(1)))
        worker.start()
        worker.join()
        graph.leaf(0)
    table = prof.table.to_pylist()
    tids = {r["thread_id"] for r in table if r["name"] == "callgraph::leaf"}
    assert results == [2] and len(tids) == 2
    for tid in tids:
        assert tree(prof, tid) == ["callgraph::leaf"]


def test_profile_functions_removed_after_stop(graph) -> None:
    hook_before = threading.getprofile()
    with recfn.profile(trace_calls=True):
        assert sys.getprofile() is not None or sys.version_info >= (3, 12)
    assert sys.getprofile() is None
    assert threading.getprofile() is hook_before
    with recfn.profile() as prof:  # a later profile without tracing records no calls
        graph.leaf(1)
    assert [r["name"] for r in prof.table.to_pylist() if r["kind"] == "range"] == []


def test_refuses_when_another_profiler_holds_the_hook() -> None:
    if sys.version_info >= (3, 12):
        sys.monitoring.use_tool_id(sys.monitoring.PROFILER_ID, "other")
        release = lambda: sys.monitoring.free_tool_id(sys.monitoring.PROFILER_ID)  # noqa: E731
    else:
        sys.setprofile(lambda *a: None)
        release = lambda: sys.setprofile(None)  # noqa: E731
    try:
        prof = recfn.profile(trace_calls=True)
        with pytest.raises(RuntimeError, match="other|another profiler"):
            prof.start()
        assert not prof.running
        with recfn.profile():  # nothing was left half-started
            pass
    finally:
        release()


def test_options_validated() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        recfn.profile(trace_calls=True, trace_max_depth=0)
    with pytest.raises(ValueError, match="needs trace_calls"):
        recfn.profile(trace_c_calls=True)
    with pytest.raises(ValueError, match="leaves FUNCTION out"):
        recfn.profile(trace_calls=True, record_scopes=[recfn.RecordScope.USER_SCOPE])
    with pytest.raises(TypeError, match="trace_include"):
        recfn.ProfilerConfig(trace_calls=True, trace_include=(3,))  # type: ignore[arg-type]
    cfg = recfn.ProfilerConfig(trace_calls=True, trace_include="mymod")  # type: ignore[arg-type]
    assert cfg.trace_include == ("mymod",)
    assert cfg.to_dict()["trace_calls"] is True


def _excluded_raiser() -> None:
    raise ValueError("mine")


def _excluded_generator() -> Iterator[int]:
    yield 1
    yield 2


def test_exceptions_through_excluded_code_stay_the_programs_own():
    """Unwinding through (and throwing into) excluded code keeps the program's exception:
    sys.monitoring refuses to disable PY_UNWIND and PY_THROW, so the tracer must not ask."""
    excluded = [f"{__name__}::_excluded_*"]
    with recfn.profile(trace_calls=True, trace_exclude=excluded):
        for _ in range(3):
            with pytest.raises(ValueError, match="^mine$"):
                _excluded_raiser()
            generator = _excluded_generator()
            next(generator)
            with pytest.raises(KeyError):
                generator.throw(KeyError("thrown"))
