"""recfn.native._crange.Rows keeps rows exactly, as recfn.capture._recorder._Chunk does.

The same rows written into a Rows (16 bytes a row, decoded in C by ``Rows.decode``) and into
_Chunks (24 bytes a row, decoded by ``recfn.capture._table.decode_chunk``) decode to the same
columns: escapes of big and negative gaps and spans, ids that do not follow, names and depths
past a label's limits, chunk boundaries. Admission, interning and bad arguments are checked on
the Rows directly.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recfn
from recfn.capture._recorder import _Chunk
from recfn.capture._table import decode_chunk, decode_rows
from recfn.engine import ranges as _engine
from recfn.native.constants import CHUNK_ROWS, ESCAPE_LIMIT

crange: Any = _engine._crange
pytestmark = pytest.mark.skipif(
    crange is None, reason="recfn.native._crange is not built (pure install)"
)

TID = 3
EVENTS, DROPPED, STOPPED, EPOCH = range(4)


def make_rows(max_events: int = 1 << 40, offset: int = 0) -> tuple[Any, array[int], dict[str, int]]:
    gate = array("q", [0, 0, 0, 0])
    names: dict[str, int] = {}

    def intern(name: str) -> int:
        names[name] = len(names)
        return names[name]

    args = array("q", [0, 0, 0])
    return Opened(crange.Rows(gate, max_events, offset, names, intern, args), args), gate, names


class Opened:
    """A Rows with ``open``/``close`` as the engine's fast path calls them: ``open_row`` reads
    the row's numbers from the Rows' ``row_args``, ``close_row`` finds the row by its key."""

    def __init__(self, rows: Any, args: array[int]) -> None:
        self.rows = rows
        self.args = args

    def open(self, key: object, seq: Any, parent: int, meta: int, name: Any) -> bool:
        self.args[0], self.args[1], self.args[2] = seq, parent, meta
        return bool(crange.open_row(self.rows, key, name))

    def close(self, key: object, bits: int) -> None:
        crange.close_row(self.rows, key, bits)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rows, name)

    def __len__(self) -> int:
        return len(self.rows)


def decoded(chunks: list[Any]) -> dict[str, np.ndarray]:
    parts = [decode_chunk(chunk, TID) for chunk in chunks]
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def native(rows: Any) -> dict[str, np.ndarray]:
    return decode_rows(getattr(rows, "rows", rows), TID)


def write_both(events: list[tuple[int, int, int, int, int, int]]) -> tuple[Any, list[_Chunk]]:
    """(rid, parent, start, end or 0, name, meta) rows into a Rows and into _Chunks."""
    rows, _, _ = make_rows()
    chunks: list[_Chunk] = []
    for i, (rid, parent, start, end, name, meta) in enumerate(events):
        if i % CHUNK_ROWS == 0:
            chunks.append(_Chunk(CHUNK_ROWS))
        local = chunks[-1].add(rid, parent, start, name, meta)
        row = rows.add(rid, parent, start, name, meta)
        assert row == i
        if end:
            chunks[-1].set_end(local, start, end)
            rows.set_end(row, start, end)
    return rows, chunks


def assert_same(events: list[tuple[int, int, int, int, int, int]]) -> None:
    rows, chunks = write_both(events)
    assert len(rows) == len(events)
    assert len(rows) == sum(len(c.seqs) for c in chunks)
    from_rows, vecs = native(rows), decoded(chunks)
    assert from_rows.keys() == vecs.keys()
    for key in from_rows:
        np.testing.assert_array_equal(from_rows[key], vecs[key], err_msg=key)


BASE = 1_700_000_000_000_000_000


def test_escaped_gaps_and_spans_decode_like_chunks() -> None:
    big = ESCAPE_LIMIT
    starts = [BASE, BASE + 5, BASE + 5 + big, BASE + 4 + big, BASE - 10, BASE + 3 * big]
    ends = [BASE + 100, 0, BASE + 5 + 2 * big, BASE + 3 + big, BASE - 10, BASE + 3 * big + 7]
    events = [
        (TID << 32 | i + 1, (TID << 32 | i) if i else 0, s, e, i % 2, i << 8)
        for i, (s, e) in enumerate(zip(starts, ends))
    ]
    assert_same(events)


def test_rows_across_chunk_boundaries_decode_like_chunks() -> None:
    n = 2 * CHUNK_ROWS + 5
    events = [(i + 1, i, BASE + 10 * i, BASE + 10 * i + 3, 0, 0) for i in range(n)]
    rows, chunks = write_both(events)
    assert len(rows) == 2 * CHUNK_ROWS + 5 and len(chunks) == 3
    assert_same(events)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-(1 << 33), 1 << 33),  # gap to the previous start
            st.one_of(st.just(None), st.integers(-5, 1 << 33)),  # duration, None: open
            st.integers(0, (1 << 40)),  # id (its low 32 bits are kept)
        ),
        min_size=1,
        max_size=40,
    )
)
def test_random_rows_decode_like_chunks(spec: list[tuple[int, Any, int]]) -> None:
    start = BASE
    events = []
    for i, (gap, duration, rid) in enumerate(spec):
        start += gap
        end = 0 if duration is None or start + duration == 0 else start + duration
        events.append((rid, rid // 2, start, end, i, (i % 4) << 8))
    assert_same(events)


def test_open_and_close_admit_time_and_count_like_the_recorder() -> None:
    rows, gate, names = make_rows(max_events=3, offset=1000)
    a, b, c, d = object(), object(), object(), object()
    assert rows.open(a, 1, 0, 0, "a") is True
    rows.open(b, 2, 1, 1 << 8, "b")
    assert len(rows) == 2
    assert names == {"a": 0, "b": 1}
    assert list(gate) == [2, 0, 0, 2]
    rows.close(b, 1 << 6)
    rows.close(b, 0)  # twice: nothing
    rows.close(d, 0)  # unknown: nothing
    assert gate[EPOCH] == 3
    assert rows.open(c, 3, 0, 0, "a") is True
    assert rows.open(d, 4, 0, 0, "a") is False  # max_events reached
    assert list(gate[:2]) == [3, 1]
    rows.close(a, 0)  # out of order: found below the top
    gate[STOPPED] = 1
    rows.close(c, 0)  # stopped: nothing
    assert rows.open(d, 5, 0, 0, "a") is False
    assert list(gate) == [3, 1, 1, 5]
    cols = native(rows)
    assert list(cols["name"]) == [0, 1, 0]
    assert list(cols["id"] & 0xFFFFFFFF) == [1, 2, 3]
    assert list(cols["parent_id"]) == [0, TID << 32 | 1, 0]
    assert list(cols["meta"]) == [0, (1 << 8) | (1 << 6), 0]
    ends = cols["end_ns"]
    assert ends[0] >= ends[1] > 0 and ends[2] == 0  # the third stayed open
    assert cols["start_ns"][0] > 1000


def test_open_row_reads_its_numbers_from_row_args() -> None:
    gate = array("q", [0, 0, 0, 0])
    row_args = array("q", [7, 5, (3 << 8) | 1])
    rows = crange.Rows(gate, 10, 0, {"x": 0}, len, row_args)
    assert crange.open_row(rows, None, "x") is True
    row_args[0] = (1 << 40) | 8  # only the low 32 bits are kept
    assert crange.open_row(rows, None, "x") is True
    row_args[2] = 1 << 40
    with pytest.raises(ValueError, match="int32"):
        crange.open_row(rows, None, "x")
    cols = native(rows)
    assert list(cols["id"] & 0xFFFFFFFF) == [7, 8]
    assert list(cols["parent_id"]) == [TID << 32 | 5] * 2
    assert list(cols["meta"]) == [(3 << 8) | 1] * 2


def test_close_finds_the_innermost_row_of_a_key() -> None:
    rows, _, _ = make_rows()
    key = object()
    rows.open(key, 1, 0, 0, "outer")
    rows.open(key, 2, 1, 1 << 8, "inner")  # the same key again (a reused object)
    rows.close(key, 0)
    ends = native(rows)["end_ns"]
    assert ends[0] == 0 and ends[1] > 0


def test_or_meta_sets_bits() -> None:
    rows, _, _ = make_rows()
    rows.add(1, 0, BASE, 0, 5 << 8)
    rows.or_meta(0, 1 << 6)
    assert native(rows)["meta"][0] == (5 << 8) | (1 << 6)


def test_ids_that_skip_wrap_or_repeat_and_wide_labels_decode_like_chunks() -> None:
    """Ids are kept by the row order: those that do not follow the previous row's are listed;
    names and depths past a label's limits are kept whole, flags set afterwards included."""
    ids = [5, 6, 7, 9, 9, 3, 0xFFFFFFFF, 1 << 32, (1 << 32) + 1, 2, 3]
    names = [0, 65534, 65535, 70000, 1, 2, 0x7FFFFFFF, 3, 65535, 0, 1]
    depths = [0, 254, 255, 3, 1000, 0, 2, 255, 1, 0x7FFFFF, 4]
    events = [
        (TID << 32 | rid, 0, BASE + 10 * i, BASE + 10 * i + 5, name, (depth << 8) | (i % 4))
        for i, (rid, name, depth) in enumerate(zip(ids, names, depths))
    ]
    rows, chunks = write_both(events)
    for row in range(len(events)):
        rows.or_meta(row, 1 << 6)
        chunks[0].meta[row] = chunks[0].meta[row] | (1 << 6)
    from_rows, vecs = native(rows), decoded(chunks)
    for key in from_rows:
        np.testing.assert_array_equal(from_rows[key], vecs[key], err_msg=key)
    assert list(from_rows["name"]) == names
    assert list(from_rows["meta"] >> 8) == depths


def test_or_meta_and_close_refuse_bits_outside_the_flags() -> None:
    rows, _, _ = make_rows()
    key = object()
    rows.open(key, 1, 0, 0, "a")
    with pytest.raises(ValueError, match="flags"):
        rows.or_meta(0, 1 << 8)
    with pytest.raises(ValueError, match="flags"):
        rows.close(key, -1)


def test_decode_refuses_columns_of_the_wrong_size_or_type() -> None:
    rows, _ = write_both([(i + 1, 0, BASE + i, BASE + i, 0, 0) for i in range(3)])
    types = (np.int64,) * 4 + (np.int32,) * 2 + (np.int8, np.int8, np.bool_)
    out = tuple(np.empty(3, t) for t in types)
    rows.decode(out, TID << 32)
    assert list(out[0]) == [(TID << 32) | (i + 1) for i in range(3)]
    with pytest.raises(ValueError, match="end_ns must be 3 int64 values"):
        rows.decode(out[:3] + (np.empty(2, np.int64),) + out[4:], 0)
    with pytest.raises(ValueError, match="name must be 3 int32 values"):
        rows.decode(out[:4] + (np.empty(3, np.float32),) + out[5:], 0)
    with pytest.raises(ValueError, match="low 32 bits"):
        rows.decode(out, 1)
    with pytest.raises(TypeError):
        rows.decode(out[:8], 0)


def test_empty_rows_decode_to_no_rows() -> None:
    rows, _, _ = make_rows()
    assert len(rows) == 0 and all(len(v) == 0 for v in native(rows).values())


def test_bad_arguments_raise_type_or_value_errors() -> None:
    names: dict[str, int] = {}
    gate = array("q", [0, 0, 0, 0])
    with pytest.raises(TypeError):
        crange.Rows(object(), 1, 0, names, len)
    with pytest.raises(ValueError, match="gate"):
        crange.Rows(bytes(32), 1, 0, names, len)  # not int64
    with pytest.raises(ValueError, match="gate"):
        crange.Rows(array("q", [0, 0]), 1, 0, names, len)
    with pytest.raises(TypeError, match="name_ids"):
        crange.Rows(gate, 1, 0, [], len)
    with pytest.raises(TypeError, match="intern"):
        crange.Rows(gate, 1, 0, names, 3)
    with pytest.raises(RuntimeError):
        crange.Rows.__new__(crange.Rows).add(1, 0, 0, 0, 0)  # never initialised
    args = array("q", [1, 0, 0])
    bare = crange.Rows(gate, 10, 0, names, lambda name: "not an id", args)
    rows = Opened(bare, args)
    with pytest.raises(TypeError, match="name"):
        rows.open(None, 1, 0, 0, b"bytes")
    with pytest.raises(TypeError):
        rows.open(None, 1, 0, 0, "x")  # the intern callable returned no int
    with pytest.raises(TypeError, match="takes 3"):
        crange.open_row(bare, None)
    with pytest.raises(ValueError, match="bits"):
        rows.close(None, 1 << 40)
    rows = crange.Rows(gate, 10, 0, names, len)
    with pytest.raises(ValueError, match="int64"):
        rows.add(1 << 70, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="int32"):
        rows.add(1, 0, 0, 0, 1 << 40)
    with pytest.raises(ValueError, match="name_id"):
        rows.add(1, 0, 0, -1, 0)
    with pytest.raises(ValueError, match="row"):
        rows.set_end(0, 0, 1)  # no rows yet
    with pytest.raises(ValueError, match="row"):
        rows.or_meta(-1, 1)
    with pytest.raises(TypeError, match="Rows"):
        crange.open_row(object(), None, "x")
    with pytest.raises(ValueError, match="row_args"):
        crange.open_row(rows, None, "x")  # made without row_args
    with pytest.raises(ValueError, match="row_args"):
        crange.Rows(gate, 1, 0, names, len, array("q", [0]))
    with pytest.raises(TypeError, match="Rows"):
        crange.close_row(None, None, 0)
    with pytest.raises(TypeError, match="takes 3"):
        crange.close_row(rows, None)

    def failing(name: str) -> int:
        raise LookupError(name)

    args = array("q", [1, 0, 0])
    with pytest.raises(LookupError):
        Opened(crange.Rows(gate, 10, 0, {}, failing, args), args).open(None, 1, 0, 0, "new")


def test_thread_is_none_until_the_engine_knows_the_thread() -> None:
    import threading

    td = _engine._thread_data()
    assert crange.thread() is td
    seen: list[object] = []
    t = threading.Thread(target=lambda: seen.append(crange.thread()))
    t.start()
    t.join()
    assert seen == [None]  # that thread never made its engine data

    import asyncio

    async def in_loop() -> tuple[object, int]:
        return crange.thread(), td.row_args[_engine.ROW_ARGS_LOOP]

    assert asyncio.run(in_loop()) == (td, 1)  # a running loop: nest in the task's frames
    assert crange.thread() is td
    assert td.row_args[_engine.ROW_ARGS_LOOP] == 0


def test_a_thread_whose_state_is_cleared_is_forgotten_before_its_data_is_released() -> None:
    """A thread-local's finalizer that runs a range while the ending thread's state is cleared
    finds the fast path's cache either still holding the thread's data or empty, never
    freed: ranges in it record (or take the slow path) without a crash."""
    import threading

    class RangeAtExit:
        def __del__(self) -> None:
            with recfn.record_function("at thread exit"):
                pass

    held = threading.local()

    def work() -> None:
        with recfn.record_function("in thread"):
            held.value = RangeAtExit()

    with recfn.profile() as prof:
        for _ in range(20):
            t = threading.Thread(target=work)
            t.start()
            t.join()
    names = prof.table.column("name").to_pylist()
    assert names.count("in thread") == 20
    assert crange.thread() is _engine._thread_data()


def test_in_loop_answers_as_asyncio_does_in_loops_threads_and_forked_children() -> None:
    import asyncio
    import os

    def asked() -> tuple[bool, bool]:
        from asyncio import events

        return crange.in_loop(), events._get_running_loop() is not None

    async def in_loop() -> list[tuple[bool, bool]]:
        seen = [asked()]
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: asyncio no longer sees its parent's loop as running
            os.write(write, "".join(str(int(answer)) for answer in asked()).encode())
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read) as pipe:
            answers = pipe.read()
        seen.append((answers[0] == "1", answers[1] == "1"))
        seen.append(asked())
        return seen

    assert asked() == (False, False)
    assert asyncio.run(in_loop()) == [(True, True), (False, False), (True, True)]
    assert asked() == (False, False)
