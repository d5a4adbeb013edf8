"""Cost of Parquet integrity: the content hash and page checksums on write and read, and the
event checks on load, as ratios to plain pyarrow Parquet I/O of the same table in one process.

Run: ``python benchmarks/bench_integrity.py --rows 1000000 10000000`` (best of ``--rounds``).
Tables come from ``recfn.analysis.synthetic`` (4 threads, marks and memory events); the
"shuffled" check runs on the same rows in random order (ids through a lookup array), the
"depth all 0" one without the depth shortcut, so parent chains are followed by pointer jumping.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recfn.analysis.synthetic import make_synthetic_trace
from recfn.formats import io, schema
from recfn.formats._digest import table_digest


def best(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def plain_write(table: pa.Table, path: str) -> None:
    """recfn's Parquet options without checksums or the hash."""
    pq.write_table(table, path, **io.parquet_options(table))


def measure(rows: int, rounds: int, folder: str) -> list[tuple[str, float, float]]:
    points = max(rows // 100, 1)
    frame = make_synthetic_trace(rows - 2 * points, 4, n_marks=points, n_memory_events=points)
    table = schema.conform(frame, "bench")
    del frame
    plain, hashed = os.path.join(folder, "plain.parquet"), os.path.join(folder, "hashed.parquet")
    meta = dict(table.schema.metadata)
    shuffled = table.take(np.random.default_rng(0).permutation(table.num_rows))
    flat = table.set_column(
        table.schema.get_field_index("depth"), "depth", pa.array(np.zeros(rows, np.int32))
    )
    write = best(lambda: plain_write(table, plain), rounds)
    read = best(lambda: pq.read_table(plain), rounds)
    results = [
        ("write: plain pyarrow", write, write),
        ("write: recfn (checksums + hash)", best(lambda: io.write_parquet(table, hashed), rounds),
         write),
        ("  of which the content hash", best(lambda: table_digest(table, meta), rounds), write),
        ("read: plain pyarrow", read, read),
        ("read: recfn (verify checksums + hash + checks)",
         best(lambda: io.read_parquet(hashed), rounds), read),
        ("  of which check_events", best(lambda: schema.check_events(table, "b"), rounds), read),
        ("  check_events, rows shuffled", best(lambda: schema.check_events(shuffled, "b"), rounds),
         read),
        ("  check_events, depth all 0 (pointer jumping)",
         best(lambda: schema.check_events(flat, "b"), rounds), read),
    ]  # fmt: skip
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("| rows | step | seconds | ratio to plain pyarrow |")
    print("|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for rows in args.rows:
            for step, seconds, base in measure(rows, args.rounds, folder):
                print(f"| {rows:,} | {step} | {seconds:.3f} | {seconds / base:.2f} |", flush=True)


if __name__ == "__main__":
    main()
