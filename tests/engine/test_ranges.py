"""Ranges: record_function (context manager, decorator), RecordFunction, fast ranges, guards."""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from typing import Any

import pytest

import recfn
from recfn import RecordFunctionCallback, RecordScope


class Seen:
    """Collects (name, scope, depth, parent name, is_async) at end of each range."""

    def __init__(self) -> None:
        self.ranges: list[tuple[str, RecordScope, int, str, bool]] = []
        recfn.add_global_callback(RecordFunctionCallback(None, self.end, needs_ids=True))

    def end(self, rf: recfn.RecordFunction, ctx: object) -> None:
        parent = rf.parent.name if rf.parent is not None else ""
        self.ranges.append((rf.name, rf.scope, rf.depth, parent, rf.is_async))


def test_context_manager_nests_and_sets_scope() -> None:
    seen = Seen()
    with recfn.record_function("outer") as outer:
        assert recfn.current_range() is outer
        with recfn.record_function("inner"):
            pass
        assert recfn.current_range() is outer
    assert recfn.current_range() is None
    assert seen.ranges == [
        ("inner", RecordScope.USER_SCOPE, 1, "outer", False),
        ("outer", RecordScope.USER_SCOPE, 0, "", False),
    ]


def test_exception_ends_range_and_propagates_unchanged() -> None:
    seen = Seen()
    error = ValueError("original")
    with pytest.raises(ValueError) as info, recfn.record_function("failing"):
        raise error
    assert info.value is error
    assert [r[0] for r in seen.ranges] == ["failing"]
    assert recfn.current_range() is None


def test_decorator_plain_function_keeps_metadata() -> None:
    seen = Seen()

    @recfn.record_function("decorated")
    def add(a: int, b: int = 2) -> int:
        """Adds."""
        return a + b

    assert add(1) == 3 and add(1, b=5) == 6
    assert add.__name__ == "add" and add.__doc__ == "Adds."
    assert inspect.signature(add) == inspect.signature(add.__wrapped__)  # type: ignore[attr-defined]
    assert [r[0] for r in seen.ranges] == ["decorated", "decorated"]


@recfn.record_function("module level")
def module_level(x: int) -> int:
    return x + 1


class Stop(BaseException):
    pass


def test_decorated_functions_bind_as_methods_and_keep_their_arguments() -> None:
    seen = Seen()

    class Model:
        scale = 3

        @recfn.record_function("method")
        def forward(self, x: int, *, bias: int = 0) -> int:
            return x * self.scale + bias

        @staticmethod
        @recfn.record_function("static")
        def helper(x: int) -> int:
            return -x

        @classmethod
        @recfn.record_function("class")
        def make(cls, x: int) -> tuple[type, int]:
            return cls, x

    model = Model()
    assert model.forward(2) == 6 and model.forward(2, bias=1) == 7
    assert Model.forward(model, 1) == 3  # unbound through the class, as a function
    assert model.helper(4) == -4 and Model.make(5) == (Model, 5)
    bound = model.forward
    assert bound.__self__ is model and bound(x=1) == 3
    assert [r[0] for r in seen.ranges] == ["method"] * 3 + ["static", "class", "method"]

    class Callable:
        def __call__(self, *a: object, **kw: object) -> tuple[object, object]:
            return a, kw

    wrapped = recfn.record_function("object")(Callable())
    assert wrapped(1, k=2) == ((1,), {"k": 2})
    assert seen.ranges[-1][0] == "object"


def test_decorated_functions_pickle_and_weakref_as_functions_do() -> None:
    import pickle
    import weakref

    assert pickle.loads(pickle.dumps(module_level)) is module_level
    assert weakref.ref(module_level)() is module_level
    assert module_level.__module__ == __name__ and module_level.__qualname__ == "module_level"
    assert module_level(1) == 2


def test_decorator_end_raising_keeps_the_functions_exception_as_context() -> None:
    handled: list[object] = []

    def end(rf: recfn.RecordFunction, ctx: object) -> None:
        handled.append(sys.exc_info()[1])  # as in a finally: the function's exception
        raise Stop("from end")

    recfn.add_global_callback(RecordFunctionCallback(None, end))

    @recfn.record_function("raises twice")
    def boom() -> None:
        raise KeyError("from the function")

    with pytest.raises(Stop) as info:
        boom()
    assert isinstance(info.value.__context__, KeyError)
    assert handled == [info.value.__context__]

    @recfn.record_function("returns")
    def fine() -> int:
        return 1

    with pytest.raises(Stop) as info:
        fine()
    assert info.value.__context__ is None


def test_decorator_async_function() -> None:
    seen = Seen()

    @recfn.record_function("coro")
    async def work(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    assert inspect.iscoroutinefunction(work)
    assert asyncio.run(work(21)) == 42
    assert [r[0] for r in seen.ranges] == ["coro"]


def test_decorator_propagates_exceptions() -> None:
    seen = Seen()

    @recfn.record_function("raises")
    def boom() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError):
        boom()
    assert [r[0] for r in seen.ranges] == ["raises"]


def test_async_with() -> None:
    seen = Seen()

    async def main() -> None:
        async with recfn.record_function("async-with"):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert [r[0] for r in seen.ranges] == ["async-with"]


def test_nothing_active_means_inactive_range() -> None:
    with recfn.record_function("idle") as rf:
        assert not rf.is_active
        assert recfn.current_range() is None


def test_record_function_bad_input() -> None:
    with pytest.raises(TypeError, match="name must be a str"):
        recfn.record_function(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="args must be a str"):
        recfn.record_function("x", args=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a decorator"):
        recfn.RecordFunction()(lambda: None)


@pytest.mark.parametrize(
    ("make", "kind", "name", "args"),
    [
        (lambda: recfn.record_function("p"), recfn.record_function, "p", None),
        (lambda: recfn.record_function("p", "a=1"), recfn.record_function, "p", "a=1"),
        (lambda: recfn.record_function("p", None), recfn.record_function, "p", None),
        (lambda: recfn.record_function(name="k"), recfn.record_function, "k", None),
        (lambda: recfn.record_function("k", args="b"), recfn.record_function, "k", "b"),
        (lambda: recfn.record_function(*["s", "c"]), recfn.record_function, "s", "c"),
        (lambda: recfn.record_function_fast("f"), recfn.record_function_fast, "f", None),
        (
            lambda: recfn.record_function_fast("f", (1,), {"a": 2}),
            recfn.record_function_fast,
            "f",
            None,
        ),
        (
            lambda: recfn.record_function_fast("f", keyword_values={"a": 2}),
            recfn.record_function_fast,
            "f",
            None,
        ),
    ],
)
def test_ranges_are_made_alike_by_every_call_form(
    make: Any, kind: type, name: str, args: object
) -> None:
    # Compiled builds make positional calls natively (_ccall.install_constructor) and the rest
    # through type.__call__: both run __init__'s work.
    rf = make()
    assert type(rf) is kind
    assert (rf.name, rf.args, rf.is_active) == (name, args, False)
    seen = Seen()
    with rf:
        pass
    assert [r[0] for r in seen.ranges] == [name]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: recfn.record_function(), "name"),
        (lambda: recfn.record_function("x", "a", "b"), "at most 2|takes from 2 to 3"),
        (lambda: recfn.record_function("x", nope=1), "nope"),
        (lambda: recfn.record_function(None), "name must be a str"),
        (lambda: recfn.record_function("x", 1.5), "args must be a str"),
        (lambda: recfn.record_function_fast("x", (), {}, 4), "at most 3|takes from 2 to 4"),
        (lambda: recfn.record_function_fast("x", 5), "input_values"),
    ],
)
def test_bad_constructor_calls_raise_type_error(make: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        make()


def test_record_function_args_reach_callbacks() -> None:
    seen: list[object] = []
    recfn.add_global_callback(
        RecordFunctionCallback(lambda rf: seen.append((rf.args, rf.inputs)), needs_inputs=True)
    )
    with recfn.record_function("with-args", args="lr=0.1"):
        pass
    assert seen == [("lr=0.1", "lr=0.1")]


def test_record_function_fast_validation() -> None:
    with pytest.raises(TypeError, match="name"):
        recfn.record_function_fast(b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="input_values"):
        recfn.record_function_fast("x", input_values={"a": 1})
    with pytest.raises(TypeError, match="keyword_values"):
        recfn.record_function_fast("x", keyword_values=[1])
    with recfn.record_function_fast("x", (1,), {"a": 1}) as rf:
        assert not rf.is_active  # nothing listens: does nothing


def test_manual_record_function_lifecycle() -> None:
    seen = Seen()
    rf = recfn.RecordFunction(RecordScope.BACKWARD_FUNCTION)
    assert rf.is_active and rf.scope is RecordScope.BACKWARD_FUNCTION
    rf.forward_thread_id = 7
    rf.before("backward", sequence_nr=3)
    assert rf.seq_nr == 3 and rf.handle != 0 and rf.thread_id == recfn.current_thread_id()
    with pytest.raises(RuntimeError, match="already started"):
        rf.before("again")
    rf.end()
    with pytest.raises(RuntimeError, match="already ended"):
        rf.end()
    assert seen.ranges == [("backward", RecordScope.BACKWARD_FUNCTION, 0, "", False)]


def test_manual_record_function_bad_input() -> None:
    with pytest.raises(ValueError, match="RecordScope"):
        recfn.RecordFunction(99)
    rf = recfn.RecordFunction()
    with pytest.raises(TypeError, match="name must be a str"):
        rf.before(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence_nr"):
        rf.before("x", sequence_nr="1")  # type: ignore[arg-type]


def test_entering_the_same_range_twice_raises_but_reuse_works() -> None:
    seen = Seen()
    rf = recfn.record_function("reused")
    with rf, pytest.raises(RuntimeError, match="already entered"):
        rf.__enter__()
    for _ in range(2):
        with rf:
            pass
    assert [r[0] for r in seen.ranges] == ["reused"] * 3


def test_thread_ids_are_logical_and_distinct() -> None:
    ids: list[int] = []

    def record() -> None:
        ids.append(recfn.current_thread_id())

    threads = [threading.Thread(target=record) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids.append(recfn.current_thread_id())
    assert len(set(ids)) == 5 and all(i > 0 for i in ids)


def test_ranges_ended_on_another_thread_are_async() -> None:
    seen = Seen()
    rf = recfn.record_function("cross-thread").__enter__()
    thread = threading.Thread(target=rf.end)
    thread.start()
    thread.join()
    assert seen.ranges == [("cross-thread", RecordScope.USER_SCOPE, 0, "", True)]
    assert (
        recfn.current_range() is None
    )  # an ended range is current nowhere, not even where it began


def test_guards_nest_and_restore() -> None:
    seen = Seen()
    assert recfn.is_record_function_enabled()
    with recfn.DisableRecordFunctionGuard():
        assert not recfn.is_record_function_enabled()
        with recfn.record_function("off"):
            pass
        with recfn.RecordFunctionGuard(True):
            assert recfn.is_record_function_enabled()
            with recfn.record_function("on"):
                pass
        assert not recfn.is_record_function_enabled()
    assert recfn.is_record_function_enabled()
    recfn.enable_record_function(False)
    with recfn.record_function("disabled"):
        pass
    recfn.enable_record_function(True)
    assert [r[0] for r in seen.ranges] == ["on"]


def test_enabled_flag_is_per_thread() -> None:
    recfn.enable_record_function(False)
    flags: list[bool] = []
    thread = threading.Thread(target=lambda: flags.append(recfn.is_record_function_enabled()))
    thread.start()
    thread.join()
    assert flags == [True] and not recfn.is_record_function_enabled()


def test_callback_list_changes_during_a_range_are_safe() -> None:
    log: list[str] = []
    handle = recfn.add_global_callback(
        RecordFunctionCallback(lambda rf: log.append("s"), lambda rf, c: log.append("e"))
    )
    with recfn.record_function("x"):
        recfn.remove_callback(handle)  # the range started with it: it still sees the end
    with recfn.record_function("y"):
        pass
    assert log == ["s", "e"]


def test_repr_mentions_name_and_state() -> None:
    Seen()
    with recfn.record_function("shown") as rf:
        assert "shown" in repr(rf) and "started" in repr(rf)


@pytest.mark.parametrize("value", [None, "x", 1.5])
def test_handle_functions_reject_non_ints(value: Any) -> None:
    with pytest.raises(TypeError, match="handle must be an int"):
        recfn.remove_callback(value)


def test_reused_fast_range_hands_its_inputs_at_every_entry() -> None:
    seen: list[object] = []
    recfn.add_global_callback(
        RecordFunctionCallback(lambda rf: seen.append(rf.inputs), needs_inputs=True)
    )
    rf = recfn.record_function_fast("op", [1, 2])
    for _ in range(2):
        with rf:
            pass
    assert seen == [[1, 2], [1, 2]]
