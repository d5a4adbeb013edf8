"""The range classes' call protocol: what compiled builds do natively (``recfn.native._ccall``: bound
``__enter__``/``__exit__`` from a free list) behaves as Python's bound methods do."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn import RecordFunctionCallback


def ended_names() -> list[str]:
    names: list[str] = []
    recfn.add_global_callback(RecordFunctionCallback(None, lambda rf, ctx: names.append(rf.name)))
    return names


def test_bound_methods_call_the_range_they_were_bound_to() -> None:
    names = ended_names()
    outer, inner = recfn.record_function("outer"), recfn.record_function("inner")
    exit_outer = outer.__exit__
    assert exit_outer.__self__ is outer and exit_outer.__name__ == "__exit__"
    assert outer.__enter__() is outer
    with inner:  # binds (and frees) other methods meanwhile
        pass
    exit_outer(None, None, None)
    assert names == ["inner", "outer"]


def test_methods_called_through_the_class_take_their_object_first() -> None:
    names = ended_names()
    rf = recfn.record_function_fast("through the class")
    assert recfn.record_function.__enter__(rf) is rf
    recfn.record_function.__exit__(rf, None, None, None)
    assert names == ["through the class"]
    with pytest.raises(TypeError):
        recfn.record_function.__exit__()  # type: ignore[call-arg]


def test_deep_nesting_outgrows_any_free_list() -> None:
    names = ended_names()

    def nest(depth: int) -> None:
        if depth:
            with recfn.record_function(f"level {depth}"):
                nest(depth - 1)

    nest(150)
    assert names == [f"level {d}" for d in range(1, 151)]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["bind", "drop", "check"]), st.integers(0, 7)), max_size=80)
)
def test_every_bound_method_keeps_its_own_object(steps: list[tuple[str, int]]) -> None:
    # The free list reuses only bound methods nobody holds: each one held keeps its object.
    ranges = [recfn.record_function(f"r{i}") for i in range(8)]
    held: list[tuple[object, object]] = []
    for action, i in steps:
        if action == "bind":
            method = ranges[i].__enter__ if i % 2 else ranges[i].__exit__
            held.append((method, ranges[i]))
        elif action == "drop" and held:
            held.pop(i % len(held))
        for method, owner in held:
            assert method.__self__ is owner  # type: ignore[attr-defined]
    gc.collect()
    for method, owner in held:
        assert method.__self__ is owner  # type: ignore[attr-defined]
