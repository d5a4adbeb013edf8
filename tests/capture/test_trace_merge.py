"""The C hook's rows merge into the table exactly as the row-by-row merge they replace did.

``reference_merge`` is that merge (``merge_native_rows``, which rewrote a thread's chunks in
merged order before the table decoded them), restated over plain tuples. The table built from
a buffer holding recorded rows and traced calls (``recfn.capture._table.build_table``, which
merges while it decodes) must give every row the id, parent, times, name, depth and flags the
reference gives, for any rows: ties in start times, calls open at the stop, user ranges that
are and are not in the buffer, several parts of traced calls per thread, and the sparse columns
of recorded rows following their rows.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recfn.capture import _tracer
from recfn.capture._recorder import ASYNC_BIT, DEPTH_SHIFT, LOW32, LOW_META, _Chunk
from recfn.capture._table import build_table
from recfn.engine.scope import SCOPE_FUNCTION

pytestmark = pytest.mark.skipif(
    _tracer._NATIVE is None, reason="recfn.native._ctrace is not built (pure install)"
)

TID = 5
HIGH = TID << 32
BASE = 1_700_000_000_000_000_000

Recorded = tuple[int, int, int, int, int, int]  # seq, parent seq, start, end (0: open), name, meta
Traced = tuple[int, int, int, int, int]  # start, end (0: open), user handle, name id, parent row


def reference_merge(
    recorded: list[Recorded], traced: list[Traced], first: int
) -> tuple[list[Recorded], list[int]]:
    """The merged rows (rid, parent, start, end, name, meta) and each recorded row's place;
    with no traced rows, the recorded rows as they are."""
    if not traced:
        return list(recorded), list(range(len(recorded)))
    t_user = [t[2] & LOW32 for t in traced]
    nr, nt = len(recorded), len(traced)
    out: list[Recorded] = []
    new_of_old: list[int] = []
    t_pos: list[int] = []
    seq_pos: dict[int, int] = {}
    depth_at: list[int] = []
    stack: list[tuple[int, int, int]] = []  # (rid, pos, end) of the traced calls open
    i = k = 0
    while i < nr or k < nt:
        is_traced = k < nt and (
            i >= nr
            or traced[k][0] < recorded[i][2]
            or (traced[k][0] == recorded[i][2] and t_user[k] != recorded[i][0])
        )
        now = traced[k][0] if is_traced else recorded[i][2]
        while stack and stack[-1][2] != 0 and stack[-1][2] <= now:
            stack.pop()
        parent = d = 0
        pos = len(out)
        if is_traced:
            up, user = traced[k][4], t_user[k]
            user_pos = seq_pos.get(user, -1) if user != 0 else -1
            if up >= 0 and user_pos < t_pos[up]:
                parent, d = first + up, depth_at[t_pos[up]] + 1
            elif user_pos >= 0:
                parent, d = user, depth_at[user_pos] + 1
            rid, end = first + k, traced[k][1]
            out.append((rid, parent, now, end, traced[k][3], SCOPE_FUNCTION | d << DEPTH_SHIFT))
            t_pos.append(pos)
            stack.append((rid, pos, end))
            k += 1
        else:
            seq, parent, _, end, name, meta = recorded[i]
            if stack and (parent == 0 or stack[-1][1] > seq_pos.get(parent, -1)):
                parent, d = stack[-1][0], depth_at[stack[-1][1]] + 1
            elif parent != 0:
                known = seq_pos.get(parent, -1)
                d = depth_at[known] + 1 if known >= 0 else meta >> DEPTH_SHIFT
            out.append((seq, parent, now, end, name, (meta & LOW_META) | d << DEPTH_SHIFT))
            seq_pos[seq] = pos
            new_of_old.append(pos)
            i += 1
        depth_at.append(d)
    return out, new_of_old


def traced_rows(rows: list[Traced]) -> Any:
    return _tracer._NATIVE.TracedRows(b"".join(struct.pack(_tracer.NATIVE_ROW, *r) for r in rows))


def buffer_of(recorded: list[Recorded], parts: list[list[Traced]]) -> SimpleNamespace:
    """A thread buffer (what build_table reads) with ``recorded`` in chunks of 3 rows, the
    traced ``parts``, and an extra (args), a sequence number and a memory value on every
    recorded row (their values name the row)."""
    chunks = []
    for i, (seq, parent, start, end, name, meta) in enumerate(recorded):
        if i % 3 == 0:
            chunks.append(_Chunk(3))
        row = chunks[-1].add(HIGH | seq, HIGH | parent if parent else 0, start, name, meta)
        if end:
            chunks[-1].set_end(row, start, end)
    n = len(recorded)
    rows = np.arange(n, dtype=np.int64)
    return SimpleNamespace(
        tid=TID,
        thread_name="main",
        chunks=chunks,
        rows=n,
        traced=[traced_rows(p) for p in parts],
        seq_rows=rows,
        seq_vals=rows + 1000,
        fwd_vals=np.zeros(n, np.int64),
        extra_rows=list(range(n)),
        extra_args=[f"row {i}" for i in range(n)],
        extra_shapes=[None] * n,
        extra_dtypes=[None] * n,
        extra_flops=[None] * n,
        mem_rows=rows,
        mem_bytes=rows + 7,
        mem_devices=["cpu"] * n,
    )


def table_of(buf: SimpleNamespace, names: int) -> dict[str, list[Any]]:
    recorder = SimpleNamespace(
        buffers=[buf],
        name_list=[f"name {i}" for i in range(names)],
        pid=1,
        dropped=0,
        report_input_shapes=False,
        with_stack=False,
        with_flops=False,
        profile_memory=True,
    )
    table = build_table(recorder, start_ns=0, node_id=-1, config={}, wall_ns=0)  # type: ignore[arg-type]
    return table.to_pydict()


def expected_table(recorded: list[Recorded], parts: list[list[Traced]]) -> dict[str, list[Any]]:
    rows: list[Recorded] = list(recorded)
    place = list(range(len(recorded)))
    done = 0
    for part in parts:
        rows, new_of_old = reference_merge(rows, part, _tracer.NATIVE_SEQ + done)
        rows = [(r[0] & LOW32, r[1] & LOW32, *r[2:]) for r in rows]  # as the chunks kept them
        place = [new_of_old[p] for p in place]
        done += len(part)
    n = len(rows)
    args: list[Any] = [None] * n
    sequence: list[int] = [-1] * n
    memory: list[Any] = [None] * n
    for i, p in enumerate(place):
        args[p], sequence[p], memory[p] = f"row {i}", i + 1000, i + 7
    return {
        "id": [HIGH | r[0] for r in rows],
        "parent_id": [HIGH | r[1] if r[1] else None for r in rows],
        "start_ns": [r[2] for r in rows],
        "end_ns": [r[3] or None for r in rows],
        "name": [f"name {r[4]}" for r in rows],
        "depth": [r[5] >> DEPTH_SHIFT for r in rows],
        "is_async": [bool(r[5] & ASYNC_BIT) for r in rows],
        "args": args,
        "sequence_nr": sequence,
        "memory_bytes": memory,
    }


NAMES = 4
starts = st.integers(0, 6)  # few distinct times: many ties between rows


@st.composite
def thread_rows(draw: Any) -> tuple[list[Recorded], list[list[Traced]]]:
    """Recorded rows (in start order, seqs 1..n, parents earlier seqs, absent ones or none) and
    one to three parts of traced calls (in start order, each one's parent the innermost call
    of its part still open, as the hook's stack gives it, or none; users recorded seqs, absent
    ones or none), ends open or later."""
    n = draw(st.integers(0, 12))
    recorded: list[Recorded] = []
    time = BASE
    for seq in range(1, n + 1):
        time += draw(starts)
        parent = draw(st.sampled_from([0, seq + 50, *range(1, seq)]))
        end = draw(st.one_of(st.just(0), st.integers(time, time + 20), st.just(time + 3 * 10**9)))
        meta = draw(st.integers(0, 3)) | draw(st.sampled_from([0, ASYNC_BIT]))
        meta |= draw(st.integers(0, 4)) << DEPTH_SHIFT
        recorded.append((seq, parent, time, end, draw(st.integers(0, NAMES - 1)), meta))
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        part: list[Traced] = []
        open_calls: list[int] = []
        time = BASE
        for k in range(draw(st.integers(0, 12))):
            time += draw(starts)
            end = draw(st.one_of(st.just(0), st.integers(time, time + 20)))
            user = draw(st.sampled_from([0, 99, *range(1, n + 1)]))
            user |= draw(st.sampled_from([0, 3 << 32]))  # a handle's thread bits are dropped
            del open_calls[len(open_calls) - draw(st.integers(0, len(open_calls))) :]  # returned
            parent = open_calls[-1] if open_calls else -1
            open_calls.append(k)
            part.append((time, end, user, draw(st.integers(0, NAMES - 1)), parent))
        parts.append(part)
    return recorded, parts


@settings(max_examples=300, deadline=None)
@given(thread_rows())
def test_the_table_holds_what_the_row_by_row_merge_gave(
    rows: tuple[list[Recorded], list[list[Traced]]],
) -> None:
    recorded, parts = rows
    if not recorded and not any(parts):
        return
    got = table_of(buffer_of(recorded, parts), NAMES)
    got.setdefault("args", [None] * len(got["id"]))  # no row has args: no column
    for column, values in expected_table(recorded, parts).items():
        assert got[column] == values, column
    assert set(got["scope"][i] for i, r in enumerate(got["id"]) if r & LOW32 >= 1 << 31) <= {
        "function"
    }


def test_a_deep_nest_and_a_long_thread_merge_like_the_reference() -> None:
    """Thousands of rows: traced calls nested 500 deep around user ranges, every 7th call left
    open, and a second part of traced calls after them."""
    recorded: list[Recorded] = []
    traced: list[Traced] = []
    time = BASE
    for k in range(3000):
        time += 3
        parent = k - 1 if k % 500 else -1
        traced.append((time, 0 if k % 7 == 0 else time + 10**6 - k, 0, k % NAMES, parent))
        if k % 11 == 0:
            seq = len(recorded) + 1
            recorded.append((seq, seq - 1 if seq > 1 else 0, time + 1, time + 2, 1, 2 << 8))
    later = [(time + 10 + k, time + 20 + k, 0, 2, -1) for k in range(100)]
    got = table_of(buffer_of(recorded, [traced, later]), NAMES)
    for column, values in expected_table(recorded, [traced, later]).items():
        assert got[column] == values, column
    assert max(got["depth"]) >= 499


def test_merge_refuses_columns_of_the_wrong_size_or_type() -> None:
    part = traced_rows([(BASE, BASE + 1, 0, 0, -1)])
    recorded = tuple(np.empty(0, t) for t in (np.int64,) * 4 + (np.int32,) * 2)
    out = tuple(
        np.empty(1, t) for t in (np.int64,) * 4 + (np.int32,) * 2 + (np.int8, np.int8, np.bool_)
    )
    _tracer.merge_traced(part, recorded, out, np.empty(0, np.int64), _tracer.NATIVE_SEQ, HIGH)
    assert out[2].tolist() == [BASE]
    short = out[:3] + (np.empty(0, np.int64),) + out[4:]
    with pytest.raises(ValueError, match="end_ns must be 1 int64 values"):
        _tracer.merge_traced(part, recorded, short, np.empty(0, np.int64), 0, HIGH)
    floats = out[:4] + (np.empty(1, np.float32),) + out[5:]
    with pytest.raises(ValueError, match="name must be 1 int32 values"):
        _tracer.merge_traced(part, recorded, floats, np.empty(0, np.int64), 0, HIGH)
    with pytest.raises(ValueError, match="not -1 or a call still open"):
        traced_rows([(BASE, 0, 0, 0, 0)])
    returned = [(BASE, 0, 0, 0, -1), (BASE, 0, 0, 0, 0), (BASE, 0, 0, 0, -1), (BASE, 0, 0, 0, 1)]
    with pytest.raises(ValueError, match="row 3: parent 1 is not -1 or a call still open"):
        traced_rows(returned)  # row 2 started at the top level: rows 0 and 1 had returned
