"""What a user sees of the magic's output and the widget, in a real JupyterLab and chromium: one
test per papercut of issue 24 that a browser can see, and the summary pane.

One notebook runs once for the module: a ``%%record_function`` cell on pandas code (``rows``,
its trace kept with ``--var``) and a 200,000-range synthetic trace (``big``), then a tall cell so
the page can scroll. Each test starts from the widget's whole-trace view (``fresh``) and leaves
the page's theme as it found it. Every wait is for a condition.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pages import (
    AXIS_H,
    GUTTER,
    NotebookPage,
    canvas_box,
    expect,
    fresh,
    span,
    wait_other_pages_closed,
    widget_of,
)

CELLS = [
    "%load_ext recfn",
    "import json\n"
    "import numpy as np\n"
    "import pandas as pd\n"
    "frame = pd.DataFrame({'a': np.arange(3000), 'b': np.arange(3000) % 7})\n"
    "def per_row(row):\n"
    "    return row.a + row.b\n",
    "%%record_function rows --var kept\n"
    "out = frame.apply(per_row, axis=1)\n"
    "ranks = frame.groupby('b').a.rank()\n",
    "from recfn.analysis.plots.colors import column_colors, hex_color\n"
    "_, values, palette = column_colors(kept.to_pandas())\n"
    "print(json.dumps({'type': type(kept).__module__ + '.' + type(kept).__name__,\n"
    "                  'events': len(kept.to_pandas()),\n"
    "                  'colors': {str(v): hex_color(palette[i]) for i, v in enumerate(values)}}))",
    "import pyarrow as pa\n"
    "from recfn.analysis.synthetic import make_synthetic_trace\n"
    "from recfn.notebook_ext.widget import timeline_widget\n"
    "big = make_synthetic_trace(200_000, 3, seed=1, max_depth=6, n_memory_events=2_000,"
    " mean_gap_ns=5_000)\n"
    "timeline_widget(pa.Table.from_pandas(big, preserve_index=False))",
    "print('\\n'.join(f'line {i}' for i in range(120)))",
]
ROWS_CELL, FACTS_CELL, BIG_CELL = 2, 3, 4


@pytest.fixture(scope="module")
def nb(notebook_page: Callable[[Sequence[str]], NotebookPage]) -> NotebookPage:
    notebook = notebook_page(CELLS)
    sync_api = pytest.importorskip("playwright.sync_api")
    sync_api.expect(notebook.page.locator(".recfn-tl")).to_have_count(2, timeout=120_000)
    return notebook


@pytest.fixture(autouse=True)
def no_new_page_errors(nb: NotebookPage) -> Iterator[None]:
    """The widget's code throws nothing while a test drives it."""
    before = len(nb.errors)
    yield
    new = [e for e in nb.errors[before:] if "recfn" in e or "timeline" in e]
    assert not new, new


# -- 1, 2: one render, no progress bar, the stand-in hidden where the widget runs -------------


def _without_images(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**o, "data": {k: v for k, v in o.get("data", {}).items() if not k.startswith("image/")}}
        for o in outputs
    ]


def test_the_cell_output_holds_no_progress_bar_and_one_widget_view(nb: NotebookPage) -> None:
    outputs = nb.outputs(ROWS_CELL)
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 1, [list(o.get("data", {})) for o in outputs]  # no tqdm widget
    # What a person reads: base64 payloads (the picture, the embedded trace) are left out, as
    # "it/s" turns up in about one in twenty of them by chance.
    texts = re.sub(r"base64,[A-Za-z0-9+/=]+", "base64,", json.dumps(_without_images(outputs)))
    assert "it/s" not in texts and "%|" not in texts and "writing " not in texts
    assert not [o for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr"]


def test_the_widget_is_rendered_once(nb: NotebookPage) -> None:
    widget = widget_of(nb, ROWS_CELL)
    uid = widget.get_attribute("data-uid")
    # The cell's last output (the picture) is there: nothing replaced the widget meanwhile.
    expect()(nb.cell(ROWS_CELL).locator("img.recfn-timeline-png")).to_have_count(1)
    assert nb.page.evaluate("(uid) => window.__recfnRenders[uid]", uid) == 1
    assert widget.get_attribute("data-renders") == "1"


def test_the_stand_in_is_hidden_where_the_widget_runs(nb: NotebookPage) -> None:
    stand_in = nb.cell(ROWS_CELL).locator(".recfn-fallback")
    expect()(stand_in).to_have_count(1)  # in the output, for exported notebooks
    expect()(stand_in).to_be_hidden()


# -- --var holds the Trace ---------------------------------------------------------------------


def test_var_holds_the_trace(nb: NotebookPage) -> None:
    facts = json.loads(nb.outputs(FACTS_CELL)[0]["text"])
    assert facts["type"] == "recfn.formats.trace.Trace"
    assert facts["events"] > 10


# -- 3: the wheel scrolls the page until a click; zoom stays inside the trace --------------------


def scroll_top(nb: NotebookPage) -> float:
    return float(
        nb.page.evaluate("() => document.querySelector('.jp-WindowedPanel-outer').scrollTop")
    )


def test_the_wheel_scrolls_the_page_until_a_click_into_the_widget(nb: NotebookPage) -> None:
    widget = fresh(nb, BIG_CELL)
    full = span(widget)
    box = canvas_box(widget)
    nb.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 60)
    before = scroll_top(nb)
    nb.page.mouse.wheel(0, 200)
    nb.page.wait_for_function(
        "(top) => document.querySelector('.jp-WindowedPanel-outer').scrollTop > top", arg=before
    )
    expect()(widget.locator(".recfn-tl-hint")).to_be_visible()
    assert span(widget) == full, "the wheel over an inactive widget does not zoom"

    widget.scroll_into_view_if_needed()
    box = canvas_box(widget)
    nb.page.mouse.click(box["x"] + 20, box["y"] + 60)  # in the lane labels: selects nothing
    expect()(widget).to_have_attribute("data-wheel", "zoom")
    nb.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 60)
    scrolled = scroll_top(nb)
    nb.page.mouse.wheel(0, -300)
    nb.page.wait_for_function(
        "([el, s]) => Number(el.dataset.t1) - Number(el.dataset.t0) < s",
        arg=[widget.element_handle(), full],
    )
    assert scroll_top(nb) == scrolled

    nb.page.mouse.click(5, 500)  # a click elsewhere: the page has its wheel back
    expect()(widget).to_have_attribute("data-wheel", "page")


def test_ctrl_wheel_zooms_and_zoom_out_stops_at_the_trace(nb: NotebookPage) -> None:
    widget = fresh(nb, BIG_CELL)
    full = span(widget)
    box = canvas_box(widget)
    nb.page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + 60)
    nb.page.keyboard.down("Control")
    try:
        nb.page.mouse.wheel(0, -600)
        nb.page.wait_for_function(
            "([el, s]) => Number(el.dataset.t1) - Number(el.dataset.t0) < s / 2",
            arg=[widget.element_handle(), full],
        )
        for _ in range(4):
            nb.page.mouse.wheel(0, 2000)
    finally:
        nb.page.keyboard.up("Control")
    nb.page.wait_for_function(
        "([el, s]) => el.dataset.t0 === '0' && Number(el.dataset.t1) === s",
        arg=[widget.element_handle(), full],
    )
    where = widget.locator(".recfn-tl-where").text_content() or ""
    assert re.match(r"0 (m?s) – [\d.]+ \1 of ", where), where  # one unit, no "0 ns"


# -- 4: axis ticks ------------------------------------------------------------------------------


def check_ticks(labels: list[str], canvas_width: float, right: float) -> None:
    assert len(labels) >= 2, labels
    assert len(set(labels)) == len(labels), f"repeated tick labels: {labels}"
    units = {label.split(" ")[1] for label in labels}
    assert len(units) == 1, labels
    assert not any(re.search(r"\.\d*0 ", label) for label in labels), f"needless zeros: {labels}"
    if units != {"ns"}:
        assert not any(label.startswith("0 ns") for label in labels)
    assert right <= canvas_width, "the last label is cut off"


def test_axis_ticks_are_distinct_at_every_zoom(nb: NotebookPage) -> None:
    widget = fresh(nb, BIG_CELL)
    box = canvas_box(widget)
    nb.page.mouse.click(box["x"] + 20, box["y"] + 60)
    nb.page.mouse.move(box["x"] + box["width"] * 0.61, box["y"] + 60)
    seen = []
    for _ in range(14):  # from the whole trace (about a second) down to tens of nanoseconds
        ticks = json.loads(widget.get_attribute("data-ticks"))
        check_ticks(ticks, box["width"], float(widget.get_attribute("data-tick-right")))
        seen.append(ticks)
        before = span(widget)
        nb.page.mouse.wheel(0, -900)
        nb.page.wait_for_function(
            "([el, s]) => Number(el.dataset.t1) - Number(el.dataset.t0) < s || s <= 50",
            arg=[widget.element_handle(), before],
        )
    assert span(widget) < 1_000, "zoomed down to nanoseconds"
    assert seen[0][0].startswith("0 "), seen[0]  # the origin, in the axis's unit


# -- 5: search counts and marks matches inside merged density bars -------------------------------


def test_search_counts_matches_inside_merged_bars(nb: NotebookPage) -> None:
    widget = fresh(nb, BIG_CELL)
    widget.locator(".recfn-tl-search").fill("aten::mm")
    nb.page.wait_for_function(
        "(el) => Number(el.dataset.densityMatches) > 0 && Number(el.dataset.matches) > 0",
        arg=widget.element_handle(),
    )
    total = int(widget.get_attribute("data-matches"))
    expect()(widget.locator(".recfn-tl-matches")).to_have_text(f"{total:,} matches")
    # A merged bar's tooltip says how many of its ranges match.
    box = canvas_box(widget)
    tip = widget.locator(".recfn-tl-tip")
    for depth in range(4):  # along the first lane's rows until a merged bar with a match
        lane_row = box["y"] + AXIS_H + 18 + 16 * depth + 8
        for step in range(40):
            x = box["x"] + GUTTER + 2 + step * (box["width"] - GUTTER - 4) / 40
            nb.page.mouse.move(x, lane_row)
            if tip.is_visible() and "match" in (tip.text_content() or ""):
                break
        if "match" in (tip.text_content() or ""):
            break
    assert re.search(r"\d[\d,]* match", tip.text_content() or ""), tip.text_content()


# -- 6: tooltips stay inside the view -------------------------------------------------------------


def test_tooltips_flip_to_stay_inside_the_widget(nb: NotebookPage) -> None:
    widget = fresh(nb, ROWS_CELL)
    box = canvas_box(widget)
    root = widget.bounding_box()
    tip = widget.locator(".recfn-tl-tip")
    lane_top = box["y"] + AXIS_H + 18
    # The right end of the deepest rows: tooltips there would leave the widget unflipped.
    shown = None
    for depth in range(5, -1, -1):
        y_row = lane_top + depth * 16 + 7
        for step in range(30):
            x = box["x"] + box["width"] - 3 - step * 4
            nb.page.mouse.move(x, y_row)
            if tip.is_visible() and "duration" in (tip.text_content() or ""):
                shown = tip.bounding_box()
                break
        if shown:
            break
    assert shown is not None, "no bar near the right edge"
    assert root is not None
    assert shown["x"] >= root["x"] and shown["x"] + shown["width"] <= root["x"] + root["width"]
    assert shown["y"] >= root["y"] and shown["y"] + shown["height"] <= root["y"] + root["height"]


# -- 7: Open in Perfetto offline --------------------------------------------------------------------


def test_open_in_perfetto_offline_says_so_and_closes_its_tab(nb: NotebookPage) -> None:
    widget = fresh(nb, ROWS_CELL)
    nb.context.route("https://ui.perfetto.dev/**", lambda route: route.abort())
    try:
        widget.locator(".recfn-tl-perfetto").click()
        expect()(widget).to_have_attribute("data-perfetto", "offline")
        expect()(widget.locator(".recfn-tl-status")).to_contain_text("cannot be reached")
        wait_other_pages_closed(nb.context, nb.page)
        assert nb.context.pages == [nb.page]
    finally:
        nb.context.unroute("https://ui.perfetto.dev/**")


SILENT_PAGE = "<!doctype html><title>no answer</title>"


def test_open_in_perfetto_stops_pinging_a_ui_that_never_answers(nb: NotebookPage) -> None:
    widget = fresh(nb, ROWS_CELL)
    nb.context.route(
        "https://ui.perfetto.dev/**",
        lambda route: route.fulfill(status=200, body=SILENT_PAGE, content_type="text/html"),
    )
    try:
        with nb.context.expect_page() as opened:
            widget.locator(".recfn-tl-perfetto").click()
        expect()(widget).to_have_attribute("data-perfetto", "silent", timeout=40_000)
        expect()(widget.locator(".recfn-tl-status")).to_contain_text("did not answer")
        opened.value.close()
    finally:
        nb.context.unroute("https://ui.perfetto.dev/**")


# -- 8: one colour per name, the PNG's ----------------------------------------------------------------


def test_the_widget_colours_names_as_the_png_and_flame_do(nb: NotebookPage) -> None:
    widget = fresh(nb, ROWS_CELL)
    expected = json.loads(nb.outputs(FACTS_CELL)[0]["text"])["colors"]
    rows = widget.locator(".recfn-tl-table tbody tr")
    assert rows.count() > 5
    for i in range(rows.count()):
        cell = rows.nth(i).locator("td").first
        full = cell.get_attribute("title")
        rgb = cell.locator(".recfn-tl-swatch").evaluate(
            "(s) => getComputedStyle(s).backgroundColor"
        )
        assert _hex(rgb) == expected[full], full
    # The canvas: the cell's own range fills the first row.
    pixel = widget.locator("canvas").evaluate(
        "(c, [x, y]) => { const r = window.devicePixelRatio || 1;"
        " return Array.from(c.getContext('2d').getImageData(x * r, y * r, 1, 1).data); }",
        [GUTTER + 40, AXIS_H + 18 + 4],
    )
    assert "#{:02x}{:02x}{:02x}".format(*pixel[:3]) == expected["rows"]
    top = [expected[r.locator("td").first.get_attribute("title")] for r in rows.all()[:16]]
    assert len(set(top)) == len(top), "the heaviest names share no colour"


def _hex(css: str) -> str:
    red, green, blue = (int(v) for v in re.findall(r"\d+", css)[:3])
    return f"#{red:02x}{green:02x}{blue:02x}"


# -- 9: dark theme ------------------------------------------------------------------------------------


def test_the_widget_follows_the_dark_theme(nb: NotebookPage, tmp_path: Path) -> None:
    widget = fresh(nb, ROWS_CELL)

    def set_theme(name: str, light: str) -> None:
        nb.page.evaluate(
            "(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", name
        )
        nb.page.wait_for_function(
            "(light) => document.body.dataset.jpThemeLight === light", arg=light
        )

    def luminance(css: str) -> float:
        red, green, blue = (int(v) for v in re.findall(r"\d+", css)[:3])
        return (0.299 * red + 0.587 * green + 0.114 * blue) / 255

    axis_pixel = (
        "(c) => { const r = window.devicePixelRatio || 1;"
        " const d = c.getContext('2d').getImageData(140 * r, 2 * r, 1, 1).data;"
        " return `rgb(${d[0]}, ${d[1]}, ${d[2]})`; }"
    )
    set_theme("JupyterLab Dark", "false")
    try:
        nb.page.wait_for_function(
            "(el) => { const d = el.querySelector('canvas').getContext('2d')"
            ".getImageData(140, 2, 1, 1).data; return d[0] + d[1] + d[2] < 300; }",
            arg=widget.element_handle(),
        )
        assert luminance(widget.evaluate("(e) => getComputedStyle(e).backgroundColor")) < 0.3
        assert luminance(widget.locator("canvas").evaluate(axis_pixel)) < 0.3
        header = widget.locator(".recfn-tl-table th").first
        assert luminance(header.evaluate("(e) => getComputedStyle(e).color")) > 0.6
        widget.screenshot(path=str(tmp_path / "dark.png"))
    finally:
        set_theme("JupyterLab Light", "true")
    nb.page.wait_for_function(
        "(el) => { const d = el.querySelector('canvas').getContext('2d')"
        ".getImageData(140, 2, 1, 1).data; return d[0] + d[1] + d[2] > 600; }",
        arg=widget.element_handle(),
    )


# -- 11: short names, the full name and file:line in the tooltip and the table ------------------------


def test_short_names_with_the_full_name_and_location_at_hand(nb: NotebookPage) -> None:
    widget = fresh(nb, ROWS_CELL)
    row = widget.locator(".recfn-tl-table tbody tr", has_text="DataFrame.apply").first
    name = row.locator("td").first
    assert name.inner_text().strip() == "DataFrame.apply"
    assert name.get_attribute("title") == "pandas.core.frame::DataFrame.apply"
    assert re.fullmatch(r"pandas/core/frame\.py:\d+", row.locator("td").last.inner_text())
    # The bar's tooltip: the full name and where the function is.
    box = canvas_box(widget)
    tip = widget.locator(".recfn-tl-tip")
    nb.page.mouse.move(box["x"] + GUTTER + 100, box["y"] + AXIS_H + 18 + 16 + 7)  # depth 1
    expect()(tip).to_contain_text("pandas.core.frame::DataFrame.apply")
    expect()(tip).to_contain_text("at pandas/core/frame.py:")


# -- item 4: the summary pane ---------------------------------------------------------------------------


def pane_rows(widget: Any) -> list[list[str]]:
    return [
        [cell.inner_text() for cell in row.locator("td").all()]
        for row in widget.locator(".recfn-tl-table tbody tr").all()
    ]


def test_the_pane_sorts_by_a_click_on_a_heading(nb: NotebookPage) -> None:
    widget = fresh(nb, BIG_CELL)
    pane = widget.locator(".recfn-tl-pane")
    expect()(pane).to_have_attribute("data-sort", "total:desc")
    widget.locator(".recfn-tl-table th", has_text="calls").click()
    expect()(pane).to_have_attribute("data-sort", "calls:desc")
    calls = [int(r[1].replace(",", "")) for r in pane_rows(widget)]
    assert calls == sorted(calls, reverse=True) and len(calls) > 5
    widget.locator(".recfn-tl-table th", has_text="calls").click()
    expect()(pane).to_have_attribute("data-sort", "calls:asc")
    calls = [int(r[1].replace(",", "")) for r in pane_rows(widget)]
    assert calls == sorted(calls)
    widget.locator(".recfn-tl-table th", has_text="total").click()
    expect()(pane).to_have_attribute("data-sort", "total:desc")


def test_a_click_on_a_row_highlights_its_ranges_and_zooms_to_the_longest(nb: NotebookPage) -> None:
    widget = fresh(nb, BIG_CELL)
    full = span(widget)
    row = widget.locator(".recfn-tl-table tbody tr", has_text="aten::softmax").first
    row.click()
    expect()(row).to_have_class(re.compile("recfn-selected"))
    nb.page.wait_for_function(
        "([el, s]) => el.dataset.focusRow && Number(el.dataset.t1) - Number(el.dataset.t0) < s / 10"
        " && Number(el.dataset.highlighted) > 0",
        arg=[widget.element_handle(), full],
    )
    assert widget.locator(".recfn-tl-search").input_value() == "aten::softmax"


@pytest.mark.parametrize("gesture", ["shift-drag on the lanes", "drag on the axis"])
def test_a_window_selected_on_the_timeline_gets_its_own_table(
    nb: NotebookPage, gesture: str
) -> None:
    widget = fresh(nb, BIG_CELL)
    pane = widget.locator(".recfn-tl-pane")
    whole_rows = pane_rows(widget)
    box = canvas_box(widget)
    shift = gesture.startswith("shift")
    y = box["y"] + (60 if shift else AXIS_H / 2)
    if shift:
        nb.page.keyboard.down("Shift")
    try:
        nb.page.mouse.move(box["x"] + GUTTER + 100, y)
        nb.page.mouse.down()
        nb.page.mouse.move(box["x"] + GUTTER + 200, y, steps=4)
        nb.page.mouse.up()
    finally:
        if shift:
            nb.page.keyboard.up("Shift")
    nb.page.wait_for_function("(el) => el.dataset.window !== ''", arg=pane.element_handle())
    lo, hi = (float(v) for v in pane.get_attribute("data-window").split("-"))
    assert 0 < hi - lo < span(widget) / 5
    expect()(widget.locator(".recfn-tl-caption")).to_contain_text("window")
    window_rows = pane_rows(widget)
    assert window_rows != whole_rows
    assert span(widget) == float(widget.get_attribute("data-t1"))  # the view did not move
    widget.locator(".recfn-tl-whole").click()
    nb.page.wait_for_function("(el) => el.dataset.window === ''", arg=pane.element_handle())
    assert pane_rows(widget) == whole_rows
