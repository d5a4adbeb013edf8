"""Streaming capture into a dataset: ``profile(output="traces/")`` writes full thread buffers
to new Parquet parts as it records, so memory stays bounded however long the process runs.

The layout is Hive-partitioned, one folder per process: ``<output>/hostname=<host>/process=<pid>/
part-<n>.parquet``. Processes write side by side without coordination, each part appears whole
(``recfn.formats.files.write_atomic``), and a process that dies loses only its unwritten rows.

The recorder calls ``DatasetWriter.spill`` from the recording thread when a thread's buffer is
full (``Recorder.spill``); the writer takes the buffer's rows, clears it and writes a part. A
range still open then (an ancestor of the running code) is held back, by reference to its row,
and written in a later part once it has ended, so each event is written exactly once.
"""

from __future__ import annotations

import glob
import os
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, cast

import numpy as np

from recfn.capture import _identity
from recfn.capture._recorder import Recorder, _Chunk, _ThreadBuffer
from recfn.capture._table import DECODED_COLUMNS, DecodedRows, decode_chunk
from recfn.formats.dataset import PROCESS_FOLDER
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
    """The held rows, decoded from their chunks as they are now (their ends written since)."""
    decoded: dict[int, dict[str, np.ndarray]] = {}
    for h in held:
        if id(h.chunk) not in decoded:
            decoded[id(h.chunk)] = decode_chunk(h.chunk, tid)
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
        """The chunk and the row within it of snapshot row ``row`` (past the held rows)."""
        row -= len(self.held)
        for chunk in self.source_chunks:
            size = len(chunk.seqs)
            if row < size:
                return chunk, row
            row -= size
        raise IndexError(row)


def _ints(vector: Any) -> np.ndarray:
    return (
        np.frombuffer(memoryview(vector), dtype=np.int64) if len(vector) else np.empty(0, np.int64)
    )


class _RecorderView:
    """What ``build_table`` reads of the recorder, with one snapshot as its only buffer."""

    def __init__(self, recorder: Recorder, snapshot: _Snapshot) -> None:
        self.buffers = [snapshot]
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


class BufferTaker:
    """Takes full thread buffers from the recorder (its ``spill`` hook) as Arrow tables, ranges
    still open held back until they end; a subclass keeps the tables (``_save``)."""

    def __init__(self, recorder: Recorder, config: dict[str, Any], start_ns: int) -> None:
        self.recorder = recorder
        self.config = config
        self.start_ns = start_ns
        self.errors: list[str] = []  # tables that could not be kept (their rows are dropped)
        self._held: dict[int, list[_Held]] = {}
        self._lock = threading.Lock()
        self._busy = threading.local()

    def spill(self, buf: _ThreadBuffer) -> None:
        """The recorder's hook: take ``buf``'s rows (from its own thread, while recording)."""
        if getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            self._write(buf, final=False)
        except Exception as exc:  # a full disk must not break the program: the loss is counted
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._busy.on = False

    def _write(self, buf: _ThreadBuffer, *, final: bool, wall_ns: Optional[int] = None) -> None:
        """Take ``buf``'s rows and the held ones; those written (or lost, if this raises) leave
        the recorder's event count, and lost ones are counted as dropped."""
        import pyarrow.compute as pc

        held = self._held.pop(int(buf.tid), [])
        taken = int(buf.rows) + len(held)  # counted in recorder.events until written or lost
        taken_from_buffer = False
        try:
            snapshot = _Snapshot(buf, held)
            buf.clear()  # rows recorded from here on (this thread's, even during the write) stay
            taken_from_buffer = True
            table = self._table(snapshot, 0 if wall_ns is None else wall_ns)
            if not final:
                still_open = open_ranges(table)
                rows = np.flatnonzero(still_open.to_numpy(zero_copy_only=False))
                if rows.size:
                    self._held[int(buf.tid)] = [self._hold(snapshot, int(r)) for r in rows]
                    table = table.filter(pc.invert(still_open))
            taken = table.num_rows  # the ranges held again stay counted
            if taken:
                self._save(table, wall_ns)
        except Exception:
            self.recorder.dropped += taken
            if not taken_from_buffer:
                buf.clear()
            raise
        finally:
            self.recorder.events -= taken

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


class DatasetWriter(BufferTaker):
    """Writes one process's capture as parts of a Hive-partitioned Parquet dataset."""

    def __init__(self, output: str, recorder: Recorder, config: dict[str, Any], start_ns: int):
        super().__init__(recorder, config, start_ns)
        self.output = output
        self.folder = process_folder(output, _identity.host(), recorder.pid)
        os.makedirs(self.folder, exist_ok=True)
        self.files: list[str] = []
        self._dropped_written = 0
        taken = [
            int(m.group(1))
            for path in glob.glob(os.path.join(self.folder, PART_PATTERN))
            if (m := re.search(r"part-(\d+)\.parquet$", path))
        ]
        self._next = max(taken, default=-1) + 1

    def attach(self, max_events: int) -> None:
        self.recorder.spill_rows = spill_rows(max_events)
        self.recorder.spill = self.spill

    def finish(self, wall_ns: int) -> list[str]:
        """Write every buffer's remaining rows (open ranges as open); returns all parts."""
        self.recorder.spill = None
        for buf in list(self.recorder.buffers):
            self._write(buf, final=True, wall_ns=wall_ns)
        return list(self.files)

    def _save(self, table: pa.Table, wall_ns: Optional[int]) -> None:
        from recfn.formats import schema
        from recfn.formats.files import write_atomic
        from recfn.formats.io import write_parquet

        with self._lock:
            number = self._next
            self._next += 1
            dropped = int(self.recorder.dropped) - self._dropped_written
            self._dropped_written += dropped
        metadata = schema.metadata_of(table)
        metadata[schema.DROPPED_EVENTS_KEY] = str(dropped)
        metadata[schema.PART_KEY] = str(number)
        if wall_ns is None:  # only the last part knows the capture's wall time
            metadata.pop(schema.WALL_NS_KEY, None)
        table = table.replace_schema_metadata(metadata)
        path = os.path.join(self.folder, f"part-{number:05d}.parquet")
        try:
            write_atomic(path, lambda temporary: write_parquet(table, temporary))
        except BaseException:
            with self._lock:  # the next part reports these drops instead
                self._dropped_written -= dropped
            raise
        with self._lock:
            self.files.append(path)
