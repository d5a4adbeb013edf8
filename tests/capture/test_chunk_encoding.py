"""The recorder's 24-byte rows give back every id, parent and timestamp exactly."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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
