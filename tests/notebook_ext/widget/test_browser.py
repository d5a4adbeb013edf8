"""The timeline widget's interactions in a real JupyterLab driven by Debian's chromium.

A notebook runs ``%load_ext recfn`` + ``%%record_function`` and shows the widget of a generated
trace; the tests check what the page shows: zoom answered by the kernel, hovering a bar shows its
tooltip, a click or a search highlights ranges, the call-tree toggle draws the tree, the memory
lane has its tooltip, Download and Open in Perfetto hand over the trace. Every wait is for a
condition, with a timeout. ``RECFN_UPDATE_SCREENSHOT=1`` also writes ``docs/widget.png``.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from pages import AXIS_H, GUTTER, LANE_GAP, NotebookPage, canvas_box, expect, fresh, span

import recfn
from recfn.notebook_ext.fallback import PERFETTO_ORIGIN

DOCS = Path(__file__).resolve().parents[3] / "docs"
CELLS = [
    "%load_ext recfn",
    "%%record_function demo\n"
    "import recfn\n"
    "for step in range(20):\n"
    "    with recfn.record_function('step'):\n"
    "        sum(range(20_000))\n",
    "import pyarrow as pa\n"
    "from recfn.analysis.synthetic import make_synthetic_trace\n"
    "from recfn.notebook_ext.widget import timeline_widget\n"
    "frame = make_synthetic_trace(200_000, 3, seed=1, max_depth=6, n_memory_events=3_000,"
    " mean_gap_ns=5_000)\n"
    "timeline_widget(pa.Table.from_pandas(frame, preserve_index=False))",
]
DEMO_CELL, TRACE_CELL = 1, 2
# Answers PING with PONG and keeps what is posted, as the Perfetto UI's postMessage protocol does.
PERFETTO_STUB = """<!doctype html><title>Perfetto stand-in</title><script>
window.addEventListener("message", (event) => {
  if (event.data === "PING") { event.source.postMessage("PONG", "*"); return; }
  const trace = event.data && event.data.perfetto;
  if (trace) {
    window.received = {fileName: trace.fileName, bytes: Array.from(new Uint8Array(trace.buffer))};
  }
});
</script>"""


@pytest.fixture(scope="module")
def nb(notebook_page: Callable[[Sequence[str]], NotebookPage]) -> NotebookPage:
    notebook = notebook_page(CELLS)
    expect()(notebook.page.locator(".recfn-tl")).to_have_count(2, timeout=120_000)
    return notebook


@pytest.fixture(autouse=True)
def no_new_page_errors(nb: NotebookPage) -> Iterator[None]:
    before = len(nb.errors)
    yield
    new = [e for e in nb.errors[before:] if "recfn" in e or "timeline" in e]
    assert not new, new


def test_the_magic_draws_the_cell_and_its_steps(nb: NotebookPage) -> None:
    widget = fresh(nb, DEMO_CELL)
    expect()(widget).to_have_attribute("data-ranges", "21")  # the cell's range + 20 steps


def test_the_memory_lane_has_a_tooltip(nb: NotebookPage) -> None:
    widget = fresh(nb, TRACE_CELL)
    nb.page.wait_for_function(
        "(el) => Number(el.dataset.memoryLanes) >= 1", arg=widget.element_handle()
    )
    box = canvas_box(widget)
    memory_y = box["y"] + float(widget.get_attribute("data-memory-top") or 0)
    tip = widget.locator(".recfn-tl-tip")
    for step in range(20):
        nb.page.mouse.move(box["x"] + box["width"] * (0.3 + step * 0.03), memory_y)
        if tip.is_visible() and "memory" in (tip.text_content() or ""):
            break
    expect()(tip).to_contain_text("memory")


def zoom_in(nb: NotebookPage, widget: object, times: int) -> None:
    """A click into the widget (so the wheel zooms), then ``times`` wheel steps over its middle,
    each answered by the kernel."""
    box = canvas_box(widget)
    nb.page.mouse.click(box["x"] + 20, box["y"] + 60)  # the lane labels: selects nothing
    nb.page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 60)
    for _ in range(times):
        queries = int(widget.get_attribute("data-queries") or 0)  # type: ignore[attr-defined]
        nb.page.mouse.wheel(0, -900)
        nb.page.wait_for_function(
            "([el, q]) => Number(el.dataset.queries) > q", arg=[widget.element_handle(), queries]
        )


def test_wheel_zoom_is_answered_by_the_kernel(nb: NotebookPage) -> None:
    widget = fresh(nb, TRACE_CELL)
    full = span(widget)
    zoom_in(nb, widget, 1)
    assert span(widget) < full / 3
    zoom_in(nb, widget, 4)
    assert span(widget) < full / 500
    assert int(widget.get_attribute("data-ranges") or 0) > 20, "ranges drawn one by one"
    print(f"zoom query round trip in the browser: {widget.get_attribute('data-round-trip-ms')} ms")


def hover_a_bar(nb: NotebookPage, widget: object) -> float:
    """Move along the first lane's top row until a bar's tooltip shows; its x."""
    box = canvas_box(widget)
    lane_top = box["y"] + AXIS_H + LANE_GAP + 7
    tip = widget.locator(".recfn-tl-tip")  # type: ignore[attr-defined]
    bar_x = box["x"]
    for step in range(60):
        bar_x = box["x"] + GUTTER + 10 + step * (box["width"] - GUTTER - 20) / 60
        nb.page.mouse.move(bar_x, lane_top)
        if tip.is_visible() and "duration" in (tip.text_content() or ""):
            break
    expect()(tip).to_contain_text("duration")
    return bar_x


def test_hovering_a_bar_shows_its_tooltip(nb: NotebookPage, tmp_path: Path) -> None:
    widget = fresh(nb, TRACE_CELL)
    zoom_in(nb, widget, 5)
    hover_a_bar(nb, widget)
    tip = widget.locator(".recfn-tl-tip")
    for label in ("duration", "self", "depth"):
        expect()(tip).to_contain_text(label)
    widget.screenshot(path=str(tmp_path / "widget.png"))
    if os.environ.get("RECFN_UPDATE_SCREENSHOT") == "1":
        (DOCS / "widget.png").write_bytes((tmp_path / "widget.png").read_bytes())


def test_a_click_on_a_bar_highlights_its_name_and_a_second_clears_it(nb: NotebookPage) -> None:
    widget = fresh(nb, TRACE_CELL)
    zoom_in(nb, widget, 5)
    bar_x = hover_a_bar(nb, widget)
    lane_top = canvas_box(widget)["y"] + AXIS_H + LANE_GAP + 7
    nb.page.mouse.click(bar_x, lane_top)
    nb.page.wait_for_function(
        "(el) => Number(el.dataset.highlighted) > 0", arg=widget.element_handle()
    )
    name = widget.locator(".recfn-tl-search").input_value()
    assert name
    # The summary pane selects the name's row.
    selected = widget.locator(".recfn-tl-table tr.recfn-selected td").first
    expect()(selected).to_have_attribute("title", name)
    nb.page.mouse.click(bar_x, lane_top)
    expect()(widget).to_have_attribute("data-highlighted", "0")


def test_search_highlights_the_matching_names(nb: NotebookPage) -> None:
    widget = fresh(nb, TRACE_CELL)
    zoom_in(nb, widget, 5)
    widget.locator(".recfn-tl-search").fill("aten::m")
    nb.page.wait_for_function(
        "(el) => Number(el.dataset.highlighted) > 0", arg=widget.element_handle()
    )


def test_the_toggle_switches_to_the_call_tree_and_back(nb: NotebookPage, tmp_path: Path) -> None:
    widget = fresh(nb, TRACE_CELL)
    widget.locator(".recfn-tl-toggle").click()
    expect()(widget).to_have_attribute("data-view", "tree")
    nb.page.wait_for_function(
        "(el) => Number(el.dataset.treeNodes) > 10", arg=widget.element_handle()
    )
    widget.screenshot(path=str(tmp_path / "tree.png"))
    widget.locator(".recfn-tl-toggle").click()
    expect()(widget).to_have_attribute("data-view", "timeline")


def test_download_hands_over_the_trace(nb: NotebookPage, tmp_path: Path) -> None:
    magic = fresh(nb, DEMO_CELL)
    with nb.page.expect_download() as download:
        magic.locator(".recfn-tl-download").click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name == "demo.json.gz"
    events = recfn.load(saved, as_pandas=True)
    assert list(events["name"].astype(str)).count("step") == 20


def test_open_in_perfetto_posts_the_trace_after_its_pong(nb: NotebookPage, tmp_path: Path) -> None:
    magic = fresh(nb, DEMO_CELL)
    route = f"{PERFETTO_ORIGIN}/**"
    nb.context.route(
        route,
        lambda r: r.fulfill(status=200, body=PERFETTO_STUB, content_type="text/html"),
    )
    try:
        with nb.context.expect_page() as opened:
            magic.locator(".recfn-tl-perfetto").click()
        perfetto = opened.value
        perfetto.wait_for_function("() => window.received !== undefined")
        received = perfetto.evaluate("() => window.received")
        perfetto.close()
    finally:
        nb.context.unroute(route)
    assert received["fileName"] == "demo.json.gz"
    posted = tmp_path / "posted.json.gz"
    posted.write_bytes(bytes(received["bytes"]))
    events = recfn.load(posted, as_pandas=True)
    assert list(events["name"].astype(str)).count("step") == 20
    expect()(magic).to_have_attribute("data-perfetto", "sent")
    assert gzip.decompress(posted.read_bytes())  # a whole gzip stream
