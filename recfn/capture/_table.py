"""Consolidating a Recorder's thread buffers into one ``pyarrow.Table`` (schema: ``recfn.formats.schema``).

The fixed columns are read from the vec buffers through the buffer protocol and decoded with a
few numpy passes per chunk, straight into each column's slice (``decode_chunk``: the int32
sequence numbers, gaps and durations become int64 ids, parents and timestamps); native rows
(``recfn.native._crange.Rows``) decode themselves into the slices in one pass in C, and a thread's
traced calls from the C hook are merged with its rows in one pass in C too (``merge_traced``).
Arrow wraps the columns without copying and sparse columns are scattered with one ``take``. No
per-event Python work happens for the fixed columns.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from typing import Any, Final, Optional, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recfn import native
from recfn.capture import _identity
from recfn.capture._recorder import (
    ASYNC_BIT,
    DEPTH_SHIFT,
    KIND_MASK,
    KIND_SHIFT,
    SCOPE_MASK,
    Recorder,
    _Chunk,
    _ThreadBuffer,
)
from recfn.capture._tracer import NATIVE_SEQ, CallStats, merge_traced
from recfn.engine.ranges import TID_SHIFT
from recfn.engine.scope import SCOPE_LABELS
from recfn.formats.schema import KINDS, build_metadata, column_type
from recfn.gpu import DeviceTimes


def _view(vector: Any, dtype: Any) -> np.ndarray:
    """Zero-copy numpy view of a librt vec (through the buffer protocol)."""
    return np.frombuffer(memoryview(vector), dtype=dtype)


def _counted(vector: Any, dtype: Any, rows: int) -> np.ndarray:
    """The first ``rows`` values of a chunk's column (``_Chunk.add`` grows ``seqs`` last, so
    another column may hold a row that never counted)."""
    return _view(vector, dtype)[:rows]


def _escaped_starts(chunk: _Chunk, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows below ``rows`` whose start escaped (in order) and their starts."""
    row_numbers = _view(chunk.big_start_rows, np.int64)
    kept = int(np.searchsorted(row_numbers, rows))  # the last may be a row that never counted
    return row_numbers[:kept], _view(chunk.big_starts, np.int64)[:kept]


def _escaped_ends(chunk: _Chunk) -> tuple[np.ndarray, np.ndarray]:
    """The rows whose end escaped (in the order they ended) and their ends."""
    row_numbers = _view(chunk.big_end_rows, np.int64)
    return row_numbers, _view(chunk.big_ends, np.int64)[: len(row_numbers)]


def decode_chunk(chunk: _Chunk, tid: int) -> dict[str, np.ndarray]:
    """The fixed columns of one chunk of thread ``tid``'s rows, exact: int64 ``id``,
    ``parent_id`` (0: none), ``start_ns``, ``end_ns`` (0: not ended), int32 ``name`` and ``meta``.
    """
    n = len(chunk.seqs)
    out = {field: np.empty(n, dtype) for field, dtype in DECODED_COLUMNS}
    if n:
        _decode_into(chunk, tid, out, 0)
        out["meta"][:] = _counted(chunk.meta, np.int32, n)
    return out


def _decode_into(chunk: _Chunk, tid: int, out: dict[str, np.ndarray], at: int) -> None:
    """Decode ``chunk``'s ids, parents, timestamps and names into rows ``at`` onwards of the
    preallocated ``out`` columns (no per-chunk arrays to join afterwards)."""
    n: int = len(chunk.seqs)
    rows = slice(at, at + n)
    high = np.int64(tid) << np.int64(TID_SHIFT)
    np.bitwise_or(_view(chunk.seqs, np.uint32), high, out=out["id"][rows])
    parent_seqs = _counted(chunk.parents, np.uint32, n)
    parents = out["parent_id"][rows]
    np.bitwise_or(parent_seqs, high, out=parents)
    np.copyto(parents, 0, where=parent_seqs == 0)
    # Starts: each escaped row's gap becomes the step from the previous row's start to its whole
    # start, so that one running sum gives every start. Row 0 always escapes.
    starts = out["start_ns"][rows]
    np.copyto(starts, _counted(chunk.gaps, np.int32, n))
    big_rows, big_starts = _escaped_starts(chunk, n)
    starts[big_rows] = 0
    if len(big_rows) > 1:
        before = big_starts[:-1] + np.add.reduceat(starts, big_rows)[:-1]
        starts[big_rows[1:]] = big_starts[1:] - before
    starts[big_rows[0]] = big_starts[0]
    np.cumsum(starts, out=starts)
    spans = _counted(chunk.spans, np.int32, n)
    ends = out["end_ns"][rows]
    np.add(starts, spans, out=ends)
    ends -= 1
    np.copyto(ends, 0, where=spans == 0)
    end_rows, big_ends = _escaped_ends(chunk)
    if len(end_rows):
        ends[end_rows] = big_ends
    np.copyto(out["name"][rows], _counted(chunk.names, np.int32, n))


DECODED_COLUMNS: Final = (
    ("id", np.int64),
    ("parent_id", np.int64),
    ("start_ns", np.int64),
    ("end_ns", np.int64),
    ("name", np.int32),
    ("meta", np.int32),
)


class DecodedRows:
    """Rows already decoded (``decode_chunk``'s columns) standing in for a chunk: the open
    ranges a streaming capture carries from one part to the next."""

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self.columns = columns


def _split_meta(meta: np.ndarray, out: dict[str, np.ndarray], at: int) -> None:
    """Unpack packed ``meta`` into rows ``at`` onwards of the kind, scope, depth and async
    columns."""
    rows = slice(at, at + len(meta))
    np.bitwise_and(meta >> KIND_SHIFT, int(KIND_MASK), out=out["kind"][rows], casting="unsafe")
    np.bitwise_and(meta, int(SCOPE_MASK), out=out["scope"][rows], casting="unsafe")
    np.right_shift(meta, DEPTH_SHIFT, out=out["depth"][rows])
    np.not_equal(meta & ASYNC_BIT, 0, out=out["is_async"][rows])


def _nullable(values: np.ndarray, null_value: int, scratch: np.ndarray) -> pa.Array:
    """An int64 array over ``values`` whose ``null_value`` entries are nulls (``scratch``: a
    bool array as long, reused between columns). The validity bitmap is packed by numpy:
    Arrow's mask conversion sets one bit at a time."""
    valid = np.not_equal(values, null_value, out=scratch)
    nulls = len(values) - int(np.count_nonzero(valid))
    if not nulls:
        return pa.array(values)
    bits = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.int64(), len(values), [bits, pa.py_buffer(values)], null_count=nulls
    )


def _booleans(values: np.ndarray) -> pa.Array:
    """A boolean array of numpy bools, packed by numpy (Arrow's conversion goes bit by bit)."""
    bits = pa.py_buffer(np.packbits(values, bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, bits])


def _dictionary(column: str, indices: np.ndarray, values: Sequence[str]) -> pa.Array:
    """A dictionary column with the index type the schema gives ``column``."""
    index_type = column_type(column).index_type.to_pandas_dtype()
    return pa.DictionaryArray.from_arrays(
        pa.array(indices.astype(index_type, copy=False)),
        pa.array(list(values), pa.string()),
        safe=False,  # the indices are ours: checking them would read every page once more
    )


class _Constants:
    """Constant columns of one table. Fresh memory costs more than the decoding here, so every
    0 column reads one lazily zeroed buffer, every -1 column one buffer of -1s (the same bytes
    at any integer width) and every other value its own `_repeated` buffer."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.shared: dict[tuple[int, int], np.ndarray] = {}

    def __call__(self, value: int, dtype: Any) -> np.ndarray:
        width = 8 if value in (0, -1) else np.dtype(dtype).itemsize
        values = self.shared.get((value, width))
        if values is None:
            values = _lazy_zeros(self.n) if value == 0 else _repeated(value, self.n, width)
            self.shared[(value, width)] = values
        view: np.ndarray = values.view(dtype)
        return view[: self.n]


def _lazy_zeros(n: int) -> np.ndarray:
    """``n`` int64 zeros in a fresh anonymous mapping, never written: the system maps its pages
    (to one shared zero page) when they are read. ``np.zeros`` is zeroed by hand where the
    allocator reuses memory a table before freed."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(mmap.mmap(-1, n * 8), dtype=np.int64)


REPEATED_FROM: Final = 1 << 20
"""Bytes from which a constant column is mapped (`_repeated`): below it writing is as cheap."""


def _repeated(value: int, n: int, width: int) -> np.ndarray:
    """``n`` signed integers of ``width`` bytes, all ``value``, read-only. From `REPEATED_FROM`
    bytes on, where the C extension is built and the system allows it, they are one small
    piece of shared memory mapped over and over (``recfn.native._crange.repeated``): no writes,
    no fresh pages; otherwise they are written."""
    dtype = np.dtype(f"i{width}")
    crange = native.extension("_crange")
    if crange is not None and n * width >= REPEATED_FROM:
        try:
            return np.frombuffer(
                crange.repeated(np.array(value, dtype).tobytes(), n * width), dtype
            )
        except OSError:
            pass  # a system without memfd_create, or out of mappings: write them
    values = np.full(n, value, dtype=dtype)
    values.flags.writeable = False
    return values


def _scatter(n: int, rows: np.ndarray, values: pa.Array) -> pa.Array:
    """A length-``n`` array holding ``values`` at ``rows`` and nulls elsewhere."""
    index = np.full(n, -1, dtype=np.int64)
    index[rows] = np.arange(len(rows), dtype=np.int64)
    return values.take(pa.array(index, mask=index < 0))


def _traced(buf: Any) -> list[Any]:
    """The traced calls the C hook handed to a thread buffer (trace_calls), to be merged (a
    thread that traced none keeps its rows as recorded)."""
    return [part for part in getattr(buf, "traced", None) or () if len(part)]


def _row_count(buf: Any) -> int:
    """Rows of a thread buffer (or of the snapshots streaming and the flight recorder pass),
    its traced calls included."""
    native = getattr(buf, "native", None)
    recorded = len(native) if native is not None else int(buf.rows)
    return recorded + sum(len(part) for part in _traced(buf))


def _decode_native(
    rows: Any, tid: int, fixed: dict[str, np.ndarray], unpacked: dict[str, np.ndarray], at: int
) -> None:
    """Decode a native buffer's rows (a ``recfn.native._crange.Rows``) into rows ``at`` onwards
    of the table's columns: one pass in C, no per-chunk arrays."""
    columns = {**fixed, **unpacked}
    rows_slice = slice(at, at + len(rows))
    rows.decode(
        tuple(columns[field][rows_slice] for field, _ in MERGED_COLUMNS),
        int(tid) << TID_SHIFT,
    )


def decode_rows(rows: Any, tid: int) -> dict[str, np.ndarray]:
    """A native Rows' rows as ``decode_chunk``'s columns (for comparing with vec chunks)."""
    n = len(rows)
    merged = {field: np.empty(n, dtype) for field, dtype in MERGED_COLUMNS}
    rows.decode(tuple(merged[field] for field, _ in MERGED_COLUMNS), int(tid) << TID_SHIFT)
    out = {field: merged[field] for field, _ in DECODED_COLUMNS if field != "meta"}
    out["meta"] = _joined_meta(merged)
    return out


def _decode_buffer(buf: Any) -> dict[str, np.ndarray]:
    """Every recorded row of a thread buffer as ``decode_chunk``'s columns."""
    if getattr(buf, "native", None) is not None:
        return decode_rows(buf.native, buf.tid)
    chunks = list(buf.chunks)
    sizes = [len(chunk.seqs) for chunk in chunks]
    out = {field: np.empty(sum(sizes), dtype) for field, dtype in DECODED_COLUMNS}
    at = 0
    for chunk, size in zip(chunks, sizes):
        if size:  # a thread's first chunk may hold no row yet
            _decode_into(chunk, buf.tid, out, at)
            out["meta"][at : at + size] = _counted(chunk.meta, np.int32, size)
            at += size
    return out


MERGED_COLUMNS: Final = (
    ("id", np.int64),
    ("parent_id", np.int64),
    ("start_ns", np.int64),
    ("end_ns", np.int64),
    ("name", np.int32),
    ("depth", np.int32),
    ("kind", np.int8),
    ("scope", np.int8),
    ("is_async", np.bool_),
)


def _merge_traced(
    buf: Any, fixed: dict[str, np.ndarray], unpacked: dict[str, np.ndarray], at: int
) -> np.ndarray:
    """Decode a buffer with traced calls into rows ``at`` onwards of the table's columns: its
    recorded rows and each part of its traced calls merged in start order (``merge_traced``),
    the last merge writing the table's columns themselves. Returns each recorded row's place
    among the buffer's rows (the sparse columns' row numbers count recorded rows)."""
    recorded = _decode_buffer(buf)
    place = np.arange(len(recorded["id"]), dtype=np.int64)
    high = int(buf.tid) << TID_SHIFT
    parts = _traced(buf)
    done = 0
    columns = {**fixed, **unpacked}
    for i, part in enumerate(parts):
        size = len(recorded["id"]) + len(part)
        if i == len(parts) - 1:
            merged = {field: columns[field][at : at + size] for field, _ in MERGED_COLUMNS}
        else:
            merged = {field: np.empty(size, dtype) for field, dtype in MERGED_COLUMNS}
        new_of_old = np.empty(len(recorded["id"]), np.int64)
        merge_traced(
            part,
            tuple(recorded[field] for field, _ in DECODED_COLUMNS),
            tuple(merged[field] for field, _ in MERGED_COLUMNS),
            new_of_old,
            NATIVE_SEQ + done,
            high,
        )
        place = new_of_old[place]
        done += len(part)
        if i < len(parts) - 1:  # the next part merges with these rows
            recorded = {field: merged[field] for field, _ in DECODED_COLUMNS if field != "meta"}
            recorded["meta"] = _joined_meta(merged)
    return place


def _joined_meta(columns: dict[str, np.ndarray]) -> np.ndarray:
    """Packed meta from the kind, scope, depth and is_async columns (``_split_meta`` undone)."""
    meta = columns["depth"].astype(np.int32) << DEPTH_SHIFT
    meta |= columns["scope"].astype(np.int32)
    meta |= columns["kind"].astype(np.int32) << KIND_SHIFT
    meta |= columns["is_async"].astype(np.int32) * ASYNC_BIT
    return meta


def _table_rows(rows: Any, offset: int, place: Optional[np.ndarray]) -> np.ndarray:
    """The table's rows of a buffer's row numbers ``rows`` (``place``: where its recorded rows
    went among its traced calls)."""
    numbers = np.asarray(rows, dtype=np.int64)
    return (numbers if place is None else place[numbers]) + offset


def build_table(
    recorder: Recorder,
    *,
    start_ns: int,
    node_id: int,
    config: dict[str, Any],
    wall_ns: int,
    device_times: Optional[DeviceTimes] = None,
    call_stats: Optional[CallStats] = None,
) -> pa.Table:
    """One table for everything ``recorder`` captured (it must be stopped), with the GPU times
    of ``profile(cuda=True)`` and what call tracing did (``call_stats``: the metadata
    ``recfn.call_tracing``, and following user code the ``hidden_calls`` column).

    Each column is allocated once and every chunk decoded into its slice; Arrow wraps the
    numpy arrays without copying them.
    """
    buffers = [buf for buf in recorder.buffers if _row_count(buf)]
    rows_per_buffer = np.array([_row_count(buf) for buf in buffers], dtype=np.int64)
    n = int(rows_per_buffer.sum())
    buffer_offsets = np.concatenate([[0], np.cumsum(rows_per_buffer)[:-1]]).astype(np.int64)
    fixed = {field: np.empty(n, dtype) for field, dtype in DECODED_COLUMNS if field != "meta"}
    unpacked = {
        "kind": np.empty(n, column_type("kind").index_type.to_pandas_dtype()),
        "scope": np.empty(n, column_type("scope").index_type.to_pandas_dtype()),
        "depth": np.empty(n, np.int32),
        "is_async": np.empty(n, np.bool_),
    }
    at = 0
    places: list[Optional[np.ndarray]] = []  # per buffer, where traced calls were merged in
    for buf in buffers:
        if _traced(buf):
            places.append(_merge_traced(buf, fixed, unpacked, at))
            at += _row_count(buf)
            continue
        places.append(None)
        native = getattr(buf, "native", None)
        if native is not None:
            _decode_native(native, buf.tid, fixed, unpacked, at)
            at += len(native)
            continue
        for chunk in buf.chunks:
            if isinstance(chunk, DecodedRows):
                rows = slice(at, at + len(chunk.columns["id"]))
                for field, values in fixed.items():
                    values[rows] = chunk.columns[field]
                meta = chunk.columns["meta"]
            else:
                _decode_into(chunk, buf.tid, fixed, at)
                meta = _counted(chunk.meta, np.int32, len(chunk.seqs))
            _split_meta(meta, unpacked, at)
            at += len(meta)

    constant = _Constants(n)
    thread_names = sorted({buf.thread_name for buf in buffers})
    name_index = {name: i for i, name in enumerate(thread_names)}
    if len(buffers) == 1:
        thread_ids = constant(buffers[0].tid, np.int64)
    else:
        tids = np.array([buf.tid for buf in buffers], dtype=np.int64)
        thread_ids = np.repeat(tids, rows_per_buffer)
    if len(thread_names) > 1:
        thread_name_idx = np.repeat(
            np.array([name_index[buf.thread_name] for buf in buffers], dtype=np.int32),
            rows_per_buffer,
        )
    else:
        thread_name_idx = constant(0, np.int32)

    numbered = [
        (buf, offset, place)
        for buf, offset, place in zip(buffers, buffer_offsets, places)
        if len(buf.seq_rows)
    ]
    if numbered:
        sequence_nr = np.full(n, -1, dtype=np.int64)
        fwd_thread_id = np.zeros(n, dtype=np.int64)
        for buf, offset, place in numbered:
            numbered_rows = _table_rows(_view(buf.seq_rows, np.int64), offset, place)
            sequence_nr[numbered_rows] = _view(buf.seq_vals, np.int64)
            fwd_thread_id[numbered_rows] = _view(buf.fwd_vals, np.int64)
    else:
        sequence_nr = constant(-1, np.int64)
        fwd_thread_id = constant(0, np.int64)

    scratch = np.empty(n, np.bool_)
    columns: dict[str, Any] = {
        "id": pa.array(fixed["id"]),
        "parent_id": _nullable(fixed["parent_id"], 0, scratch),
        "name": _dictionary("name", fixed["name"], recorder.name_list),
        "kind": _dictionary("kind", unpacked["kind"], KINDS),
        "scope": _dictionary("scope", unpacked["scope"], SCOPE_LABELS),
        "start_ns": pa.array(fixed["start_ns"]),
        "end_ns": _nullable(fixed["end_ns"], 0, scratch),
        "thread_id": pa.array(thread_ids),
        "thread_name": _dictionary("thread_name", thread_name_idx, thread_names),
        "depth": pa.array(unpacked["depth"]),
        "sequence_nr": pa.array(sequence_nr),
        "fwd_thread_id": pa.array(fwd_thread_id),
        "is_async": _booleans(unpacked["is_async"]),
        "node_id": pa.array(constant(node_id, np.int32)),
        "pid": pa.array(constant(recorder.pid, np.int64)),
        "host": _dictionary("host", constant(0, np.int32), [_identity.host()]),
        "rank": pa.array(constant(_identity.rank(), np.int32)),
    }
    columns.update(_optional_columns(recorder, buffers, buffer_offsets, places, n))
    if device_times is not None:
        columns.update(_device_columns(columns, device_times, n))
    if call_stats is not None and call_stats.follow:
        columns["hidden_calls"] = _hidden_column(columns["id"], call_stats)
    metadata = build_metadata(
        config=config,
        dropped_events=recorder.dropped,
        start_ns=start_ns,
        wall_ns=wall_ns,
        pid=recorder.pid,
        rank=_identity.rank(),
        local_rank=_identity.local_rank(),
        world_size=_identity.world_size(),
        call_tracing=None if call_stats is None else call_stats.to_dict(),
    )
    return pa.table(columns).replace_schema_metadata(metadata)


def _hidden_column(ids: pa.Array, stats: CallStats) -> pa.Array:
    """``hidden_calls``: each traced call's count of hidden library calls, found by its id."""
    n = len(ids)
    parts = [
        np.frombuffer(memoryview(cast(Any, pairs)), dtype=np.int64).reshape(-1, 2) + [base, 0]
        for base, pairs in stats.hidden_parts
    ]
    pairs = np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)
    order = np.argsort(pairs[:, 0], kind="stable")
    hidden_ids = pairs[order, 0]
    row_ids = ids.to_numpy()
    pos = np.minimum(np.searchsorted(hidden_ids, row_ids), max(len(hidden_ids) - 1, 0))
    found = hidden_ids[pos] == row_ids if len(hidden_ids) else np.zeros(n, dtype=bool)
    rows = np.flatnonzero(found)
    return _scatter(n, rows, pa.array(pairs[order[pos[rows]], 1], pa.int64()))


def _optional_columns(
    recorder: Recorder,
    buffers: Sequence[_ThreadBuffer],
    offsets: np.ndarray,
    places: Sequence[Optional[np.ndarray]],
    n: int,
) -> dict[str, pa.Array]:
    out: dict[str, pa.Array] = {}
    extra_rows = [
        _table_rows(buf.extra_rows, offset, place)
        for buf, offset, place in zip(buffers, offsets, places)
    ]
    rows = np.concatenate(extra_rows) if extra_rows else np.empty(0, dtype=np.int64)

    def gather(field: str) -> list[Any]:
        return [value for buf in buffers for value in getattr(buf, field)]

    args = gather("extra_args")
    if any(value is not None for value in args):
        out["args"] = _scatter(n, rows, pa.array(args, column_type("args")))
    if recorder.report_input_shapes:
        out["input_shapes"] = _scatter(
            n, rows, pa.array(gather("extra_shapes"), column_type("input_shapes"))
        )
        out["input_dtypes"] = _scatter(
            n, rows, pa.array(gather("extra_dtypes"), column_type("input_dtypes"))
        )
    if recorder.with_stack:
        stack_rows = [
            _table_rows(_view(b.stack_rows, np.int64), offset, place)
            for b, offset, place in zip(buffers, offsets, places)
        ]
        nodes = [_view(b.stack_nodes, np.int64) for b in buffers]
        out["stack"] = _scatter(
            n,
            np.concatenate(stack_rows) if stack_rows else np.empty(0, dtype=np.int64),
            _stacks(recorder, np.concatenate(nodes) if nodes else np.empty(0, dtype=np.int64)),
        )
    mem_rows = [
        _table_rows(_view(buf.mem_rows, np.int64), offset, place)
        for buf, offset, place in zip(buffers, offsets, places)
    ]
    if recorder.profile_memory or any(len(r) for r in mem_rows):
        all_rows = np.concatenate(mem_rows) if mem_rows else np.empty(0, dtype=np.int64)
        nbytes = [_view(buf.mem_bytes, np.int64) for buf in buffers]
        values = np.concatenate(nbytes) if nbytes else np.empty(0, dtype=np.int64)
        out["memory_bytes"] = _scatter(n, all_rows, pa.array(values))
        devices = pa.array(gather("mem_devices"), pa.string()).dictionary_encode()
        devices = devices.cast(column_type("device"))
        out["device"] = _scatter(n, all_rows, devices)
    if recorder.with_flops:
        out["flops"] = _scatter(n, rows, pa.array(gather("extra_flops"), column_type("flops")))
    return out


def _stacks(recorder: Recorder, nodes: np.ndarray) -> pa.Array:
    """Symbolize the captured stack nodes: once per distinct stack, then one ``take``."""
    if not len(nodes):
        return pa.array([], column_type("stack"))
    unique, inverse = np.unique(nodes, return_inverse=True)
    frames = recorder.frames.symbolize([int(node) for node in unique])
    return pa.array(frames, column_type("stack")).take(pa.array(inverse.astype(np.int64)))


def _device_columns(columns: dict[str, Any], times: DeviceTimes, n: int) -> dict[str, pa.Array]:
    """``device_start_ns``/``device_duration_ns`` and ``device`` for ranges timed on a GPU."""
    ids = columns["id"].to_numpy()
    order = np.argsort(times.ids, kind="stable")
    sorted_ids = times.ids[order]
    pos = np.minimum(np.searchsorted(sorted_ids, ids), max(len(sorted_ids) - 1, 0))
    found = (
        sorted_ids[pos] == ids if len(sorted_ids) else np.zeros(n, dtype=bool)
    )  # rows of ranges timed on a GPU
    rows = np.flatnonzero(found)
    picked = order[pos[rows]]
    out: dict[str, pa.Array] = {
        "device_start_ns": _scatter(n, rows, pa.array(times.start_ns[picked])),
        "device_duration_ns": _scatter(n, rows, pa.array(times.duration_ns[picked])),
    }
    labels = pa.array([times.devices[i] for i in picked], pa.string())
    gpu = _scatter(n, rows, labels)
    memory = columns.get("device")
    if memory is not None:  # memory events keep theirs
        gpu = pc.coalesce(gpu, memory.cast(pa.string()))
    out["device"] = gpu.dictionary_encode().cast(column_type("device"))
    return out
