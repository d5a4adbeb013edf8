"""The native range fast path records exactly what the slow path records.

Each workload is captured twice, with the fast path allowed and forbidden
(``_engine.set_fast_path``); the tables must be equal but for the times: ids, parents, depths,
names, kinds, scopes, async flags, args, stacks, memory events and dropped counts. Thread ids
are compared by thread name (a thread started in each capture gets a new id).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any, Optional

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recfn
from recfn.capture import _recorder
from recfn.engine import ranges as _engine
from recfn.engine.ranges import TID_SHIFT
from recfn.formats.schema import DROPPED_EVENTS_KEY

needs_crange = pytest.mark.skipif(
    _engine._crange is None, reason="recfn.native._crange is not built (pure install)"
)

COMPARED = ("name", "kind", "scope", "depth", "is_async", "thread_name", "args", "stack")
OPTIONAL = ("memory_bytes", "device", "input_shapes")


@pytest.fixture(autouse=True)
def fast_path_restored() -> Iterator[None]:
    yield
    _engine.set_fast_path(True)
    _recorder.row_store.allow_native = True


def comparable(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows without their times, in id order; an id is (thread name, rank of its sequence
    number in the thread): each capture continues the thread's numbering, and threads started
    together take their numbers in whatever order they first record."""
    rows = table.to_pylist()
    names = {r["thread_id"]: r["thread_name"] for r in rows}
    ranks: dict[int, int] = {}
    taken: dict[int, int] = {}
    for value in sorted(r["id"] for r in rows):
        thread = value >> TID_SHIFT
        ranks[value] = taken.get(thread, 0)
        taken[thread] = ranks[value] + 1

    def key(value: Optional[int]) -> Optional[tuple[str, int]]:
        if value is None:
            return None
        return (names.get(value >> TID_SHIFT, "?"), ranks.get(value, -1))

    out = []
    for r in rows:
        fields = tuple(r.get(c) for c in COMPARED + OPTIONAL if c in r)
        out.append((key(r["id"]), key(r["parent_id"]), r["end_ns"] is None, *fields))
    return sorted(out, key=lambda row: row[0])


def dropped(table: pa.Table) -> bytes:
    return table.schema.metadata[DROPPED_EVENTS_KEY.encode()]


def capture(workload: Callable[[], None], fast: bool, **options: Any) -> pa.Table:
    _engine.set_fast_path(fast)
    try:
        prof = recfn.profile(**options).start()
        try:
            workload()
        finally:
            if prof.running:
                prof.stop()
    finally:
        _engine.set_fast_path(True)
    return prof.table


def assert_same(workload: Callable[[], None], **options: Any) -> pa.Table:
    slow, fast = [capture(workload, on, **options) for on in (False, True)]  # one line: stacks
    assert comparable(fast) == comparable(slow)
    assert dropped(fast) == dropped(slow)
    assert fast.column_names == slow.column_names
    return fast


# -- the fast path is taken -------------------------------------------------------------------


@needs_crange
def test_with_blocks_decorators_and_record_function_fast_take_the_fast_path() -> None:
    taken: list[bool] = []

    @recfn.record_function("deco")
    def decorated() -> None:
        current = recfn.current_range()
        assert current is not None
        taken.append(current._fast)

    with recfn.profile():
        with recfn.record_function("with") as rf:
            taken.append(rf._fast)
        with recfn.record_function_fast("fast") as fast:
            taken.append(fast._fast)
        decorated()
        with recfn.record_function("args", args="a") as with_args:
            taken.append(with_args._fast)
    assert taken == [True, True, True, False]


@needs_crange
def test_ranges_inside_an_event_loop_take_the_fast_path_in_their_tasks_frames() -> None:
    async def task() -> tuple[bool, bool]:
        with recfn.record_function("in a task") as rf:
            await asyncio.sleep(0)
            return rf._fast, rf._task is not None

    with recfn.profile():
        assert asyncio.run(task()) == (True, True)
        with recfn.record_function("after the loop") as rf:
            assert rf._fast and rf._task is None


@needs_crange
def test_the_plain_entry_follows_the_registrations() -> None:
    assert _engine._reg.plain is None
    prof = recfn.profile().start()
    try:
        plain = _engine._reg.plain
        assert plain is not None and plain.cb is prof._recorder
        recfn.disable_callback(prof._handle)
        assert _engine._reg.plain is None
        recfn.reenable_callback(prof._handle)
        assert _engine._reg.plain is plain
        handle = recfn.add_global_callback(recfn.RecordFunctionCallback())
        assert _engine._reg.plain is None
        recfn.remove_callback(handle)
        assert _engine._reg.plain is plain
        local = recfn.add_thread_local_callback(recfn.RecordFunctionCallback())
        assert _engine._reg.plain is None
        recfn.remove_callback(local)
        import gc

        gc.collect()  # the dropped thread-local state uncounts itself when collected
        assert _engine._reg.plain is plain
        _engine.set_fast_path(False)
        assert _engine._reg.plain is None
    finally:
        prof.stop()
    assert _engine._reg.plain is None


@needs_crange
@pytest.mark.parametrize(
    "options",
    [
        {"profile_memory": True},
        {"record_scopes": ["function"]},
        {"sampling_prob": 0.5},
        {"report_input_shapes": True},
        {"trace_calls": True},
    ],
    ids=["memory", "scopes", "sampling", "shapes", "trace_calls"],
)
def test_options_that_need_the_callbacks_keep_the_slow_path(options: dict[str, Any]) -> None:
    with recfn.profile(**options):
        assert _engine._reg.plain is None
        with recfn.record_function("x") as rf:
            assert not rf._fast


@needs_crange
def test_streaming_and_the_flight_recorder_keep_vec_chunks(tmp_path: Any) -> None:
    with recfn.profile(output=str(tmp_path / "ds")) as prof:
        assert not prof._recorder.native and _engine._reg.plain is None
    with recfn.profile(flight_recorder=100) as prof:
        assert not prof._recorder.native and _engine._reg.plain is None


# -- the same tables --------------------------------------------------------------------------


def nested() -> None:
    for _ in range(3):
        with recfn.record_function("a"):
            with recfn.record_function("b"):
                with recfn.record_function_fast("c"):
                    pass
            with recfn.record_function("b"):
                pass


@recfn.record_function("decorated")
def decorated(depth: int) -> int:
    return decorated(depth - 1) + 1 if depth else 0


async def decorated_async() -> int:
    return 1


def decorators() -> None:
    with recfn.record_function("outer"):
        decorated(3)
    decorated(1)
    with recfn.instrument(json, include=["dumps"]):  # wrappers that hand their arguments on
        with recfn.record_function("around instrumented"):
            json.dumps([1])
        json.dumps({})


def marks_and_memory() -> None:
    recfn.mark("top")
    with recfn.record_function("a"):
        recfn.mark("in a")
        with recfn.record_function("b"):
            recfn.mark("in b")
            recfn.report_memory_usage(128, "cuda:0")
        recfn.report_memory_usage(-128)


def mixed_paths() -> None:
    with recfn.record_function("fast"):
        with recfn.record_function("slow", args="x=1"):
            with recfn.record_function("fast in slow"):
                pass
        rf = recfn.RecordFunction(recfn.RecordScope.FUNCTION)
        rf.before("before()")
        with recfn.record_function("fast in before"):
            pass
        rf.end()


def out_of_order() -> None:
    a = recfn.record_function("a").__enter__()
    b = recfn.record_function("b").__enter__()
    c = recfn.record_function("c").__enter__()
    a.__exit__(None, None, None)
    with recfn.record_function("after a"):
        pass
    c.__exit__(None, None, None)
    b.__exit__(None, None, None)
    with recfn.record_function("d") as d:
        d.end()
        with recfn.record_function("after end"):
            pass
    reused = recfn.record_function("reused")
    for _ in range(3):
        with reused:
            pass
    try:
        with recfn.record_function("raises"):
            raise ValueError("inside")
    except ValueError:
        pass


def futures() -> None:
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
        gate = threading.Event()
        with recfn.record_function("concurrent") as rf:
            done = rf.end_on_future(pool.submit(gate.wait))
            with recfn.record_function("inside"):
                pass
        with recfn.record_function("between"):
            gate.set()
            done.result()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with recfn.record_function("in loop") as rf:
            chained = rf.end_on_future(fut)
        loop.call_soon(fut.set_result, 1)
        await chained
        await asyncio.gather(*(task(i) for i in range(3)))

    async def task(i: int) -> None:
        with recfn.record_function(f"task {i}"):
            await asyncio.sleep(0)
            with recfn.record_function("inner"):
                await asyncio.sleep(0)

    asyncio.run(main())
    with recfn.record_function("after loop"):
        pass


def event_loop() -> None:
    """Tasks interleaving ranges across awaits, a range ended or exited by another task, ranges
    exited out of order in a task, ranges in a plain loop callback (how a Jupyter cell runs) and
    around the loop."""
    handed: list[recfn.record_function] = []

    def callback() -> None:
        with recfn.record_function("callback"):
            with recfn.record_function("callback inner"):
                recfn.mark("in callback")

    async def worker(i: int, gate: asyncio.Event) -> None:
        with recfn.record_function(f"worker {i}"):
            await asyncio.sleep(0)
            with recfn.record_function("step"):
                if i == 0:
                    await gate.wait()
                else:
                    gate.set()
            with recfn.record_function("after step"):
                await asyncio.sleep(0)

    async def opener() -> None:
        rf = recfn.record_function("ended elsewhere")
        rf.__enter__()
        handed.append(rf)

    async def closer() -> None:
        handed.pop().end()

    async def exiter() -> None:
        handed.pop().__exit__(None, None, None)

    def out_of_order_in_a_task() -> None:
        outer = recfn.record_function("outer, exited first")
        inner = recfn.record_function("inner, exited last")
        outer.__enter__()
        inner.__enter__()
        outer.__exit__(None, None, None)
        with recfn.record_function("under the inner one"):
            pass
        inner.__exit__(None, None, None)

    async def main() -> None:
        gate = asyncio.Event()
        with recfn.record_function("main"):
            asyncio.get_running_loop().call_soon(callback)
            await asyncio.gather(worker(0, gate), worker(1, gate))
            await asyncio.create_task(opener())
            await asyncio.create_task(closer())
            await asyncio.create_task(opener())
            await asyncio.create_task(exiter())  # a with-block's exit from another task
            out_of_order_in_a_task()
            with recfn.record_function("main again"):
                await asyncio.sleep(0)

    with recfn.record_function("around the loop"):
        asyncio.run(main())


def threads() -> None:
    def work(i: int) -> None:
        for _ in range(3):
            with recfn.record_function(f"thread {i}"):
                with recfn.record_function("inner"):
                    recfn.mark("m")

    started = [threading.Thread(target=work, args=(i,), name=f"worker-{i}") for i in range(3)]
    with recfn.record_function("main"):
        for t in started:
            t.start()
        for t in started:
            t.join()


def callbacks_change() -> None:
    seen: list[str] = []
    cb = recfn.RecordFunctionCallback(lambda rf: seen.append(rf.name))
    with recfn.record_function("open while added"):
        handle = recfn.add_global_callback(cb)
        with recfn.record_function("two callbacks"):
            pass
    recfn.remove_callback(handle)
    with recfn.record_function("one again"):
        local = recfn.add_thread_local_callback(cb)

        def in_thread() -> None:
            with recfn.record_function("propagated"):
                pass

        t = threading.Thread(target=recfn.propagate(in_thread), name="propagated")
        t.start()
        t.join()
        recfn.remove_callback(local)
    with recfn.DisableRecordFunctionGuard():
        with recfn.record_function("disabled"):
            pass
    with recfn.record_function("enabled"):
        pass


WORKLOADS = {
    "nested": nested,
    "decorators": decorators,
    "marks_and_memory": marks_and_memory,
    "mixed_paths": mixed_paths,
    "out_of_order": out_of_order,
    "futures": futures,
    "threads": threads,
    "event_loop": event_loop,
    "callbacks_change": callbacks_change,
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_fast_and_slow_paths_record_the_same_rows(name: str) -> None:
    table = assert_same(WORKLOADS[name])
    assert table.num_rows > 2


def test_async_decorated_functions_record_the_same_rows() -> None:
    deco = recfn.record_function("async deco")(decorated_async)

    def workload() -> None:
        asyncio.run(deco())
        with recfn.record_function("after"):
            pass

    assert_same(workload)


def test_with_stack_records_the_same_stacks() -> None:
    def leaf() -> None:
        with recfn.record_function("leaf"):
            pass

    def workload() -> None:
        with recfn.record_function("top"):
            leaf()
        decorated(1)

    table = assert_same(workload, with_stack=True)
    stacks = dict(zip(table.column("name").to_pylist(), table.column("stack").to_pylist()))
    assert any("leaf" in frame for frame in stacks["leaf"])  # the user's frame, as today


@pytest.mark.filterwarnings("ignore:recfn. max_events")
def test_max_events_drops_the_same_events() -> None:
    def workload() -> None:
        for _ in range(10):
            with recfn.record_function("x"):
                with recfn.record_function("y"):
                    pass

    slow = capture(workload, False, max_events=7)
    fast = capture(workload, True, max_events=7)
    assert comparable(fast) == comparable(slow)
    assert fast.num_rows == 7
    assert dropped(fast) == dropped(slow) == b"15"


def test_a_profiler_stopped_while_ranges_are_open_records_the_same_rows() -> None:
    tables = []
    for fast in (False, True):
        _engine.set_fast_path(fast)
        prof = recfn.profile().start()
        outer = recfn.record_function("outer").__enter__()
        with recfn.record_function("closed"):
            pass
        inner = recfn.record_function("inner").__enter__()
        prof.stop()
        inner.__exit__(None, None, None)
        outer.__exit__(None, None, None)
        with recfn.record_function("after stop"):
            pass
        tables.append(prof.table)
    assert comparable(tables[0]) == comparable(tables[1])
    open_names = {r["name"] for r in tables[1].to_pylist() if r["end_ns"] is None}
    assert open_names == {"outer", "inner"}


def test_two_profilers_at_once_record_the_same_rows() -> None:
    import contextvars

    results = []
    for fast in (False, True):
        _engine.set_fast_path(fast)
        first = recfn.profile().start()
        with recfn.record_function("first only"):
            pass

        def second() -> Any:
            prof = recfn.profile().start()
            with recfn.record_function("both"):
                recfn.mark("mark in both")
            prof.stop()
            return prof

        other = contextvars.Context().run(second)
        with recfn.record_function("first again"):
            pass
        first.stop()
        results.append((comparable(first.table), comparable(other.table)))
    assert results[0] == results[1]


def test_native_rows_and_vec_chunks_record_the_same_rows() -> None:
    """The native Rows (either path) against the recorder's vec chunks."""

    def workload() -> None:
        nested()
        marks_and_memory()
        out_of_order()
        threads()

    native = capture(workload, True)
    _recorder.row_store.allow_native = False
    vecs = capture(workload, False)
    assert comparable(native) == comparable(vecs)


# -- random programs --------------------------------------------------------------------------

step = st.one_of(
    st.tuples(st.just("open"), st.sampled_from(["a", "b", "c"]), st.booleans()),
    st.tuples(st.just("close"), st.integers(0, 5)),
    st.tuples(st.just("end"), st.integers(0, 5)),
    st.tuples(st.just("mark"), st.sampled_from(["m", "n"])),
    st.tuples(st.just("decorated"), st.integers(0, 2)),
)


def program(steps: list[tuple[Any, ...]]) -> Callable[[], None]:
    def run() -> None:
        open_ranges: list[recfn.record_function] = []
        for op in steps:
            if op[0] == "open":
                rf = recfn.record_function(op[1], args="x" if op[2] else None)
                open_ranges.append(rf.__enter__())
            elif op[0] in ("close", "end") and open_ranges:
                rf = open_ranges.pop(op[1] % len(open_ranges))
                if op[0] == "close":
                    rf.__exit__(None, None, None)
                else:
                    rf.end()
            elif op[0] == "mark":
                recfn.mark(op[1])
            elif op[0] == "decorated":
                decorated(op[1])
        for rf in reversed(open_ranges):
            rf.__exit__(None, None, None)

    return run


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=30))
def test_random_programs_record_the_same_rows_on_both_paths(steps: list[tuple[Any, ...]]) -> None:
    recfn.clear_callbacks()
    run = program(steps)
    slow = capture(run, False)
    fast = capture(run, True)
    assert comparable(fast) == comparable(slow)
