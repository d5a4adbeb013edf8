"""The timeline widget in a real JupyterLab driven by Debian's chromium through Playwright.

A JupyterLab server starts on 127.0.0.1 in a temporary folder, a notebook runs ``%load_ext
recfn`` + ``%%record_function`` and shows the widget for a generated trace, and the test checks
what the page shows: the widget renders, wheel-zoom narrows the window (answered by the kernel),
hovering a bar shows its tooltip, a click or a search highlights ranges, the call-tree toggle
draws the tree, the memory lane has its tooltip, Download and Open in Perfetto hand over the trace.
Every wait is for a condition, with a timeout. Skipped when chromium, Playwright or JupyterLab
is missing. ``RECFN_UPDATE_SCREENSHOT=1`` also writes ``docs/widget.png`` and ``docs/fallback.png``.

A second test exports the executed quickstart notebook with nbconvert and opens the HTML with no
kernel and no network: the HTML stand-in, picture and table show, with no console errors.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import recfn
from recfn.notebook_ext.fallback import PERFETTO_ORIGIN

pytest.importorskip("anywidget")
pytest.importorskip("jupyterlab")
sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium")
if CHROMIUM is None:
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)

DOCS_PNG = Path(__file__).resolve().parents[3] / "docs" / "widget.png"
SERVER_START_S = 90
KERNEL_WAIT_MS = 120_000
STEP_WAIT_MS = 20_000
TOKEN = "recfn-widget-test"

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


def _notebook(path: Path) -> None:
    cells = [
        {"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None}
        for s in CELLS
    ]
    notebook = {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))


def _jupyter_path() -> str:
    """JUPYTER_PATH naming the data folders (lab extensions, nbconvert templates) of the
    installs the tests use: a venv that sees system packages does not search their prefix."""
    import importlib.util

    folders = []
    for module in ("jupyterlab_widgets", "anywidget", "jupyterlab", "nbconvert"):
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue
        for parent in Path(spec.origin).resolve().parents:
            share = parent / "share" / "jupyter"
            if share.is_dir() and str(share) not in folders:
                folders.append(str(share))
                break
    return os.pathsep.join([*folders, os.environ.get("JUPYTER_PATH", "")]).strip(os.pathsep)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A JupyterLab server on 127.0.0.1 serving a folder with ``widget.ipynb``; its base URL."""
    root = tmp_path_factory.mktemp("lab")
    _notebook(root / "widget.ipynb")
    # No "get Jupyter news?" toast over the widget.
    settings = root / ".settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port = _free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "JUPYTER_CONFIG_DIR": str(root / ".config"),
        "JUPYTER_PATH": _jupyter_path(),
        "JUPYTER_RUNTIME_DIR": str(root / ".runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(root / ".settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(root / ".workspaces"),
    }
    log = (root / "server.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",  # CI runs as root
            "--expose-app-in-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=",
            "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    try:
        while True:  # poll the API until the server answers (a condition, not a fixed sleep)
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"jupyter lab did not start:\n{(root / 'server.log').read_text()}")
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _launch(playwright: object) -> object:
    try:
        return playwright.chromium.launch(  # type: ignore[attr-defined]
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
    except Exception as exc:  # a chromium that cannot start here is a skip, not a failure
        pytest.skip(f"chromium did not start: {exc}")


def _span(widget: object) -> float:
    t0 = float(widget.get_attribute("data-t0"))  # type: ignore[attr-defined]
    t1 = float(widget.get_attribute("data-t1"))  # type: ignore[attr-defined]
    return t1 - t0


def test_widget_in_jupyterlab(lab: str, tmp_path: Path) -> None:
    expect = sync_api.expect
    with sync_api.sync_playwright() as playwright:
        browser = _launch(playwright)
        context = browser.new_context(viewport={"width": 1280, "height": 1000})  # type: ignore[attr-defined]
        context.route(
            f"{PERFETTO_ORIGIN}/**",
            lambda route: route.fulfill(status=200, body=PERFETTO_STUB, content_type="text/html"),
        )
        page = context.new_page()
        page.set_default_timeout(STEP_WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{lab}/lab/tree/widget.ipynb?token={TOKEN}", timeout=KERNEL_WAIT_MS)
        page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.sessionContext"
            " && window.jupyterapp.shell.currentWidget.sessionContext.session"
            " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel",
            timeout=KERNEL_WAIT_MS,
        )
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

        widgets = page.locator(".recfn-tl")
        expect(widgets).to_have_count(2, timeout=KERNEL_WAIT_MS)  # the magic's and the trace's
        magic = widgets.nth(0)
        expect(magic).to_have_attribute("data-ranges", "21")  # the cell's range + 20 steps
        widget = widgets.nth(1)
        widget.scroll_into_view_if_needed()
        canvas = widget.locator("canvas")
        expect(canvas).to_be_visible()
        full = _span(widget)
        assert full > 0
        # The magic's bundle also carries the HTML stand-in: JupyterLab shows the widget instead.
        expect(page.locator(".recfn-fallback")).to_have_count(0)

        # The memory counter has its own lane, with a tooltip of the level under the mouse.
        page.wait_for_function(
            "(el) => Number(el.dataset.memoryLanes) >= 1", arg=widget.element_handle()
        )
        box = canvas.bounding_box()
        assert box is not None
        memory_y = box["y"] + float(widget.get_attribute("data-memory-top") or 0)
        tip = widget.locator(".recfn-tl-tip")
        for step in range(20):
            page.mouse.move(box["x"] + box["width"] * (0.3 + step * 0.03), memory_y)
            if tip.is_visible() and "memory" in (tip.text_content() or ""):
                break
        expect(tip).to_contain_text("memory")

        # Wheel-zoom around the middle: the window narrows at once, then the kernel answers.
        box = canvas.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 60)
        page.mouse.wheel(0, -900)
        expect(widget).to_have_attribute("data-queries", "1")
        assert _span(widget) < full / 3
        # Zoom further (each step answered by the kernel) until single calls are wide enough
        # to carry their names.
        for queries in range(2, 6):
            page.mouse.wheel(0, -900)
            expect(widget).to_have_attribute("data-queries", str(queries))
        assert _span(widget) < full / 500
        assert int(widget.get_attribute("data-ranges") or 0) > 20, "ranges drawn one by one"

        # Hover along the first lane's top row until a bar's tooltip shows.
        lane_top = box["y"] + 22 + 18 + 7  # axis, lane title, half a row
        bar_x = box["x"]
        for step in range(60):
            bar_x = box["x"] + 160 + step * (box["width"] - 170) / 60
            page.mouse.move(bar_x, lane_top)
            if tip.is_visible() and "duration" in (tip.text_content() or ""):
                break
        expect(tip).to_contain_text("duration")
        expect(tip).to_contain_text("self")
        expect(tip).to_contain_text("depth")
        widget.screenshot(path=str(tmp_path / "widget.png"))
        if os.environ.get("RECFN_UPDATE_SCREENSHOT") == "1":
            DOCS_PNG.write_bytes((tmp_path / "widget.png").read_bytes())

        # A click on a bar highlights every range of its name (and names it in the search box);
        # a second click clears it.
        page.mouse.click(bar_x, lane_top)
        page.wait_for_function(
            "(el) => Number(el.dataset.highlighted) > 0", arg=widget.element_handle()
        )
        assert widget.locator(".recfn-tl-search").input_value()
        page.mouse.click(bar_x, lane_top)
        expect(widget).to_have_attribute("data-highlighted", "0")

        # Search highlights every drawn range of the matching names.
        assert widget.get_attribute("data-highlighted") == "0"
        widget.locator(".recfn-tl-search").fill("aten::m")
        page.wait_for_function(
            "(el) => Number(el.dataset.highlighted) > 0", arg=widget.element_handle()
        )

        # The toggle switches to the call tree (asked from the kernel) and back.
        widget.locator(".recfn-tl-toggle").click()
        expect(widget).to_have_attribute("data-view", "tree")
        page.wait_for_function(
            "(el) => Number(el.dataset.treeNodes) > 10", arg=widget.element_handle()
        )
        widget.screenshot(path=str(tmp_path / "tree.png"))
        widget.locator(".recfn-tl-toggle").click()
        expect(widget).to_have_attribute("data-view", "timeline")

        # "Download trace" hands over the kernel's .json.gz of the trace, which recfn reads back.
        magic.scroll_into_view_if_needed()
        with page.expect_download() as download:
            magic.locator(".recfn-tl-download").click()
        saved = tmp_path / download.value.suggested_filename
        download.value.save_as(saved)
        assert saved.name == "demo.json.gz"
        events = recfn.load(saved, as_pandas=True)
        assert list(events["name"].astype(str)).count("step") == 20

        # "Open in Perfetto" posts the same file to the Perfetto UI after its PING/PONG.
        with context.expect_page() as opened:
            magic.locator(".recfn-tl-perfetto").click()
        perfetto = opened.value
        perfetto.wait_for_function("() => window.received !== undefined", timeout=STEP_WAIT_MS)
        received = perfetto.evaluate("() => window.received")
        assert received["fileName"] == "demo.json.gz"
        assert gzip.decompress(bytes(received["bytes"])) == gzip.decompress(saved.read_bytes())
        perfetto.close()

        round_trip = widget.get_attribute("data-round-trip-ms")
        print(f"zoom query round trip in the browser: {round_trip} ms")
        assert not [e for e in errors if "recfn" in e or "timeline" in e], errors
        browser.close()  # type: ignore[attr-defined]


QUICKSTART = Path(__file__).resolve().parents[3] / "notebooks" / "quickstart.ipynb"
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


def test_exported_quickstart_shows_the_stand_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nbconvert's HTML of the executed quickstart, opened with no kernel and no network: the
    static table, picture and HTML stand-in show, its call tree unfolds, no console errors."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nbconvert = pytest.importorskip("nbconvert")
    notebook = nbformat.read(QUICKSTART, as_version=4)
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONWARNINGS": "ignore"}
    # As JupyterLab saves by default: outputs, no widget state (so nbconvert shows text/html).
    nbclient.NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute(env=env)
    monkeypatch.setenv("JUPYTER_PATH", _jupyter_path())  # nbconvert's templates
    body, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
    page_path = tmp_path / "quickstart.html"
    page_path.write_text(body, encoding="utf-8")

    expect = sync_api.expect
    with sync_api.sync_playwright() as playwright:
        browser = _launch(playwright)
        context = browser.new_context(viewport={"width": 1280, "height": 1000})  # type: ignore[attr-defined]
        # No network here: the template's CDN scripts (require.js, MathJax) get an empty reply,
        # and the Perfetto UI is a stand-in that speaks its postMessage protocol.
        context.route(
            re.compile(r"^https?://"),
            lambda route: route.fulfill(status=200, body="", content_type="text/javascript"),
        )
        context.route(
            f"{PERFETTO_ORIGIN}/**",
            lambda route: route.fulfill(status=200, body=PERFETTO_STUB, content_type="text/html"),
        )
        page = context.new_page()
        page.set_default_timeout(STEP_WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
        page.goto(page_path.as_uri())
        stand_ins = page.locator(".recfn-fallback")
        expect(stand_ins).to_have_count(3)  # one per %%record_function cell
        first = stand_ins.nth(0)
        expect(first).to_be_visible()
        expect(first.locator(".recfn-alt")).to_contain_text("Timeline of plain_numpy")
        expect(first.locator(".recfn-download")).to_have_attribute(
            "download", "plain_numpy.json.gz"
        )
        expect(first.locator(".recfn-perfetto")).to_be_visible()
        nested = first.locator("details details summary").first
        expect(nested).to_be_visible()  # the root is open, its children listed
        nested.click()  # unfolds without a kernel
        pictures = page.locator("img[src^='data:image/png']")
        expect(pictures.first).to_be_visible()
        assert pictures.count() >= 3
        expect(page.locator("table.recfn-summary").first).to_be_visible()
        # "Open in Perfetto" opens the UI, waits for its PONG and posts the trace's bytes.
        with context.expect_page() as opened:
            first.locator(".recfn-perfetto").click()
        perfetto = opened.value
        perfetto.wait_for_function("() => window.received !== undefined", timeout=STEP_WAIT_MS)
        received = perfetto.evaluate("() => window.received")
        assert received["fileName"] == "plain_numpy.json.gz"
        posted = tmp_path / "posted.json.gz"
        posted.write_bytes(bytes(received["bytes"]))
        events = recfn.load(posted, as_pandas=True)
        assert "plain_numpy" in set(events["name"].astype(str))
        perfetto.close()
        first.screenshot(path=str(tmp_path / "fallback.png"))
        if os.environ.get("RECFN_UPDATE_SCREENSHOT") == "1":
            (DOCS_PNG.parent / "fallback.png").write_bytes((tmp_path / "fallback.png").read_bytes())
        assert not errors, errors
        browser.close()  # type: ignore[attr-defined]
