"""Traces of many files: a folder (a dataset written by ``profile(output=...)``, or any folder
of trace files), a glob pattern, or a list of paths, resolved to files and read as one table.

Tables of different processes are concatenated as they are: ids are unique per process
(``recfn.formats.schema.PROCESS_KEYS``), so nothing is renumbered.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from recfn.errors import RecfnValueError, TraceFormatError, TraceNotFoundError
from recfn.formats import io
from recfn.formats.files import check_regular, path_name

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

TRACE_SUFFIXES = (".parquet", ".pq", ".json", ".json.gz")


def is_many(source: Any) -> bool:
    """Whether ``source`` names several files: a list/tuple, a folder or a glob pattern."""
    if isinstance(source, (list, tuple)):
        return True
    try:
        name = path_name(source)
    except TypeError:
        return False
    return os.path.isdir(name) or (not os.path.exists(name) and glob.has_magic(name))


def resolve(source: Any) -> list[str]:
    """The trace files ``source`` names, sorted: every trace file under a folder (recursively),
    the matches of a glob pattern, or each path of a list (folders and patterns expanded).

    FileNotFoundError when a path is missing or a folder or pattern holds no trace file;
    TraceFormatError for a FIFO, device or socket (refused before it could block); TypeError for
    anything that is not a path.
    """
    items: Sequence[Any] = source if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise RecfnValueError("no trace files given")
    files: list[str] = []
    for item in items:
        name = path_name(item)
        if os.path.isdir(name):
            found = [
                os.path.join(root, f)
                for root, _, names in os.walk(name)
                for f in names
                if f.lower().endswith(TRACE_SUFFIXES) and not f.startswith(".")
            ]
            if not found:
                raise TraceNotFoundError(f"no trace files (.parquet, .json, .json.gz) in {name!r}")
            for path in found:
                check_regular(path)
            files += sorted(found)
        elif os.path.exists(name):
            check_regular(name)
            files.append(name)
        elif glob.has_magic(name):
            found = sorted(p for p in glob.glob(name, recursive=True) if os.path.isfile(p))
            if not found:
                raise TraceNotFoundError(f"no files match {name!r}")
            files += found
        else:
            raise TraceNotFoundError(f"no such file: {name!r}")
    return files


def resolve_dataset(source: Any, footers: Footers) -> list[str]:
    """``resolve(source)``, each folder's files cut to its dataset's parts (``select_members``)
    and checked for more than one run (``warn_of_runs``). ``footers``: where the footers read
    are kept."""
    items: Sequence[Any] = source if isinstance(source, (list, tuple)) else [source]
    files: list[str] = []
    for item in items:
        found = resolve(item)
        name = path_name(item)
        if os.path.isdir(name):
            found = select_members(name, found, footers)
            warn_of_runs(name, found, footers)
        files += found
    if not items:
        raise RecfnValueError("no trace files given")
    return files


def read(files: Sequence[str]) -> pa.Table:
    """The files' events as one table (optional columns unioned), with their metadata combined
    (``combine_metadata``). TraceFormatError names a file that is not a trace."""
    import pyarrow as pa

    from recfn.formats.progress import progress
    from recfn.formats.schema import metadata_of

    tables = [read_one(name) for name in progress(files, desc="recfn: reading traces")]
    refuse_repeated_ids(tables, files)
    metadata = combine_metadata([metadata_of(t) for t in tables])
    joined = pa.concat_tables(
        [t.replace_schema_metadata(None) for t in tables], promote_options="default"
    ).unify_dictionaries()
    return _without_padding(joined.combine_chunks(), tables).replace_schema_metadata(metadata)


def _without_padding(table: pa.Table, tables: Sequence[pa.Table]) -> pa.Table:
    """``table`` without the optional columns that every part of a streamed capture carries
    (so that other readers see one schema) but that no row uses and no option asked for: as
    a capture in memory has them."""
    from recfn.formats.schema import PART_KEY, metadata_of

    if not tables or not all(PART_KEY.encode() in (t.schema.metadata or {}) for t in tables):
        return table
    asked = set().union(*(asked_columns(metadata_of(t)) for t in tables))
    unused = [
        name
        for name in padded_columns()
        if name in table.column_names
        and name not in asked
        and table.column(name).null_count == table.num_rows
    ]
    return table.drop_columns(unused) if unused else table


def padded_columns() -> tuple[str, ...]:
    """The optional columns a part may hold only because every part holds every column."""
    from recfn.formats.schema import OPTIONAL

    return tuple(name for name in OPTIONAL if name not in ("host", "rank"))


def asked_columns(metadata: dict[str, str]) -> set[str]:
    """The optional columns that a capture's options (``recfn.config``) ask for, used or not
    (``recfn.capture._table.build_table`` adds them)."""
    from recfn.formats.schema import CONFIG_KEY, json_object

    config = json_object(metadata.get(CONFIG_KEY)) or {}
    asked: set[str] = set()
    for option, columns in (
        ("report_input_shapes", ("input_shapes", "input_dtypes")),
        ("with_stack", ("stack",)),
        ("profile_memory", ("memory_bytes", "device")),
        ("with_flops", ("flops",)),
    ):
        if config.get(option) is True:
            asked.update(columns)
    return asked


def process_label(table: pa.Table, row: int = 0) -> str:
    """``"host=h, pid=1"``: the process of a table's row (the keys it has)."""
    from recfn.formats.schema import PROCESS_KEYS

    keys = [key for key in PROCESS_KEYS if key in table.column_names]
    return ", ".join(f"{key}={table.column(key)[row].as_py()}" for key in keys)


def refuse_repeated_ids(tables: Sequence[pa.Table], files: Sequence[str]) -> None:
    """``TraceFormatError`` when files hold the same id of one process (ids are unique per
    process): a copied part, a trace saved inside its dataset folder, or two captures of one
    process that recorded the same events. Each file was checked alone when it was read."""
    import numpy as np

    from recfn.formats.schema import process_rows

    ids: dict[str, list[tuple[int, Any]]] = {}
    for index, table in enumerate(tables):
        if not table.num_rows:
            continue
        found = process_rows(table)
        if found is None:
            ids.setdefault(process_label(table), []).append((index, table.column("id")))
        else:
            for label, rows in found:
                ids.setdefault(label, []).append((index, table.column("id").take(rows)))
    for label, pieces in ids.items():
        if len(pieces) < 2:
            continue
        values = np.concatenate([np.asarray(column.to_numpy()) for _, column in pieces])
        repeated = repeated_id(values)
        if repeated is None:
            continue
        holders = [files[i] for i, column in pieces if repeated in column.to_numpy()]
        raise TraceFormatError(repeated_ids_message(label, repeated, holders))


def repeated_id(ids: Any) -> Optional[int]:
    """An id that ``ids`` (a numpy array) holds twice, else None (linear when they count up)."""
    import numpy as np

    if len(ids) < 2 or bool((ids[1:] > ids[:-1]).all()):
        return None
    ordered = np.sort(ids)
    twice = np.flatnonzero(ordered[1:] == ordered[:-1])
    return int(ordered[twice[0]]) if len(twice) else None


def repeated_ids_message(label: str, repeated: int, holders: Sequence[str]) -> str:
    """The error for ids of one process found in more than one place (``holders``)."""
    where = " and ".join(repr(h) for h in dict.fromkeys(holders)) or "its files"
    return (
        f"ids repeat across the files of one process ({label}): id {repeated} is in {where}; "
        "a copied part, a trace saved inside its dataset folder, or two captures of one process "
        "that recorded the same events: remove the copy, or load them apart"
    )


def read_one(name: str) -> pa.Table:
    """One trace file as a schema table (Parquet or Chrome JSON, told apart by content)."""
    return io.read_parquet(name) if io.sniff(name) == io.PARQUET else io.read_chrome(name)


def combine_metadata(facts: Sequence[dict[str, str]]) -> dict[str, str]:
    """Several files' metadata as one trace's: the first file's, with the dropped events summed,
    the longest wall time and the errors that ended captures (a dataset's parts carry them in
    their last part only), without what describes one file (its content hash, checked when the
    file is read, and a part's ``recfn.stream``)."""
    from recfn.formats.schema import (
        CONTENT_HASH_KEY,
        DROPPED_EVENTS_KEY,
        ERROR_KEY,
        STREAM_KEY,
        WALL_NS_KEY,
    )

    combined = dict(facts[0]) if facts else {}
    combined.pop(CONTENT_HASH_KEY, None)
    combined.pop(STREAM_KEY, None)  # it describes one part
    errors = list(dict.fromkeys(f[ERROR_KEY] for f in facts if f.get(ERROR_KEY)))
    combined.pop(ERROR_KEY, None)
    if errors:  # a dataset's last part carries how its capture ended
        combined[ERROR_KEY] = "; ".join(errors)
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


@dataclasses.dataclass(frozen=True)
class Unfinished:
    """A capture of a dataset that never stopped (killed, or still running), and what is known
    of what it lost: everything it recorded after ``last_written_ns`` (its parts were written
    at least every ``flush_interval_s`` seconds, when known), plus the rows of parts that it
    wrote but that are gone (``missing_events``)."""

    folder: str
    label: str  # "host=..., pid=..."
    started_ns: Optional[int]
    last_written_ns: Optional[int]  # None: nothing written after it started
    events: int  # rows in its parts on disk
    missing_events: int  # rows its parts say were written, not found in them
    flush_interval_s: Optional[float]

    def describe(self) -> str:
        """One line for a summary header."""
        if self.last_written_ns is None or not self.events:
            lost = "everything it recorded is lost: it wrote no event before it ended"
        else:
            seconds = (self.last_written_ns - (self.started_ns or self.last_written_ns)) / 1e9
            lost = (
                f"{self.events:,} events written until {seconds:.1f} s after it started; what "
                "it recorded after its last part is lost"
            )
            if self.flush_interval_s is not None:
                lost += f" (parts were written every {self.flush_interval_s:g} s)"
        if self.missing_events:
            lost += f"; {self.missing_events:,} events of parts it wrote are missing"
        return f"{self.folder}: this process never stopped its profile (killed?): {lost}"


def unfinished(files: Sequence[str], footers: Optional[Footers] = None) -> list[str]:
    """The process folders among ``files`` (``profile(output=...)``'s ``process=<pid>``) whose
    capture never stopped: killed, or still running. None of their parts is the last one, the
    one that carries the capture's wall time. What they lost is the events recorded after their
    last part was written (``unfinished_captures`` says what is known of it; the parts' dropped
    counts hold what else was dropped); every event before it is in the parts. ``footers``
    are those already read, if any."""
    return sorted({capture.folder for capture in unfinished_captures(files, footers)})


def unfinished_captures(
    files: Sequence[str], footers: Optional[Footers] = None
) -> list[Unfinished]:
    """Each capture among ``files`` that never stopped (see ``unfinished``), with what is known
    of its loss (``Unfinished``); a folder may hold several captures (one after another, or at
    once), told apart by their ``recfn.stream`` id or their start."""
    from recfn.formats.schema import PART_KEY, WALL_NS_KEY

    footers = Footers() if footers is None else footers
    captures: dict[tuple[str, str], dict[str, Any]] = {}
    for name in files:
        parquet = name.lower().endswith((".parquet", ".pq"))
        if not parquet or not in_process_folder(name):
            continue
        metadata = footers.schema(name).metadata or {}
        if PART_KEY.encode() not in metadata:  # not a part that profile(output=...) wrote
            continue
        stream = _stream_facts(metadata)
        key = (os.path.dirname(name), str(stream.get("capture", _start(metadata))))
        found = captures.setdefault(
            key,
            {
                "stopped": False,
                "events": 0,
                "said": 0,
                "first_rows": 0,
                "written": None,
                "interval": None,
            },
        )
        found["stopped"] = found["stopped"] or WALL_NS_KEY.encode() in metadata
        rows = int(footers(name).num_rows)
        first = stream.get("first") is True  # its start mark: no event it recorded yet
        found["events"] += 0 if first else rows
        found["first_rows"] += rows if first else 0
        found["said"] = max(found["said"], _int(stream.get("events")))  # rows, first's too
        written = stream.get("written_ns")
        if isinstance(written, int) and rows and not first:
            found["written"] = max(found["written"] or written, written)
        if isinstance(stream.get("flush_interval_s"), (int, float)):
            found["interval"] = float(stream["flush_interval_s"])
        found.setdefault("started", _start(metadata))
        found.setdefault("label", _label_of(metadata))
    return [
        Unfinished(
            folder=folder,
            label=found["label"],
            started_ns=found["started"],
            last_written_ns=found["written"],
            events=found["events"],
            missing_events=max(found["said"] - found["events"] - found["first_rows"], 0),
            flush_interval_s=found["interval"],
        )
        for (folder, _), found in sorted(captures.items())
        if not found["stopped"]
    ]


def _stream_facts(metadata: dict[bytes, bytes]) -> dict[str, Any]:
    """A part's ``recfn.stream`` facts ({} when absent or unreadable)."""
    from recfn.formats.schema import STREAM_KEY, json_object

    return json_object(metadata.get(STREAM_KEY.encode())) or {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _start(metadata: dict[bytes, bytes]) -> Optional[int]:
    from recfn.formats.schema import START_NS_KEY

    raw = metadata.get(START_NS_KEY.encode(), b"")
    return int(raw) if raw.isdigit() else None


def _label_of(metadata: dict[bytes, bytes]) -> str:
    from recfn.formats.schema import HOST_KEY, PID_KEY

    host = metadata.get(HOST_KEY.encode(), b"?").decode(errors="replace")
    return f"host={host}, pid={metadata.get(PID_KEY.encode(), b'?').decode(errors='replace')}"


def select_members(folder: str, files: Sequence[str], footers: Footers) -> list[str]:
    """The files of ``folder`` (resolved) that belong to its dataset. A folder with process
    folders (``profile(output=...)``'s dataset) holds its events in them: a file outside them
    (a trace saved inside the dataset, which would count its events twice) and a file in them
    that recfn did not write (a copy without recfn's metadata) are left out, with a warning
    naming them. Other folders keep every trace file."""
    from recfn.formats.schema import SCHEMA_VERSION_KEY

    if not any(in_process_folder(name) for name in files):
        return list(files)
    kept, skipped = [], []
    for name in files:
        if not in_process_folder(name):
            skipped.append((name, "outside the process folders"))
        elif not name.lower().endswith((".parquet", ".pq")):
            skipped.append((name, "not a Parquet part"))
        elif SCHEMA_VERSION_KEY.encode() not in (footers.schema(name).metadata or {}):
            skipped.append((name, "not written by recfn"))
        else:
            kept.append(name)
    if skipped:
        shown = ", ".join(f"{os.path.relpath(n, folder)} ({why})" for n, why in skipped[:5])
        more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        warnings.warn(
            f"recfn: {folder!r} is a dataset of process folders; left out {len(skipped)} "
            f"file(s) that are not its parts: {shown}{more}",
            RuntimeWarning,
            stacklevel=5,
        )
    empty = _empty_process_folders(folder, files)
    if empty:
        shown = ", ".join(os.path.relpath(f, folder) for f in empty[:5])
        more = f" and {len(empty) - 5} more" if len(empty) > 5 else ""
        warnings.warn(
            f"recfn: {len(empty)} process folder(s) in {folder!r} hold no part: their processes "
            "were killed as they started recording, and what they recorded is lost: "
            f"{shown}{more}",
            RuntimeWarning,
            stacklevel=5,
        )
    if not kept:
        raise TraceNotFoundError(f"no parts of a dataset in {folder!r}")
    return kept


def _empty_process_folders(folder: str, files: Sequence[str]) -> list[str]:
    """The process folders under ``folder`` that hold none of ``files``."""
    holding = {os.path.dirname(name) for name in files}
    return sorted(
        os.path.join(root, name)
        for root, names, _ in os.walk(folder)
        for name in names
        if name.startswith(PROCESS_FOLDER) and os.path.join(root, name) not in holding
    )


RUN_ENV = "RECFN_RUN"
"""The environment variable that names the run a process belongs to: set by a profile that
follows its child processes (``recfn run -o DIR/``, ``%%record_function --save DIR/``) while it
records, and so inherited by every process it starts; each part records it (``recfn.stream``)."""


def runs(files: Sequence[str], footers: Footers) -> dict[str, list[str]]:
    """The parts among ``files`` by the run that wrote them (``RUN_ENV``); parts of captures
    that knew no run (a plain ``profile(output=...)``) are in none."""
    found: dict[str, list[str]] = {}
    for name in files:
        if not name.lower().endswith((".parquet", ".pq")):
            continue
        run = _stream_facts(footers.schema(name).metadata or {}).get("run")
        if isinstance(run, str) and run:
            found.setdefault(run, []).append(name)
    return found


def warn_of_runs(folder: str, files: Sequence[str], footers: Footers) -> None:
    """Warn when ``folder`` holds more than one run (``runs``: a second ``recfn run -o`` into
    the same folder): their events would be summed as if they were one."""
    found = runs(files, footers)
    if len(found) < 2:
        return
    warnings.warn(
        f"recfn: {folder!r} holds {len(found)} runs (a second `recfn run -o` or `--save` into "
        "the same folder); they are read together as one trace: write each run into a folder "
        "of its own, or load one run's process folders",
        RuntimeWarning,
        stacklevel=5,
    )


__all__ = [
    "PROCESS_FOLDER",
    "RUN_ENV",
    "TRACE_SUFFIXES",
    "Footers",
    "Unfinished",
    "asked_columns",
    "combine_metadata",
    "in_process_folder",
    "is_many",
    "padded_columns",
    "process_label",
    "read",
    "read_footer",
    "read_one",
    "refuse_repeated_ids",
    "repeated_id",
    "repeated_ids_message",
    "resolve",
    "resolve_dataset",
    "runs",
    "select_members",
    "unfinished",
    "unfinished_captures",
    "warn_of_runs",
]
