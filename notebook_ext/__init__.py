"""The IPython extension (``%load_ext recfn``) and the ``recfn`` command line.

Importing this package is cheap: IPython, pandas and matplotlib load only when the extension is
loaded or a command runs.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

# Import the submodule first: importing ``notebook_ext.session`` later would otherwise replace
# the ``session()`` function below with the module of the same name (it only loads trace.py).
from recfn.notebook_ext.sessions import Session, current_session

__all__ = ["Session", "load_ipython_extension", "session", "unload_ipython_extension"]


FIRST_CELL_MODULES: Final = (
    "pyarrow.parquet",
    "pyarrow.dataset",
    "pyarrow.acero",
    "pandas.io.formats.html",
    "pandas.io.formats.string",
    "msgspec.json",
    "PIL.ImageDraw",
    "PIL.ImageFile",
    "isal.igzip",  # the stand-in's embedded trace (where isal is installed)
    "recfn.capture._table",
    "recfn.formats.chrome",
    "recfn.formats.dataset",
    "recfn.analysis.outofcore.files",
    "recfn.analysis.stats.runs",
    "recfn.analysis.plots.picture",
    "recfn.notebook_ext.display",
    "recfn.notebook_ext.fallback",
    "recfn.notebook_ext.compare_view",
    "recfn.notebook_ext.widget.lod",
    "recfn.notebook_ext.widget.table",
)
"""What the magic's first cell would otherwise import when its capture ends (the table, the
summary, the picture, the stand-in, the widget's index): about half a second, which loading
the extension takes instead, so that the first look waits no longer than later ones."""


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%record_function`` / ``%record_function`` (and the ``df.recfn`` accessor),
    import what the first capture's display needs (`FIRST_CELL_MODULES`, the picture's fonts)
    and measure what recording costs in this process (``capture.recording_costs``, 80-120 ms
    that the first cell waited for otherwise)."""
    from recfn.notebook_ext.magics import register

    register(ipython)
    _import_early()


def _import_early() -> None:
    """`FIRST_CELL_MODULES` and the picture's fonts, each skipped where it cannot load (say,
    an Arrow built without datasets, a Pillow without FreeType): the display reports what it
    misses when a cell needs it, and loading the extension never fails for it."""
    for name in FIRST_CELL_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    try:
        importlib.import_module("recfn.analysis.plots.picture").prepare()
    except (ImportError, OSError):
        pass
    # No costs while a profiler already runs here: the first capture measures them then.
    importlib.import_module("recfn.notebook_ext.capture").recording_costs()


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics again (the session and its traces are kept)."""
    from recfn.notebook_ext.magics import unregister

    unregister(ipython)


def session() -> Session:
    """The process-wide session: every trace the magics captured, by cell (``recfn.session()``)."""
    return current_session()
