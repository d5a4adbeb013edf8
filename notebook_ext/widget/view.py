"""``TimelineWidget``: the anywidget view of a trace, answering viewport queries from the kernel.

The initial state is only the lanes and the first level-of-detail response for the whole trace,
held under ``INITIAL_STATE_BUDGET`` bytes; every zoom, pan, hover, search or call-tree request is
a custom message (``{"type": "query" | "detail" | "search" | "tree", "id": n, ...}``) answered
with ``{"id": n, "result": ...}`` or ``{"id": n, "error": "..."}``; ``{"type": "export"}`` is
answered with the trace as a ``.json.gz`` in the reply's binary buffer (download, Perfetto).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import pyarrow as pa
import traitlets

from recfn.errors import QueryError, RecfnTypeError
from recfn.notebook_ext.widget.lod import TimelineIndex, first_view, response_size

INITIAL_STATE_BUDGET = 1_000_000
"""Bytes of JSON the widget's initial state may take in a notebook (the issue's per-cell budget)."""
INITIAL_WIDTH_PX = 1200

_HERE = Path(__file__).parent


class TimelineWidget(anywidget.AnyWidget):
    """An interactive timeline and call tree of ``table`` (an event table, docs/schema.md)."""

    _esm = _HERE / "timeline.js"
    _css = _HERE / "timeline.css"
    info = traitlets.Dict().tag(sync=True)
    view = traitlets.Dict().tag(sync=True)
    tree = traitlets.Dict().tag(sync=True)  # empty: the view asks for it on first toggle

    def __init__(
        self, table: pa.Table, *, width_px: int = INITIAL_WIDTH_PX, name: str = "trace"
    ) -> None:
        if not isinstance(table, pa.Table):
            raise RecfnTypeError(
                f"TimelineWidget needs a pyarrow.Table, got {type(table).__name__}"
            )
        index = TimelineIndex(table)
        info = index.describe()
        view = first_view(index, width_px)
        while response_size(view) + response_size(info) > INITIAL_STATE_BUDGET and width_px > 64:
            width_px //= 2
            view = first_view(index, width_px)
        super().__init__(info=info, view=view)
        self.index = index
        self._table = table
        self.trace_name = name
        self.on_msg(self._answer)

    def initial_state_size(self) -> int:
        """Bytes of JSON in the initial state (what a saved notebook stores for this output)."""
        return response_size(self.info) + response_size(self.view) + response_size(self.tree)

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request from the view (also what tests call without a browser)."""
        reply: dict[str, Any] = {"id": message.get("id")}
        try:
            reply["result"] = self._result(message)
        except (QueryError, KeyError, TypeError) as exc:
            reply["error"] = f"{type(exc).__name__}: {exc}"
        return reply

    def _result(self, message: dict[str, Any]) -> Any:
        kind = message.get("type")
        if kind == "query":
            return self.index.query(message["t0"], message["t1"], message["width"])
        if kind == "detail":
            return self.index.detail(message["row"])
        if kind == "search":
            return self.index.search(message["text"])
        if kind == "tree":
            return self.index.call_tree()
        raise QueryError(f"unknown request type {kind!r}; expected query, detail, search or tree")

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
