"""The profiler's capture side: a callback that writes events into typed columnar buffers.

Compiled with mypyc. Each thread appends to its own ``_ThreadBuffer``: chunks of ``librt`` vecs
(ids, parents, start gaps, durations, interned names and packed metadata: int32 each), 24 bytes a
row, never one Python object per event. A plain in-memory capture (no streaming, flight recorder
or call tracer: those read the vec chunks) keeps the same rows in a ``recfn.native._crange.Rows``
per thread instead (16 bytes a row: ids by the row order, name and metadata in one label), which
the engine's range fast path writes directly and which decodes itself into the table's columns. Optional per-event data
(args, shapes, stacks, memory, flops) goes into sparse side lists only when the option that
needs it is on. ``recfn.capture._table`` turns the buffers into one Arrow table without touching events
one by one.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from types import FrameType
from typing import Any, Final, Optional

from librt.vecs import append, vec
from mypy_extensions import i32, i64

from recfn.capture._stacks import FrameTable, StackCache
from recfn.engine.ranges import (
    ALL_SCOPES_MASK,
    TID_SHIFT,
    RecordFunction,
    RecordFunctionCallback,
    _close_row,
    _crange,
    _Entry,
    _open_row,
    _thread_data,
    _ThreadData,
    current_range,
)
from recfn.engine.scope import SCOPE_USER
from recfn.native.constants import (  # Recorder.gate is shared with the C hooks
    CHUNK_ROWS,
    ESCAPE_LIMIT,
    ESCAPED,
    GATE_DROPPED,
    GATE_EPOCH,
    GATE_EVENTS,
    GATE_SIZE,
    GATE_STOPPED,
    META_ASYNC_BIT,
    META_DEPTH_SHIFT,
    META_KIND_MASK,
    META_KIND_SHIFT,
    META_LOW,
    META_SCOPE_MASK,
)

# Later chunks reserve CHUNK_ROWS. A vec's whole capacity is zero-filled (resident) when it is
# made, so a thread's last chunk holds up to CHUNK_ROWS * 24 bytes it has not used yet.
FIRST_CHUNK_ROWS: Final[i64] = 256  # a thread's first chunk starts small and grows
KIND_RANGE: Final[i32] = 0
KIND_MARK: Final[i32] = 1
KIND_MEMORY: Final[i32] = 2
# meta packs scope | kind << KIND_SHIFT | async << 6 | depth << DEPTH_SHIFT into an int32
# (recfn/native/constants.py: the C merge of traced calls reads it too)
SCOPE_MASK: Final[i32] = META_SCOPE_MASK
KIND_SHIFT: Final = META_KIND_SHIFT
KIND_MASK: Final[i32] = META_KIND_MASK  # after shifting by KIND_SHIFT
ASYNC_BIT: Final[i32] = META_ASYNC_BIT
LOW_META: Final[i32] = META_LOW  # scope, kind and async bits
DEPTH_SHIFT: Final = META_DEPTH_SHIFT
OPEN_END: Final[i64] = 0
NATIVE_START: Final[i64] = -1  # sink_start of a row open_row opened (its Rows keeps the start)
LOW32: Final[i64] = (1 << 32) - 1
MARK_SCOPE: Final[i32] = SCOPE_USER

_clock: Final = time.perf_counter_ns


class _RowStore:
    """Whether recorders may keep native rows (tests turn it off to compare with the vecs)."""

    allow_native: bool

    def __init__(self) -> None:
        self.allow_native = True


row_store: Final = _RowStore()


class _Chunk:
    """Up to CHUNK_ROWS rows of the fixed columns, 24 bytes a row, every value exact.

    Ids and parents are the low 32 bits of per-thread sequence numbers (the thread id is the
    buffer's; a parent is always on the same thread; 0: none). A start is stored as the gap
    since the previous row's start and an end as ``end - start + 1`` (0: not ended); a value
    that does not fit (the chunk's first start, gaps and durations of 2 s and more) is stored as
    ESCAPED with the whole timestamp in the sparse ``big_*`` vecs. ``recfn.capture._table.decode_chunk``
    turns a chunk back into int64 columns.
    """

    seqs: vec[i32]
    parents: vec[i32]
    gaps: vec[i32]
    spans: vec[i32]
    names: vec[i32]
    meta: vec[i32]  # see SCOPE_MASK ... DEPTH_SHIFT
    last_start: i64
    big_start_rows: vec[i64]
    big_starts: vec[i64]
    big_end_rows: vec[i64]
    big_ends: vec[i64]
    lock: threading.Lock  # ends may be written from other threads (end(), futures)
    owner: object  # the Recorder whose rows these are

    def __init__(self, rows: i64, owner: object = None) -> None:
        self.seqs = vec[i32](capacity=rows)
        self.parents = vec[i32](capacity=rows)
        self.gaps = vec[i32](capacity=rows)
        self.spans = vec[i32](capacity=rows)
        self.names = vec[i32](capacity=rows)
        self.meta = vec[i32](capacity=rows)
        self.last_start = 0
        self.big_start_rows = vec[i64]()
        self.big_starts = vec[i64]()
        self.big_end_rows = vec[i64]()
        self.big_ends = vec[i64]()
        self.lock = threading.Lock()
        self.owner = owner

    def add(self, rid: i64, parent: i64, start: i64, name: i32, meta: i32) -> i64:
        """Append one open row; returns its number in this chunk.

        ``seqs`` grows last: a row counts once its id is in (``len(self.seqs)``). An exception
        raised between two appends (a Ctrl-C in the interpreted build) leaves a row that never
        counted; the next ``add`` cuts it off and escapes its start.
        """
        row: i64 = len(self.seqs)
        if len(self.parents) != row:  # parents grow first
            self._drop_uncounted(row)
        gap = start - self.last_start
        escaped = row == 0 or gap < 0 or gap >= ESCAPE_LIMIT
        if escaped:
            gap = -1  # ESCAPED
        self.parents = append(self.parents, low32(parent))
        self.gaps = append(self.gaps, i32(gap))
        self.spans = append(self.spans, 0)
        self.names = append(self.names, name)
        self.meta = append(self.meta, meta)
        if escaped:
            self.big_starts = append(self.big_starts, start)
            self.big_start_rows = append(self.big_start_rows, row)
        self.last_start = start
        self.seqs = append(self.seqs, low32(rid))
        return row

    def _drop_uncounted(self, rows: i64) -> None:
        """Cut every column to the ``rows`` rows that counted; the next start escapes."""
        self.parents = self.parents[:rows]
        self.gaps = self.gaps[:rows]
        self.spans = self.spans[:rows]
        self.names = self.names[:rows]
        self.meta = self.meta[:rows]
        kept: i64 = len(self.big_start_rows)
        while kept > 0 and self.big_start_rows[kept - 1] >= rows:
            kept -= 1
        self.big_start_rows = self.big_start_rows[:kept]
        self.big_starts = self.big_starts[:kept]
        self.last_start = -ESCAPE_LIMIT

    def set_end(self, row: i64, start: i64, end: i64) -> None:
        """End ``row``, which started at ``start``."""
        span = end - start + 1
        if 0 < span < ESCAPE_LIMIT:
            self.spans[row] = i32(span)
            return
        with self.lock:  # rows last: a row number always has its end
            self.big_ends = append(self.big_ends, end)
            self.big_end_rows = append(self.big_end_rows, row)
            self.spans[row] = ESCAPED

    def seq_at(self, row: i64) -> i64:
        return i64(self.seqs[row]) & LOW32

    def parent_seq_at(self, row: i64) -> i64:
        return i64(self.parents[row]) & LOW32


def low32(value: i64) -> i32:
    """The low 32 bits of ``value`` as a (wrapped) int32."""
    low = value & LOW32
    if low >= 1 << 31:
        low -= 1 << 32
    return i32(low)


class _RowRef:
    """Where a range's row lives, for a second profiler running at the same time."""

    chunk: object  # a _Chunk, or the buffer's native Rows
    row: i64
    start: i64

    def __init__(self, chunk: object, row: i64, start: i64) -> None:
        self.chunk = chunk
        self.row = row
        self.start = start


class _ThreadBuffer:
    """One thread's events: full chunks, the chunk being filled and the sparse side columns."""

    owner: Recorder
    tid: i64
    thread_name: str
    # Native mode (owner.native): every row is in ``native`` (a recfn.native._crange.Rows, row numbers
    # count from the buffer's first row), ``chunks`` stays empty and ``rows`` is only right
    # just after ``add_row`` (the fast path does not count): read ``len(native)``.
    native: Any
    chunks: list[_Chunk]
    cur: _Chunk
    cur_rows: i64
    rows: i64
    # sparse columns: row numbers (within this buffer) and their values
    extra_rows: list[int]
    extra_args: list[object]
    extra_shapes: list[object]
    extra_dtypes: list[object]
    extra_flops: list[object]
    seq_rows: vec[i64]
    seq_vals: vec[i64]
    fwd_vals: vec[i64]
    mem_rows: vec[i64]
    mem_bytes: vec[i64]
    mem_devices: list[str]
    last_traced: i64
    stacks: StackCache
    # with_stack: rows (within this buffer) and their FrameTable nodes, symbolized at the end
    stack_rows: vec[i64]
    stack_nodes: vec[i64]
    # trace_calls on the C hook: the thread's traced calls (recfn.native._ctrace.TracedRows),
    # handed over when tracing stopped; recfn.capture._table merges them with the rows above
    # while it builds the table. Row numbers above (extra_rows, ...) count recorded rows only.
    traced: list[Any]

    def __init__(self, owner: Recorder, td: _ThreadData) -> None:
        self.owner = owner
        self.tid = td.tid
        self.thread_name = td.name
        self.native = (
            _crange.Rows(
                owner.gate,
                owner.max_events,
                owner.clock_offset,
                owner.name_ids,
                owner._name_id,
                td.row_args,
            )
            if owner.native
            else None
        )
        self.cur = _Chunk(0 if owner.native else FIRST_CHUNK_ROWS, owner)
        self.chunks = [] if owner.native else [self.cur]
        self.cur_rows = 0
        self.rows = 0
        self.extra_rows = []
        self.extra_args = []
        self.extra_shapes = []
        self.extra_dtypes = []
        self.extra_flops = []
        self.seq_rows = vec[i64]()
        self.seq_vals = vec[i64]()
        self.fwd_vals = vec[i64]()
        self.mem_rows = vec[i64]()
        self.mem_bytes = vec[i64]()
        self.mem_devices = []
        self.last_traced = -1
        self.stacks = StackCache()
        self.stack_rows = vec[i64]()
        self.stack_nodes = vec[i64]()
        self.traced = []

    def clear(self) -> None:
        """Forget every row (the spill hook took them) and start a fresh chunk.

        ``__init__`` repeats these assignments instead of calling this: mypyc only treats an
        attribute as always defined when ``__init__`` assigns it directly, and the hot path
        then reads it without an undefined check."""
        self.cur = _Chunk(CHUNK_ROWS, self.owner)
        self.chunks = [self.cur]
        self.cur_rows = 0
        self.rows = 0
        self.extra_rows = []
        self.extra_args = []
        self.extra_shapes = []
        self.extra_dtypes = []
        self.extra_flops = []
        self.seq_rows = vec[i64]()
        self.seq_vals = vec[i64]()
        self.fwd_vals = vec[i64]()
        self.mem_rows = vec[i64]()
        self.mem_bytes = vec[i64]()
        self.mem_devices = []
        self.stack_rows = vec[i64]()
        self.stack_nodes = vec[i64]()
        self.traced = []

    def add_row(self, rid: i64, parent: i64, start: i64, name: i32, meta: i32) -> i64:
        """Append one open row; returns its number within the current chunk. When the chunk is
        full and the buffer holds ``spill_rows`` rows, or the recorder's unwritten events
        (every thread's) reach ``spill_total``, the owner's ``spill`` hook takes the rows and
        ``clear``s the buffer first (streaming to a dataset). Native: the row's number in the
        buffer."""
        native = self.native
        if native is not None:
            nrow: i64 = native.add(rid, parent, start, name, meta)
            self.rows = nrow + 1
            return nrow
        if self.cur_rows == CHUNK_ROWS:
            owner = self.owner
            spill = owner.spill
            if spill is not None and (
                self.rows >= owner.spill_rows or owner.gate[GATE_EVENTS] >= owner.spill_total
            ):
                spill(self)
        if self.cur_rows == CHUNK_ROWS:
            self.cur = _Chunk(CHUNK_ROWS, self.owner)
            self.chunks.append(self.cur)
            self.cur_rows = 0
        row = self.cur.add(rid, parent, start, name, meta)
        self.cur_rows = row + 1
        self.rows += 1
        return row

    def set_end(self, row: i64, start: i64, end: i64) -> None:
        """End the row ``add_row`` just returned (in the current chunk)."""
        native = self.native
        if native is not None:
            native.set_end(row, start, end)
        else:
            self.cur.set_end(row, start, end)

    def sink(self) -> object:
        """Where the row ``add_row`` just returned lives: the current chunk, or the Rows."""
        native = self.native
        return native if native is not None else self.cur

    def fast_stack(self) -> None:
        """with_stack for the range the engine's fast path just opened (the last row)."""
        row: i64 = len(self.native) - 1
        self.stack_rows = append(self.stack_rows, row)
        self.stack_nodes = append(self.stack_nodes, self.owner._stack(self))


def _context_of(rf: RecordFunction, cb: object) -> object:
    """What ``cb``'s ``on_start`` returned for ``rf`` (None when it did not run for it)."""
    e0 = rf._e0
    if e0 is not None and e0.cb is cb:
        return rf._c0
    more = rf._more_callbacks()
    if more is not None:
        for i in range(0, len(more), 2):
            entry = more[i]
            if isinstance(entry, _Entry) and entry.cb is cb:
                return more[i + 1]
    return None


class Recorder(RecordFunctionCallback):
    """The profiler's callback: records every range it is selected for into thread buffers."""

    report_input_shapes: bool
    with_stack: bool
    with_flops: bool
    profile_memory: bool
    max_events: i64
    gate: vec[i64]  # events, dropped, stopped, epoch (GATE_*): never resized, so C may hold it
    node_id: i64
    pid: i64  # the process that started capturing (a forked child keeps its parent's)
    clock_offset: i64  # added to the monotonic clock: timestamps are ns since the Unix epoch
    spill: Optional[Callable[[_ThreadBuffer], None]]  # writes a full buffer out (streaming)
    spill_rows: i64
    spill_total: i64  # a thread spills at a full chunk once the unwritten events reach this
    relieve: Optional[Callable[[], bool]]  # writes every buffer out; True: admit the event
    native: (
        bool  # rows in recfn.native._crange.Rows (decided once by use_native_rows, before any row)
    )
    buffers: list[_ThreadBuffer]
    thread_buffers: dict[int, _ThreadBuffer]  # each thread's one buffer, by tid
    name_ids: dict[str, i32]
    name_list: list[str]
    flop_formulas: dict[str, Callable[[list[list[int]]], int]]
    shape_of: Callable[[object], tuple[list[int], str]]
    frames: FrameTable  # the stacks of with_stack
    _lock: threading.Lock

    def __init__(
        self,
        report_input_shapes: bool,
        with_stack: bool,
        with_flops: bool,
        profile_memory: bool,
        max_events: i64,
        scopes: object,
        sampling_prob: float,
        flop_formulas: dict[str, Callable[[list[list[int]]], int]],
        shape_of: Callable[[object], tuple[list[int], str]],
    ) -> None:
        super().__init__(
            needs_inputs=report_input_shapes or with_flops,
            needs_ids=True,
            scopes=scopes,
            sampling_prob=sampling_prob,
        )
        self.report_input_shapes = report_input_shapes
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.profile_memory = profile_memory
        self.max_events = max_events
        self.gate = vec[i64]([0] * GATE_SIZE)
        self.node_id = -1
        self.pid = os.getpid()
        self.clock_offset = time.time_ns() - time.perf_counter_ns()
        self.spill = None
        self.spill_rows = 0
        self.spill_total = max_events
        self.relieve = None
        self.native = False
        self.buffers = []
        self.thread_buffers = {}
        self.name_ids = {}
        self.name_list = []
        self.flop_formulas = flop_formulas
        self.shape_of = shape_of
        self.frames = FrameTable()
        self._lock = threading.Lock()

    @property
    def events(self) -> i64:
        return self.gate[GATE_EVENTS]

    @events.setter
    def events(self, value: i64) -> None:
        self.gate[GATE_EVENTS] = value

    @property
    def dropped(self) -> i64:
        return self.gate[GATE_DROPPED]

    @dropped.setter
    def dropped(self, value: i64) -> None:
        self.gate[GATE_DROPPED] = value

    @property
    def stopped(self) -> bool:
        return self.gate[GATE_STOPPED] != 0

    @stopped.setter
    def stopped(self, value: bool) -> None:
        self.gate[GATE_STOPPED] = 1 if value else 0

    def use_native_rows(self, tracing: bool) -> None:
        """Keep rows in recfn.native._crange.Rows when it is built and this is a plain in-memory
        capture: no spill hook (streaming, flight recorder) and no call tracer, which read the
        vec chunks. Call once the profiler attached those and before the first row. With no
        option that needs the callbacks (inputs, memory, sampling, scopes), the engine's fast
        path then writes this recorder's ranges itself."""
        if (
            _crange is None
            or not row_store.allow_native
            or self.spill is not None
            or tracing
            or self.buffers
        ):
            return
        self.native = True
        self.fast_rows = (
            not self.needs_inputs
            and not self.needs_outputs
            and not self.profile_memory
            and self.sampling_prob >= 1.0
            and self.scope_mask == ALL_SCOPES_MASK
            and self.should_run is None
        )

    # -- hot path ---------------------------------------------------------------------------

    def _buffer(self, td: _ThreadData) -> _ThreadBuffer:
        sink = td.sink
        if isinstance(sink, _ThreadBuffer) and sink.owner is self:
            return sink
        return self._thread_buffer(td)

    def _thread_buffer(self, td: _ThreadData) -> _ThreadBuffer:
        """The thread's one buffer, made the first time: ``td.sink`` caches it, but another
        profiler recording at the same time takes ``td.sink`` for its own buffer. In native
        mode the fast path's fields on ``td`` point at it."""
        buf = self.thread_buffers.get(td.tid)
        if buf is None:
            buf = _ThreadBuffer(self, td)
            with self._lock:
                self.buffers.append(buf)
                self.thread_buffers[td.tid] = buf
        td.sink = buf
        if self.fast_rows:
            td.rows = buf.native
            td.rows_stack = buf.fast_stack if self.with_stack else None
            td.rows_owner = self
        return buf

    def _name_id(self, name: str) -> i32:
        nid = self.name_ids.get(name)
        if nid is not None:
            return nid
        with self._lock:
            nid = self.name_ids.get(name)
            if nid is None:
                nid = i32(len(self.name_list))
                self.name_list.append(name)
                self.name_ids[name] = nid
        return nid

    def _admit(self) -> bool:
        gate = self.gate
        if gate[GATE_STOPPED]:
            return False
        if gate[GATE_EVENTS] >= self.max_events:
            relieve = self.relieve  # streaming: write the buffers out rather than drop
            if relieve is None or not relieve():  # True: room was made (a few over is fine)
                gate[GATE_DROPPED] += 1
                return False
        gate[GATE_EVENTS] += 1
        return True

    def records(self, buf: _ThreadBuffer, rf: RecordFunction) -> bool:
        """Whether this recorder recorded ``rf``, a range open on ``buf``'s thread: only then
        may its id be a parent here (a range opened before this profile started, or recorded
        only by another profiler, is not a row of this capture)."""
        if rf.sink_row >= 0:
            sink = rf.sink_chunk
            if isinstance(sink, _Chunk):
                if sink.owner is self:
                    return True
            elif sink is not None and sink is buf.native:
                return True
        return isinstance(_context_of(rf, self), _RowRef)

    def on_start(self, rf: RecordFunction) -> object:
        td = rf._td
        if td is None:
            return None
        if self.native and rf.sink_row < 0 and not self.profile_memory:
            return self._native_start(td, rf)
        if not self._admit():
            return None
        buf = self._buffer(td)
        if self.profile_memory:
            self._memory_tick(td, buf, rf._parent)
        parent = rf._parent
        parent_id: i64 = 0  # typed: a conditional expression would box the handle
        if parent is not None and self.records(buf, parent):
            parent_id = parent.handle
        meta: i32 = rf._scope | (rf.depth << DEPTH_SHIFT)
        start = _clock() + self.clock_offset
        row = buf.add_row(rf.handle, parent_id, start, self._name_id(rf.name), meta)
        self.gate[GATE_EPOCH] += 1
        ref: object = None
        if rf.sink_row < 0:
            rf.sink_chunk = buf.sink()
            rf.sink_row = row
            rf.sink_start = start
        else:  # another profiler already uses the range's fields: hand the row over as context
            ref = _RowRef(buf.sink(), row, start)
        self._annotate(buf, rf, buf.rows - 1)
        return ref

    def _native_start(self, td: _ThreadData, rf: RecordFunction) -> object:
        """``on_start`` into native rows: admission, name, clock and row in one C call; the
        Rows keeps the start (``sink_start`` is NATIVE_START)."""
        buf = self._buffer(td)
        parent = rf._parent
        parent_seq: i64 = 0  # typed: a conditional expression would box the handle
        if parent is not None and self.records(buf, parent):
            parent_seq = parent.handle  # the Rows keeps its low 32 bits
        meta: i32 = rf._scope | (rf.depth << DEPTH_SHIFT)
        native = buf.native
        args = td.row_args  # what the Rows (made for this thread) reads
        args[0] = rf.handle
        args[1] = parent_seq
        args[2] = i64(meta)
        if not _open_row(native, rf, rf.name):
            return None
        row: i64 = len(native) - 1
        rf.sink_chunk = native
        rf.sink_row = row
        rf.sink_start = NATIVE_START
        self._annotate(buf, rf, row)
        return None

    def _annotate(self, buf: _ThreadBuffer, rf: RecordFunction, at: i64) -> None:
        """The sparse columns of the range's row ``at``: sequence numbers, stack, extras."""
        if rf.seq_nr >= 0 or rf.forward_thread_id != 0:
            buf.seq_rows = append(buf.seq_rows, at)
            buf.seq_vals = append(buf.seq_vals, rf.seq_nr)
            buf.fwd_vals = append(buf.fwd_vals, rf.forward_thread_id)
        if self.with_stack:
            buf.stack_rows = append(buf.stack_rows, at)
            buf.stack_nodes = append(buf.stack_nodes, self._stack(buf))
        if rf._args is not None or self.report_input_shapes or self.with_flops:
            self._extras(buf, rf, at)

    def on_end(self, rf: RecordFunction, ctx: object) -> None:
        if self.stopped:
            return
        fast = False
        if isinstance(ctx, _RowRef):
            sink = ctx.chunk
            row = ctx.row
            start = ctx.start
        else:
            row = rf.sink_row
            if row < 0:
                return
            sink = rf.sink_chunk
            start = rf.sink_start
            fast = rf._fast or start == NATIVE_START
        if isinstance(sink, _Chunk):
            sink.set_end(row, start, _clock() + self.clock_offset)
            self.gate[GATE_EPOCH] += 1
            if rf.is_async:
                sink.meta[row] = sink.meta[row] | ASYNC_BIT
        else:
            rows: Any = sink
            if fast:  # opened by open_row: the Rows finds it by the range, knows its start
                _close_row(rows, rf, ASYNC_BIT if rf.is_async else 0)
            else:
                rows.set_end(row, start, _clock() + self.clock_offset)
                self.gate[GATE_EPOCH] += 1
                if rf.is_async:
                    rows.or_meta(row, ASYNC_BIT)
        if self.profile_memory:
            td = rf._td
            if td is not None:
                self._memory_tick(td, self._buffer(td), rf)

    # -- optional data ----------------------------------------------------------------------

    def _extras(self, buf: _ThreadBuffer, rf: RecordFunction, at: i64) -> None:
        args = rf._args
        if args is None:
            kwinputs = rf.kwinputs
            if kwinputs is not None:
                args = repr(kwinputs)
        shapes: object = None
        dtypes: object = None
        flops: object = None
        if self.report_input_shapes or self.with_flops:
            inputs = rf.inputs
            if isinstance(inputs, (list, tuple)):
                shape_list: list[list[int]] = []
                dtype_list: list[str] = []
                for value in inputs:
                    shape, dtype = self.shape_of(value)
                    shape_list.append(shape)
                    dtype_list.append(dtype)
                if self.report_input_shapes:
                    shapes = shape_list
                    dtypes = dtype_list
                if self.with_flops:
                    formula = self.flop_formulas.get(rf.name)
                    if formula is not None:
                        try:
                            flops = formula(shape_list)
                        except Exception:
                            flops = None
        if args is None and shapes is None and flops is None:
            return
        buf.extra_rows.append(at)
        buf.extra_args.append(args)
        buf.extra_shapes.append(shapes)
        buf.extra_dtypes.append(dtypes)
        buf.extra_flops.append(flops)

    def _stack(self, buf: _ThreadBuffer) -> i64:
        """The caller's Python stack as a node of ``frames`` (raw frames: no strings yet)."""
        try:
            frame: Optional[FrameType] = sys._getframe(0)  # compiled: the nearest Python frame
        except ValueError:
            frame = None
        return self.frames.capture(frame, buf.stacks)

    def release_frames(self) -> None:
        """Drop the frames each thread's stack cache holds (once stopped: they hold locals)."""
        with self._lock:
            for buf in self.buffers:
                buf.stacks = StackCache()

    def _memory_tick(
        self, td: _ThreadData, buf: _ThreadBuffer, owner: Optional[RecordFunction]
    ) -> None:
        """Attribute Python allocations since the last tick on this thread to ``owner``."""
        if not tracemalloc.is_tracing():
            return
        traced: i64 = tracemalloc.get_traced_memory()[0]
        last = buf.last_traced
        buf.last_traced = traced
        if last < 0 or traced == last or owner is None:
            return
        self.add_instant(td, buf, owner, "[memory]", KIND_MEMORY, traced - last, "cpu")

    def add_instant(
        self,
        td: _ThreadData,
        buf: _ThreadBuffer,
        parent: Optional[RecordFunction],
        name: str,
        kind: i32,
        nbytes: i64,
        device: str,
    ) -> None:
        """Record a mark or a memory event, child of ``parent`` (the innermost open range)."""
        if not self._admit():
            return
        td.next_seq += 1
        rid = (td.tid << TID_SHIFT) | td.next_seq
        depth: i32 = 0
        parent_id: i64 = 0
        if parent is not None and parent._td is not None and parent._td.tid == buf.tid:
            depth = parent.depth + 1
            if self.records(buf, parent):
                parent_id = parent.handle
        now = _clock() + self.clock_offset
        meta: i32 = MARK_SCOPE | (kind << KIND_SHIFT) | (depth << DEPTH_SHIFT)
        row = buf.add_row(rid, parent_id, now, self._name_id(name), meta)
        buf.set_end(row, now, now)
        if kind == KIND_MEMORY:
            buf.mem_rows = append(buf.mem_rows, buf.rows - 1)
            buf.mem_bytes = append(buf.mem_bytes, nbytes)
            buf.mem_devices.append(device)

    def record_instant(self, name: str, kind: i32, nbytes: i64, device: str) -> None:
        """A mark or memory event from the calling thread."""
        if self.stopped:
            return
        td = _thread_data()
        self.add_instant(td, self._buffer(td), current_range(), name, kind, nbytes, device)
