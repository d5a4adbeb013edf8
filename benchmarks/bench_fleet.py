"""Fleet scale: summarising a many-process dataset out of core, and streaming capture, with
peak memory, as a Markdown table.

Run: ``python benchmarks/bench_fleet.py`` (``--events N``, ``--processes P``, ``--ranges R``).
A generator writes a dataset of P processes' synthetic traces (``make_synthetic_trace``, each
process a folder ``hostname=.../process=.../``), two processes at a time; then each measured
step runs in a fresh interpreter that reports its own peak RSS, side by side in this run:
``recfn summary <folder>`` (DuckDB over the files) against loading the dataset into pandas
and summarising it there. Streaming capture records R ranges in one process with
``max_events=1M``, once into a dataset folder and once in memory.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MEASURE = """
import resource, sys, time
t = time.perf_counter()
{body}
elapsed = time.perf_counter() - t
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def measured(body: str) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of ``body`` run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE.format(body=body)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    seconds, rss = done.stdout.split()[-2:]
    return float(seconds), int(rss)


def write_process(args: tuple[str, int, int]) -> int:
    folder, k, events = args
    import pandas as pd

    import recfn
    from recfn.analysis.synthetic import make_synthetic_trace

    df = make_synthetic_trace(events, n_threads=4, seed=k)
    df["pid"] = 10_000 + k
    df["host"] = pd.Categorical([f"node{k % 4}"] * len(df))
    df["rank"] = pd.Series([k] * len(df), dtype="int32")
    path = Path(folder) / f"hostname=node{k % 4}" / f"process={10_000 + k}" / "part-00000.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    recfn.Trace.from_pandas(df).save(path)
    return len(df)


def generate(folder: str, events: int, processes: int) -> int:
    per = events // processes
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        return sum(pool.map(write_process, [(folder, k, per) for k in range(processes)]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--ranges", type=int, default=3_000_000)
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "traces")
        t = time.perf_counter()
        n = generate(folder, options.events, options.processes)
        made = time.perf_counter() - t
        size = sum(p.stat().st_size for p in Path(folder).rglob("*.parquet"))
        rows.append(
            (
                f"generate {n:,} events, {options.processes} processes",
                made,
                0,
                f"{size / 2**20:.0f} MiB Parquet",
            )
        )
        duck_s, duck_rss = measured(
            "from recfn.notebook_ext.cli import main\n"
            "import contextlib, io\n"
            f"with contextlib.redirect_stdout(io.StringIO()): main(['summary', {folder!r}])"
        )
        rows.append(
            (
                "`recfn summary traces/` (DuckDB)",
                duck_s,
                duck_rss,
                f"{n / duck_s / 1e6:.1f} M events/s",
            )
        )
        pandas_s, pandas_rss = measured(
            f"import recfn\nrecfn.load({folder!r}, as_pandas=True).recfn.summary()"
        )
        rows.append(
            (
                "load + pandas summary",
                pandas_s,
                pandas_rss,
                f"{pandas_s / duck_s:.1f}x DuckDB's time, {pandas_rss / duck_rss:.1f}x its RSS",
            )
        )
        stream = os.path.join(tmp, "stream")
        body = (
            "import recfn\n"
            "with recfn.profile({where}max_events={cap}) as prof:\n"
            "    with recfn.record_function('outer'):\n"
            f"        for _ in range({options.ranges}):\n"
            "            with recfn.record_function('step'):\n"
            "                pass\n"
            "assert prof.trace.dropped_events == 0"
        )
        s_s, s_rss = measured(body.format(where=f"output={stream!r}, ", cap=1_000_000))
        rows.append(
            (
                f"stream {options.ranges:,} ranges, max_events=1M, output=folder",
                s_s,
                s_rss,
                "nothing dropped",
            )
        )
        m_s, m_rss = measured(body.format(where="", cap=options.ranges + 10))
        rows.append(
            (
                f"same in memory (max_events={options.ranges + 10:,})",
                m_s,
                m_rss,
                f"streaming RSS is {s_rss / m_rss:.2f}x",
            )
        )
    print("| step | seconds | peak RSS MiB | note |")
    print("|---|---|---|---|")
    for name, seconds, rss, note in rows:
        print(f"| {name} | {seconds:.2f} | {rss / 2**20:.0f} | {note} |")


if __name__ == "__main__":
    main()
