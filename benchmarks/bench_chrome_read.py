"""Speed and peak memory of ``read_chrome_trace`` on a torch-shaped trace, as a Markdown table.

Run: ``python benchmarks/bench_chrome_read.py`` (``--events N``; default 300k). The trace is
`bench_analysis.torch_shaped_trace`, with torch's ``record_shapes`` args (Input Dims, Input type,
Input Strides, Concrete Inputs) under ``--shapes``, with a training step's forward-backward flows
under ``--training``; ``--trace PATH`` reads an existing trace (a real torch.profiler one, say:
``benchmarks/record_torch_trace.py`` records one) instead. Side by side in one process: the msgspec
decode alone (the floor of the msgspec path), the nesting-depth scan alone (the price of the bound
on JSON nesting there), the read to Arrow (``recfn.load``'s path) and the read to pandas, each with
the native decoder (``recfn.native._cchrome``, compiled builds) and without it; best of 3 each.
Peak memory is measured for each reader in a fresh process (VmHWM growth during one read) and
compared with the size of the resulting Arrow table. Where the trace has
``input_shapes``/``input_dtypes``, the last rows are their pandas conversion alone (object columns
of numpy arrays), which ``read_chrome_trace`` pays within its time:
``recfn.formats.schema.list_cells`` (a cell per distinct value, shared by its rows) and, for
comparison, pyarrow's ``to_pandas`` (a cell per row).

``--against DIR`` compares with another build side by side (a checkout of an earlier commit with
its compiled modules built in place, ``pip install -e`` or ``setup.py build_ext --inplace``):
each reader is timed in fresh interpreters of this build and of DIR's, in turns (best of 3 reads
in each of `--turns` interpreters), so that both see the same load; a last table gives both
rates and their ratio.
"""

from __future__ import annotations

import argparse
import gzip
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_analysis import best_of, parse_alone, torch_shaped_trace
from bench_chrome_convert import status_bytes

import recfn
from recfn.formats import chrome, schema
from recfn.formats.chrome import _reader as _chrome_import

READERS = {
    "read_chrome_table (Arrow, recfn.load)": chrome.read_chrome_table,
    "read_chrome_trace (pandas)": chrome.read_chrome_trace,
}


def _peak(reader: str, path: str, queue: Any) -> None:
    """In a fresh process: peak resident growth (bytes) of one read by `reader`, after a small
    read has loaded everything it imports."""
    read = READERS[reader]
    read(Path(__file__).resolve().parent.parent / "tests/data/torch_trace.json")
    before = status_bytes("VmHWM")
    result = read(path)
    queue.put(status_bytes("VmHWM") - before)
    del result


_TIMED = """
import gc, sys, time
from recfn.formats import chrome
read, path = getattr(chrome, sys.argv[1]), sys.argv[2]
read(path)
best = float("inf")
for _ in range(3):
    gc.collect()
    start = time.perf_counter()
    read(path)
    best = min(best, time.perf_counter() - start)
print(best)
"""
"""A fresh interpreter's best of 3 reads (after one that loads what the reader imports)."""


def timed_in(tree: Path, reader: str, path: Path) -> float:
    """Seconds of `reader` (a function of recfn.formats.chrome) on `path` with the recfn of
    `tree`, in a fresh interpreter started outside any checkout."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", _TIMED, reader, str(path)],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.split()[-1])


def against(tree: Path, path: Path, n: int, turns: int) -> None:
    """Print both readers' rates with this build and with `tree`'s, timed in turns."""
    here = Path(__file__).resolve().parent.parent
    print(f"\n| reader | this build | {tree} | this / that |")
    print("|---|---:|---:|---:|")
    for reader in ("read_chrome_table", "read_chrome_trace"):
        mine, theirs = float("inf"), float("inf")
        for _ in range(turns):
            mine = min(mine, timed_in(here, reader, path))
            theirs = min(theirs, timed_in(tree, reader, path))
        print(f"| {reader} | {n / mine:,.0f} events/s | {n / theirs:,.0f} events/s | "
              f"{theirs / mine:.2f}x |")  # fmt: skip


def _events(raw: bytes) -> int:
    """The number of events in the JSON trace `raw`."""
    outline = _chrome_import.OUTLINE.decode(raw)
    return len(outline if isinstance(outline, list) else outline.traceEvents)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--shapes", action="store_true", help="with record_shapes args")
    parser.add_argument("--training", action="store_true", help="with forward-backward flows")
    parser.add_argument("--trace", type=Path, help="read this trace instead of generating one")
    parser.add_argument("--against", type=Path, help="also time the readers of this checkout")
    parser.add_argument("--turns", type=int, default=3, help="interpreters per build (--against)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.trace is None:
            path = Path(folder) / "torch_trace.json"
            n = torch_shaped_trace(args.events, path, shapes=args.shapes, training=args.training)
            raw = path.read_bytes()
        else:
            path = args.trace
            raw = path.read_bytes()
            raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            n = _events(raw)
        size = f"{n:,} events, {len(raw) / 2**20:.0f} MiB"
        rows = [
            ("JSON decode alone (msgspec)", best_of(3, lambda: parse_alone(raw))),
            ("nesting-depth scan alone", best_of(3, lambda: chrome.check_depth(raw, "t"))),
        ]
        for reader, read in READERS.items():
            for label, native in (("native decoder", _chrome_import.NATIVE), ("msgspec", None)):
                if label == "native decoder" and native is None:
                    continue  # a pure install: no native decoder
                _chrome_import.NATIVE, saved = native, _chrome_import.NATIVE
                try:
                    rows.append((f"{reader}, {label}", best_of(3, lambda r=read: r(path))))
                finally:
                    _chrome_import.NATIVE = saved
        table = recfn.load(path).table
        table_bytes = table.nbytes
        lists = [name for name in ("input_shapes", "input_dtypes") if name in table.column_names]
        if lists:
            columns = [table.column(name) for name in lists]
            named = " and ".join(lists)
            seconds = best_of(3, lambda: [schema.list_cells(c) for c in columns])
            rows.append((f"pandas conversion of {named} alone (shared cells)", seconds))
            seconds = best_of(3, lambda: [c.to_pandas() for c in columns])
            rows.append(("the same, a cell per row (pyarrow's to_pandas)", seconds))
        del table
        if args.against is not None:
            against(args.against.resolve(), path, n, args.turns)
        context = multiprocessing.get_context("spawn")
        peaks = {}
        for reader in READERS:
            queue = context.Queue()
            child = context.Process(target=_peak, args=(reader, str(path), queue))
            child.start()
            peaks[reader] = queue.get()
            child.join()
    floor = rows[0][1]
    print("| operation | size | seconds | rate | / decode alone |")
    print("|---|---|---:|---:|---:|")
    for operation, seconds in rows:
        print(f"| {operation} | {size} | {seconds:.3f} | {n / seconds:,.0f} events/s | "
              f"{seconds / floor:.2f}x |")  # fmt: skip
    print(f"\nThe Arrow table: {table_bytes / 2**20:.0f} MiB\n")
    label = "native decoder" if _chrome_import.NATIVE is not None else "msgspec"
    print(f"| reader ({label}) | peak memory growth of one read | / Arrow table |")
    print("|---|---:|---:|")
    for reader, peak in peaks.items():
        print(f"| {reader} | {peak / 2**20:.0f} MiB | {peak / table_bytes:.2f}x |")


if __name__ == "__main__":
    main()
