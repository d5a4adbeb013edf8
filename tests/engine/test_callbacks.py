"""Callbacks: registration, handles, filters, sampling, inputs/outputs and failure isolation."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import recfn
from recfn import RecordFunctionCallback, RecordScope


class Log:
    """Records callback invocations as (event, name) pairs."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def start(self, rf: recfn.RecordFunction) -> object:
        self.events.append(("start", rf.name))
        return rf.name + "-ctx"

    def end(self, rf: recfn.RecordFunction, ctx: object) -> None:
        self.events.append(("end", rf.name))

    def callback(self, **options: Any) -> RecordFunctionCallback:
        return RecordFunctionCallback(self.start, self.end, **options)


def test_global_callback_sees_start_and_end_in_order() -> None:
    log = Log()
    recfn.add_global_callback(log.callback())
    with recfn.record_function("outer"), recfn.record_function("inner"):
        pass
    assert log.events == [
        ("start", "outer"),
        ("start", "inner"),
        ("end", "inner"),
        ("end", "outer"),
    ]


def test_start_context_is_handed_to_end() -> None:
    seen: list[object] = []
    recfn.add_global_callback(
        RecordFunctionCallback(lambda rf: {"token": rf.name}, lambda rf, ctx: seen.append(ctx))
    )
    with recfn.record_function("x"):
        pass
    assert seen == [{"token": "x"}]


def test_handles_are_monotonic_and_never_zero() -> None:
    handles = [recfn.add_global_callback(Log().callback()) for _ in range(3)]
    handles.append(recfn.add_thread_local_callback(Log().callback()))
    assert all(h > 0 for h in handles)
    assert handles == sorted(handles) and len(set(handles)) == 4


def test_remove_disable_reenable() -> None:
    log = Log()
    handle = recfn.add_global_callback(log.callback())
    recfn.disable_callback(handle)
    with recfn.record_function("off"):
        pass
    recfn.reenable_callback(handle)
    with recfn.record_function("on"):
        pass
    recfn.remove_callback(handle)
    with recfn.record_function("removed"):
        pass
    assert log.events == [("start", "on"), ("end", "on")]
    assert not recfn.has_callbacks()


@pytest.mark.parametrize(
    "action", [recfn.remove_callback, recfn.disable_callback, recfn.reenable_callback]
)
def test_unknown_handle_warns_and_does_nothing(action: Any) -> None:
    with pytest.warns(UserWarning, match="no such callback"):
        action(987654)


def test_has_and_clear_callbacks() -> None:
    assert not recfn.has_callbacks()
    recfn.add_global_callback(Log().callback())
    assert recfn.has_global_callbacks() and not recfn.has_thread_local_callbacks()
    recfn.add_thread_local_callback(Log().callback())
    assert recfn.has_thread_local_callbacks() and recfn.has_callbacks()
    recfn.clear_thread_local_callbacks()
    assert not recfn.has_thread_local_callbacks() and recfn.has_global_callbacks()
    recfn.add_thread_local_callback(Log().callback())
    recfn.clear_global_callbacks()
    assert not recfn.has_global_callbacks() and recfn.has_thread_local_callbacks()
    recfn.add_global_callback(Log().callback())
    recfn.clear_callbacks()
    assert not recfn.has_callbacks()


def test_thread_local_callback_does_not_run_on_other_threads() -> None:
    log = Log()
    recfn.add_thread_local_callback(log.callback())

    def other() -> None:
        with recfn.record_function("other-thread"):
            pass

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    with recfn.record_function("this-thread"):
        pass
    assert log.events == [("start", "this-thread"), ("end", "this-thread")]


def test_global_callback_runs_on_every_thread() -> None:
    log = Log()
    recfn.add_global_callback(log.callback())
    threads = [
        threading.Thread(target=lambda: recfn.record_function("t").__enter__().end())
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert log.events.count(("start", "t")) == 3


def test_scope_filter() -> None:
    log = Log()
    recfn.add_global_callback(log.callback(scopes={RecordScope.FUNCTION}))
    with recfn.record_function("user"):  # USER_SCOPE: filtered out
        pass
    rf = recfn.RecordFunction(RecordScope.FUNCTION)
    rf.before("fn")
    rf.end()
    assert log.events == [("start", "fn"), ("end", "fn")]


def test_scopes_accept_names_and_reject_garbage() -> None:
    cb = RecordFunctionCallback(scopes=["user_scope", RecordScope.BACKWARD_FUNCTION])
    assert cb.scopes == {RecordScope.USER_SCOPE, RecordScope.BACKWARD_FUNCTION}
    with pytest.raises(ValueError, match="RecordScope"):
        RecordFunctionCallback(scopes=["nope"])


@pytest.mark.parametrize("prob", [-0.1, 1.5])
def test_sampling_prob_out_of_range(prob: float) -> None:
    with pytest.raises(ValueError, match="sampling_prob"):
        RecordFunctionCallback(sampling_prob=prob)


def test_bad_callback_arguments() -> None:
    with pytest.raises(TypeError, match="start must be callable"):
        RecordFunctionCallback(start=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sampling_prob"):
        RecordFunctionCallback(sampling_prob="half")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="RecordFunctionCallback"):
        recfn.add_global_callback(lambda rf: None)  # type: ignore[arg-type]


def _sampled_count(prob: float, n: int, seed: int) -> int:
    log = Log()
    handle = recfn.add_thread_local_callback(log.callback(sampling_prob=prob))
    recfn.set_record_function_seed_for_testing(seed)
    for _ in range(n):
        with recfn.record_function("s"):
            pass
    recfn.remove_callback(handle)
    starts = log.events.count(("start", "s"))
    assert starts == log.events.count(("end", "s"))  # start and end sampled together
    return starts


def test_sampling_statistics_with_fixed_seed() -> None:
    n, prob = 50_000, 0.01
    count = _sampled_count(prob, n, seed=7)
    expected = n * prob
    assert abs(count - expected) < 5 * (expected * (1 - prob)) ** 0.5  # within 5 sigma
    assert _sampled_count(prob, n, seed=7) == count  # reproducible


def test_sampling_zero_and_one() -> None:
    assert _sampled_count(0.0, 1000, seed=1) == 0
    assert _sampled_count(1.0, 1000, seed=1) == 1000


def test_should_run_predicate() -> None:
    allowed = [False]
    log = Log()
    recfn.add_global_callback(log.callback(should_run=lambda: allowed[0]))
    with recfn.record_function("no"):
        pass
    allowed[0] = True
    with recfn.record_function("yes"):
        pass
    assert log.events == [("start", "yes"), ("end", "yes")]


def test_inputs_only_when_needed_and_only_during_start() -> None:
    seen: dict[str, Any] = {}

    def start(rf: recfn.RecordFunction) -> None:
        seen["inputs"] = rf.inputs
        seen["kwinputs"] = rf.kwinputs

    recfn.add_global_callback(RecordFunctionCallback(start, needs_inputs=True))
    with recfn.record_function_fast("op", [1, 2], {"k": 3}) as rf:
        assert rf.needs_inputs
        with pytest.raises(RuntimeError, match="only available inside start callbacks"):
            _ = rf.inputs
    assert seen == {"inputs": [1, 2], "kwinputs": {"k": 3}}


def test_inputs_are_not_kept_when_no_callback_needs_them() -> None:
    seen: list[object] = []
    recfn.add_global_callback(RecordFunctionCallback(lambda rf: seen.append(rf.inputs)))
    with recfn.record_function_fast("op", [1, 2]) as rf:
        assert not rf.needs_inputs
    assert seen == [None]


def test_outputs_reach_end_callbacks_only_when_needed() -> None:
    seen: list[object] = []
    recfn.add_global_callback(
        RecordFunctionCallback(None, lambda rf, ctx: seen.append(rf.outputs), needs_outputs=True)
    )
    with recfn.record_function("op") as rf:
        assert rf.needs_outputs
        rf.set_outputs((42,))
    recfn.clear_callbacks()
    recfn.add_global_callback(RecordFunctionCallback(None, lambda rf, ctx: seen.append(rf.outputs)))
    with recfn.record_function("op") as rf:
        rf.set_outputs((43,))
    assert seen == [(42,), None]


def test_ids_assigned_only_when_needed() -> None:
    handles: list[tuple[int, int]] = []
    recfn.add_global_callback(
        RecordFunctionCallback(
            lambda rf: handles.append((rf.handle, rf.parent_handle)), needs_ids=True
        )
    )
    with recfn.record_function("a"), recfn.record_function("b"):
        pass
    (a, a_parent), (b, b_parent) = handles
    assert a > 0 and b > a and a_parent == 0 and b_parent == a
    recfn.clear_callbacks()
    recfn.add_global_callback(RecordFunctionCallback(lambda rf: handles.append((rf.handle, 0))))
    with recfn.record_function("c"):
        pass
    assert handles[-1] == (0, 0)


def test_raising_callbacks_never_break_the_program(caplog: pytest.LogCaptureFixture) -> None:
    def bad_start(rf: recfn.RecordFunction) -> None:
        raise ValueError("boom in start")

    def bad_end(rf: recfn.RecordFunction, ctx: object) -> None:
        raise KeyError("boom in end")

    def bad_should_run() -> bool:
        raise RuntimeError("boom in should_run")

    log = Log()
    recfn.add_global_callback(RecordFunctionCallback(bad_start))
    recfn.add_global_callback(RecordFunctionCallback(None, bad_end))
    recfn.add_global_callback(RecordFunctionCallback(log.start, should_run=bad_should_run))
    recfn.add_global_callback(log.callback())
    with caplog.at_level(logging.WARNING, logger="recfn"):
        for _ in range(3):
            with recfn.record_function("x"):
                pass
    assert log.events.count(("start", "x")) == 3 and log.events.count(("end", "x")) == 3
    messages = [r.getMessage() for r in caplog.records]
    assert sum("raised in start" in m for m in messages) == 1  # reported once per callback
    assert sum("raised in end" in m for m in messages) == 1
    assert sum("raised in should_run" in m for m in messages) == 1
