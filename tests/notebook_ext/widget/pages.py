"""Helpers of the browser tests: a notebook page and what a test does to a widget on it."""

from __future__ import annotations

from typing import Any

GUTTER = 150  # px of lane labels (timeline.js)
AXIS_H = 22  # px of the time axis (timeline.js)
LANE_GAP = 18  # px of a lane's title band (timeline.js)
ROW_H = 16  # px per nesting row (timeline.js)


class NotebookPage:
    """A page showing one notebook of the lab server, its cells run once; ``errors`` collects
    the page's uncaught exceptions and console errors."""

    def __init__(self, context: Any, page: Any) -> None:
        self.context = context
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))
        page.on(
            "console",
            lambda message: message.type == "error" and self.errors.append(message.text),
        )

    def outputs(self, cell: int) -> list[dict[str, Any]]:
        """The output models of code cell ``cell`` (``toJSON()``: what the notebook saves)."""
        result: list[dict[str, Any]] = self.page.evaluate(
            "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i]"
            ".model.outputs.toJSON()",
            cell,
        )
        return result

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)


def widget_of(nb: NotebookPage, cell: int) -> Any:
    return nb.cell(cell).locator(".recfn-tl")


def fresh(nb: NotebookPage, cell: int) -> Any:
    """The widget of ``cell`` scrolled into view, on its whole trace, nothing highlighted, the
    table of the whole trace, the wheel scrolling the page."""
    widget = widget_of(nb, cell)
    widget.scroll_into_view_if_needed()
    search = widget.locator(".recfn-tl-search")
    if search.input_value():
        search.fill("")
    whole = widget.locator(".recfn-tl-whole")
    if whole.is_visible():
        whole.click()
    if widget.get_attribute("data-view") == "tree":
        widget.locator(".recfn-tl-toggle").click()
    widget.locator(".recfn-tl-reset").click()
    nb.page.mouse.click(5, 500)  # outside every widget: the wheel scrolls the page again
    nb.page.wait_for_function(
        "(el) => el.dataset.t0 === '0' && el.dataset.wheel === 'page'"
        " && el.dataset.highlighted === '0' && el.dataset.pending === '0'",
        arg=widget.element_handle(),
    )
    return widget


def span(widget: Any) -> float:
    return float(widget.get_attribute("data-t1")) - float(widget.get_attribute("data-t0"))


# The canvas's box once it is inside the viewport, where it was the frame before (no scroll or
# layout under way) and on top at its top edge and its middle (nothing over it, such as the
# notebook's toolbar): mouse gestures at points of it reach it.
STEADY_BOX = """(el) => {
  const r = el.getBoundingClientRect();
  const key = `${r.x},${r.y},${r.width},${r.height}`;
  const steady = el.recfnLastBox === key;
  el.recfnLastBox = key;
  if (!steady || r.top < 0 || r.bottom > window.innerHeight) return false;
  const x = r.x + r.width / 2;
  const onTop = [r.y + 2, r.y + r.height / 2].every((y) => document.elementFromPoint(x, y) === el);
  return onTop ? { x: r.x, y: r.y, width: r.width, height: r.height } : false;
}"""


def canvas_box(widget: Any) -> dict[str, float]:
    """The canvas of ``widget``, scrolled into view, its box in the page's coordinates."""
    canvas = widget.locator("canvas")
    canvas.scroll_into_view_if_needed()
    handle = widget.page.wait_for_function(STEADY_BOX, arg=canvas.element_handle(), polling="raf")
    box: dict[str, float] = handle.json_value()
    return box


def expect() -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def wait_other_pages_closed(context: Any, keep: Any) -> None:
    """Wait until every page of ``context`` but ``keep`` has closed."""
    for other in list(context.pages):
        if other is not keep and not other.is_closed():
            other.wait_for_event("close")
