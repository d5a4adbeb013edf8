"""Hand-built event tables the analysis tests share (imported by name: the test folders have
no packages, so a module named ``conftest`` here would clash with the other folders' one)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from recfn.formats.schema import KINDS, conform, to_pandas

T0 = 1_700_000_000_000_000_000


def make_frame(rows: list[tuple[Any, ...]], **extra: list[Any]) -> pd.DataFrame:
    """A schema-v1 frame with ``prof.to_pandas()`` dtypes (``recfn.formats.schema``) from rows of
    ``(id, parent_id, name, kind, start, end, thread_id)``; times are ns after `T0`, None for
    a null parent or an open range. `extra` adds optional columns."""
    ids, parents, names, kinds, starts, ends, threads = map(list, zip(*rows))
    frame = pd.DataFrame(
        {
            "id": ids,
            "parent_id": pd.array(parents, dtype="Int64"),
            "name": names,
            "kind": pd.Categorical(kinds, categories=KINDS),
            "scope": "function",
            "start_ns": np.array(starts) + T0,
            "end_ns": pd.array([None if e is None else e + T0 for e in ends], dtype="Int64"),
            "thread_id": threads,
            "thread_name": ["MainThread" if t == 1 else f"Thread-{t}" for t in threads],
            "pid": 100,
        }
    )
    frame = to_pandas(conform(frame))
    frame.attrs.clear()
    for column, values in extra.items():
        frame[column] = values
    frame["depth"] = frame.recfn.tree().sort_index()["depth"].to_numpy(dtype=np.int32)
    return frame


KNOWN_ROWS = [
    # id, parent, name, kind, start, end, thread
    (1, None, "step", "range", 0, 100, 1),
    (2, 1, "fwd", "range", 10, 30, 1),
    (6, 1, "ckpt", "mark", 35, 35, 1),
    (3, 1, "bwd", "range", 40, 90, 1),
    (4, 3, "mm", "range", 50, 60, 1),
    (5, 3, "mm", "range", 60, 75, 1),
    (7, None, "step", "range", 20, 70, 2),
    (8, 7, "mm", "range", 30, 40, 2),
    (9, None, "load", "range", 80, None, 2),
]
"""Self times: step 30 + 40, fwd 20, bwd 50 - 25, mm 10 + 15 + 10; "load" is still open."""


def sparse_and_busy_rows() -> list[tuple[Any, ...]]:
    """Two threads over 1 s of bars far narrower than a pixel: thread 1 ("sparse") has one 60 ns
    call per millisecond, thread 2 ("busy") fills its time with 50 us calls."""
    sparse = [
        (i + 1, None, "sparse", "range", i * 1_000_000, i * 1_000_000 + 60, 1) for i in range(1000)
    ]
    busy = [
        (100_000 + i, None, "busy", "range", i * 50_000, (i + 1) * 50_000 - 1, 2)
        for i in range(20_000)
    ]
    return sparse + busy


OVERLAPPING_ROWS = [
    # id, parent, name, kind, start, end, thread: asyncio tasks gathered inside "fetch_all"
    (1, None, "fetch_all", "range", 0, 100, 1),
    (2, 1, "fetch", "range", 10, 60, 1),
    (3, 1, "fetch", "range", 20, 80, 1),
    (4, 1, "fetch", "range", 70, 90, 1),
    (5, 1, "parse", "range", 95, 130, 1),
    (6, 2, "decode", "range", 40, 50, 1),
]
"""The children of fetch_all overlap and "parse" outlives it: they cover [10, 90] and
[95, 100] of it, so its self time is 100 - 85 = 15 (summing their durations would give -65).
Self times: fetch 40 + 60 + 20, parse 35, decode 10."""


GPU_SPANS = {
    # id: (device start, device duration, device), times in ns after T0
    1: (5, 90, "cuda:0"),
    2: (12, 16, "cuda:0"),
    3: (45, 45, "cuda:0"),
    4: (52, 6, "cuda:0"),
    5: (61, 9, "cuda:0"),
    7: (25, 40, "cuda:1"),
    8: (31, 8, "cuda:1"),
}
"""GPU time for `KNOWN_ROWS` as ``profile(cuda=True)`` records it; the mark and the open range
have none. GPU self times: step 90 - 16 - 45 and 40 - 8, bwd 45 - 15."""


def with_gpu(frame: pd.DataFrame, spans: dict[int, tuple[int, int, str]]) -> pd.DataFrame:
    """`frame` with the device columns filled from `spans` (by id), through the schema."""
    found = [spans.get(i) for i in frame["id"].tolist()]
    gpu = frame.assign(
        device_start_ns=pd.array([None if s is None else s[0] + T0 for s in found], "Int64"),
        device_duration_ns=pd.array([None if s is None else s[1] for s in found], "Int64"),
        device=pd.Categorical([None if s is None else s[2] for s in found]),
    )
    result = to_pandas(conform(gpu))
    result.attrs.clear()
    return result


def on_two_hosts(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its odd threads moved to a second process (pid 1) on a second host."""
    odd = frame["thread_id"] % 2 == 1
    frame["pid"] = frame["pid"].where(~odd, 1).astype("int64")
    frame["host"] = odd.map({False: "this-host", True: "other-host"})
    return frame
