"""Writing files whole or not at all, and never over a file recfn did not write; opening trace
files for reading without blocking on a FIFO.

Every writer goes through `write_atomic`: the content goes to a temporary file beside the target,
is flushed to disk, and replaces the target in one rename, so a crash (even SIGKILL) leaves either
the old file or the new one. An existing file is replaced only when recfn wrote it (recognised by
its content) or when the caller says ``overwrite=True``.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import tempfile
import zlib
from collections.abc import Callable
from typing import BinaryIO, Final

from recfn.errors import (
    TraceExistsError,
    TraceFormatError,
    TraceIsADirectoryError,
    TraceNotFoundError,
)

CHROME_MARK: Final = b'{"schemaVersion":1,"baseTimeNanoseconds":'
"""How every Chrome JSON trace recfn writes begins (its first keys, in order)."""
PNG_MARK: Final = b"recfn"
"""Written into the PNG text chunks of recfn's images (``Software: recfn``)."""
PARQUET_MARK: Final = b"recfn.schema_version"
"""Key of the schema metadata in every recfn Parquet footer."""
_FOOTER_BYTES: Final = 1 << 20


def written_by_recfn(path: str) -> bool:
    """True when the file at ``path`` is one recfn wrote: a trace (Parquet or Chrome JSON) or
    an image, recognised by content, never by name."""
    try:
        with open_trace_file(path) as fh:  # a FIFO is not recfn's, and must not block
            head = fh.read(4096)
            if head.startswith(b"PAR1"):
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(size - _FOOTER_BYTES, 0))
                return PARQUET_MARK in fh.read()
    except (OSError, TraceFormatError):
        return False
    if head.startswith(b"\x1f\x8b"):
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(len(CHROME_MARK))
        except (OSError, EOFError, zlib.error):
            return False
    if head.startswith(CHROME_MARK):
        return True
    return head.startswith(b"\x89PNG") and PNG_MARK in head


def _suffix(name: str) -> str:
    lower = name.lower()
    return ".json.gz" if lower.endswith(".json.gz") else os.path.splitext(name)[1]


def write_atomic(path: str, write: Callable[[str], None], *, overwrite: bool = False) -> None:
    """Call ``write(temporary_path)`` and move the result onto ``path`` in one rename.

    Refuses (``FileExistsError``) to replace a file recfn did not write unless ``overwrite``;
    ``IsADirectoryError`` for a folder. The temporary file keeps ``path``'s suffix, so writers
    that look at it (``.gz``) behave the same, and is removed if ``write`` fails.
    """
    target = os.path.abspath(path)
    if os.path.isdir(target):
        raise TraceIsADirectoryError(f"{path!r} is a folder, not a file recfn can write")
    if os.path.lexists(target) and not overwrite and not written_by_recfn(target):
        raise TraceExistsError(
            f"refusing to overwrite {path!r}: recfn did not write it (it is not a recfn trace or "
            "image); choose another name, or pass overwrite=True (--force on the command line)"
        )
    folder, base = os.path.split(target)
    remove_abandoned(folder)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{base}.", suffix=".part" + _suffix(base))
    try:
        _lock(fd)  # held while it is written: a file no one holds was abandoned
        write(temporary)
        with open(temporary, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    finally:
        os.close(fd)
    _sync_folder(folder)


_TEMPORARY: Final = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.part(\.[A-Za-z0-9.]+)?$")
"""The names ``write_atomic`` gives its temporary files (``.<name>.<8 random>.part<suffix>``)."""


def _lock(fd: int) -> None:
    """Hold an exclusive lock on the temporary file ``fd`` until it is closed (POSIX)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: nothing is ever taken for abandoned
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


def remove_abandoned(folder: str) -> list[str]:
    """Remove the temporary files of writes in ``folder`` that were killed before they ended
    (SIGKILL, a crash): ``write_atomic``'s, that no process holds locked. Returns their names.
    Best effort: a file that cannot be examined or removed stays."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return []
    try:
        names = [n for n in os.listdir(folder or ".") if _TEMPORARY.match(n)]
    except OSError:
        return []
    removed = []
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # OSError: a write holds it
            os.unlink(path)
            removed.append(path)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def _sync_folder(folder: str) -> None:
    """Persist the rename itself (best effort: not every platform can open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def open_trace_file(path: str) -> BinaryIO:
    """Open `path` for reading if it is a regular file, without ever blocking on a FIFO.

    FileNotFoundError for a missing path, IsADirectoryError for a folder (both OSErrors: there
    is no file), TraceFormatError for a FIFO, device or socket (something that is not a file).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise TraceNotFoundError(f"no such file: {path!r}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise TraceIsADirectoryError(f"{path!r} is a folder, not a trace file")
        if not stat.S_ISREG(mode):
            raise TraceFormatError(f"{path!r} is {_file_kind(mode)}, not a regular trace file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"
