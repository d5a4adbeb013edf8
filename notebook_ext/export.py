"""The trace as a file to hand over: gzipped Chrome/Perfetto JSON and a file name for it (the
HTML stand-in's download link and the widget's Download and Perfetto buttons)."""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recfn.formats.trace import Trace


def chrome_gz(trace: Trace) -> bytes:
    """The trace as gzipped Chrome/Perfetto JSON, as ``recfn convert t.parquet t.json.gz``."""
    with tempfile.TemporaryDirectory(prefix="recfn-") as folder:
        path = os.path.join(folder, "trace.json.gz")
        trace.save(path)
        with open(path, "rb") as written:
            return written.read()


def file_stem(name: str) -> str:
    """``name`` as a safe file name stem (``cell[3]`` -> ``cell_3``)."""
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name).strip("._")
    return stem or "trace"
