"""Hooks that the package facade fills in, so that the core never imports the layers above it.

The core's trace object asks these for its rich reprs, and every core function that returns a
DataFrame calls ``pandas_returned`` first (the facade registers the ``df.recfn`` accessor there).
Left unset (the core used alone), reprs fall back to a plain header line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

header_renderer: Optional[Callable[[Any], str]] = None
"""``trace -> str``: the one-line header of a trace."""
text_renderer: Optional[Callable[[Any], str]] = None
"""``trace -> str``: a trace as text for terminals (header and summary)."""
html_renderer: Optional[Callable[[Any], str]] = None
"""``trace -> str``: a trace as HTML for notebooks."""
files_summary: Optional[Callable[..., Any]] = None
"""``(files, footers, **summary options) -> DataFrame``: the summary of a trace of files, out of
core (``footers``: the trace's ``recfn.formats.dataset.Footers``)."""
table_summary: Optional[Callable[..., Any]] = None
"""``(table, **summary options) -> DataFrame or None``: the summary of a trace in memory in one
pass, or None where only the pandas summary computes it."""
comparison_html_renderer: Optional[Callable[[Any], str]] = None
"""``comparison -> str``: a ``recfn.analysis.stats.compare.Comparison`` as HTML for notebooks
(its table with change bars, and the differential flame view)."""
compare: Optional[Callable[..., Any]] = None
"""``(baseline, candidate, **options) -> Comparison``: ``recfn.compare``, for ``Trace.compare``."""
on_pandas: Optional[Callable[[], None]] = None
"""Called before a DataFrame is handed to the user."""


def pandas_returned() -> None:
    """Run the ``on_pandas`` hook, if any."""
    if on_pandas is not None:
        on_pandas()
