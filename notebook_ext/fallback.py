"""The HTML that stands in for the interactive timeline where no kernel runs it.

It rides in the same display bundle as the widget (``text/html`` beside
``application/vnd.jupyter.widget-view+json``): JupyterLab and VS Code draw the widget, while an
exported notebook (nbconvert drops a widget view whose state was not saved), nbviewer and GitHub
show this instead. Everything in it is self-contained and kept under a byte budget:

- a text description of the trace (the timeline picture's alt text),
- the call tree of the largest nodes, foldable with ``<details>`` (no script needed),
- a download link for the trace as a Chrome/Perfetto ``.json.gz`` (a data URL) and an
  "Open in Perfetto" button that hands the same bytes to the Perfetto UI with its postMessage
  protocol; when the file would not fit, a note says how to save it instead.
"""

from __future__ import annotations

import base64
import html
import uuid
from typing import TYPE_CHECKING, Any, Optional

from recfn.notebook_ext.export import chrome_gz, file_stem

if TYPE_CHECKING:
    from recfn.formats.trace import Trace
    from recfn.notebook_ext.widget.lod import TimelineIndex

DEFAULT_OUTPUT_BUDGET = 1_000_000
"""Bytes a magic cell's outputs may take together by default (``--max-output-bytes``)."""
TREE_NODES = 150
"""Call-tree nodes the fallback lists at most, the largest by total time."""
MIN_CHROME_BYTES_PER_RANGE = 12
"""A lower bound of a range's size in gzipped Chrome JSON: larger traces are not even written."""
PERFETTO_ORIGIN = "https://ui.perfetto.dev"

_STYLE = (
    "<style>"
    ".recfn-fallback{font-family:sans-serif;font-size:13px;margin:4px 0}"
    ".recfn-fallback details{margin-left:14px}"
    ".recfn-fallback summary{cursor:pointer;font-family:monospace;white-space:nowrap}"
    ".recfn-fallback .recfn-actions a,.recfn-fallback .recfn-actions button{margin-right:10px}"
    "</style>"
)

# The Perfetto UI's postMessage protocol: PING until it answers PONG, then send the buffer.
_PERFETTO_JS = """<script>(function () {
  var button = document.getElementById("%(button)s");
  var link = document.getElementById("%(link)s");
  if (!button || !link) { return; }
  button.addEventListener("click", function () {
    var text = atob(link.href.split(",")[1]);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { bytes[i] = text.charCodeAt(i); }
    var ui = window.open("%(origin)s");
    if (!ui) { return; }
    var timer = setInterval(function () { ui.postMessage("PING", "%(origin)s"); }, 100);
    window.addEventListener("message", function answer(event) {
      if (event.source !== ui || event.data !== "PONG") { return; }
      clearInterval(timer);
      window.removeEventListener("message", answer);
      ui.postMessage({perfetto: {buffer: bytes.buffer, title: %(title)s,
                                 fileName: link.getAttribute("download")}}, "%(origin)s");
    });
  });
})();</script>"""


def describe_trace(trace: Trace, top: int = 3) -> str:
    """One or two sentences saying what the timeline shows, for screen readers and for pages
    that cannot show the interactive view (it needs no drawing, unlike ``alt_text``)."""
    from recfn.analysis.units import format_ns

    threads = trace.threads
    parts = [
        f"Timeline of {trace.name}: {format_ns(trace.wall_ns)} of wall time, "
        f"{trace.events:,} events on {threads} thread{'s' if threads != 1 else ''}."
    ]
    try:
        summary = trace.summary(top=15)  # the table's, cached: not computed again
    except (ValueError, AttributeError):
        summary = None
    if summary is not None and len(summary) and "total_ns" in summary.columns:
        largest = summary["total_ns"].sort_values(ascending=False).head(top)
        names = [f"{name} ({format_ns(total)} total)" for name, total in largest.items()]
        parts.append(f"Largest by total time: {', '.join(map(str, names))}.")
    return " ".join(parts)


def _tree_html(tree: dict[str, Any], trace: Trace) -> str:
    from recfn.analysis.units import format_ns

    children: dict[int, list[int]] = {}
    for node, parent in enumerate(tree["parent"]):
        children.setdefault(parent, []).append(node)
    names = tree["names"]

    def render(node: int) -> str:
        name = html.escape(str(names.get(tree["name"][node], "?")))
        label = (
            f"{name} — {format_ns(tree['total'][node])} total, "
            f"{format_ns(tree['self'][node])} self, {tree['count'][node]:,}×"
        )
        kids = "".join(render(child) for child in children.get(node, []))
        return f"<details><summary>{label}</summary>{kids}</details>"

    shown = len(tree["parent"])
    roots = "".join(render(root) for root in children.get(-1, []))
    more = f" (the {shown:,} largest of {tree['nodes']:,} nodes)" if tree["nodes"] > shown else ""
    return (
        f"<details open><summary><b>Call tree of {html.escape(trace.name)}</b>{more}</summary>"
        f"{roots}</details>"
    )


def fallback_html(
    trace: Trace,
    budget: int = DEFAULT_OUTPUT_BUDGET,
    *,
    index: Optional[TimelineIndex] = None,
    saved_path: Optional[str] = None,
) -> str:
    """The stand-in for the widget, at most ``budget`` bytes (UTF-8): description, call tree,
    download and Perfetto links, each left out (with a note) when it would not fit.

    ``index`` is the widget's, when there is one (building it again costs a few sorts);
    ``saved_path`` is where ``--output`` wrote the trace, linked when the data does not fit.
    """
    if budget <= 0:
        return ""
    description = html.escape(describe_trace(trace))
    head = f'{_STYLE}<div class="recfn-fallback">'
    parts = [head, f'<p class="recfn-alt">{description}</p>']
    tail = "</div>"
    used = sum(len(p.encode()) for p in parts) + len(tail)
    if used > budget:
        return ""

    ranges = int(trace.table.num_rows)
    tree_part = ""
    if ranges:
        if index is None:
            from recfn.notebook_ext.widget.lod import TimelineIndex

            index = TimelineIndex(trace.table)
        tree_part = _tree_html(index.call_tree(max_nodes=TREE_NODES), trace)
    size = len(tree_part.encode())
    if tree_part and used + size <= budget:
        parts.append(tree_part)
        used += size

    actions = _actions_html(trace, budget - used, saved_path)
    if actions and used + len(actions.encode()) <= budget:
        parts.append(actions)
    parts.append(tail)
    return "".join(parts)


def _actions_html(trace: Trace, room: int, saved_path: Optional[str]) -> str:
    """The download link and Perfetto button in at most ``room`` bytes, or a note saying why not."""
    file_name = f"{file_stem(trace.name)}.json.gz"
    note_room = room - 400
    estimate = 4 * MIN_CHROME_BYTES_PER_RANGE * trace.events // 3
    payload = b""
    if 0 < estimate < note_room:
        payload = chrome_gz(trace)
    encoded = base64.b64encode(payload).decode("ascii") if payload else ""
    if encoded and len(encoded) + len(_PERFETTO_JS) + 600 < room:
        link_id, button_id = f"recfn-{uuid.uuid4().hex}", f"recfn-{uuid.uuid4().hex}"
        script = _PERFETTO_JS % {
            "button": button_id,
            "link": link_id,
            "origin": PERFETTO_ORIGIN,
            "title": _js_string(trace.name),
        }
        return (
            '<p class="recfn-actions">'
            f'<a id="{link_id}" class="recfn-download" download="{html.escape(file_name)}" '
            f'href="data:application/gzip;base64,{encoded}">Download trace '
            f"({len(payload) / 1e3:,.0f} kB .json.gz)</a>"
            f'<button id="{button_id}" class="recfn-perfetto" type="button">Open in Perfetto'
            f"</button></p>{script}"
        )
    if saved_path:
        where = html.escape(saved_path)
        return (
            f'<p class="recfn-actions">Trace saved as <a class="recfn-saved" href="{where}">'
            f"{where}</a> (open it in Perfetto: {PERFETTO_ORIGIN}).</p>"
        )
    return (
        '<p class="recfn-actions">The trace is too large to embed within the cell output '
        "budget; keep it with <code>--output trace.json.gz</code> and open it in Perfetto "
        f"({PERFETTO_ORIGIN}).</p>"
    )


def _js_string(text: str) -> str:
    import json

    return json.dumps(text).replace("<", "\\u003c")
