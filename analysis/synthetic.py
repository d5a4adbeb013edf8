"""A generator of well-formed schema-v1 event tables, for tests, benchmarks and demos.

Each thread gets a random forest in pre-order: depth ``d[i+1] <= d[i] + 1`` (a running minimum,
so no Python loop), then random gaps between the open/close events give properly nested
``[start, end)`` intervals. The result has the dtypes of ``prof.to_pandas()`` (``recfn.formats.schema.to_pandas``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from recfn.errors import RecfnValueError
from recfn.formats.schema import KINDS, conform, to_pandas

NAMES: tuple[str, ...] = (
    "train_step",
    "forward",
    "encoder.layer",
    "attention",
    "aten::linear",
    "aten::matmul",
    "aten::mm",
    "aten::add",
    "aten::softmax",
    "aten::relu",
    "aten::copy_",
    "aten::empty",
    "backward",
    "optimizer.step",
    "data_loader.next",
    "json.loads",
    "socket.recv",
    "sqlite3.execute",
    "np.dot",
    "logging.info",
)
START_NS = 1_700_000_000_000_000_000
PID = 4242


def make_synthetic_trace(
    n_ranges: int = 10_000,
    n_threads: int = 4,
    *,
    seed: int = 0,
    max_depth: int = 8,
    n_marks: int = 0,
    n_memory_events: int = 0,
    mean_gap_ns: int = 400,
) -> pd.DataFrame:
    """A trace of `n_ranges` properly nested ranges spread over `n_threads` threads.

    Deterministic for a given `seed`. `n_marks` marks and `n_memory_events` memory events are
    placed at the start of random ranges (so their parent is that range); memory events add the
    optional ``memory_bytes`` and ``device`` columns. Rows are ordered by ``start_ns``.
    """
    if n_ranges < 0 or n_threads < 1 or max_depth < 0 or n_marks < 0 or n_memory_events < 0:
        raise RecfnValueError("counts must be non-negative, n_threads >= 1 and max_depth >= 0")
    rng = np.random.default_rng(seed)
    sizes = np.full(n_threads, n_ranges // n_threads)
    sizes[: n_ranges % n_threads] += 1
    parts = [_thread_forest(rng, int(size), max_depth, mean_gap_ns) for size in sizes]
    offsets = np.cumsum([0, *sizes[:-1]])
    start = np.concatenate([p[0] + 1_000 * t for t, p in enumerate(parts)]) + START_NS
    end = np.concatenate([p[1] + 1_000 * t for t, p in enumerate(parts)]) + START_NS
    depth = np.concatenate([p[2] for p in parts])
    parent = np.concatenate([np.where(p[3] >= 0, p[3] + o, -1) for p, o in zip(parts, offsets)])
    thread = np.repeat(np.arange(1, n_threads + 1), sizes)
    name = (3 * depth + rng.integers(0, 4, n_ranges)) % len(NAMES)
    kind = np.zeros(n_ranges, dtype=np.int64)

    # Marks and memory events sit at the start of a random range, inside it.
    n_points = n_marks + n_memory_events
    if n_points and not n_ranges:
        raise RecfnValueError("marks and memory events need at least one range")
    host = rng.integers(0, max(n_ranges, 1), n_points)
    start = np.concatenate([start, start[host]])
    end = np.concatenate([end, start[n_ranges:]])
    depth = np.concatenate([depth, depth[host] + 1])
    parent = np.concatenate([parent, host])
    thread = np.concatenate([thread, thread[host]])
    name = np.concatenate(
        [name, np.full(n_marks, len(NAMES)), np.full(n_memory_events, len(NAMES) + 1)]
    )
    kind = np.concatenate([kind, np.full(n_marks, 1), np.full(n_memory_events, 2)])

    order = np.lexsort((-end, start))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    parent = np.where(parent >= 0, rank[np.maximum(parent, 0)], -1)[order]
    depth, thread, name, kind = depth[order], thread[order], name[order], kind[order]
    n = len(order)

    def category(codes: np.ndarray, values: list[str]) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), values)

    columns = {
        "id": np.arange(n),
        "parent_id": pa.array(parent, mask=parent < 0),
        "name": category(name, [*NAMES, "checkpoint", "[memory]"]),
        "kind": category(kind, list(KINDS)),
        "scope": category(
            np.where(kind == 0, (depth > 0).astype(int), 0), ["user_scope", "function"]
        ),
        "start_ns": start[order],
        "end_ns": end[order],
        "thread_id": thread,
        "thread_name": category(
            thread - 1, ["MainThread", *(f"Thread-{t} (worker)" for t in range(1, n_threads))]
        ),
        "depth": depth,
        "pid": np.full(n, PID),
    }
    if n_memory_events:
        is_memory = kind == 2
        signed = rng.integers(1, 1 << 20, n) * np.where(rng.random(n) < 0.6, 1, -1)
        columns["memory_bytes"] = pa.array(signed, mask=~is_memory)
        columns["device"] = category(np.where(is_memory, 0, -1), ["cpu"])
    frame = to_pandas(conform(pa.table(columns), "make_synthetic_trace"))
    frame.attrs.clear()
    return frame


def _thread_forest(
    rng: np.random.Generator, n: int, max_depth: int, mean_gap_ns: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Start, end, depth and parent position of `n` nested ranges of one thread, in pre-order."""
    if n == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty, empty
    index = np.arange(n)
    ceiling = rng.integers(0, max_depth + 1, n)
    ceiling[0] = 0
    depth = np.minimum.accumulate(ceiling - index) + index

    parent = np.full(n, -1, dtype=np.int64)
    # next_out[i]: first row after i's subtree (next row no deeper than i).
    next_out = np.full(n, n, dtype=np.int64)
    for level in range(int(depth.max()) + 1):
        here = np.flatnonzero(depth == level)
        shallower = np.flatnonzero(depth <= level)
        after = np.searchsorted(shallower, here, side="right")
        next_out[here] = np.append(shallower, n)[after]
        if level:
            above = np.flatnonzero(depth == level - 1)
            parent[here] = above[np.searchsorted(above, here) - 1]

    # Event sequence: open i, then close the ranges that end before row i + 1 opens.
    closes = depth - np.append(depth[1:], -1) + 1
    opens_at = index + np.concatenate([[0], np.cumsum(closes)[:-1]])
    last = next_out - 1
    closes_at = opens_at[last] + 1 + depth[last] - depth
    clock = np.cumsum(rng.geometric(1.0 / max(mean_gap_ns, 1), 2 * n))
    return clock[opens_at], clock[closes_at], depth, parent


RUN_STEP: tuple[tuple[str, int, int], ...] = (
    ("step", 0, 0),
    ("load", 1, 300_000),
    ("forward", 1, 0),
    ("layer", 2, 100_000),
    ("layer", 2, 100_000),
    ("layer", 2, 100_000),
    ("layer", 2, 100_000),
    ("backward", 1, 800_000),
    ("optimizer", 1, 250_000),
    ("log", 1, 50_000),
)
"""One step of `make_synthetic_run`'s workload: (name, depth, own work in ns) in pre-order.
``layer`` (four calls) is about 22% of a step."""


def make_synthetic_run(
    seed: int,
    *,
    steps: int = 20,
    slowdown: dict[str, float] | None = None,
    call_noise: float = 0.02,
    run_noise: float = 0.05,
    preempt: float = 0.02,
    preempt_ns: int = 3_000_000,
    gap_ns: int = 2_000,
) -> pd.DataFrame:
    """One run of a training-loop-like workload (`RUN_STEP`, `steps` times) with the noise of a
    shared machine, for tests and benchmarks of run comparisons: each run's speed varies by a
    common factor (lognormal, sigma `run_noise`), each call by its own (`call_noise`), and a
    share `preempt` of the calls lose `preempt_ns` to another process. `slowdown` multiplies
    the own work of the named ranges (``{"layer": 1.05}``: 5% slower). Deterministic for a
    given `seed`."""
    rng = np.random.default_rng(seed)
    factors = slowdown or {}
    speed = float(np.exp(rng.normal(0.0, run_noise)))
    names = sorted({name for name, _, _ in RUN_STEP})
    rows = len(RUN_STEP) * steps
    start = np.zeros(rows, dtype=np.int64)
    end = np.zeros(rows, dtype=np.int64)
    parent = np.full(rows, -1, dtype=np.int64)
    depth = np.zeros(rows, dtype=np.int64)
    name = np.zeros(rows, dtype=np.int64)
    clock = START_NS
    row = 0
    for _ in range(steps):
        open_rows: list[int] = []
        for label, level, work in RUN_STEP:
            while len(open_rows) > level:  # close the ranges this one is not inside
                done = open_rows.pop()
                clock += gap_ns
                end[done] = clock
            clock += gap_ns
            start[row], depth[row], name[row] = clock, level, names.index(label)
            parent[row] = open_rows[-1] if open_rows else -1
            if work:
                took = work * factors.get(label, 1.0) * speed
                took *= float(np.exp(rng.normal(0.0, call_noise)))
                if rng.random() < preempt:
                    took += preempt_ns
                clock += int(took)
            open_rows.append(row)
            row += 1
        while open_rows:
            clock += gap_ns
            end[open_rows.pop()] = clock
    columns = {
        "id": np.arange(rows),
        "parent_id": pa.array(parent, mask=parent < 0),
        "name": pa.DictionaryArray.from_arrays(pa.array(name, type=pa.int32()), names),
        "kind": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), list(KINDS)),
        "scope": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), ["user_scope"]),
        "start_ns": start,
        "end_ns": end,
        "thread_id": np.ones(rows, dtype=np.int64),
        "thread_name": pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(rows, np.int32)), ["MainThread"]
        ),
        "depth": depth,
        "pid": np.full(rows, PID),
    }
    frame = to_pandas(conform(pa.table(columns), "make_synthetic_run"))
    frame.attrs.clear()
    return frame
