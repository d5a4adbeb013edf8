"""Engine state under misuse and faults: each case once left the engine hung, silent or wrong."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import os
import subprocess
import sys
import threading
from typing import Any

import pytest

import recfn
from recfn import RecordFunctionCallback
from recfn.engine import ranges as _engine

REENTRY_AFTER_OUT_OF_ORDER_EXIT = """
import recfn
a, b = recfn.record_function("a"), recfn.record_function("b")
with recfn.profile() as prof:
    a.__enter__(); b.__enter__(); a.__exit__(None, None, None)
    with a:
        pass
    b.__exit__(None, None, None)
    assert recfn.current_range() is None
names = sorted(r["name"] for r in prof.table.to_pylist() if r["kind"] == "range")
assert names == ["a", "a", "b"], names
print("ok")
"""


def by_name(prof: recfn.profile) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in prof.table.to_pylist() if r["kind"] == "range"}


def test_reentering_a_reused_range_after_an_out_of_order_exit_returns() -> None:
    # It used to spin forever with the GIL held, so it runs in a process that a timeout can end.
    done = subprocess.run(
        [sys.executable, "-c", REENTRY_AFTER_OUT_OF_ORDER_EXIT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_out_of_order_exits_and_reentry_leave_no_cycle_and_exact_parents() -> None:
    a, b = recfn.record_function("a"), recfn.record_function("b")
    with recfn.profile() as prof:
        a.__enter__()
        b.__enter__()
        a.__exit__(None, None, None)
        assert recfn.current_range() is b
        with a:
            assert a.parent is b  # b is still open: a nests in it
        assert recfn.current_range() is b
        b.__exit__(None, None, None)
        assert recfn.current_range() is None
    table = prof.table.to_pylist()
    ranges = [r for r in table if r["kind"] == "range"]
    ids = {r["id"] for r in table}
    assert all(r["parent_id"] is None or r["parent_id"] in ids for r in ranges)
    assert not any(r["is_async"] for r in ranges)
    assert all(r["end_ns"] is not None for r in ranges)


def test_removing_a_thread_local_callback_in_a_propagated_thread_keeps_the_parents() -> None:
    seen: list[str] = []
    handle = recfn.add_thread_local_callback(
        RecordFunctionCallback(lambda rf: seen.append(rf.name))
    )
    thread = threading.Thread(target=recfn.propagate(lambda: recfn.remove_callback(handle)))
    thread.start()
    thread.join()
    with recfn.record_function("x"):
        pass
    assert seen == ["x"]
    with recfn.profile() as prof, recfn.record_function("profiled"):
        pass
    assert "profiled" in by_name(prof)


@pytest.mark.parametrize(
    "change",
    [
        lambda h: recfn.remove_callback(h),
        lambda h: recfn.clear_thread_local_callbacks(),
        lambda h: recfn.clear_callbacks(),
        lambda h: recfn.disable_callback(h),
        lambda h: recfn.enable_record_function(False),
    ],
    ids=["remove", "clear_thread_local", "clear", "disable", "enable_false"],
)
def test_changes_in_a_task_or_propagated_copy_stay_in_the_copy(change: Any) -> None:
    seen: list[str] = []
    handle = recfn.add_thread_local_callback(
        RecordFunctionCallback(lambda rf: seen.append(rf.name))
    )

    async def in_task() -> None:
        change(handle)
        with recfn.record_function("in-task"):
            pass

    asyncio.run(in_task())
    with recfn.PropagatingExecutor(concurrent.futures.ThreadPoolExecutor(1)) as ex:
        ex.submit(change, handle).result()
    thread = threading.Thread(target=recfn.propagate(change), args=(handle,))
    thread.start()
    thread.join()
    with recfn.record_function("parent"):
        pass
    assert seen == ["parent"]
    assert recfn.is_record_function_enabled()
    assert _engine._reg.n_callbacks >= 1


def test_fast_path_count_is_derived_and_returns_to_zero() -> None:
    handle = recfn.add_thread_local_callback(RecordFunctionCallback(lambda rf: None))
    for _ in range(3):  # removals in copies must not drive the count down (or below zero)
        thread = threading.Thread(target=recfn.propagate(lambda: recfn.remove_callback(handle)))
        thread.start()
        thread.join()
    gc.collect()
    assert _engine._reg.n_callbacks == 1
    recfn.remove_callback(handle)
    gc.collect()
    assert _engine._reg.n_callbacks == 0


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
def test_base_exception_from_a_start_callback_leaves_the_stack_clean(error: type) -> None:
    def start(rf: recfn.RecordFunction) -> None:
        if rf.name == "interrupted":
            raise error

    with recfn.profile() as prof:
        recfn.add_thread_local_callback(RecordFunctionCallback(start))
        with pytest.raises(error), recfn.record_function("interrupted"):
            pass  # never reached: __enter__ raises
        assert recfn.current_range() is None
        with recfn.record_function("later"):
            pass
        recfn.clear_thread_local_callbacks()
    r = by_name(prof)
    assert r["later"]["parent_id"] is None and r["later"]["depth"] == 0
    assert r["interrupted"]["end_ns"] is not None  # the profiler's row was closed


def test_an_end_callback_raising_does_not_leave_the_profilers_row_open() -> None:
    def end(rf: recfn.RecordFunction, ctx: object) -> None:
        raise KeyboardInterrupt

    handle = recfn.add_global_callback(RecordFunctionCallback(None, end))  # before the profiler's
    with recfn.profile() as prof:
        with pytest.raises(KeyboardInterrupt), recfn.record_function("x"):
            pass
        recfn.remove_callback(handle)
        assert recfn.current_range() is None
    assert by_name(prof)["x"]["end_ns"] is not None


def test_a_started_range_dropped_without_end_is_ended_when_collected() -> None:
    ended: list[str] = []
    recfn.add_global_callback(RecordFunctionCallback(None, lambda rf, ctx: ended.append(rf.name)))
    with recfn.profile() as prof:
        rf = recfn.RecordFunction()
        rf.before("dropped")
        assert recfn.current_range() is rf
        del rf
        gc.collect()
        assert recfn.current_range() is None
        with recfn.record_function("after"):
            pass
    assert ended[0] == "dropped"
    r = by_name(prof)
    assert r["dropped"]["end_ns"] is not None
    assert r["after"]["parent_id"] is None


def test_a_started_range_dropped_inside_a_task_is_ended_when_collected() -> None:
    ended: list[str] = []
    recfn.add_global_callback(RecordFunctionCallback(None, lambda rf, ctx: ended.append(rf.name)))

    async def main() -> None:
        rf = recfn.RecordFunction()
        rf.before("dropped")
        assert recfn.current_range() is rf
        del rf
        gc.collect()
        assert recfn.current_range() is None

    asyncio.run(main())
    assert ended == ["dropped"]


def test_out_of_order_exit_on_the_same_thread_is_not_async() -> None:
    with recfn.profile() as prof:
        a = recfn.record_function("a").__enter__()
        b = recfn.record_function("b").__enter__()
        a.__exit__(None, None, None)
        b.__exit__(None, None, None)
        c = recfn.RecordFunction()
        c.before("c")
        d = recfn.RecordFunction()
        d.before("d")
        c.end()
        d.end()
    r = by_name(prof)
    assert not any(r[name]["is_async"] for name in "abcd")


def test_out_of_order_exit_in_the_same_task_is_not_async_another_task_is() -> None:
    async def main() -> recfn.RecordFunction:
        a = recfn.record_function("a").__enter__()
        b = recfn.record_function("b").__enter__()
        a.__exit__(None, None, None)
        assert recfn.current_range() is b
        b.__exit__(None, None, None)
        assert recfn.current_range() is None
        moved = recfn.record_function("moved").__enter__()

        async def end_it() -> None:
            moved.__exit__(None, None, None)

        await asyncio.create_task(end_it())
        assert recfn.current_range() is None
        return moved

    with recfn.profile() as prof:
        asyncio.run(main())
    r = by_name(prof)
    assert not r["a"]["is_async"] and not r["b"]["is_async"]
    assert r["moved"]["is_async"]


def test_huge_sampling_prob_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="sampling_prob"):
        recfn.profile(sampling_prob=10**400)
    with pytest.raises(ValueError, match="sampling_prob"):
        RecordFunctionCallback(sampling_prob=10**400)


FORK_CHILD = """
import os, sys
import recfn
with recfn.profile() as inherited:
    with recfn.record_function("before-fork"):
        pass
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            with recfn.record_function("child-while-inherited"):
                pass
            inherited.stop()
            rows = inherited.table.to_pylist()
            names = {r["name"] for r in rows}
            assert "before-fork" in names and "child-while-inherited" not in names, names
            assert {r["pid"] for r in rows} == {os.getppid()}, "parent's events keep its pid"
            with recfn.profile() as own, recfn.record_function("child"):
                pass
            child_rows = [r for r in own.table.to_pylist() if r["kind"] == "range"]
            assert [r["name"] for r in child_rows] == ["child"]
            assert {r["pid"] for r in child_rows} == {os.getpid()}
        except BaseException as exc:
            print("child failed:", repr(exc), file=sys.stderr)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
assert {r["pid"] for r in inherited.table.to_pylist()} == {os.getpid()}
print("ok")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_keeps_the_parents_pid_and_can_profile_again() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FORK_CHILD], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


ENTRIES = ("__exit__", "_end_here")
"""The interpreted build's window that no code of its own can close: a Ctrl-C handled as the
range's exit is entered, before its first statement (Python does not call ``__exit__``
again), leaves the range open on its thread (docs/architecture.md, "Ctrl-C in the pure build")."""


def _interrupted_at(point: int) -> Any:
    """A profile function that raises KeyboardInterrupt at the ``point``-th place a signal is
    handled while it is on: where CPython checks for one, at the entry of a Python function
    and after a call of a C function returns (loops' back-edges aside), but the `ENTRIES`."""
    seen = 0

    def hook(frame: Any, event: str, arg: object) -> None:
        nonlocal seen
        if event == "c_return" or (event == "call" and frame.f_code.co_name not in ENTRIES):
            seen += 1
            if seen == point:
                raise KeyboardInterrupt

    return hook


@pytest.mark.skipif(recfn.COMPILED, reason="compiled, a range's start and end check for no signal")
@pytest.mark.parametrize("where", ["a thread", "an event loop"])
@pytest.mark.parametrize("step", ["start", "end"])
@pytest.mark.parametrize("path", ["one profiler", "a callback beside it"])
def test_a_ctrl_c_inside_a_range_start_or_end_leaves_it_off_the_stack(
    path: str, step: str, where: str
) -> None:
    """Each place of a range's start or end where a Ctrl-C can land interrupted in turn (the
    profiler's fast path, or the callbacks' path; on a thread's stack, or a task's in an event
    loop): the range is not left on its stack, so the ranges after it nest where they are
    (parent and depth), in the table and in the engine."""
    if where == "an event loop":

        async def in_a_task() -> None:
            _interrupt_each_place(path, step)

        asyncio.run(in_a_task())
    else:
        _interrupt_each_place(path, step)


def _interrupt_each_place(path: str, step: str) -> None:
    point = 0
    while True:
        point += 1
        handle = recfn.add_global_callback(RecordFunctionCallback()) if path[0] == "a" else None
        try:
            with recfn.profile() as prof:
                with recfn.record_function("outer") as outer:
                    inner = recfn.record_function("inner")
                    if step == "end":
                        inner.__enter__()
                    sys.setprofile(_interrupted_at(point))
                    try:
                        if step == "start":
                            inner.__enter__()
                        else:
                            inner.__exit__(None, None, None)
                        done = True
                    except KeyboardInterrupt:
                        done = False
                    finally:
                        sys.setprofile(None)
                    if done and step == "start":
                        inner.__exit__(None, None, None)
                    with recfn.record_function("after") as after:
                        assert after.depth == outer.depth + 1, point
                with recfn.record_function("top") as top:
                    assert top.depth == 0, point
                assert recfn.current_range() is None
        finally:
            if handle is not None:
                recfn.remove_callback(handle)
        rows = by_name(prof)
        assert rows["after"]["parent_id"] == rows["outer"]["id"], point
        assert rows["top"]["parent_id"] is None, point
        if done:
            break
    assert point > 2  # each place was interrupted once
