"""The recorder's 24-byte rows give back every id, parent and timestamp exactly."""

from __future__ import annotations

import sys
import threading
from types import FrameType, SimpleNamespace
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from librt.vecs import append

import recfn
from recfn.capture._recorder import ASYNC_BIT, DEPTH_SHIFT, KIND_SHIFT, LOW32, _Chunk
from recfn.capture._table import DecodedRows, build_table, decode_chunk
from recfn.engine.scope import SCOPE_LABELS
from recfn.formats.schema import KINDS

TID = 7
EPOCH = 1_700_000_000_000_000_000  # ns since the Unix epoch, where the profiler's clock starts

gaps = st.one_of(
    st.integers(0, 5_000),
    st.integers(2**31 - 3, 2**31 + 3),  # around the largest gap stored inline
    st.integers(0, 10**12),
    st.integers(-(10**6), -1),  # a clock that stepped back still round-trips
)
spans = st.one_of(
    st.none(),  # never ended
    st.integers(0, 5_000),
    st.integers(2**31 - 4, 2**31 + 3),
    st.integers(0, 10**13),
)
seqs = st.one_of(st.integers(1, 1_000), st.integers(2**31 - 2, 2**32 - 1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(gaps, spans, seqs, seqs, st.booleans()), min_size=1, max_size=40))
def test_rows_decode_to_what_was_written(
    rows: list[tuple[int, int | None, int, int, bool]],
) -> None:
    chunk = _Chunk(4)  # grows past its capacity like a thread's first chunk
    expected = []
    start = EPOCH
    for i, (gap, span, seq, parent_seq, has_parent) in enumerate(rows):
        start += gap
        rid = (TID << 32) | seq
        parent = (TID << 32) | parent_seq if has_parent else 0
        row = chunk.add(rid, parent, start, i, i * 3)
        assert row == i
        end = 0
        if span is not None:
            end = start + span
            chunk.set_end(row, start, end)
        expected.append((rid, parent, start, end, i, i * 3))
    got = decode_chunk(chunk, TID)
    decoded = list(
        zip(*(got[k].tolist() for k in ("id", "parent_id", "start_ns", "end_ns", "name", "meta")))
    )
    assert decoded == expected


def _interrupted_at(line: int) -> Any:
    """A trace function that raises KeyboardInterrupt at the ``line``-th line ``_Chunk.add``
    runs, as a Ctrl-C handled between two of its statements does."""
    seen = 0

    def local(frame: FrameType, event: str, arg: object) -> Optional[Any]:
        nonlocal seen
        if event == "line":
            seen += 1
            if seen == line:
                raise KeyboardInterrupt
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Optional[Any]:
        return local if frame.f_code is _Chunk.add.__code__ else None

    return calls


def _decoded(chunk: _Chunk) -> list[tuple[int, ...]]:
    got = decode_chunk(chunk, TID)
    fields = ("id", "parent_id", "start_ns", "end_ns", "name", "meta")
    return list(zip(*(got[k].tolist() for k in fields)))


@pytest.mark.skipif(recfn.COMPILED, reason="the compiled add checks for no signal mid-row")
@settings(max_examples=150, deadline=None, phases=[Phase.explicit, Phase.generate, Phase.shrink])
@given(st.lists(st.tuples(gaps, spans, st.integers(0, 25)), min_size=1, max_size=20))
def test_a_ctrl_c_inside_an_append_loses_no_row_that_counted(
    rows: list[tuple[int, int | None, int]],
) -> None:
    """Each row's add is interrupted at one of its lines (0: not at all); the rows that counted
    (their id is in) decode exactly, before and after the next add cuts the others off."""
    chunk = _Chunk(4)
    expected = []
    start = EPOCH
    for i, (gap, span, line) in enumerate(rows):
        start += gap
        rid = (TID << 32) | (i + 1)
        before = len(chunk.seqs)
        tracer = sys.gettrace()
        sys.settrace(_interrupted_at(line) if line else tracer)
        try:
            row = chunk.add(rid, 0, start, i, i * 3)
        except KeyboardInterrupt:
            row = -1
        finally:
            sys.settrace(tracer)
        if len(chunk.seqs) == before:
            assert _decoded(chunk) == expected  # an uncounted row is not read
            continue
        end = 0
        if row >= 0 and span is not None:
            end = start + span
            chunk.set_end(row, start, end)
        expected.append((rid, 0, start, end, i, i * 3))
    assert _decoded(chunk) == expected


def test_a_row_that_never_counted_is_cut_off_by_the_next() -> None:
    """The state an interrupted add leaves (every column but the ids grown, its start escaped)
    is read without that row, and the next add takes its place with an exact start."""
    chunk = _Chunk(4)
    chunk.add((TID << 32) | 1, 0, EPOCH, 0, 0)
    chunk.parents = append(chunk.parents, 0)
    chunk.gaps = append(chunk.gaps, -1)
    chunk.spans = append(chunk.spans, 0)
    chunk.names = append(chunk.names, 1)
    chunk.meta = append(chunk.meta, 3)
    chunk.big_starts = append(chunk.big_starts, EPOCH + 5 * 10**9)
    chunk.big_start_rows = append(chunk.big_start_rows, 1)
    chunk.last_start = EPOCH + 5 * 10**9
    assert _decoded(chunk) == [((TID << 32) | 1, 0, EPOCH, 0, 0, 0)]
    assert chunk.add((TID << 32) | 2, 0, EPOCH + 7, 2, 6) == 1
    assert _decoded(chunk) == [
        ((TID << 32) | 1, 0, EPOCH, 0, 0, 0),
        ((TID << 32) | 2, 0, EPOCH + 7, 0, 2, 6),
    ]


def test_ends_written_from_other_threads_all_land() -> None:
    chunk = _Chunk(4)
    starts = [EPOCH + 10 * i for i in range(200)]
    for i, start in enumerate(starts):
        chunk.add((TID << 32) | (i + 1), 0, start, 0, 0)
    long = 3 * 10**9  # every end escapes to the shared big_* vecs

    def end_rows(first: int) -> None:
        for row in range(first, len(starts), 4):
            chunk.set_end(row, starts[row], starts[row] + long + row)

    threads = [threading.Thread(target=end_rows, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ends = decode_chunk(chunk, TID)["end_ns"].tolist()
    assert ends == [start + long + row for row, start in enumerate(starts)]


def _buffer(tid: int, name: str, chunks: list[object], rows: int) -> SimpleNamespace:
    """What ``build_table`` reads of a thread buffer, without optional columns."""
    none = np.empty(0, np.int64)
    return SimpleNamespace(
        tid=tid,
        thread_name=name,
        chunks=chunks,
        rows=rows,
        seq_rows=none,
        seq_vals=none,
        fwd_vals=none,
        extra_rows=[],
        extra_args=[],
        extra_shapes=[],
        extra_dtypes=[],
        extra_flops=[],
        mem_rows=none,
        mem_bytes=none,
        mem_devices=[],
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(  # threads: chunks of (gap, span) rows, and whether the first chunk is held rows
        st.tuples(
            st.lists(st.lists(st.tuples(gaps, spans), min_size=0, max_size=12), max_size=4),
            st.booleans(),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_every_chunk_of_every_thread_lands_in_its_rows(
    threads: list[tuple[list[list[tuple[int, int | None]]], bool]],
) -> None:
    buffers = []
    expected = []
    for t, (chunk_rows, held) in enumerate(threads):
        tid = TID + t
        chunks: list[object] = []
        start = EPOCH
        seq = 0
        for c, rows in enumerate(chunk_rows):
            chunk = _Chunk(4)
            for gap, span in rows:
                start += gap
                seq += 1
                parent = (tid << 32) | (seq - 1) if seq > 1 else 0
                meta = (seq % 3) | (seq % 2) * ASYNC_BIT | (seq % 5) << DEPTH_SHIFT
                meta |= (seq % 3) << KIND_SHIFT
                row = chunk.add((tid << 32) | seq, parent, start, seq % 2, meta)
                end = 0
                if span is not None:
                    end = start + span
                    chunk.set_end(row, start, end)
                expected.append(
                    ((tid << 32) | seq, parent or None, start, end or None, tid, seq % 5)
                )
            if held and c == 0 and rows:
                chunks.append(DecodedRows(decode_chunk(chunk, tid)))
            elif rows:
                chunks.append(chunk)
        buffers.append(_buffer(tid, f"thread {t % 2}", chunks, seq))
    recorder = SimpleNamespace(
        buffers=buffers,
        name_list=["even", "odd"],
        pid=1,
        dropped=0,
        report_input_shapes=False,
        with_stack=False,
        with_flops=False,
        profile_memory=False,
    )
    table = build_table(recorder, start_ns=0, node_id=-1, config={}, wall_ns=0)  # type: ignore[arg-type]
    got = list(
        zip(
            *(
                table.column(c).to_pylist()
                for c in ("id", "parent_id", "start_ns", "end_ns", "thread_id", "depth")
            )
        )
    )
    assert got == expected
    ids = [row[0] for row in expected]
    assert table.column("name").to_pylist() == [("even", "odd")[i & 1] for i in ids]
    assert table.column("is_async").to_pylist() == [bool(i & 1) for i in ids]
    assert table.column("thread_name").to_pylist() == [
        f"thread {((i >> 32) - TID) % 2}" for i in ids
    ]
    assert table.column("kind").to_pylist() == [KINDS[(i & LOW32) % 3] for i in ids]
    assert table.column("scope").to_pylist() == [SCOPE_LABELS[(i & LOW32) % 3] for i in ids]
    assert set(table.column("sequence_nr").to_pylist()) <= {-1}
    assert set(table.column("node_id").to_pylist()) <= {-1}
