"""``Trace``: one captured trace (a cell, a script, a loaded file) with its header and rich reprs.

It holds the event table and what the table alone does not say (wall time, dropped events, the
exception that interrupted the cell). The DataFrame, summary and timeline are computed on first
use and cached, so showing a trace twice costs nothing.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from matplotlib.axes import Axes

SUMMARY_TOP = 15


class Trace:
    """A trace and its facts: ``.df`` (with ``df.recfn``), ``.table``, ``.summary()``, ``.save()``.

    In a notebook it shows as a header line plus the top-15 summary as HTML; in a terminal as
    text. ``timeline()`` draws it with matplotlib.
    """

    def __init__(
        self,
        table: Optional[pa.Table] = None,
        *,
        df: Optional[pd.DataFrame] = None,
        name: str = "trace",
        wall_ns: Optional[int] = None,
        dropped: Optional[int] = None,
        error: Optional[str] = None,
        execution_count: Optional[int] = None,
        options: Optional[dict[str, Any]] = None,
        cells: tuple[str, ...] = (),
    ) -> None:
        if table is None and df is None:
            raise ValueError("Trace needs an event table or a DataFrame")
        self._table = table
        self._df = df
        self.name = name
        self._wall_ns = wall_ns
        self._dropped = dropped
        self.error = error
        self.execution_count = execution_count
        self.options = dict(options or {})
        self.cells = cells or (name,)
        self._summary: Optional[pd.DataFrame] = None
        self._png: Optional[bytes] = None

    @classmethod
    def from_profile(cls, prof: Any, name: str = "profile") -> Trace:
        """A Trace of a stopped ``recfn.profile`` (what its rich reprs can delegate to)."""
        return cls(prof.table(), name=name, wall_ns=prof.wall_ns, dropped=prof.dropped_events)

    # -- data -------------------------------------------------------------------------------

    @property
    def table(self) -> pa.Table:
        """The events as a ``pyarrow.Table`` (docs/schema.md)."""
        if self._table is None:
            from recfn.notebook_ext.files import frame_to_table

            assert self._df is not None
            self._table = frame_to_table(self._df)
        return self._table

    @property
    def df(self) -> pd.DataFrame:
        """The events as a DataFrame carrying the ``df.recfn`` accessor (cached)."""
        if self._df is None:
            from recfn.io import table_to_pandas

            assert self._table is not None
            df = table_to_pandas(self._table)
            df.attrs.setdefault("recfn", {})["cell"] = self.name
            self._df = df
        return self._df

    def to_pandas(self) -> pd.DataFrame:
        return self.df

    @property
    def interrupted(self) -> bool:
        """True when the cell or script ended with an exception (KeyboardInterrupt included)."""
        return self.error is not None

    @property
    def events(self) -> int:
        return self._table.num_rows if self._table is not None else len(self.df)

    @property
    def threads(self) -> int:
        if self._table is not None:
            import pyarrow.compute as pc

            if self._table.num_rows == 0:
                return 0
            return int(pc.count_distinct(self._table.column("thread_id")).as_py())
        return int(self.df["thread_id"].nunique()) if len(self.df) else 0

    @property
    def dropped(self) -> int:
        if self._dropped is not None:
            return self._dropped
        raw = self._metadata().get("recfn.dropped_events", "0")
        try:
            return int(raw)
        except ValueError:
            return 0

    @property
    def wall_ns(self) -> int:
        """Wall time of the capture; for loaded files, the span from first start to last end."""
        if self._wall_ns is not None:
            return self._wall_ns
        import pandas as pd

        df = self.df
        if not len(df):
            return 0
        start = df["start_ns"].min()
        end = df["end_ns"].max() if "end_ns" in df.columns else None
        if end is None or pd.isna(end):  # only open ranges
            end = df["start_ns"].max()
        return max(int(end) - int(start), 0)

    def _metadata(self) -> dict[str, str]:
        if self._table is not None:
            return {k.decode(): v.decode() for k, v in (self._table.schema.metadata or {}).items()}
        assert self._df is not None
        attrs = self._df.attrs.get("recfn", {})
        return {str(k): str(v) for k, v in attrs.items()} if isinstance(attrs, dict) else {}

    # -- analysis -----------------------------------------------------------------------------

    def summary(self, top: Optional[int] = SUMMARY_TOP, **kwargs: Any) -> pd.DataFrame:
        """``df.recfn.summary(top=...)`` (the default call is cached)."""
        if kwargs or top != SUMMARY_TOP:
            return self.df.recfn.summary(top=top, **kwargs)
        if self._summary is None:
            self._summary = self.df.recfn.summary(top=top)
        return self._summary

    def diff(self, baseline: Trace | pd.DataFrame) -> pd.DataFrame:
        """``df.recfn.diff``: per name, how this trace changed from ``baseline``."""
        base_df = baseline.df if isinstance(baseline, Trace) else baseline
        result: pd.DataFrame = self.df.recfn.diff(base_df)
        return result

    def timeline(self, ax: Optional[Axes] = None, **kwargs: Any) -> Axes:
        """``df.recfn.timeline(ax=ax, ...)`` titled with this trace's header."""
        kwargs.setdefault("title", self.name)
        drawn: Axes = self.df.recfn.timeline(ax=ax, **kwargs)
        return drawn

    def timeline_png(self) -> bytes:
        """The timeline as PNG bytes (Agg, no pyplot state; cached)."""
        if self._png is None:
            from recfn.notebook_ext.display import render_timeline_png

            self._png = render_timeline_png(self)
        return self._png

    def save(self, path: Any) -> str:
        """Write Parquet, or Chrome JSON for ``.json``/``.json.gz``; returns the path."""
        from recfn.notebook_ext.files import save_trace

        return save_trace(self, os.fspath(path))

    # -- reprs --------------------------------------------------------------------------------

    def header(self) -> str:
        from recfn.notebook_ext.display import header_text

        return header_text(self)

    def __repr__(self) -> str:
        return f"<recfn.Trace {self.header()}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        from recfn.notebook_ext.display import trace_text

        printer.text(self.__repr__() if cycle else trace_text(self))

    def _repr_html_(self) -> str:
        from recfn.notebook_ext.display import trace_html

        return trace_html(self)

    def config(self) -> dict[str, Any]:
        """The profiler configuration stored in the trace's metadata (empty if unknown)."""
        raw = self._metadata().get("recfn.config")
        try:
            value = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
