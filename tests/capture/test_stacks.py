"""Stacks captured as raw frames and symbolized later match the frames formatted at capture."""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn


def formatted_stack() -> list[str]:
    """The caller's stack formatted the way the profiler always did, outermost first."""
    frames: list[str] = []
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module == "recfn" or module.startswith("recfn.") or module == "contextlib"):
            code = frame.f_code
            frames.append(f"{code.co_filename}:{frame.f_lineno}({code.co_name})")
        frame = frame.f_back
    frames.reverse()
    return frames


def both() -> tuple[recfn.CapturedTraceback, list[str]]:
    return recfn.gather_traceback(), formatted_stack()


def nested(depth: int, leaves: int) -> list[tuple[recfn.CapturedTraceback, list[str]]]:
    if depth == 0:
        return [both() for _ in range(leaves)]
    if depth % 3 == 0:  # a second call site at this level: the shared prefix must not leak
        return nested(depth - 1, leaves) + nested(depth - 1, 1)
    return nested(depth - 1, leaves)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(1, 3)), min_size=1, max_size=6))
def test_symbolized_stacks_match_frames_formatted_at_capture(
    shapes: list[tuple[int, int]],
) -> None:
    captured = [pair for depth, leaves in shapes for pair in nested(depth, leaves)]
    symbolized = recfn.symbolize_tracebacks([tb for tb, _ in captured])
    assert symbolized == [expected for _, expected in captured]


def test_generator_resumed_from_another_caller_gets_that_callers_stack() -> None:
    def gen():  # type: ignore[no-untyped-def]
        while True:
            yield both()

    g = gen()

    def first():  # type: ignore[no-untyped-def]
        return next(g)

    def second():  # type: ignore[no-untyped-def]
        return next(g)

    pairs = [first(), second(), first()]
    assert recfn.symbolize_tracebacks([tb for tb, _ in pairs]) == [e for _, e in pairs]
    assert any("second" in frame for frame in pairs[1][1])


def test_threads_capture_their_own_stacks() -> None:
    out: list[tuple[recfn.CapturedTraceback, list[str]]] = []

    def worker() -> None:
        out.append(both())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    here = both()
    symbolized = recfn.symbolize_tracebacks([out[0][0], here[0]])
    assert symbolized == [out[0][1], here[1]]


def test_profile_with_stack_records_the_symbolized_stack_of_each_range() -> None:
    expected: list[list[str]] = []

    def leaf() -> None:
        with recfn.record_function("leaf"):
            expected.append(formatted_stack())

    def middle(n: int) -> None:
        for _ in range(n):
            leaf()
        with recfn.record_function("middle"):
            expected.append(formatted_stack())

    with recfn.profile(with_stack=True) as prof:
        middle(3)
        middle(1)
    rows = [r for r in prof.table.to_pylist() if r["name"] in ("leaf", "middle")]
    # the innermost frame was formatted one line below the with-statement the range records
    assert [r["stack"][:-1] for r in rows] == [e[:-1] for e in expected]
    for row, e in zip(rows, expected):
        _file, line = e[-1].split("(")[0].rsplit(":", 1)
        assert row["stack"][-1] == e[-1].replace(f":{line}(", f":{int(line) - 1}(")


def test_symbolize_tracebacks_rejects_what_is_not_a_traceback() -> None:
    with pytest.raises(TypeError, match="CapturedTraceback"):
        recfn.symbolize_tracebacks(["file.py:1(f)"])
    with pytest.raises(TypeError, match="list of CapturedTraceback"):
        recfn.symbolize_tracebacks(recfn.gather_traceback())
