"""Traces of many files: a folder (a dataset written by ``profile(output=...)``, or any folder
of trace files), a glob pattern, or a list of paths, resolved to files and read as one table.

Tables of different processes are concatenated as they are: ids are unique per process
(``recfn.formats.schema.PROCESS_KEYS``), so nothing is renumbered.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from recfn.errors import RecfnValueError, TraceNotFoundError
from recfn.formats import io

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

TRACE_SUFFIXES = (".parquet", ".pq", ".json", ".json.gz")


def is_many(source: Any) -> bool:
    """Whether ``source`` names several files: a list/tuple, a folder or a glob pattern."""
    if isinstance(source, (list, tuple)):
        return True
    try:
        name = io.path_name(source)
    except TypeError:
        return False
    return os.path.isdir(name) or (not os.path.exists(name) and glob.has_magic(name))


def resolve(source: Any) -> list[str]:
    """The trace files ``source`` names, sorted: every trace file under a folder (recursively),
    the matches of a glob pattern, or each path of a list (folders and patterns expanded).

    FileNotFoundError when a path is missing or a folder or pattern holds no trace file;
    TypeError for anything that is not a path.
    """
    items: Sequence[Any] = source if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise RecfnValueError("no trace files given")
    files: list[str] = []
    for item in items:
        name = io.path_name(item)
        if os.path.isdir(name):
            found = [
                os.path.join(root, f)
                for root, _, names in os.walk(name)
                for f in names
                if f.lower().endswith(TRACE_SUFFIXES) and not f.startswith(".")
            ]
            if not found:
                raise TraceNotFoundError(f"no trace files (.parquet, .json, .json.gz) in {name!r}")
            files += sorted(found)
        elif os.path.exists(name):
            files.append(name)
        elif glob.has_magic(name):
            found = sorted(p for p in glob.glob(name, recursive=True) if os.path.isfile(p))
            if not found:
                raise TraceNotFoundError(f"no files match {name!r}")
            files += found
        else:
            raise TraceNotFoundError(f"no such file: {name!r}")
    return files


def read(files: Sequence[str]) -> pa.Table:
    """The files' events as one table (optional columns unioned), with their metadata combined
    (``combine_metadata``). TraceFormatError names a file that is not a trace."""
    import pyarrow as pa

    from recfn.formats.progress import progress
    from recfn.formats.schema import metadata_of

    tables = [read_one(name) for name in progress(files, desc="recfn: reading traces")]
    metadata = combine_metadata([metadata_of(t) for t in tables])
    joined = pa.concat_tables(
        [t.replace_schema_metadata(None) for t in tables], promote_options="default"
    ).unify_dictionaries()
    return joined.combine_chunks().replace_schema_metadata(metadata)


def read_one(name: str) -> pa.Table:
    """One trace file as a schema table (Parquet or Chrome JSON, told apart by content)."""
    return io.read_parquet(name) if io.sniff(name) == io.PARQUET else io.read_chrome(name)


def combine_metadata(facts: Sequence[dict[str, str]]) -> dict[str, str]:
    """Several files' metadata as one trace's: the first file's, with the dropped events summed
    and the longest wall time (a dataset's parts carry it in their last part only), without a
    file's content hash (it describes that file, and is checked when the file is read)."""
    from recfn.formats.schema import CONTENT_HASH_KEY, DROPPED_EVENTS_KEY, WALL_NS_KEY

    combined = dict(facts[0]) if facts else {}
    combined.pop(CONTENT_HASH_KEY, None)
    combined[DROPPED_EVENTS_KEY] = str(sum(_count(f.get(DROPPED_EVENTS_KEY)) for f in facts))
    walls = [_count(f.get(WALL_NS_KEY)) for f in facts if WALL_NS_KEY in f]
    combined.pop(WALL_NS_KEY, None)
    if walls:
        combined[WALL_NS_KEY] = str(max(walls))
    return combined


def _count(raw: Optional[str]) -> int:
    """A stored count, 0 when missing or not a non-negative integer."""
    return int(raw) if raw is not None and raw.isdigit() else 0


PROCESS_FOLDER = "process="
"""Folders named so hold the parts of one process (``recfn.capture._stream.process_folder``)."""


def in_process_folder(name: str) -> bool:
    """Whether the file ``name`` lies in a process folder of a dataset."""
    return os.path.basename(os.path.dirname(name)).startswith(PROCESS_FOLDER)


def read_footer(name: str) -> pq.FileMetaData:
    """A Parquet file's footer (schema, metadata, row groups): where recfn reads footers
    without the file's data, for ``Footers`` to keep."""
    import pyarrow.parquet as pq

    try:
        return pq.read_metadata(name)
    except MemoryError:
        raise
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise  # the file is not to blame
    except io.DECODE_ERRORS as exc:
        raise io.unreadable_parquet(name, exc) from None


class Footers:
    """The footers of a trace's Parquet files, each read on first use and then kept: a command
    that checks a dataset's schemas, looks for unfinished captures and shows its metadata reads
    every footer once. ``footers(name)`` is the footer, ``footers.schema(name)`` the Arrow
    schema with its metadata (as ``pq.read_schema`` gives it); a footer that cannot be decoded
    raises ``TraceFormatError`` naming the file."""

    def __init__(self) -> None:
        self._kept: dict[str, pq.FileMetaData] = {}

    def __call__(self, name: str) -> pq.FileMetaData:
        found = self._kept.get(name)
        if found is None:
            found = self._kept[name] = read_footer(name)
        return found

    def schema(self, name: str) -> pa.Schema:
        return self(name).schema.to_arrow_schema()


def unfinished(files: Sequence[str], footers: Optional[Footers] = None) -> list[str]:
    """The process folders among ``files`` (``profile(output=...)``'s ``process=<pid>``) whose
    capture never stopped: killed, or still running. None of their parts is the last one, the
    one that carries the capture's wall time. What they lost is exactly the events recorded
    after their last part was written (the parts' dropped counts hold what else was dropped);
    every event before it is in the parts. ``footers`` are those already read, if any."""
    from recfn.formats.schema import PART_KEY, WALL_NS_KEY

    footers = Footers() if footers is None else footers
    stopped: dict[str, bool] = {}
    for name in files:
        folder = os.path.dirname(name)
        parquet = name.lower().endswith((".parquet", ".pq"))
        if not parquet or not in_process_folder(name):
            continue
        metadata = footers.schema(name).metadata or {}
        if PART_KEY.encode() in metadata:  # a part that profile(output=...) wrote
            stopped[folder] = stopped.get(folder, False) or WALL_NS_KEY.encode() in metadata
    return sorted(folder for folder, done in stopped.items() if not done)


__all__ = [
    "PROCESS_FOLDER",
    "TRACE_SUFFIXES",
    "Footers",
    "combine_metadata",
    "in_process_folder",
    "is_many",
    "read",
    "read_footer",
    "read_one",
    "resolve",
    "unfinished",
]
