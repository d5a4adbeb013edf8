"""The HTML that stands in for the interactive timeline where no kernel runs it.

It rides in the same display bundle as the widget (``text/html`` beside
``application/vnd.jupyter.widget-view+json``): JupyterLab and VS Code draw the widget, while an
exported notebook (nbconvert drops a widget view whose state was not saved), nbviewer and GitHub
show this instead. Everything in it is self-contained and kept under a byte budget:

- a text description of the trace (the timeline picture's alt text),
- the summary pane's table (``widget.table``: name, calls, self, total, mean, file:line; the
  short name shown, the full name its tooltip), sortable by a click on a heading,
- the call tree of the largest nodes, foldable with ``<details>`` (no script needed; leaves
  are plain lines, with no fold arrow),
- a download link for the trace as a Chrome/Perfetto ``.json.gz`` (a data URL) and an
  "Open in Perfetto" button that hands the same bytes to the Perfetto UI with its postMessage
  protocol, or says so when the Perfetto UI cannot be reached (offline); when the file would
  not fit, a note says how to save it instead.

It is an output of its own (not the widget's bundle), so nbconvert shows it whether or not the
notebook stored widget state; where the widget runs, its stylesheet hides the stand-in of its
cell.
"""

from __future__ import annotations

import base64
import html
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

from recfn.notebook_ext.export import chrome_gz, denser, file_stem

if TYPE_CHECKING:
    from recfn.formats.trace import Trace
    from recfn.notebook_ext.widget.lod import TimelineIndex

DEFAULT_OUTPUT_BUDGET = 1_000_000
"""Bytes a magic cell's outputs may take together by default (``--max-output-bytes``)."""
TREE_NODES = 150
"""Call-tree nodes the fallback lists at most, the largest by total time."""
TABLE_ROWS = 20
"""Rows of the summary table the fallback lists at most, by total time."""
PERFETTO_MAX_PINGS = 100
"""PINGs (one per 100 ms) sent to a Perfetto UI tab before giving up on its PONG."""
FAST_GZIP_LEVEL = 1
"""The level the stand-in's Chrome file is first compressed at: zlib's fastest, a third of the
time of level 6 for about a quarter more bytes; when those do not fit, it is compressed again
at level 6 (`denser`)."""
MIN_CHROME_BYTES_PER_RANGE = 12
"""A lower bound of a range's size in gzipped Chrome JSON: larger traces are not even written."""
PERFETTO_ORIGIN = "https://ui.perfetto.dev"

_STYLE = (
    "<style>"
    ".recfn-fallback{font-family:sans-serif;font-size:13px;margin:4px 0}"
    ".recfn-fallback details{margin-left:14px}"
    ".recfn-fallback summary{cursor:pointer;font-family:monospace;white-space:nowrap}"
    ".recfn-fallback .recfn-leaf{margin-left:14px;padding-left:1.1em;font-family:monospace;"
    "white-space:nowrap}"
    ".recfn-fallback .recfn-actions a,.recfn-fallback .recfn-actions button{margin-right:10px}"
    ".recfn-fallback table.recfn-pane{border-collapse:collapse;margin:4px 0}"
    ".recfn-fallback table.recfn-pane td,.recfn-fallback table.recfn-pane th{padding:1px 8px;"
    "text-align:right;white-space:nowrap}"
    ".recfn-fallback table.recfn-pane td:first-child,.recfn-fallback table.recfn-pane "
    "th:first-child,.recfn-fallback table.recfn-pane td:last-child,.recfn-fallback "
    "table.recfn-pane th:last-child{text-align:left}"
    ".recfn-fallback table.recfn-pane th{cursor:pointer}"
    ".recfn-fallback .recfn-swatch{display:inline-block;width:9px;height:9px;margin-right:5px;"
    "border-radius:2px}"
    ".recfn-fallback .recfn-where{color:#777;font-family:monospace}"
    "</style>"
)

# The Perfetto UI's postMessage protocol: PING until it answers PONG, then send the buffer. The
# tab opens blank at once (a click allows it), goes to the UI only if the UI answers a fetch
# (offline: the tab closes and the page says so), and the PINGs stop after PERFETTO_MAX_PINGS.
_PERFETTO_JS = """<script>(function () {
  var button = document.getElementById("%(button)s");
  var link = document.getElementById("%(link)s");
  var status = document.getElementById("%(status)s");
  if (!button || !link || !status) { return; }
  function say(text, state) {
    status.textContent = text;
    button.setAttribute("data-perfetto", state);
  }
  button.addEventListener("click", function () {
    var text = atob(link.href.split(",")[1]);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { bytes[i] = text.charCodeAt(i); }
    var ui = window.open("about:blank");
    if (!ui) { say("the browser blocked the new tab; use the download link", "blocked"); return; }
    say("opening the Perfetto UI\\u2026", "opening");
    fetch("%(origin)s/", {mode: "no-cors", cache: "no-store"}).then(function () {
      ui.location.href = "%(origin)s";
      var pings = 0;
      var timer = setInterval(function () {
        pings += 1;
        if (pings > %(max_pings)d) {
          clearInterval(timer);
          window.removeEventListener("message", answer);
          say("the Perfetto UI did not answer; use the download link and open the file there",
              "silent");
          return;
        }
        ui.postMessage("PING", "%(origin)s");
      }, 100);
      function answer(event) {
        if (event.source !== ui || event.data !== "PONG") { return; }
        clearInterval(timer);
        window.removeEventListener("message", answer);
        ui.postMessage({perfetto: {buffer: bytes.buffer, title: %(title)s,
                                   fileName: link.getAttribute("download")}}, "%(origin)s");
        say("", "sent");
      }
      window.addEventListener("message", answer);
    }, function () {
      ui.close();
      say("the Perfetto UI (%(origin)s) cannot be reached (offline?); use the download link",
          "offline");
    });
  });
})();</script>"""

# Sorts the summary table by a click on a heading (numbers by their data-v, text as shown).
_SORT_JS = """<script>(function () {
  var table = document.getElementById("%(table)s");
  if (!table) { return; }
  var heads = table.querySelectorAll("th");
  heads.forEach(function (head, column) {
    head.addEventListener("click", function () {
      var down = head.getAttribute("data-sort") !== "desc";
      heads.forEach(function (h) { h.removeAttribute("data-sort"); });
      head.setAttribute("data-sort", down ? "desc" : "asc");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[column].getAttribute("data-v"), y = b.cells[column].getAttribute("data-v");
        var order = x !== null ? Number(x) - Number(y)
          : a.cells[column].textContent.localeCompare(b.cells[column].textContent);
        return down ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
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
    short = tree.get("short", {})

    def render(node: int) -> str:
        code = tree["name"][node]
        full = str(names.get(code, "?"))
        name = f'<span title="{html.escape(full)}">{html.escape(short.get(code, full))}</span>'
        label = (
            f"{name} — {format_ns(tree['total'][node])} total, "
            f"{format_ns(tree['self'][node])} self, {tree['count'][node]:,}×"
        )
        if node not in children:  # a leaf: nothing to fold
            return f'<div class="recfn-leaf">{label}</div>'
        kids = "".join(render(child) for child in children[node])
        return f"<details><summary>{label}</summary>{kids}</details>"

    shown = len(tree["parent"])
    roots = "".join(render(root) for root in children.get(-1, []))
    more = f" (the {shown:,} largest of {tree['nodes']:,} nodes)" if tree["nodes"] > shown else ""
    return (
        f"<details open><summary><b>Call tree of {html.escape(trace.name)}</b>{more}</summary>"
        f"{roots}</details>"
    )


def table_html(summary: dict[str, Any]) -> str:
    """The summary pane's table (``SummaryTable.query``) as static HTML, sortable by a click
    on a heading where scripts run: short names shown, full names as their tooltips."""
    from recfn.analysis.units import format_ns

    rows = summary["rows"]
    table_id = f"recfn-{uuid.uuid4().hex}"
    head = "".join(
        f"<th>{title}</th>" for title in ("name", "calls", "self", "total", "mean", "file:line")
    )
    body = []
    for i, code in enumerate(rows["name"]):
        full = str(summary["names"].get(code, "?"))
        brief = summary["short"].get(code, full)
        color = summary["colors"].get(code, "#ccc")
        cells = [
            f'<td title="{html.escape(full)}"><span class="recfn-swatch" '
            f'style="background:{color}"></span>{html.escape(brief)}</td>',
            f'<td data-v="{rows["calls"][i]}">{rows["calls"][i]:,}</td>',
            *(
                f'<td data-v="{rows[key][i]}">{format_ns(rows[key][i])}</td>'
                for key in ("self", "total", "mean")
            ),
            f'<td class="recfn-where">{html.escape(rows["location"][i])}</td>',
        ]
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = summary["groups"] - len(rows["name"])
    note = f'<p class="recfn-more">{more:,} more names</p>' if more > 0 else ""
    return ascii_html(
        f'<table class="recfn-pane" id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{note}"
    ) + _SORT_JS % {"table": table_id}


def fallback_html(
    trace: Trace,
    budget: int = DEFAULT_OUTPUT_BUDGET,
    *,
    index: Optional[TimelineIndex] = None,
    saved_path: Optional[str] = None,
    chrome: Optional[Callable[[], bytes]] = None,
) -> str:
    """The stand-in for the widget, at most ``budget`` bytes (UTF-8): description, summary
    table, call tree, download and Perfetto links, each left out (the links with a note) when
    it would not fit.

    ``index`` is the widget's, when there is one (building it again costs a few sorts);
    ``saved_path`` is where ``--output`` wrote the trace, linked when the data does not fit;
    ``chrome`` gives the trace's `chrome_gz` bytes at `FAST_GZIP_LEVEL` (say, from a thread
    that began on them earlier), called only when `may_embed` allows; bytes that do not fit
    are compressed again at the writer's level (`denser`) before they are left out.
    """
    if budget <= 0:
        return ""
    description = ascii_html(html.escape(describe_trace(trace)))
    head = f'{_STYLE}<div class="recfn-fallback">'
    parts = [head, f'<p class="recfn-alt">{description}</p>']
    tail = "</div>"
    used = sum(utf8_size(p) for p in parts) + len(tail)
    if used > budget:
        return ""

    ranges = int(trace.table.num_rows)
    if ranges:
        if index is None:
            from recfn.notebook_ext.widget.lod import TimelineIndex

            index = TimelineIndex(trace.table)
        from recfn.notebook_ext.widget.table import summary_table

        for part in (
            table_html(summary_table(index).query(top=TABLE_ROWS)),
            ascii_html(_tree_html(index.call_tree(max_nodes=TREE_NODES), trace)),
        ):
            size = utf8_size(part)
            if used + size <= budget:
                parts.append(part)
                used += size

    fast = chrome or (lambda: chrome_gz(trace, FAST_GZIP_LEVEL))
    actions = _actions_html(trace, budget - used, saved_path, fast)
    if actions and used + utf8_size(actions) <= budget:
        parts.append(actions)
    parts.append(tail)
    return "".join(parts)


def ascii_html(text: str) -> str:
    """HTML text (no script or style in it) with its non-ASCII characters as character
    references: the stand-in joins such parts with half a megabyte of base64, and one
    character past Latin-1 would make all of it a two-byte string, copied and encoded again at
    every step (`utf8_size`, the kernel's message)."""
    return text if text.isascii() else text.encode("ascii", "xmlcharrefreplace").decode("ascii")


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8, without encoding it where it is ASCII (``str.isascii`` reads
    a flag): the stand-in is mostly base64, half a megabyte or more, measured several times."""
    return len(text) if text.isascii() else len(text.encode())


def may_embed(trace: Trace, room: int) -> bool:
    """Whether the trace's Chrome file may fit ``room`` bytes of the stand-in (base64, with its
    links): not a trace too small to hold events, nor one too large for even the smallest
    events (`MIN_CHROME_BYTES_PER_RANGE`), which is not even written."""
    estimate = 4 * MIN_CHROME_BYTES_PER_RANGE * trace.events // 3
    return 0 < estimate < room - 400


def _actions_html(
    trace: Trace, room: int, saved_path: Optional[str], chrome: Callable[[], bytes]
) -> str:
    """The download link and Perfetto button in at most ``room`` bytes, or a note saying why not."""
    file_name = f"{file_stem(trace.name)}.json.gz"
    payload = chrome() if may_embed(trace, room) else b""
    if payload and not _fits(payload, room):
        payload = denser(payload)
    if payload and _fits(payload, room):
        encoded = base64.b64encode(payload).decode("ascii")
        link_id, button_id, status_id = (f"recfn-{uuid.uuid4().hex}" for _ in range(3))
        script = _PERFETTO_JS % {
            "button": button_id,
            "link": link_id,
            "status": status_id,
            "origin": PERFETTO_ORIGIN,
            "max_pings": PERFETTO_MAX_PINGS,
            "title": _js_string(trace.name),
        }
        return (
            '<p class="recfn-actions">'
            f'<a id="{link_id}" class="recfn-download" download="{ascii_html(html.escape(file_name))}" '
            f'href="data:application/gzip;base64,{encoded}">Download trace '
            f"({len(payload) / 1e3:,.0f} kB .json.gz)</a>"
            f'<button id="{button_id}" class="recfn-perfetto" type="button">Open in Perfetto'
            f'</button><span id="{status_id}" class="recfn-perfetto-status"></span></p>{script}'
        )
    if saved_path:
        where = ascii_html(html.escape(saved_path))
        return (
            f'<p class="recfn-actions">Trace saved as <a class="recfn-saved" href="{where}">'
            f"{where}</a> (open it in Perfetto: {PERFETTO_ORIGIN}).</p>"
        )
    return (
        '<p class="recfn-actions">The trace is too large to embed within the cell output '
        "budget; keep it with <code>--output trace.json.gz</code> and open it in Perfetto "
        f"({PERFETTO_ORIGIN}).</p>"
    )


def _fits(payload: bytes, room: int) -> bool:
    """Whether ``payload`` fits ``room`` as the data URL, its links and the Perfetto script."""
    return 4 * ((len(payload) + 2) // 3) + len(_PERFETTO_JS) + 800 < room


def _js_string(text: str) -> str:
    import json

    return json.dumps(text).replace("<", "\\u003c")
