"""The cell's end: ``profile.stop()`` per row, traced calls against ranges, and capture memory.

Run: ``python benchmarks/bench_stop.py`` (``--rows N``, default 1M; ``--rounds R``, default 5).
In one process, side by side, the best of ``R`` interleaved rounds of:

* ``stop()`` (the whole of it: the tracer's hand-over, the table, the Trace) divided by the rows
  it consolidated, for ``N`` ranges (``with record_function``, two deep) and for ``N`` traced
  calls (``trace_calls=True`` on a loop calling one function, one user range per 1000 calls),
  and their ratio (target: traced <= 20 ns per row). Time is the calling thread's CPU time, so
  that other processes on a shared machine count less; the wall time is printed beside it.
* the same two ``stop()`` measures with the table's pages already resident, in a fresh process
  whose allocator keeps freed memory (memory touched and freed before each ``stop()``): recfn's
  own work, without the kernel's first touch of the table's fresh pages.
* the memory held while capturing ``N`` ranges (growth of the resident set during the capture,
  divided by the ranges; target <= 20 bytes per range), each round in a fresh process so that
  no page an earlier round freed is reused; and that the captured timestamps are the clock's
  own (every range's start and end within the clock reads around it).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import types
from typing import Any

import recfn


def rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _target() -> types.ModuleType:
    """A module outside recfn whose calls trace_calls records."""
    module = types.ModuleType("bench_stop_target")
    exec(
        "import recfn\n"
        "def leaf(x):\n    return x\n\n"
        "def traced(n):\n"
        "    for j in range(n // 1000):\n"
        "        with recfn.record_function('block'):\n"
        "            for i in range(999):\n"
        "                leaf(i)\n",
        vars(module),
    )
    return module


def ranges(n: int) -> None:
    record_function = recfn.record_function
    for _ in range(n // 2):
        with record_function("step"), record_function("forward"):
            pass


def stop_per_row(kind: str, n: int) -> tuple[float, float]:
    """(CPU ns, wall ns) of ``stop()`` per consolidated row, for ``n`` ranges or traced calls."""
    if kind == "ranges":
        prof = recfn.profile(max_events=n + 10)
        prof.start()
        ranges(n)
    else:
        target = _target()
        prof = recfn.profile(
            trace_calls=True, trace_include=["bench_stop_target"], max_events=2 * n
        )
        prof.start()
        target.traced(n)
    cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
    trace = prof.stop()
    cpu, wall = time.thread_time_ns() - cpu, time.perf_counter_ns() - wall
    rows = trace.table.num_rows
    return cpu / rows, wall / rows


def _held(n: int, queue: Any) -> None:
    """In a fresh process: bytes held per range while capturing ``n`` ranges, and whether every
    timestamp lies within the clock reads around the capture."""
    with recfn.profile(max_events=10):  # imports and first-use allocations out of the way
        ranges(4)
    prof = recfn.profile(max_events=n + 10)
    before = rss_bytes()
    first = time.time_ns()
    prof.start()
    ranges(n)
    held = rss_bytes() - before
    table = prof.stop().table
    last = time.time_ns()
    starts = table.column("start_ns").to_numpy()
    ends = table.column("end_ns").to_numpy(zero_copy_only=False)
    plausible = bool(
        (starts.min() >= first - 10**6) and (ends.max() <= last + 10**6) and (ends >= starts).all()
    )
    queue.put((held / n, plausible))


RESIDENT_BYTES = 400_000_000
"""What `_resident` touches and frees before each ``stop()``: more than a 1M-row table takes."""


def _resident(n: int, rounds: int, queue: Any) -> None:
    """In a fresh process whose allocator keeps freed memory (glibc's ``mallopt``: no ``mmap``
    for large blocks, no trimming), the best ``stop()`` per row of ranges and of traced calls
    with the table's pages already resident: memory is touched and freed before each
    ``stop()``, so the table reuses it. What is left is recfn's own work, without the first
    touch of fresh pages (the kernel's faults and zeroing); None where ``mallopt`` is not
    there."""
    import ctypes

    import numpy as np

    try:
        libc = ctypes.CDLL("libc.so.6")
        kept = libc.mallopt(-3, 1 << 30) == 1 and libc.mallopt(-1, 1 << 30) == 1
    except (OSError, AttributeError):
        kept = False
    if not kept:
        queue.put(None)
        return
    best = {"ranges": float("inf"), "traced": float("inf")}
    for _ in range(rounds):
        for kind in best:
            touched = np.ones(RESIDENT_BYTES, dtype=np.uint8)
            del touched
            best[kind] = min(best[kind], stop_per_row(kind, n)[0])
    queue.put(best)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = args.rows
    best = {"ranges": (float("inf"), float("inf")), "traced": (float("inf"), float("inf"))}
    for _ in range(args.rounds):
        for kind in best:
            cpu, wall = stop_per_row(kind, n)
            best[kind] = (min(best[kind][0], cpu), min(best[kind][1], wall))
    context = multiprocessing.get_context("spawn")
    held = []
    for _ in range(args.rounds):
        queue = context.Queue()
        child = context.Process(target=_held, args=(n, queue))
        child.start()
        held.append(queue.get())
        child.join()
    queue = context.Queue()
    child = context.Process(target=_resident, args=(n, args.rounds, queue))
    child.start()
    resident = queue.get()
    child.join()
    version = sys.version.split()[0]
    loads = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"recfn {recfn.__version__}, compiled={recfn.COMPILED}, Python {version}, {n:,} rows, "
          f"best of {args.rounds}, load averages {loads}\n")  # fmt: skip
    ranges_cpu, ranges_wall = best["ranges"]
    traced_cpu, traced_wall = best["traced"]
    print("| measure | CPU ns | wall ns | ratio (CPU) | target |")
    print("|---|---:|---:|---:|---|")
    print(f"| stop(), per range row | {ranges_cpu:.1f} | {ranges_wall:.1f} | 1.00x | |")
    print(f"| stop(), per traced-call row | {traced_cpu:.1f} | {traced_wall:.1f} | "
          f"{traced_cpu / ranges_cpu:.2f}x | <= 20 ns |")  # fmt: skip
    if resident is not None:
        print(f"| stop(), per range row, the table's pages resident | {resident['ranges']:.1f} "
              f"| | 1.00x | |")  # fmt: skip
        print(f"| stop(), per traced-call row, the table's pages resident | "
              f"{resident['traced']:.1f} | | {resident['traced'] / resident['ranges']:.2f}x "
              "| <= 20 ns |")  # fmt: skip
    per_range = min(value for value, _ in held)
    exact = all(ok for _, ok in held)
    print(f"| memory held while capturing, bytes per range | {per_range:.3f} | | | <= 20 |")
    print(f"\ntimestamps within the clock reads around the capture: {exact}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
