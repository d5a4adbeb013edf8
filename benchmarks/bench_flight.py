"""The flight recorder's cost: capture per range with ``flight_recorder=N`` beside a plain
profile and a streaming one, the events it holds, and how long a dump takes.

Run: ``python benchmarks/bench_flight.py`` (``--ranges`` and ``--capacity`` change the sizes).
The workload is ``--ranges`` ranges on one thread, nested two deep (``step`` > ``forward``).
The three captures run side by side in this process, best of ``--repeat``; compare the ratios.
Held events are counted (ring, held open ranges and unspilled buffers), not measured as RSS.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import recfn


def workload(n: int) -> None:
    record_function = recfn.record_function
    for _ in range(n // 2):
        with record_function("step"), record_function("forward"):
            pass


def capture(n: int, **options: Any) -> tuple[float, Any]:
    """ns per range of ``workload`` under ``recfn.profile(**options)``, and the profile."""
    with recfn.profile(**options) as prof:
        start = time.perf_counter_ns()
        workload(n)
        elapsed = time.perf_counter_ns() - start
    return elapsed / n, prof


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranges", type=int, default=1_000_000)
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, capacity = args.ranges, args.capacity

    best: dict[str, float] = {}
    held = 0
    dump_ms = 0.0
    for _ in range(args.repeat):
        cost, _ = capture(n, max_events=2 * n)
        best["plain"] = min(best.get("plain", cost), cost)
        with tempfile.TemporaryDirectory() as folder:
            cost, _ = capture(n, output=folder)
        best["streaming"] = min(best.get("streaming", cost), cost)
        with recfn.profile(flight_recorder=capacity) as prof:
            start = time.perf_counter_ns()
            workload(n)
            cost = (time.perf_counter_ns() - start) / n
            held = prof._ring.retained
            began = time.perf_counter_ns()
            dump = prof.dump()
            dump_ms = (time.perf_counter_ns() - began) / 1e6
        best["flight"] = min(best.get("flight", cost), cost)

    print(f"{n:,} ranges, flight_recorder={capacity:,}, best of {args.repeat}, "
          f"compiled={recfn.COMPILED}\n")  # fmt: skip
    print("| measure | value | x plain profile |")
    print("|---|---:|---:|")
    print(f"| plain profile, ns per range | {best['plain']:.0f} | 1.00x |")
    for name in ("streaming", "flight"):
        label = {"streaming": "streaming (`output=DIR`)", "flight": "flight recorder"}[name]
        ratio = best[name] / best["plain"]
        print(f"| {label}, ns per range | {best[name]:.0f} | {ratio:.2f}x |")
    print(f"| flight recorder, events held at the end | {held:,} | N + {held - capacity:,} |")
    print(f"| flight recorder, dump() of {dump.events:,} events, ms | {dump_ms:.0f} | |")


if __name__ == "__main__":
    main()
