"""``TimelineWidget``: the anywidget view of a trace, answering viewport queries from the kernel.

The initial state is only the lanes and the first level-of-detail response for the whole trace,
held under ``INITIAL_STATE_BUDGET`` bytes; every zoom, pan, hover, search or call-tree request is
a custom message (``{"type": "query" | "detail" | "search" | "tree", "id": n, ...}``) answered
with ``{"id": n, "result": ...}`` or ``{"id": n, "error": "..."}``; ``{"type": "export"}`` is
answered with the trace as a ``.json.gz`` in the reply's binary buffer (download, Perfetto).
``{"type": "summary", ...}`` answers the summary pane (``table.SummaryTable.query``),
``{"type": "longest", "name": id}`` the range a click on one of its rows zooms to.

The state travels as JSON text (``info_json``, ``view_json``, ``summary_json``; the view parses
it): ipywidgets walks a dict state item by item for binary buffers before sending it, 35 ms for
the first view of 100,000 ranges, where text is written once and measured as written.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anywidget
import pyarrow as pa
import traitlets

from recfn.errors import QueryError, RecfnTypeError
from recfn.notebook_ext.widget.lod import TimelineIndex, first_view, response_json
from recfn.notebook_ext.widget.table import SummaryError, SummaryTable, summary_table

INITIAL_STATE_BUDGET = 1_000_000
"""Bytes of JSON the widget's initial state may take in a notebook (the issue's per-cell budget)."""
INITIAL_WIDTH_PX = 1200
SUMMARY_RESERVE = 40_000
"""Bytes of the initial state kept for the summary pane's table (at most 100 rows)."""

_HERE = Path(__file__).parent


class TimelineWidget(anywidget.AnyWidget):
    """An interactive timeline and call tree of ``table`` (an event table, docs/schema.md)."""

    _esm = _HERE / "timeline.js"
    _css = _HERE / "timeline.css"
    info_json = traitlets.Unicode("{}").tag(sync=True)  # `TimelineIndex.describe`, a uid
    view_json = traitlets.Unicode("{}").tag(sync=True)  # the first view (`first_view`)
    summary_json = traitlets.Unicode("").tag(sync=True)  # the whole trace's table, by total time

    def __init__(
        self,
        table: pa.Table,
        *,
        width_px: int = INITIAL_WIDTH_PX,
        name: str = "trace",
        summary: bool = True,
    ) -> None:
        """``summary=False`` leaves the summary pane's table out of the initial state, for
        `fill_summary` to send once the view is shown: the timeline paints without waiting
        for it."""
        if not isinstance(table, pa.Table):
            raise RecfnTypeError(
                f"TimelineWidget needs a pyarrow.Table, got {type(table).__name__}"
            )
        index = TimelineIndex(table)
        info = response_json({**index.describe(), "uid": uuid.uuid4().hex})
        view = response_json(first_view(index, width_px))
        fixed = _stored_size(info) + SUMMARY_RESERVE
        while _stored_size(view) + fixed > INITIAL_STATE_BUDGET and width_px > 64:
            width_px //= 2
            view = response_json(first_view(index, width_px))
        super().__init__(info_json=info, view_json=view)
        self.index = index
        self._table = table
        self.trace_name = name
        self.on_msg(self._answer)
        if summary:
            self.fill_summary()

    @property
    def info(self) -> dict[str, Any]:
        """The trace's lanes, names and span as the view gets them (`TimelineIndex.describe`)."""
        return dict(json.loads(self.info_json))

    @property
    def view(self) -> dict[str, Any]:
        """The first view of the whole trace as the view gets it (`first_view`)."""
        return dict(json.loads(self.view_json))

    @property
    def summary(self) -> dict[str, Any]:
        """The summary pane's whole-trace table as sent; empty before `fill_summary`."""
        return dict(json.loads(self.summary_json)) if self.summary_json else {}

    @property
    def summary_table(self) -> SummaryTable:
        """The summary pane's table of this trace (`table.summary_table`, built once)."""
        return summary_table(self.index)

    def fill_summary(self) -> None:
        """Send the summary pane its whole-trace table (by total time), if not sent yet."""
        if not self.summary_json:
            self.summary_json = response_json(self.summary_table.query())

    def initial_state_size(self) -> int:
        """Bytes of JSON in the initial state (what a saved notebook stores for this output)."""
        return sum(
            _stored_size(text) for text in (self.info_json, self.view_json, self.summary_json)
        )

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request from the view (also what tests call without a browser)."""
        reply: dict[str, Any] = {"id": message.get("id")}
        try:
            reply["result"] = self._result(message)
        except (QueryError, SummaryError, KeyError, TypeError) as exc:
            reply["error"] = f"{type(exc).__name__}: {exc}"
        return reply

    def _result(self, message: dict[str, Any]) -> Any:
        kind = message.get("type")
        if kind == "query":
            highlight = message.get("highlight") or []
            if not isinstance(highlight, list):
                raise QueryError(f"highlight must be a list of name ids, got {highlight!r}")
            return self.index.query(message["t0"], message["t1"], message["width"], highlight)
        if kind == "detail":
            detail = self.index.detail(message["row"])
            name_id = int(self.index.name_codes[detail["row"]])
            if name_id >= 0:
                detail["location"] = self.summary_table.location(name_id)
            return detail
        if kind == "search":
            return self.index.search(message["text"])
        if kind == "tree":
            return self.index.call_tree()
        if kind == "summary":
            return self.summary_table.query(
                message.get("t0"),
                message.get("t1"),
                sort=message.get("sort", "total"),
                descending=bool(message.get("descending", True)),
                focus=message.get("focus"),
            )
        if kind == "longest":
            return self.index.longest(message["name"])
        raise QueryError(
            f"unknown request type {kind!r}; expected query, detail, search, tree, summary or "
            "longest"
        )

    def export(self) -> tuple[str, bytes]:
        """The trace as gzipped Chrome/Perfetto JSON and a file name for it: what the view's
        "Download trace" and "Open in Perfetto" buttons ask for."""
        from recfn.formats.trace import Trace
        from recfn.notebook_ext.export import chrome_gz, file_stem

        trace = Trace(self._table, name=self.trace_name)
        return f"{file_stem(self.trace_name)}.json.gz", chrome_gz(trace)

    def _answer(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "export":  # the file travels as a binary buffer
            try:
                file_name, data = self.export()
            except (OSError, ValueError) as exc:
                self.send({"id": content.get("id"), "error": f"{type(exc).__name__}: {exc}"})
                return
            reply = {"id": content.get("id"), "result": {"file": file_name, "bytes": len(data)}}
            self.send(reply, buffers=[data])
            return
        self.send(self.handle(content))


def _stored_size(text: str) -> int:
    """Bytes `text` takes as a JSON string in a saved notebook (quotes and escapes included)."""
    return len(json.dumps(text))
