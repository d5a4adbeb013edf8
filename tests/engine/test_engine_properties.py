"""Random sequences of engine operations, checked against a model after every step.

Ranges are entered, exited, started and ended in any order (with reused objects), dropped
without ``end()``; thread-local callbacks are added, removed, disabled and re-enabled here and in
copies (propagated threads, asyncio tasks); callbacks raise Exception or BaseException. After each
step: the thread's stack holds exactly the model's open ranges, ``parent`` chains end, the
fast-path count and the plain entry are what the registrations imply and copies left this
context's registrations alone. A profile around the whole sequence records exactly the ranges
that started. Each sequence runs with the native range fast path allowed or forbidden.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recfn
from recfn import RecordFunctionCallback
from recfn.engine import ranges as _engine

POOL = 3
RAISES: list[Optional[type[BaseException]]] = [None, ValueError, KeyboardInterrupt, SystemExit]


def fatal(exc: Optional[type[BaseException]]) -> bool:
    """Whether the engine lets this exception out of a callback (it logs the others)."""
    return exc is not None and not issubclass(exc, Exception)


@dataclass
class Local:
    handle: int
    enabled: bool
    start_exc: Optional[type[BaseException]]
    end_exc: Optional[type[BaseException]]


@dataclass
class Model:
    locals: list[Local] = field(default_factory=list)
    open: list[recfn.RecordFunction] = field(default_factory=list)
    selected: dict[int, list[Local]] = field(default_factory=dict)  # id(range) -> its callbacks
    started: Counter[str] = field(default_factory=Counter)

    def choose(self) -> list[Local]:
        return [
            Local(c.handle, c.enabled, c.start_exc, c.end_exc) for c in self.locals if c.enabled
        ]


def raising(exc: Optional[type[BaseException]]) -> Callable[..., None]:
    def call(*args: object) -> None:
        if exc is not None:
            raise exc("from a callback")

    return call


def first_fatal(excs: list[Optional[type[BaseException]]]) -> Optional[type[BaseException]]:
    return next((e for e in excs if fatal(e)), None)


def start(model: Model, rf: recfn.RecordFunction, begin: Callable[[], object], name: str) -> None:
    chosen = model.choose()
    expected = first_fatal([c.start_exc for c in chosen])
    raised: Optional[BaseException] = None
    try:
        begin()
    except BaseException as exc:
        raised = exc
    model.started[name] += 1
    if expected is None:
        assert raised is None, raised
        model.open.append(rf)
        model.selected[id(rf)] = chosen
    else:
        assert type(raised) is expected


def finish(model: Model, rf: recfn.RecordFunction, end: Callable[[], object]) -> None:
    expected = first_fatal([c.end_exc for c in model.selected.pop(id(rf))])
    raised: Optional[BaseException] = None
    try:
        end()
    except BaseException as exc:
        raised = exc
    model.open.remove(rf)
    assert type(raised) is expected if expected is not None else raised is None


def snapshot() -> tuple[list[tuple[int, bool]], bool]:
    state = _engine._state_var.get()
    return [(e.handle, e.enabled) for e in state.entries], state.enabled


def in_copy(where: str, action: Callable[[], None]) -> None:
    if where == "thread":
        thread = threading.Thread(target=recfn.propagate(action))
        thread.start()
        thread.join()
    else:

        async def task() -> None:
            await asyncio.create_task(asyncio.sleep(0))
            action()

        asyncio.run(task())


def copy_action(what: str, model: Model, index: int) -> Callable[[], None]:
    handle = model.locals[index % len(model.locals)].handle if model.locals else 0

    def act() -> None:
        if what == "remove" and handle:
            recfn.remove_callback(handle)
        elif what == "disable" and handle:
            recfn.disable_callback(handle)
        elif what == "clear":
            recfn.clear_thread_local_callbacks()
        elif what == "enable_false":
            recfn.enable_record_function(False)
        elif what == "add":
            recfn.add_thread_local_callback(RecordFunctionCallback(raising(None)))
        elif what == "range":
            try:
                with recfn.record_function("copy"):
                    pass
            except BaseException:
                pass

    return act


def check_invariants(model: Model, pool: list[recfn.RecordFunction]) -> None:
    td = _engine._thread_data()
    on_stack = []
    for entry in td.stack[: td.top]:
        if entry is None:
            continue
        rf = entry if isinstance(entry, recfn.RecordFunction) else _engine._live(entry)
        if rf is not None:
            on_stack.append(rf)
    assert on_stack == model.open
    assert td.top <= len(td.stack)
    assert all(slot is None for slot in td.stack[td.top :])
    assert recfn.current_range() is (model.open[-1] if model.open else None)
    for rf in pool:  # parent chains end: each parent started before its child
        seen: set[int] = set()
        node: Optional[recfn.RecordFunction] = rf
        while node is not None:
            assert id(node) not in seen, "cycle in the parent chain"
            seen.add(id(node))
            node = node.parent
    reg = _engine._reg
    assert reg.n_callbacks == len(reg.global_entries) + reg.n_local_states
    assert reg.n_local_states >= (1 if model.locals else 0)
    assert reg.n_callbacks >= 1  # the profiler
    plain_expected = (
        _engine._crange is not None
        and reg.allow_fast
        and len(reg.global_entries) == 1
        and reg.n_local_states == 0
    )
    assert (reg.plain is not None) == plain_expected
    for rf in model.open:  # a fast range is one the plain profiler alone started
        if rf._fast:
            assert rf._e0 is not None and rf._e0.cb.fast_rows and rf._more_callbacks() is None
    entries, enabled = snapshot()
    assert entries == [(c.handle, c.enabled) for c in model.locals]
    assert enabled


index = st.integers(0, POOL - 1)
operations = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["enter", "exit", "before", "end", "drop"]), index),
        st.tuples(st.just("add"), st.sampled_from(RAISES), st.sampled_from(RAISES)),
        st.tuples(st.sampled_from(["remove", "disable", "reenable"]), index),
        st.tuples(
            st.just("copy"),
            st.sampled_from(["thread", "task"]),
            st.sampled_from(["remove", "disable", "clear", "enable_false", "add", "range"]),
            index,
        ),
    ),
    max_size=25,
)


@pytest.fixture
def quiet_engine_log() -> Iterator[None]:
    """Failing callbacks are logged with their traceback, which would keep dropped ranges alive."""
    log = logging.getLogger("recfn")
    log.disabled = True
    yield
    log.disabled = False


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@settings(
    max_examples=40,  # each example collects the whole heap twice: about 1 s in a full run
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations, fast=st.booleans())
def test_random_engine_operations_keep_the_invariants(
    ops: list[tuple[Any, ...]], fast: bool, quiet_engine_log: None
) -> None:
    _engine.set_fast_path(fast)
    try:
        check_operations(ops)
    finally:
        _engine.set_fast_path(True)


def check_operations(ops: list[tuple[Any, ...]]) -> None:
    recfn.clear_callbacks()
    gc.collect()
    live0 = sum(1 for o in gc.get_objects() if type(o) is _engine._ThreadState and o.entries)
    assert _engine._reg.n_local_states == live0, (_engine._reg.n_local_states, live0)
    model = Model()
    with_ranges = [recfn.record_function(f"w{i}") for i in range(POOL)]
    manual: list[Optional[recfn.RecordFunction]] = [None] * POOL
    prof = recfn.profile().start()
    try:
        for op in ops:
            run(op, model, with_ranges, manual)
            # no list of the pool outlives this line: it would keep a dropped range alive
            check_invariants(model, with_ranges + [rf for rf in manual if rf is not None])
        for rf in reversed(list(model.open)):
            finish(
                model, rf, rf.end if rf in manual else lambda rf=rf: rf.__exit__(None, None, None)
            )
        recfn.clear_thread_local_callbacks()
        model.locals.clear()
        check_invariants(model, [])  # nothing left open, on the stack or as current range
    finally:
        prof.stop()
        td = _engine._thread_data()  # a failed example must not leave ranges to the next one
        td.stack.clear()
        td.top = 0
    table = prof.table.to_pylist()
    ranges = [r for r in table if r["kind"] == "range"]
    assert Counter(r["name"] for r in ranges) == model.started
    assert all(r["end_ns"] is not None for r in ranges)
    assert not any(r["is_async"] for r in ranges if r["name"] != "copy")
    ids = {r["id"] for r in table}
    assert all(r["parent_id"] is None or r["parent_id"] in ids for r in ranges)
    del with_ranges, manual
    gc.collect()
    live = sum(1 for o in gc.get_objects() if type(o) is _engine._ThreadState and o.entries)
    reg = _engine._reg
    assert reg.n_local_states == live
    assert reg.n_callbacks == len(reg.global_entries) + live


def run(
    op: tuple[Any, ...],
    model: Model,
    with_ranges: list[recfn.record_function],
    manual: list[Optional[recfn.RecordFunction]],
) -> None:
    kind = op[0]
    if kind == "enter":
        rf = with_ranges[op[1]]
        if rf not in model.open:
            start(model, rf, rf.__enter__, rf.name)
    elif kind == "exit":
        rf = with_ranges[op[1]]
        if rf in model.open:
            finish(model, rf, lambda: rf.__exit__(None, None, None))
    elif kind == "before":
        old = manual[op[1]]
        if old is None or old not in model.open:
            new = recfn.RecordFunction()
            manual[op[1]] = new
            start(model, new, lambda: new.before(f"m{op[1]}"), f"m{op[1]}")
    elif kind == "end":
        rf = manual[op[1]]
        if rf is not None and rf in model.open:
            finish(model, rf, rf.end)
    elif kind == "drop":
        drop(model, with_ranges, manual, op[1])
    elif kind == "add":
        handle = recfn.add_thread_local_callback(
            RecordFunctionCallback(raising(op[1]), raising(op[2]))
        )
        model.locals.append(Local(handle, True, op[1], op[2]))
    elif kind in ("remove", "disable", "reenable") and model.locals:
        local = model.locals[op[1] % len(model.locals)]
        if kind == "remove":
            recfn.remove_callback(local.handle)
            model.locals.remove(local)
        elif kind == "disable":
            recfn.disable_callback(local.handle)
            local.enabled = False
        else:
            recfn.reenable_callback(local.handle)
            local.enabled = True
    elif kind == "copy":
        before = snapshot()
        in_copy(op[1], copy_action(op[2], model, op[3]))
        if op[2] == "range":
            model.started["copy"] += 1
        assert snapshot() == before


def drop(
    model: Model,
    with_ranges: list[recfn.record_function],
    manual: list[Optional[recfn.RecordFunction]],
    i: int,
) -> None:
    """Forget a started manual range without ending it: collecting it ends it."""
    rf = manual[i]
    if rf is None or rf not in model.open:
        return
    others = with_ranges + [m for m in manual if m is not None and m is not rf]
    if any(o._parent is rf for o in others):
        return  # a child still refers to it: it cannot be collected yet
    model.open.remove(rf)
    model.selected.pop(id(rf))
    manual[i] = None
    del rf
    gc.collect()
