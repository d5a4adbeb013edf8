"""Consolidating a Recorder's thread buffers into one ``pyarrow.Table`` (schema: ``recfn.schema``).

The fixed columns are read straight from the vec buffers through the buffer protocol and
concatenated with numpy; sparse columns are scattered with one ``take``. No per-event Python work
happens for the fixed columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recfn import _identity
from recfn._cuda import DeviceTimes
from recfn._recorder import (
    ASYNC_BIT,
    DEPTH_SHIFT,
    KIND_MASK,
    KIND_SHIFT,
    OPEN_END,
    SCOPE_MASK,
    Recorder,
    _Chunk,
    _ThreadBuffer,
)
from recfn.schema import KINDS, build_metadata, column_type
from recfn.scope import SCOPE_LABELS


def _view(vector: Any, dtype: Any) -> np.ndarray:
    """Zero-copy numpy view of a librt vec (through the buffer protocol)."""
    return np.frombuffer(memoryview(vector), dtype=dtype)


def _chunks(buffers: Sequence[_ThreadBuffer]) -> list[_Chunk]:
    return [chunk for buf in buffers for chunk in buf.chunks if len(chunk.ids)]


def _column(chunks: Sequence[_Chunk], field: str, dtype: Any) -> np.ndarray:
    parts = [_view(getattr(chunk, field), dtype) for chunk in chunks]
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _int64_zero_copy(chunks: Sequence[_Chunk], field: str, null_value: int) -> pa.ChunkedArray:
    """An int64 column straight from the vecs; ``null_value`` entries become nulls."""
    arrays = []
    for chunk in chunks:
        values = _view(getattr(chunk, field), np.int64)
        data = pa.py_buffer(memoryview(getattr(chunk, field)))
        nulls = values == null_value
        validity = pa.array(~nulls).buffers()[1] if nulls.any() else None
        arrays.append(pa.Array.from_buffers(pa.int64(), len(values), [validity, data]))
    return pa.chunked_array(arrays, pa.int64())


def _dictionary(column: str, indices: np.ndarray, values: Sequence[str]) -> pa.Array:
    """A dictionary column with the index type the schema gives ``column``."""
    index_type = column_type(column).index_type.to_pandas_dtype()
    return pa.DictionaryArray.from_arrays(
        pa.array(indices.astype(index_type, copy=False)), pa.array(list(values), pa.string())
    )


def _constant(n: int, value: int, dtype: Any) -> pa.Array:
    return pa.array(np.full(n, value, dtype=dtype))


def _scatter(n: int, rows: np.ndarray, values: pa.Array) -> pa.Array:
    """A length-``n`` array holding ``values`` at ``rows`` and nulls elsewhere."""
    index = np.full(n, -1, dtype=np.int64)
    index[rows] = np.arange(len(rows), dtype=np.int64)
    return values.take(pa.array(index, mask=index < 0))


def build_table(
    recorder: Recorder,
    *,
    start_ns: int,
    node_id: int,
    config: dict[str, Any],
    wall_ns: int,
    device_times: Optional[DeviceTimes] = None,
) -> pa.Table:
    """One table for everything ``recorder`` captured (it must be stopped: the int64 columns
    share memory with its buffers), with the GPU times of ``profile(cuda=True)``."""
    buffers = [buf for buf in recorder.buffers if buf.rows]
    chunks = _chunks(buffers)
    rows_per_buffer = np.array([buf.rows for buf in buffers], dtype=np.int64)
    n = int(rows_per_buffer.sum())
    buffer_offsets = np.concatenate([[0], np.cumsum(rows_per_buffer)[:-1]]).astype(np.int64)

    names = _column(chunks, "names", np.int32)
    meta = _column(chunks, "meta", np.int32)
    thread_names = sorted({buf.thread_name for buf in buffers})
    name_index = {name: i for i, name in enumerate(thread_names)}
    thread_ids = np.repeat(np.array([buf.tid for buf in buffers], dtype=np.int64), rows_per_buffer)
    thread_name_idx = np.repeat(
        np.array([name_index[buf.thread_name] for buf in buffers], dtype=np.int32), rows_per_buffer
    )

    sequence_nr = np.full(n, -1, dtype=np.int64)
    fwd_thread_id = np.zeros(n, dtype=np.int64)
    for buf, offset in zip(buffers, buffer_offsets):
        if len(buf.seq_rows):
            rows = _view(buf.seq_rows, np.int64) + offset
            sequence_nr[rows] = _view(buf.seq_vals, np.int64)
            fwd_thread_id[rows] = _view(buf.fwd_vals, np.int64)

    columns: dict[str, Any] = {
        "id": _int64_zero_copy(chunks, "ids", 0),
        "parent_id": _int64_zero_copy(chunks, "parents", 0),
        "name": _dictionary("name", names, recorder.name_list),
        "kind": _dictionary("kind", (meta >> KIND_SHIFT) & KIND_MASK, KINDS),
        "scope": _dictionary("scope", meta & SCOPE_MASK, SCOPE_LABELS),
        "start_ns": _int64_zero_copy(chunks, "starts", OPEN_END),
        "end_ns": _int64_zero_copy(chunks, "ends", OPEN_END),
        "thread_id": pa.array(thread_ids),
        "thread_name": _dictionary("thread_name", thread_name_idx, thread_names),
        "depth": pa.array((meta >> DEPTH_SHIFT).astype(np.int32)),
        "sequence_nr": pa.array(sequence_nr),
        "fwd_thread_id": pa.array(fwd_thread_id),
        "is_async": pa.array((meta & ASYNC_BIT) != 0),
        "node_id": _constant(n, node_id, np.int32),
        "pid": _constant(n, recorder.pid, np.int64),
        "host": _dictionary("host", np.zeros(n, dtype=np.int32), [_identity.host()]),
        "rank": _constant(n, _identity.rank(), np.int32),
    }
    columns.update(_optional_columns(recorder, buffers, buffer_offsets, n))
    if device_times is not None:
        columns.update(_device_columns(columns, device_times, n))
    metadata = build_metadata(
        config=config,
        dropped_events=recorder.dropped,
        start_ns=start_ns,
        wall_ns=wall_ns,
        pid=recorder.pid,
        rank=_identity.rank(),
        local_rank=_identity.local_rank(),
        world_size=_identity.world_size(),
    )
    return pa.table(columns).replace_schema_metadata(metadata)


def _optional_columns(
    recorder: Recorder, buffers: Sequence[_ThreadBuffer], offsets: np.ndarray, n: int
) -> dict[str, pa.Array]:
    out: dict[str, pa.Array] = {}
    extra_rows = [
        np.asarray(buf.extra_rows, dtype=np.int64) + offset for buf, offset in zip(buffers, offsets)
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
        out["stack"] = _scatter(n, rows, pa.array(gather("extra_stack"), column_type("stack")))
    mem_rows = [_view(buf.mem_rows, np.int64) + offset for buf, offset in zip(buffers, offsets)]
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
    out["device"] = gpu.dictionary_encode()
    return out
