"""Speed and size of the interactive timeline's kernel side, as a Markdown table.

Run: ``python benchmarks/bench_widget.py`` (``--ranges N`` to change the size, default 1M).
The trace is ``make_synthetic_trace(N, 4)`` with memory events. It times building the index,
the first view (the widget's initial state) and viewport queries from the whole trace down to
a 1e-6 slice, each the best of a few runs, and prints the JSON size of each response: the
kernel's side of a zoom or pan, which the issue budgets at 50 ms and 1 MB. Then what the magic
publishes for that trace: the time to the widget's first paint (kernel side) and the cell's
output size against its budget.
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
    print()
    magic_cell(table)


def magic_cell(table: pa.Table) -> None:
    """What ``%%record_function`` publishes for this trace, step by step, and its total size.

    First paint (kernel side) is the time from the captured trace to the widget's bundle being
    published: the header line, then the widget's initial state (the table, the HTML stand-in
    and the PNG follow, filled in place). anywidget is imported beforehand, as ``%load_ext
    recfn`` does in a kernel.
    """
    from types import SimpleNamespace

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    import recfn.notebook_ext.widget.view  # noqa: F401  (imported at %load_ext in a kernel)
    from recfn.formats.trace import Trace
    from recfn.notebook_ext.display import (
        header_html,
        show,
        timeline_png,
        trace_html,
        trace_text,
    )
    from recfn.notebook_ext.fallback import DEFAULT_OUTPUT_BUDGET, fallback_html
    from recfn.notebook_ext.widget import timeline_widget

    InteractiveShell.instance()
    trace = Trace(table, name="bench")
    steps: list[tuple[str, float]] = []

    def step(label: str, run: Callable[[], Any]) -> Any:
        began = time.perf_counter()
        result = run()
        steps.append((label, time.perf_counter() - began))
        return result

    step("header line", lambda: header_html(trace))
    widget = step("widget initial state (index + first view)", lambda: timeline_widget(trace))
    first_paint = sum(seconds for _, seconds in steps)
    step("then: summary table (top 15 names)", lambda: (trace_html(trace), trace_text(trace)))
    step(
        "then: HTML stand-in (call tree, links)",
        lambda: fallback_html(trace, DEFAULT_OUTPUT_BUDGET - 300_000, index=widget.index),
    )
    step("then: timeline PNG", lambda: timeline_png(trace))
    kernel = SimpleNamespace(kernel=object(), display_formatter=None)
    with capture_output():
        published = show(Trace(table, name="bench"), shell=kernel)
    print("| magic cell output step | ms |")
    print("|---|---:|")
    for label, seconds in steps:
        print(f"| {label} | {seconds * 1e3:.0f} |")
    print(f"| **first paint, kernel side (header + widget)** | **{first_paint * 1e3:.0f}** |")
    print()
    print(
        f"cell output: {published / 1e3:,.0f} kB of the {DEFAULT_OUTPUT_BUDGET / 1e3:,.0f} kB "
        f"budget; widget initial state (comm, saved only with widget state): "
        f"{widget.initial_state_size() / 1e3:,.0f} kB"
    )


if __name__ == "__main__":
    main()
