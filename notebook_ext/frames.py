"""Summaries shown with units in a notebook: ``trace.summary()`` and ``df.recfn.summary()``
hold integer nanoseconds (and bytes), which pandas shows as ``8.182703e+09``; with the extension
loaded, a frame marked as a summary (``analysis.summary.SUMMARY_ATTR``) shows as ``8.183s``,
``52.7%``, ``1.50 MiB``. Only the display changes: the frame and its columns stay as they are.

``register(shell)`` adds IPython formatters for ``pandas.DataFrame`` (HTML and text) that format
summaries and leave every other frame to pandas; ``unregister(shell)`` takes them away again.
"""

from __future__ import annotations

import html
from typing import Any

NOTE = (
    "recfn summary: times, bytes and shares shown with units; the frame holds integer "
    "nanoseconds and bytes (e.g. summary['total_ns'])."
)


def is_summary(frame: Any) -> bool:
    """Whether ``frame`` is a DataFrame that recfn marked as a summary."""
    from recfn.analysis.stats.summary import SUMMARY_ATTR

    attrs = getattr(frame, "attrs", None)
    return isinstance(attrs, dict) and bool(attrs.get(SUMMARY_ATTR))


def with_units(frame: Any) -> Any:
    """``frame`` (a summary) as strings with units, index and column names as they are."""
    import pandas as pd

    from recfn.notebook_ext.display import format_cell

    out = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        out[column] = [format_cell(str(column), value) for value in frame[column]]
    return out


def summary_html(frame: Any) -> str:
    """The HTML a notebook shows for a summary: pandas' table of `with_units`, and a note."""
    shown = with_units(frame)._repr_html_() or ""
    return f'{shown}<p class="recfn-summary-note"><small>{html.escape(NOTE)}</small></p>'


def _html(frame: Any) -> Any:
    return summary_html(frame) if is_summary(frame) else frame._repr_html_()


def _text(frame: Any, printer: Any, cycle: bool) -> None:
    printer.text(repr(with_units(frame)) if is_summary(frame) else repr(frame))


def register(shell: Any) -> None:
    """Show summaries with units in ``shell`` (its HTML and plain-text formatters)."""
    import pandas as pd

    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters:
        return
    formatters["text/html"].for_type(pd.DataFrame, _html)
    formatters["text/plain"].for_type(pd.DataFrame, _text)


def unregister(shell: Any) -> None:
    """Take `register`'s formatters away again (pandas shows every frame)."""
    import pandas as pd

    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters:
        return
    for kind, mine in (("text/html", _html), ("text/plain", _text)):
        if formatters[kind].lookup_by_type(pd.DataFrame) is mine:
            formatters[kind].pop(pd.DataFrame)
