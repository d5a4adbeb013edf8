"""Context: asyncio tasks, propagation into threads, many threads at once, futures ending ranges."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections import Counter
from typing import Any

import pytest

import recfn
from recfn import RecordFunctionCallback


def _parents() -> dict[str, str]:
    """Register a callback recording each range's parent name (by range name)."""
    parents: dict[str, str] = {}

    def start(rf: recfn.RecordFunction) -> None:
        parents[rf.name] = rf.parent.name if rf.parent is not None else ""

    recfn.add_global_callback(RecordFunctionCallback(start))
    return parents


async def _one_range(name: str) -> None:
    """A task's body: one range named ``name``."""
    with recfn.record_function(name):
        pass


def test_interleaving_asyncio_tasks_keep_their_own_parents() -> None:
    parents = _parents()
    order: list[str] = []

    async def task(tag: str, first: asyncio.Event, second: asyncio.Event) -> None:
        with recfn.record_function(f"{tag}-outer"):
            order.append(f"{tag}-outer")
            first.set()
            await second.wait()  # the other task opens its ranges meanwhile
            with recfn.record_function(f"{tag}-inner"):
                order.append(f"{tag}-inner")
                await asyncio.sleep(0)

    async def main() -> None:
        a_ready, b_ready = asyncio.Event(), asyncio.Event()
        with recfn.record_function("main"):
            await asyncio.gather(task("a", a_ready, b_ready), task("b", b_ready, a_ready))

    asyncio.run(main())
    assert parents == {
        "main": "",
        "a-outer": "main",
        "b-outer": "main",
        "a-inner": "a-outer",
        "b-inner": "b-outer",
    }
    assert order.index("b-outer") < order.index("a-inner")  # they really interleaved


def test_ended_ranges_of_a_task_parent_nothing_after_them() -> None:
    """An ended range's closed link may stay current in its task: later ranges, and tasks made
    after it ended or while it was open but run after it ended, skip it."""
    parents = _parents()

    async def main() -> None:
        with recfn.record_function("outer"):
            with recfn.record_function("first"):
                late = asyncio.ensure_future(_one_range("made-in-first"))
            with recfn.record_function("second"):
                pass
            await late
            await asyncio.create_task(_one_range("made-in-outer"))
        await asyncio.create_task(_one_range("made-after-outer"))
        with recfn.record_function("last"):
            pass

    asyncio.run(main())
    assert parents == {
        "outer": "",
        "first": "outer",
        "second": "outer",
        "made-in-first": "outer",
        "made-in-outer": "outer",
        "made-after-outer": "",
        "last": "",
    }


OTHER_VAR: contextvars.ContextVar[int] = contextvars.ContextVar("recfn_test_other", default=0)


@pytest.mark.parametrize("then", ["nothing", "set another ContextVar"])
def test_a_task_starts_under_the_ranges_open_when_it_was_made(then: str) -> None:
    """Its maker goes on to open another range before the task runs: a task's context is a
    copy made with the task, so the task's ranges nest under what was open then, not now,
    whether or not a ContextVar was set in between."""
    parents = _parents()

    async def main() -> None:
        with recfn.record_function("outer"):
            task = asyncio.create_task(_one_range("in-task"))
            if then != "nothing":
                OTHER_VAR.set(1)
            with recfn.record_function("later"):
                with recfn.record_function("inner"):
                    await task

    asyncio.run(main())
    assert parents == {"outer": "", "later": "outer", "inner": "later", "in-task": "outer"}


def test_a_copied_context_runs_under_the_ranges_open_when_it_was_copied() -> None:
    parents = _parents()

    def in_copy() -> None:
        with recfn.record_function("in-copy"):
            pass

    async def main() -> None:
        with recfn.record_function("outer"):
            copied = contextvars.copy_context()
            with recfn.record_function("later"):
                copied.run(in_copy)
                with recfn.record_function("after-the-copy-ran"):
                    pass

    asyncio.run(main())
    assert parents == {
        "outer": "",
        "later": "outer",
        "in-copy": "outer",
        "after-the-copy-ran": "later",
    }


def test_a_range_entered_again_is_not_the_parent_its_first_run_was() -> None:
    """A task made during a range's first run and started during its second: the first run
    had ended, so the task's range has no parent, though the same object is open again."""
    parents = _parents()
    reused = recfn.record_function("reused")

    async def main() -> None:
        with reused:
            task = asyncio.create_task(_one_range("in-task"))
            with recfn.record_function("inner"):  # pushed on a copy: the task holds the stack
                pass
        with reused:
            await task

    asyncio.run(main())
    assert parents == {"reused": "", "inner": "reused", "in-task": ""}


def test_a_range_ended_in_its_task_after_the_task_made_another_is_not_async() -> None:
    async def main() -> None:
        with recfn.record_function("outer"):
            task = asyncio.create_task(asyncio.sleep(0))
            with recfn.record_function("inner"):  # its stack is a copy, made current
                pass
            await task

    with recfn.profile() as prof:
        asyncio.run(main())
    rows = {row["name"]: row for row in prof.table.to_pylist() if row["kind"] == "range"}
    assert not rows["outer"]["is_async"] and not rows["inner"]["is_async"]
    assert rows["inner"]["parent_id"] == rows["outer"]["id"]


def test_event_loops_on_many_threads_keep_their_tasks_apart() -> None:
    """Each thread's loop claims its own stacks; threads that end drop theirs."""
    parents = _parents()

    async def child(tag: str) -> None:
        with recfn.record_function(f"{tag}-child"):
            await asyncio.sleep(0)

    async def main(tag: str) -> None:
        with recfn.record_function(f"{tag}-outer"):
            task = asyncio.create_task(child(tag))
            with recfn.record_function(f"{tag}-inner"):
                await task

    threads = [threading.Thread(target=asyncio.run, args=(main(f"t{i}"),)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(8):
        assert parents[f"t{i}-outer"] == ""
        assert parents[f"t{i}-inner"] == parents[f"t{i}-child"] == f"t{i}-outer"


def test_range_outside_the_loop_parents_ranges_inside_it() -> None:
    parents = _parents()

    async def inside() -> None:
        with recfn.record_function("inside"):
            await asyncio.sleep(0)

    with recfn.record_function("outside"):
        asyncio.run(inside())
    assert parents == {"outside": "", "inside": "outside"}


def test_thread_local_callbacks_follow_tasks_but_not_siblings() -> None:
    seen: list[str] = []

    async def with_callback() -> None:
        recfn.add_thread_local_callback(RecordFunctionCallback(lambda rf: seen.append(rf.name)))
        with recfn.record_function("in-task"):
            await asyncio.sleep(0)

    async def without_callback() -> None:
        await asyncio.sleep(0)
        with recfn.record_function("in-sibling"):
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(with_callback(), without_callback())

    asyncio.run(main())
    assert seen == ["in-task"]


def test_propagate_carries_thread_local_callbacks_into_threads() -> None:
    seen: list[str] = []
    recfn.add_thread_local_callback(RecordFunctionCallback(lambda rf: seen.append(rf.name)))

    def work(name: str) -> str:
        with recfn.record_function(name):
            return name

    plain = threading.Thread(target=work, args=("plain-thread",))
    plain.start()
    plain.join()
    wrapped = recfn.propagate(work)
    thread = threading.Thread(target=wrapped, args=("propagated",))
    thread.start()
    thread.join()
    with recfn.PropagatingExecutor(concurrent.futures.ThreadPoolExecutor(2)) as pool:
        assert list(pool.map(work, ["pool-1", "pool-2"])) == ["pool-1", "pool-2"]
    assert sorted(seen) == ["pool-1", "pool-2", "propagated"]
    assert wrapped.__name__ == "work"


def test_ranges_in_worker_threads_are_roots_there() -> None:
    parents = _parents()

    def work() -> None:
        with recfn.record_function("worker"):
            pass

    with recfn.record_function("main"), concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(recfn.propagate(work)).result()
    assert parents == {"main": "", "worker": ""}


def test_bad_propagate_input() -> None:
    with pytest.raises(TypeError, match="callable"):
        recfn.propagate(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Executor"):
        recfn.PropagatingExecutor(object())  # type: ignore[arg-type]


def test_eight_threads_nested_ranges_counted_exactly() -> None:
    threads_n, per_thread, depth = 8, 20_000, 4
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def start(rf: recfn.RecordFunction) -> None:
        with lock:
            counts["start"] += 1

    def end(rf: recfn.RecordFunction, ctx: object) -> None:
        with lock:
            counts["end"] += 1

    recfn.add_global_callback(RecordFunctionCallback(start, end))
    barrier = threading.Barrier(threads_n)

    def work() -> None:
        barrier.wait()
        record_function = recfn.record_function
        for _ in range(per_thread // depth):
            with record_function("a"), record_function("b"), record_function("c"):
                with record_function("d"):
                    pass

    threads = [threading.Thread(target=work) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts == {"start": threads_n * per_thread, "end": threads_n * per_thread}


# -- futures ---------------------------------------------------------------------------------


def _ended() -> list[tuple[str, bool]]:
    ended: list[tuple[str, bool]] = []
    recfn.add_global_callback(
        RecordFunctionCallback(None, lambda rf, ctx: ended.append((rf.name, rf.is_async)))
    )
    return ended


def test_end_on_concurrent_future_value_and_exception() -> None:
    ended = _ended()
    release = threading.Event()

    def slow(value: Any) -> Any:
        release.wait()
        if isinstance(value, Exception):
            raise value
        return value

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        with recfn.record_function("ok") as rf:
            chained_ok = rf.end_on_future(pool.submit(slow, 5))
        with recfn.record_function("bad") as rf:
            chained_bad = rf.end_on_future(pool.submit(slow, ValueError("nope")))
        assert ended == []  # the with-blocks exited, the ranges did not end
        assert recfn.current_range() is None
        release.set()
        assert chained_ok.result() == 5
        with pytest.raises(ValueError, match="nope"):
            chained_bad.result()
    assert sorted(ended) == [("bad", True), ("ok", True)]


def test_end_on_asyncio_future_value_and_exception() -> None:
    ended = _ended()

    async def job(value: Any) -> Any:
        await asyncio.sleep(0)
        if isinstance(value, Exception):
            raise value
        return value

    async def main() -> tuple[Any, BaseException]:
        with recfn.record_function("task-ok") as rf:
            ok = rf.end_on_future(asyncio.ensure_future(job(1)))
        with recfn.record_function("task-bad") as rf:
            bad = rf.end_on_future(asyncio.ensure_future(job(KeyError("k"))))
        results = await asyncio.gather(ok, bad, return_exceptions=True)
        return results[0], results[1]

    value, error = asyncio.run(main())
    assert value == 1 and isinstance(error, KeyError)
    assert sorted(ended) == [("task-bad", True), ("task-ok", True)]


def test_end_on_future_twice_or_with_bad_input_raises() -> None:
    _ended()
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    with recfn.record_function("once") as rf:
        rf.end_on_future(future)
        with pytest.raises(RuntimeError, match="already called"):
            rf.end_on_future(future)
    with recfn.record_function("bad") as rf, pytest.raises(TypeError, match="future"):
        rf.end_on_future(42)
    future.set_result(1)


def test_end_on_future_when_nothing_listens_still_chains() -> None:
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    with recfn.record_function("idle") as rf:
        chained = rf.end_on_future(future)
    future.set_result(3)
    assert chained.result() == 3


def test_detach_runs_on_the_starting_thread_and_hands_its_context_to_end() -> None:
    calls: list[tuple[str, object, int]] = []

    def start(rf: recfn.RecordFunction) -> object:
        return "from start"

    def detach(rf: recfn.RecordFunction, ctx: object) -> object:
        calls.append(("detach", ctx, threading.get_ident()))
        return "from detach"

    def end(rf: recfn.RecordFunction, ctx: object) -> None:
        calls.append(("end", ctx, threading.get_ident()))

    recfn.add_global_callback(RecordFunctionCallback(start, end, detach=detach))
    recfn.add_global_callback(RecordFunctionCallback(start, end))  # no detach: context kept
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    with recfn.record_function("sync"):
        pass
    with recfn.record_function("later") as rf:
        chained = rf.end_on_future(future)
    me = threading.get_ident()
    assert calls == [
        ("end", "from start", me),
        ("end", "from start", me),
        ("detach", "from start", me),
    ]
    worker = threading.Thread(target=future.set_result, args=(1,))
    worker.start()
    worker.join()
    assert chained.result() == 1
    assert sorted(calls[3:]) == [
        ("end", "from detach", worker.ident),
        ("end", "from start", worker.ident),
    ]


def test_detach_must_be_callable() -> None:
    with pytest.raises(TypeError, match="detach must be callable"):
        RecordFunctionCallback(detach=3)
