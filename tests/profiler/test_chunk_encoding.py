"""The recorder's 24-byte rows give back every id, parent and timestamp exactly."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from recfn._recorder import _Chunk
from recfn._table import decode_chunk

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
