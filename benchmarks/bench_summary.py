"""Summaries against a database's group-by: ``recfn.load(path).summary()`` and ``recfn summary``
beside DuckDB's ``GROUP BY name`` over the same files, time and peak RSS, as a Markdown table.

Run: ``python benchmarks/bench_summary.py`` (``--sizes 3000000,10000000``, ``--fleet EVENTS``,
``--processes P``, ``--data FOLDER``, ``--repeat K``). For each size it writes one trace file of
that many synthetic events (``make_synthetic_trace``, saved as ``Trace.save`` writes it: zstd, a
content hash per row group) and a dataset folder of the same events in 4 processes; ``--fleet``
adds a dataset of EVENTS events in P processes (``bench_fleet.generate``). Files are kept in
``--data`` (default a temporary folder) and reused when they are there already, so a large fleet
is generated once. Every measured step runs in a fresh interpreter that reports its own peak RSS
and time, side by side in this run, best of ``--repeat``:

- DuckDB: ``SELECT name, count(*), sum(d), min(d), max(d) FROM (SELECT name, end_ns - start_ns
  AS d FROM read_parquet(...) WHERE kind = 'range' AND end_ns IS NOT NULL) GROUP BY name`` (no self
  time, no recursion rule, no verification: what the targets are measured against);
- ``recfn.load(path).summary()``, verified (content hash, schema, ids, parents), with self time and
  the recursion rule;
- ``recfn summary path``, as the console command runs it (``bench_fleet.SUMMARY``: its entry
  point and its exit; the table printed to a buffer).

The ratio columns divide recfn's figure by DuckDB's on the same files. ``--baseline SITE`` also
runs each recfn step with another recfn (a folder holding a ``recfn`` package with
``recfn/analysis`` and ``recfn/notebook_ext`` laid in, such as ``git archive`` of an earlier
commit), right after this one's: before and after a change, side by side.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fleet import SUMMARY as CLI  # noqa: E402
from bench_fleet import measured as once  # noqa: E402

DUCKDB = (
    "import duckdb\n"
    "duckdb.sql('''SELECT name, count(*), sum(d), min(d), max(d) FROM (SELECT name, "
    "end_ns - start_ns AS d FROM read_parquet({files!r}) WHERE kind = 'range' AND end_ns IS NOT "
    "NULL) GROUP BY name''').fetchall()"
)
LOAD = "import recfn\nrecfn.load({source!r}).summary()"


def measured(body: str, repeat: int, site: str | None = None) -> tuple[float, int, float]:
    """Best seconds, the peak RSS (bytes) and CPU seconds of that run, of ``body`` in fresh
    interpreters (``bench_fleet.measured``: imports included, as a user's command starts;
    ``site``: import recfn from that folder instead). CPU time varies less than wall time on a
    loaded machine."""
    runs = [once(body, site) for _ in range(repeat)]
    return min(runs, key=lambda found: found[0])


def write_file(path: str, events: int) -> None:
    """One trace file of ``events`` synthetic events, as ``Trace.save`` writes it."""
    import recfn
    from recfn.analysis.synthetic import make_synthetic_trace

    recfn.Trace.from_pandas(make_synthetic_trace(events, n_threads=4, seed=1)).save(path)


def ensure(data: str, sizes: list[int], fleet: int, processes: int) -> list[tuple[str, str, int]]:
    """The files to measure (made when missing): (label, source, events)."""
    import multiprocessing

    from bench_fleet import generate

    found = []
    for size in sizes:
        path = os.path.join(data, f"one-{size}.parquet")
        if not os.path.exists(path):
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                pool.apply(write_file, (path, size))
        found.append((f"one file, {size / 1e6:g}M events", path, size))
        folder = os.path.join(data, f"fleet-{size}-4")
        if not os.path.exists(folder):
            generate(folder, size, 4)
        found.append((f"dataset, {size / 1e6:g}M events, 4 processes", folder, size))
    if fleet:
        folder = os.path.join(data, f"fleet-{fleet}-{processes}")
        if not os.path.exists(folder):
            generate(folder, fleet, processes)
        found.append((f"dataset, {fleet / 1e6:g}M events, {processes} processes", folder, fleet))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="3000000,10000000")
    parser.add_argument("--fleet", type=int, default=0, help="events of a many-process dataset")
    parser.add_argument("--processes", type=int, default=64)
    parser.add_argument("--data", help="folder for the generated files (kept, reused)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-load", action="store_true", help="skip recfn.load(path).summary()")
    parser.add_argument(
        "--baseline", metavar="SITE", help="also run each recfn step with this recfn"
    )
    options = parser.parse_args()
    sizes = [int(s) for s in options.sizes.split(",") if s]
    data = options.data or tempfile.mkdtemp(prefix="recfn-bench-summary-")
    os.makedirs(data, exist_ok=True)
    t = time.perf_counter()
    sources = ensure(data, sizes, options.fleet, options.processes)
    print(f"files ready in {time.perf_counter() - t:.0f} s under {data}")
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    print("| files | step | seconds | CPU s | peak RSS MiB | time vs DuckDB | RSS vs DuckDB |")
    print("|---|---|---|---|---|---|---|")
    for label, source, _ in sources:
        files = (
            [source]
            if os.path.isfile(source)
            else sorted(glob.glob(os.path.join(source, "**", "*.parquet"), recursive=True))
        )
        base_s, base_rss, base_cpu = measured(DUCKDB.format(files=files), options.repeat)
        print(
            f"| {label} | DuckDB GROUP BY name | {base_s:.2f} | {base_cpu:.2f} | "
            f"{base_rss / 2**20:.0f} | 1 | 1 |"
        )
        steps = [("`recfn summary`", CLI)]
        if not options.no_load:
            steps.insert(0, ("`recfn.load(path).summary()`", LOAD))
        for step, body in steps:
            runs = [("", None)] + ([(", baseline", options.baseline)] if options.baseline else [])
            for suffix, site in runs:
                seconds, rss, cpu = measured(body.format(source=source), options.repeat, site)
                print(
                    f"| {label} | {step}{suffix} | {seconds:.2f} | {cpu:.2f} | {rss / 2**20:.0f} | "
                    f"{seconds / base_s:.1f}x | {rss / base_rss:.1f}x |",
                    flush=True,
                )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
