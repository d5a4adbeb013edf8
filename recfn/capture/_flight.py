"""The flight recorder: ``profile(flight_recorder=N)`` keeps only the last N events in memory and
writes them when something goes wrong (an exception, a signal) or when asked (``profile.dump``).

Full thread buffers are taken by the recorder's spill hook as a streaming capture takes them
(``recfn.capture._stream.BufferTaker``: a range still open is held back until it ends), but their rows
go into a ring of Arrow tables in memory instead of files. After each spill the ring is cut to
its newest N events by start time (ties kept), so memory holds at least the last N events,
at most N plus each thread's buffer not yet spilled (``SPILL_ROWS`` = 65,536 events)
plus the ranges still open.

A dump reads the ring, the held ranges and every thread's buffer without taking them, so the
program goes on recording. It keeps the newest N events (ordered by start, thread, id) and
every range still open (``end_ns`` null, as in a profile stopped inside a range); an event whose
parent is not in the dump becomes a root (``parent_id`` null, ``depth`` unchanged), so the dump
is a complete trace. Its ``recfn.flight_recorder`` metadata says why it was written, the ring's
capacity, how many events it discarded, how many parents it cut and how many ranges were open.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Final, Optional, cast

import numpy as np

from recfn.capture import _identity
from recfn.capture._recorder import Recorder, _ThreadBuffer
from recfn.capture._stream import BufferTaker, _Frozen, _Snapshot, open_ranges

if TYPE_CHECKING:
    import pyarrow as pa

# Rows a thread's buffer holds before the ring takes them: each take sorts and cuts the ring, so
# larger takes cost less per event and add to the memory slack.
SPILL_ROWS: Final = 1 << 16


class FlightRing(BufferTaker):
    """The ring of one flight-recording profile (``capacity``: N)."""

    def __init__(
        self, recorder: Recorder, config: dict[str, Any], start_ns: int, capacity: int
    ) -> None:
        super().__init__(recorder, config, start_ns)
        self.capacity = capacity
        self.discarded = 0  # events cut from the ring so far
        self._tables: list[tuple[pa.Table, np.ndarray]] = []  # a table and its sorted starts
        self._saved_last: Optional[pa.Table] = None  # the table last added, as it was given

    def attach(self) -> None:
        self.recorder.spill_rows = SPILL_ROWS
        self.recorder.spill = self.spill

    @property
    def retained(self) -> int:
        """Events held in memory: the ring's, the held ranges' and the threads' buffers'."""
        with self._lock:
            ring = sum(table.num_rows for table in self._ring_tables())
            held = sum(len(h) for h in self._held.values())
        return int(ring + held + sum(int(buf.rows) for buf in list(self.recorder.buffers)))

    def spill(self, buf: _ThreadBuffer) -> None:
        """Take ``buf``'s rows into the ring; a dump waits until they are there."""
        with self._lock:
            super().spill(buf)
            if not self._unsaved:  # every table is in the ring: none to recognise again
                self._saved_last = None

    def _ring_tables(self) -> list[pa.Table]:
        """The ring's tables and the spilled ones a Ctrl-C kept from it so far (the next spill
        adds them)."""
        pending = [table for table in self._unsaved if table is not self._saved_last]
        return [table for table, _ in self._tables] + pending

    def _save(self, table: pa.Table, wall_ns: Optional[int]) -> None:
        """Add a spilled table and cut the ring to its newest ``capacity`` events (the lock is
        held by ``spill``); nothing for the table added last (a Ctrl-C came before it left the
        unsaved ones: `_keep_unsaved`)."""
        if table is self._saved_last:
            return
        starts = np.sort(table.column("start_ns").to_numpy())
        # In one step with no call between them (so no signal handler either): added, marked.
        self._tables, self._saved_last = [*self._tables, (table, starts)], table
        total = sum(len(s) for _, s in self._tables)
        if total <= self.capacity:
            return
        cutoff = _kth_newest([s for _, s in self._tables], self.capacity)
        kept = []
        for table, starts in self._tables:
            first = int(np.searchsorted(starts, cutoff, side="left"))
            if first == len(starts):
                self.discarded += len(starts)
                continue
            if first:
                import pyarrow.compute as pc

                table = table.filter(pc.greater_equal(table.column("start_ns"), cutoff))
                self.discarded += first
                starts = starts[first:]
            kept.append((table, starts))
        self._tables = kept

    def snapshot(self, reason: str) -> pa.Table:
        """The dump: the newest ``capacity`` events and the ranges still open, as one table
        (see the module docstring); recording goes on meanwhile."""
        with self._lock:
            return self._snapshot(reason)

    def _snapshot(self, reason: str) -> pa.Table:
        import pyarrow as pa

        from recfn.formats import schema

        now = time.time_ns()
        parts = self._ring_tables()
        for buf in list(self.recorder.buffers):
            snap = _Snapshot(cast(_ThreadBuffer, _Frozen(buf)), list(self._held.get(buf.tid, [])))
            if snap.rows:
                parts.append(self._table(snap, 0))
        if parts:
            table = pa.concat_tables(
                [t.replace_schema_metadata(None) for t in parts], promote_options="default"
            ).unify_dictionaries()
        else:
            table = schema.empty_table()
        table, facts = _cut(table, self.capacity)
        facts["reason"] = reason
        facts["capacity"] = self.capacity
        facts["discarded"] += self.discarded
        metadata = schema.build_metadata(
            config=self.config,
            dropped_events=int(self.recorder.dropped),
            start_ns=self.start_ns,
            wall_ns=now - self.start_ns,
            pid=int(self.recorder.pid),
            host=_identity.host(),
            rank=_identity.rank(),
            local_rank=_identity.local_rank(),
            world_size=_identity.world_size(),
            flight_recorder=facts,
        )
        return table.combine_chunks().replace_schema_metadata(metadata)


def _kth_newest(sorted_starts: list[np.ndarray], k: int) -> int:
    """The largest time ``t`` with at least ``k`` starts at or after it (binary search over the
    sorted arrays: no concatenation, no sort of everything)."""
    low = min(int(s[0]) for s in sorted_starts if len(s))
    high = max(int(s[-1]) for s in sorted_starts if len(s))
    while low < high:
        middle = (low + high + 1) // 2
        newer = sum(len(s) - int(np.searchsorted(s, middle, side="left")) for s in sorted_starts)
        if newer >= k:
            low = middle
        else:
            high = middle - 1
    return low


def _cut(table: pa.Table, capacity: int) -> tuple[pa.Table, dict[str, Any]]:
    """The newest ``capacity`` rows (by start, thread, id) and every open range, ordered by id;
    parents outside them cut (null). Returns the table and what was discarded, cut and open."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    starts = table.column("start_ns").to_numpy()
    threads = table.column("thread_id").to_numpy()
    ids = table.column("id").to_numpy()
    is_open = open_ranges(table).to_numpy(zero_copy_only=False)
    keep = is_open.copy()
    keep[np.lexsort((ids, threads, starts))[max(n - capacity, 0) :]] = True
    rows = np.flatnonzero(keep)
    rows = rows[np.argsort(ids[rows], kind="stable")]
    table = table.take(pa.array(rows, pa.int64()))
    kept_ids = ids[rows]
    parents = table.column("parent_id")
    has_parent = pc.is_valid(parents).to_numpy(zero_copy_only=False)
    parent_values = parents.fill_null(0).to_numpy()
    cut = has_parent & ~np.isin(parent_values, kept_ids)
    if cut.any():
        index = table.schema.get_field_index("parent_id")
        values = pa.array(parent_values, pa.int64(), mask=~has_parent | cut)
        table = table.set_column(index, "parent_id", values)
    facts = {
        "discarded": int(n - len(rows)),
        "cut_parents": int(cut.sum()),
        "open_ranges": int(is_open.sum()),
    }
    return table, facts


def dump_in_background(ring: FlightRing, write: Any) -> None:
    """Dump now if no spill is under way, else from a thread once it is done (a signal handler
    must not wait for the thread it interrupted). A failure warns: the program goes on."""
    if ring._lock.acquire(blocking=False):
        try:
            _dump(ring._snapshot, write)
        finally:
            ring._lock.release()
        return
    threading.Thread(
        target=_dump, args=(ring.snapshot, write), name="recfn-flight-dump", daemon=True
    ).start()


def _dump(snapshot: Any, write: Any) -> None:
    try:
        write(snapshot("signal"))
    except Exception as exc:
        import warnings

        warnings.warn(f"recfn: flight recorder could not dump: {exc!r}", RuntimeWarning, 2)
