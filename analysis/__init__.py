"""Analysis of recfn event tables: the ``df.recfn`` pandas accessor.

Every DataFrame in the recfn event-table schema (``recfn.formats.schema``, docs/schema.md) gains
``df.recfn.summary()``, ``.to_string()``, ``.timeline()``, ``.flame()``, ``.diff()``, ``.tree()``,
``.window()``, ``.filter()`` and more. ``import recfn`` registers the accessor (as soon as pandas
is imported); importing this package does too. Frames that break the schema are refused with
`MalformedFrameError`; plots with nothing to draw raise `NothingToDrawError`; `alt_text(ax)`
describes a drawn plot in one line, for an image's ``alt`` attribute. Chrome trace I/O
lives in the core (``recfn.formats.chrome``) and is re-exported here, imported when first used.
matplotlib is imported when something is drawn (or ``alt_text`` is first used), not with this
package: ``recfn summary`` never draws.
"""

from typing import Any

import pandas as pd

from recfn.analysis.accessor import RecfnAccessor
from recfn.analysis.synthetic import make_synthetic_trace
from recfn.errors import MalformedFrameError, MissingColumnsError, NothingToDrawError

if not hasattr(pd.DataFrame, "recfn"):  # recfn's facade normally registered it already
    pd.api.extensions.register_dataframe_accessor("recfn")(RecfnAccessor)


def __getattr__(name: str) -> Any:
    if name == "alt_text":  # lives beside the drawing code, which imports matplotlib
        from recfn.analysis.plots.drawing import alt_text

        return alt_text
    if name in ("read_chrome_trace", "write_chrome_trace"):  # a summary needs no Chrome I/O
        from recfn.formats import chrome

        return getattr(chrome, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MalformedFrameError",
    "MissingColumnsError",
    "NothingToDrawError",
    "RecfnAccessor",
    "alt_text",
    "make_synthetic_trace",
    "read_chrome_trace",
    "write_chrome_trace",
]
