"""The C hook's TSC clock: rows hold TSC values that take() converts to monotonic ns.

``interpolate`` is the conversion on its own (anchors: exact (tsc, ns) pairs); the profiles
check that traced calls, recorded ranges and marks nest as their clocks say, across many
anchor intervals.
"""

from __future__ import annotations

import bisect
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from instrument_helpers import make_module
from tracer_clocks import native_clock

import recfn
from recfn.capture import _tracer

pytestmark = [
    pytest.mark.skipif(
        not _tracer.native_available(), reason="recfn.native._ctrace is not built (pure install)"
    ),
    pytest.mark.usefixtures("quiet_gc"),  # counts of traced calls: no other library's gc callback
]

LIMIT = 1 << 62  # anchors lie below: clock values of centuries


def interpolate(anchors: list[tuple[int, int]], values: list[int]) -> list[int]:
    packed = b"".join(struct.pack("=qq", *a) for a in anchors)
    out = _tracer._NATIVE.interpolate(packed, struct.pack(f"={len(values)}q", *values))
    return list(struct.unpack(f"={len(values)}q", out))


def reference(anchors: list[tuple[int, int]], v: int) -> int:
    """Linear between the anchors around ``v`` (rounded down), clamped to the first and last."""
    if v == 0:
        return 0
    ticks = [a[0] for a in anchors]
    if v <= ticks[0]:
        return anchors[0][1]
    if v >= ticks[-1]:
        return anchors[-1][1]
    i = bisect.bisect_right(ticks, v) - 1
    (t0, n0), (t1, n1) = anchors[i], anchors[i + 1]
    return n0 + (v - t0) * (n1 - n0) // (t1 - t0)


@st.composite
def anchors_and_values(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[int]]:
    ticks = sorted(draw(st.sets(st.integers(1, LIMIT - 1), min_size=1, max_size=12)))
    ns = sorted(draw(st.lists(st.integers(0, LIMIT - 1), min_size=len(ticks), max_size=len(ticks))))
    anchors = list(zip(ticks, ns))
    near = st.sampled_from(ticks).flatmap(lambda t: st.integers(t - 3, t + 3))
    values = draw(st.lists(st.one_of(near, st.integers(-(1 << 63), (1 << 63) - 1)), max_size=40))
    return anchors, [*values, 0]


@settings(max_examples=300, deadline=None)
@given(anchors_and_values())
def test_interpolation_is_monotone_exact_at_anchors_and_within_brackets(case) -> None:
    anchors, values = case
    out = interpolate(anchors, values)
    assert out == [reference(anchors, v) for v in values]
    assert interpolate(anchors, [t for t, _ in anchors]) == [n for _, n in anchors]
    assert out[-1] == 0  # an open call's end stays open
    pairs = sorted((v, ns) for v, ns in zip(values, out) if v != 0)
    assert all(a[1] <= b[1] for a, b in zip(pairs, pairs[1:]))
    for v, ns in pairs:
        i = bisect.bisect_right([t for t, _ in anchors], v)
        low = anchors[max(i - 1, 0)][1]
        high = anchors[min(i, len(anchors) - 1)][1]
        assert low <= ns <= high


@pytest.mark.parametrize(
    "anchors",
    [[], [(2, 5), (2, 6)], [(1, 5), (0, 6)], [(1, 6), (2, 5)], [(1, 0), (LIMIT, 1)], [(-1, 0)]],
)
def test_interpolate_refuses_anchors_out_of_order_or_range(anchors) -> None:
    with pytest.raises(ValueError, match="anchors"):
        interpolate(anchors, [1])


WORK = """
import recfn

def leaf(x):
    recfn.mark("m")
    return x

def inner(i):
    with recfn.record_function("inside"):
        leaf(i)
    return leaf(i)

def outer(i):
    with recfn.record_function("around"):
        inner(i)
    return leaf(i)
"""


def test_calls_ranges_and_marks_nest_across_many_anchors(monkeypatch) -> None:
    """Traced calls around and inside recorded ranges, with a mark (the recorder's own clock
    read) inside every traced leaf: run for 2 ms, many times the anchors' interval."""
    native_clock(monkeypatch, "tsc")
    work = make_module("tscwork", WORK)
    with recfn.profile(trace_calls=True, trace_include=["tscwork"]) as prof:
        assert prof._tracer.native.tsc
        calls = 0
        deadline = time.perf_counter_ns() + 2_000_000
        while time.perf_counter_ns() < deadline:
            work.outer(calls)
            calls += 1
    rows = [r for r in prof.table.to_pylist() if not r["name"].startswith("__")]
    by_id = {r["id"]: r for r in rows}
    lines = []
    for r in rows:
        parent = by_id.get(r["parent_id"])
        if parent is not None:
            assert parent["start_ns"] <= r["start_ns"] <= r["end_ns"] <= parent["end_ns"], r
        assert r["depth"] == (parent["depth"] + 1 if parent else 0)
        lines.append("  " * r["depth"] + r["name"])
    once = [
        "tscwork::outer",
        "  around",
        "    tscwork::inner",
        "      inside",
        "        tscwork::leaf",
        "          m",
        "      tscwork::leaf",
        "        m",
        "  tscwork::leaf",
        "    m",
    ]
    assert lines == once * calls


def test_clock_gettime_when_asked(monkeypatch) -> None:
    native_clock(monkeypatch, "clock_gettime")
    with recfn.profile(trace_calls=True, trace_include=["tscwork"]) as prof:
        assert not prof._tracer.native.tsc
