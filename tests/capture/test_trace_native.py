"""trace_calls on the C profile hook (recfn.native._ctrace) records what the Python tracer records.

Each workload runs under both tracers, the C hook on each of its clocks; the tables must agree
on every row's name, kind, depth, parent and thread, and on the dropped-event count (ids and
times differ between runs).
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading

import pytest
from instrument_helpers import make_module
from tracer_clocks import NATIVE_CLOCKS, native_clock

import recfn
from recfn.capture import _tracer

pytestmark = [
    pytest.mark.skipif(
        not _tracer.native_available(), reason="recfn.native._ctrace is not built (pure install)"
    ),
    pytest.mark.usefixtures("quiet_gc"),  # counts of traced calls: no other library's gc callback
]

WORK = """
import asyncio
import gc
import recfn

def leaf(x):
    return x + 1

def middle(x):
    recfn.mark("inside-middle")
    with recfn.record_function("user"):
        return leaf(x) + leaf(x)

def gen(n):
    for i in range(n):
        yield leaf(i)

def fails():
    leaf(0)
    raise KeyError("no")

def guarded():
    try:
        fails()
    except KeyError:
        return middle(1)

def opens_a_range():
    return recfn.record_function("outlives-its-call").__enter__()

def run(n):
    total = sum(gen(3)) + guarded()
    for i in range(n):
        total += middle(i)
    rf = opens_a_range()
    leaf(0)
    rf.end()
    return total

async def task(name, n):
    with recfn.record_function(name):
        for i in range(n):
            leaf(i)
            await asyncio.sleep(0)
            middle(i)

async def tasks():
    await asyncio.gather(task("task-a", 3), task("task-b", 2))

class Items(list):
    pass

def c_calls(n):
    plain, sub = [], Items()
    for i in range(n):
        len(plain)
        plain.append(i)
        sub.append(i)
        dict.fromkeys("ab")
        ",".join(["a"])
    return len(plain) + len(sub)
"""


@pytest.fixture(autouse=True, params=NATIVE_CLOCKS)
def clock(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    native_clock(monkeypatch, request.param)
    return str(request.param)


@pytest.fixture(scope="module")
def work():
    return make_module("nativework", WORK)


def shape(prof: recfn.profile) -> list[tuple[object, ...]]:
    """Every row as (thread, name, kind, depth, parent's name), in table order."""
    rows = prof.table.to_pylist()
    by_id = {r["id"]: r for r in rows}
    threads = {tid: i for i, tid in enumerate(dict.fromkeys(r["thread_id"] for r in rows))}
    out = []
    for r in rows:
        parent = by_id.get(r["parent_id"])
        out.append(
            (
                threads[r["thread_id"]],
                r["name"],
                r["kind"],
                r["depth"],
                None if parent is None else parent["name"],
            )
        )
    return out


def both(monkeypatch: pytest.MonkeyPatch, body, include=("nativework",), **options: object):
    """Run ``body`` under each tracer; returns (C hook profile, Python tracer profile)."""
    results = []
    for flag in ("1", "0"):
        monkeypatch.setenv("RECFN_CTRACE", flag)
        with recfn.profile(trace_calls=True, trace_include=list(include), **options) as prof:
            native = prof._tracer.native
            assert (native is not None) == (flag == "1")
            assert native is None or native.tsc == _tracer.NATIVE_TSC
            body()
        results.append(prof)
    return results


def test_same_rows_as_the_python_tracer(work, monkeypatch) -> None:
    native, python = both(monkeypatch, lambda: work.run(3))
    assert shape(native) == shape(python)
    names = [row[1] for row in shape(native)]
    assert names.count("nativework::leaf") == 3 + 1 + 2 + 2 * 3 + 1
    assert ("nativework::leaf", 1) in [(r[1], r[4] == "outlives-its-call") for r in shape(native)]


def test_same_rows_under_asyncio_task_ranges(work, monkeypatch) -> None:
    native, python = both(monkeypatch, lambda: asyncio.run(work.tasks()))
    assert shape(native) == shape(python)
    leaf_parents = {r[4] for r in shape(native) if r[1] == "nativework::leaf"}
    assert {"task-a", "task-b", "user"} <= leaf_parents


def test_same_names_for_c_calls(work, monkeypatch) -> None:
    """The C hook caches C functions and method descriptors by identity, bound C methods by
    (type of self, method): a method shared by a type and its subclass is named for each, as
    the Python tracer does."""
    native, python = both(
        monkeypatch, lambda: work.c_calls(4), ("nativework", "builtins"), trace_c_calls=True
    )
    assert shape(native) == shape(python)
    names = [row[1] for row in shape(native)]
    assert names.count("builtins::len") == 4 + 2
    assert names.count("builtins::dict.fromkeys") == names.count("builtins::str.join") == 4
    if sys.version_info < (3, 12):  # the profile hook sees bound methods
        assert names.count("builtins::list.append") == names.count("nativework::Items.append") == 4
    else:  # sys.monitoring sees list.append, the method descriptor, called with self
        assert names.count("builtins::list.append") == 8


@pytest.mark.parametrize("flag", ["1", "0"])
def test_c_methods_bound_to_a_type_are_named_once(work, monkeypatch, flag) -> None:
    """``dict.fromkeys`` is a new bound object at each access: named by (type, method), so
    naming does not grow with the calls."""
    monkeypatch.setenv("RECFN_CTRACE", flag)
    kept = []
    for n in (2, 20):
        include = ["nativework", "builtins"]
        with recfn.profile(trace_calls=True, trace_c_calls=True, trace_include=include) as prof:
            work.c_calls(n)
        kept.append(len(prof._tracer.keep))
    assert kept[0] == kept[1]


@pytest.mark.filterwarnings("ignore:.*max_events=.*reached")
@pytest.mark.parametrize("max_events", [1, 7, 40])
def test_max_events_admits_and_drops_in_the_same_order(work, monkeypatch, max_events) -> None:
    native, python = both(monkeypatch, lambda: work.run(5), max_events=max_events)
    assert shape(native) == shape(python)
    assert native.dropped_events == python.dropped_events > 0
    assert native.table.num_rows == max_events


def test_max_depth_and_threads_started_while_tracing(work, monkeypatch) -> None:
    def body() -> None:
        worker = threading.Thread(target=work.run, args=(2,), name="worker")
        worker.start()
        worker.join()
        work.run(1)

    native, python = both(monkeypatch, body, trace_max_depth=2)
    assert shape(native) == shape(python)
    assert len({r[0] for r in shape(native)}) == 2


def test_stop_while_another_thread_calls(work, monkeypatch) -> None:
    """Stopping from one thread while another is mid-call: the other thread drops the hook at
    its next event and keeps running; its rows up to the stop are in the table."""
    monkeypatch.setenv("RECFN_CTRACE", "1")
    running = threading.Event()
    stopped = threading.Event()
    after: list[object] = []

    def spin() -> None:
        while not stopped.is_set():
            work.leaf(1)
            running.set()
        work.leaf(2)
        after.append(sys.getprofile())

    prof = recfn.profile(trace_calls=True, trace_include=["nativework"])
    prof.start()
    worker = threading.Thread(target=spin)
    worker.start()
    running.wait()
    prof.stop()
    stopped.set()
    worker.join()
    assert after == [None]
    rows = [r for r in prof.table.to_pylist() if r["name"] == "nativework::leaf"]
    assert rows and all(r["depth"] == 0 and r["parent_id"] is None for r in rows)


class _Unhashable(type):
    def __hash__(cls) -> int:
        raise RuntimeError("naming failed")


class _Items(list, metaclass=_Unhashable):  # naming its bound C methods raises in the tracer
    pass


def _appends(items: list[int]) -> int:
    append = items.append  # a bound C method on every Python version's call events
    append(1)
    return len(items)


@pytest.mark.parametrize("flag", ["1", "0"])
def test_tracer_errors_never_reach_the_program(monkeypatch, caplog, flag) -> None:
    """A failure while naming a call is counted and logged once; the program goes on."""
    monkeypatch.setenv("RECFN_CTRACE", flag)
    with recfn.profile(trace_calls=True, trace_c_calls=True) as prof:
        assert [_appends(_Items()) for _ in range(3)] == [1, 1, 1]
    failures = [r for r in caplog.records if "trace_calls failed" in r.getMessage()]
    assert len(failures) == 1 and "naming failed" in str(failures[0].exc_info[1])
    assert prof._tracer.errors == 3
    names = [r["name"] for r in prof.table.to_pylist()]
    assert names.count(f"{__name__}::_appends") == 3 and names.count("builtins::len") == 3


FORK = """
import os, sys
import recfn

def leaf(x):
    return x + 1

with recfn.profile(trace_calls=True, trace_include=["__main__"]) as inherited:
    leaf(0)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            leaf(1)
            assert sys.getprofile() is None, "the orphaned tracer is uninstalled"
            with recfn.profile(trace_calls=True, trace_include=["__main__"]) as own:
                leaf(2)
            names = [r["name"] for r in own.table.to_pylist() if r["kind"] == "range"]
            assert names == ["__main__::leaf"], names
        except BaseException as exc:
            print("child failed:", repr(exc), file=sys.stderr)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    leaf(3)
assert os.waitstatus_to_exitcode(status) == 0
names = [r["name"] for r in inherited.table.to_pylist() if r["kind"] == "range"]
assert names == ["__main__::leaf", "__main__::leaf"], names
print("ok")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_drops_the_inherited_hook_and_traces_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FORK],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RECFN_CTRACE": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_no_references_left_behind(work, monkeypatch) -> None:
    """Code objects, frames and the hook's buffers are all released once the profile is gone."""
    monkeypatch.setenv("RECFN_CTRACE", "1")
    code = work.leaf.__code__

    def profiled() -> None:
        with recfn.profile(trace_calls=True, trace_include=["nativework"]) as prof:
            work.run(2)
        assert prof.table.num_rows > 10

    profiled()  # the first run may intern names and warm caches
    gc.collect()
    before = sys.getrefcount(code)
    for _ in range(3):
        profiled()
    gc.collect()
    assert sys.getrefcount(code) == before


def test_threads_running_before_the_profile(work, monkeypatch) -> None:
    """A thread already running when profiling starts: traced on 3.12+ (as sys.monitoring
    traces every thread), not on 3.10-3.11 (sys.setprofile is per thread), by both tracers."""
    shapes = []
    for flag in ("1", "0"):
        monkeypatch.setenv("RECFN_CTRACE", flag)
        go = threading.Event()

        def early(go: threading.Event = go) -> None:
            go.wait()
            work.run(1)

        worker = threading.Thread(target=early, name="early")
        worker.start()
        with recfn.profile(trace_calls=True, trace_include=["nativework"]) as prof:
            go.set()
            worker.join()
        shapes.append(shape(prof))
    assert shapes[0] == shapes[1]
    traced = any(row[1] == "nativework::run" for row in shapes[0])
    assert traced == (sys.version_info >= (3, 12))
