"""The IPython extension (``%load_ext recfn``) and the ``recfn`` command line.

Importing this package is cheap: IPython, pandas and matplotlib load only when the extension is
loaded or a command runs.
"""

from __future__ import annotations

from typing import Any

# Import the submodule first: importing ``notebook_ext.session`` later would otherwise replace
# the ``session()`` function below with the module of the same name (it only loads trace.py).
from recfn.notebook_ext.sessions import Session, current_session

__all__ = ["Session", "load_ipython_extension", "session", "unload_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%record_function`` / ``%record_function`` (and the ``df.recfn`` accessor)."""
    from recfn.notebook_ext.magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics again (the session and its traces are kept)."""
    from recfn.notebook_ext.magics import unregister

    unregister(ipython)


def session() -> Session:
    """The process-wide session: every trace the magics captured, by cell (``recfn.session()``)."""
    return current_session()
