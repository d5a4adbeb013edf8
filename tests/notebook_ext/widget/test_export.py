"""Exported notebooks, opened with no kernel and no network: the quickstart executed by nbclient
(as ``jupyter nbconvert --execute`` does) with and without stored widget state, then nbconvert's
HTML in chromium. Either way each magic cell shows its HTML stand-in (description, summary table,
call tree, download and Perfetto links), the summary table and the picture with its alt text,
and the page logs no console errors.

With stored widget state nbconvert renders the widget's view with a widget manager loaded from
the network; here every request to the network gets an empty answer, as offline, so the
stand-in must not depend on it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pages import expect, wait_other_pages_closed

import recfn
from recfn.notebook_ext.fallback import PERFETTO_ORIGIN

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")

import labserver  # noqa: E402  (after the skips: it names what the tests need)

QUICKSTART = Path(__file__).resolve().parents[3] / "notebooks" / "quickstart.ipynb"
DOCS = Path(__file__).resolve().parents[3] / "docs"
MAGIC_CELLS = 3
PERFETTO_STUB = """<!doctype html><title>Perfetto stand-in</title><script>
window.addEventListener("message", (event) => {
  if (event.data === "PING") { event.source.postMessage("PONG", "*"); return; }
  const trace = event.data && event.data.perfetto;
  if (trace) {
    window.received = {fileName: trace.fileName, bytes: Array.from(new Uint8Array(trace.buffer))};
  }
});
</script>"""


class ExportedPage:
    def __init__(self, context: Any, page: Any, errors: list[str], html: str) -> None:
        self.context = context
        self.page = page
        self.load_errors = list(errors)
        self.html = html


@pytest.fixture(scope="module", params=[True, False], ids=["widget-state", "no-widget-state"])
def exported(
    request: pytest.FixtureRequest,
    browser: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ExportedPage]:
    """The quickstart's HTML export (with or without widget state) open in a page with no
    network: every http(s) request answered empty, the Perfetto UI a stand-in page."""
    folder = tmp_path_factory.mktemp("export")
    notebook = nbformat.read(QUICKSTART, as_version=4)
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONWARNINGS": "ignore"}
    nbclient.NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        store_widget_state=request.param,
        resources={"metadata": {"path": str(folder)}},
    ).execute(env=env)
    assert ("widgets" in notebook.metadata) == request.param
    old_path = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = labserver.jupyter_path()  # nbconvert's templates
    try:
        body, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
    finally:
        if old_path is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old_path
    page_path = folder / "quickstart.html"
    page_path.write_text(body, encoding="utf-8")

    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.route(
        re.compile(r"^https?://"),
        lambda route: route.fulfill(status=200, body="", content_type="text/javascript"),
    )
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.goto(page_path.as_uri())
    expect()(page.locator(".recfn-fallback")).to_have_count(MAGIC_CELLS)
    page.wait_for_load_state("load")
    yield ExportedPage(context, page, errors, body)
    context.close()


def test_the_page_loads_without_console_errors(exported: ExportedPage) -> None:
    assert not exported.load_errors, exported.load_errors


def test_every_magic_cell_shows_its_stand_in(exported: ExportedPage) -> None:
    stand_ins = exported.page.locator(".recfn-fallback")
    for i in range(MAGIC_CELLS):
        expect()(stand_ins.nth(i)).to_be_visible()
    first = stand_ins.nth(0)
    expect()(first.locator(".recfn-alt")).to_contain_text("Timeline of plain_numpy")
    expect()(first.locator(".recfn-download")).to_have_attribute("download", "plain_numpy.json.gz")
    expect()(exported.page.locator("table.recfn-summary").first).to_be_visible()


def test_the_stand_in_has_the_summary_pane_table(exported: ExportedPage) -> None:
    table = exported.page.locator(".recfn-fallback").nth(1).locator("table.recfn-pane")
    expect()(table).to_be_visible()
    heads = [h.inner_text() for h in table.locator("th").all()]
    assert heads == ["name", "calls", "self", "total", "mean", "file:line"]
    names = [r.locator("td").first.inner_text() for r in table.locator("tbody tr").all()]
    assert "baseline" in names and "batch" in names
    # Sortable where scripts run: by calls, most first.
    table.locator("th", has_text="calls").click()
    calls = [
        int(r.locator("td").nth(1).get_attribute("data-v")) for r in table.locator("tbody tr").all()
    ]
    assert calls == sorted(calls, reverse=True)


def test_the_call_tree_unfolds_and_leaves_have_no_fold_arrow(exported: ExportedPage) -> None:
    first = exported.page.locator(".recfn-fallback").nth(0)
    nested = first.locator("details details summary").first
    expect()(nested).to_be_visible()  # the root is open, its children listed
    nested.click()  # unfolds without a kernel
    leaves = exported.page.locator(".recfn-fallback .recfn-leaf")
    assert leaves.count() > 0
    # A <details> is only where there is something to fold.
    childless = exported.page.locator(".recfn-fallback details:not(:has(details, .recfn-leaf))")
    assert childless.count() == 0


def test_every_image_has_alt_text(exported: ExportedPage) -> None:
    images = exported.page.locator("img")
    assert images.count() >= MAGIC_CELLS
    for image in images.all():
        alt = image.get_attribute("alt") or ""
        assert alt and "No description" not in alt, alt
    timelines = exported.page.locator("img.recfn-timeline-png")
    assert timelines.count() == MAGIC_CELLS
    expect()(timelines.first).to_be_visible()
    assert (timelines.first.get_attribute("alt") or "").startswith("Timeline of ")


def test_open_in_perfetto_posts_the_embedded_trace(exported: ExportedPage, tmp_path: Path) -> None:
    route = f"{PERFETTO_ORIGIN}/**"
    exported.context.route(
        route, lambda r: r.fulfill(status=200, body=PERFETTO_STUB, content_type="text/html")
    )
    first = exported.page.locator(".recfn-fallback").nth(0)
    try:
        with exported.context.expect_page() as opened:
            first.locator(".recfn-perfetto").click()
        perfetto = opened.value
        perfetto.wait_for_function("() => window.received !== undefined")
        received = perfetto.evaluate("() => window.received")
        perfetto.close()
    finally:
        exported.context.unroute(route)
    assert received["fileName"] == "plain_numpy.json.gz"
    posted = tmp_path / "posted.json.gz"
    posted.write_bytes(bytes(received["bytes"]))
    assert "plain_numpy" in set(recfn.load(posted, as_pandas=True)["name"].astype(str))
    expect()(first.locator(".recfn-perfetto")).to_have_attribute("data-perfetto", "sent")
    if os.environ.get("RECFN_UPDATE_SCREENSHOT") == "1":
        first.screenshot(path=str(DOCS / "fallback.png"))


def test_open_in_perfetto_offline_says_so(exported: ExportedPage) -> None:
    route = f"{PERFETTO_ORIGIN}/**"
    exported.context.route(route, lambda r: r.abort())
    first = exported.page.locator(".recfn-fallback").nth(0)
    try:
        first.locator(".recfn-perfetto").click()
        expect()(first.locator(".recfn-perfetto")).to_have_attribute("data-perfetto", "offline")
        expect()(first.locator(".recfn-perfetto-status")).to_contain_text("cannot be reached")
    finally:
        exported.context.unroute(route)
    wait_other_pages_closed(exported.context, exported.page)
    assert exported.context.pages == [exported.page]
