"""Analysis of recfn event tables: the ``df.recfn`` pandas accessor and Chrome trace I/O.

Importing this package registers the accessor, so every DataFrame in the recfn event-table
schema (docs/schema.md) gains ``df.recfn.summary()``, ``.to_string()``, ``.timeline()``,
``.flame()``, ``.diff()``, ``.tree()``, ``.window()``, ``.filter()`` and more. Frames that
break the schema are refused with `MalformedFrameError`; plots with nothing to draw raise
`NothingToDrawError`. The package works on DataFrames alone and does not import the
capture core.
"""

import pandas as pd

from .accessor import RecfnAccessor
from .chrome import read_chrome_trace, write_chrome_trace
from .errors import MalformedFrameError, NothingToDrawError
from .schema import MissingColumnsError
from .synthetic import make_synthetic_trace

pd.api.extensions.register_dataframe_accessor("recfn")(RecfnAccessor)

__all__ = [
    "MalformedFrameError",
    "MissingColumnsError",
    "NothingToDrawError",
    "RecfnAccessor",
    "make_synthetic_trace",
    "read_chrome_trace",
    "write_chrome_trace",
]
