"""Fleet scale: summarising a many-process dataset out of core, and streaming capture, with
peak memory, as a Markdown table.

Run: ``python benchmarks/bench_fleet.py`` (``--events N``, ``--processes P``, ``--ranges R``,
``--single``, ``--no-pandas``, ``--baseline SITE``). A generator spawns P processes, two at a time, each writing N/P
synthetic events (``make_synthetic_trace``) as the parts that ``profile(output=...)`` writes:
``hostname=.../process=.../part-N.parquet`` of ``spill_rows(1M)`` rows, the wall time in the last
part only (written directly, not recorded: recording 100M ranges takes too long on 2 cores).
Then each measured step runs in a fresh interpreter that reports its own peak RSS, side by side
in this run: ``recfn summary <folder>`` against loading the dataset into pandas and summarising
it there, ``recfn summary`` of one file of N events (``--single``), and streaming capture of R
ranges in one process with ``max_events=1M``, into a dataset folder and (up to 10M ranges) in
memory. ``--baseline SITE`` also runs each ``recfn summary`` step with another recfn (a folder
that holds a ``recfn`` package, ``recfn/analysis`` and ``recfn/notebook_ext`` included, such as
``git archive`` of an earlier commit laid out so) on the same files, right after this one's, and
gives the ratio: before and after a change, side by side on the same machine.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
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
usage = resource.getrusage(resource.RUSAGE_SELF)
print(elapsed, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime)
"""


def measured(body: str, site: str | None = None) -> tuple[float, int, float]:
    """Seconds, peak RSS (bytes) and CPU seconds of ``body`` run in a fresh interpreter (CPU
    time varies less than wall time on a loaded machine). The peak RSS counts this process's
    size when it started the interpreter (Linux keeps it across fork and exec): so this process
    stays small, its large work runs in pools. ``site``: import recfn from that folder instead
    (run outside this checkout, so that it does not come first)."""
    env = None if site is None else dict(os.environ, PYTHONPATH=site)
    done = subprocess.run(
        [sys.executable, "-c", MEASURE.format(body=body)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT if site is None else tempfile.gettempdir(),
        env=env,
    )
    seconds, rss, cpu = done.stdout.split()[-3:]
    return float(seconds), int(rss), float(cpu)


def write_process(args: tuple[str, int, int, int]) -> int:
    """One process's synthetic events written as ``profile(output=...)`` lays them out: parts of
    ``rows`` rows in ``hostname=.../process=.../``, numbered, each with its
    dropped count, and the wall time in the last one only."""
    folder, k, events, rows = args
    import pandas as pd

    import recfn
    from recfn.analysis.synthetic import START_NS, make_synthetic_trace
    from recfn.capture._stream import process_folder
    from recfn.formats import schema
    from recfn.formats.io import write_parquet

    df = make_synthetic_trace(events, n_threads=4, seed=k)
    df["pid"] = 10_000 + k
    df["host"] = pd.Categorical([f"node{k % 4}"] * len(df))
    df["rank"] = pd.Series([k] * len(df), dtype="int32")
    table = recfn.Trace.from_pandas(df).table
    wall_ns = str(int(df["end_ns"].max()) - START_NS)
    del df
    where = process_folder(folder, f"node{k % 4}", 10_000 + k)
    os.makedirs(where, exist_ok=True)
    parts = max(1, -(-table.num_rows // rows))
    for number in range(parts):
        metadata = schema.metadata_of(table)
        metadata[schema.PART_KEY] = str(number)
        metadata[schema.DROPPED_EVENTS_KEY] = "0"
        if number < parts - 1:
            metadata.pop(schema.WALL_NS_KEY, None)
        else:  # a stopped capture's last part: the folder is a finished process's
            metadata.setdefault(schema.WALL_NS_KEY, wall_ns)
        part = table.slice(number * rows, rows).replace_schema_metadata(metadata)
        write_parquet(part, os.path.join(where, f"part-{number:05d}.parquet"))
    return int(table.num_rows)


def generate(folder: str, events: int, processes: int, max_events: int = 1_000_000) -> int:
    """A dataset of ``processes`` processes, two written at a time (spawned)."""
    from recfn.capture._stream import spill_rows

    per = events // processes
    jobs = [(folder, k, per, spill_rows(max_events)) for k in range(processes)]
    with multiprocessing.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        return sum(pool.imap_unordered(write_process, jobs))


SUMMARY = (
    "import atexit, contextlib, io\n"
    "def report():  # console() ends with os._exit once the atexit handlers have run\n"
    "    usage = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    print(time.perf_counter() - t, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime,\n"
    "          file=sys.__stdout__, flush=True)\n"
    "atexit.register(report)\n"
    "sys.argv = ['recfn', 'summary', {source!r}]\n"
    "from recfn.cli import console\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    console()\n"
)
"""``recfn summary SOURCE`` as the console command runs it (its entry point, its exit), the
table printed to a buffer."""


def summary_rows(
    what: str, source: str, n: int, baseline: str | None = None
) -> list[tuple[str, float, int, str]]:
    """``recfn summary source``, and with ``baseline`` the same by that recfn, with the ratio."""
    seconds, rss, cpu = measured(SUMMARY.format(source=source))
    rows = [(what, seconds, rss, f"{n / seconds / 1e6:.2f} M events/s, {cpu:.1f} CPU s")]
    if baseline is not None:
        b_seconds, b_rss, b_cpu = measured(SUMMARY.format(source=source), site=baseline)
        rows.append(
            (
                f"{what}, baseline",
                b_seconds,
                b_rss,
                f"{b_cpu:.1f} CPU s; this one: {seconds / b_seconds:.2f}x the time, "
                f"{cpu / b_cpu:.2f}x the CPU, {rss / b_rss:.2f}x the RSS",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000_000, help="0: no dataset")
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--ranges", type=int, default=3_000_000, help="0: no streaming")
    parser.add_argument("--single", action="store_true", help="also one file of --events")
    parser.add_argument("--no-pandas", action="store_true", help="skip the in-memory summary")
    parser.add_argument("--baseline", metavar="SITE", help="also summarise with this recfn")
    options = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    rows: list[tuple[str, float, int, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        if options.events:
            folder = os.path.join(tmp, "traces")
            t = time.perf_counter()
            n = generate(folder, options.events, options.processes)
            made = time.perf_counter() - t
            files = list(Path(folder).rglob("*.parquet"))
            size = sum(p.stat().st_size for p in files)
            rows.append(
                (
                    f"generate {n:,} events, {options.processes} processes",
                    made,
                    0,
                    f"{len(files)} parts, {size / 2**20:.0f} MiB Parquet",
                )
            )
            rows += summary_rows("`recfn summary traces/`", folder, n, options.baseline)
            if not options.no_pandas:
                pandas_s, pandas_rss, _ = measured(
                    f"import recfn\nrecfn.load({folder!r}, as_pandas=True).recfn.summary()"
                )
                ours = rows[-2] if options.baseline else rows[-1]
                rows.append(
                    (
                        "load + pandas summary",
                        pandas_s,
                        pandas_rss,
                        f"{pandas_s / ours[1]:.1f}x the time, {pandas_rss / ours[2]:.1f}x "
                        "the RSS of `recfn summary`",
                    )
                )
            shutil.rmtree(folder)
        if options.events and options.single:
            one = os.path.join(tmp, "one")
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                n = pool.apply(write_process, ((one, 0, options.events, options.events),))
            (path,) = Path(one).rglob("*.parquet")
            rows += summary_rows(
                f"`recfn summary` of one file of {n:,} events", str(path), n, options.baseline
            )
        if options.ranges:
            stream = os.path.join(tmp, "stream")
            body = (
                "import recfn\n"
                "with recfn.profile({where}max_events={cap}) as prof:\n"
                "    with recfn.record_function('outer'):\n"
                f"        for _ in range({options.ranges}):\n"
                "            with recfn.record_function('step'):\n"
                "                pass\n"
                "import pyarrow.parquet as pq\n"
                "trace = prof.trace\n"
                "assert trace.dropped_events == 0\n"
                "rows = sum(pq.ParquetFile(f).metadata.num_rows for f in trace.files) if "
                "trace.files else trace.events\n"
                f"assert rows == {options.ranges} + 3, rows  # with outer and the start/stop marks"
            )
            s_s, s_rss, _ = measured(body.format(where=f"output={stream!r}, ", cap=1_000_000))
            rows.append(
                (
                    f"stream {options.ranges:,} ranges, max_events=1M, output=folder",
                    s_s,
                    s_rss,
                    "nothing dropped, every event written",
                )
            )
            if options.ranges > 10_000_000:
                return _print(rows)
            m_s, m_rss, _ = measured(body.format(where="", cap=options.ranges + 10))
            rows.append(
                (
                    f"same in memory (max_events={options.ranges + 10:,})",
                    m_s,
                    m_rss,
                    f"streaming RSS is {s_rss / m_rss:.2f}x",
                )
            )
    _print(rows)


def _print(rows: list[tuple[str, float, int, str]]) -> None:
    """The table; a peak RSS of 0 (a step not measured in its own interpreter) prints as -."""
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print("| step | seconds | peak RSS MiB | note |")
    print("|---|---|---|---|")
    for name, seconds, rss, note in rows:
        peak = f"{rss / 2**20:.0f}" if rss else "-"
        print(f"| {name} | {seconds:.2f} | {peak} | {note} |")


if __name__ == "__main__":
    main()
