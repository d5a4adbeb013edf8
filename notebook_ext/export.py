"""The trace as a file to hand over: gzipped Chrome/Perfetto JSON and a file name for it (the
HTML stand-in's download link and the widget's Download and Perfetto buttons)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from recfn.formats.trace import Trace


@contextmanager
def no_progress_bars() -> Iterator[None]:
    """Within it, recfn's work shows no progress bar: in a kernel a bar is a widget in the cell's
    output, which the notebook keeps (a frozen bar with a temporary file's name, "model not
    found" after a reload). What the magic and the view do while a cell's output is written is
    short, and the view says so itself. (``RECFN_PROGRESS=0``, which recfn reads as a bar
    starts, set for the block: the bars of other threads meanwhile are left out too.)"""
    before = os.environ.get("RECFN_PROGRESS")
    os.environ["RECFN_PROGRESS"] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RECFN_PROGRESS", None)
        else:
            os.environ["RECFN_PROGRESS"] = before


def chrome_gz(trace: Trace, compresslevel: Optional[int] = None) -> bytes:
    """The trace as gzipped Chrome/Perfetto JSON, the bytes ``recfn convert t.parquet
    t.json.gz`` writes, made in memory (no progress bar: `no_progress_bars`); `compresslevel`
    is gzip's, the writer's own by default (the stand-in starts with the fastest, `denser`
    when that does not fit). For traces whose file fits a cell's output: what makes a user's
    file safe (a validated table, an atomic rename, an fsync) and the writer's thread only
    cost time here."""
    from recfn.formats.chrome import GZIP_LEVEL, chrome_gz_bytes

    level = GZIP_LEVEL if compresslevel is None else compresslevel
    with no_progress_bars():
        return chrome_gz_bytes(trace.table_as_saved(), compresslevel=level)


def denser(gz: bytes) -> bytes:
    """gzip bytes compressed again at the Chrome writer's own level (`GZIP_LEVEL`), for bytes
    written at a faster one: about a fifth smaller."""
    import gzip

    from recfn.formats.chrome import GZIP_LEVEL

    return gzip.compress(gzip.decompress(gz), compresslevel=GZIP_LEVEL, mtime=0)


def file_stem(name: str) -> str:
    """``name`` as a safe file name stem (``cell[3]`` -> ``cell_3``)."""
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name).strip("._")
    return stem or "trace"
