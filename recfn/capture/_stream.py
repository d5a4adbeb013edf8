"""Streaming capture into a dataset: ``profile(output="traces/")`` writes the thread buffers
to new Parquet parts as it records, so memory stays bounded however long the process runs.

The layout is Hive-partitioned, one folder per process: ``<output>/hostname=<host>/process=<pid>/
part-<n>.parquet``. Processes write side by side without coordination, each part appears whole
(``recfn.formats.files.write_atomic``), and a process that dies loses only its unwritten rows.
Every part has every column of the schema (unused ones all null), so that readers which take one
file's schema for all (DuckDB, polars, pyarrow.dataset) read a dataset whole; ``recfn.load``
leaves the unused ones out again.

A capture accounts for itself. It writes its start mark as a part of its own when it starts (the
folder then says that it started, and when), and each part says what the capture had written so far and when
(``recfn.stream``): a process killed before it stopped is known to have lost only what it
recorded after its last part (``recfn.formats.dataset.unfinished_captures``). Parts are written

- by the recording thread, when its buffer is full (``Recorder.spill``: ``spill_rows``) or when
  the unwritten events of every thread together reach half of ``max_events``
  (``Recorder.spill_total``), so several busy threads write rather than drop;
- for every thread at once (``flush``), when an event would be dropped (``Recorder.relieve``:
  writing wins over dropping whenever the disk allows) and every ``flush_interval`` seconds
  from a helper thread, so a SIGKILL loses at most that much.

A thread's own buffer is taken (its rows leave it); another thread's, which goes on recording
meanwhile, is read as it is (``_Frozen``) and the rows written are remembered (``_seen``), so
each event is written exactly once. A range still open (an ancestor of the running code) is
held back, by reference to its row, and written in a later part once it has ended. A part that
cannot be written is counted as dropped; one interrupted by Ctrl-C (or another exception that is
not an ``Exception``) is kept and written later, by the next part or at ``stop()``.
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Optional, Union, cast

import numpy as np

from recfn.capture import _identity
from recfn.capture._recorder import Recorder, _Chunk, _ThreadBuffer
from recfn.capture._table import DECODED_COLUMNS, DecodedRows, decode_chunk
from recfn.formats.dataset import PROCESS_FOLDER, RUN_ENV
from recfn.native.constants import CHUNK_ROWS

if TYPE_CHECKING:
    import pyarrow as pa

PART_PATTERN = "part-*.parquet"


def process_folder(output: str, host: str, pid: int) -> str:
    """The folder of one process's parts inside the dataset ``output``."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host) or "_"
    return os.path.join(output, f"hostname={safe}", f"{PROCESS_FOLDER}{pid}")


def spill_rows(max_events: int) -> int:
    """Rows a thread's buffer holds before it is written out: half of ``max_events`` (at least
    one chunk, at most about a million rows, some 40 MB)."""
    return int(max(CHUNK_ROWS, min(max_events // 2, 64 * CHUNK_ROWS)))


@dataclass
class _Held:
    """A range that was open when its buffer was written: where its row lives, and its extras."""

    chunk: _Chunk
    row: int
    extras: Optional[tuple[Any, ...]]  # args, shapes, dtypes, flops
    sequence: Optional[tuple[int, int]]  # sequence_nr, fwd_thread_id
    stack: Optional[int]  # its node in the recorder's FrameTable (with_stack)


def _held_rows(held: list[_Held], tid: int) -> DecodedRows:
    """The held rows, decoded from their chunks as they are now (their ends written since;
    copied first, as the chunk's thread may be appending to it)."""
    decoded: dict[int, dict[str, np.ndarray]] = {}
    for h in held:
        if id(h.chunk) not in decoded:
            decoded[id(h.chunk)] = decode_chunk(cast(_Chunk, _FrozenChunk(h.chunk)), tid)
    columns = {}
    for field, dtype in DECODED_COLUMNS:
        values = [decoded[id(h.chunk)][field][h.row] for h in held]
        columns[field] = np.array(values, dtype=dtype)
    return DecodedRows(columns)


class _Snapshot:
    """What ``recfn.capture._table.build_table`` reads of a thread buffer, for the rows being written."""

    def __init__(self, buf: _ThreadBuffer, held: list[_Held]) -> None:
        front = len(held)
        self.tid = buf.tid
        self.thread_name = buf.thread_name
        self.chunks: list[Any] = [_held_rows(held, int(buf.tid)), *buf.chunks]
        self.rows = front + int(buf.rows)
        carried = [i for i, h in enumerate(held) if h.extras is not None]
        extras = [cast(tuple[Any, ...], held[i].extras) for i in carried]
        self.extra_rows = carried + [int(r) + front for r in buf.extra_rows]
        self.extra_args = [e[0] for e in extras] + list(buf.extra_args)
        self.extra_shapes = [e[1] for e in extras] + list(buf.extra_shapes)
        self.extra_dtypes = [e[2] for e in extras] + list(buf.extra_dtypes)
        self.extra_flops = [e[3] for e in extras] + list(buf.extra_flops)
        numbered = [i for i, h in enumerate(held) if h.sequence is not None]
        sequences = [cast(tuple[int, int], held[i].sequence) for i in numbered]
        self.seq_rows = np.concatenate(
            [np.array(numbered, np.int64), _ints(buf.seq_rows) + front]
        ).astype(np.int64)
        self.seq_vals = np.concatenate(
            [np.array([s[0] for s in sequences], np.int64), _ints(buf.seq_vals)]
        )
        self.fwd_vals = np.concatenate(
            [np.array([s[1] for s in sequences], np.int64), _ints(buf.fwd_vals)]
        )
        stacked = [i for i, h in enumerate(held) if h.stack is not None]
        self.stack_rows = np.concatenate(
            [np.array(stacked, np.int64), _ints(buf.stack_rows) + front]
        ).astype(np.int64)
        self.stack_nodes = np.concatenate(
            [np.array([held[i].stack for i in stacked], np.int64), _ints(buf.stack_nodes)]
        )
        self.mem_rows = _ints(buf.mem_rows) + front
        self.mem_bytes = _ints(buf.mem_bytes)
        self.mem_devices = list(buf.mem_devices)
        self.source_chunks: list[Any] = list(buf.chunks)
        self.held = held

    def locate(self, row: int) -> tuple[Any, int]:
        """The chunk (the recorder's own, not a frozen copy of it) and the row within it of
        snapshot row ``row`` (past the held rows)."""
        row -= len(self.held)
        for chunk in self.source_chunks:
            size = len(chunk.seqs)
            if row < size:
                return getattr(chunk, "source", chunk), row
            row -= size
        raise IndexError(row)


def _ints(vector: Any) -> np.ndarray:
    return (
        np.frombuffer(memoryview(vector), dtype=np.int64) if len(vector) else np.empty(0, np.int64)
    )


class _RecorderView:
    """What ``build_table`` reads of the recorder, with one snapshot as its only buffer (or
    none: an empty table)."""

    def __init__(self, recorder: Recorder, snapshot: Optional[_Snapshot]) -> None:
        self.buffers = [] if snapshot is None else [snapshot]
        self.name_list = list(recorder.name_list)
        self.pid = recorder.pid
        self.dropped = 0
        self.report_input_shapes = recorder.report_input_shapes
        self.with_stack = recorder.with_stack
        self.with_flops = recorder.with_flops
        self.profile_memory = recorder.profile_memory
        self.frames = recorder.frames


def open_ranges(table: pa.Table) -> pa.ChunkedArray:
    """Per row of ``table``: whether it is a range that has not ended."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.and_(
        pc.is_null(table.column("end_ns")),
        pc.equal(table.column("kind").cast(pa.string()), "range"),
    )


class _FrozenChunk:
    """A chunk's rows as they are now, cut to the rows every column already has (another
    thread may be appending to it); ``source`` is the chunk itself."""

    def __init__(self, chunk: _Chunk) -> None:
        self.source = chunk
        vecs = (chunk.seqs, chunk.parents, chunk.gaps, chunk.spans, chunk.names, chunk.meta)
        n = min(len(v) for v in vecs)
        self.seqs, self.parents, self.gaps, self.spans, self.names, self.meta = (
            _copy(v, np.int32)[:n] for v in vecs
        )
        self.big_start_rows, self.big_starts = _side(n, chunk.big_start_rows, chunk.big_starts)
        self.big_end_rows, self.big_ends = _side(n, chunk.big_end_rows, chunk.big_ends)


def _copy(vector: Any, dtype: Any) -> np.ndarray:
    if not len(vector):
        return np.empty(0, dtype=dtype)
    return np.frombuffer(memoryview(vector), dtype=dtype).copy()


class _Frozen:
    """What ``_Snapshot`` reads of a thread buffer, frozen: its chunks and the side columns of
    their rows (the buffer's thread goes on recording)."""

    def __init__(self, buf: _ThreadBuffer) -> None:
        self.tid = buf.tid
        self.thread_name = buf.thread_name
        self.chunks = [_FrozenChunk(chunk) for chunk in list(buf.chunks)]
        rows = sum(len(chunk.seqs) for chunk in self.chunks)
        self.rows = rows
        extras = list(
            zip(
                list(buf.extra_rows),
                list(buf.extra_args),
                list(buf.extra_shapes),
                list(buf.extra_dtypes),
                list(buf.extra_flops),
            )
        )
        extras = [e for e in extras if e[0] < rows]
        self.extra_rows = [e[0] for e in extras]
        self.extra_args = [e[1] for e in extras]
        self.extra_shapes = [e[2] for e in extras]
        self.extra_dtypes = [e[3] for e in extras]
        self.extra_flops = [e[4] for e in extras]
        self.seq_rows, self.seq_vals, self.fwd_vals = _side(
            rows, buf.seq_rows, buf.seq_vals, buf.fwd_vals
        )
        self.stack_rows, self.stack_nodes = _side(rows, buf.stack_rows, buf.stack_nodes)
        mem_rows, mem_bytes = _side(rows, buf.mem_rows, buf.mem_bytes)
        devices = list(buf.mem_devices)[: len(mem_rows)]
        self.mem_rows, self.mem_bytes = mem_rows[: len(devices)], mem_bytes[: len(devices)]
        self.mem_devices = devices


def _side(rows: int, row_vector: Any, *value_vectors: Any) -> tuple[np.ndarray, ...]:
    """A sparse side column: its row numbers below ``rows`` and their values, cut alike."""
    n = min(len(row_vector), *(len(v) for v in value_vectors))
    row_numbers = _copy(row_vector, np.int64)[:n]
    inside = row_numbers < rows
    return (
        row_numbers[inside],
        *(_copy(v, np.int64)[:n][inside] for v in value_vectors),
    )


class BufferTaker:
    """Takes thread buffers from the recorder (its ``spill`` hook) as Arrow tables, ranges
    still open held back until they end; a subclass keeps the tables (``_save``)."""

    def __init__(self, recorder: Recorder, config: dict[str, Any], start_ns: int) -> None:
        self.recorder = recorder
        self.config = config
        self.start_ns = start_ns
        self.errors: list[str] = []  # tables that could not be kept (their rows are dropped)
        self._held: dict[int, list[_Held]] = {}
        self._seen: dict[int, int] = {}  # rows of a thread's buffer written (or held) already
        self._lock = threading.Lock()
        self._take_lock = threading.Lock()  # one take at a time: buffers, _held, _seen, _unsaved
        self._unsaved: list[pa.Table] = []  # taken, not kept yet (see `_take`)
        self._busy = threading.local()

    def busy(self) -> bool:
        """Whether this thread is taking or writing buffers now (a signal handler that runs on
        it must not start another take)."""
        return bool(getattr(self._busy, "on", False))

    def spill(self, buf: _ThreadBuffer) -> None:
        """The recorder's hook: take ``buf``'s rows (from its own thread, while recording)."""
        if self.busy():
            return
        self._busy.on = True
        try:
            self._write(buf, final=False)
        except Exception as exc:  # a full disk must not break the program: the loss is counted
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._busy.on = False
            self._after_write()

    def _after_write(self) -> None:
        """Called on a thread that has just finished taking or writing (``spill``, ``flush``)."""

    def _write(self, buf: _ThreadBuffer, *, final: bool, wall_ns: Optional[int] = None) -> None:
        """Take ``buf``'s rows and the held ones, and keep them and any other unsaved ones."""
        self._take(buf, final=final, freeze=False, wall_ns=wall_ns)
        self._keep_unsaved(wall_ns)

    def _keep_unsaved(self, wall_ns: Optional[int]) -> None:
        """`_keep` the unsaved tables, oldest first, each leaving them once kept, or once
        counted as dropped when it cannot be. A Ctrl-C leaves the rest for the next write; as
        it can come between a table's save and its leaving, `_save` must ignore a table it has
        just saved."""
        while self._unsaved:
            table = self._unsaved[0]
            try:
                self._keep(table, wall_ns)
            except Exception:
                del self._unsaved[0]  # counted as dropped by _keep
                raise
            del self._unsaved[0]

    def _take(
        self, buf: _ThreadBuffer, *, final: bool, freeze: bool, wall_ns: Optional[int]
    ) -> int:
        """Append to the unsaved ones (``_unsaved``, under the lock that `DatasetWriter._save`
        takes them under) the rows of ``buf`` not written yet and its held ones, as a table
        (none when there are no rows); ranges still open are held again (unless ``final``).
        Returns the rows taken. ``freeze``: ``buf`` belongs to another thread, which goes on
        recording into it: its rows are read, not taken, and remembered as seen. The rows of
        the table leave the recorder's event count; if no table can be made, the rows are
        counted as dropped (and the exception raised). A Ctrl-C (any exception that is no
        ``Exception``) at any point after the rows left ``buf`` does not lose them: the table
        is with the unsaved ones or, if the interrupt came before it got there, made (again)
        and put there before the interrupt propagates."""
        with self._take_lock:
            tid = int(buf.tid)
            source: Union[_ThreadBuffer, _Frozen] = _Frozen(buf) if freeze else buf
            rows = int(source.rows)
            seen = self._seen.get(tid, 0)
            pending = rows - seen + len(self._held.get(tid, ()))  # counted in recorder.events
            if pending <= 0:
                return 0
            held = self._held.pop(tid, [])
            self._seen.pop(tid, None)
            cleared = False
            snapshot: Optional[_Snapshot] = None
            table: Optional[pa.Table] = None
            counted = False
            try:
                snapshot = _Snapshot(cast(_ThreadBuffer, source), held)
                if freeze:
                    self._seen[tid] = rows
                else:
                    buf.clear()  # rows recorded from here on (this thread's, even now) stay
                    cleared = True
                table = self._rows_of(snapshot, tid, seen, final, wall_ns)
                if table.num_rows:
                    self._unsaved.append(table)  # handed over: an interrupt now loses nothing
                self.recorder.events -= table.num_rows  # the ranges held again stay counted
                counted = True
            except BaseException as exc:
                interrupt = not isinstance(exc, Exception)
                if table is None and snapshot is not None and (freeze or cleared) and interrupt:
                    try:  # the interrupt is spent: the same rows, once more
                        table = self._rows_of(snapshot, tid, seen, final, wall_ns)
                    except BaseException:
                        table = None
                if table is None:
                    self.recorder.dropped += pending
                    self.recorder.events -= pending
                    self._held.pop(tid, None)  # ranges this take held are counted here too
                    if not freeze and not cleared:
                        buf.clear()
                else:
                    if not counted:
                        self.recorder.events -= table.num_rows
                    if table.num_rows and not any(t is table for t in self._unsaved):
                        self._unsaved.append(table)
                raise
            return int(table.num_rows)

    def _rows_of(
        self, snapshot: _Snapshot, tid: int, seen: int, final: bool, wall_ns: Optional[int]
    ) -> pa.Table:
        """`_take`'s table of ``snapshot``: the rows a freeze wrote before left out, and (unless
        ``final``) the ranges still open held for a later table instead (``_held``)."""
        import pyarrow.compute as pc

        held = snapshot.held
        table = self._table(snapshot, 0 if wall_ns is None else wall_ns)
        keep = np.ones(table.num_rows, dtype=bool)
        keep[len(held) : len(held) + seen] = False  # written before: by a freeze
        if not final:
            still_open = open_ranges(table).to_numpy(zero_copy_only=False) & keep
            open_rows = np.flatnonzero(still_open)
            if open_rows.size:
                self._held[tid] = [self._hold(snapshot, int(r)) for r in open_rows]
                keep &= ~still_open
        if not keep.all():
            table = table.filter(pc.equal(pc.cast(_bools(keep), "int8"), 1))
        return table

    def _keep(self, table: pa.Table, wall_ns: Optional[int]) -> None:
        """``_save`` the table; rows that cannot be saved are counted as dropped (and the
        exception raised)."""
        try:
            self._save(table, wall_ns)
        except Exception:
            self.recorder.dropped += int(table.num_rows)
            raise

    def _table(self, snapshot: _Snapshot, wall_ns: int) -> pa.Table:
        """The rows of ``snapshot`` as a table."""
        from recfn.capture._table import build_table

        return build_table(
            cast(Recorder, _RecorderView(self.recorder, snapshot)),
            start_ns=self.start_ns,
            node_id=self.recorder.node_id,
            config=self.config,
            wall_ns=wall_ns,
        )

    def _hold(self, snapshot: _Snapshot, row: int) -> _Held:
        if row < len(snapshot.held):
            return snapshot.held[row]
        chunk, offset = snapshot.locate(row)
        extras = None
        if row in snapshot.extra_rows:
            i = snapshot.extra_rows.index(row)
            extras = (
                snapshot.extra_args[i],
                snapshot.extra_shapes[i],
                snapshot.extra_dtypes[i],
                snapshot.extra_flops[i],
            )
        sequence = None
        found = np.flatnonzero(snapshot.seq_rows == row)
        if found.size:
            i = int(found[0])
            sequence = (int(snapshot.seq_vals[i]), int(snapshot.fwd_vals[i]))
        stack = None
        found = np.flatnonzero(snapshot.stack_rows == row)
        if found.size:
            stack = int(snapshot.stack_nodes[int(found[0])])
        return _Held(chunk, offset, extras, sequence, stack)

    def _save(self, table: pa.Table, wall_ns: Optional[int]) -> None:
        raise NotImplementedError


def _bools(mask: np.ndarray) -> Any:
    import pyarrow as pa

    return pa.array(mask.view(np.int8))


START_MARK: Final = "__start_profile"
"""The mark a profile records when it starts (a streaming one writes it as its first part)."""
FLUSH_FRACTION: Final = 2
"""Threads write their buffers once the unwritten events of all of them reach
``max_events // FLUSH_FRACTION``."""
RELIEVE_PAUSE_S: Final = 0.05
"""After a ``relieve`` that could write nothing (the disk fails, or open ranges fill the
budget), the next one waits this long: events are dropped meanwhile, without a write tried for
each."""

_numbers_lock = threading.Lock()
_next_numbers: dict[str, int] = {}  # process folder -> next part number, for every capture here


def _claim_part_number(folder: str) -> int:
    """A part number no capture of this process has used in ``folder`` (two profiles writing
    into one folder at once never overwrite each other's parts), past those already there."""
    with _numbers_lock:
        number = _next_numbers.get(folder)
        if number is None:
            taken = [
                int(m.group(1))
                for path in glob.glob(os.path.join(glob.escape(folder), PART_PATTERN))
                if (m := re.search(r"part-(\d+)\.parquet$", path))
            ]
            number = max(taken, default=-1) + 1
        _next_numbers[folder] = number + 1
        return number


def _forget_numbers() -> None:
    """A forked child writes into its own folder: the parent's numbers are not its."""
    global _numbers_lock
    _numbers_lock = threading.Lock()
    _next_numbers.clear()


os.register_at_fork(after_in_child=_forget_numbers)


class DatasetWriter(BufferTaker):
    """Writes one process's capture as parts of a Hive-partitioned Parquet dataset."""

    def __init__(
        self,
        output: str,
        recorder: Recorder,
        config: dict[str, Any],
        start_ns: int,
        *,
        flush_interval: Optional[float] = None,
        run: Optional[str] = None,
    ):
        super().__init__(recorder, config, start_ns)
        self.output = output
        self.folder = process_folder(output, _identity.host(), recorder.pid)
        os.makedirs(self.folder, exist_ok=True)
        self.files: list[str] = []
        self.capture = uuid.uuid4().hex[:16]
        self.run = run if run is not None else os.environ.get(RUN_ENV) or None
        self.flush_interval = flush_interval
        self.error: Optional[str] = None  # how the capture ended, for its last part
        self._dropped_written = 0
        self._written = 0  # rows in the parts written so far
        self._flusher: Optional[_Flusher] = None
        self._relieved_at = 0.0  # time.monotonic() of a relieve that could write nothing
        self._first = False  # the next part is the first, written by attach()
        self._relieving = threading.Lock()  # one relieve at a time; the others wait for it
        self.after_write: Optional[Any] = None  # called once a take or write on a thread ends

    def attach(self, max_events: int) -> None:
        """Record the start mark and write it as the first part, which says that the capture
        started (and when); then hook into the recorder, so that parts are written as its
        buffers fill, and on time. Raises when the first part cannot be written: the capture
        has not started."""
        from recfn.capture._recorder import KIND_MARK
        from recfn.engine.ranges import _thread_data

        self.recorder.record_instant(START_MARK, KIND_MARK, 0, "")
        buf = self.recorder.thread_buffers[int(_thread_data().tid)]
        taken = self._take(buf, final=False, freeze=False, wall_ns=None)
        assert taken  # the mark
        self._first = True
        self._save(None, None)
        self.recorder.spill_rows = spill_rows(max_events)
        self.recorder.spill_total = max(max_events // FLUSH_FRACTION, 1)
        self.recorder.spill = self.spill
        self.recorder.relieve = self.relieve
        if self.flush_interval is not None:
            self._flusher = _Flusher(self, self.flush_interval)
            self._flusher.start()

    def relieve(self) -> bool:
        """The recorder's hook when an event would be dropped: write every buffer out now,
        and let the event in when that made room (the threads that wait for the write, one
        event each, may go a little past ``max_events``). Threads that need room meanwhile
        wait for that write rather than drop: the program slows down while the disk catches
        up. False (the event is dropped) when this thread is writing already, or when nothing
        could be written (the disk fails, or open ranges fill the budget; then for
        ``RELIEVE_PAUSE_S`` no write is tried)."""
        if self.busy():
            return False
        recorder = self.recorder
        with self._relieving:
            if int(recorder.events) < int(recorder.max_events):
                return True  # another thread made room while this one waited
            if time.monotonic() - self._relieved_at < RELIEVE_PAUSE_S:
                return False
            if self.flush() or int(recorder.events) < int(recorder.max_events):
                return True
            self._relieved_at = time.monotonic()
            return False

    def flush(self) -> int:
        """Write what every thread has recorded and not written yet, as one part: this
        thread's buffer is taken, the others' read as they are (they go on recording). A
        failure is counted as dropped and said at ``stop()``. Returns the rows written."""
        if self.busy():
            return 0
        written = 0
        self._busy.on = True
        try:
            here = _this_thread_id()
            taken = 0
            for buf in list(self.recorder.buffers):
                try:  # the table goes with the unsaved ones: a Ctrl-C leaves it to a later part
                    taken += self._take(buf, final=False, freeze=int(buf.tid) != here, wall_ns=None)
                except Exception as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
            if taken:
                self._save(None, None)
                written = taken
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._busy.on = False
            self._after_write()
        return written

    def _after_write(self) -> None:
        hook = self.after_write
        if hook is not None:
            hook()

    def stop_flushing(self) -> None:
        """No more parts on time (``flush_interval``): the capture is stopping."""
        if self._flusher is not None:
            self._flusher.stop()

    def finish(self, wall_ns: int, error: Optional[str] = None) -> list[str]:
        """Write every buffer's remaining rows (open ranges as open), the last part carrying
        the wall time (and ``error``, how the capture ended); returns all parts written. A
        part that cannot be written is counted as dropped, and said by ``errors``."""
        self.recorder.spill = None
        self.recorder.relieve = None
        self.stop_flushing()
        self.error = error

        taken = 0
        for buf in list(self.recorder.buffers):
            try:  # with the unsaved ones: a Ctrl-C leaves them to a later finish
                taken += self._take(buf, final=True, freeze=False, wall_ns=wall_ns)
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
        if not taken:  # the last table says the wall time, and an empty part that it stopped
            from recfn.capture._table import build_table

            last = build_table(
                cast(Recorder, _RecorderView(self.recorder, None)),
                start_ns=self.start_ns,
                node_id=self.recorder.node_id,
                config=self.config,
                wall_ns=wall_ns,
            )
            with self._take_lock:
                self._unsaved.append(last)
        try:
            self._save(None, wall_ns)
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        return list(self.files)

    def _write(self, buf: _ThreadBuffer, *, final: bool, wall_ns: Optional[int] = None) -> None:
        """`BufferTaker._write`, the table taken straight into the unsaved ones: a Ctrl-C from
        the moment its rows left ``buf`` leaves them to a later part."""
        if self._take(buf, final=final, freeze=False, wall_ns=wall_ns):
            self._save(None, wall_ns)

    def _save(self, table: Optional[pa.Table], wall_ns: Optional[int]) -> None:
        """Write ``table`` (if any) as the next part, after the tables taken and not written yet
        (``_unsaved``: `_take` put them there, or a Ctrl-C left them); nothing when another
        thread wrote them already. A Ctrl-C at any point leaves them all for the next part;
        another failure counts the unsaved rows as dropped (`_keep` counts ``table``'s) and
        raises."""
        given = [] if table is None else [table]
        unsaved: list[pa.Table] = []
        was_first = self._first
        try:
            with self._take_lock:  # takes hand their tables over under it
                unsaved, self._unsaved = self._unsaved, []
            if unsaved or given:
                self._write_part([*unsaved, *given], wall_ns)
        except BaseException as exc:
            self._first = was_first
            if isinstance(exc, Exception):
                self.recorder.dropped += sum(int(t.num_rows) for t in unsaved)
            else:  # Ctrl-C: the rows go with the next part
                with self._take_lock:
                    self._unsaved = [*unsaved, *given, *self._unsaved]
            raise

    def _write_part(self, tables: list[pa.Table], wall_ns: Optional[int]) -> None:
        """``tables`` as one part, written whole or not at all."""
        table = tables[0] if len(tables) == 1 else _concatenated(tables, tables[-1].schema.metadata)
        number = _claim_part_number(self.folder)
        with self._lock:
            dropped = int(self.recorder.dropped) - self._dropped_written
            self._dropped_written += dropped
            written = self._written
        try:
            self._write_table(table, number, dropped, written, wall_ns)
        except BaseException:
            with self._lock:  # the next part reports these drops instead
                self._dropped_written -= dropped
            raise

    def _write_table(
        self, table: pa.Table, number: int, dropped: int, written: int, wall_ns: Optional[int]
    ) -> None:
        from recfn.formats import schema
        from recfn.formats.files import write_atomic
        from recfn.formats.io import write_parquet

        metadata = schema.metadata_of(table)
        metadata[schema.DROPPED_EVENTS_KEY] = str(dropped)
        metadata[schema.PART_KEY] = str(number)
        facts = {
            "capture": self.capture,
            "run": self.run,
            "written_ns": time.time_ns(),
            "events": written + table.num_rows,
            "flush_interval_s": self.flush_interval,
        }
        if self._first:  # the part that says the capture started: its start mark only
            facts["first"] = True
            self._first = False
        metadata[schema.STREAM_KEY] = json.dumps(facts, sort_keys=True)
        if wall_ns is None:  # only the last part knows the capture's wall time
            metadata.pop(schema.WALL_NS_KEY, None)
        elif self.error is not None:
            metadata[schema.ERROR_KEY] = self.error
        table = schema.with_every_column(table).replace_schema_metadata(metadata)
        path = os.path.join(self.folder, f"part-{number:05d}.parquet")
        write_atomic(path, lambda temporary: write_parquet(table, temporary))
        with self._lock:
            self._written += table.num_rows
            self.files.append(path)


def _concatenated(tables: list[pa.Table], metadata: Any) -> pa.Table:
    """``tables`` as one (columns promoted, dictionaries unified), with ``metadata``."""
    import pyarrow as pa

    joined = pa.concat_tables(
        [t.replace_schema_metadata(None) for t in tables], promote_options="default"
    ).unify_dictionaries()
    return joined.replace_schema_metadata(metadata)


def _this_thread_id() -> int:
    """The engine's id of the calling thread (``_ThreadBuffer.tid``)."""
    from recfn.engine.ranges import _thread_data

    return int(_thread_data().tid)


SYNCHRONOUS_SIGNALS: Final = frozenset(
    getattr(signal, name)
    for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT", "SIGTRAP", "SIGSYS")
    if hasattr(signal, name)
)
"""Signals a thread raises itself (a fault): never blocked."""


def block_async_signals() -> None:
    """Keep every other signal off the calling (helper) thread. The system hands a signal sent
    to the process to any thread that does not block it; Python runs its handler on the main
    thread only, when that thread runs Python again, so a signal taken by a helper while the
    main thread waits in a blocking call (a pool worker waiting for work when the pool's
    SIGTERM comes) never runs its handler, and the process never ends."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - SYNCHRONOUS_SIGNALS)


class _Flusher:
    """Writes every buffer out every ``interval`` seconds (``DatasetWriter.flush``), from a
    daemon thread, until ``stop()``."""

    def __init__(self, writer: DatasetWriter, interval: float) -> None:
        self.writer = writer
        self.interval = interval
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="recfn-flush", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        from recfn.engine.registry import DisableRecordFunctionGuard

        block_async_signals()
        with DisableRecordFunctionGuard():  # its own work is not the program's
            while not self.done.wait(self.interval):
                self.writer.flush()

    def stop(self) -> None:
        self.done.set()
        if self.thread is not threading.current_thread():
            self.thread.join()
