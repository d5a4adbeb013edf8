"""Speed and size of the interactive timeline, as Markdown tables.

Run: ``python benchmarks/bench_widget.py`` (``--ranges N`` for the kernel-side trace, default 1M;
``--paint-ranges N`` for the magic cell, default 100k; ``--browser`` to also measure in a real
JupyterLab and chromium, as the browser tests drive them).

1. Kernel side, on ``make_synthetic_trace(N, 4)`` with memory events: building the index, the
   first view (the widget's initial state), viewport queries from the whole trace down to a
   1e-6 slice, a highlighted query (a search's density counts), the call tree, and the summary
   pane's queries (whole trace, windows) -- each the best of a few runs, with its JSON size.
   Budgets (issue 24): a viewport query 50 ms and 1 MB, a summary-pane query 50 ms.
2. The magic cell: what ``%%record_function`` publishes for a trace of ``--paint-ranges``
   ranges, step by step, and the time to the widget's first paint on the kernel side.
3. ``--browser``: a ``%%record_function`` cell of ``--paint-ranges`` ranges in JupyterLab; the
   time from the cell's end (its range's end, on the trace's epoch clock) to the widget's first
   paint (``Date.now()`` when it first drew), and how many times the widget was rendered (1: no
   rebuild); then a 1M-range widget zoomed step by step (each step answered by the kernel): the
   longest frame the canvas took to draw, and the summary pane's round trip for a window.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from recfn.analysis.synthetic import make_synthetic_trace
from recfn.notebook_ext.widget.lod import TimelineIndex, first_view, response_size
from recfn.notebook_ext.widget.table import SummaryTable

WIDTH_PX = 1200


def best_of(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    """Fastest of ``repeat`` runs in seconds, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        began = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - began)
    return best, result


def synthetic_table(ranges: int) -> pa.Table:
    frame = make_synthetic_trace(ranges, 4, n_memory_events=ranges // 100)
    return pa.Table.from_pandas(frame, preserve_index=False)


def kernel_side(table: pa.Table) -> None:
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
    highlight = index.search("aten::mm")["ids"]
    rows.append(
        (
            "query the whole trace, aten::mm highlighted",
            lambda: index.query(0, index.span_ns, WIDTH_PX, highlight),
        )
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
        f"| | {response_size(tree) / 1e3:.0f} | | |"
    )
    print()
    print(f"slowest viewport query with its JSON: {worst * 1e3:.1f} ms (budget 50 ms)")
    print()

    build, table_of = best_of(1, lambda: SummaryTable(index))
    print("| summary pane query | ms | ms incl. JSON | response KB | names |")
    print("|---|---:|---:|---:|---:|")
    print(f"| build (once per widget) | {build * 1e3:.0f} | | | |")
    slowest = 0.0
    cases: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("whole trace, first time", lambda: SummaryTable(index).query()),
        ("whole trace (cached)", lambda: table_of.query()),
        ("whole trace by calls", lambda: table_of.query(sort="calls")),
    ]
    for fraction in (0.5, 0.1, 0.01, 1e-4):
        t0 = index.span_ns * 0.21
        t1 = t0 + index.span_ns * fraction
        cases.append(
            (f"window {fraction:g} of the trace", lambda t0=t0, t1=t1: table_of.query(t0, t1))
        )
    for label, run in cases:
        repeat = 1 if "first time" in label else 5
        seconds, response = best_of(repeat, run)
        encoded, _ = best_of(repeat, lambda run=run: response_size(run()))
        if "first time" not in label:  # the first includes building the table, once
            slowest = max(slowest, encoded)
        print(
            f"| {label} | {seconds * 1e3:.1f} | {encoded * 1e3:.1f} "
            f"| {response_size(response) / 1e3:.0f} | {response['groups']:,} |"
        )
    print()
    print(f"slowest summary-pane query with its JSON: {slowest * 1e3:.1f} ms (budget 50 ms)")
    print()


def magic_cell(table: pa.Table) -> None:
    """What ``%%record_function`` publishes for this trace, step by step, and its total size.

    First paint (kernel side) is the time from the captured trace to the widget's bundle being
    published: the header line, then the widget's initial state (the pane's table, the summary
    table, the HTML stand-in and the PNG follow). anywidget is imported beforehand, as
    ``%load_ext recfn`` does in a kernel.
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
    widget = step(
        "widget initial state (index, first view)",
        lambda: timeline_widget(trace, summary=False),
    )
    first_paint = sum(seconds for _, seconds in steps)
    step("then: the summary pane's table (sent to the view)", widget.fill_summary)
    step("then: summary table (top 15 names)", lambda: (trace_html(trace), trace_text(trace)))
    step(
        "then: HTML stand-in (table, call tree, links)",
        lambda: fallback_html(trace, DEFAULT_OUTPUT_BUDGET - 300_000, index=widget.index),
    )
    step("then: timeline PNG", lambda: timeline_png(trace))
    kernel = SimpleNamespace(kernel=object(), display_formatter=None)
    with capture_output():
        published = show(Trace(table, name="bench"), shell=kernel)
    print(f"magic cell of {table.num_rows:,} events")
    print()
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
    print()


def widget_state(table: pa.Table) -> None:
    """The widget's initial state without anywidget: the index, the first view and its JSON."""
    steps = []
    began = time.perf_counter()
    index = TimelineIndex(table)
    steps.append(("index", time.perf_counter() - began))
    began = time.perf_counter()
    view = first_view(index, WIDTH_PX)
    steps.append(("first view", time.perf_counter() - began))
    began = time.perf_counter()
    size = response_size(view) + response_size(index.describe())
    steps.append(("its JSON", time.perf_counter() - began))
    print(f"widget initial state of {table.num_rows:,} events (no IPython or anywidget here)")
    print()
    print("| step | ms |")
    print("|---|---:|")
    for label, seconds in steps:
        print(f"| {label} | {seconds * 1e3:.0f} |")
    total = sum(seconds for _, seconds in steps)
    print(f"| **index + first view + JSON** | **{total * 1e3:.0f}** |")
    print()
    print(f"initial state: {size / 1e3:,.0f} kB")
    print()


PAINT_CELL = """%%record_function paint --no-trace-calls
import recfn
for i in range({ranges} // 10):
    with recfn.record_function("step"):
        for j in range(9):
            with recfn.record_function("leaf"):
                pass
"""
ZOOM_CELL = """import pyarrow as pa
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.notebook_ext.widget import timeline_widget
timeline_widget(pa.Table.from_pandas(make_synthetic_trace({ranges}, 4, n_memory_events={memory}),
                                     preserve_index=False))"""


def in_the_browser(paint_ranges: int, zoom_ranges: int, runs: int) -> None:
    """First paint after the cell ends, renders, zoom frames and the pane's round trip in a real
    JupyterLab and chromium (``tests/notebook_ext/widget/labserver.py``)."""
    sys.path.insert(
        0, str(Path(__file__).resolve().parents[1] / "tests" / "notebook_ext" / "widget")
    )
    import labserver
    from playwright.sync_api import sync_playwright

    paint = PAINT_CELL.format(ranges=paint_ranges)
    cells = [
        "%load_ext recfn",
        *([paint] * runs),
        ZOOM_CELL.format(ranges=zoom_ranges, memory=zoom_ranges // 100),
    ]
    with tempfile.TemporaryDirectory(prefix="recfn-bench-") as folder:
        root = Path(folder)
        labserver.write_notebook(root / "bench.ipynb", cells)
        with labserver.lab_server(root) as base, sync_playwright() as playwright:
            browser = labserver.launch_chromium(playwright)
            page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
            page.set_default_timeout(120_000)
            labserver.open_notebook(page, base, "bench.ipynb")
            labserver.run_all_cells(page)
            labserver.wait_idle(page, 600_000)
            widgets = page.locator(".recfn-tl")
            page.wait_for_function(
                "(n) => document.querySelectorAll('.recfn-tl').length === n", arg=runs + 1
            )
            paints, renders = [], []
            for i in range(runs):
                widget = widgets.nth(i)
                widget.scroll_into_view_if_needed()
                page.wait_for_function("(el) => el.dataset.firstPaint", arg=widget.element_handle())
                seen = widget.evaluate(
                    "(el) => ({paint: Number(el.dataset.firstPaint), uid: el.dataset.uid,"
                    " end: (Number(el.dataset.originNs) + Number(el.dataset.spanNs)) / 1e6})"
                )
                paints.append(seen["paint"] - seen["end"])  # both ms on the epoch clock
                renders.append(page.evaluate("(uid) => window.__recfnRenders[uid]", seen["uid"]))
            zoom = widgets.nth(runs)
            zoom.scroll_into_view_if_needed()
            box = zoom.locator("canvas").bounding_box()
            assert box is not None
            page.mouse.click(box["x"] + 20, box["y"] + 60)
            page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 60)
            zoom.evaluate("(el) => { el.dataset.drawMaxMs = '0'; }")
            frames = []
            for _ in range(8):
                queries = int(zoom.get_attribute("data-queries") or 0)
                page.mouse.wheel(0, -600)
                page.wait_for_function(
                    "([el, q]) => Number(el.dataset.queries) > q",
                    arg=[zoom.element_handle(), queries],
                )
                frames.append(float(zoom.get_attribute("data-draw-ms") or 0))
            longest = float(zoom.get_attribute("data-draw-max-ms") or 0)
            trips = []
            caption = zoom.locator(".recfn-tl-caption")
            for step in range(3):  # a drag on the axis selects a window; the kernel answers
                if zoom.locator(".recfn-tl-whole").is_visible():
                    zoom.locator(".recfn-tl-whole").click()
                    page.wait_for_function(
                        "(el) => !el.textContent.includes('window')", arg=caption.element_handle()
                    )
                began = time.perf_counter()
                page.mouse.move(box["x"] + 200 + 40 * step, box["y"] + 10)
                page.mouse.down()
                page.mouse.move(box["x"] + 600 + 40 * step, box["y"] + 10, steps=3)
                page.mouse.up()
                page.wait_for_function(
                    "(el) => el.textContent.includes('window')", arg=caption.element_handle()
                )
                trips.append(time.perf_counter() - began)
            browser.close()
    print(f"in the browser (JupyterLab {labserver_version()}, chromium, {runs} runs)")
    print()
    print("| measure | value | budget |")
    print("|---|---:|---:|")
    print(
        f"| first paint after the cell ends, {paint_ranges:,}-range cell (median of {runs}) "
        f"| {statistics.median(paints):.0f} ms (min {min(paints):.0f}, max {max(paints):.0f}) "
        f"| 300 ms |"
    )
    print(f"| renders of each widget | {', '.join(map(str, renders))} | 1 (no rebuild) |")
    print(
        f"| zoom frame at {zoom_ranges:,} ranges, longest of {len(frames)} zoom steps "
        f"(each redrawn at once and again with the kernel's answer) | {longest:.1f} ms | 16 ms |"
    )
    print(
        f"| zoom frame with the kernel's answer, median | {statistics.median(frames):.1f} ms | "
        "16 ms |"
    )
    print(
        f"| summary pane for a selected window, drag to table (browser round trip, median of "
        f"{len(trips)}) | {statistics.median(trips) * 1e3:.0f} ms | |"
    )
    print()


def labserver_version() -> str:
    import jupyterlab

    return str(jupyterlab.__version__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranges", type=int, default=1_000_000)
    parser.add_argument("--paint-ranges", type=int, default=100_000)
    parser.add_argument("--browser", action="store_true")
    parser.add_argument("--runs", type=int, default=3, help="magic cells timed in the browser")
    args = parser.parse_args()
    table = synthetic_table(args.ranges)
    kernel_side(table)
    del table
    paint_table = synthetic_table(args.paint_ranges)
    if importlib.util.find_spec("IPython") and importlib.util.find_spec("anywidget"):
        magic_cell(paint_table)
    else:  # a machine without the notebook stack: the widget's kernel side only
        widget_state(paint_table)
    if args.browser:
        in_the_browser(args.paint_ranges, args.ranges, args.runs)


if __name__ == "__main__":
    main()
