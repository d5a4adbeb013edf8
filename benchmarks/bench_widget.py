"""Speed and size of the interactive timeline's kernel side, as a Markdown table.

Run: ``python benchmarks/bench_widget.py`` (``--ranges N`` to change the size, default 1M).
The trace is ``make_synthetic_trace(N, 4)`` with memory events. It times building the index,
the first view (the widget's initial state) and viewport queries from the whole trace down to
a 1e-6 slice, each the best of a few runs, and prints the JSON size of each response: the
kernel's side of a zoom or pan, which the issue budgets at 50 ms and 1 MB.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from recfn.analysis.synthetic import make_synthetic_trace
from recfn.notebook_ext.widget.lod import TimelineIndex, first_view, response_size

WIDTH_PX = 1200


def best_of(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    """Fastest of ``repeat`` runs in seconds, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        began = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - began)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranges", type=int, default=1_000_000)
    args = parser.parse_args()
    frame = make_synthetic_trace(args.ranges, 4, n_memory_events=args.ranges // 100)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    del frame
    build, index = best_of(1, lambda: TimelineIndex(table))
    print(f"{index.describe()['ranges']:,} ranges, {len(index.lanes)} lanes, width {WIDTH_PX} px")
    print()
    print("| step | ms | ms incl. JSON | response KB | ranges drawn | density cells |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| build index | {build * 1e3:.0f} | | | | |")
    rows: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("first view (initial state)", lambda: first_view(index, WIDTH_PX))
    ]
    for fraction in (0.5, 0.1, 0.01, 1e-3, 1e-4, 1e-6):
        t0 = index.span_ns * 0.37
        t1 = t0 + index.span_ns * fraction
        rows.append(
            (f"query {fraction:g} of the trace", lambda t0=t0, t1=t1: index.query(t0, t1, WIDTH_PX))
        )
    worst = 0.0
    for label, run in rows:
        seconds, response = best_of(5, run)
        encoded, _ = best_of(5, lambda run=run: response_size(run()))
        worst = max(worst, encoded)
        cells = sum(len(px) for px in response["density"]["px"])
        print(
            f"| {label} | {seconds * 1e3:.1f} | {encoded * 1e3:.1f} "
            f"| {response_size(response) / 1e3:.0f} "
            f"| {len(response['ranges']['row']):,} | {cells:,} |"
        )
    seconds, tree = best_of(3, index.call_tree)
    print(
        f"| call tree ({len(tree['name']):,} of {tree['nodes']:,} nodes) | {seconds * 1e3:.1f} "
        f"| {response_size(tree) / 1e3:.0f} | | |"
    )
    print()
    print(f"slowest viewport query with its JSON: {worst * 1e3:.1f} ms (budget 50 ms)")


if __name__ == "__main__":
    main()
