"""Parquet -> Chrome ``.json.gz`` and back: seconds and peak memory, as a Markdown table.

Run: ``python benchmarks/bench_chrome_convert.py --events 1000000`` (the README's table comes
from ``--events 10000000`` on a quiet machine). The trace is torch-shaped: nested ranges on 4
threads with torch's args (``External id``, ``Sequence number`` on every third), a mark every
50 ranges and a memory event every 100. Each direction runs in a fresh interpreter, as
``recfn convert`` does (``recfn.load(IN).save(OUT)``), and reports its own peak resident memory
(VmHWM, interpreter and imports included), and its growth over the resident memory after
importing pandas, pyarrow and recfn, both compared with the in-memory Arrow size of the Parquet's
table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def status_bytes(field: str) -> int:
    """A size from /proc/self/status in bytes: ``VmHWM`` (peak resident memory, which exec
    resets) or ``VmRSS`` (resident memory now)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def make(events: int, path: str) -> dict[str, float]:
    """Write the torch-shaped trace of `events` ranges as Parquet."""
    import numpy as np

    import recfn
    from recfn import analysis

    df = analysis.make_synthetic_trace(
        events, 4, seed=3, n_marks=events // 50, n_memory_events=events // 100
    )
    n = len(df)
    sequence = np.where(np.arange(n) % 3 == 0, np.arange(n), -1)
    df["sequence_nr"] = sequence
    df["args"] = [
        f'{{"External id":{i + 1},"Record function id":0,"Ev Idx":{i}}}' for i in range(n)
    ]
    trace = recfn.Trace.from_pandas(df)
    trace.save(path)
    return {"rows": n, "arrow_bytes": trace.table.nbytes}


def convert(source: str, target: str) -> dict[str, float]:
    """``recfn.load(source).save(target)``: seconds, peak memory and the table's Arrow size."""
    import pandas  # noqa: F401 (loaded by every conversion; counted in the baseline)
    import pyarrow.parquet  # noqa: F401

    import recfn

    baseline = status_bytes("VmRSS")
    start = time.perf_counter()
    trace = recfn.load(source)
    arrow_bytes = trace.table.nbytes
    trace.save(target)
    seconds = time.perf_counter() - start
    peak = status_bytes("VmHWM")
    return {"seconds": seconds, "peak": peak, "growth": peak - baseline, "arrow_bytes": arrow_bytes}


def _child(*args: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--step", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        step, *paths = args.step
        result = make(args.events, *paths) if step == "make" else convert(*paths)
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as folder:
        parquet, chrome, back = (
            str(Path(folder) / name) for name in ("t.parquet", "t.json.gz", "back.parquet")
        )
        made = _child("--events", str(args.events), "--step", "make", parquet)
        there = _child("--step", "convert", parquet, chrome)
        back_again = _child("--step", "convert", chrome, back)
        sizes = {p: Path(p).stat().st_size for p in (parquet, chrome)}
    arrow = there["arrow_bytes"]
    print(
        f"{made['rows']:,.0f} events; the Parquet's table is {arrow / 2**20:,.0f} MiB in memory "
        f"(Parquet {sizes[parquet] / 2**20:,.0f} MiB, .json.gz {sizes[chrome] / 2**20:,.0f} MiB); "
        f"load average {os.getloadavg()[0]:.1f}\n"
    )
    print("| conversion | seconds | events/s | peak RSS | / Arrow size | growth after imports |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, result in (
        ("Parquet -> Chrome .json.gz", there),
        ("Chrome .json.gz -> Parquet", back_again),
    ):
        print(
            f"| {label} | {result['seconds']:.1f} | {made['rows'] / result['seconds']:,.0f} | "
            f"{result['peak'] / 2**20:,.0f} MiB | {result['peak'] / arrow:.2f}x | "
            f"{result['growth'] / 2**20:,.0f} MiB = {result['growth'] / arrow:.2f}x |"
        )


if __name__ == "__main__":
    main()
