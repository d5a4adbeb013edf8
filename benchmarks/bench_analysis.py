"""Speed of the ``df.recfn`` analysis on a generated trace, as a Markdown table.

Run: ``python benchmarks/bench_analysis.py`` (``--ranges N``, ``--events N`` to change sizes).
The trace is ``make_synthetic_trace(N, 8)``: N properly nested ranges over 8 threads. Each
operation runs a few times and the best time is kept, so numbers hold on a noisy machine.
Deep traces are one chain of nested ranges, each 5 ns shorter on either side than its parent,
so the innermost ones are narrower than a pixel; their rate should stay near the shallow one's.
``read_chrome_trace`` reads a torch-shaped trace (complete "X" cpu_op events with torch's args,
"[memory]" instants, flow and metadata events) written to a temporary directory; the typed
msgspec decode alone (no columns) is shown as the floor it cannot beat.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Union

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import msgspec
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import recfn.analysis as analysis
from recfn.formats.chrome._reader import Event


class Document(msgspec.Struct, gc=False):
    """A trace as an object (other members ignored): what the decode-alone floor decodes."""

    traceEvents: list[Event]
    baseTimeNanoseconds: int = 0


TRACE = msgspec.json.Decoder(Union[Document, list[Event]])


def best_of(repeat: int, run: Callable[[], Any]) -> float:
    """Fastest of `repeat` runs, in seconds."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def parse_alone(raw: bytes) -> None:
    """Only the decode (and freeing), with the cyclic GC paused as read_chrome_trace does."""
    gc.disable()
    try:
        TRACE.decode(raw)
    finally:
        gc.enable()


def render_timeline(df: pd.DataFrame) -> None:
    ax = df.recfn.timeline()
    ax.figure.savefig(io.BytesIO(), format="png", dpi=100)
    plt.close(ax.figure)


def render_flame(df: pd.DataFrame) -> None:
    ax = df.recfn.flame()
    ax.figure.savefig(io.BytesIO(), format="png", dpi=100)
    plt.close(ax.figure)


def chain(depth: int) -> pd.DataFrame:
    """One thread, `depth` ranges, each inside the one before."""
    ids = np.arange(1, depth + 1)
    return pd.DataFrame(
        {
            "id": ids,
            "parent_id": pd.array([None, *ids[:-1]], dtype="Int64"),
            "name": pd.Categorical([f"f{i % 7}" for i in range(depth)]),
            "kind": pd.Categorical(["range"] * depth),
            "scope": "function",
            "start_ns": 5 * ids,
            "end_ns": pd.array(10 * depth - 5 * ids, dtype="Int64"),
            "thread_id": 1,
            "thread_name": "MainThread",
        }
    )


SHAPES_ARGS: list[dict[str, Any]] = [
    {
        "Concrete Inputs": ["", "", "1"],
        "Input type": ["float", "float", "Scalar"],
        "Input Strides": [[8, 1], [8, 1], []],
        "Input Dims": [[8, 8], [8, 8], []],
    },
    {
        "Concrete Inputs": ["", ""],
        "Input type": ["float", "float"],
        "Input Strides": [[8, 1], [8, 1]],
        "Input Dims": [[8, 8], [8, 8]],
    },
    {
        "Concrete Inputs": [""],
        "Input type": ["float"],
        "Input Strides": [[8, 1]],
        "Input Dims": [[8, 8]],
    },
]
"""torch's args for an op's inputs when recorded with ``record_shapes=True`` (aten::add, mm,
resolve_conj of a torch 2 CPU trace)."""


def torch_shaped_trace(
    n_events: int, path: Path, *, shapes: bool = False, training: bool = False
) -> int:
    """Write a trace shaped like torch.profiler's ``export_chrome_trace``, its ops with
    `SHAPES_ARGS` where `shapes` (``record_shapes=True``), and where `training` the
    forward-backward flows a training step records (an "s" at a forward op, an "f" at the
    backward op it links to: a flow event per 8 ops, torch 2's rate); returns its events."""
    df = analysis.make_synthetic_trace(n_events, 4, seed=3)
    base = int(df["start_ns"].min()) // 10**9 * 10**9
    pid = 32427
    ts = ((df["start_ns"].to_numpy() - base) / 1000).tolist()
    dur = ((df["end_ns"].to_numpy(dtype=np.int64) - df["start_ns"].to_numpy()) / 1000).tolist()
    tid = (df["thread_id"].to_numpy() + pid - 1).tolist()
    names = df["name"].astype(str).tolist()
    events: list[dict[str, Any]] = [
        {
            "ph": "M",
            "name": "thread_name",
            "ts": ts[0],
            "pid": pid,
            "tid": t,
            "args": {"name": f"thread {t} (python)"},
        }
        for t in sorted(set(tid))
    ]
    for i, (name, start, length, thread) in enumerate(zip(names, ts, dur, tid)):
        args: dict[str, Any] = {"External id": i + 1, "Record function id": 0, "Ev Idx": i}
        if i % 3 == 0:
            args["Sequence number"] = i
            args["Fwd thread id"] = 0
        if shapes:
            args |= SHAPES_ARGS[i % len(SHAPES_ARGS)]
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": pid,
                "tid": thread,
                "ts": start,
                "dur": length,
                "args": args,
            }
        )
        if i % 50 == 0:
            events.append(
                {
                    "ph": "i",
                    "cat": "cpu_instant_event",
                    "s": "t",
                    "name": "[memory]",
                    "pid": pid,
                    "tid": thread,
                    "ts": start,
                    "args": {
                        "Total Reserved": 0,
                        "Total Allocated": 4096,
                        "Bytes": 4096,
                        "Addr": 9397924688 + i,
                        "Device Type": 0,
                        "Device Id": -1,
                    },
                }
            )
        if training and i % 8 == 0:
            flow = {"ph": "s" if i % 16 == 0 else "f", "id": i // 16, "pid": pid, "tid": thread}
            flow |= {"ts": start, "cat": "fwdbwd", "name": "fwdbwd"}
            events.append(flow if i % 16 == 0 else flow | {"bp": "e"})
        if i % 100 == 0:
            events.append(
                {
                    "ph": "s",
                    "id": i,
                    "pid": pid,
                    "tid": thread,
                    "ts": start,
                    "cat": "ac2g",
                    "name": "ac2g",
                }
            )
    document = {
        "schemaVersion": 1,
        "deviceProperties": [],
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base,
        "traceEvents": events,
        "traceName": str(path),
    }
    path.write_text(json.dumps(document, separators=(", ", ": ")))
    return len(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ranges", type=int, default=1_000_000, help="ranges in the generated trace"
    )
    parser.add_argument(
        "--events", type=int, default=300_000, help="events in the torch-shaped trace"
    )
    args = parser.parse_args()

    rows: list[tuple[str, str, float, str, str]] = []
    size = f"{args.ranges:,} ranges, 8 threads"

    def per_range(seconds: float) -> str:
        return f"{args.ranges / seconds:,.0f} ranges/s"

    start = time.perf_counter()
    df = analysis.make_synthetic_trace(args.ranges, 8, seed=1)
    generated = time.perf_counter() - start
    rows.append(("make_synthetic_trace", size, generated, per_range(generated), ""))
    for operation, repeat, run, target in [
        ("summary()", 3, df.recfn.summary, "<= 0.5 s"),
        ("summary(), parents from nesting", 3, df.drop(columns="parent_id").recfn.summary, ""),
        ('summary(by="thread_name")', 3, lambda: df.recfn.summary(by="thread_name"), ""),
        ("timeline() to PNG", 2, lambda: render_timeline(df), "<= 3 s"),
        ("flame() to PNG", 2, lambda: render_flame(df), ""),
    ]:
        seconds = best_of(repeat, run)
        rows.append((operation, size, seconds, per_range(seconds), target))

    for depth, operation, repeat, run_on in [
        (5_000, "timeline() to PNG", 2, render_timeline),
        (5_000, "flame() to PNG", 2, render_flame),
        (30_000, "tree()", 3, lambda frame: frame.recfn.tree()),
    ]:
        seconds = best_of(repeat, partial(run_on, chain(depth)))
        rate = f"{depth / seconds:,.0f} ranges/s"
        rows.append((operation, f"one chain {depth:,} deep", seconds, rate, "seconds at most"))

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "torch_trace.json"
        n_events = torch_shaped_trace(args.events, path)
        size = f"{n_events:,} events, {path.stat().st_size / 2**20:.0f} MiB"
        raw = path.read_bytes()
        parse = best_of(3, lambda: parse_alone(raw))
        read = best_of(3, lambda: analysis.read_chrome_trace(path))
        rows.append(
            ("JSON decode alone (msgspec)", size, parse, f"{n_events / parse:,.0f} events/s", "")
        )
        rows.append(
            (
                "read_chrome_trace",
                size,
                read,
                f"{n_events / read:,.0f} events/s",
                ">= 500k events/s",
            )
        )

    print("| operation | size | seconds | rate | target |")
    print("|---|---|---:|---:|---|")
    for operation, what, seconds, rate, target in rows:
        print(f"| {operation} | {what} | {seconds:.3f} | {rate} | {target} |")


if __name__ == "__main__":
    main()
