"""Browser fixtures: one JupyterLab server and one chromium for the session, a page per module.

Skipped (not failed) where chromium, Playwright, JupyterLab or anywidget is missing, or chromium
cannot start here. A module opens its own notebook in its own page (``notebook_page``), so its
tests share one kernel and one run of the cells, and no module sees another's state.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import labserver
import pytest
from pages import NotebookPage

NEEDED = ("anywidget", "jupyterlab", "playwright")
STEP_WAIT_MS = 20_000


def _browser_missing() -> str:
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        return f"not installed: {', '.join(missing)}"
    if labserver.CHROMIUM is None:
        return "chromium is not installed (apt-get install chromium)"
    return ""


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lab")


@pytest.fixture(scope="session")
def lab(lab_root: Path) -> Iterator[str]:
    """The base URL of a JupyterLab server on 127.0.0.1 serving ``lab_root``."""
    why = _browser_missing()
    if why:
        pytest.skip(why)
    try:
        with labserver.lab_server(lab_root) as base:
            yield base
    except labserver.LabStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium under Playwright's sync API, for one test module: while that API is open the
    main thread has a running asyncio loop, so a session-wide browser made every later test
    that calls ``asyncio.run`` in the same process fail (order dependence)."""
    why = _browser_missing()
    if why:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        try:
            launched = labserver.launch_chromium(playwright)
        except Exception as exc:  # a chromium that cannot start here is a skip, not a failure
            pytest.skip(f"chromium did not start: {exc}")
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def notebook_page(
    lab: str, lab_root: Path, browser: Any, request: pytest.FixtureRequest
) -> Iterator[Callable[[Sequence[str]], NotebookPage]]:
    """``notebook_page(cells)``: a new page (1280x1000) with a notebook of ``cells``, every
    cell run and the kernel idle. One per module: call it from a module-scoped fixture."""
    opened: list[Any] = []

    def open_page(cells: Sequence[str]) -> NotebookPage:
        name = f"{request.module.__name__.rsplit('.', 1)[-1]}.ipynb"
        labserver.write_notebook(lab_root / name, cells)
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        opened.append(context)
        page = context.new_page()
        page.set_default_timeout(STEP_WAIT_MS)
        notebook = NotebookPage(context, page)
        labserver.open_notebook(page, lab, name)
        labserver.run_all_cells(page)
        labserver.wait_idle(page)
        return notebook

    yield open_page
    for context in opened:
        context.close()
